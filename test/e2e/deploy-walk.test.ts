// deploy/README.md followed on three separate hosts (issue 32): each host a network namespace with
// its own Docker engine (as `jaco up` makes them), and on it what the README puts there — the npm
// package of this build installed under /opt/jaco (test/support/package.ts), and each
// process started with exactly the command line and environment its unit gives it (read from the
// unit file and the env files it names: test/support/units.ts) — an etcd member of a 3-member
// cluster on TLS (clients and peers) with authentication on and a user per process (`jaco cert`,
// `jaco etcd rbac`: test/support/deploy-steps.ts), the controllers on two hosts, an agent (in the
// WireGuard mesh) and an ingress on every host, the dashboard, and Debian's docker-registry with
// deploy/registry/config.yml on the first. Then an operator's day: a compose application applied and
// answering through every host's ingress, a node drained and taken back, a rolling update; and etcd
// refusing an agent's user what is not its node's. The one liberty: jaco.env says JACO_TIMINGS=fast,
// so the walk takes seconds.
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { Heartbeat, ReplicaDesired } from '../../src/api/types.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { stopProcess } from '../../src/child.js';
import { DOCKER_CERTS_DIR, tearDown, type UpState } from '../../src/supervise/local-cluster.js';
import { claimNetwork, createNetwork, NETNS_DIR, type LocalNetwork } from '../../src/supervise/local-network.js';
import { engineCommand, engineSpec, engineUrl, waitForEngine, type NodeEngineSpec } from '../../src/supervise/node-engine.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { Store } from '../../src/store/store.js';
import { logger } from '../../src/observability/log.js';
import { jaco, type CliResult } from '../support/cli.js';
import { requireDocker } from '../support/cluster.js';
import { commitAtomic } from '../../src/store/writer.js';
import { etcdTlsFiles, etcdUsers, storeAuth, type EnvFileCopy, type OperatorJaco } from '../support/deploy-steps.js';
import { commandOf, hostPath, placeFile, readEnvFile, readUnit, type Host } from '../support/units.js';
import { noteUpDir } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';
import { textInNetns } from '../support/netns-fetch.js';
import { installJaco } from '../support/package.js';

const NODES = ['node-1', 'node-2', 'node-3'];
const CONTROLLER_HOSTS = ['node-1', 'node-2'];
const PORT = 18300;
const deploy = (f: string) => join(PACKAGE_ROOT, 'deploy', f);
/** Every process's output, whole (the failure messages carry the last lines). */
const LOG = join(tmpdir(), 'jaco-deploy-walk.log');

describe('deploy/README.md followed on three separate hosts', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'jaco-deploy-'));
  /** The operator's compose project. */
  const appDir = mkdtempSync(join(tmpdir(), 'jaco-deploy-app-'));
  let net: LocalNetwork;
  const engines = new Map<string, NodeEngineSpec>();
  const children: { name: string; proc: ChildProcess }[] = [];
  const logs: string[] = [];
  let state: UpState;
  let store: Store;
  let endpoints = '';
  let registry = '';
  /** The operator's connection: their etcd client certificate, and (once authentication is on) root. */
  let operatorEnv: Record<string, string> = {};
  /** A host: its files under its root, and the jaco its units run, the package installed there (step 0). */
  const host = (node: string): Host => {
    const root = join(dataDir, 'nodes', node, 'root');
    return { hostname: node, root, jaco: join(root, 'opt', 'jaco', 'bin', 'jaco') };
  };
  const address = (node: string) => net.nodes.find((n) => n.name === node)!.address;
  const nsOf = (node: string) => net.nodes.find((n) => n.name === node)!.netns;
  const netns = (node: string) => `--net=${join(NETNS_DIR, nsOf(node))}`;
  const tell = () => `\n${logs.slice(-25).join('\n')}\n(every process's output: ${LOG})`;

  /** Records what runs in the state file, so an interrupted run is torn down by the next (`jaco down --purge`). */
  const save = () => writeFileSync(join(dataDir, 'up.json'), JSON.stringify({ ...state, children: children.map((c) => ({ name: c.name, pid: c.proc.pid, metrics: '', log: '' })) }));

  /** Starts a process on `node` (its namespace), noting its output. */
  function spawnOn(node: string, name: string, cmd: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
    const proc = spawn('nsenter', [netns(node), '--', cmd, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const note = (d: Buffer) => {
      logs.push(`${name}: ${d.toString().trimEnd().slice(-800)}`);
      appendFileSync(LOG, `${name}: ${d.toString()}`);
    };
    proc.stdout!.on('data', note);
    proc.stderr!.on('data', note);
    children.push({ name, proc });
    save();
    return proc;
  }
  /**
   * A unit on a host, as systemd starts it there: the host's Docker socket is its engine's, and its
   * /run/wireguard its own (wireguard-go's control sockets are named by interface, and three hosts
   * on one machine would otherwise share that directory; a real host has its own /run).
   */
  function startUnit(node: string, unitFile: string): ChildProcess {
    const c = commandOf(readUnit(unitFile), host(node), { PATH: process.env.PATH, DOCKER_HOST: engineUrl(engines.get(node)!) });
    const ownRun = ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', 'mkdir -p /run/wireguard && mount -t tmpfs jaco-walk /run/wireguard && exec "$0" "$@"', c.cmd, ...c.args];
    return spawnOn(node, `${node} ${unitFile.split('/').pop()}`, ownRun[0]!, ownRun.slice(1), c.env);
  }
  /** The operator's CLI, on this machine (it reaches the hosts over their links). */
  const op = (args: string[], input?: string, timeoutMs = 60_000, env = operatorEnv): Promise<CliResult> => jaco(args, { endpoint: endpoints, prefix: '/jaco/', input, timeoutMs, env });
  const ok = async (args: string[], input?: string, timeoutMs?: number, env?: Record<string, string>) => {
    const r = await op(args, input, timeoutMs, env);
    expect(r.code, `jaco ${args.join(' ')}: ${r.stdout}${r.stderr}${tell()}`).toBe(0);
    return r.stdout;
  };
  /** GET / of `to`'s ingress on PORT, asked from `from`'s namespace. */
  const ask = async (from: string, to: string) => (await textInNetns(nsOf(from), `http://${address(to)}:${PORT}/`)).trim();
  const webNodes = async () => (await store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value.spec).filter((s) => s.deployment === 'shop' && s.service === 'web').map((s) => s.node);

  beforeAll(async () => {
    await requireDocker();
    writeFileSync(LOG, '');
    noteUpDir(dataDir);
    net = await claimNetwork(NODES);
    state = { supervisorPid: 0, endpoint: '', mode: 'isolated', network: net, nodes: NODES, children: [], timings: 'fast', ready: false, startedAt: new Date().toISOString() };
    save();
    await createNetwork(net);
    // Each host's Docker engine.
    for (const n of net.nodes) {
      const s = engineSpec(net.tag, n.name, n.netns, dataDir);
      engines.set(n.name, s);
      const c = engineCommand(s);
      mkdirSync(s.execRoot, { recursive: true });
      const proc = spawn(c.cmd, c.args, { stdio: 'ignore' });
      children.push({ name: `docker-${n.name}`, proc });
    }
    save();
    await Promise.all([...engines.values()].map((s) => waitForEngine(s, 60_000)));

    // Step 0: the package (npm pack of this build) installed on every host under /opt/jaco.
    await Promise.all(NODES.map((n) => installJaco(join(host(n).root, 'opt', 'jaco'))));

    // Step 1: the cluster CA; on each host an etcd member with its certificate and member.env.example
    // made its own, and the host's etcd client certificate; jaco.env pointed at the three members.
    const members = NODES.map((n, i) => ({ host: host(n), member: `etcd-${i + 1}`, address: address(n) }));
    endpoints = NODES.map((n) => `https://${address(n)}:2379`).join(',');
    const operator: OperatorJaco = (args, env) => ok(args, undefined, undefined, env);
    const pki = join(dataDir, 'pki');
    const tls = await etcdTlsFiles(operator, pki, members, NODES.map(host), join(dataDir, 'operator', 'etcd-client'));
    for (const n of NODES) startUnit(n, deploy('etcd/etcd-jaco.service'));
    const jacoEnv = readFileSync(deploy('systemd/jaco.env'), 'utf8').replace(/^JACO_ENDPOINTS=.*$/m, `JACO_ENDPOINTS=${endpoints}`) + 'JACO_TIMINGS=fast\n';
    for (const n of NODES) placeFile(host(n), '/etc/jaco/jaco.env', jacoEnv);
    await eventually(async () => {
      const s = new Store({ endpoints, ...storeAuth(tls), dialTimeoutMs: 1000 });
      return s.ping(1000).then(() => true, () => false).finally(() => s.close());
    }, { what: `the 3-member etcd answering over TLS${tell()}`, timeoutMs: 60_000 });
    // Then a user per process, authentication on, and each env file where its unit reads it.
    const copies: EnvFileCopy[] = [
      ...NODES.flatMap((n) => [{ file: `agent-${n}.env`, host: host(n), path: '/etc/jaco/agent.env' }, { file: `ingress-${n}.env`, host: host(n), path: '/etc/jaco/ingress.env' }]),
      ...CONTROLLER_HOSTS.map((n) => ({ file: 'controller.env', host: host(n), path: '/etc/jaco/controller.env' })),
      { file: 'viewer.env', host: host('node-1'), path: '/etc/jaco/dashboard.env' },
    ];
    operatorEnv = await etcdUsers(operator, tls, join(dataDir, 'operator', 'credentials'), NODES, copies);
    store = new Store({ endpoints, ...storeAuth(operatorEnv) });
    state.clusterUid = (await clusterInfo(store)).uid;
    state.endpoint = endpoints;
    save();

    // Step 2: the cluster key file, made once and copied to the controller hosts.
    const key = join(dataDir, 'secrets.key');
    await ok(['secret', 'key', 'rotate', '--key-file', key]);
    for (const n of CONTROLLER_HOSTS) placeFile(host(n), '/etc/jaco/secrets.key', readFileSync(key, 'utf8'), 0o600);

    // Step 4: the cluster's registry on node-1 — Debian's docker-registry, its unit as Debian ships
    // it, with deploy/registry/config.yml and a certificate from the cluster CA; every engine trusts the CA.
    await ok(['cert', 'node', 'registry', '--ip', address('node-1'), '--ca-dir', pki, '--out', hostPath(host('node-1'), '/etc/docker/registry/tls')]);
    const caPem = readFileSync(join(pki, 'ca.pem'), 'utf8');
    placeFile(host('node-1'), '/etc/docker/registry/config.yml', readFileSync(deploy('registry/config.yml'), 'utf8'));
    registry = `${address('node-1')}:5000`;
    const certsDir = join(DOCKER_CERTS_DIR, registry);
    mkdirSync(certsDir, { recursive: true });
    writeFileSync(join(certsDir, 'ca.crt'), caPem);
    state.registry = { host: registry, certsDir };
    startUnit('node-1', '/lib/systemd/system/docker-registry.service');

    // Steps 2, 3 and 7: the controllers on two hosts, an agent and an ingress on each, the dashboard.
    for (const n of CONTROLLER_HOSTS) startUnit(n, deploy('systemd/jaco-controller.service'));
    for (const n of NODES) startUnit(n, deploy('systemd/jaco-agent.service'));
    for (const n of NODES) startUnit(n, deploy('systemd/jaco-ingress.service'));
    startUnit('node-1', deploy('systemd/jaco-dashboard.service'));
    for (const n of NODES) await eventually(async () => nodeReady((await store.get<Heartbeat>(keys.heartbeat(n)))?.value), { what: `${n} Ready${tell()}`, timeoutMs: 60_000 });
    // Every unit still runs (a unit refusing its configuration exits at once: systemd would show it failed).
    const exited = children.filter((c) => c.proc.exitCode !== null || c.proc.signalCode !== null).map((c) => `${c.name} (${c.proc.exitCode ?? c.proc.signalCode})`);
    expect(exited, `units that exited${tell()}`).toEqual([]);

    // Step 4 again: the registry is the cluster's default, its CA given to the nodes; images pushed.
    await ok(['registry', 'login', registry, '--ca-file', join(pki, 'ca.pem')]);
    await ok(['registry', 'default', registry]);
    await ok(['registry', 'push', 'jaco-demo/busybox:1', 'jaco/pause:1'], undefined, 120_000);
  }, 300_000);

  afterAll(async () => {
    rmSync(appDir, { recursive: true, force: true });
    store?.close();
    // As systemd stops them (SIGTERM, then SIGKILL past the grace): an ingress stops its HAProxy
    // itself; one killed outright left it running, bound in a namespace that was then deleted.
    await Promise.all(children.filter((c) => !c.name.startsWith('docker-')).map((c) => stopProcess(c.proc, { graceMs: 8_000 })));
    await tearDown(dataDir, state ?? {}, logger('deploy-walk'), { purge: true });
    for (const c of children) if (c.name.startsWith('docker-')) c.proc.kill('SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  }, 120_000);

  it('every host runs what its units start: three nodes Ready, the dashboard answers on node-1, the registry is the default', async () => {
    const nodes = await ok(['get', 'nodes', '-o', 'wide']);
    for (const n of NODES) expect(nodes, nodes).toMatch(new RegExp(`^${n}\\s+Ready\\b`, 'm'));
    const page = await textInNetns(nsOf('node-1'), 'http://127.0.0.1:8090/');
    expect(page).toContain('/assets/dashboard.js');
    // It reads the cluster as the viewer user of its dashboard.env.
    await eventually(async () => JSON.parse(await textInNetns(nsOf('node-1'), 'http://127.0.0.1:8090/healthz')).synced === true, { what: `the dashboard's cache synced${tell()}`, timeoutMs: 30_000 });
    expect(await ok(['registry', 'default'])).toContain(registry);
  });

  it("etcd enforces each process's user: node-1's agent reads its node's keys and may write none of another node's, nor what controllers decide for its own", async () => {
    // The very env file its unit reads (its paths are this host's).
    const agent = new Store({ endpoints, ...storeAuth(readEnvFile(hostPath(host('node-1'), '/etc/jaco/agent.env'))) });
    try {
      expect((await agent.get(keys.node('node-1')))?.value).toBeDefined();
      const counter = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: 'c' }, spec: { next: 1 } };
      for (const key of [`${keys.observedOf('node-2')}probe`, keys.heartbeat('node-2'), `${keys.desiredOf('node-1')}probe`])
        await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key, value: counter }] }]), key).rejects.toThrow(/permission denied/i);
    } finally {
      agent.close();
    }
  });

  const compose = (version: string) =>
    writeFileSync(
      join(appDir, 'compose.yaml'),
      [
        'name: shop',
        'services:',
        '  web:',
        '    image: jaco-demo/busybox:1',
        // A web server that ends on SIGTERM, as a well-behaved one does (httpd as PID 1 would ignore it).
        `    command: ["sh", "-c", "trap 'exit 0' TERM; mkdir -p /w && echo ${version} > /w/index.html && httpd -f -p 8080 -h /w & wait"]`,
        `    ports: ["${PORT}:8080"]`,
        '    deploy:',
        '      replicas: 3',
        '',
      ].join('\n'),
    );
  const answers = async (want: string) => {
    for (const [i, to] of NODES.entries()) await eventually(async () => (await ask(NODES[(i + 1) % 3]!, to).catch(() => '')) === want, { what: `${to}:${PORT} answering ${want}${tell()}`, timeoutMs: 60_000 });
  };

  it('an operator applies a compose application: every host’s ingress answers it, over a whole WireGuard mesh', async () => {
    compose('v1');
    await ok(['apply', '-f', join(appDir, 'compose.yaml')], undefined, 120_000);
    await ok(['rollout', 'status', 'shop', '--timeout', '120s'], undefined, 130_000);
    expect(new Set(await webNodes()).size).toBe(3);
    await answers('v1');
    // A cluster-network service gave every node its subnets: the WireGuard mesh is whole.
    for (const n of NODES) await eventually(async () => /2 of 2 peers reachable/.test(await ok(['describe', 'node', n])), { what: `${n} in the WireGuard mesh${tell()}`, timeoutMs: 30_000 });
  });

  it('drains a node (its replicas run elsewhere, the application answers throughout), takes it back, rolls an update', async () => {
    await ok(['node', 'drain', 'node-2', '--wait'], undefined, 120_000);
    expect(await webNodes()).not.toContain('node-2');
    expect(await webNodes()).toHaveLength(3);
    await answers('v1');
    await ok(['node', 'uncordon', 'node-2']);
    compose('v2');
    await ok(['apply', '-f', join(appDir, 'compose.yaml')], undefined, 120_000);
    await ok(['rollout', 'status', 'shop', '--timeout', '120s'], undefined, 130_000);
    await answers('v2');
  });
});

