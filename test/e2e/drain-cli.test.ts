// `jaco node drain | remove | drain-status` as an operator runs them (./bin/jaco) against a real
// etcd: what one transaction writes, refusals, escalation, cancel, and --wait following the
// status the drain controller writes (written here by the test, to drive every ending).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type AuditEvent, type Node, type NodeDrain, type NodeDrainStatus, type NodeSpecRecord } from '../../src/api/types.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { jaco } from '../support/cli.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
beforeAll(async () => {
  // TLS and authentication on, the CLI as the operator (root), as production runs it.
  etcd = await startTestEtcd({ secure: { nodes: [] } });
});
afterAll(async () => {
  await etcd?.stop();
});

async function world(nodes: string[] = ['node-1', 'node-2']) {
  const prefix = uniquePrefix();
  const store = etcd.store(prefix);
  await commitAtomic(store, [
    {
      ops: nodes.map((name) => ({
        op: 'put' as const,
        key: keys.node(name),
        value: { apiVersion: API_VERSION, kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 2 ** 31, gpus: 0 }, agentVersion: 't', registeredAt: new Date().toISOString() } } satisfies Node,
      })),
    },
  ]);
  const run = (args: string[], timeoutMs?: number) => jaco(args, { endpoint: etcd.endpoint, prefix, timeoutMs, env: etcd.env!() });
  return { store, run, prefix };
}

/** Writes the drain's status as the drain controller would. */
async function setStatus(store: Store, host: string, status: NodeDrainStatus): Promise<void> {
  const cur = await store.mustGet<NodeDrain>(keys.drain(host));
  await commitAtomic(store, [{ ops: [{ op: 'update', key: cur.key, value: { ...cur.value, status }, modRevision: cur.modRevision }] }]);
}

describe('jaco node drain', () => {
  it('creates drains/<host> and cordons the node in one transaction; refuses a second drain', async () => {
    const { store, run } = await world();
    const before = (await store.listRaw('')).revision;
    const r = await run(['node', 'drain', 'node-2', '--timeout', '2m']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('drain/node-2 created: node cordoned; its replicas move make-before-break (timeout 2m per replica)\n');
    const drain = await store.mustGet<NodeDrain>(keys.drain('node-2'));
    expect(drain.value.spec).toMatchObject({ node: 'node-2', timeout: '2m', force: false, remove: false });
    expect(drain.value.status).toBeUndefined(); // the controller's field
    // The cordon is what operators decide: nodespecs/<host>, never the agent's nodes/<host>.
    const decided = await store.mustGet<NodeSpecRecord>(keys.nodeSpec('node-2'));
    expect(decided.value.spec.unschedulable).toBe(true);
    expect((await store.mustGet<Node>(keys.node('node-2'))).value.spec.unschedulable).toBeUndefined();
    // One transaction: the drain, the cordon and the audit record share one revision.
    expect(drain.modRevision).toBe(before + 1);
    expect(decided.modRevision).toBe(before + 1);
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec);
    expect(audit).toMatchObject([{ type: 'node_cordoned', actor: 'cli', payload: { node: 'node-2', unschedulable: true, by: 'drain' } }]);

    const again = await run(['node', 'drain', 'node-2']);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^error: node "node-2" is already draining \(since \d+s ago, drain\); follow it with: jaco node drain-status node-2 --wait/);
  });

  it.each<[string, string[], RegExp]>([
    ['an unknown node', ['node', 'drain', 'node-9'], /^error: node "node-9" not found\n$/],
    ['a bad timeout', ['node', 'drain', 'node-1', '--timeout', 'soon'], /invalid --timeout "soon"/],
    ['a zero timeout', ['node', 'drain', 'node-1', '--timeout', '0s'], /must be more than 0/],
    ['cancel with nothing to cancel', ['node', 'drain', 'node-1', '--cancel'], /no drain in progress on node "node-1"/],
    ['cancel with other options', ['node', 'drain', 'node-1', '--cancel', '--force'], /--cancel takes no other option/],
  ])('refuses %s (exit 1, nothing written)', async (_n, args, message) => {
    const { store, run } = await world();
    const before = (await store.listRaw('')).revision;
    const r = await run(args);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(message);
    expect((await store.listRaw('')).revision).toBe(before);
  });

  it('exits 2 when etcd is unreachable', async () => {
    const r = await jaco(['node', 'drain', 'node-1'], { endpoint: 'http://127.0.0.1:1', prefix: uniquePrefix() });
    expect(r.code).toBe(2);
  });

  it('adds --force, then removal, to the drain in progress; an already cordoned node stays as it is', async () => {
    const { store, run } = await world();
    await run(['node', 'cordon', 'node-2']);
    const r = await run(['node', 'drain', 'node-2']);
    expect(r.stdout).toMatch(/^drain\/node-2 created: node was already cordoned;/);
    await setStatus(store, 'node-2', { state: 'draining', replicas: { 'd-db-0': { state: 'blocked', reason: 'stateful_replica' } } });
    const forced = await run(['node', 'drain', 'node-2', '--force']);
    expect(forced.stdout).toBe('drain/node-2 already in progress: now with --force (stateful replicas are stopped on the node)\n');
    const removal = await run(['node', 'remove', 'node-2']);
    expect(removal.stdout).toBe('drain/node-2 already in progress: now removing the node once drained\n');
    const d = await store.mustGet<NodeDrain>(keys.drain('node-2'));
    expect(d.value.spec).toMatchObject({ force: true, remove: true });
    expect(d.value.status?.state).toBe('draining'); // the controller's progress is kept
  });

  it('a finished drain can be followed by a new one (it replaces the record)', async () => {
    const { store, run } = await world();
    await run(['node', 'drain', 'node-2']);
    await setStatus(store, 'node-2', { state: 'aborted', reason: 'drain_timeout', replicas: {} });
    const r = await run(['node', 'drain', 'node-2', '--timeout', '9m']);
    expect(r.code).toBe(0);
    const d = await store.mustGet<NodeDrain>(keys.drain('node-2'));
    expect(d.value.spec.timeout).toBe('9m');
    expect(d.value.status).toBeUndefined();
  });

  it('--cancel deletes the drain in progress and records drain_aborted (cancelled); the node stays cordoned', async () => {
    const { store, run } = await world();
    await run(['node', 'drain', 'node-2']);
    const r = await run(['node', 'drain', 'node-2', '--cancel']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^drain\/node-2 cancelled:/);
    expect(await store.get(keys.drain('node-2'))).toBeUndefined();
    expect((await store.mustGet<NodeSpecRecord>(keys.nodeSpec('node-2'))).value.spec.unschedulable).toBe(true);
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec);
    expect(audit.at(-1)).toMatchObject({ type: 'drain_aborted', payload: { node: 'node-2', reason: 'cancelled' } });
  });

  it('defaults the timeout from the timings (5m in production, 30s fast)', async () => {
    const { store, run } = await world();
    await run(['node', 'drain', 'node-1']);
    await run(['--timings', 'fast', 'node', 'drain', 'node-2']);
    expect((await store.mustGet<NodeDrain>(keys.drain('node-1'))).value.spec.timeout).toBe('5m');
    expect((await store.mustGet<NodeDrain>(keys.drain('node-2'))).value.spec.timeout).toBe('30s');
  });
});

describe('--wait and drain-status', () => {
  const started = '2026-11-21T10:00:00.000Z';

  it.each<[string, NodeDrainStatus, number, RegExp]>([
    [
      'completed: exit 0',
      { state: 'completed', startedAt: started, finishedAt: '2026-11-21T10:00:07.000Z', replicas: { 'd-web-1': { state: 'done', dst: 'node-1' } } },
      0,
      /drain\/node-2 completed in 7s: 1 moved, 0 dropped, 0 stopped/,
    ],
    [
      'aborted: exit 1',
      { state: 'aborted', reason: 'drain_timeout', startedAt: started, finishedAt: '2026-11-21T10:00:20.000Z', replicas: { 'd-web-1': { state: 'blocked', reason: 'move_timeout' } } },
      1,
      /drain\/node-2 aborted: drain_timeout \(d-web-1: move_timeout\)/,
    ],
  ])('follows the status line by line until it ends — %s', async (_n, final, code, verdict) => {
    const { store, run } = await world();
    const waiting = run(['node', 'drain', 'node-2', '--wait'], 60_000);
    await eventually(async () => (await store.get(keys.drain('node-2'))) !== undefined, { what: 'the drain created' });
    await setStatus(store, 'node-2', { state: 'draining', startedAt: started, replicas: { 'd-web-1': { state: 'moving', dst: 'node-1' } } });
    // Let the follower see the intermediate state before the end (it prints only changes).
    await new Promise((r) => setTimeout(r, 1500));
    await setStatus(store, 'node-2', final);
    const r = await waiting;
    expect(r.code).toBe(code);
    expect(r.stdout).toMatch(/^drain\/node-2 created: /);
    expect(r.stdout).toContain('drain/node-2 draining\n');
    expect(r.stdout).toContain('  d-web-1  moving → node-1\n');
    expect(r.stdout).toMatch(verdict);
  });

  it('drain-status prints the progress table, -o json the object, and exits 1 without a drain', async () => {
    const { store, run } = await world();
    expect((await run(['node', 'drain-status', 'node-2'])).code).toBe(1);
    await run(['node', 'drain', 'node-2']);
    await setStatus(store, 'node-2', { state: 'draining', startedAt: started, replicas: { 'd-web-1': { state: 'moving', dst: 'node-1', at: started, deadline: '2026-11-21T10:05:00.000Z' }, 'd-db-0': { state: 'blocked', reason: 'stateful_replica', at: started } } });
    const t = await run(['node', 'drain-status', 'node-2']);
    expect(t.code, t.stderr).toBe(0);
    expect(t.stdout).toMatch(/^Node: +node-2\nState: +draining\n/);
    expect(t.stdout).toMatch(/REPLICA +STATE +REASON +DESTINATION +SINCE +DEADLINE\nd-db-0 +blocked +stateful_replica +<none> +\S+ +<none>\nd-web-1 +moving +<none> +node-1 +\S+ +2026-11-21T10:05:00.000Z\n/);
    const jr = await run(['node', 'drain-status', 'node-2', '-o', 'json']);
    expect(jr.code, jr.stderr).toBe(0);
    const j = JSON.parse(jr.stdout);
    expect(j).toMatchObject({ kind: 'NodeDrain', spec: { node: 'node-2' }, status: { state: 'draining' } });
  });

  it('drain-status --wait on a removed node exits 0; on a cancelled drain exits 1', async () => {
    const { store, run } = await world();
    await run(['node', 'remove', 'node-2']);
    await setStatus(store, 'node-2', { state: 'removed', startedAt: started, finishedAt: started, replicas: {} });
    const removed = await run(['node', 'drain-status', 'node-2', '--wait']);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toMatch(/node\/node-2 removed from the cluster/);

    await run(['node', 'drain', 'node-1']);
    const waiting = run(['node', 'drain-status', 'node-1', '--wait'], 60_000);
    await new Promise((r) => setTimeout(r, 1500));
    await run(['node', 'drain', 'node-1', '--cancel']);
    const r = await waiting;
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/the drain is gone/);
  });
});
