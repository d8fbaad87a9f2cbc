// Spread skew through the whole pure cycle: a spread service left lopsided (its node came back
// after its replicas were re-placed) is evened out one make-before-break move at a time, never
// back and forth; pack services, opted-out services, young replicas and hot destinations stay.
import { describe, expect, it } from 'vitest';
import type { PlacementDecision } from '../../src/api/types.js';
import { Harness, replica, service, T0, World, runCycles, type Load } from '../../test/support/rebalancer-world.js';

const MIN = 60_000;
const cool: Record<string, Load> = { a: { cpu: 0.2 }, b: { cpu: 0.2 }, c: { cpu: 0.2 } };


/** Cycles with agents that follow desired state at once; returns the harness. */
function run(w: World, cycles: number, loads: Record<string, Load> = cool): Harness {
  return runCycles(w, cycles, loads);
}

const countsOf = (w: World, svc = 'web') => {
  const out: Record<string, number> = {};
  for (const r of w.replicas) if (r.desired.value.spec.service === svc) out[r.desired.value.spec.node] = (out[r.desired.value.spec.node] ?? 0) + 1;
  return out;
};
const spreadMoves = (h: Harness) => h.audit().filter((a) => a.type === 'rebalance_moved' && a.payload.trigger === 'spread');

/** Three replicas of d/web (spread) all on a: what a node's return after a replacement leaves. */
function lopsided(extra: Parameters<typeof service>[0] = {}): World {
  const spec = service({ replicas: 3, ...extra });
  return new World()
    .addNode('a')
    .addNode('b')
    .addNode('c')
    .add(...[0, 1, 2].map((i) => replica(`d-web-${i}`, 'a', { index: i, spec })));
}

describe('spread skew', () => {
  it('3/0/0 after a node returns → 1/1/1 in two moves, each a spread move, never back and forth', () => {
    const w = lopsided();
    const h = run(w, 40);
    expect(countsOf(w)).toEqual({ a: 1, b: 1, c: 1 });
    const moves = spreadMoves(h);
    expect(moves).toHaveLength(2);
    expect(moves.map((m) => m.payload.src)).toEqual(['a', 'a']);
    expect(new Set(moves.map((m) => m.payload.dst))).toEqual(new Set(['b', 'c']));
    // The newest replicas move; the audit record carries the counts it judged.
    expect(moves[0]!.payload).toMatchObject({ replica_id: 'd-web-2', skew_before: 3, counts_before: { a: 3, b: 0, c: 0 } });
    // Each moved replica's stored decision says the spread move put it where it is.
    const decisions = h.cycles.flatMap((c) => c.acts.flatMap((a) => a.ops)).filter((o) => o.op === 'put' && o.key.startsWith('decisions/'));
    expect(decisions.map((o) => (o as { value: PlacementDecision }).value.spec)).toEqual(
      moves.map((m) => expect.objectContaining({ replica: m.payload.replica_id, chosen: m.payload.dst, trigger: 'rebalance', actor: 'rebalancer', why: expect.stringMatching(/^spread restored: /) })),
    );
    // Once even, it stays even: nothing more moves however long it runs.
    const more = run(w, 40);
    expect(spreadMoves(more)).toEqual([]);
    expect(more.cycles.at(-1)!.plan.spread).toEqual([]);
  });

  it('one move at a time: the second waits until the first has completed', () => {
    const w = lopsided();
    const h = new Harness(w);
    const first = h.cycle(cool);
    expect(first.plan.move).toMatchObject({ trigger: 'spread', replica: 'd-web-2', src: 'a' });
    // The destination has not started yet: nothing else moves meanwhile.
    const second = h.cycle(cool);
    expect(second.plan.move).toBeUndefined();
    expect(spreadMoves(h)).toHaveLength(1);
  });

  it('the destination is the scheduler\'s choice: fewest replicas of the service first', () => {
    const w = lopsided();
    w.add(replica('d-web-3', 'b', { index: 3, spec: service({ replicas: 4 }) }));
    const h = new Harness(w);
    const c = h.cycle(cool);
    expect(c.plan.move).toMatchObject({ trigger: 'spread', src: 'a', dst: 'c' });
  });

  it.each<[string, () => World, Record<string, Load>, string]>([
    ['a pack service is left alone', () => lopsided({ placement: { mode: 'pack' } }), cool, 'none'],
    ['an opted-out service is held, with the reason', () => lopsided({ rebalance: 'disabled' }), cool, 'opted_out'],
    ['destinations over the pressure cap are refused', () => lopsided(), { a: { cpu: 0.2 }, b: { cpu: 0.8 }, c: { cpu: 0.8 } }, 'pressure after the move'],
    ['nodes without a fresh sample are refused', () => lopsided(), { a: { cpu: 0.2 } }, 'no fresh pressure sample'],
  ])('%s', (_n, world, loads, why) => {
    const w = world();
    const h = run(w, 10, loads);
    expect(spreadMoves(h)).toEqual([]);
    expect(countsOf(w)).toEqual({ a: 3 });
    const detail = h.cycles.at(-1)!.plan.spread.map((v) => v.detail).join('; ');
    if (why === 'none') expect(h.cycles.at(-1)!.plan.spread).toEqual([]);
    else expect(detail).toContain(why);
  });

  it('a replica placed within the replica cooldown stays; it moves once the cooldown has passed', () => {
    const spec = service({ replicas: 3 });
    const w = new World()
      .addNode('a')
      .addNode('b')
      .addNode('c')
      .add(...[0, 1, 2].map((i) => replica(`d-web-${i}`, 'a', { index: i, spec, placedAt: T0 - 2 * MIN })));
    const h = new Harness(w);
    const held = h.cycle(cool);
    expect(held.plan.move).toBeUndefined();
    expect(held.plan.spread[0]).toMatchObject({ verdict: 'held', skew: 3 });
    expect(held.plan.spread[0]!.detail).toContain('replica cooldown');
    h.now = T0 + 9 * MIN;
    expect(h.cycle(cool).plan.move).toMatchObject({ trigger: 'spread', src: 'a' });
  });

  it('a cordoned node neither counts nor receives: 2 on a, 1 on c, b cordoned is even', () => {
    const spec = service({ replicas: 3 });
    const w = new World()
      .addNode('a')
      .addNode('b', { cordoned: true })
      .addNode('c')
      .add(replica('d-web-0', 'a', { index: 0, spec }), replica('d-web-1', 'a', { index: 1, spec }), replica('d-web-2', 'c', { index: 2, spec }));
    const h = run(w, 5);
    expect(spreadMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.spread).toEqual([]);
  });

  it('a pressure move goes first: one move per cycle, cluster-wide', () => {
    const spec = service({ replicas: 3 });
    const w = new World()
      .addNode('a')
      .addNode('b')
      .addNode('c')
      .add(...[0, 1, 2].map((i) => replica(`d-web-${i}`, 'b', { index: i, spec })), replica('d-api-0', 'a', { index: 0 }));
    const hot: Record<string, Load> = { a: { cpu: 0.95, replicas: { 'd-api-0': { cpuMillis: 300 } } }, b: { cpu: 0.2 }, c: { cpu: 0.1 } };
    const h = new Harness(w);
    // Over the trigger but not yet for two cycles: the spread move waits all the same.
    const waiting = h.cycle(hot);
    expect(waiting.plan.move).toBeUndefined();
    expect(waiting.plan.spread[0]!.detail).toContain('pressure goes first');
    const c = h.cycle(hot);
    expect(c.plan.move).toMatchObject({ trigger: 'pressure', replica: 'd-api-0' });
    expect(c.plan.spread[0]).toMatchObject({ verdict: 'held' });
    expect(c.plan.spread[0]!.detail).toContain('one move per cycle');
  });
});

describe('pressure and spread together: one scoring model (seed 003: never fight)', () => {
  /** Each node's CPU follows what runs on it: 0.1 idle plus 0.4 per replica of d/web. */
  const follow = (w: World): Record<string, Load> => {
    const out: Record<string, Load> = {};
    for (const n of w.nodes.keys()) out[n] = { cpu: 0.1, replicas: {} };
    for (const r of w.replicas) {
      const s = r.desired.value.spec;
      if (s.move) continue; // a destination copy burns nothing until it serves
      out[s.node]!.cpu += 0.4;
      out[s.node]!.replicas![s.replica] = { cpuMillis: 400 };
    }
    return out;
  };

  it('a hot, lopsided spread service: pressure and spread agree on one move, then nothing flaps', () => {
    const spec = service({ replicas: 4 });
    const w = new World().addNode('a').addNode('b').addNode('c').addNode('d');
    w.add(replica('d-web-0', 'a', { index: 0, spec }), replica('d-web-1', 'a', { index: 1, spec }), replica('d-web-2', 'b', { index: 2, spec }), replica('d-web-3', 'c', { index: 3, spec }));
    const h = new Harness(w);
    for (let i = 0; i < 60; i++) {
      h.cycle(follow(w));
      w.observeRunning(h.now);
    }
    const moves = h.audit().filter((a) => a.type === 'rebalance_moved');
    // Pressure goes first (a is over the trigger) and lands where spread wants it too.
    expect(moves.map((m) => `${m.payload.trigger} ${m.payload.replica_id} ${m.payload.src}→${m.payload.dst}`)).toEqual(['pressure d-web-0 a→d']);
    expect(countsOf(w)).toEqual({ a: 1, b: 1, c: 1, d: 1 });
    // Never back: no replica returns to a node it left.
    const left = new Set(moves.map((m) => `${m.payload.replica_id} ${m.payload.src}`));
    expect(moves.filter((m) => left.has(`${m.payload.replica_id} ${m.payload.dst}`))).toEqual([]);
  });

  it('a pressure move prefers the node the scheduler scores higher (no recent failures) over a cooler one it deprioritizes', () => {
    const spec = service({ replicas: 2 });
    const w = new World().addNode('a').addNode('b').addNode('c');
    w.add(replica('d-web-0', 'a', { index: 0, spec }), replica('d-api-0', 'a', { index: 0 }));
    // b is the coolest, but replicas keep failing there: the scheduler places elsewhere, so does the rebalancer.
    w.failing('b', 'x-y-0', 3, T0);
    const loads: Record<string, Load> = { a: { cpu: 0.95, replicas: { 'd-web-0': { cpuMillis: 300 }, 'd-api-0': { cpuMillis: 300 } } }, b: { cpu: 0.1 }, c: { cpu: 0.3 } };
    const [, c] = new Harness(w).run(2, loads);
    expect(c!.plan.move).toMatchObject({ trigger: 'pressure', src: 'a', dst: 'c' });
    const w2 = new World().addNode('a').addNode('b').addNode('c');
    w2.add(replica('d-web-0', 'a', { index: 0, spec }), replica('d-api-0', 'a', { index: 0 }));
    expect(new Harness(w2).run(2, loads)[1]!.plan.move).toMatchObject({ trigger: 'pressure', src: 'a', dst: 'b' });
  });
});

describe('degraded nodes (issue 34): never a reason to move, never a destination', () => {
  it('an even service with a replica on a degraded node stays where it is', () => {
    const spec = service({ replicas: 3 });
    const w = new World().addNode('a').addNode('b').addNode('c').add(...['a', 'b', 'c'].map((n, i) => replica(`d-web-${i}`, n, { index: i, spec })));
    w.diskFull.add('a');
    const h = run(w, 40);
    expect(h.audit().filter((a) => a.type === 'rebalance_moved')).toEqual([]);
    expect(countsOf(w)).toEqual({ a: 1, b: 1, c: 1 });
  });

  it('3/0/0 with one empty node degraded: the replicas even out onto the healthy one only', () => {
    const w = lopsided();
    w.diskFull.add('b');
    const h = run(w, 40);
    expect(new Set(spreadMoves(h).map((m) => m.payload.dst))).toEqual(new Set(['c']));
    expect(countsOf(w).b).toBeUndefined();
  });
});
