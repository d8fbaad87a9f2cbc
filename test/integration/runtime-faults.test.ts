// Regression tests of the runtime issue's findings, each against a real etcd with the real
// scheduler on the runtime (no Docker: nodes and heartbeats are written directly):
//   1. an object that fails validation (or carries an unknown field) is not treated as deleted;
//   2. one act that can never commit does not stall the controller: (a) an unreadable key under a
//      prefix it creates, (b) a service too large for one request, (c) the audit lease revoked;
//   3. two movers deciding from one state cannot both move one replica, and surplus copies
//      (from an earlier release or a hand edit) are healed;
//   8. two concurrent applies cannot both land replica ids that collide.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type AuditEvent, type Deployment, type DeploymentSpec, type DeploymentStatus, type Heartbeat, type Node, type ReplicaDesired } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import { setCordon } from '../../src/app/nodes.js';
import { metrics } from '../../src/observability/metrics.js';
import type { Act } from '../../src/runtime/acts.js';
import { Cache } from '../../src/runtime/cache.js';
import { startController } from '../../src/runtime/manager.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import { Store } from '../../src/store/store.js';
import { commitAtomic, commitEach } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { MoveBook, startMove } from '../../controllers/moves/move.js';
import { eligibilityRevisions } from '../../controllers/placement/input.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually, sleep } from '../support/wait.js';

let etcd: TestEtcd;
const stops: (() => Promise<void>)[] = [];
beforeAll(async () => {
  etcd = await startTestEtcd();
});
afterEach(async () => {
  await Promise.all(stops.splice(0).map((s) => s()));
});
afterAll(async () => {
  await etcd?.stop();
});

function nodeObj(name: string): Node {
  return { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 4000, memoryBytes: 16 * 1024 ** 3, gpus: 0 }, agentVersion: 'test', registeredAt: new Date().toISOString() } };
}
function heartbeat(name: string): Heartbeat {
  // A long interval keeps it fresh for the whole test without an agent.
  return { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 60_000, agentVersion: 'test', dockerUp: true } };
}
async function cluster(store: Store, nodes: string[]): Promise<void> {
  await commitAtomic(store, [{ ops: nodes.flatMap((n) => [{ op: 'put' as const, key: keys.node(n), value: nodeObj(n) }, { op: 'put' as const, key: keys.heartbeat(n), value: heartbeat(n) }]) }]);
}
async function scheduler(store: Store, beforeCommit?: (acts: readonly Act[]) => Promise<void>): Promise<void> {
  const h = await startController({ store, timings: FAST, log: testLogger(), identity: 'faults', beforeCommit }, schedulerController(FAST));
  stops.push(h.stop);
}
const apply = (store: Store, name: string, spec: DeploymentSpec) => applyDeployments(store, [{ name, spec, cause: 'apply' }]);
const desiredOf = async (store: Store, dep: string) => (await store.list<ReplicaDesired>(keys.desiredOf())).items.filter((i) => i.value.spec.deployment === dep);
const web = (replicas: number, extra: object = {}) => ({ services: { web: { image: 'jaco-demo/busybox:1', replicas, ...extra } } });

describe('1. unreadable is not deleted', () => {
  it('a deployment with an unknown field keeps its replicas; one with a wrong type keeps them too', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2']);
    await scheduler(store);
    await apply(store, 'shop', web(2));
    const placed = await eventually(async () => ((await desiredOf(store, 'shop')).length === 2 ? desiredOf(store, 'shop') : undefined), { what: '2 replicas' });
    const cur = (await store.get<Deployment>(keys.deployment('shop')))!.value;
    // What a newer CLI might write during an upgrade: a field this version does not know.
    await store.ns.put(keys.deployment('shop')).value(JSON.stringify({ ...cur, spec: { ...cur.spec, rolloutWindow: '5m' } }));
    await sleep(FAST.safetyTickMs + 1000);
    expect((await desiredOf(store, 'shop')).map((d) => d.key)).toEqual(placed.map((d) => d.key));
    // A hand edit that breaks it: unreadable; the last readable version stays in effect.
    await store.ns.put(keys.deployment('shop')).value(JSON.stringify({ ...cur, spec: { services: { web: { image: 7 } } } }));
    await sleep(FAST.safetyTickMs + 1000);
    expect((await desiredOf(store, 'shop')).map((d) => d.key)).toEqual(placed.map((d) => d.key));
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec);
    expect(audit.filter((a) => a.type === 'replica_removed')).toEqual([]);
  });

  it('a node with an unknown field is not gone: its replicas are not re-placed', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3']);
    await scheduler(store);
    await apply(store, 'api', web(3));
    const placed = await eventually(async () => ((await desiredOf(store, 'api')).length === 3 ? desiredOf(store, 'api') : undefined), { what: '3 replicas' });
    await store.ns.put(keys.node('node-2')).value(JSON.stringify({ ...nodeObj('node-2'), status: { ...nodeObj('node-2').status, zone: 'b' } }));
    await sleep(FAST.nodeLostGraceMs + FAST.safetyTickMs);
    expect((await desiredOf(store, 'api')).map((d) => d.key).sort()).toEqual(placed.map((d) => d.key).sort());
  });
});

describe('2. one act that cannot commit does not stall the controller', () => {
  it('(a) an unreadable key under a prefix the scheduler creates: the act is held and reported, other deployments place', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2']);
    // A schema-invalid status where the scheduler would create one.
    await store.ns.put(keys.deploymentStatus('broken')).value(JSON.stringify({ apiVersion: API_VERSION, kind: 'DeploymentStatus', metadata: { name: 'broken' }, status: { scheduling: 'x' } }));
    await scheduler(store);
    const failures = async () => (await metrics.actFailures.get()).values.filter((v) => v.labels.reason === 'unreadable_key').reduce((n, v) => n + v.value, 0);
    const before = await failures();
    await apply(store, 'broken', web(1));
    await apply(store, 'fine', web(2));
    await eventually(async () => (await desiredOf(store, 'fine')).length === 2, { what: 'the other deployment placed' });
    await eventually(async () => (await desiredOf(store, 'broken')).length === 1, { what: 'the broken one placed too' });
    expect(await failures()).toBeGreaterThan(before);
    // Held back, not retried in a hot loop: a handful of attempts over a few seconds.
    const at = await failures();
    await sleep(3000);
    expect((await failures()) - at).toBeLessThan(10);
    // The unreadable key is left as it is (never overwritten blindly).
    expect(JSON.parse((await store.ns.get(keys.deploymentStatus('broken')).string())!).status.scheduling).toBe('x');
  });

  it('(b) a service too large for one act is placed over several, and the others are not held up', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3']);
    await scheduler(store);
    await apply(store, 'big', web(8, { env: { BLOB: 'x'.repeat(200 * 1024) } }));
    await apply(store, 'small', web(2));
    await eventually(async () => (await desiredOf(store, 'small')).length === 2, { what: 'small placed' });
    await eventually(async () => (await desiredOf(store, 'big')).length === 8, { what: 'all 8 big replicas placed', timeoutMs: 20_000 });
  });

  it('(c) the audit lease revoked: audited acts recover at once on a new lease', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2']);
    await scheduler(store);
    await apply(store, 'one', web(1));
    await eventually(async () => (await desiredOf(store, 'one')).length === 1);
    const audits = (await store.list<AuditEvent>(keys.audits())).items;
    const lease = audits.find((a) => a.value.spec.actor === 'scheduler')!.lease!;
    await store.client.leaseClient.leaseRevoke({ ID: lease });
    await apply(store, 'two', web(2));
    await eventually(async () => (await desiredOf(store, 'two')).length === 2, { what: 'placed after the lease was revoked', timeoutMs: 10_000 });
    const placedTwo = (await store.list<AuditEvent>(keys.audits())).items.filter((a) => a.value.spec.type === 'replica_placed' && a.value.spec.deployment === 'two');
    expect(placedTwo).toHaveLength(2);
  });
});

describe('3. two movers cannot both move one replica', () => {
  it('two move starts decided from one state: one lands, the other conflicts', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3', 'node-4']);
    await scheduler(store);
    await apply(store, 'app', web(1));
    const [r] = await eventually(async () => ((await desiredOf(store, 'app')).length === 1 ? desiredOf(store, 'app') : undefined));
    // The agent reports it running (no Docker here).
    const s = r!.value.spec;
    await store.ns.put(keys.observed(s.node, s.replica)).value(JSON.stringify({ apiVersion: API_VERSION, kind: 'ReplicaObserved', metadata: { name: s.replica }, status: { replica: s.replica, node: s.node, deployment: 'app', service: 'web', state: 'running', revision: s.revision, specHash: s.specHash, health: 'none', startedAt: new Date(Date.now() - 60_000).toISOString(), observedAt: new Date().toISOString() } }));
    const cache = await Cache.read(store, ['desired', 'observed', 'disruptions', 'commands', 'nodes', 'nodespecs', 'drains'], testLogger());
    const book = () => new MoveBook({ replicas: cache.index(REPLICAS), ledgers: new Map(), eligibility: eligibilityRevisions(cache) });
    const [d1, d2] = ['node-1', 'node-2', 'node-3', 'node-4'].filter((n) => n !== s.node);
    const drain = startMove(book(), { replica: s.replica, src: s.node, dst: d1!, by: 'drain', id: 'm-drain', now: Date.now(), timeoutMs: 60_000, sourceLeaving: true });
    const rebalance = startMove(book(), { replica: s.replica, src: s.node, dst: d2!, by: 'rebalancer', id: 'm-rb', now: Date.now(), timeoutMs: 60_000 });
    if (!drain.ok || !rebalance.ok) throw new Error('both should start from the same state');
    const [a, b] = await Promise.all([commitEach(store, [{ label: 'drain', ops: drain.ops }]), commitEach(store, [{ label: 'rebalance', ops: rebalance.ops }])]);
    expect(a.committed.length + b.committed.length).toBe(1);
    expect(a.conflicted.length + b.conflicted.length).toBe(1);
    const copies = (await store.list<ReplicaDesired>(keys.desiredOf())).items.filter((i) => i.value.spec.replica === s.replica);
    expect(copies).toHaveLength(2); // the source and one destination, never three
  });
});

describe('3. surplus copies are healed', () => {
  it('a second copy outside any move (left by an earlier release or a hand edit) is removed, audited, and the replica is counted once', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2', 'node-3']);
    await scheduler(store);
    await apply(store, 'dup', web(1));
    const [r] = await eventually(async () => ((await desiredOf(store, 'dup')).length === 1 ? desiredOf(store, 'dup') : undefined));
    const s = r!.value.spec;
    const other = ['node-1', 'node-2', 'node-3'].find((n) => n !== s.node)!;
    // A later-placed copy on another node, written behind the scheduler's back.
    await store.ns.put(keys.desired(other, s.replica)).value(JSON.stringify({ ...r!.value, spec: { ...s, node: other, placedAt: new Date(Date.now() + 1_000).toISOString() } }));
    await eventually(async () => {
      const copies = await desiredOf(store, 'dup');
      return copies.length === 1 && copies[0]!.value.spec.node === s.node ? true : undefined;
    });
    const audit = (await store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec);
    expect(audit.filter((a) => a.type === 'replica_healed')).toMatchObject([{ payload: { replica: s.replica, kept: [s.node], removed: [other] } }]);
    expect(audit.filter((a) => a.type === 'replica_placed')).toHaveLength(1); // nothing placed to make up for it
  });
});

describe('8. a placement compares the node it relied on', () => {
  it('a cordon landing between the decision and the commit refuses the placement; the replica lands on another node', async () => {
    const store = etcd.store();
    await cluster(store, ['node-1', 'node-2']);
    let cordoned: string | undefined;
    await scheduler(store, async (acts) => {
      const place = acts.flatMap((a) => a.ops).find((o) => o.op === 'create' && o.key.startsWith('desired/'));
      if (cordoned || !place) return;
      cordoned = place.key.split('/')[1]!;
      // `jaco node cordon` (its write of nodespecs/<host>) lands after the scheduler decided and before its commit.
      expect(await setCordon(store, cordoned, true)).toBe(true);
    });
    await apply(store, 'cordon', web(1));
    const [r] = await eventually(async () => ((await desiredOf(store, 'cordon')).length === 1 ? desiredOf(store, 'cordon') : undefined));
    expect(cordoned).toBeDefined();
    expect(r!.value.spec.node).not.toBe(cordoned);
  });
});

describe('8. the CLI after a lost reply', () => {
  it('an apply whose commit landed but whose reply was lost reports it landed, not "nothing was written"', async () => {
    const prefix = uniquePrefix();
    const { proxy, store: viaProxy, direct } = await etcd.viaProxy(prefix);
    // The deployment's name is on the wire only in the apply's transaction.
    const lost = proxy.loseReplyTo('lost-reply-app');
    const applied = applyDeployments(viaProxy, [{ name: 'lost-reply-app', spec: web(1), cause: 'apply' }]);
    await lost;
    await expect(applied).resolves.toEqual([expect.objectContaining({ name: 'lost-reply-app', result: 'created', revision: 1 })]);
    expect(await direct.get(keys.deployment('lost-reply-app'))).toBeDefined();
    viaProxy.close();
    await proxy.close();
  });
});

describe('8. concurrent applies', () => {
  it('two applies whose replica ids would collide cannot both land', async () => {
    const store = etcd.store();
    const a = etcd.store(store.prefix);
    const b = etcd.store(store.prefix);
    // Both read the deployments before either writes (the race the check used to lose).
    let arrived = 0;
    let release!: () => void;
    const bothRead = new Promise<void>((r) => (release = r));
    for (const st of [a, b]) {
      const listRaw = st.listRaw.bind(st);
      st.listRaw = (async (...args: Parameters<Store['listRaw']>) => {
        const r = await listRaw(...args);
        if (args[0] === keys.deployments() && ++arrived === 2) release();
        if (args[0] === keys.deployments()) await bothRead;
        return r;
      }) as Store['listRaw'];
    }
    // "x" service "a-b" and "x-a" service "b" would both name replicas "x-a-b-<n>".
    const results = await Promise.allSettled([
      applyDeployments(a, [{ name: 'x', spec: { services: { 'a-b': { image: 'i' } } }, cause: 'apply' }]),
      applyDeployments(b, [{ name: 'x-a', spec: { services: { b: { image: 'i' } } }, cause: 'apply' }]),
    ]);
    const landed = (await store.list(keys.deployments())).items.map((d) => d.key);
    expect(landed).toHaveLength(1);
    expect(results.filter((r) => r.status === 'rejected')).toHaveLength(1);
    const status = (await store.list<DeploymentStatus>(keys.deploymentStatuses())).items;
    expect(status).toEqual([]);
  });
});
