// Seed 000's hysteresis tests, driven through the whole pure cycle: a single spike does not
// trigger, sustained pressure does; the imbalance gap, dst cap, relief floor and both cooldowns
// each block when expected and the SKIPPED record carries the right reason; at most one move per
// cycle; plus the cycle's bookkeeping (in-flight moves, skip de-duplication, ping-pong, failover).
import type { PlacementDecision } from '../../src/api/types.js';
import { describe, expect, it } from 'vitest';
import { defaultConfig } from './config.js';
import { decide } from './decide.js';
import { initialState, seedState } from './state.js';
import { PingPong } from './ping-pong.js';
import { Harness, replica, service, T0, World, type Load } from '../../test/support/rebalancer-world.js';

const config = defaultConfig();
const MIN = 60_000;

/** Three nodes; on a: web-0 (measured 300m), api-0 (measured 150m); b and c run other replicas. */
function cluster(): World {
  return new World()
    .addNode('a')
    .addNode('b')
    .addNode('c')
    .add(replica('d-web-0', 'a', { index: 0 }), replica('d-web-1', 'b', { index: 1 }), replica('d-api-0', 'a', { index: 0 }));
}
const hotA = (cpu = 0.95, extra: Record<string, Load> = {}): Record<string, Load> => ({
  a: { cpu, replicas: { 'd-web-0': { cpuMillis: 300 }, 'd-api-0': { cpuMillis: 150 } } },
  b: { cpu: 0.2 },
  c: { cpu: 0.1 },
  ...extra,
});

const PAYLOAD_KEYS = ['replica_id', 'deployment', 'service', 'src', 'dst', 'dominant', 'relief', 'score', 'move_cost', 'src_pressure_before', 'dst_pressure_before', 'src_pressure_after', 'dst_pressure_after'];

describe('trigger and consecutive cycles', () => {
  it('a single spike does not trigger', () => {
    const h = new Harness(cluster());
    h.run(10, hotA(0.3));
    const spike = h.cycle(hotA(1.0));
    h.run(5, hotA(0.3));
    expect(spike.plan.stoppedBy).toBe('trigger_threshold');
    expect(h.audit()).toEqual([]);
  });

  it('one cycle over the trigger is not enough: consecutive_cycles stops it', () => {
    const h = new Harness(cluster());
    const [first] = h.run(1, hotA());
    expect(first!.plan.stoppedBy).toBe('consecutive_cycles');
    expect(first!.plan.nodes.find((n) => n.node === 'a')).toMatchObject({ over: 1, pressure: 0.95, dominant: 'cpu' });
    expect(first!.acts).toEqual([]);
  });

  it('a hot cycle, a cool one, a hot one: the run restarts', () => {
    const h = new Harness(cluster());
    h.cycle(hotA(0.95));
    // A cool sample half a window later pulls the EWMA under the trigger.
    h.now += 120_000;
    const cool = h.cycle(hotA(0.1));
    expect(cool.plan.nodes.find((n) => n.node === 'a')!.over).toBe(0);
    h.state = initialState(); // reseed high, then one cycle over again
    const [again] = h.run(1, hotA(0.95));
    expect(again!.plan.stoppedBy).toBe('consecutive_cycles');
  });

  it('sustained pressure triggers a move to the coolest node, with the full audit payload', () => {
    const h = new Harness(cluster());
    const [, second] = h.run(2, hotA());
    expect(second!.plan.stoppedBy).toBe('none');
    expect(second!.plan.move).toMatchObject({ replica: 'd-web-0', src: 'a', dst: 'c', dominant: 'cpu' });
    const moved = h.audit().filter((a) => a.type === 'rebalance_moved');
    expect(moved).toHaveLength(1);
    const p = moved[0]!.payload;
    expect(Object.keys(p)).toEqual(expect.arrayContaining(PAYLOAD_KEYS));
    expect(p).toMatchObject({ replica_id: 'd-web-0', deployment: 'd', service: 'web', src: 'a', dst: 'c', dominant: 'cpu', relief: 0.3, score: 0.29, move_cost: 0.01, src_pressure_before: 0.95, dst_pressure_before: 0.1, src_pressure_after: 0.65, dst_pressure_after: 0.4, relief_source: 'measured' });
    expect(p).not.toHaveProperty('reason');
    // The move and its audit record are one act; the move goes through the shared mechanism.
    const act = second!.acts.find((a) => a.label.startsWith('rebalance move d-web-0'))!;
    // The shared move mechanism: the source is written (competing movers conflict), the destination created, the disruption recorded.
    // …and the replica's placement decision now explains where the move put it.
    expect(act.ops.map((o) => `${o.op} ${o.key}`)).toEqual(['update desired/a/d-web-0', 'create desired/c/d-web-0', 'create disruptions/d/web', 'check nodes/c', 'check nodespecs/c', 'check drains/c', 'put decisions/d/d-web-0']);
    expect((act.ops[1] as { value: { spec: { move: { by: string; from: string } } } }).value.spec.move).toMatchObject({ by: 'rebalancer', from: 'a' });
    const decision = (act.ops[6] as { value: PlacementDecision }).value.spec;
    expect(decision).toMatchObject({ replica: 'd-web-0', chosen: 'c', trigger: 'rebalance', actor: 'rebalancer' });
    expect(decision.why).toMatch(/^moved off a for pressure: /);
    expect(decision.verdicts.find((v) => v.node === 'a')?.rejected?.filter).toBe('excluded');
  });

  it('api-0 (relief 0.15) is movable but not chosen: one move per cycle, highest score wins', () => {
    const h = new Harness(cluster());
    const [, c] = h.run(2, hotA());
    expect(c!.plan.candidates.map((x) => [x.replica, x.verdict])).toEqual([
      ['d-api-0', 'movable'],
      ['d-web-0', 'move'],
    ]);
    expect(c!.acts.filter((a) => a.audit?.some((r) => r.type === 'rebalance_moved'))).toHaveLength(1);
  });
});

describe('cluster gates stop the cycle without auditing', () => {
  it('imbalance gap: uniformly busy, nothing to do', () => {
    const h = new Harness(cluster());
    const cycles = h.run(6, hotA(0.95, { b: { cpu: 0.9 }, c: { cpu: 0.71 } }));
    expect(cycles.map((c) => c.plan.stoppedBy)).toEqual(['consecutive_cycles', ...Array(5).fill('imbalance_gap')]);
    expect(h.audit()).toEqual([]);
  });

  it('the gap counts from the coolest node with data: 0.95 vs 0.70 is exactly 0.25 and passes', () => {
    const h = new Harness(cluster());
    const [, c] = h.run(2, hotA(0.95, { b: { cpu: 0.7 }, c: { cpu: 0.7 } }));
    expect(c!.plan.gates.find((g) => g.gate === 'imbalance_gap')!.holds).toBe(true);
  });

  it('no pressure data anywhere: zero audit events, stopped by pressure_data', () => {
    const h = new Harness(cluster());
    const cycles = h.run(5, {});
    expect(cycles.every((c) => c.plan.stoppedBy === 'pressure_data' && c.acts.length === 0)).toBe(true);
    expect(cycles[0]!.plan.silent.map((s) => s.node)).toEqual(['a', 'b', 'c']);
  });

  it('a silent node neither counts for the gap nor receives moves', () => {
    const h = new Harness(cluster());
    const [, c] = h.run(2, { a: hotA().a!, b: { cpu: 0.7 } });
    expect(c!.plan.silent).toEqual([{ node: 'c', why: 'no fresh pressure sample' }]);
    expect(c!.plan.gates.find((g) => g.gate === 'imbalance_gap')!.holds).toBe(true); // 0.95 − 0.70
    // b: 0.7 + 0.15 → dst cap; c is silent, so it is not a destination.
    expect(c!.plan.candidates.find((x) => x.replica === 'd-api-0')).toMatchObject({ reason: 'dst_cap', dst: 'b' });
    expect(c!.plan.candidates.find((x) => x.replica === 'd-api-0')!.dsts!.map((d) => d.node)).toEqual(['b']);
  });
});

describe('per-candidate gates: the SKIPPED record carries the right reason', () => {
  function skipped(h: Harness) {
    return h.audit().filter((a) => a.type === 'rebalance_skipped');
  }

  it('dst cap: every destination would end up at 0.75 or more', () => {
    const h = new Harness(cluster());
    h.run(2, hotA(0.95, { b: { cpu: 0.6 }, c: { cpu: 0.65 } }));
    const s = skipped(h);
    expect(s.map((a) => [a.payload.replica_id, a.payload.reason])).toEqual([
      ['d-api-0', 'dst_cap'], // 0.6 + 0.15 = 0.75
      ['d-web-0', 'dst_cap'],
    ]);
    // api-0 is stopped at b (0.60 + 0.15), the coolest of two capped destinations; web-0 cannot go
    // to b at all (it runs web-1), so the destination that got furthest is c (0.65 + 0.30).
    expect(s[0]!.payload).toMatchObject({ dst: 'b', dst_pressure_before: 0.6, dst_pressure_after: 0.75 });
    expect(s[1]!.payload).toMatchObject({ dst: 'c', dst_pressure_before: 0.65, dst_pressure_after: 0.95, src_pressure_after: 0.65 });
    expect(Object.keys(s[1]!.payload)).toEqual(expect.arrayContaining([...PAYLOAD_KEYS, 'reason']));
  });

  it('relief floor: a replica too small to matter', () => {
    const h = new Harness(cluster());
    h.run(2, { ...hotA(), a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 90 }, 'd-api-0': { cpuMillis: 50 } } } });
    expect(skipped(h).map((a) => [a.payload.replica_id, a.payload.reason, a.payload.dst])).toEqual([
      ['d-api-0', 'relief_floor', null],
      ['d-web-0', 'relief_floor', null],
    ]);
  });

  it('replica cooldown: placed less than 10 minutes ago', () => {
    const w = new World().addNode('a').addNode('b').add(replica('d-web-0', 'a', { placedAt: T0 - 9 * MIN }));
    const h = new Harness(w);
    h.run(2, { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 } });
    expect(skipped(h).map((a) => a.payload.reason)).toEqual(['cooldown_replica']);
    // 10 minutes after placement it moves.
    h.now = T0 + MIN + 30_000;
    h.cycle({ a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 } });
    expect(h.audit().at(-1)).toMatchObject({ type: 'rebalance_moved', payload: { replica_id: 'd-web-0', dst: 'b' } });
  });

  it('node cooldown: the destination received a move less than 2 minutes ago', () => {
    const w = new World().addNode('a').addNode('b').add(replica('d-web-0', 'a'), replica('d-api-0', 'a'));
    const h = new Harness(w);
    const loads = { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 }, 'd-api-0': { cpuMillis: 200 } } }, b: { cpu: 0.1 } };
    h.run(2, loads);
    expect(h.audit().at(-1)).toMatchObject({ type: 'rebalance_moved', payload: { replica_id: 'd-web-0', dst: 'b' } });
    // The move lands: web-0 runs on b; the cutover deletes its source copy, whose container the world's agent removes.
    w.observeRunning(h.now, (r) => !!r.desired.value.spec.move);
    expect(h.cycle(loads).acts.map((a) => a.label)).toEqual(['rebalance move cutover d-web-0 a→b']);
    const done = h.cycle(loads);
    expect(done.acts.map((a) => a.label)).toEqual(['rebalance move completed d-web-0 a→b']);
    expect(done.acts[0]!.audit![0]!.type).toBe('rebalance_completed');
    const next = h.cycle(loads);
    expect(next.plan.candidates).toEqual([expect.objectContaining({ replica: 'd-api-0', reason: 'cooldown_node', dst: 'b' })]);
    expect(skipped(h).map((a) => a.payload.reason)).toEqual(['cooldown_node']);
    // Past the node cooldown api-0 may go.
    h.now += 2 * MIN;
    expect(h.cycle(loads).plan.move).toMatchObject({ replica: 'd-api-0', dst: 'b' });
  });

  it('resource limits: the scheduler’s memory filter and the post-move fit', () => {
    const w = new World().addNode('a').addNode('b', { memoryBytes: 256 * 1024 ** 2 }).addNode('c');
    w.add(replica('d-web-0', 'a', { spec: service({ resources: { memory: '512Mi' } }) }));
    const h = new Harness(w);
    // c: post cpu 0.75 + 0.3 > 1.0; b cannot book 512Mi.
    h.run(2, { a: { cpu: 1.3, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 }, c: { cpu: 0.75 } });
    const s = skipped(h);
    expect(s.map((a) => [a.payload.reason, a.payload.dst])).toEqual([['resource_limits', 'c']]);
    expect(String(s[0]!.payload.detail)).toContain('must stay ≤ 1');
  });

  it('anti-affinity: spread never puts a second replica of the service on dst', () => {
    const w = new World().addNode('a').addNode('b').add(replica('d-web-0', 'a'), replica('d-web-1', 'b'));
    const h = new Harness(w);
    h.run(2, { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 } });
    expect(skipped(h).map((a) => [a.payload.replica_id, a.payload.reason])).toEqual([['d-web-0', 'anti_affinity']]);
  });

  it('no eligible destination: the only other node is cordoned', () => {
    const w = new World().addNode('a').addNode('b', { cordoned: true }).add(replica('d-web-0', 'a'));
    const h = new Harness(w);
    h.run(2, { a: { cpu: 0.95 }, b: { cpu: 0.1 } });
    expect(skipped(h).map((a) => a.payload.reason)).toEqual(['no_eligible_dst']);
  });

  it('no candidate: everything on the hot node is stateful, global, opted out, a job or not running', () => {
    const w = new World().addNode('a').addNode('b');
    w.add(
      replica('d-db-0', 'a', { spec: service({ volumes: [{ type: 'volume', source: 'data', target: '/d' }] }) }),
      replica('d-agent-a', 'a', { spec: service({ placement: { mode: 'global' } }) }),
      replica('d-pinned-0', 'a', { spec: service({ rebalance: 'disabled' }) }),
      replica('d-migrate-0', 'a', { spec: service({ mode: 'job' }) }),
      replica('d-web-0', 'a', { running: false }),
    );
    const h = new Harness(w);
    const [, c] = h.run(2, { a: { cpu: 0.95 }, b: { cpu: 0.1 } });
    expect(c!.plan.excluded.map((x) => [x.replica, x.reason])).toEqual([
      ['d-agent-a', 'global'],
      ['d-db-0', 'stateful'],
      ['d-migrate-0', 'job'],
      ['d-pinned-0', 'opted_out'],
      ['d-web-0', 'not_running'],
    ]);
    const s = skipped(h);
    expect(s).toHaveLength(1);
    expect(s[0]!.payload).toMatchObject({ reason: 'no_candidate', replica_id: null, src: 'a', dst: null, src_pressure_before: 0.95 });
  });

  it('the furthest destination names the reason: anti-affinity on b, dst cap on c → dst_cap', () => {
    const w = new World().addNode('a').addNode('b').addNode('c').add(replica('d-web-0', 'a'), replica('d-web-1', 'b'));
    const h = new Harness(w);
    const [, c] = h.run(2, { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 }, c: { cpu: 0.5 } });
    expect(c!.plan.candidates[0]).toMatchObject({ reason: 'dst_cap', dst: 'c' });
    expect(c!.plan.candidates[0]!.dsts!.map((d) => [d.node, d.reason])).toEqual([
      ['b', 'anti_affinity'],
      ['c', 'dst_cap'],
    ]);
  });
});

describe('one move per cycle and the move mechanism', () => {
  it('never more than one move per cycle, and none while the rebalancer’s move is in flight', () => {
    const w = cluster().add(replica('d-x-0', 'a'), replica('d-y-0', 'a'));
    const h = new Harness(w);
    const cycles = h.run(6, hotA(1.3));
    for (const c of cycles) expect(c.acts.filter((a) => a.effect?.kind === 'move').length).toBeLessThanOrEqual(1);
    // The move is never observed running: abandoned at its 60 s deadline (cycle 4), then the next.
    expect(cycles.map((c) => c.plan.stoppedBy)).toEqual(['consecutive_cycles', 'none', 'move_in_flight', 'move_in_flight', 'none', 'move_in_flight']);
    expect(cycles[3]!.acts.map((a) => a.label)).toEqual(['rebalance move abandoned d-web-0 a→c']);
  });

  it('a candidate the shared budget refuses is passed over for the next best', () => {
    // web-1 (on b) is down: web's maxUnavailable 1 is used up, so web-0 may not move; api-0 may.
    const w = cluster();
    w.unobserve('b', 'd-web-1');
    const h = new Harness(w);
    const [, c] = h.run(2, hotA());
    expect(c!.plan.candidates.find((x) => x.replica === 'd-web-0')).toMatchObject({ verdict: 'refused', refusal: 'budget_exceeded' });
    expect(c!.plan.move).toMatchObject({ replica: 'd-api-0' });
  });

  it('ties break by replica id', () => {
    const w = new World().addNode('a').addNode('b').addNode('c').add(replica('d-zz-0', 'a'), replica('d-aa-0', 'a'));
    const h = new Harness(w);
    const [, c] = h.run(2, { a: { cpu: 0.95 }, b: { cpu: 0.1 }, c: { cpu: 0.1 } });
    expect(c!.plan.move).toMatchObject({ replica: 'd-aa-0', dst: 'b' }); // default relief 0.12 each; b before c by name
  });

  it('an in-flight move past its deadline is abandoned; src keeps serving', () => {
    const h = new Harness(cluster());
    h.run(2, hotA());
    h.now += 120_000; // the service's step timeout is 60 s
    const c = h.cycle(hotA());
    expect(c.acts.map((a) => a.label)).toEqual(['rebalance move abandoned d-web-0 a→c']);
    // The destination goes; the source forgets it was moving and keeps serving.
    expect(c.acts[0]!.ops).toEqual([expect.objectContaining({ op: 'delete', key: 'desired/c/d-web-0' }), expect.objectContaining({ op: 'update', key: 'desired/a/d-web-0' })]);
    expect(c.acts[0]!.audit![0]).toMatchObject({ type: 'rebalance_abandoned', payload: { reason: 'move_timeout' } });
  });
});

describe('leader-local bookkeeping', () => {
  const load = (hot: string, cool: string) => ({ [hot]: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, [cool]: { cpu: 0.1 } });
  /** web-0 moved from a (hot) to c, the move completed. */
  function movedAtoC(): { w: World; h: Harness } {
    const w = new World().addNode('a').addNode('c').add(replica('d-web-0', 'a'));
    const h = new Harness(w);
    h.run(2, load('a', 'c'));
    w.observeRunning(h.now, (r) => !!r.desired.value.spec.move);
    h.cycle(load('a', 'c')); // cuts over
    h.cycle(load('a', 'c')); // completes
    return { w, h };
  }

  it('ping-pong (seed 002): a replica moved from a to c is not moved back to a until new balancing is triggered', () => {
    const { w, h } = movedAtoC();
    h.now += 11 * MIN; // past the replica cooldown
    const [, back] = h.run(2, load('c', 'a'));
    expect(back!.plan.candidates[0]).toMatchObject({ replica: 'd-web-0', reason: 'no_eligible_dst', dst: 'a' });
    expect(back!.plan.candidates[0]!.detail).toContain('not moved back until a node or its deployment changes');
    // Not a window: hours later, nothing having changed, it still does not go back.
    h.now += 6 * 60 * MIN;
    expect(h.cycle(load('c', 'a')).plan.move).toBeUndefined();
    // A node change (a re-registered, cordoned or relabelled: its key rewritten) triggers new balancing.
    w.touchNode('a');
    expect(h.cycle(load('c', 'a')).plan.move).toMatchObject({ replica: 'd-web-0', src: 'c', dst: 'a' });
  });

  it('ping-pong ends with a change to the service’s deployment (its generation)', () => {
    const { w, h } = movedAtoC();
    h.now += 11 * MIN;
    expect(h.run(2, load('c', 'a'))[1]!.plan.move).toBeUndefined();
    w.redeploy('d');
    expect(h.cycle(load('c', 'a')).plan.move).toMatchObject({ replica: 'd-web-0', src: 'c', dst: 'a' });
  });

  it('ping-pong remembers every node the service left in the epoch, not only the last', () => {
    const { w, h } = movedAtoC();
    w.addNode('b');
    h.now += 11 * MIN;
    // Adding b was a node change: a new epoch, so c → a would be allowed; b is the cooler node.
    const loads = { c: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, a: { cpu: 0.3 }, b: { cpu: 0.1 } };
    const [, toB] = h.run(2, loads);
    expect(toB!.plan.move).toMatchObject({ replica: 'd-web-0', src: 'c', dst: 'b' });
    w.observeRunning(h.now, (r) => !!r.desired.value.spec.move);
    h.cycle(loads); // cuts over
    h.cycle(loads); // completes: it left a (an earlier epoch) and c (this one)
    expect(w.replicas.map((r) => r.desired.value.spec.movedFrom)).toEqual([expect.objectContaining({ node: 'c', epoch: expect.any(String) })]);
    h.now += 11 * MIN;
    const hotB = { b: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, a: { cpu: 0.1 }, c: { cpu: 0.1 } };
    const [, fromB] = h.run(2, hotB);
    // c is excluded (left in this epoch); a was left in the epoch before b joined: it may take it.
    expect(fromB!.plan.move).toMatchObject({ replica: 'd-web-0', src: 'b', dst: 'a' });
    w.observeRunning(h.now, (r) => !!r.desired.value.spec.move);
    h.cycle(hotB);
    h.cycle(hotB); // completes: left c and b in this epoch
    expect(w.replicas.map((r) => r.desired.value.spec.movedFrom)).toEqual([expect.objectContaining({ node: 'b', earlier: ['c'] })]);
    h.now += 11 * MIN;
    const hotA2 = { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 }, c: { cpu: 0.1 } };
    const [, fromA] = h.run(2, hotA2);
    expect(fromA!.plan.move).toBeUndefined();
    expect(fromA!.plan.candidates[0]).toMatchObject({ replica: 'd-web-0', reason: 'no_eligible_dst' });
  });

  it('ping-pong survives a leader failover: the completed move left movedFrom in the desired record', () => {
    const { w, h } = movedAtoC();
    expect(w.replicas.map((r) => r.desired.value.spec.movedFrom)).toEqual([expect.objectContaining({ node: 'a', by: 'rebalancer' })]);
    h.state = initialState(); // a new leader: no leader-local record of the move
    h.now += 11 * MIN;
    const [, back] = h.run(2, load('c', 'a'));
    expect(back!.plan.candidates[0]).toMatchObject({ replica: 'd-web-0', reason: 'no_eligible_dst', dst: 'a' });
    expect(back!.plan.candidates[0]!.detail).toContain('not moved back');
  });

  it('a skip that repeats with the same reason is recorded once; a change is recorded again', () => {
    const h = new Harness(cluster());
    const busy = hotA(0.95, { b: { cpu: 0.6 }, c: { cpu: 0.65 } });
    h.run(6, busy);
    expect(h.audit().map((a) => `${a.payload.replica_id} ${a.payload.reason}`)).toEqual(['d-api-0 dst_cap', 'd-web-0 dst_cap']);
    expect(h.cycles.at(-1)!.plan.candidates.every((c) => c.audited === false)).toBe(true);
    // The gate closing in between does not re-record the same skips…
    h.run(1, hotA(0.5, { b: { cpu: 0.6 }, c: { cpu: 0.65 } }));
    h.state = { ...h.state, nodes: new Map() }; // reseed the EWMAs hot
    h.run(2, busy);
    expect(h.audit()).toHaveLength(2);
    // …a new reason is.
    h.run(1, { ...busy, a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 50 }, 'd-api-0': { cpuMillis: 150 } } } });
    expect(h.audit().map((a) => `${a.payload.replica_id} ${a.payload.reason}`).slice(2)).toEqual(['d-web-0 relief_floor']);
    // And a persisting one is recorded again after 120 cycles.
    h.now += 120 * config.cycleMs;
    h.run(1, busy);
    expect(h.audit().slice(3).map((a) => `${a.payload.replica_id} ${a.payload.reason}`)).toEqual(['d-api-0 dst_cap', 'd-web-0 dst_cap']);
  });

  it('a pass within half a cycle of the last re-evaluates without counting a cycle', () => {
    const h = new Harness(cluster());
    h.cycle(hotA());
    h.now -= config.cycleMs - 50; // e.g. a retry 50 ms after a conflicted write
    const retry = h.cycle(hotA());
    expect(retry.plan.countedCycle).toBe(false);
    expect(retry.plan.stoppedBy).toBe('consecutive_cycles');
  });

  it('after failover the new leader rebuilds its state within two cycles', () => {
    const h = new Harness(cluster());
    h.run(1, hotA());
    h.state = initialState();
    const [first, second] = h.run(2, hotA());
    expect(first!.plan.stoppedBy).toBe('consecutive_cycles');
    expect(second!.plan.stoppedBy).toBe('none');
  });

  it('explain-only passes never advance the counters', () => {
    const w = cluster();
    const h = new Harness(w);
    h.run(1, hotA());
    const e = decide(h.state, w.snapshot(h.now + 10 * config.cycleMs, hotA()), h.now + 10 * config.cycleMs, config, { explainOnly: true });
    expect(e.plan.countedCycle).toBe(false);
    expect(e.plan.nodes.find((n) => n.node === 'a')!.over).toBe(1);
  });

  it('seedState (the CLI without a leader): hot nodes assumed over, cooldowns from recent moves', () => {
    const w = cluster();
    // web-0 came to a from c a minute ago: its desired record says so (the ping-pong exclusion).
    const before = w.snapshot(T0, hotA());
    const epoch = new PingPong(before.replicas, before.eligibility, before.generations).epoch('d');
    const web0 = w.replicas.find((r) => r.desired.value.spec.replica === 'd-web-0')!.desired;
    w.put(web0.key, { ...web0.value, spec: { ...web0.value.spec, movedFrom: { node: 'c', by: 'rebalancer', at: new Date(T0 - MIN).toISOString(), epoch } } });
    const snap = w.snapshot(T0, hotA());
    const s = seedState(snap.samples, [{ dst: 'a', at: T0 - MIN }], T0, config);
    expect(s.nodes.get('a')!.over).toBe(config.consecutiveCycles);
    expect(s.nodes.get('b')!.over).toBe(0);
    expect(s.received.get('a')).toBe(T0 - MIN);
    const c = decide(s, snap, T0, config, { explainOnly: true });
    expect(c.plan.stoppedBy).toBe('none');
    expect(c.plan.move).toMatchObject({ replica: 'd-api-0' }); // web-0 came from c in this balancing epoch: ping-pong
  });

  it('deterministic: the same state, snapshot and clock give the same plan', () => {
    const run = () => {
      const h = new Harness(cluster());
      return h.run(3, hotA()).map((c) => JSON.stringify([c.plan, c.acts]));
    };
    expect(run()).toEqual(run());
  });
});

/** Marks every in-flight destination copy as observed running and ready at `now`. */
