// Coalescing through the whole pure cycle: a replica the scheduler cannot place for capacity gets
// room made for it by the fewest moves of movable replicas, only when the whole plan works, one
// make-before-break move per cycle; stateful blockers, budgets and plans that cannot work move
// nothing and say why.
import { describe, expect, it } from 'vitest';
import { withDefaults } from '../../src/api/spec.js';
import type { ServiceSpec } from '../../src/api/types.js';
import { Harness, replica, service, T0, World, runCycles, type Load } from '../../test/support/rebalancer-world.js';
import { placerFor } from '../placement/input.js';
import { MoveBook } from '../moves/move.js';
import { planCoalesce } from './coalesce.js';

const MiB = 1024 ** 2;
const cool: Record<string, Load> = { a: { cpu: 0.1 }, b: { cpu: 0.1 }, c: { cpu: 0.1 } };
// pack: spread would move one of them on its own (skew 2 on a), which is not what these tests are about.
const small = service({ replicas: 2, placement: { mode: 'pack' }, resources: { memory: '256Mi' } });


const pendingBig = (spec: Partial<ServiceSpec> = {}) => ({ deployment: 'big', service: 'db', spec: withDefaults({ image: 'i', resources: { memory: '1Gi' }, ...spec }), reason: 'no_capacity_memory' as const, count: 1 });

/**
 * a (1280 MiB) runs two movable 256 MiB replicas: the 1 GiB replica fits there only once both
 * leave. b is full of an opted-out replica; c (1 GiB) cannot take the 1 GiB replica but takes both
 * small ones.
 */
function crowded(): World {
  const w = new World()
    .addNode('a', { memoryBytes: 1280 * MiB })
    .addNode('b', { memoryBytes: 1536 * MiB })
    .addNode('c', { memoryBytes: 1024 * MiB })
    .add(
      replica('d-small-0', 'a', { index: 0, spec: small }),
      replica('d-small-1', 'a', { index: 1, spec: small }),
      replica('e-fixed-0', 'b', { index: 0, spec: service({ replicas: 1, rebalance: 'disabled', resources: { memory: '1230Mi' } }) }),
    );
  return w.pend(pendingBig());
}

const run = (w: World, cycles: number): Harness => runCycles(w, cycles, cool);

const coalesceMoves = (h: Harness) => h.audit().filter((a) => a.type === 'rebalance_moved' && a.payload.trigger === 'coalesce');

describe('coalescing', () => {
  it('a pending 1 GiB replica that fits only after moving two 256 MiB replicas: both move to c, one at a time', () => {
    const w = crowded();
    const h = new Harness(w);
    // Within the grace: the scheduler's business still.
    expect(h.cycle(cool).plan.coalesce[0]).toMatchObject({ verdict: 'grace' });
    w.observeRunning(T0);
    h.cycle(cool);
    w.observeRunning(T0);
    const planned = h.cycle(cool);
    expect(planned.plan.coalesce[0]).toMatchObject({
      verdict: 'move',
      node: 'a',
      plan: [
        { replica: 'd-small-0', from: 'a', to: 'c' },
        { replica: 'd-small-1', from: 'a', to: 'c' },
      ],
    });
    expect(planned.plan.move).toMatchObject({ trigger: 'coalesce', replica: 'd-small-0', src: 'a', dst: 'c' });
    // While the first move is in flight the plan is the rest of it: the departing replica counts as gone.
    const during = h.cycle(cool);
    expect(during.plan.coalesce[0]).toMatchObject({ verdict: 'held', node: 'a', plan: [{ replica: 'd-small-1', from: 'a', to: 'c' }] });
    for (let i = 0; i < 30; i++) {
      w.observeRunning(T0);
      h.cycle(cool);
    }
    const where = Object.fromEntries(w.replicas.map((r) => [r.desired.value.spec.replica, r.desired.value.spec.node]));
    expect(where).toEqual({ 'd-small-0': 'c', 'd-small-1': 'c', 'e-fixed-0': 'b' });
    const moves = coalesceMoves(h);
    expect(moves.map((m) => m.payload.replica_id)).toEqual(['d-small-0', 'd-small-1']);
    expect(moves[0]!.payload).toMatchObject({ for: 'big/db', pending_reason: 'no_capacity_memory', hole_node: 'a', src: 'a', dst: 'c' });
    // The moved replicas carry the hole they made (the scheduler holds it for big/db), through completion.
    for (const id of ['d-small-0', 'd-small-1']) {
      const spec = w.replicas.find((r) => r.desired.value.spec.replica === id)!.desired.value.spec;
      expect(spec.move?.forPending ?? spec.movedFrom?.forPending).toEqual({ deployment: 'big', service: 'db', node: 'a' });
    }
    // Room made: the scheduler can place it now, and coalescing says so instead of moving more.
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'fits' });
  });

  it('only a complete plan moves anything: with c too small for both, nothing moves', () => {
    const w = crowded();
    w.addNode('c', { memoryBytes: 400 * MiB });
    const h = run(w, 10);
    expect(coalesceMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'no_plan', noPlan: 'no_plan_fits' });
    // The refusal is an audit record, once (not every cycle), with what preemption said too.
    const refusals = h.audit().filter((a) => a.type === 'rebalance_skipped' && a.payload.for === 'big/db');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]!.payload).toMatchObject({ trigger: 'preempt', reason: 'no_lower_priority', coalesce_reason: 'no_plan_fits', pending_reason: 'no_capacity_memory', priority: 0 });
  });

  it('blockers that never move (stateful, opted out) give only_stateful_blockers and no move', () => {
    const fixed = service({ replicas: 1, rebalance: 'disabled', resources: { memory: '512Mi' } });
    const w = new World()
      .addNode('a', { memoryBytes: 1280 * MiB })
      .addNode('c', { memoryBytes: 1024 * MiB })
      .add(replica('d-fixed-0', 'a', { index: 0, spec: fixed }), replica('e-data-0', 'c', { index: 0, spec: service({ replicas: 1, volumes: [{ type: 'volume', source: 'data', target: '/d' }], resources: { memory: '256Mi' } }) }));
    w.pend(pendingBig());
    const h = run(w, 6);
    expect(coalesceMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'no_plan', noPlan: 'only_stateful_blockers' });
  });

  it('a plan whose next move would exceed its service\'s disruption budget waits: would_exceed_budget', () => {
    const w = crowded();
    // A third replica of the service is down already: maxUnavailable 1 leaves no room for a move.
    w.add(replica('d-small-2', 'c', { index: 2, spec: small, running: false }));
    const h = new Harness(w);
    h.run(4, cool);
    expect(coalesceMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'no_plan', noPlan: 'would_exceed_budget' });
  });

  it('a host port held by a movable replica on the only allowed host: the holder moves', () => {
    const holder = service({ replicas: 1, ports: [8080] });
    const w = new World()
      .addNode('a')
      .addNode('b')
      .add(replica('d-proxy-0', 'a', { index: 0, spec: holder }));
    w.pend({ deployment: 'edge', service: 'lb', spec: withDefaults({ image: 'i', ports: [8080], placement: { mode: 'hosts', hosts: ['a'] } }), reason: 'port_conflict', count: 1 });
    const h = run(w, 4);
    expect(coalesceMoves(h).map((m) => `${m.payload.replica_id} ${m.payload.src}→${m.payload.dst}`)).toEqual(['d-proxy-0 a→b']);
  });

  it('a replica larger than any node gets no plan and nothing moves', () => {
    const w = crowded();
    w.pend(pendingBig({ resources: { memory: '8Gi' } }));
    const h = run(w, 6);
    expect(coalesceMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.coalesce[0]).toMatchObject({ verdict: 'no_plan', noPlan: 'no_plan_fits' });
  });

  it('the higher priority pending service is served first', () => {
    const w = crowded();
    w.pend({ ...pendingBig(), deployment: 'low' }, { ...pendingBig({ priority: 10 }), deployment: 'high' });
    const h = run(w, 4);
    expect(h.cycles.at(-1)!.plan.coalesce.map((v) => `${v.deployment} ${v.verdict}`)).toEqual(['high held', 'low held']);
    expect(h.cycles.at(-1)!.plan.coalesce[1]!.detail).toContain('waits its turn: high/db');
    expect(coalesceMoves(h)[0]!.payload).toMatchObject({ for: 'high/db' });
  });

  it('is a what-if: the placer it is given is left exactly as it was found', () => {
    const w = crowded();
    const snap = w.snapshot(T0, cool);
    const placer = placerFor(snap, T0);
    const probe = () => placer.names.map((n) => `${n}:${placer.replicaCount(n)}:${JSON.stringify(placer.check({ replica: 'p', deployment: 'big', service: 'db', spec: snap.pending![0]!.spec }, n))}`);
    const before = probe();
    const out = planCoalesce({ book: new MoveBook(snap), placer: () => placer, pending: snap.pending!.map((p) => ({ ...p, since: T0 - 3_600_000 })), now: T0, graceMs: 0, exclusion: () => undefined, moveTimeoutMs: () => 60_000 });
    // A planner only says what it wants: the arbiter (decide) starts it or holds it.
    expect(out.views[0]).toMatchObject({ verdict: 'move', node: 'a' });
    expect(out.intent).toMatchObject({ trigger: 'coalesce', src: 'a', forPending: { deployment: 'big', service: 'db', node: 'a' } });
    expect(probe()).toEqual(before);
  });
});

describe('pending services alike in shape', () => {
  it('share a no-plan verdict: the second of them costs no scan of the nodes; one with replicas placed is judged on its own', () => {
    const w = crowded();
    // 2 GiB fits on no node however the small replicas move.
    const huge = (deployment: string) => ({ ...pendingBig({ resources: { memory: '2Gi' } }), deployment });
    w.pend(huge('h1'), huge('h2'), huge('d'));
    const snap = w.snapshot(T0, cool);
    const placer = placerFor(snap, T0);
    let scans = 0;
    const checker = placer.checker.bind(placer);
    placer.checker = (...a) => (scans++, checker(...a));
    const pending = snap.pending!.map((p) => ({ ...p, service: p.deployment === 'd' ? 'small' : p.service, since: T0 - 3_600_000 }));
    const out = planCoalesce({ book: new MoveBook(snap), placer: () => placer, pending, now: T0, graceMs: 0, exclusion: () => undefined, moveTimeoutMs: () => 60_000 });
    expect(out.views.map((v) => [v.deployment, v.verdict, v.noPlan])).toEqual([
      ['d', 'no_plan', 'no_plan_fits'],
      ['h1', 'no_plan', 'no_plan_fits'],
      ['h2', 'no_plan', 'no_plan_fits'],
    ]);
    // d/small has replicas placed (its own peers count): judged alone; h1 once; h2 from h1's verdict.
    expect(scans).toBe(2);
  });
});
