import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { specHash } from '../../src/api/spec.js';
import {
  API_VERSION,
  type DeploymentRevision,
  type DeploymentStatus,
  type Endpoints,
  type Node,
  type NodeSpec,
  type PlacementDecision,
  type ReplicaCommand,
  type ReplicaCounter,
  type ReplicaDesired,
  type RolloutPlan,
  type ServiceSpec,
  type VolumeHome,
} from '../../src/api/types.js';
import { MAX_TXN_OPS } from '../../src/store/store.js';
import { txnCounts } from '../../src/store/writer.js';
import { AUDIT_OP_COUNTS } from '../../src/store/audit.js';
import { decideOnce, iso, shuffled, T0, TEST_CONFIG, World } from '../../test/support/scheduler-world.js';
import type { SchedulerPlan } from './plan.js';
import { HOLE_HOLD_MS } from './holes.js';

const IMG = 'jaco-demo/busybox:1';
const svc = (x: Partial<ServiceSpec> = {}): ServiceSpec => ({ image: IMG, ...x });

function threeNodes(o: Parameters<World['node']>[1] = {}): World {
  const w = new World();
  for (const n of ['node-1', 'node-2', 'node-3']) w.node(n, o);
  return w;
}

const status = (w: World, dep: string) => w.get<DeploymentStatus>(keys.deploymentStatus(dep))?.status;
const scheduling = (w: World, dep: string, s: string) => status(w, dep)?.scheduling?.services[s];
const labels = (p: SchedulerPlan) => p.acts.map((a) => a.label);

/** Each act fits one fenced transaction with its audit records (puts), and every act but the last is full: one more placement would not fit. */
function expectFullActs(acts: SchedulerPlan['acts']): void {
  const counts = acts.map((a) => {
    const c = txnCounts(a.ops, true);
    return { compares: c.compares + a.audit.length * AUDIT_OP_COUNTS.compares, writes: c.writes + a.audit.length * AUDIT_OP_COUNTS.writes };
  });
  for (const c of counts) expect(Math.max(c.compares, c.writes)).toBeLessThanOrEqual(MAX_TXN_OPS);
  for (const c of counts.slice(0, -1)) expect(Math.max(c.compares + 3, c.writes + 3)).toBeGreaterThan(MAX_TXN_OPS);
}

describe('apply → desired keys', () => {
  it('places every replica with its decision, audit, counter, status and endpoints; the next pass is idle', () => {
    const w = threeNodes();
    w.deploy('hello', { web: svc({ replicas: 3, ports: [8080] }) });
    const p = w.pass();
    expect(p.place.map((x) => x.replica)).toEqual(['hello-web-0', 'hello-web-1', 'hello-web-2']);
    expect(new Set(Object.values(w.placement('hello')))).toEqual(new Set(['node-1', 'node-2', 'node-3']));
    const d = w.desired()[0]!;
    expect(d.spec).toMatchObject({ deployment: 'hello', service: 'web', revision: 1, specHash: specHash(svc({ replicas: 3, ports: [8080] })), placedAt: iso(T0) });
    expect(d.spec.template.stopSignal).toBe('SIGTERM'); // defaults applied
    expect(w.get<ReplicaCounter>(keys.counter('hello', 'web'))!.spec.next).toBe(3);
    const dec = w.get<PlacementDecision>(keys.decision('hello', 'hello-web-0'))!;
    expect(dec.spec).toMatchObject({ replica: 'hello-web-0', chosen: w.placement('hello')['hello-web-0'], trigger: 'scale_up', mode: 'spread', actor: 'scheduler' });
    expect(dec.spec.verdicts).toHaveLength(3);
    expect(w.auditOf('replica_placed')).toHaveLength(3);
    expect(scheduling(w, 'hello', 'web')).toEqual({ desired: 3, placed: 3 });
    expect(status(w, 'hello')!.scheduling!.observedGeneration).toBe(1);
    expect(w.get<Endpoints>(keys.endpoints('hello', 'web'))!.spec.addresses).toEqual([]);
    // Nothing changed: nothing written (no churn on an idle cluster).
    expect(labels(w.pass())).toEqual([]);
  });

  it('the replicas, decisions and counter land in one act with the counter CAS', () => {
    const w = threeNodes();
    w.deploy('hello', { web: svc({ replicas: 2 }) });
    const act = decideOnce(w).acts.find((a) => a.label.startsWith('place'))!;
    expect(act.ops[0]).toMatchObject({ op: 'create', key: keys.counter('hello', 'web') });
    expect(act.ops.filter((o) => o.op === 'create' && o.key.startsWith('desired/'))).toHaveLength(2);
    expect(act.ops.filter((o) => o.key.startsWith('decisions/'))).toHaveLength(2);
    expect(act.audit).toHaveLength(2);
  });

  it.each([
    ['a cordon', (w: World, n: string) => w.decideNode(n, { unschedulable: true })],
    ['a cordon written by an older CLI (inside nodes/<host>)', (w: World, n: string) => w.node(n, { cordoned: true })],
    ['a drain', (w: World, n: string) => w.put(keys.drain(n), { apiVersion: API_VERSION, kind: 'NodeDrain', metadata: { name: n }, spec: { node: n, timeout: '5m', force: false, remove: false, requestedAt: iso(w.now) } })],
  ] as const)('%s landing between decision and commit refuses the placement on that node; the next pass places elsewhere', (_name, leave) => {
    const w = threeNodes();
    w.deploy('hello', { web: svc({ replicas: 3 }) });
    const plan = decideOnce(w);
    const act = plan.acts.find((a) => a.label.startsWith('place'))!;
    expect(act.ops.filter((o) => o.op === 'check').map((o) => o.key).sort()).toEqual([keys.deployment('hello'), ...['node-1', 'node-2', 'node-3'].flatMap((n) => [keys.drain(n), keys.node(n), keys.nodeSpec(n)])].sort());
    leave(w, 'node-2');
    expect(w.apply(plan)).toEqual([act.label]);
    expect(w.desired()).toEqual([]);
    w.converge();
    expect(w.desired()).toHaveLength(3);
    expect(Object.values(w.placement('hello'))).not.toContain('node-2');
  });

  it('placements on as many nodes as replicas fill an act up to its 128 compares (each node guarded)', () => {
    const w = new World();
    for (let i = 0; i < 300; i++) w.node(`n${String(i).padStart(3, '0')}`, { memory: '64Gi' });
    w.deploy('wide', { web: svc({ replicas: 200 }) });
    const places = w.pass().acts.filter((a) => a.label.startsWith('place'));
    expect(places.length).toBe(8); // 25 placements: 5 compares each (the desired key and the audit record absent, the node, node spec and drain guards) and 3 of the act
    expectFullActs(places);
    expect(w.desired()).toHaveLength(200);
  });

  it('a big service is placed in one pass: acts chained on the counter, each within one transaction, every index once', () => {
    const w = new World();
    for (let i = 0; i < 10; i++) w.node(`n${i}`, { memory: '64Gi' });
    w.deploy('big', { web: svc({ replicas: 200 }) });
    const p = w.pass();
    const places = p.acts.filter((a) => a.label.startsWith('place'));
    expect(places.length).toBe(5); // 42 placements fill an act's 128 writes (desired, decision, audit record each, and the counter)
    expectFullActs(places);
    // The first compares the counter's revision; each next one its version, and moves it on.
    expect(places[0]!.ops[0]).toMatchObject({ op: 'create', key: keys.counter('big', 'web') });
    places.slice(1).forEach((a, k) => expect(a.ops[0]).toEqual({ op: 'check', key: keys.counter('big', 'web'), version: k + 1 }));
    const ids = w.desired().map((d) => d.spec.index).sort((a, b) => a! - b!);
    expect(ids).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(w.get<ReplicaCounter>(keys.counter('big', 'web'))!.spec.next).toBe(200);
    // Spread: 20 per node.
    const per = new Map<string, number>();
    for (const d of w.desired()) per.set(d.spec.node, (per.get(d.spec.node) ?? 0) + 1);
    expect([...per.values()]).toEqual(Array(10).fill(20));
    expect(labels(w.pass()).filter((l) => l.startsWith('place'))).toEqual([]);
  });

  it('a chain broken in the middle leaves no index handed out twice: the next pass places the rest', () => {
    const w = new World();
    for (let i = 0; i < 4; i++) w.node(`n${i}`, { memory: '64Gi' });
    w.deploy('big', { web: svc({ replicas: 100 }) });
    const p = decideOnce(w);
    const places = p.acts.filter((a) => a.label.startsWith('place'));
    // Only the first act lands (as if the second lost to a conflict): the rest of the chain fails its version check.
    w.harness.apply([places[0]!, ...places.slice(2)]);
    expect(w.desired()).toHaveLength(places[0]!.audit.length);
    w.converge();
    const ids = w.desired().map((d) => d.spec.index!);
    expect(ids).toHaveLength(100);
    expect(new Set(ids).size).toBe(100);
  });

  // What operators decided (nodespecs/<host>) joined with what the agent reports (nodes/<host>):
  // a cluster written before the split keeps its spec in nodes/<host>, honoured while nodespecs/ is absent.
  it.each<[string, NodeSpec | undefined, NodeSpec | 'junk' | undefined, boolean]>([
    ['no spec anywhere', undefined, undefined, true],
    ['cordoned in nodespecs/', undefined, { unschedulable: true }, false],
    ['cordoned in nodes/ by an older CLI, no nodespecs/', { unschedulable: true }, undefined, false],
    ['cordoned in nodes/, uncordoned since in nodespecs/ (the legacy field is ignored)', { unschedulable: true }, {}, true],
    ['uncordoned in nodes/ (an agent forging it), cordoned in nodespecs/', { unschedulable: false, trusted: true }, { unschedulable: true }, false],
    ['nodespecs/ unreadable: read as cordoned', undefined, 'junk', false],
  ])('%s: placeable on node-2 or not', (_name, legacy, decided, placeable) => {
    const w = threeNodes();
    const n = w.get<Node>(keys.node('node-2'))!;
    if (legacy) w.put(keys.node('node-2'), { ...n, spec: legacy });
    if (decided === 'junk') w.store.putRaw(keys.nodeSpec('node-2'), 'not json {');
    else if (decided) w.decideNode('node-2', decided);
    w.deploy('hello', { web: svc({ replicas: 3 }) });
    w.converge();
    expect(w.desired()).toHaveLength(3);
    expect(Object.values(w.placement('hello')).includes('node-2')).toBe(placeable);
  });

  it('runtime labels in nodespecs/ are matched by a node selector, beside the agent\'s own', () => {
    const w = threeNodes();
    w.decideNode('node-3', { labels: { zone: 'b' } });
    w.deploy('hello', { web: svc({ replicas: 2, placement: { nodeSelector: { zone: 'b' } } }) });
    w.converge();
    expect(new Set(Object.values(w.placement('hello')))).toEqual(new Set(['node-3']));
  });

  it('a replica too large for one etcd request is refused at decide time with a reason, and other services still place', () => {
    const w = threeNodes();
    const huge = 'x'.repeat(1_600_000);
    w.deploy('big', { web: svc({ replicas: 2, env: { BLOB: huge } }) });
    w.deploy('small', { web: svc({ replicas: 2 }) });
    const p = w.pass();
    expect(p.place.filter((x) => x.deployment === 'big')).toEqual([]);
    expect(p.status.get('big')!.web!.unschedulable).toMatchObject({ reason: 'spec_too_large', count: 2 });
    expect(p.place.filter((x) => x.deployment === 'small')).toHaveLength(2);
  });

  it('new replicas carry the serving template: after an aborted rollout, the previous revision', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 1 }) });
    w.converge();
    w.deploy('d', { web: svc({ replicas: 2, image: 'jaco-demo/busybox:2' }) }); // generation 2
    const rev1: DeploymentRevision = {
      apiVersion: 'jaco.dev/v1',
      kind: 'DeploymentRevision',
      metadata: { name: 'd-1' },
      spec: { deployment: 'd', revision: 1, appliedAt: iso(T0), cause: 'apply', summary: '', template: { services: { web: svc({ replicas: 1 }) } } },
    };
    w.put(keys.revision('d', 1), rev1);
    const plan: RolloutPlan = {
      apiVersion: 'jaco.dev/v1',
      kind: 'RolloutPlan',
      metadata: { name: 'd-web' },
      spec: { deployment: 'd', service: 'web', fromRevision: 1, toRevision: 2, fromHash: specHash(svc({ replicas: 1 })), toHash: 'b', totalSteps: 1, currentStep: 1, state: 'aborted', startedAt: iso(T0), steps: [] },
    };
    w.put(keys.rollout('d', 'web'), plan);
    w.pass();
    const added = w.desired().find((d) => d.spec.index === 1)!;
    expect(added.spec).toMatchObject({ revision: 1, specHash: specHash(svc({ replicas: 1 })) });
    expect(added.spec.template.image).toBe(IMG);
    // Without the aborted plan: the current revision.
    w.remove(keys.rollout('d', 'web'));
    w.deploy('d', { web: svc({ replicas: 3, image: 'jaco-demo/busybox:2' }) });
    w.pass();
    expect(w.desired().find((d) => d.spec.index === 2)!.spec).toMatchObject({ revision: 3, template: { image: 'jaco-demo/busybox:2' } });
  });
});

describe('scale and membership', () => {
  it('scale down removes the highest indexes, not-running ones first, with their commands and decisions', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 5 }) });
    w.converge();
    w.runAll();
    w.observe('d-web-1', 'exited');
    w.deploy('d', { web: svc({ replicas: 3 }) });
    const p = w.pass();
    expect(p.stop.map((s) => [s.replica, s.reason])).toEqual([
      ['d-web-1', 'scale_down'],
      ['d-web-4', 'scale_down'],
    ]);
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-web-0', 'd-web-2', 'd-web-3']);
    expect(w.get(keys.decision('d', 'd-web-1'))).toBeUndefined();
    expect(w.auditOf('replica_removed').map((a) => a.payload.replica)).toEqual(['d-web-1', 'd-web-4']);
    // Indexes are never reused: scaling up again continues at 5.
    w.deploy('d', { web: svc({ replicas: 4 }) });
    w.pass();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-web-0', 'd-web-2', 'd-web-3', 'd-web-5']);
  });

  it('a deleted service keeps its counter while an agent still reports its containers: re-created, it numbers on (no id of an old container reused)', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    w.runAll();
    w.undeploy('d');
    w.converge();
    // The replicas are removed; their containers are still reported (the agents have not stopped them yet).
    expect(w.list('desired/')).toEqual([]);
    expect(w.list('observed/')).toHaveLength(2);
    expect(w.list('counters/')).toHaveLength(1);
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-web-2', 'd-web-3']);
    // Deleted again, and once the agents report nothing of it, the counter goes.
    w.undeploy('d');
    w.converge();
    for (const o of w.list('observed/')) w.remove(o.key);
    w.converge();
    expect(w.list('counters/')).toEqual([]);
  });

  it('deleting a deployment removes every replica (every copy), command, decision, counter, endpoints and status; volume homes stay', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }), db: svc({ volumes: [{ type: 'volume', source: 'data', target: '/data' }] }) });
    w.converge();
    const web0 = w.desired({ service: 'web' })[0]!;
    const other = ['node-1', 'node-2', 'node-3'].find((n) => n !== web0.spec.node)!;
    w.replica('d', 'web', 0, other, { move: { id: 'm1', from: web0.spec.node, by: 'drain', startedAt: iso(T0), deadline: iso(T0 + 60_000) } });
    w.put(keys.command(web0.spec.node, 'd-web-0'), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: 'd-web-0' }, spec: { replica: 'd-web-0', op: 'restart', seq: 1, issuedAt: iso(T0), reason: 'x' }, status: { restarts: 1, generation: 1 } });
    w.undeploy('d');
    w.converge();
    for (const prefix of ['desired/', 'commands/', 'decisions/', 'counters/', 'endpoints/', 'deploymentstatus/']) expect(w.list(prefix)).toEqual([]);
    expect(w.list<VolumeHome>(keys.volumeHomes())).toHaveLength(1);
    expect(w.auditOf('replica_removed').map((a) => [a.payload.replica, a.payload.reason])).toEqual([
      ['d-db-0', 'deployment_deleted'],
      ['d-web-0', 'deployment_deleted'],
      ['d-web-1', 'deployment_deleted'],
    ]);
  });

  it('a deployment whose stored value cannot be read is not deleted: its replicas stay and nothing is cleaned up', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    // Readable before: the last readable version stays in effect, and nothing changes.
    w.store.putRaw(keys.deployment('d'), JSON.stringify({ ...w.get(keys.deployment('d'))!, spec: { services: 'not a map' } }));
    expect(labels(decideOnce(w))).toEqual([]);
    // Never readable (a hand-written key, or the cache started after it broke): present, frozen.
    const fresh = threeNodes();
    fresh.deploy('d', { web: svc({ replicas: 2 }) });
    fresh.converge();
    fresh.undeploy('d');
    fresh.store.putRaw(keys.deployment('d'), '{"kind":"Deployment","spec":');
    const p = decideOnce(fresh);
    expect(p.stop).toEqual([]);
    expect(p.cleanup).toEqual([]);
  });

  it('a deployment with an unknown field reads as the deployment it is (the field is ignored), not as deleted', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    const d = w.get<Record<string, unknown>>(keys.deployment('d'))!;
    w.store.putRaw(keys.deployment('d'), JSON.stringify({ ...d, spec: { ...(d.spec as object), rollbackWindow: '5m' } }));
    const p = decideOnce(w);
    expect(p.stop).toEqual([]);
    expect(labels(p)).toEqual([]);
  });

  it('removing a service removes its replicas, counter and endpoints only', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc(), api: svc() });
    w.converge();
    w.deploy('d', { web: svc() });
    w.converge();
    expect(Object.keys(w.placement('d'))).toEqual(['d-web-0']);
    expect(w.list(keys.counters()).map((c) => c.key)).toEqual([keys.counter('d', 'web')]);
    expect(w.list(keys.endpointsAll()).map((c) => c.key)).toEqual([keys.endpoints('d', 'web')]);
    expect(Object.keys(status(w, 'd')!.scheduling!.services)).toEqual(['web']);
    expect(w.auditOf('replica_removed')[0]!.payload.reason).toBe('service_removed');
  });

  it('a change to or from global replaces the replicas (ids differ)', () => {
    const w = threeNodes();
    w.deploy('d', { agent: svc({ replicas: 1 }) });
    w.converge();
    w.deploy('d', { agent: svc({ placement: { mode: 'global' } }) });
    w.converge();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-agent-node-1', 'd-agent-node-2', 'd-agent-node-3']);
    expect(w.auditOf('replica_removed')[0]!.payload).toMatchObject({ replica: 'd-agent-0', reason: 'mode_changed' });
  });

  it('a move in flight (two desired keys) counts once: no extra placement, placed once, no restart', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    const r = w.desired()[0]!;
    const dst = ['node-1', 'node-2', 'node-3'].find((n) => !Object.values(w.placement('d')).includes(n))!;
    w.replica('d', 'web', r.spec.index!, dst, { move: { id: 'm', from: r.spec.node, by: 'rebalancer', startedAt: iso(T0), deadline: iso(T0 + 60_000) } });
    w.observe(r.spec.replica, 'exited');
    const p = decideOnce(w);
    expect(p.place).toEqual([]);
    expect(p.stop).toEqual([]);
    expect(p.restart).toEqual([]);
    expect(p.status.get('d')!.web).toEqual({ desired: 2, placed: 2 });
  });

  it('a suspended replica counts as existing and is never restarted or re-placed', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc() });
    w.converge();
    const r = w.desired()[0]!;
    w.replica('d', 'web', 0, r.spec.node, { suspended: { reason: 'node_drained', at: iso(T0) } });
    w.observe('d-web-0', 'stopped', { code: 'node_drained' });
    w.nodeDown(r.spec.node);
    w.pass();
    w.advance(10_000);
    const p = w.pass();
    expect(p.place).toEqual([]);
    expect(p.replaceLost).toEqual([]);
    expect(p.restart).toEqual([]);
    expect(w.desired()).toHaveLength(1);
  });
});

describe('modes, filters and reason codes', () => {
  it('pack: fills the lowest-loaded node first, ties by node name', () => {
    const w = threeNodes();
    w.deploy('d', { w: svc({ replicas: 4, placement: { mode: 'pack' } }) });
    w.pass();
    expect(w.placement('d')).toEqual({ 'd-w-0': 'node-1', 'd-w-1': 'node-2', 'd-w-2': 'node-3', 'd-w-3': 'node-1' });
  });

  it('global: one per eligible node; NotReady and cordoned nodes keep theirs; a new node gets one; a removed node loses its', () => {
    const w = threeNodes();
    w.deploy('d', { agent: svc({ placement: { mode: 'global' } }) });
    w.converge();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-agent-node-1', 'd-agent-node-2', 'd-agent-node-3']);
    expect(w.desired()[0]!.spec.index).toBeUndefined();
    w.nodeDown('node-2');
    w.node('node-3', { cordoned: true });
    w.node('node-4');
    w.advance(60_000);
    w.converge();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-agent-node-1', 'd-agent-node-2', 'd-agent-node-3', 'd-agent-node-4']);
    expect(scheduling(w, 'd', 'agent')).toEqual({ desired: 4, placed: 4 });
    // Its key lost by the store, no removal recorded: a NotReady node, it keeps its replica.
    w.remove(keys.node('node-2'));
    w.converge();
    expect(w.placement('d')['d-agent-node-2']).toBe('node-2');
    w.removeNode('node-2');
    w.converge();
    expect(w.placement('d')['d-agent-node-2']).toBeUndefined();
    expect(w.auditOf('replica_removed').at(-1)!.payload.reason).toBe('node_gone');
  });

  it('global: each placement writes the service counter in its transaction, chained within a pass, `next` kept (a rollout completion compares it)', () => {
    const w = threeNodes();
    const key = keys.counter('d', 'agent');
    // Indexes handed out before the change to global stay handed out.
    w.deploy('d', { agent: svc({ replicas: 2 }) });
    w.converge();
    w.deploy('d', { agent: svc({ placement: { mode: 'global' } }) });
    const version = w.store.versioned(key)!.version;
    const acts = decideOnce(w).acts.filter((a) => a.label.startsWith('place'));
    expect(acts.map((a) => a.ops.filter((o) => o.key === key).map((o) => ({ op: o.op, modRevision: 'modRevision' in o ? o.modRevision : undefined, version: 'version' in o ? o.version : undefined })))).toEqual([
      [{ op: 'update', modRevision: w.store.versioned(key)!.modRevision, version: undefined }],
      [{ op: 'check', modRevision: undefined, version: version + 1 }, { op: 'put', modRevision: undefined, version: undefined }],
      [{ op: 'check', modRevision: undefined, version: version + 2 }, { op: 'put', modRevision: undefined, version: undefined }],
    ]);
    w.converge();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-agent-node-1', 'd-agent-node-2', 'd-agent-node-3']);
    expect(w.get<ReplicaCounter>(key)!.spec.next).toBe(2);
    // A placement decided before the counter moved (a cache that lags) is refused, and made again.
    w.node('node-4');
    const stale = decideOnce(w);
    w.put(key, w.get(key));
    expect(w.apply(stale)).toEqual(['place d-agent-node-4']);
    w.converge();
    expect(w.placement('d')['d-agent-node-4']).toBe('node-4');
    expect(w.get<ReplicaCounter>(key)!.spec.next).toBe(2);
  });

  it('global: nodes outside the node selector are not wanted; a port conflict is unschedulable with its node', () => {
    const w = new World();
    w.node('a', { labels: { role: 'edge' } });
    w.node('b', { labels: { role: 'edge' } });
    w.node('c');
    w.deploy('x', { other: svc({ ports: [80], priority: 1, placement: { mode: 'hosts', hosts: ['b'] } }) });
    w.deploy('d', { edge: svc({ ports: [80], placement: { mode: 'global', nodeSelector: { role: 'edge' } } }) });
    w.converge();
    expect(Object.keys(w.placement('d'))).toEqual(['d-edge-a']);
    expect(scheduling(w, 'd', 'edge')).toMatchObject({ desired: 2, placed: 1, unschedulable: { reason: 'port_conflict', count: 1, nodes: { b: 'ports: host port 80 is taken' } } });
  });

  const cases: [string, (w: World) => void, Partial<ServiceSpec>, string, Record<string, string>?][] = [
    ['no_nodes_active', (w) => w.node('a', { ready: false }), {}, 'no_nodes_active', { a: 'eligibility: NotReady (no heartbeat: the agent lost its lease)' }],
    ['no_nodes_active (cordoned)', (w) => w.node('a', { cordoned: true }), {}, 'no_nodes_active', { a: 'eligibility: cordoned' }],
    ['no_capacity_memory', (w) => w.node('a', { memory: '256Mi' }), { resources: { memory: '512Mi' } }, 'no_capacity_memory'],
    ['no_capacity_gpu', (w) => w.node('a'), { resources: { gpus: 1 } }, 'no_capacity_gpu'],
    ['node_selector_mismatch', (w) => w.node('a', { labels: { zone: 'b' } }), { placement: { nodeSelector: { zone: 'a' } } }, 'node_selector_mismatch'],
    ['cannot_satisfy_host_placement', (w) => w.node('a'), { placement: { mode: 'hosts', hosts: ['z'] } }, 'cannot_satisfy_host_placement'],
  ];
  it.each(cases)('%s: status carries the reason and per-node breakdown; placement_failed audited once', (_n, setup, spec, reason, nodes) => {
    const w = new World();
    setup(w);
    w.deploy('d', { s: svc(spec) });
    const p = w.pass();
    expect(p.place).toEqual([]);
    const u = scheduling(w, 'd', 's')!.unschedulable!;
    expect(u).toMatchObject({ reason, count: 1 });
    expect(Object.keys(u.nodes)).toEqual(['a']);
    if (nodes) expect(u.nodes).toEqual(nodes);
    expect(p.unschedulable).toEqual({ [reason]: 1 });
    expect(w.auditOf('placement_failed')).toHaveLength(1);
    expect(w.auditOf('placement_failed')[0]!.payload).toMatchObject({ service: 's', reason });
    // Not audited again while the reason stays; nothing written.
    expect(labels(w.pass())).toEqual([]);
    expect(w.auditOf('placement_failed')).toHaveLength(1);
  });

  it('port_conflict: the host port is taken on every node', () => {
    const w = new World();
    w.node('a');
    w.deploy('x', { first: svc({ ports: [9000] }) });
    w.deploy('y', { second: svc({ ports: [9000] }) });
    w.converge();
    expect(scheduling(w, 'y', 'second')!.unschedulable).toMatchObject({ reason: 'port_conflict', nodes: { a: 'ports: host port 9000 is taken' } });
  });

  it('hosts: fewer listed hosts eligible than replicas wanted → none placed, with the missing hosts', () => {
    const w = threeNodes();
    w.node('node-3', { cordoned: true });
    w.deploy('d', { pinned: svc({ replicas: 2, placement: { mode: 'hosts', hosts: ['node-1', 'node-3', 'node-9'] } }) });
    w.deploy('e', { pinned: svc({ replicas: 2, placement: { mode: 'hosts', hosts: ['node-1', 'node-2', 'node-3'] } }) });
    w.converge();
    expect(w.placement('d')).toEqual({});
    // node-1 could take one, but 2 are wanted: all or nothing.
    expect(scheduling(w, 'd', 'pinned')!.unschedulable).toMatchObject({ reason: 'cannot_satisfy_host_placement', count: 2, missing: ['node-3', 'node-9'] });
    expect(new Set(Object.values(w.placement('e')))).toEqual(new Set(['node-1', 'node-2']));
  });

  it('volume locality: the first placement records the home in the same act; later placements only there', () => {
    const w = threeNodes();
    const db = svc({ volumes: [{ type: 'volume', source: 'data', target: '/data' }] });
    w.deploy('d', { db });
    const p = w.pass();
    const act = p.acts.find((a) => a.label.startsWith('place'))!;
    expect(act.ops.some((o) => o.op === 'create' && o.key === keys.volumeHome('d', 'data'))).toBe(true);
    const home = w.get<VolumeHome>(keys.volumeHome('d', 'data'))!.spec.node;
    expect(w.placement('d')).toEqual({ 'd-db-0': home });
    // Replica gone (scaled to 0 and back): it comes back on the home, and when the home is
    // cordoned it cannot be placed at all.
    w.deploy('d', { db: { ...db, replicas: 0 } });
    w.converge();
    w.node(home, { cordoned: true });
    w.deploy('d', { db: { ...db, replicas: 1 } });
    w.converge();
    expect(w.placement('d')).toEqual({});
    expect(scheduling(w, 'd', 'db')!.unschedulable).toMatchObject({ reason: 'volume_locality_no_node', count: 1 });
    w.node(home);
    w.converge();
    expect(w.placement('d')).toEqual({ 'd-db-1': home });
  });

  it('priority: services place in descending priority across deployments; the higher one takes the last slot', () => {
    const w = new World();
    w.node('a', { memory: '600Mi' });
    w.deploy('aaa', { low: svc({ resources: { memory: '400Mi' } }) });
    w.deploy('zzz', { high: svc({ resources: { memory: '400Mi' }, priority: 10 }) });
    w.pass();
    expect(w.placement('zzz')).toEqual({ 'zzz-high-0': 'a' });
    expect(w.placement('aaa')).toEqual({});
    expect(scheduling(w, 'aaa', 'low')!.unschedulable!.reason).toBe('no_capacity_memory');
  });

  it('a service whose desired key cannot be read holds its membership: no scaling around it', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.converge();
    w.store.putRaw(keys.desired('node-1', 'd-web-7'), '{"kind":"ReplicaDesired","spec":{"deployment":"d","service":"web"');
    w.deploy('d', { web: svc({ replicas: 4 }) });
    const p = decideOnce(w);
    expect(p.place).toEqual([]);
    expect(p.status.get('d')!.web!.unreadable).toEqual([keys.desired('node-1', 'd-web-7')]);
  });
});

describe('determinism', () => {

  it('the same stored state in any order gives the same plan', () => {
    const w = new World();
    for (let i = 0; i < 6; i++) w.node(`n${i}`, { labels: { zone: i % 2 ? 'a' : 'b' }, memory: '2Gi' });
    w.node('n6', { ready: false });
    w.deploy('a', { web: svc({ replicas: 4, ports: [80] }), worker: svc({ replicas: 5, placement: { mode: 'pack' }, resources: { memory: '300Mi' } }) });
    w.deploy('b', { agent: svc({ placement: { mode: 'global', nodeSelector: { zone: 'a' } } }), api: svc({ replicas: 3, priority: 5, placement: { nodeSelector: { zone: 'b' } } }) });
    w.converge();
    w.runAll();
    w.observe('a-web-1', 'exited');
    w.deploy('a', { web: svc({ replicas: 2, ports: [80] }), worker: svc({ replicas: 7, placement: { mode: 'pack' }, resources: { memory: '300Mi' } }) });
    const stored = w.list<unknown>('');
    const want = JSON.stringify(decideOnce(w));
    for (let seed = 1; seed <= 15; seed++) {
      // The same keys written in another order (revisions differ; the plan must not).
      const v = new World();
      v.now = w.now;
      for (const kv of shuffled(stored, seed)) v.put(kv.key, kv.value);
      const got = decideOnce(v);
      // Revisions differ with the write order; nothing else may.
      const strip = (p: unknown) => JSON.stringify(p, (k, v: unknown) => (k === 'modRevision' || k === 'version' || k === 'resourceVersion' ? undefined : v));
      expect(strip(got)).toBe(strip(JSON.parse(want)));
    }
  });

  it('spread stability: removing a node that holds no replica changes no placement', () => {
    const build = (without?: string) => {
      const w = new World();
      for (let i = 0; i < 8; i++) if (`n${i}` !== without) w.node(`n${i}`);
      w.deploy('d', { web: svc({ replicas: 5 }) });
      w.pass();
      return w.placement('d');
    };
    const before = build();
    const unused = Array.from({ length: 8 }, (_, i) => `n${i}`).filter((n) => !Object.values(before).includes(n));
    expect(unused.length).toBe(3);
    for (const n of unused) expect(build(n)).toEqual(before);
  });

  it('a leader failover re-deciding from scratch writes nothing new', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 3 }), agent: svc({ placement: { mode: 'global' } }) });
    w.converge();
    w.runAll();
    w.converge();
    w.newTerm();
    expect(labels(decideOnce(w))).toEqual([]);
  });
});

describe('health and restarts', () => {
  function oneReplica(spec: Partial<ServiceSpec> = {}) {
    const w = threeNodes();
    w.deploy('d', { web: svc(spec) });
    w.converge();
    w.runAll();
    w.converge();
    return w;
  }
  const cmd = (w: World) => w.list<ReplicaCommand>(keys.commandsOf())[0]?.value;

  it('exited → restart command; waits for the ack; backs off; 3 restarts then restart_exhausted; next apply restores the budget', () => {
    const w = oneReplica();
    w.observe('d-web-0', 'exited', { exitCode: 1, details: 'exited with code 1' });
    let p = w.pass();
    expect(p.restart).toMatchObject([{ replica: 'd-web-0', cause: 'exited', restarts: 1, seq: 1 }]);
    expect(cmd(w)).toMatchObject({ spec: { op: 'restart', seq: 1 }, status: { restarts: 1, generation: 1, lastRestartAt: iso(w.now) } });
    expect(cmd(w)!.spec.reason).toContain('exited: exited with code');
    // Not executed yet: nothing more, however long.
    w.advance(100);
    expect(w.pass().acts).toEqual([]);
    // Executed, and it failed again: the back-off (500 ms after the first restart) must pass.
    w.ack('d-web-0', 'exited');
    p = w.pass();
    expect(p.restart).toEqual([]);
    expect(p.wakeAt).toBe(Date.parse(cmd(w)!.status!.lastRestartAt!) + 500);
    w.advance(400);
    expect(w.pass().restart).toMatchObject([{ restarts: 2, seq: 2 }]);
    w.ack('d-web-0', 'degraded');
    w.advance(999);
    expect(w.pass().restart).toEqual([]);
    w.advance(1);
    expect(w.pass().restart).toMatchObject([{ cause: 'degraded', restarts: 3, seq: 3 }]);
    // Degraded (running, health failing): exhausted where it is (an exited one would relocate once: below).
    w.ack('d-web-0', 'degraded');
    w.advance(5_000);
    p = w.pass();
    expect(p.restart).toEqual([]);
    expect(p.commandStatus).toMatchObject([{ kind: 'exhaust', status: { exhausted: true, restarts: 3, generation: 1 } }]);
    expect(scheduling(w, 'd', 'web')!.restartExhausted).toEqual(['d-web-0']);
    expect(w.auditOf('replica_restarted')).toHaveLength(3);
    expect(w.auditOf('restart_exhausted')).toHaveLength(1);
    w.advance(60_000);
    expect(labels(w.pass())).toEqual([]);
    // The next apply: restarted at once, with a fresh budget.
    w.deploy('d', { web: svc({ env: { A: '1' } }) });
    p = w.pass();
    expect(p.restart).toMatchObject([{ restarts: 1, seq: 4 }]);
    expect(scheduling(w, 'd', 'web')!.restartExhausted).toBeUndefined();
  });

  /** Fails d-web-0 (exited) until its budget is spent; returns the pass that spent it. */
  function crashLoop(w: World, how: Parameters<World['ack']>[2] = { exitCode: 1 }): SchedulerPlan {
    let p = w.pass();
    for (let i = 0; i < 3; i++) {
      w.ack('d-web-0', 'exited', how);
      w.advance(10_000);
      p = w.pass();
    }
    return p;
  }
  const nodeOf = (w: World, id = 'd-web-0') => w.list<ReplicaDesired>(keys.desiredOf()).map((v) => v.value).filter((d) => d.spec.replica === id).map((d) => d.spec.node);

  it('crash-loop escalation: an exited replica that spends its budget is re-placed once on another node, same id, fresh budget; the second exhaustion is final', () => {
    const w = oneReplica();
    const [from] = nodeOf(w);
    w.observe('d-web-0', 'exited', { exitCode: 1 });
    const p = crashLoop(w);
    expect(p.commandStatus).toEqual([]);
    expect(p.place).toMatchObject([{ replica: 'd-web-0', trigger: 'crash_loop' }]);
    const [to] = nodeOf(w);
    expect(to).not.toBe(from);
    const moved = w.list<ReplicaDesired>(keys.desiredOf()).find((v) => v.value.spec.replica === 'd-web-0')!.value;
    expect(moved.spec.relocated).toMatchObject({ from, generation: 1 });
    expect(w.list(keys.commandsOf())).toEqual([]); // the failing node's bookkeeping went with its copy
    expect(w.auditOf('replica_relocated')).toMatchObject([{ payload: { replica: 'd-web-0', from, to, cause: 'exited', restarts: 3 } }]);
    expect(w.get<PlacementDecision>(keys.decision('d', 'd-web-0'))?.spec).toMatchObject({ chosen: to, trigger: 'crash_loop' });
    expect(scheduling(w, 'd', 'web')?.restartExhausted).toBeUndefined();
    // It crash-loops on the new node too: now exhaustion is final, and it stays.
    w.observe('d-web-0', 'exited', { exitCode: 1 }, to);
    const q = crashLoop(w);
    expect(q.commandStatus).toMatchObject([{ kind: 'exhaust', status: { exhausted: true } }]);
    expect(nodeOf(w)).toEqual([to]);
    expect(scheduling(w, 'd', 'web')!.restartExhausted).toEqual(['d-web-0']);
    expect(w.auditOf('replica_relocated')).toHaveLength(1);
  });

  it('crash-loop escalation leaves alone: a stateful replica, a single-node cluster, a replica its rollout is moving to a new spec, and one whose container is removed outside jaco', () => {
    // docker rm is no fault of the node: another node would not help.
    const removed = oneReplica();
    removed.observe('d-web-0', 'exited', { code: 'container_removed' });
    expect(crashLoop(removed, { code: 'container_removed' }).commandStatus).toMatchObject([{ kind: 'exhaust' }]);
    expect(removed.auditOf('replica_restarted').map((a) => a.payload.cause)).toEqual(['removed', 'removed', 'removed']);


    const stateful = oneReplica({ volumes: [{ type: 'volume', source: 'data', target: '/d' }] });
    stateful.observe('d-web-0', 'exited', { exitCode: 1 });
    expect(crashLoop(stateful).commandStatus).toMatchObject([{ kind: 'exhaust' }]);

    const alone = new World();
    alone.node('only');
    alone.deploy('d', { web: svc() });
    alone.converge();
    alone.runAll();
    alone.converge();
    alone.observe('d-web-0', 'exited', { exitCode: 1 });
    expect(crashLoop(alone).commandStatus).toMatchObject([{ kind: 'exhaust' }]);

    const rolling = oneReplica();
    const d = rolling.list<ReplicaDesired>(keys.desiredOf())[0]!.value;
    const plan: RolloutPlan = {
      apiVersion: 'jaco.dev/v1',
      kind: 'RolloutPlan',
      metadata: { name: 'd-web' },
      spec: { deployment: 'd', service: 'web', fromRevision: 0, toRevision: 1, fromHash: 'x'.repeat(64), toHash: d.spec.specHash, totalSteps: 1, currentStep: 1, state: 'in_progress', startedAt: iso(rolling.now), steps: [] },
    };
    rolling.put(keys.rollout('d', 'web'), plan);
    rolling.observe('d-web-0', 'exited', { exitCode: 1 });
    expect(crashLoop(rolling).commandStatus).toMatchObject([{ kind: 'exhaust' }]);
  });

  it('running past its minimum ready time clears the counter', () => {
    const w = oneReplica();
    w.observe('d-web-0', 'exited');
    w.pass();
    w.ack('d-web-0', 'running');
    const p = w.pass();
    expect(p.commandStatus).toEqual([]);
    expect(p.wakeAt).toBe(w.now + 5_000); // minReadyTime 5s by default
    w.advance(5_000);
    expect(w.pass().commandStatus).toMatchObject([{ kind: 'recover', status: { restarts: 0 } }]);
    expect(cmd(w)!.status).toEqual({ restarts: 0, generation: 1 });
  });

  it.each<[string, string, string | undefined, boolean]>([
    ['degraded (health check failing)', 'degraded', 'unhealthy', true],
    ['exited (container removed behind the agent)', 'exited', 'container_removed', true],
    ['failed to start', 'failed', 'start_failed', true],
    ['failed: invalid spec (a restart cannot help)', 'failed', 'invalid_spec', false],
    ['pulling', 'pulling', 'pulling', false],
    ['pending image pull', 'pending', 'image_pull_failed', false],
    ['starting', 'starting', undefined, false],
  ])('%s → restart: %s', (_n, state, code, restarts) => {
    const w = oneReplica();
    w.observe('d-web-0', state as never, code ? { code } : {});
    expect(decideOnce(w).restart.length).toBe(restarts ? 1 : 0);
  });

  it('a replica on a NotReady node is not restarted (its observation is stale)', () => {
    const w = oneReplica();
    const node = w.desired()[0]!.spec.node;
    w.observe('d-web-0', 'exited');
    w.nodeDown(node);
    expect(decideOnce(w).restart).toEqual([]);
  });

  it('endpoints list only ready replicas on Ready nodes, with host and ports', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 3, ports: [8080] }) });
    w.converge();
    w.runAll();
    w.pass();
    const eps = () => w.get<Endpoints>(keys.endpoints('d', 'web'))!.spec.addresses;
    expect(eps().map((a) => a.replica)).toEqual(['d-web-0', 'd-web-1', 'd-web-2']);
    expect(eps()[0]!.ports).toEqual([8080]);
    w.observe('d-web-1', 'degraded', { code: 'unhealthy' });
    w.nodeDown(w.placement('d')['d-web-2']!);
    w.pass();
    expect(eps().map((a) => a.replica)).toEqual(['d-web-0']);
  });

  it('a ready copy on a NotReady node is the last resort: listed only while no copy on a Ready node is ready', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 2, ports: [8080] }) });
    w.converge();
    w.runAll();
    w.pass();
    const eps = () => w.get<Endpoints>(keys.endpoints('d', 'web'))!.spec.addresses.map((a) => a.replica);
    const at = w.placement('d');
    expect(at['d-web-0']).not.toBe(at['d-web-1']);
    // Its heartbeat lapses: the copy on a Ready node takes all the traffic.
    w.nodeDown(at['d-web-0']!);
    w.pass();
    expect(eps()).toEqual(['d-web-1']);
    // That copy fails its health check: the one on the NotReady node is all there is.
    w.observe('d-web-1', 'degraded', { code: 'unhealthy' });
    w.pass();
    expect(eps()).toEqual(['d-web-0']);
    // It recovers: traffic goes back to the Ready node only.
    w.observe('d-web-1', 'running');
    w.pass();
    expect(eps()).toEqual(['d-web-1']);
    // A copy that is not ready is never listed, on any node.
    w.observe('d-web-0', 'degraded', { code: 'unhealthy' });
    w.observe('d-web-1', 'degraded', { code: 'unhealthy' });
    w.pass();
    expect(eps()).toEqual([]);
  });
});

describe('node lost', () => {
  function spreadOnThree() {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 3 }), db: svc({ volumes: [{ type: 'volume', source: 'data', target: '/data' }] }), agent: svc({ placement: { mode: 'global' } }) });
    w.converge();
    w.runAll();
    w.converge();
    return w;
  }

  it('within the grace nothing moves; after it, stateless replicas are re-placed in one act (same id); stateful stay as node_lost; global stay', () => {
    const w = spreadOnThree();
    const lostNode = w.placement('d', 'db')['d-db-0']!;
    const victim = Object.entries(w.placement('d', 'web')).find(([, n]) => n === lostNode)![0];
    w.nodeDown(lostNode);
    let p = w.pass();
    expect(p.replaceLost).toEqual([]);
    expect(p.wakeAt).toBe(w.now + 3_000);
    w.advance(2_999);
        expect(w.pass().replaceLost).toEqual([]);
    w.advance(1);
        p = w.pass();
    expect(p.replaceLost).toMatchObject([{ replica: victim, from: [lostNode], notReadyForMs: 3_000 }]);
    const act = p.acts.find((a) => a.label === `replace ${victim}`)!;
    // The lost node's heartbeat as judged (a newer one in the store refuses the act), the new node's eligibility and the deployment are guarded.
    expect(act.ops.map((o) => o.op)).toEqual(['delete', 'check', 'check', 'check', 'check', 'check', 'create', 'put']);
    expect(act.ops[1]).toMatchObject({ op: 'check', key: keys.heartbeat(lostNode) });
    expect(act.audit[0]).toMatchObject({ type: 'node_lost', payload: { replica: victim, node: lostNode } });
    const moved = w.desired().find((d) => d.spec.replica === victim)!;
    expect(moved.spec.node).not.toBe(lostNode);
    expect(moved.spec.index).toBeDefined();
    expect(w.get<PlacementDecision>(keys.decision('d', victim))!.spec.trigger).toBe('node_lost');
    expect(w.placement('d', 'db')).toEqual({ 'd-db-0': lostNode });
    expect(w.placement('d', 'agent')[`d-agent-${lostNode}`]).toBe(lostNode);
    expect(scheduling(w, 'd', 'db')!.nodeLost).toEqual(['d-db-0']);
    expect(w.auditOf('node_lost').filter((a) => a.payload.stranded)).toHaveLength(1);
    w.converge();
    expect(w.auditOf('node_lost').filter((a) => a.payload.stranded)).toHaveLength(1);
    // The node comes back: nothing is moved back; the stranded replica is no longer node_lost.
    w.heartbeat(lostNode);
    w.pass();
    expect(scheduling(w, 'd', 'db')!.nodeLost).toBeUndefined();
    expect(w.desired().find((d) => d.spec.replica === victim)!.spec.node).toBe(moved.spec.node);
  });

  it('a node that returned unseen and lapses again gets a new grace: the clock follows the heartbeat it judged (sim seeds 55069, 61211)', () => {
    const w = spreadOnThree();
    const n = w.placement('d', 'db')['d-db-0']!;
    w.nodeDown(n); // its lease went: the clock starts
    expect(w.pass().replaceLost).toEqual([]);
    w.advance(2_000);
    w.heartbeat(n); // back, Ready — but no pass runs while it is
    w.advance(3_500);
    w.nodeDown(n); // and its lease lapses again: absent, as at the first lapse
    let p = w.pass();
    expect(p.replaceLost).toEqual([]);
    expect(p.wakeAt).toBe(w.now + 3_000);
    w.advance(3_000);
    p = w.pass();
    expect(p.replaceLost).toMatchObject([{ from: [n], notReadyForMs: 3_000 }]);
  });

  it('a node rewriting its heartbeat with Docker down stays NotReady on one clock', () => {
    const w = spreadOnThree();
    const n = w.placement('d', 'db')['d-db-0']!;
    w.down.add(n);
    const dockerDown = () => w.put(keys.heartbeat(n), { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name: n }, spec: { node: n, time: new Date(w.now).toISOString(), intervalMs: 1000, agentVersion: 'test', dockerUp: false } });
    dockerDown();
    w.pass();
    w.advance(2_000);
    dockerDown();
    w.pass();
    w.advance(1_000);
    dockerDown();
    expect(w.pass().replaceLost).toMatchObject([{ from: [n], notReadyForMs: 3_000 }]);
  });

  it('a replica with one copy on a lost node and one on a live node (a move) is left to the move mechanism', () => {
    const w = spreadOnThree();
    const r = w.desired({ service: 'web' })[0]!;
    const dst = ['node-1', 'node-2', 'node-3'].find((n) => n !== r.spec.node)!;
    w.replica('d', 'web', r.spec.index!, dst, { move: { id: 'm', from: r.spec.node, by: 'drain', startedAt: iso(w.now), deadline: iso(w.now + 60_000) } });
    w.nodeDown(r.spec.node);
    w.pass();
    w.advance(10_000);
    expect(w.pass().replaceLost.filter((x) => x.replica === r.spec.replica)).toEqual([]);
  });

  it('a node removed from the cluster (its removal recorded) is lost at once', () => {
    const w = spreadOnThree();
    const n = w.placement('d', 'web')['d-web-0']!;
    w.removeNode(n);
    expect(w.pass().replaceLost.map((x) => x.replica)).toContain('d-web-0');
  });

  // The recorded-removal rule (api/nodes.ts nodeRemoved): absence alone is a node the store lost.
  it.each<[string, (w: World, n: string) => void, boolean]>([
    ['key and heartbeat gone, removal recorded', (w, n) => w.removeNode(n), true],
    ['key and heartbeat gone, no record (a store restored or wiped)', (w, n) => (w.remove(keys.node(n)), w.nodeDown(n)), false],
    ['key gone, heartbeat alive, no record', (w, n) => w.remove(keys.node(n)), false],
    ['key gone, a drain that is not a removal', (w, n) => (w.remove(keys.node(n)), w.nodeDown(n), w.put(keys.drain(n), { apiVersion: 'jaco.dev/v1', kind: 'NodeDrain', metadata: { name: n }, spec: { node: n, timeout: '5m', force: false, remove: false, requestedAt: iso(w.now) }, status: { state: 'completed', replicas: {} } })), false],
  ])('%s: replaced at once %s', (_, gone, atOnce) => {
    const w = spreadOnThree();
    const n = w.placement('d', 'web')['d-web-0']!;
    gone(w, n);
    expect(w.pass().replaceLost.map((x) => x.replica).includes('d-web-0')).toBe(atOnce);
    if (atOnce) return;
    // Lost like any NotReady node: after the grace, its stateless replicas are re-placed (same id).
    w.advance(TEST_CONFIG.nodeLostGraceMs);
    const later = w.pass().replaceLost.map((x) => x.replica).includes('d-web-0');
    // A node whose heartbeat is alive is Ready, key or not: nothing moves.
    expect(later).toBe(!w.get(keys.heartbeat(n)));
  });

  it('a node whose stored value cannot be read is not gone: its replicas stay, with no grace spent', () => {
    const w = spreadOnThree();
    const n = w.placement('d', 'web')['d-web-0']!;
    w.store.putRaw(keys.node(n), JSON.stringify({ ...w.get(keys.node(n))!, spec: { unschedulable: 'yes' } }));
    w.advance(10_000);
    expect(w.pass().replaceLost).toEqual([]);
    // Never readable: frozen, still not gone.
    w.store.putRaw(keys.node(n), '{"kind":"Node","metadata":');
    w.advance(10_000);
    const p = w.pass();
    expect(p.replaceLost).toEqual([]);
    expect(p.stop).toEqual([]);
  });

  it('with nowhere to go, the lost replica stays and the service says why', () => {
    const w = new World();
    w.node('a');
    w.deploy('d', { web: svc() });
    w.converge();
    w.nodeDown('a');
    w.pass();
    w.advance(5_000);
    const p = w.pass();
    expect(p.replaceLost).toEqual([]);
    expect(scheduling(w, 'd', 'web')).toMatchObject({ desired: 1, placed: 1, unschedulable: { reason: 'no_nodes_active', count: 1 } });
  });
});

describe('dependencies (dependsOn)', () => {
  it('service_healthy: nothing of the dependent is placed until every replica of its dependency is ready', () => {
    const w = threeNodes();
    const db = svc({ replicas: 2, healthcheck: { test: ['CMD', 'true'], interval: '1s' } });
    w.deploy('d', { db, web: svc({ replicas: 2, dependsOn: { db: { condition: 'service_healthy' } } }) });
    w.pass();
    expect(Object.keys(w.placement('d')).sort()).toEqual(['d-db-0', 'd-db-1']);
    expect(scheduling(w, 'd', 'web')).toMatchObject({ desired: 2, placed: 0, waitingForDependency: ['db'] });
    w.observe('d-db-0', 'running', { health: 'healthy' });
    w.observe('d-db-1', 'running', { health: 'starting' });
    w.pass();
    expect(w.desired({ service: 'web' })).toEqual([]); // one of two is not healthy yet
    w.observe('d-db-1', 'running', { health: 'healthy' });
    w.pass();
    expect(w.desired({ service: 'web' })).toHaveLength(2);
    expect(scheduling(w, 'd', 'web')!.waitingForDependency).toBeUndefined();
    // Replicas already placed are left alone when the dependency goes unhealthy later.
    w.observe('d-db-0', 'running', { health: 'unhealthy' });
    w.pass();
    expect(w.desired({ service: 'web' })).toHaveLength(2);
  });

  it('service_started: a running container is enough; a dependency scaled to 0 holds nothing', () => {
    const w = threeNodes();
    w.deploy('d', { cache: svc(), web: svc({ dependsOn: { cache: { condition: 'service_started' } } }) });
    w.pass();
    expect(w.desired({ service: 'web' })).toEqual([]);
    w.observe('d-cache-0', 'starting');
    w.pass();
    expect(w.desired({ service: 'web' })).toEqual([]);
    w.observe('d-cache-0', 'running');
    w.pass();
    expect(w.desired({ service: 'web' })).toHaveLength(1);
    const w2 = threeNodes();
    w2.deploy('d', { cache: svc({ replicas: 0 }), web: svc({ dependsOn: { cache: { condition: 'service_started' } } }) });
    w2.pass();
    expect(w2.desired({ service: 'web' })).toHaveLength(1);
  });
});

describe('decisions compare the deployment they followed from', () => {
  it('a deployment re-created between a "deleted" decision and its commit keeps its replicas (found by the simulation, seed 15)', () => {
    const w = threeNodes();
    w.deploy('side', { worker: svc({ replicas: 2 }) });
    w.converge();
    w.undeploy('side');
    const plan = decideOnce(w);
    expect(plan.stop.map((s) => s.reason)).toEqual(['deployment_deleted', 'deployment_deleted']);
    w.deploy('side', { worker: svc({ replicas: 2 }) }); // jaco apply lands first
    expect(w.apply(plan).filter((l) => l.startsWith('remove'))).toHaveLength(2);
    expect(w.desired({ deployment: 'side' })).toHaveLength(2);
  });
});

describe('surplus copies', () => {
  function twoCopies() {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 1 }) });
    w.converge();
    w.runAll();
    w.converge();
    const r = w.desired()[0]!;
    const other = ['node-1', 'node-2', 'node-3'].find((n) => n !== r.spec.node)!;
    return { w, id: r.spec.replica, home: r.spec.node, other };
  }

  it.each([
    ['the serving copy stays, the one not running goes', 'home'],
    ['a copy on a NotReady node goes, whatever its age', 'other'],
  ] as const)('%s (audited replica_healed, removed as duplicate)', (_name, keeper) => {
    const { w, id, home, other } = twoCopies();
    w.advance(1_000);
    w.replica('d', 'web', 0, other); // a second copy outside any move (a hand edit)
    if (keeper === 'other') {
      w.observe(id, 'running', {}, other);
      w.nodeDown(home);
    }
    const p = w.pass();
    const kept = keeper === 'home' ? home : other;
    const gone = keeper === 'home' ? other : home;
    expect(p.stop).toEqual([{ replica: id, deployment: 'd', service: 'web', nodes: [gone], reason: 'duplicate' }]);
    expect(w.auditOf('replica_healed')).toMatchObject([{ payload: { replica: id, kept: [kept], removed: [gone] } }]);
    expect(w.desired().map((d) => d.spec.node)).toEqual([kept]);
    expect(p.place).toEqual([]); // counted once: nothing placed to make up for it
    expect(labels(w.pass())).not.toContain(`heal ${id}`);
  });

  it('among equals the earliest placed copy stays', () => {
    const { w, id, home, other } = twoCopies();
    w.advance(1_000);
    w.replica('d', 'web', 0, other);
    w.observe(id, 'running', {}, other);
    w.pass();
    expect(w.desired().map((d) => d.spec.node)).toEqual([home]);
  });

  it('a source moving to a copy that does not exist forgets it; a real move is left alone', () => {
    const { w, id, home, other } = twoCopies();
    const src = w.desired()[0]!;
    w.put(keys.desired(home, id), { ...src, spec: { ...src.spec, movingTo: { id: 'm1', node: other, by: 'drain' } } });
    // With its destination present the move is its mover's business.
    w.replica('d', 'web', 0, other, { move: { id: 'm1', from: home, by: 'drain', startedAt: iso(w.now), deadline: iso(w.now + 60_000) } });
    expect(labels(w.pass())).not.toContain(`heal ${id}`);
    w.remove(keys.desired(other, id)); // the destination deleted by hand: the marker is stale
    const p = w.pass();
    expect(labels(p)).toContain(`heal ${id}`);
    expect(p.stop).toEqual([]);
    expect(w.desired()[0]!.spec.movingTo).toBeUndefined();
    expect(w.auditOf('replica_healed')).toMatchObject([{ payload: { replica: id, removed: [], staleMoveTo: [other] } }]);
  });

  it('a third copy beside a move in flight goes; the move keeps its source and destination', () => {
    const { w, id, home } = twoCopies();
    const [dst, third] = ['node-1', 'node-2', 'node-3'].filter((n) => n !== home) as [string, string];
    const src = w.desired()[0]!;
    w.put(keys.desired(home, id), { ...src, spec: { ...src.spec, movingTo: { id: 'm1', node: dst, by: 'rebalancer' } } });
    w.replica('d', 'web', 0, dst, { move: { id: 'm1', from: home, by: 'rebalancer', startedAt: iso(w.now), deadline: iso(w.now + 60_000) } });
    w.replica('d', 'web', 0, third);
    const p = w.pass();
    expect(p.stop).toEqual([{ replica: id, deployment: 'd', service: 'web', nodes: [third], reason: 'duplicate' }]);
    expect(w.desired().map((d) => d.spec.node).sort()).toEqual([dst, home].sort());
  });
});

describe('status', () => {
  it('keeps the rollout controller\'s field and is written only when it changed', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc() });
    w.converge();
    const cur = w.get<DeploymentStatus>(keys.deploymentStatus('d'))!;
    const rollout = { appliedRevision: 1, updatedAt: iso(T0), services: {} };
    w.put(keys.deploymentStatus('d'), { ...cur, status: { ...cur.status, rollout } });
    w.advance(1000);
    expect(labels(w.pass())).toEqual([]);
    w.deploy('d', { web: svc({ replicas: 2 }) });
    w.pass();
    const st = w.get<DeploymentStatus>(keys.deploymentStatus('d'))!.status;
    expect(st.rollout).toEqual(rollout);
    expect(st.scheduling).toMatchObject({ observedGeneration: 2, services: { web: { desired: 2, placed: 2 } } });
  });

  it('cleans up commands whose desired key is gone (e.g. after a move completed)', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc() });
    w.converge();
    w.put(keys.command('node-9', 'd-web-0'), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: 'd-web-0' }, spec: { replica: 'd-web-0', op: 'restart', seq: 1, issuedAt: iso(T0), reason: 'x' }, status: { restarts: 0, generation: 1 } });
    const p = w.pass();
    expect(p.cleanup).toEqual([{ key: 'commands/node-9/d-web-0', why: 'its replica has no desired key on that node' }]);
  });

  it("deletes a removed node's last reports (guarded on the node key still absent), never a registered lost node's", () => {
    const w = threeNodes();
    w.deploy('d', { web: svc() });
    w.converge();
    const report = (node: string, replica: string) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: replica }, status: { replica, node, deployment: 'd', service: 'web', state: 'running', revision: 1, specHash: 'x', health: 'none', observedAt: iso(T0) } });
    w.put(keys.observed('gone', 'd-web-7'), report('gone', 'd-web-7'));
    w.removeNode('gone');
    // A node whose key the store lost (no removal recorded) keeps its reports: its agent registers again.
    w.put(keys.observed('lost', 'd-web-9'), report('lost', 'd-web-9'));
    // node-3 is lost (NotReady) but still registered: its agent may come back and settle its reports.
    w.nodeDown('node-3');
    w.put(keys.observed('node-3', 'd-web-8'), report('node-3', 'd-web-8'));
    const p = w.pass();
    expect(p.cleanup).toContainEqual({ key: 'observed/gone/d-web-7', why: 'node gone was removed' });
    expect(p.cleanup.map((c) => c.key)).not.toContain('observed/node-3/d-web-8');
    expect(p.cleanup.map((c) => c.key)).not.toContain('observed/lost/d-web-9');
    const act = p.acts.find((a) => a.label === 'cleanup observed/gone/d-web-7')!;
    expect(act.ops).toContainEqual({ op: 'check', key: keys.node('gone'), modRevision: 0 });
    expect(w.get(keys.observed('gone', 'd-web-7'))).toBeUndefined();
  });

  it('every desired key is created, never overwritten', () => {
    const w = threeNodes();
    w.deploy('d', { web: svc({ replicas: 6 }), agent: svc({ placement: { mode: 'global' } }) });
    const p = w.pass();
    for (const a of p.acts) for (const o of a.ops) if (o.key.startsWith('desired/')) expect(o.op).toBe('create');
    expect(w.desired().every((d: ReplicaDesired) => d.spec.placedAt === iso(T0))).toBe(true);
  });
});

describe('holding the hole coalescing made (issue 17)', () => {
  const svcMem = (memory: string, extra: Partial<ServiceSpec> = {}) => svc({ replicas: 1, resources: { memory }, ...extra });

  /**
   * Nodes a and b (1 GiB). filler-web-0 (500 MiB) was just moved from b to a by a coalescing move that made
   * room on b for shop/big (600 MiB), which the scheduler's last pass reported unschedulable.
   */
  function holed(opts: { moveAgoMs?: number; pending?: boolean } = {}): World {
    const w = new World();
    w.node('a', { memory: '1Gi' });
    w.node('b', { memory: '1Gi' });
    w.deploy('filler', { web: svcMem('500Mi') });
    w.replica('filler', 'web', 0, 'a', { movedFrom: { node: 'b', by: 'rebalancer', at: iso(w.now - (opts.moveAgoMs ?? 1_000)), forPending: { deployment: 'shop', service: 'big', node: 'b' } } });
    const st: DeploymentStatus = {
      apiVersion: 'jaco.dev/v1',
      kind: 'DeploymentStatus',
      metadata: { name: 'shop' },
      status: { scheduling: { observedGeneration: 1, updatedAt: iso(w.now), services: { big: { desired: 1, placed: 0, ...(opts.pending === false ? {} : { unschedulable: { reason: 'no_capacity_memory', count: 1, message: 'x', nodes: {} } }) } } } },
    };
    w.put(keys.deploymentStatus('shop'), st);
    // Another service, applied meanwhile, that would fit on b too — and sorts first by name.
    w.deploy('aaa', { web: svcMem('600Mi') });
    w.deploy('shop', { big: svcMem('600Mi') });
    return w;
  }
  const nodeOf = (w: World, id: string) => w.list<ReplicaDesired>(keys.desiredOf()).find((v) => v.value.spec.replica === id)?.value.spec.node;

  it('the hole on b goes to shop/big; the other service is not placed there, and its decision says why', () => {
    const w = holed();
    w.pass();
    expect(nodeOf(w, 'shop-big-0')).toBe('b');
    expect(nodeOf(w, 'aaa-web-0')).toBeUndefined();
    const u = scheduling(w, 'aaa', 'web')!.unschedulable!;
    expect(u.nodes.b).toContain('held for shop/big: the rescheduler made room here for it');
  });

  it('released once the pending service is placed (its status clears) or after HOLE_HOLD_MS', () => {
    const placed = holed({ pending: false });
    placed.pass();
    expect(nodeOf(placed, 'aaa-web-0')).toBe('b');
    const stale = holed({ moveAgoMs: HOLE_HOLD_MS + 1 });
    stale.pass();
    expect(nodeOf(stale, 'aaa-web-0')).toBe('b');
  });
});
