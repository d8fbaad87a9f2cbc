// Preemption by priority through the whole pure cycle: a pending replica that coalescing cannot
// make room for evicts the fewest lowest-priority replicas in its way — migrated when they fit
// elsewhere, else stopped (suspended, reason preempted) — never equal or higher priority, never a
// stateful replica, never past a victim service's disruption budget.
import { describe, expect, it } from 'vitest';
import { withDefaults } from '../../src/api/spec.js';
import type { ServiceSpec } from '../../src/api/types.js';
import { Harness, replica, service, T0, World, type Load } from '../../test/support/rebalancer-world.js';
import { placerFor } from '../placement/input.js';
import { MoveBook } from '../moves/move.js';
import { planPreempt, preemptText } from './preempt.js';

const MiB = 1024 ** 2;
const loads = (w: World): Record<string, Load> => Object.fromEntries([...w.nodes.keys()].map((n) => [n, { cpu: 0.1 }]));
// maxUnavailable 2: both replicas of a service may go at once (the budget tests set 1).
const low = (memory: string, extra: Partial<ServiceSpec> = {}) => service({ replicas: 2, placement: { mode: 'pack' }, resources: { memory }, update: { maxUnavailable: 2 }, ...extra });
const pendingHigh = (extra: Partial<ServiceSpec> = {}) => ({ deployment: 'hi', service: 'api', spec: withDefaults({ image: 'i', priority: 10, resources: { memory: '1Gi' }, ...extra }), reason: 'no_capacity_memory' as const, count: 1 });

function run(w: World, cycles: number): Harness {
  const h = new Harness(w);
  for (let i = 0; i < cycles; i++) {
    h.cycle(loads(w));
    w.observeRunning(T0);
  }
  return h;
}
const records = (h: Harness, type: string) => h.audit().filter((a) => a.type === type);
const last = (h: Harness) => h.cycles.at(-1)!.plan.preempt;
const suspended = (w: World) => w.replicas.filter((r) => r.desired.value.spec.suspended?.reason === 'preempted').map((r) => r.desired.value.spec.replica).sort();

/** One node of 1280 MiB running two 512 MiB replicas of low/w: a 1 GiB replica fits only without both. */
function full(victimPriority = 0, extra: Partial<ServiceSpec> = {}): World {
  const spec = low('512Mi', { priority: victimPriority, ...extra });
  const w = new World().addNode('a', { memoryBytes: 1280 * MiB }).add(replica('low-w-0', 'a', { index: 0, spec }), replica('low-w-1', 'a', { index: 1, spec }));
  w.pend(pendingHigh());
  return w;
}

describe('preemption by priority', () => {
  it('priority 10 preempts priority 0: both victims stopped in one act, audited with both priorities', () => {
    const w = full(0);
    const h = run(w, 4);
    expect(suspended(w)).toEqual(['low-w-0', 'low-w-1']);
    const recs = records(h, 'replica_preempted');
    expect(recs).toHaveLength(2);
    expect(recs[0]!.payload).toMatchObject({ replica_id: 'low-w-0', priority: 0, for: 'hi/api', for_priority: 10, node: 'a' });
    const spec = w.replicas[0]!.desired.value.spec;
    expect(spec.preempted).toMatchObject({ for: { deployment: 'hi', service: 'api', node: 'a' }, priority: 0, forPriority: 10 });
    // Room made: coalescing now sees it fits (the scheduler places it), and nothing more is preempted.
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'fits' });
    expect(last(h)).toEqual([]);
  });

  it('never priority 10 (equal): nothing moves, the plan says why', () => {
    const w = full(10);
    const h = run(w, 4);
    expect(suspended(w)).toEqual([]);
    expect(records(h, 'replica_preempted')).toEqual([]);
    expect(last(h)[0]).toMatchObject({ verdict: 'none', noPreempt: 'no_lower_priority' });
    // The coalescing view carries it too: jaco status and explain print both under the pending service.
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'no_plan', preempt: { verdict: 'none', noPreempt: 'no_lower_priority' } });
  });

  it('never a stateful replica', () => {
    const w = full(0, { volumes: [{ type: 'volume', source: 'data', target: '/d' }] });
    const h = run(w, 4);
    expect(suspended(w)).toEqual([]);
    expect(last(h)[0]).toMatchObject({ verdict: 'none', noPreempt: 'no_lower_priority' });
  });

  it('within the budget: a victim whose service has room is stopped', () => {
    // Needs one victim only (768 MiB free after one goes): maxUnavailable 1 admits it.
    const spec = low('512Mi', { update: { maxUnavailable: 1 } });
    const w = new World().addNode('a', { memoryBytes: 1600 * MiB }).add(replica('low-w-0', 'a', { index: 0, spec }), replica('low-w-1', 'a', { index: 1, spec }));
    w.pend(pendingHigh());
    run(w, 4);
    // Equal priority and size: ties by id, the first reprieved is low-w-0.
    expect(suspended(w)).toEqual(['low-w-1']);
  });

  it('beyond the budget: two victims of one service with maxUnavailable 1 → would_exceed_budget, nothing stopped', () => {
    const w = full(0, { update: { maxUnavailable: 1 } });
    const h = run(w, 4);
    expect(suspended(w)).toEqual([]);
    expect(last(h)[0]).toMatchObject({ verdict: 'none', noPreempt: 'would_exceed_budget' });
  });

  it('the fewest victims: one 768 MiB replica rather than three small ones', () => {
    const w = new World()
      .addNode('a', { memoryBytes: 1536 * MiB })
      .add(replica('big-b-0', 'a', { index: 0, spec: low('768Mi', { replicas: 1 }) }), ...[0, 1, 2].map((i) => replica(`small-s-${i}`, 'a', { index: i, spec: low('128Mi', { replicas: 3, update: { maxUnavailable: 3 } }) })));
    w.pend(pendingHigh());
    const h = run(w, 4);
    expect(suspended(w)).toEqual(['big-b-0']);
    expect(records(h, 'replica_preempted')).toHaveLength(1);
  });

  it('the lowest priority first: of two nodes, the one whose victim has the lower priority', () => {
    const w = new World()
      .addNode('a', { memoryBytes: 1280 * MiB })
      .addNode('b', { memoryBytes: 1280 * MiB })
      .add(replica('mid-m-0', 'a', { index: 0, spec: low('1Gi', { replicas: 1, priority: 5 }) }), replica('low-l-0', 'b', { index: 0, spec: low('1Gi', { replicas: 1, priority: 1 }) }));
    w.pend(pendingHigh());
    run(w, 4);
    expect(suspended(w)).toEqual(['low-l-0']);
  });

  it('a victim that fits elsewhere migrates (rebalance_moved, trigger preempt) and the rest are stopped after it lands', () => {
    // b takes one 512 MiB replica, not two: coalescing has no complete plan, preemption does.
    const w = full(0).addNode('b', { memoryBytes: 600 * MiB });
    const h = run(w, 12);
    const moved = records(h, 'rebalance_moved');
    expect(moved.map((m) => `${m.payload.replica_id} ${m.payload.src}→${m.payload.dst} ${m.payload.trigger}`)).toEqual(['low-w-0 a→b preempt']);
    expect(moved[0]!.payload).toMatchObject({ for: 'hi/api', for_priority: 10, priority: 0, hole_node: 'a' });
    expect(suspended(w)).toEqual(['low-w-1']);
    const where = Object.fromEntries(w.replicas.map((r) => [r.desired.value.spec.replica, r.desired.value.spec.node]));
    expect(where).toEqual({ 'low-w-0': 'b', 'low-w-1': 'a' });
  });

  it("seed 002's device case: a GPU held by a lower-priority replica is freed for a higher-priority one", () => {
    const w = new World().addNode('g', { gpus: 1 }).add(replica('train-t-0', 'g', { index: 0, spec: low('64Mi', { replicas: 1, resources: { memory: '64Mi', gpus: 1 } }) }));
    w.pend({ ...pendingHigh({ resources: { memory: '64Mi', gpus: 1 } }), reason: 'no_capacity_gpu' });
    const h = run(w, 4);
    expect(suspended(w)).toEqual(['train-t-0']);
    expect(records(h, 'replica_preempted')[0]!.payload).toMatchObject({ replica_id: 'train-t-0', pending_reason: 'no_capacity_gpu' });
  });

  it('is a what-if: the placer it is given is left exactly as it was found', () => {
    const w = full(0).addNode('b', { memoryBytes: 600 * MiB });
    const snap = w.snapshot(T0, loads(w));
    const placer = placerFor(snap, T0);
    const probe = () => placer.names.map((n) => `${n}:${placer.replicaCount(n)}:${JSON.stringify(placer.headroom(n))}`);
    const before = probe();
    const out = planPreempt({ book: new MoveBook(snap), placer: () => placer, pending: snap.pending!.map((p) => ({ ...p, since: T0 })), priorityOf: (_d, _s, t) => t.priority ?? 0, now: T0, moveTimeoutMs: () => 60_000 });
    // A planner only says what it wants: the arbiter (decide) starts it or holds it.
    expect(out.want && 'migrate' in out.want && out.want.migrate).toMatchObject({ trigger: 'preempt', replica: 'low-w-0', src: 'a', dst: 'b' });
    expect(out.views[0]).toMatchObject({ verdict: 'preempt', node: 'a', victims: [{ replica: 'low-w-0', action: 'migrate', to: 'b' }, { replica: 'low-w-1', action: 'stop' }] });
    expect(probe()).toEqual(before);
    // What `jaco rebalance plan` and `jaco apply --dry-run` print for it (nomad job plan's words).
    expect(preemptText(out.views[0]!)).toBe('hi/api (priority 10) would preempt on a: 1 replica of low/w (priority 0) moved to b [low-w-0]; 1 replica of low/w (priority 0) preempted [low-w-1]');
  });
});
