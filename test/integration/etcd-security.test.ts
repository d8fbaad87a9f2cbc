// jaco against a secured etcd, as production runs it: users and roles (src/store/rbac.ts, applied by
// `jaco etcd rbac` through deploy/etcd/rbac.sh, run for real: each controller and each agent its own
// user and password, only its own keys; real `jaco agent`, `jaco ingress` and `jaco controller NAME`
// processes under them) and TLS with client certificates. Real etcd members throughout.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEtcdMember, waitForEtcd, type EtcdMember } from '../../src/supervise/etcd.js';
import { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { jaco, JACO_BIN } from '../support/cli.js';
import { eventually } from '../support/wait.js';
import { keys } from '../../src/api/keys.js';
import type { Heartbeat, IngressStatus, Node, NodeOverlay, NodeSpec, NodeSpecRecord, NodeSubnet } from '../../src/api/types.js';
import { FAST } from '../../src/timings.js';
import { Presence } from '../../controllers/node-agent/presence.js';
import { testLogger } from '../support/log.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { startTestEtcd, type TestEtcd } from '../support/etcd.js';
import { allControllersRole, allows, applyRoles, CONTROLLER_NAMES, CONTROLLER_WRITES, controllerRole } from '../../src/store/rbac.js';
import { census, hollowManifest } from '../support/hollow.js';
import { makeTestPki, type TestPki } from '../support/tls.js';

const counter = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: 'c' }, spec: { next: 1 } };
// Subnets of 198.19/16 (the benchmarking range's second half, which no local cluster uses) and a
// ULA of their own: the overlay test below routes them in this machine's own namespace.
const subnetOf = (node: string, i: number): NodeSubnet => ({ apiVersion: 'jaco.dev/v1', kind: 'NodeSubnet', metadata: { name: node }, spec: { node, index: i, ipv4: `198.19.${i}.0/24`, ipv6: `fd6a:6163:6f00:${i}::/64`, since: new Date().toISOString() } });
const nodeOf = (name: string, overlay?: NodeOverlay): Node => ({
  apiVersion: 'jaco.dev/v1',
  kind: 'Node',
  metadata: { name },
  spec: {},
  status: { capacity: { cpuMillis: 1000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 'test', registeredAt: new Date().toISOString(), ...(overlay ? { overlay } : {}) },
});

describe('etcd with authentication and a user per process (jaco etcd rbac through deploy/etcd/rbac.sh, run for real)', () => {
  let etcd: TestEtcd;
  let creds: string;
  const PREFIX = '/jaco/';
  const envOf = (file: string) => Object.fromEntries(readFileSync(join(creds, file), 'utf8').trim().split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]));
  const asAgent = (node: string) => {
    const e = envOf(`agent-${node}.env`);
    return new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: e.JACO_ETCD_USER, password: e.JACO_ETCD_PASSWORD });
  };
  beforeAll(async () => {
    etcd = await startTestEtcd();
    creds = mkdtempSync(join(tmpdir(), 'jaco-creds-'));
    const c = etcd.store(PREFIX).client;
    await c.user('root').create('rootpw');
    await c.user('root').addRole('root');
    const run = spawnSync(join(PACKAGE_ROOT, 'deploy', 'etcd', 'rbac.sh'), ['--out', creds, PREFIX, 'n1', 'n2'], { env: { ...process.env, ETCDCTL_API: '3', ETCDCTL_ENDPOINTS: etcd.endpoint }, encoding: 'utf8' });
    expect(run.status, run.stderr).toBe(0);
    await c.auth.authEnable({});
  });
  afterAll(async () => {
    await etcd?.stop();
    if (creds) rmSync(creds, { recursive: true, force: true });
  });

  it('writes one env file per process, private, each agent with its own password', () => {
    expect(readdirSync(creds).sort()).toEqual(['agent-n1.env', 'agent-n2.env', ...CONTROLLER_NAMES.map((n) => `controller-${n}.env`).sort(), 'controller.env', 'ingress-n1.env', 'ingress-n2.env', 'viewer.env'].sort());
    for (const f of readdirSync(creds)) expect(statSync(join(creds, f)).mode & 0o077).toBe(0);
    const [a, b] = [envOf('agent-n1.env'), envOf('agent-n2.env')];
    expect([a.JACO_ETCD_USER, b.JACO_ETCD_USER]).toEqual(['jaco-agent-n1', 'jaco-agent-n2']);
    expect(a.JACO_ETCD_PASSWORD!.length).toBeGreaterThanOrEqual(24);
    expect(a.JACO_ETCD_PASSWORD).not.toBe(b.JACO_ETCD_PASSWORD);
  });

  it("one agent's password does not open another agent's user", async () => {
    const stolen = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: 'jaco-agent-n2', password: envOf('agent-n1.env').JACO_ETCD_PASSWORD });
    try {
      await expect(stolen.get('observed/n2/r1')).rejects.toThrow(/authentication failed|invalid/i);
    } finally {
      stolen.close();
    }
  });

  const asUser = (file: string) => {
    const e = envOf(file);
    return new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: e.JACO_ETCD_USER, password: e.JACO_ETCD_PASSWORD });
  };
  /** A key a grant covers (a probe under a prefix). */
  const probe = (p: string) => (p.endsWith('/') ? `${p}rbac-probe` : p);

  it.each(CONTROLLER_NAMES)("controller %s's user writes the prefixes it owns, and is refused every other", async (name) => {
    const store = asUser(`controller-${name}.env`);
    const { grants } = controllerRole(name);
    try {
      const own = [...CONTROLLER_WRITES[name]!, `leaders/${name}/`, 'audit/'].map(probe);
      for (const key of own) {
        await commitAtomic(store, [{ ops: [{ op: 'put', key, value: counter }] }]);
        await commitAtomic(store, [{ ops: [{ op: 'delete', key }] }]);
      }
      // What the CLI writes, what agents and ingresses write, and what the other controllers own.
      const others = [...new Set([...Object.values(CONTROLLER_WRITES).flat(), ...CONTROLLER_NAMES.map((n) => `leaders/${n}/`), 'deployments/', 'revisions/', 'observed/n1/', 'heartbeats/n1', 'ingresses/n1', 'registries/', 'cluster'].map(probe))].filter((k) => !allows(grants, k, 'readwrite'));
      expect(others.length).toBeGreaterThan(5);
      for (const key of others) await expect(commitAtomic(store, [{ ops: [{ op: 'put', key, value: counter }] }]), key).rejects.toThrow(/permission denied/i);
      // It reads the whole prefix: its cache is one watch over it.
      await expect(store.list('deployments/')).resolves.toBeDefined();
    } finally {
      store.close();
    }
  });

  it("`jaco controller all`'s user holds every controller's grants and nothing more", async () => {
    const store = asUser('controller.env');
    try {
      for (const key of [...new Set(Object.values(CONTROLLER_WRITES).flat())].map(probe)) {
        await commitAtomic(store, [{ ops: [{ op: 'put', key, value: counter }] }]);
        await commitAtomic(store, [{ ops: [{ op: 'delete', key }] }]);
      }
      for (const key of ['deployments/x', 'revisions/x/1', 'registries/x', 'ingresses/n1']) await expect(commitAtomic(store, [{ ops: [{ op: 'put', key, value: counter }] }]), key).rejects.toThrow(/permission denied/i);
    } finally {
      store.close();
    }
  });

  it("an agent's user reads what operators decide for its node (nodespecs/<node>) and cannot write it: it cannot uncordon itself", async () => {
    const root = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: 'root', password: 'rootpw' });
    const agent = asAgent('n1');
    try {
      await commitAtomic(root, [{ ops: [{ op: 'put', key: 'nodespecs/n1', value: counter }] }]);
      expect(await agent.get('nodespecs/n1')).toBeDefined();
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'nodespecs/n1', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(agent.get('nodespecs/n2')).rejects.toThrow(/permission denied/i);
    } finally {
      await commitAtomic(root, [{ ops: [{ op: 'delete', key: 'nodespecs/n1' }] }]);
      agent.close();
      root.close();
    }
  });

  it('run again, it keeps every password (no file written) and sets each role back to exactly its definition', async () => {
    const root = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: 'root', password: 'rootpw' });
    const again = mkdtempSync(join(tmpdir(), 'jaco-creds-again-'));
    try {
      // The role of the previous version: the controllers' one user could write the whole prefix.
      // (Set through the one role writer, src/store/rbac.ts: no etcd3 outside src/store.)
      const clock = controllerRole('clock');
      await applyRoles(root, [
        { ...allControllersRole(), grants: [{ key: '', prefix: true, access: 'readwrite' }] },
        { ...clock, grants: [...clock.grants, { key: 'deployments/x', prefix: false, access: 'readwrite' }] },
      ]);
      const run = await jaco(['--user', 'root:rootpw', 'etcd', 'rbac', '--out', again, 'n1', 'n2'], { endpoint: etcd.endpoint, prefix: PREFIX });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain('user jaco-agent-n1 kept');
      expect(readdirSync(again)).toEqual([]);
      for (const file of ['controller.env', 'controller-clock.env']) {
        const store = asUser(file);
        try {
          await expect(commitAtomic(store, [{ ops: [{ op: 'put', key: 'deployments/x', value: counter }] }]), file).rejects.toThrow(/permission denied/i);
        } finally {
          store.close();
        }
      }
    } finally {
      root.close();
      rmSync(again, { recursive: true, force: true });
    }
  });

  it('refuses an anonymous CLI with a clear error, and accepts --user or the environment', async () => {
    const anon = await jaco(['get', 'nodes'], { endpoint: etcd.endpoint });
    expect(anon.code).not.toBe(0);
    expect(anon.stderr).toMatch(/user name is empty|authentication/i);
    const flag = await jaco(['--user', 'root:rootpw', 'get', 'nodes'], { endpoint: etcd.endpoint });
    expect(flag.code, flag.stderr).toBe(0);
    const env = await jaco(['get', 'nodes'], { endpoint: etcd.endpoint, env: envOf('controller.env') });
    expect(env.code, env.stderr).toBe(0);
    const noPassword = await jaco(['--user', 'root', 'get', 'nodes'], { endpoint: etcd.endpoint });
    expect(noPassword.code).toBe(1);
    expect(noPassword.stderr).toContain('etcd user root needs a password');
  });

  it("an agent's user writes its own node's keys and is refused every other node's", async () => {
    const agent = asAgent('n1');
    try {
      await commitAtomic(agent, [{ ops: [{ op: 'put', key: 'observed/n1/r1', value: counter }] }]);
      expect(await agent.get('observed/n1/r1')).toBeDefined();
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'desired/n1/r1', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'observed/n2/r1', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'heartbeats/n2', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(agent.list('desired/n2/')).rejects.toThrow(/permission denied/i);
      await expect(agent.list('deployments/')).rejects.toThrow(/permission denied/i);
      // It reads what it pulls images with (registries' access, the image setting: the operator's), and writes neither.
      const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: 'root', password: 'rootpw' });
      await commitAtomic(controller, [{ ops: [{ op: 'put', key: 'registries/127.0.0.1:5000', value: counter }, { op: 'put', key: 'config/images', value: counter }] }]).finally(() => controller.close());
      expect((await agent.list('registries/')).items.map((i) => i.key)).toEqual(['registries/127.0.0.1:5000']);
      expect(await agent.get('config/images')).toBeDefined();
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'registries/evil.example', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'config/images', value: counter }] }])).rejects.toThrow(/permission denied/i);
    } finally {
      agent.close();
    }
  });

  it("an agent's user cannot write what operators decided about its node (nodespecs/<node>): it cannot uncordon itself, and its registration keeps the cordon", async () => {
    const ctl = envOf('controller.env');
    const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ctl.JACO_ETCD_USER, password: ctl.JACO_ETCD_PASSWORD });
    const agent = asAgent('n1');
    const decided = (spec: NodeSpec): NodeSpecRecord => ({ apiVersion: 'jaco.dev/v1', kind: 'NodeSpec', metadata: { name: 'n1' }, spec });
    const register = () =>
      new Presence({ node: 'n1', store: agent, timings: FAST, statusIntervalMs: 300, capacity: { cpuMillis: 1000, memoryBytes: 1 << 30, gpus: 0 }, labels: {}, rejoin: false, log: testLogger(), pressure: async () => undefined, dockerUp: () => true, removed: () => undefined, claimChanged: () => undefined }).register();
    try {
      // A cluster written by the previous release: the cordon inside nodes/n1, no nodespecs/n1
      // (which `jaco etcd rbac` above made: test/integration/nodespec-seed.test.ts). The agent's
      // registration carries it as it is (an upgrade uncordons nothing) …
      await commitAtomic(controller, [{ ops: [{ op: 'put', key: keys.node('n1'), value: { ...nodeOf('n1'), spec: { unschedulable: true } } }, { op: 'delete', key: keys.nodeSpec('n1') }] }]);
      await register();
      expect((await controller.get<Node>(keys.node('n1')))!.value.spec).toEqual({ unschedulable: true });
      // … until the CLI decides: `jaco node cordon` writes nodespecs/n1, and the agent's next registration drops the old field.
      expect((await jaco(['node', 'uncordon', 'n1'], { endpoint: etcd.endpoint, env: ctl })).stdout).toBe('node/n1 uncordoned\n');
      expect((await jaco(['node', 'cordon', 'n1'], { endpoint: etcd.endpoint, env: ctl })).stdout).toBe('node/n1 cordoned\n');
      await register();
      expect((await controller.get<Node>(keys.node('n1')))!.value.spec).toEqual({});
      expect((await agent.get<NodeSpecRecord>(keys.nodeSpec('n1')))!.value.spec).toEqual({ unschedulable: true });
      // It reads its own node's decision, writes none of it, and reads no other node's.
      for (const op of [{ op: 'put', key: keys.nodeSpec('n1'), value: decided({}) }, { op: 'delete', key: keys.nodeSpec('n1') }, { op: 'put', key: keys.nodeSpec('n2'), value: decided({ trusted: true }) }] as const)
        await expect(commitAtomic(agent, [{ ops: [op] }]), `${op.op} ${op.key}`).rejects.toThrow(/permission denied/i);
      await expect(agent.get(keys.nodeSpec('n2'))).rejects.toThrow(/permission denied/i);
      // Rewriting its own nodes/n1 with a spec changes nothing operators see: still cordoned.
      const n = (await agent.get<Node>(keys.node('n1')))!;
      await commitAtomic(agent, [{ ops: [{ op: 'update', key: keys.node('n1'), value: { ...n.value, spec: { unschedulable: false, trusted: true } }, modRevision: n.modRevision }] }]);
      const get = await jaco(['get', 'nodes', 'n1'], { endpoint: etcd.endpoint, env: ctl });
      expect(get.stdout).toContain('SchedulingDisabled');
      // And it still registers and heartbeats under its own user (the real agent below).
      await register();
    } finally {
      await commitAtomic(controller, [{ ops: [{ op: 'delete', key: keys.node('n1') }, { op: 'delete', key: keys.nodeSpec('n1') }] }]);
      agent.close();
      controller.close();
    }
  });

  it("an agent's user reads every node and every node's subnets (the overlay's peers), and writes neither but its own node", async () => {
    const ctl = envOf('controller.env');
    const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ctl.JACO_ETCD_USER, password: ctl.JACO_ETCD_PASSWORD });
    const agent = asAgent('n1');
    try {
      await commitAtomic(controller, [{ ops: [{ op: 'put', key: keys.subnet('n9'), value: subnetOf('n9', 9) }, { op: 'put', key: keys.node('n9'), value: nodeOf('n9') }] }]);
      expect((await agent.list(keys.subnets())).items.map((i) => i.key)).toContain('subnets/n9');
      expect((await agent.list(keys.nodes())).items.map((i) => i.key)).toContain('nodes/n9');
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: keys.subnet('n1'), value: subnetOf('n1', 1) }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: keys.node('n9'), value: nodeOf('n9') }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'delete', key: keys.node('n9') }] }])).rejects.toThrow(/permission denied/i);
      // Not the addresses of other nodes' replicas, nor the subnet index claims.
      await expect(agent.list(keys.addresses())).rejects.toThrow(/permission denied/i);
      await expect(agent.list(keys.subnetIndexes())).rejects.toThrow(/permission denied/i);
    } finally {
      await commitAtomic(controller, [{ ops: [{ op: 'delete', key: keys.subnet('n9') }, { op: 'delete', key: keys.node('n9') }] }]);
      agent.close();
      controller.close();
    }
  });

  it("an agent's user reads its own node's copies of secrets, and no other node's, nor the secrets, configs or cluster key", async () => {
    const ctl = envOf('controller.env');
    const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ctl.JACO_ETCD_USER, password: ctl.JACO_ETCD_PASSWORD });
    const agent = asAgent('n1');
    const sealed = { alg: 'X25519-HKDF-SHA256-A256GCM', key: 'nk-x', epk: 'AA==', iv: 'AA==', data: 'AA==' };
    const copy = (node: string) => ({ apiVersion: 'jaco.dev/v1', kind: 'NodeCopy', metadata: { name: 'db' }, spec: { node, kind: 'secret', name: 'db', uid: 'u', nodeKey: 'nk-x', size: 1, sealed } });
    try {
      await commitAtomic(controller, [
        {
          ops: [
            { op: 'put', key: keys.copy('n1', 'secret', 'db'), value: copy('n1') },
            { op: 'put', key: keys.copy('n2', 'secret', 'db'), value: copy('n2') },
            { op: 'put', key: keys.secret('db'), value: { apiVersion: 'jaco.dev/v1', kind: 'Secret', metadata: { name: 'db', uid: 'u' }, spec: { size: 1, sealed } } },
          ],
        },
      ]);
      expect((await agent.list(keys.copiesOf('n1'))).items.map((i) => i.key)).toEqual(['copies/n1/secret/db']);
      await expect(agent.list(keys.copiesOf('n2'))).rejects.toThrow(/permission denied/i);
      await expect(agent.get(keys.copy('n2', 'secret', 'db'))).rejects.toThrow(/permission denied/i);
      await expect(agent.list(keys.copiesOf())).rejects.toThrow(/permission denied/i);
      await expect(agent.list(keys.secrets())).rejects.toThrow(/permission denied/i);
      await expect(agent.list(keys.configs())).rejects.toThrow(/permission denied/i);
      await expect(agent.get(keys.clusterKey())).rejects.toThrow(/permission denied/i);
      // Read only: an agent cannot write a copy, even its own.
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: keys.copy('n1', 'secret', 'x'), value: copy('n1') }] }])).rejects.toThrow(/permission denied/i);
      // An ingress reads none of it either.
      const ie = envOf('ingress-n1.env');
      const ingress = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ie.JACO_ETCD_USER, password: ie.JACO_ETCD_PASSWORD });
      try {
        for (const p of [keys.copiesOf('n1'), keys.secrets(), keys.configs()]) await expect(ingress.list(p)).rejects.toThrow(/permission denied/i);
      } finally {
        ingress.close();
      }
    } finally {
      await commitAtomic(controller, [{ ops: [{ op: 'delete', key: keys.copy('n1', 'secret', 'db') }, { op: 'delete', key: keys.copy('n2', 'secret', 'db') }, { op: 'delete', key: keys.secret('db') }] }]);
      agent.close();
      controller.close();
    }
  });

  it("an ingress's user reads what it routes and writes only its own report", async () => {
    const e = envOf('ingress-n1.env');
    expect(e.JACO_ETCD_USER).toBe('jaco-ingress-n1');
    const ingress = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: e.JACO_ETCD_USER, password: e.JACO_ETCD_PASSWORD });
    try {
      for (const p of ['deployments/', 'endpoints/', 'nodes/']) await expect(ingress.list(p)).resolves.toBeDefined();
      await commitAtomic(ingress, [{ ops: [{ op: 'put', key: 'ingresses/n1', value: counter }] }]);
      await expect(commitAtomic(ingress, [{ ops: [{ op: 'put', key: 'ingresses/n2', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(ingress, [{ ops: [{ op: 'put', key: 'endpoints/a/b', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(ingress.list('desired/')).rejects.toThrow(/permission denied/i);
      // Registry passwords are for the agents and controllers only.
      await expect(ingress.list('registries/')).rejects.toThrow(/permission denied/i);
      await expect(ingress.get('config/images')).rejects.toThrow(/permission denied/i);
      await expect(ingress.list('observed/n1/')).rejects.toThrow(/permission denied/i);
    } finally {
      await commitAtomic(ingress, [{ ops: [{ op: 'delete', key: 'ingresses/n1' }] }]);
      ingress.close();
    }
  });

  /**
   * Runs a real `jaco` process under the user of `envFile`, waits until the controllers' user reads
   * what `reported` looks for, and hands it (and the process's log) to `check`.
   */
  async function asProcess<T>(envFile: string, args: string[], what: string, reported: (controller: Store) => Promise<T | undefined>, check: (found: T, controller: Store, log: string) => Promise<void> | void): Promise<void> {
    const child = spawn(process.execPath, [JACO_BIN, '--timings', 'fast', ...args], {
      env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: PREFIX, ...envOf(envFile) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr.on('data', (d: Buffer) => (log += d.toString()));
    const ctl = envOf('controller.env');
    const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ctl.JACO_ETCD_USER, password: ctl.JACO_ETCD_PASSWORD });
    try {
      const found = await eventually(async () => (await reported(controller)) ?? (child.exitCode !== null ? Promise.reject(new Error(log)) : undefined), { what, timeoutMs: 30_000 }).catch((e: Error) => {
        throw new Error(`${e.message}; the process printed:\n${log}`);
      });
      await check(found, controller, log);
      expect(log).not.toMatch(/permission denied/i);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
      controller.close();
    }
  }

  it('a real `jaco ingress` runs under its own user: watches what it routes and reports to ingresses/<node>', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'jaco-ingress-rbac-'));
    try {
      await asProcess(
        'ingress-n1.env',
        ['ingress', '--node', 'n1', '--data-dir', dir, '--metrics-addr', '127.0.0.1:0'],
        'the ingress of n1 reporting under its own user',
        async (c) => (await c.get<IngressStatus>(keys.ingress('n1')))?.value,
        // No node address registered: it routes nothing yet, and says so.
        (report) => expect(report.spec).toMatchObject({ node: 'n1', haproxy: 'down', routes: [] }),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a real `jaco agent` runs under its own user: registers, claims its heartbeat, reports; the controllers’ user sees it', () =>
    asProcess(
      'agent-n1.env',
      ['agent', '--node', 'n1', '--capacity', 'cpu=1,memory=1Gi', '--metrics-addr', '127.0.0.1:0', '--docker-host', `unix://${join(creds, 'no-docker.sock')}`, '--state-dir', join(creds, 'state-n1')],
      'the agent of n1 heartbeating under its own user',
      async (c) => (await c.get<Heartbeat>(keys.heartbeat('n1')))?.value,
      async (hb, controller) => {
        expect(hb.spec).toMatchObject({ node: 'n1', dockerUp: false });
        // Its key's public half is on its node; the private half stays in its state directory.
        const node = (await controller.get<Node>(keys.node('n1')))?.value;
        expect(node).toMatchObject({ metadata: { name: 'n1' }, status: { secretsKey: { id: expect.stringMatching(/^nk-[0-9a-f]{16}$/) } } });
        expect(readFileSync(join(creds, 'state-n1', 'node.key'), 'utf8')).toContain(node!.status!.secretsKey!.publicKey);
        expect(statSync(join(creds, 'state-n1', 'node.key')).mode & 0o777).toBe(0o600);
      },
    ));

  it('a real `jaco agent --overlay` under its own user watches every node and subnet and configures the others as peers', async () => {
    // Its interface lives in this machine's namespace for the test's length: a name and port of its
    // own, subnets no cluster uses, a peer on loopback; deleted at the end (the agent leaves it up).
    const dev = `jt${process.pid % 1_000_000}`;
    const port = await freePort();
    const peerKey = 'hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=';
    const ctl = envOf('controller.env');
    const controller = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: ctl.JACO_ETCD_USER, password: ctl.JACO_ETCD_PASSWORD });
    const state = join(creds, 'state-overlay-n1');
    try {
      await commitAtomic(controller, [{ ops: [{ op: 'put', key: keys.node('n2'), value: nodeOf('n2', { publicKey: peerKey, endpoint: `127.0.0.2:${port}` }) }, { op: 'put', key: keys.subnet('n1'), value: subnetOf('n1', 1) }, { op: 'put', key: keys.subnet('n2'), value: subnetOf('n2', 2) }] }]);
      const wg = () => spawnSync('wg', ['show', dev, 'dump'], { encoding: 'utf8' });
      await asProcess(
        'agent-n1.env',
        ['agent', '--node', 'n1', '--capacity', 'cpu=1,memory=1Gi', '--metrics-addr', '127.0.0.1:0', '--docker-host', `unix://${join(creds, 'no-docker.sock')}`, '--state-dir', state, '--address', '127.0.0.1', '--overlay', '--overlay-interface', dev, '--overlay-port', String(port)],
        "n1's overlay with n2 as its peer",
        async () => {
          const r = wg();
          return r.status === 0 && r.stdout.includes(peerKey) && spawnSync('ip', ['route', 'show', 'dev', dev], { encoding: 'utf8' }).stdout.includes('198.19.2.0/24') ? r.stdout : undefined;
        },
        async (dump, c) => {
          const published = (await c.get<Node>(keys.node('n1')))!.value.status!.overlay!;
          expect(published.endpoint).toBe(`127.0.0.1:${port}`);
          // The interface holds the key whose public half is published; the private half stays in the state directory.
          expect(dump.split('\n')[0]!.split('\t').slice(1, 3)).toEqual([published.publicKey, String(port)]);
          expect(statSync(join(state, 'overlay.key')).mode & 0o777).toBe(0o600);
          expect(dump).toContain(`${peerKey}\t(none)\t127.0.0.2:${port}\t198.19.2.0/24,fd6a:6163:6f00:2::/64`);
          expect(spawnSync('ip', ['-6', 'route', 'show', 'dev', dev], { encoding: 'utf8' }).stdout).toContain('fd6a:6163:6f00:2::/64 proto 106 src fd6a:6163:6f00:1::1');
        },
      );
    } finally {
      spawnSync('ip', ['link', 'del', 'dev', dev]);
      await commitAtomic(controller, [{ ops: [{ op: 'delete', key: keys.node('n2') }, { op: 'delete', key: keys.subnet('n1') }, { op: 'delete', key: keys.subnet('n2') }] }]).catch(() => undefined);
      controller.close();
    }
  });
});

describe('the controllers, each under its own etcd user, run a cluster of hollow nodes', () => {
  let etcd: TestEtcd;
  let creds: string;
  const PREFIX = '/jaco/';
  const procs: { name: string; child: ReturnType<typeof spawn>; log: () => string }[] = [];
  const envOf = (file: string) => Object.fromEntries(readFileSync(join(creds, file), 'utf8').trim().split('\n').map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]));
  const start = (name: string, args: string[], env: Record<string, string>) => {
    const child = spawn(process.execPath, [JACO_BIN, '--timings', 'fast', ...args], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: PREFIX, JACO_LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
    procs.push({ name, child, log: () => log });
  };
  beforeAll(async () => {
    etcd = await startTestEtcd();
    creds = mkdtempSync(join(tmpdir(), 'jaco-creds-'));
    const made = await jaco(['etcd', 'rbac', '--enable-auth', '--out', creds, 'hollow-1', 'hollow-2'], { endpoint: etcd.endpoint, prefix: PREFIX });
    expect(made.code, made.stderr).toBe(0);
    expect(made.stdout).toContain('authentication is on');
  });
  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.child.exitCode === null && p.child.signalCode === null ? new Promise((r) => p.child.once('exit', r)) : undefined)));
    await etcd?.stop();
    if (creds) rmSync(creds, { recursive: true, force: true });
  });

  it('places and runs a deployment, no process refused a write', async () => {
    const root = envOf('root.env');
    // The hollow nodes are a test device (one process, many agents): they run as root.
    start('hollow', ['hollow-nodes', '--count', '2', '--name-prefix', 'hollow-', '--start-latency', '10ms', '--log-level', 'warn'], root);
    for (const name of CONTROLLER_NAMES) start(name, ['controller', name, '--metrics-addr', '127.0.0.1:0'], envOf(`controller-${name}.env`));
    const asRoot = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: root.JACO_ETCD_USER, password: root.JACO_ETCD_PASSWORD });
    try {
      const applied = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix: PREFIX, env: root, input: hollowManifest(1, 4, { prefix: 'rbac' }) });
      expect(applied.code, applied.stderr).toBe(0);
      await eventually(async () => {
        for (const p of procs) if (p.child.exitCode !== null) throw new Error(`${p.name} exited:\n${p.log()}`);
        const c = await census(asRoot);
        return c.replicas === 4 && c.running === 4;
      }, { what: '4 replicas placed and running', timeoutMs: 30_000 });
      // The scheduler wrote the deployment's status under its own user; its audit records too.
      expect((await asRoot.get(keys.deploymentStatus('rbac-0')))?.value).toBeDefined();
      expect((await asRoot.list('audit/')).items.length).toBeGreaterThan(0);
      for (const p of procs) expect(p.log(), p.name).not.toMatch(/permission denied/i);
    } finally {
      asRoot.close();
    }
  });
});

describe('etcd over TLS with client certificates', () => {
  let pki: TestPki;
  let member: EtcdMember;
  let dataDir: string;
  beforeAll(async () => {
    pki = makeTestPki();
    dataDir = mkdtempSync(join(tmpdir(), 'jaco-etcd-tls-'));
    member = startEtcdMember({ name: 'tls', dataDir, clientPort: await freePort(), peerPort: await freePort(), tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.ca } });
    await waitForEtcd([member.endpoint], 20_000, member.process, { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey });
  });
  afterAll(async () => {
    await member?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('connects with --cacert/--cert/--key and applies; without them it cannot reach etcd', async () => {
    expect(member.endpoint).toMatch(/^https:/);
    const tlsFlags = ['--cacert', pki.ca, '--cert', pki.clientCert, '--key', pki.clientKey];
    const manifest = JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'tls' }, spec: { services: { web: { image: 'x' } } } });
    const ok = await jaco([...tlsFlags, 'apply', '-f', '-'], { endpoint: member.endpoint, input: manifest });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('deployment/tls created');
    const env = await jaco(['get', 'deployments', '-o', 'json'], { endpoint: member.endpoint, env: { JACO_ETCD_CACERT: pki.ca, JACO_ETCD_CERT: pki.clientCert, JACO_ETCD_KEY: pki.clientKey } });
    expect(JSON.parse(env.stdout).items).toHaveLength(1);
    const plain = await jaco(['get', 'deployments'], { endpoint: member.endpoint });
    expect(plain.code).toBe(2);
    const noClientCert = await jaco(['--cacert', pki.ca, 'get', 'deployments'], { endpoint: member.endpoint });
    expect(noClientCert.code).not.toBe(0);
    const halfCert = await jaco(['--cacert', pki.ca, '--cert', pki.clientCert, 'get', 'deployments'], { endpoint: member.endpoint });
    expect(halfCert.stderr).toContain('needs both --cert and --key');
  });
});
