// Table tests of the drain core, driven through its world on the one table-test harness
// (test/support/harness.ts): stored objects with etcd's revisions, the acts decide plans applied
// with their compare-and-swap preconditions (one act all-or-nothing), and node-agents simulated
// by setting observed state. Every decision is recorded, so invariants can be checked over a
// whole drain.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { specHash, withDefaults } from '../../src/api/spec.js';
import {
  API_VERSION,
  type Node,
  type NodeDrain,
  type NodeDrainSpec,
  type ObservedState,
  type PlacementDecision,
  type ReplicaDesired,
  type ReplicaDesiredSpec,
  type ReplicaObserved,
  type ReplicaObservedStatus,
  type ServiceSpec,
} from '../../src/api/types.js';
import { replicaRunning } from '../../src/api/readiness.js';
import { GiB, iso, StoreWorld, T0 } from '../../test/support/harness.js';
import { drainSnapshot } from './index.js';
import { decide, type DrainDecision, type DrainMetricEvent, type DrainSnapshot } from './decide.js';
import { ALL_REPLICA_REASONS, DRAIN_ABORT_REASONS, DRAIN_MOVE_RESULTS } from '../../src/api/reasons/drain.js';

const TIMEOUT = 60_000;

const web = withDefaults({ image: 'jaco-demo/busybox:1', replicas: 3, healthcheck: { test: ['CMD', 'true'], interval: '1s' } });
const packed = withDefaults({ image: 'jaco-demo/busybox:1', replicas: 2, placement: { mode: 'pack' }, healthcheck: { test: ['CMD', 'true'] } });
const agent = withDefaults({ image: 'jaco-demo/busybox:1', placement: { mode: 'global' } });
const db = withDefaults({ image: 'jaco-demo/busybox:1', volumes: [{ type: 'volume', source: 'data', target: '/data' }] });
const plain = withDefaults({ image: 'jaco-demo/busybox:1', update: { minReadyTime: '5s' } });

/** The drain's world on the one table-test harness (test/support/harness.ts). */
class World extends StoreWorld<DrainMetricEvent> {
  readonly decisions: DrainDecision[] = [];

  constructor(nodes = ['node-1', 'node-2', 'node-3'], memory = 4 * GiB) {
    super();
    for (const n of nodes) this.addNode(n, memory);
  }

  addNode(name: string, memory = 4 * GiB, spec: Node['spec'] = {}): void {
    this.putNode(name, { memoryBytes: memory, spec });
  }

  heartbeat(name: string, at = this.now): void {
    this.putHeartbeat(name, at);
  }

  replica(id: string, node: string, spec: ServiceSpec, opts: { state?: ObservedState; index?: number; extra?: Partial<ReplicaDesiredSpec> } = {}): void {
    const [deployment, service] = id.split('-');
    const d = this.desire({ replica: id, deployment: deployment!, service: service!, node, ...(opts.index !== undefined ? { index: opts.index } : {}), revision: 1, specHash: specHash(spec), template: spec, placedAt: iso(T0 - 3_600_000), ...opts.extra });
    if (opts.state !== undefined) this.report(d, opts.state, { health: spec.healthcheck ? 'healthy' : 'none' });
  }

  /** What the agent of `node` reports for a replica (running and healthy unless told otherwise). */
  observe(node: string, id: string, state: ObservedState, extra: Partial<ReplicaObservedStatus> = {}): void {
    const d = this.get<ReplicaDesired>(keys.desired(node, id))!;
    this.report(d, state, { health: d.spec.template.healthcheck ? 'healthy' : 'none', ...extra });
  }

  /** What `jaco node drain` writes. */
  drain(host: string, spec: Partial<NodeDrainSpec> = {}): void {
    this.put(keys.drain(host), {
      apiVersion: API_VERSION,
      kind: 'NodeDrain',
      metadata: { name: host },
      spec: { node: host, timeout: '1m', force: false, remove: false, requestedAt: iso(this.now), ...spec },
    } satisfies NodeDrain);
  }

  drainOf(host: string): NodeDrain {
    return this.get<NodeDrain>(keys.drain(host))!;
  }

  /** Replica id → nodes holding a desired copy. */
  placement(): Record<string, string[]> {
    const out: Record<string, string[]> = {};
    for (const d of this.under<ReplicaDesired>('desired/')) (out[d.value.spec.replica] ??= []).push(d.value.spec.node);
    return out;
  }

  snapshot(): DrainSnapshot {
    return drainSnapshot(this.cache);
  }

  /** One pass: decide, then apply each act all-or-nothing with its preconditions. */
  pass(): DrainDecision {
    const d = decide(this.snapshot(), this.now, { drainTimeoutMs: 300_000 });
    this.decisions.push(d);
    // The agent of a node whose desired key went removes the container and its observed key.
    this.commit(d, (act) => {
      for (const o of act.ops) if (o.op === 'delete' && o.key.startsWith('desired/')) this.remove(o.key.replace(/^desired\//, 'observed/'));
    });
    // Every reason the core writes is in the closed vocabulary (status, audit and metric labels).
    for (const dr of this.under<NodeDrain>('drains/')) {
      for (const r of Object.values(dr.value.status?.replicas ?? {})) if (r.reason) expect(ALL_REPLICA_REASONS).toHaveProperty(r.reason);
      if (dr.value.status?.reason) expect(DRAIN_ABORT_REASONS).toHaveProperty(dr.value.status.reason);
    }
    for (const m of d.acts.flatMap((a) => a.metrics)) expect(DRAIN_MOVE_RESULTS).toHaveProperty(m.result);
    return d;
  }

  /** The agents: every desired copy that is not suspended runs (healthy), started `ago` ms before now. */
  runAll(ago = 60_000): void {
    for (const d of this.under<ReplicaDesired>('desired/')) {
      const s = d.value.spec;
      const o = this.get<ReplicaObserved>(keys.observed(s.node, s.replica));
      if (s.suspended) this.observe(s.node, s.replica, 'stopped', { code: s.suspended.reason });
      else if (o?.status.state !== 'running') this.observe(s.node, s.replica, 'running', { startedAt: iso(this.now - ago) });
    }
  }

  advance(ms: number): void {
    this.now += ms;
    this.beat();
  }

  /** Replicas of a service with a running copy (a moving replica counts once). */
  runningOf(service: string): number {
    const ids = new Set<string>();
    for (const o of this.under<ReplicaObserved>('observed/')) if (o.value.status.service === service && replicaRunning(o.value)) ids.add(o.value.status.replica);
    return ids.size;
  }

  types(): string[] {
    return this.audit.map((a) => a.type);
  }
}

/** node-1..3, a 3-replica spread service (one per node), a 2-replica pack service on node-2, a global service. */
function cluster(): World {
  const w = new World();
  ['node-1', 'node-2', 'node-3'].forEach((n, i) => w.replica(`d-web-${i}`, n, web, { state: 'running', index: i }));
  w.replica('d-pack-0', 'node-2', packed, { state: 'running', index: 0 });
  w.replica('d-pack-1', 'node-2', packed, { state: 'running', index: 1 });
  for (const n of ['node-1', 'node-2', 'node-3']) w.replica(`d-agent-${n}`, n, agent, { state: 'running' });
  return w;
}

describe('drain: a full drain, pass by pass', () => {
  it('moves movable replicas make-before-break, drops the global one, never drops a service below replicas − 1, completes', () => {
    const w = cluster();
    w.drain('node-2');
    const minRunning = { web: 3, pack: 2 };
    for (let i = 0; i < 40 && w.drainOf('node-2').status?.state !== 'completed'; i++) {
      w.pass();
      w.advance(1000);
      w.runAll();
      minRunning.web = Math.min(minRunning.web, w.runningOf('web'));
      minRunning.pack = Math.min(minRunning.pack, w.runningOf('pack'));
    }
    const drain = w.drainOf('node-2');
    expect(drain.status).toMatchObject({ state: 'completed', startedAt: iso(T0) });
    expect(drain.status!.replicas).toMatchObject({
      'd-agent-node-2': { state: 'dropped', reason: 'global_replica' },
      'd-pack-0': { state: 'done' },
      'd-pack-1': { state: 'done' },
      'd-web-1': { state: 'done' },
    });
    const where = w.placement();
    for (const id of ['d-web-1', 'd-pack-0', 'd-pack-1']) expect(where[id]).toHaveLength(1);
    expect(Object.values(where).flat()).not.toContain('node-2');
    expect(where['d-agent-node-2']).toBeUndefined();
    // Make-before-break with a budget of 1: never more than one replica of a service down.
    expect(minRunning).toEqual({ web: 3, pack: 2 });
    // The global replica's drop is recorded in its own act (in the pass that started the drain).
    expect(w.types().filter((t) => t !== 'replica_moved' && t !== 'drain_move_started')).toEqual(['drain_replica_dropped', 'drain_started', 'drain_completed']);
    // Every move is recorded when it starts (the simulation's "every act has its audit record"), and when it ends.
    expect(w.audit.filter((a) => a.type === 'drain_move_started').map((a) => a.payload.replica).sort()).toEqual(w.audit.filter((a) => a.type === 'replica_moved').map((a) => a.payload.replica).sort());
    expect(w.audit.filter((a) => a.type === 'replica_moved').map((a) => a.payload.replica)).toEqual(expect.arrayContaining(['d-web-1', 'd-pack-0', 'd-pack-1']));
    expect(w.audit.find((a) => a.type === 'drain_completed')!.payload).toMatchObject({ node: 'node-2', moved: 3, dropped: 1, stopped: 0 });
    expect(w.metrics.filter((m) => m.result === 'completed')).toHaveLength(3);
    expect(w.conflicts).toBe(0);
    // The pack replicas moved one at a time: the budget refused the second while the first moved.
    const refusals = w.decisions.flatMap((d) => d.notes).filter((n) => n.replica.startsWith('d-pack'));
    expect(refusals.some((n) => n.note.includes('maxUnavailable 1'))).toBe(true);
  });

  it('first pass: draining, drain_started, one move per service, each to a node the placement core picks', () => {
    const w = cluster();
    w.drain('node-2');
    const d = w.pass();
    const st = w.drainOf('node-2').status!;
    expect(st.state).toBe('draining');
    expect(st.replicas['d-web-1']).toMatchObject({ state: 'moving', deadline: iso(T0 + TIMEOUT) });
    expect(['node-1', 'node-3']).toContain(st.replicas['d-web-1']!.dst);
    expect(st.replicas['d-pack-0']).toMatchObject({ state: 'moving' });
    expect(st.replicas['d-pack-1']).toMatchObject({ state: 'pending', reason: 'budget_exceeded' });
    expect(st.replicas['d-pack-1']!.deadline).toBeUndefined(); // waiting on the budget does not start its clock
    expect(st.replicas['d-agent-node-2']).toMatchObject({ state: 'dropped', reason: 'global_replica' });
    const dst = w.get<ReplicaDesired>(keys.desired(st.replicas['d-web-1']!.dst!, 'd-web-1'))!;
    expect(dst.spec.move).toMatchObject({ from: 'node-2', by: 'drain', startedAt: iso(T0), deadline: iso(T0 + TIMEOUT) });
    expect(w.get(keys.desired('node-2', 'd-web-1'))).toBeDefined(); // the source keeps running
    expect(w.audit.find((a) => a.type === 'drain_started')).toMatchObject({ type: 'drain_started', payload: { node: 'node-2', replicas: 4, timeout: '1m', force: false, remove: false } });
    // Each move start is recorded with its act (found by the simulation: starts were unaudited).
    expect(w.audit.filter((a) => a.type === 'drain_move_started').map((a) => a.payload.replica).sort()).toEqual(['d-pack-0', 'd-web-1']);
    expect(w.audit.find((a) => a.payload.replica === 'd-web-1')).toMatchObject({ payload: { src: 'node-2', dst: st.replicas['d-web-1']!.dst, by: 'drain' } });
    // The replica's placement decision moves with it: `jaco explain d-web-1` explains its new node.
    const decision = w.get<PlacementDecision>(keys.decision('d', 'd-web-1'))!.spec;
    expect(decision).toMatchObject({ chosen: st.replicas['d-web-1']!.dst, trigger: 'drain', actor: 'drain' });
    expect(decision.why).toMatch(/^drained off node-2: /);
    expect(decision.verdicts.find((v) => v.node === 'node-2')?.rejected?.filter).toMatch(/eligibility|excluded/);
    expect(d.inProgress).toBe(1);
    expect(d.wakeAt).toBe(T0 + TIMEOUT);
  });

  it('a cluster-network replica moves to an address of its destination, claimed with the move start; a destination without subnets is refused', () => {
    const w = new World(['node-1', 'node-2']);
    const app = withDefaults({ image: 'jaco-demo/busybox:1', replicas: 2, network: 'cluster' });
    w.put(keys.networkConfig(), { apiVersion: API_VERSION, kind: 'NetworkConfig', metadata: { name: 'network' }, spec: { ipv4: '10.208.0.0/12', ipv6: 'fd4a:17c2:9e01::/48' } });
    w.replica('d-app-0', 'node-2', app, { index: 0, extra: { address: { ipv4: '10.208.1.7/24', ipv6: 'fd4a:17c2:9e01:1::7/64' } } });
    w.replica('d-app-1', 'node-1', app, { index: 1, extra: { address: { ipv4: '10.208.0.9/24', ipv6: 'fd4a:17c2:9e01::9/64' } } });
    w.runAll();
    // node-1 has no subnets yet: no destination (the placer's ipam filter), the replica waits.
    w.drain('node-2');
    w.pass();
    expect(w.drainOf('node-2').status!.replicas['d-app-0']).toMatchObject({ state: 'blocked', reason: 'ipam_exhausted' });
    w.put(keys.subnet('node-1'), { apiVersion: API_VERSION, kind: 'NodeSubnet', metadata: { name: 'node-1' }, spec: { node: 'node-1', index: 0, ipv4: '10.208.0.0/24', ipv6: 'fd4a:17c2:9e01::/64', since: iso(T0) } });
    w.put(keys.address('node-1', 9), { apiVersion: API_VERSION, kind: 'AddressClaim', metadata: { name: 'node-1.9' }, spec: { node: 'node-1', replica: 'd-app-1', deployment: 'd', service: 'app', ipv4: '10.208.0.9/24', ipv6: 'fd4a:17c2:9e01::9/64', since: iso(T0) } });
    w.pass();
    const dst = w.get<ReplicaDesired>(keys.desired('node-1', 'd-app-0'))!;
    expect(dst.spec.address!.ipv4).toMatch(/^10\.208\.0\.\d+\/24$/);
    expect(dst.spec.address!.ipv4).not.toBe('10.208.0.9/24');
    const n = Number(dst.spec.address!.ipv4.split('/')[0]!.split('.')[3]);
    expect(w.get(keys.address('node-1', n))).toMatchObject({ spec: { node: 'node-1', replica: 'd-app-0', ipv4: dst.spec.address!.ipv4, ipv6: dst.spec.address!.ipv6 } });
  });

  it('is deterministic: the same snapshot in any order gives the same decision', () => {
    const w = cluster();
    w.drain('node-2');
    const s = w.snapshot();
    const a = decide(s, T0, { drainTimeoutMs: 300_000 });
    const shuffled: DrainSnapshot = { ...s, drains: [...s.drains].reverse(), nodes: new Map([...s.nodes].reverse()), volumeHomes: [...s.volumeHomes].reverse() };
    expect(decide(shuffled, T0, { drainTimeoutMs: 300_000 })).toEqual(a);
  });

  it('a new leader resumes from drains/<host> and the move markers: nothing is started twice', () => {
    const w = cluster();
    w.drain('node-2');
    w.pass();
    const before = w.placement();
    // A second leader (or the same one after failover) decides on the same stored state.
    const d = w.pass();
    expect(d.acts).toEqual([]);
    expect(w.placement()).toEqual(before);
  });
});

describe('drain: the destination leaves between decision and commit', () => {
  it('a cordon of the chosen destination refuses the move start; the next pass picks another node', () => {
    const w = new World(['node-1', 'node-2', 'node-3', 'node-4']);
    w.replica('d-web-0', 'node-2', web, { state: 'running', index: 0 });
    w.drain('node-2');
    const d = decide(drainSnapshot(w.cache), w.now, { drainTimeoutMs: 300_000 });
    const start = d.acts.find((a) => a.label.startsWith('move d-web-0'))!;
    const dst = /→(\S+):/.exec(start.label)![1]!;
    w.addNode(dst, 4 * GiB, { unschedulable: true }); // `jaco node cordon` lands first
    expect(w.applyAct(start.ops)).toBe(false);
    expect(w.placement()['d-web-0']).toEqual(['node-2']);
    w.pass();
    const copies = w.placement()['d-web-0']!;
    expect(copies).toHaveLength(2);
    expect(copies).not.toContain(dst);
  });
});

describe('drain: per-replica outcomes', () => {
  it.each<[string, (w: World) => void, Partial<NodeDrainSpec>, Record<string, unknown>]>([
    ['stateful without --force: blocked, stays', (w) => w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 }), {}, { state: 'blocked', reason: 'stateful_replica' }],
    ['stateful with --force: stopped with node_drained', (w) => w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 }), { force: true }, { state: 'stopped', reason: 'node_drained' }],
    ['already suspended: stopped', (w) => w.replica('d-db-0', 'node-2', db, { state: 'stopped', index: 0, extra: { suspended: { reason: 'node_drained', at: iso(T0 - 1000) } } }), {}, { state: 'stopped', reason: 'node_drained' }],
    ['global: dropped', (w) => w.replica('d-agent-node-2', 'node-2', agent, { state: 'running' }), {}, { state: 'dropped', reason: 'global_replica' }],
    ['a job running: its run finishes first, nothing moves', (w) => w.replica('d-db-0', 'node-2', withDefaults({ image: 'x', mode: 'job' }), { state: 'running', index: 0 }), {}, { state: 'pending', reason: 'job_running' }],
    ['a job that ended: dropped, not moved', (w) => w.replica('d-db-0', 'node-2', withDefaults({ image: 'x', mode: 'job' }), { state: 'exited', index: 0 }), {}, { state: 'dropped', reason: 'job_replica' }],
    ['not running (crash loop): moved anyway, make-before-break', (w) => w.replica('d-db-0', 'node-2', plain, { state: 'exited', index: 0 }), {}, { state: 'moving', dst: expect.stringMatching(/^node-[13]$/) }],
    ['never observed: moved anyway', (w) => w.replica('d-db-0', 'node-2', plain, { index: 0 }), {}, { state: 'moving', dst: expect.stringMatching(/^node-[13]$/) }],
    [
      'unschedulable elsewhere: blocked with the placement reason and a deadline',
      (w) => w.replica('d-db-0', 'node-2', withDefaults({ image: 'x', resources: { memory: '5Gi' } }), { state: 'running', index: 0 }),
      {},
      { state: 'blocked', reason: 'no_capacity_memory', deadline: iso(T0 + TIMEOUT) },
    ],
    [
      'pinned to hosts that are all taken: blocked',
      (w) => {
        const s = withDefaults({ image: 'x', replicas: 2, placement: { mode: 'hosts', hosts: ['node-2', 'node-3'] } });
        w.replica('d-db-0', 'node-2', s, { state: 'running', index: 0 });
        w.replica('d-db-1', 'node-3', s, { state: 'running', index: 1 });
      },
      {},
      { state: 'blocked', reason: 'cannot_satisfy_host_placement' },
    ],
    [
      "another actor's move out of the node in flight: waits for it",
      (w) => {
        w.replica('d-db-0', 'node-2', plain, { state: 'running', index: 0 });
        w.replica('d-db-0', 'node-3', plain, { state: 'starting', index: 0, extra: { move: { id: 'r', from: 'node-2', by: 'rebalancer', startedAt: iso(T0), deadline: iso(T0 + 60_000) } } });
      },
      {},
      { state: 'pending', reason: 'move_in_flight' },
    ],
    [
      'a move onto the node in flight: waits for it',
      (w) => {
        w.replica('d-db-0', 'node-1', plain, { state: 'running', index: 0 });
        w.replica('d-db-0', 'node-2', plain, { state: 'starting', index: 0, extra: { move: { id: 'r', from: 'node-1', by: 'rebalancer', startedAt: iso(T0), deadline: iso(T0 + 60_000) } } });
      },
      {},
      { state: 'pending', reason: 'inbound_move' },
    ],
  ])('%s', (_n, setup, spec, want) => {
    const w = new World();
    setup(w);
    w.drain('node-2', spec);
    w.pass();
    const id = Object.keys(w.drainOf('node-2').status!.replicas).sort()[0]!;
    expect(w.drainOf('node-2').status!.replicas[id]).toMatchObject(want);
  });

  it('--force: the stateful replica is suspended in place (data stays), never placed elsewhere; the drain completes', () => {
    const w = new World();
    w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 });
    w.drain('node-2', { force: true });
    w.pass();
    const d = w.get<ReplicaDesired>(keys.desired('node-2', 'd-db-0'))!;
    expect(d.spec.suspended).toEqual({ reason: 'node_drained', at: iso(T0) });
    expect(w.placement()).toEqual({ 'd-db-0': ['node-2'] });
    // The stop is an act on the replica: recorded in its transaction, naming it.
    expect(w.audit.find((a) => a.type === 'drain_replica_stopped')!.payload).toMatchObject({ replica: 'd-db-0', node: 'node-2', reason: 'node_drained' });
    w.runAll();
    w.advance(1000);
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'completed' });
    expect(w.audit.find((a) => a.type === 'drain_completed')!.payload).toMatchObject({ moved: 0, dropped: 0, stopped: 1 });
  });

  it('a completion compares the desired keys of the stopped replicas it leaves: one removed meanwhile refuses it (breadth sim seed 4453)', () => {
    const w = new World();
    w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 });
    w.drain('node-2', { force: true });
    w.pass();
    w.runAll();
    w.advance(1000);
    const stale = decide(w.snapshot(), w.now, { drainTimeoutMs: 300_000 });
    const act = stale.acts.find((a) => a.label === 'drain node-2: completed')!;
    const key = keys.desired('node-2', 'd-db-0');
    expect(act.ops).toContainEqual({ op: 'check', key, modRevision: w.versioned(key)!.modRevision });
    // A scale-down removes the stopped replica before the completion commits: its container is still there.
    w.remove(key);
    expect(w.applyAct(act.ops)).toBe(false);
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'draining', stopping: ['d-db-0'] });
    w.remove(keys.observed('node-2', 'd-db-0')); // the agent removed the container
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'completed' });
  });

  it('a drain without --force waits on a stateful replica; adding --force (a new spec) stops it', () => {
    const w = new World();
    w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 });
    w.drain('node-2');
    for (let i = 0; i < 5; i++) {
      w.pass();
      w.advance(120_000); // long past any timeout: a stateful replica waits for the operator, it does not abort the drain
    }
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'draining', replicas: { 'd-db-0': { state: 'blocked', reason: 'stateful_replica' } } });
    const cur = w.drainOf('node-2');
    w.put(keys.drain('node-2'), { ...cur, spec: { ...cur.spec, force: true } });
    w.pass();
    w.pass();
    // Not completed while the agent still reports the container running: completion is observed, not decided.
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'draining', stopping: ['d-db-0'], replicas: { 'd-db-0': { state: 'stopped', reason: 'node_drained' } } });
    w.runAll(); // the agent stopped it
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'completed', replicas: { 'd-db-0': { state: 'stopped', reason: 'node_drained' } } });
  });

  it('replicas that leave the node by other means: moved elsewhere → done, removed → dropped', () => {
    const w = new World();
    w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 });
    w.replica('d-db-1', 'node-2', db, { state: 'running', index: 1 });
    w.drain('node-2');
    w.pass();
    // The scheduler re-placed one (node lost), the operator scaled the other away.
    w.remove(keys.desired('node-2', 'd-db-0'));
    w.replica('d-db-0', 'node-3', db, { state: 'running', index: 0 });
    w.remove(keys.desired('node-2', 'd-db-1'));
    w.pass();
    expect(w.drainOf('node-2').status!.replicas).toMatchObject({ 'd-db-0': { state: 'done', dst: 'node-3' }, 'd-db-1': { state: 'dropped', reason: 'replica_removed' } });
  });

  it('an empty node drains in two passes (draining, then completed)', () => {
    const w = new World();
    w.drain('node-2');
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'draining', replicas: {} });
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'completed' });
  });
});

describe('drain: moves complete, fail, time out', () => {
  function movingWeb(spec: ServiceSpec = web): { w: World; dst: string } {
    const w = new World();
    ['node-1', 'node-2', 'node-3'].forEach((n, i) => w.replica(`d-web-${i}`, n, spec, { state: 'running', index: i }));
    w.drain('node-2');
    w.pass();
    return { w, dst: w.drainOf('node-2').status!.replicas['d-web-1']!.dst! };
  }

  it('cuts over when the replacement runs healthy, completes once the source container is gone: marker cleared, replica_moved audited', () => {
    const { w, dst } = movingWeb();
    w.advance(3000);
    w.observe(dst, 'd-web-1', 'running', { startedAt: iso(w.now - 2000) });
    // The world's agent of node-2 removes the container (and its observed key) in the same pass.
    const cut = w.pass();
    expect(cut.acts.map((a) => a.label)).toContain(`move d-web-1 node-2→${dst}: cutover`);
    expect(w.placement()['d-web-1']).toEqual([dst]);
    expect(w.get<ReplicaDesired>(keys.desired(dst, 'd-web-1'))!.spec.move).toMatchObject({ from: 'node-2', cutoverAt: iso(w.now) });
    expect(w.drainOf('node-2').status!.replicas['d-web-1']).toMatchObject({ state: 'moving', dst });
    w.pass();
    expect(w.get<ReplicaDesired>(keys.desired(dst, 'd-web-1'))!.spec.move).toBeUndefined();
    expect(w.audit.find((a) => a.type === 'replica_moved')).toMatchObject({
      deployment: 'd',
      payload: { replica: 'd-web-1', deployment: 'd', service: 'web', src: 'node-2', dst, duration: '3s', durationMs: 3000 },
    });
    expect(w.metrics).toEqual([{ result: 'completed', seconds: 3 }]);
    expect(w.drainOf('node-2').status!.replicas['d-web-1']).toMatchObject({ state: 'done', dst });
    expect(w.drainOf('node-2').status!.state).toBe('draining'); // finishes in the next pass
    w.pass();
    expect(w.drainOf('node-2').status!.state).toBe('completed');
  });

  it.each<[string, ObservedState, Partial<ReplicaObservedStatus>]>([
    ['still starting', 'starting', {}],
    ['running but unhealthy', 'degraded', { health: 'unhealthy' }],
    ['running but its health check has not passed yet', 'running', { health: 'starting' }],
  ])('waits while the replacement is %s', (_n, state, extra) => {
    const { w, dst } = movingWeb();
    w.advance(5000);
    w.observe(dst, 'd-web-1', state, extra);
    expect(w.pass().acts).toEqual([]);
    expect(w.placement()['d-web-1']).toEqual(['node-2', dst].sort());
  });

  it('a replacement that exits is abandoned at once (dst_failed) and tried on another node, each node once; then blocked, and the drain aborts at the deadline', () => {
    const w = new World(['node-1', 'node-2', 'node-3', 'node-4']);
    ['node-1', 'node-2', 'node-3'].forEach((n, i) => w.replica(`d-web-${i}`, n, web, { state: 'running', index: i }));
    w.drain('node-2');
    w.pass();
    const tried: string[] = [];
    for (let attempt = 0; attempt < 3; attempt++) {
      const dst = w.drainOf('node-2').status!.replicas['d-web-1']!.dst!;
      expect(tried, `attempt ${attempt + 1} goes to a node not tried yet`).not.toContain(dst);
      tried.push(dst);
      w.advance(2000);
      w.observe(dst, 'd-web-1', 'exited', { exitCode: 1, health: 'none' });
      w.pass(); // abandoned: the copy goes, the source keeps serving
      expect(w.placement()['d-web-1']).toEqual(['node-2']);
      expect(w.drainOf('node-2').status!.replicas['d-web-1']).toMatchObject({ state: 'pending', reason: 'dst_failed', failedOn: [...tried].sort() });
      w.pass(); // the next node, if any is left
    }
    expect(tried.sort()).toEqual(['node-1', 'node-3', 'node-4']);
    expect(w.drainOf('node-2').status!.replicas['d-web-1']).toMatchObject({ state: 'blocked', reason: 'dst_failed', failedOn: tried });
    expect(w.decisions.at(-1)!.notes).toContainEqual(expect.objectContaining({ replica: 'd-web-1', note: expect.stringMatching(/^its copy failed on node-1, node-3, node-4; /) }));
    expect(w.metrics.map((m) => m.result)).toEqual(['dst_failed', 'dst_failed', 'dst_failed']);
    // Nothing is started again while it waits; at the deadline the drain aborts saying why.
    w.advance(1000);
    expect(w.pass().acts).toEqual([]);
    w.advance(TIMEOUT);
    w.pass();
    expect(w.drainOf('node-2').status!).toMatchObject({ state: 'aborted', replicas: { 'd-web-1': { state: 'blocked', reason: 'dst_failed' } } });
    expect(w.audit.find((a) => a.type === 'drain_aborted')!.payload).toMatchObject({ replica: 'd-web-1', cause: 'dst_failed' });
    expect(w.placement()['d-web-1']).toEqual(['node-2']);
  });

  it("places a moved replica by its service's placement now, not its template's (placement is not in the spec hash)", () => {
    const w = new World();
    const pinned = withDefaults({ image: 'jaco-demo/busybox:1', placement: { mode: 'hosts', hosts: ['node-2'] } });
    w.replica('d-pin-0', 'node-2', pinned, { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    expect(w.drainOf('node-2').status!.replicas['d-pin-0']).toMatchObject({ state: 'blocked', reason: 'cannot_satisfy_host_placement' });
    // The deployment now lets the service run anywhere; its running replica's template still names node-2 alone.
    w.put(keys.deployment('d'), { apiVersion: API_VERSION, kind: 'Deployment', metadata: { name: 'd', generation: 2 }, spec: { services: { pin: { image: 'jaco-demo/busybox:1' } } } });
    w.advance(1000);
    w.pass();
    expect(w.drainOf('node-2').status!.replicas['d-pin-0']).toMatchObject({ state: 'moving' });
    expect(w.placement()['d-pin-0']).toHaveLength(2);
  });

  it('times out: the drain aborts with drain_timeout, the old replica keeps running, in-flight moves are withdrawn', () => {
    const w = new World();
    ['node-1', 'node-2', 'node-3'].forEach((n, i) => w.replica(`d-web-${i}`, n, web, { state: 'running', index: i }));
    w.replica('d-other-0', 'node-2', plain, { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    // d-other starts its move later (it was refused nothing, but say its replacement came up slowly).
    const st = w.drainOf('node-2').status!;
    expect(st.replicas['d-other-0']).toMatchObject({ state: 'moving' });
    w.advance(TIMEOUT);
    w.observe(st.replicas['d-web-1']!.dst!, 'd-web-1', 'degraded', { health: 'unhealthy' });
    w.observe(st.replicas['d-other-0']!.dst!, 'd-other-0', 'starting');
    w.pass();
    const after = w.drainOf('node-2').status!;
    expect(after).toMatchObject({ state: 'aborted', reason: 'drain_timeout', finishedAt: iso(w.now) });
    expect(after.replicas['d-web-1']).toMatchObject({ state: 'blocked', reason: 'move_timeout' });
    expect(w.placement()['d-web-1']).toEqual(['node-2']);
    expect(w.placement()['d-other-0']).toEqual(['node-2']);
    expect(w.audit.find((a) => a.type === 'drain_aborted')!.payload).toMatchObject({ node: 'node-2', reason: 'drain_timeout' });
    expect(w.metrics.map((m) => m.result).sort()).toEqual(['move_timeout', 'move_timeout']);
    // Aborted is terminal: the next passes change nothing, the node stays cordoned by its drain.
    w.advance(1000);
    expect(w.pass().acts).toEqual([]);
  });

  it('withdraws a drain move whose drain aborted in the same pass (timed-out sibling)', () => {
    const w = new World();
    w.replica('d-a-0', 'node-2', plain, { state: 'running', index: 0 });
    w.replica('d-b-0', 'node-2', plain, { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    // d-b's move started later: shift its deadline so only d-a times out.
    const bDst = w.drainOf('node-2').status!.replicas['d-b-0']!.dst!;
    const b = w.get<ReplicaDesired>(keys.desired(bDst, 'd-b-0'))!;
    w.put(keys.desired(bDst, 'd-b-0'), { ...b, spec: { ...b.spec, move: { ...b.spec.move!, deadline: iso(T0 + 10 * TIMEOUT) } } });
    w.advance(TIMEOUT);
    w.pass();
    expect(w.drainOf('node-2').status!.replicas).toMatchObject({ 'd-a-0': { state: 'blocked', reason: 'move_timeout' }, 'd-b-0': { state: 'pending', reason: 'drain_aborted' } });
    expect(w.placement()).toEqual({ 'd-a-0': ['node-2'], 'd-b-0': ['node-2'] });
    expect(w.metrics.map((m) => m.result).sort()).toEqual(['cancelled', 'move_timeout']);
  });

  it.each<[string, (w: World, dst: string) => void, string]>([
    ['failed (restart budget exhausted)', (w, dst) => w.observe(dst, 'd-web-1', 'failed', { code: 'restart_exhausted' }), 'dst_failed'],
    ['on a node that went NotReady', (w, dst) => w.remove(keys.heartbeat(dst)), 'dst_lost'],
  ])('a replacement %s is abandoned and retried within the same deadline', (_n, breakIt, reason) => {
    const { w, dst } = movingWeb();
    w.advance(10_000);
    breakIt(w, dst);
    w.pass();
    expect(w.drainOf('node-2').status!.replicas['d-web-1']).toMatchObject({ state: 'pending', reason, deadline: iso(T0 + TIMEOUT) });
    expect(w.placement()['d-web-1']).toEqual(['node-2']);
    expect(w.metrics).toEqual([{ result: reason }]);
    // The abandonment removed the destination copy: recorded in the same act (found by the simulation).
    expect(w.audit.at(-1)).toMatchObject({ type: 'drain_move_abandoned', payload: { replica: 'd-web-1', src: 'node-2', dst, by: 'drain', reason } });
    w.pass();
    const again = w.drainOf('node-2').status!.replicas['d-web-1']!;
    expect(again).toMatchObject({ state: 'moving', deadline: iso(T0 + TIMEOUT) });
    const marker = w.get<ReplicaDesired>(keys.desired(again.dst!, 'd-web-1'))!.spec.move!;
    expect(marker.deadline).toBe(iso(T0 + TIMEOUT));
    if (reason === 'dst_lost') expect(again.dst).not.toBe(dst);
  });

  it('an unschedulable replica past its deadline aborts the drain', () => {
    const w = new World();
    w.replica('d-big-0', 'node-2', withDefaults({ image: 'x', resources: { memory: '5Gi' } }), { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    w.advance(TIMEOUT / 2);
    w.pass();
    expect(w.drainOf('node-2').status!.state).toBe('draining');
    expect(w.decisions.at(-1)!.wakeAt).toBe(T0 + TIMEOUT);
    w.advance(TIMEOUT / 2);
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'aborted', reason: 'drain_timeout', replicas: { 'd-big-0': { state: 'blocked', reason: 'no_capacity_memory' } } });
    expect(w.audit.at(-1)).toMatchObject({ type: 'drain_aborted', payload: { replica: 'd-big-0', cause: 'no_capacity_memory' } });
  });

  it('a replica whose move no request could carry: blocked too_large, and the drain aborts with that reason, not a timeout (issue 29)', () => {
    const w = new World();
    // Written by hand past apply's check (apply refuses it: test/integration/cli-faults.test.ts).
    w.replica('d-huge-0', 'node-2', withDefaults({ image: 'x', env: { BLOB: 'x'.repeat(767 * 1024) } }), { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'draining', replicas: { 'd-huge-0': { state: 'blocked', reason: 'too_large' } } });
    w.advance(TIMEOUT);
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'aborted', reason: 'drain_timeout', replicas: { 'd-huge-0': { reason: 'too_large' } } });
    expect(w.audit.at(-1)).toMatchObject({ type: 'drain_aborted', payload: { replica: 'd-huge-0', cause: 'too_large' } });
  });

  it('wakes for the minimum ready time of a replacement without a health check', () => {
    const { w, dst } = movingWeb(plain);
    w.advance(1000);
    w.observe(dst, 'd-web-1', 'running', { startedAt: iso(w.now) });
    const d = w.pass();
    expect(d.acts).toEqual([]);
    expect(d.wakeAt).toBe(w.now + 5000);
    w.advance(5000);
    w.pass();
    expect(w.placement()['d-web-1']).toEqual([dst]);
  });

  it('a drain whose stored value cannot be read (a malformed timeout) is not acted on', () => {
    const w = new World();
    w.replica('d-web-0', 'node-2', web, { state: 'running', index: 0 });
    w.drain('node-2', { timeout: 'soon' });
    expect(w.pass().acts).toEqual([]);
    expect(w.drainOf('node-2').status).toBeUndefined();
  });
});

describe('drain: remove, cancel, resume', () => {
  it('remove: once drained, deletes the node, its spec and its heartbeat in the same act as state removed', () => {
    const w = new World();
    w.replica('d-agent-node-2', 'node-2', agent, { state: 'running' });
    w.put(keys.nodeSpec('node-2'), { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name: 'node-2' }, spec: { unschedulable: true } });
    w.drain('node-2', { remove: true });
    w.pass();
    expect(w.get(keys.node('node-2'))).toBeDefined();
    w.pass();
    expect(w.drainOf('node-2').status).toMatchObject({ state: 'removed' });
    expect(w.get(keys.node('node-2'))).toBeUndefined();
    expect(w.get(keys.nodeSpec('node-2'))).toBeUndefined();
    expect(w.get(keys.heartbeat('node-2'))).toBeUndefined();
    expect(w.types()).toEqual(['drain_replica_dropped', 'drain_started', 'drain_completed', 'node_removed']);
    expect(w.pass().acts).toEqual([]);
  });

  it('a removed node that rejoins (agent --rejoin) gets its removed drain retired, so it is schedulable again', () => {
    const w = new World();
    w.drain('node-2', { remove: true });
    w.pass();
    w.pass();
    expect(w.drainOf('node-2').status!.state).toBe('removed');
    // The informers may still hold the node from before the removal: that is no rejoin.
    const stale = w.snapshot();
    stale.nodes = new Map([...stale.nodes, ['node-2', { ...w.versioned<Node>(keys.node('node-1'))!, key: keys.node('node-2') }]]);
    expect(decide(stale, w.now, { drainTimeoutMs: 300_000 }).acts).toEqual([]);
    w.addNode('node-2');
    w.pass();
    expect(w.get(keys.drain('node-2'))).toBeUndefined();
  });

  it('a drain move whose drain was cancelled (key deleted) is withdrawn', () => {
    const w = new World();
    w.replica('d-web-0', 'node-2', web, { state: 'running', index: 0 });
    w.drain('node-2');
    w.pass();
    expect(w.placement()['d-web-0']).toHaveLength(2);
    w.remove(keys.drain('node-2'));
    w.pass();
    expect(w.placement()['d-web-0']).toEqual(['node-2']);
    expect(w.metrics).toEqual([{ result: 'cancelled' }]);
  });

  it.each<[string, (w: World) => void, boolean]>([
    ['uncordoned after a completed drain: resumed', (w) => w.put(keys.node('node-2'), { ...w.get<Node>(keys.node('node-2'))!, spec: { unschedulable: false } }), true],
    ['still cordoned: stays stopped', () => undefined, false],
    [
      'uncordoned but drained again: stays stopped',
      (w) => {
        w.put(keys.node('node-2'), { ...w.get<Node>(keys.node('node-2'))!, spec: { unschedulable: false } });
        w.drain('node-2', { force: true });
      },
      false,
    ],
  ])('a replica stopped by a forced drain, node %s', (_n, change, resumed) => {
    const w = new World();
    w.put(keys.node('node-2'), { ...w.get<Node>(keys.node('node-2'))!, spec: { unschedulable: true } });
    w.replica('d-db-0', 'node-2', db, { state: 'running', index: 0 });
    w.drain('node-2', { force: true });
    w.pass();
    w.runAll(); // the agent reports it stopped
    w.pass();
    expect(w.drainOf('node-2').status!.state).toBe('completed');
    change(w);
    w.pass();
    const d = w.get<ReplicaDesired>(keys.desired('node-2', 'd-db-0'))!;
    expect(d.spec.suspended === undefined).toBe(resumed);
    expect(w.types().includes('replica_resumed')).toBe(resumed);
  });

  it('terminal drains are left alone', () => {
    for (const state of ['completed', 'aborted', 'removed'] as const) {
      const w = cluster();
      w.drain('node-2');
      w.put(keys.drain('node-2'), { ...w.drainOf('node-2'), status: { state, replicas: {} } });
      expect(w.pass().acts).toEqual([]);
    }
  });

  it('two drains at once share one budget: a service never has two replicas moving', () => {
    const w = cluster();
    w.addNode('node-4');
    w.drain('node-1');
    w.drain('node-3');
    w.pass();
    const moving = w.under<ReplicaDesired>('desired/').filter((d) => d.value.spec.move && d.value.spec.service === 'web');
    expect(moving).toHaveLength(1);
    expect(w.drainOf('node-3').status!.replicas['d-web-2']).toMatchObject({ state: 'pending', reason: 'budget_exceeded' });
  });
});
