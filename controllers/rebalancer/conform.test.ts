// Placement conformance through the whole pure cycle: a service whose placement.hosts or
// nodeSelector changed has replicas on nodes it may no longer use; they move, make-before-break,
// to where the scheduler's placer puts them now — within the disruption budget, never fewer
// running than wanted, and nothing moves that has nowhere to go.
import { describe, expect, it } from 'vitest';
import type { PlacementDecision, ServiceSpec } from '../../src/api/types.js';
import { Harness, replica, service, World, runCycles, type Load } from '../../test/support/rebalancer-world.js';
import { brokenPlacement } from './conform.js';

const cool: Record<string, Load> = { a: { cpu: 0.2 }, b: { cpu: 0.2 }, c: { cpu: 0.2 } };

const run = (w: World, cycles: number): Harness => runCycles(w, cycles, cool);

const nodesOf = (w: World) => w.replicas.map((r) => r.desired.value.spec.node).sort();
const placementMoves = (h: Harness) => h.audit().filter((a) => a.type === 'rebalance_moved' && a.payload.trigger === 'placement');

/** d/web placed with `was` on a, now wanted with `now`. */
function changed(was: ServiceSpec, now: ServiceSpec['placement'], replicas = 1, labels: Record<string, Record<string, string>> = {}): World {
  const w = new World();
  for (const n of ['a', 'b', 'c']) w.addNode(n, { labels: labels[n] ?? {} });
  for (let i = 0; i < replicas; i++) w.add(replica(`d-web-${i}`, 'a', { index: i, spec: was }));
  w.applyChange('d', 'web', { placement: now });
  return w;
}

describe('placement conformance', () => {
  it.each<[string, ServiceSpec['placement'], string, Record<string, string> | undefined, string | undefined]>([
    ['a host still listed', { mode: 'hosts', hosts: ['a', 'b'] }, 'a', undefined, undefined],
    ['a host no longer listed', { mode: 'hosts', hosts: ['b'] }, 'a', undefined, 'not in placement.hosts (b)'],
    ['labels that match', { nodeSelector: { zone: 'x' } }, 'a', { zone: 'x' }, undefined],
    ['a label missing', { nodeSelector: { zone: 'x', disk: 'ssd' } }, 'a', { zone: 'x' }, 'lacks disk=ssd (placement.nodeSelector)'],
    ['no placement at all', undefined, 'a', undefined, undefined],
  ])('brokenPlacement: %s', (_n, placement, node, labels, want) => expect(brokenPlacement(placement, node, labels)).toBe(want));

  it('hosts [a] → [b]: the replica moves to b make-before-break, its decision says why, then nothing more', () => {
    const w = changed(service({ placement: { mode: 'hosts', hosts: ['a'] } }), { mode: 'hosts', hosts: ['b'] });
    const h = run(w, 6);
    const moves = placementMoves(h);
    expect(moves).toHaveLength(1);
    expect(moves[0]!.payload).toMatchObject({ replica_id: 'd-web-0', src: 'a', dst: 'b', broken: 'not in placement.hosts (b)' });
    const start = h.cycles.find((c) => c.plan.move?.trigger === 'placement')!;
    const decision = start.acts.flatMap((a) => a.ops).find((o) => o.op === 'put' && o.key === 'decisions/d/d-web-0') as { value: PlacementDecision } | undefined;
    expect(decision?.value.spec).toMatchObject({ chosen: 'b', trigger: 'rebalance', why: expect.stringMatching(/^placement changed: a not in placement.hosts \(b\)/) });
    // The source stays until the destination runs (make-before-break): two copies in the cycle after the start.
    expect(start.acts.flatMap((a) => a.ops).some((o) => o.op === 'delete')).toBe(false);
    expect(nodesOf(w)).toEqual(['b']);
    expect(placementMoves(run(w, 4))).toEqual([]);
  });

  it('a nodeSelector change: replicas on nodes without the label move, within the budget (maxUnavailable 1: one at a time)', () => {
    const w = changed(service({ replicas: 2 }), { nodeSelector: { zone: 'x' } }, 2, { b: { zone: 'x' }, c: { zone: 'x' } });
    const first = new Harness(w).cycle(cool);
    expect(first.plan.placement.map((v) => v.verdict)).toEqual(['move', 'held']);
    expect(first.plan.placement[1]!.detail).toContain('budget_exceeded');
    const h = run(w, 10);
    expect(placementMoves(h).length).toBeGreaterThanOrEqual(1);
    expect(nodesOf(w).every((n) => n === 'b' || n === 'c')).toBe(true);
    expect(new Set(nodesOf(w))).toEqual(new Set(['b', 'c']));
  });

  it('maxUnavailable 2: both misplaced replicas move in one cycle, to different nodes', () => {
    const w = changed(service({ replicas: 2, update: { maxUnavailable: 2 } }), { nodeSelector: { zone: 'x' } }, 2, { b: { zone: 'x' }, c: { zone: 'x' } });
    const c = new Harness(w).cycle(cool);
    const moved = c.acts.filter((a) => a.effect?.kind === 'move');
    expect(moved).toHaveLength(2);
    expect(new Set(moved.map((a) => (a.effect as { dst: string }).dst))).toEqual(new Set(['b', 'c']));
  });

  it('no node satisfies the new placement: nothing moves, and the plan says why', () => {
    const w = changed(service(), { nodeSelector: { zone: 'nowhere' } });
    const h = run(w, 3);
    expect(placementMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.placement).toEqual([expect.objectContaining({ replica: 'd-web-0', verdict: 'no_dst', detail: expect.stringContaining('no node takes it') })]);
    expect(nodesOf(w)).toEqual(['a']);
  });

  it('a stateful replica is never moved: held with the move refusal', () => {
    const w = changed(service({ placement: { mode: 'hosts', hosts: ['a'] }, volumes: [{ type: 'volume', source: 'data', target: '/d' }] }), { mode: 'hosts', hosts: ['b'] });
    const h = run(w, 2);
    expect(placementMoves(h)).toEqual([]);
    expect(h.cycles.at(-1)!.plan.placement[0]).toMatchObject({ verdict: 'held', detail: expect.stringContaining('stateful_replica') });
  });
});
