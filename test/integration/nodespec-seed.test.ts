// Closing the upgrade hole of the nodespecs/ split (issue 29) on a real etcd: a cluster written
// before the split keeps what operators decided inside nodes/<host> as `spec`, which the node's
// agent may write, and readers honour it while nodespecs/<host> is absent. `jaco etcd rbac` — the
// step that gives each agent its own user — makes every node's nodespecs/<host> once, carrying
// that spec over, create-only (an operator's decision is never overwritten) and audited; after it
// the agent's user rewriting nodes/<host> changes nothing any reader sees. And a process logged in
// before users change logs in again (etcd refuses older tokens then).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type AuditEvent, type Node, type NodeSpec, type NodeSpecRecord } from '../../src/api/types.js';
import { readEnvFile } from '../../src/supervise/local-credentials.js';
import { Store } from '../../src/store/store.js';
import { jaco } from '../support/cli.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const PREFIX = '/jaco/';
const nodeOf = (name: string, spec: NodeSpec): Node => ({
  apiVersion: API_VERSION,
  kind: 'Node',
  metadata: { name },
  spec,
  status: { capacity: { cpuMillis: 1000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 'before-the-split', registeredAt: new Date().toISOString() },
});
const decided = (name: string, spec: NodeSpec): NodeSpecRecord => ({ apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name }, spec });

describe('jaco etcd rbac on a cluster written before the nodespecs/ split', () => {
  const etcd = useTestEtcd();
  const out = mkdtempSync(join(tmpdir(), 'jaco-creds-'));
  afterAll(() => rmSync(out, { recursive: true, force: true }));

  it('copies each node’s old spec into nodespecs/ once, never over an operator’s decision, and the agent’s user can no longer change what readers see', async () => {
    const store = etcd.store(PREFIX);
    // old: cordoned and trusted by an older CLI; plain: nothing decided; decided: an operator's
    // newer decision already in nodespecs/ (its old spec says otherwise); junk: nodes/ unreadable.
    await store.ns.put(keys.node('old')).value(JSON.stringify(nodeOf('old', { unschedulable: true, trusted: true }))).exec();
    await store.ns.put(keys.node('plain')).value(JSON.stringify(nodeOf('plain', {}))).exec();
    await store.ns.put(keys.node('decided')).value(JSON.stringify(nodeOf('decided', { unschedulable: true }))).exec();
    await store.ns.put(keys.nodeSpec('decided')).value(JSON.stringify(decided('decided', { unschedulable: false, labels: { zone: 'b' } }))).exec();
    await store.ns.put(keys.node('junk')).value('not json {').exec();
    const before = (await store.get<NodeSpecRecord>(keys.nodeSpec('decided')))!.modRevision;

    await store.client.user('root').create('rootpw');
    await store.client.user('root').addRole('root');
    const run = await jaco(['etcd', 'rbac', '--out', out, '--enable-auth', 'old', 'plain', 'decided', 'junk', 'fresh'], { endpoint: etcd.endpoint, prefix: PREFIX });
    expect(run.code, run.stderr).toBe(0);
    const asRoot = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: 'root', password: 'rootpw' });
    try {
      const spec = async (h: string) => (await asRoot.get<NodeSpecRecord>(keys.nodeSpec(h)))?.value.spec;
      expect(await spec('old')).toEqual({ unschedulable: true, trusted: true });
      expect(await spec('plain')).toEqual({});
      // Not yet registered: its decision is there before its agent first connects.
      expect(await spec('fresh')).toEqual({});
      // Unreadable: what operators decided is not known — cordoned.
      expect(await spec('junk')).toEqual({ unschedulable: true });
      expect((await asRoot.get<NodeSpecRecord>(keys.nodeSpec('decided')))!.modRevision).toBe(before);
      const audit = (await asRoot.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec).filter((s) => s.type === 'node_spec_seeded');
      expect(audit.map((s) => [s.payload.node, s.payload.from]).sort()).toEqual([['fresh', 'none'], ['junk', 'unreadable'], ['old', 'nodes'], ['plain', 'none']]);

      // The agent of `old` rewrites its own nodes/ key with an old-style uncordon and trust: allowed
      // (its status lives there), and read by nobody — the node stays cordoned.
      const e = readEnvFile(join(out, 'agent-old.env'))!;
      const agent = new Store({ endpoints: etcd.endpoint, prefix: PREFIX, user: e.JACO_ETCD_USER, password: e.JACO_ETCD_PASSWORD });
      try {
        await agent.ns.put(keys.node('old')).value(JSON.stringify(nodeOf('old', { unschedulable: false, trusted: true }))).exec();
        await expect(agent.ns.put(keys.nodeSpec('old')).value(JSON.stringify(decided('old', {}))).exec()).rejects.toThrow(/permission denied/);
      } finally {
        agent.close();
      }
      const get = await jaco(['--user', 'root:rootpw', 'get', 'nodes', 'old'], { endpoint: etcd.endpoint, prefix: PREFIX });
      expect(get.stdout).toContain('SchedulingDisabled');

      // Run again (an upgrade, a node added): nothing is made twice, nothing overwritten.
      const again = await jaco(['--user', 'root:rootpw', 'etcd', 'rbac', '--out', out, 'old', 'plain', 'decided', 'junk', 'fresh'], { endpoint: etcd.endpoint, prefix: PREFIX });
      expect(again.code, again.stderr).toBe(0);
      expect((await asRoot.list<AuditEvent>(keys.audits())).items.filter((i) => i.value.spec.type === 'node_spec_seeded')).toHaveLength(4);
      expect(await spec('old')).toEqual({ unschedulable: true, trusted: true });
    } finally {
      asRoot.close();
    }
  });
});

describe('a process logged in before users or roles changed', () => {
  const etcd = useTestEtcd({ secure: { nodes: ['a'] } });
  it('logs in again: no call refused as "revision of auth store is old" after nodes join (jaco etcd rbac NODE under running processes)', async () => {
    const s = etcd.store(PREFIX);
    await s.ns.put(keys.heartbeat('a')).value('{}').exec();
    await etcd.addNodes!(['b']);
    await etcd.addNodes!(['c']);
    expect(await s.get(keys.heartbeat('a'))).toBeDefined();
    await s.ns.put(keys.heartbeat('a')).value('{}').exec();
    expect((await s.list(keys.nodeSpecs())).items.map((i) => i.key).sort()).toEqual(['nodespecs/a', 'nodespecs/b', 'nodespecs/c']);
  });

  it('calls made while users and roles change, change after change (a node joining writes several), are served: the login again is retried as long as the changes go on', async () => {
    const s = etcd.store(PREFIX);
    await s.get(keys.heartbeat('a'));
    const refused: string[] = [];
    let served = 0;
    let joining = true;
    // Four callers, each a call after the other, for as long as the nodes join.
    const caller = async () => {
      while (joining) {
        try {
          await s.get(keys.heartbeat('a'));
          served++;
        } catch (e) {
          refused.push((e as Error).message);
        }
      }
    };
    const callers = [caller(), caller(), caller(), caller()];
    try {
      await etcd.addNodes!(['e', 'f', 'g']);
    } finally {
      joining = false;
      await Promise.all(callers);
    }
    expect(refused).toEqual([]);
    expect(served).toBeGreaterThan(10);
  });

  it('a watch refused so (the only call of a process between changes) drops the token and reopens its stream: a watch made again is served', async () => {
    const s = etcd.store(PREFIX);
    await s.get(keys.heartbeat('a'));
    await etcd.addNodes!(['d']);
    // As a reflector or an agent does after a watch error: watch again, a little later.
    let w: Awaited<ReturnType<ReturnType<typeof s.ns.watch>['create']>> | undefined;
    const outcomes: string[] = [];
    for (let i = 0; i < 10 && !w; i++) {
      try {
        w = await s.ns.watch().key('w').create();
        outcomes.push('connected');
      } catch (e) {
        outcomes.push((e as Error).message);
        await new Promise((res) => setTimeout(res, 300));
      }
    }
    expect(w, outcomes.join('\n')).toBeDefined();
    const seen = new Promise<string>((resolve) => w!.on('put', (kv) => resolve(kv.value.toString())));
    await etcd.store(PREFIX).ns.put('w').value('seen').exec();
    expect(await seen).toBe('seen');
    await w!.cancel();
  });
});
