// Seed 000's scorer tests: relief estimate (measured, declared, default), hard-filter ordering and
// reasons, anti-affinity per placement mode, post-move clamping.
import { describe, expect, it } from 'vitest';
import type { PlacementRequest } from '../placement/placer.js';
import { placerFor } from '../placement/input.js';
import type { ServiceSpec } from '../../src/api/types.js';
import { defaultConfig } from './config.js';
import { GiB, Harness, replica, service, T0, World } from '../../test/support/rebalancer-world.js';
import { clearsReliefFloor, DST_STAGES, estimateSrc, evaluateDst, footprintEstimate, FILTER_SKIP_REASON, postDst, shareOn, stageReason, type DstInput } from './scorer.js';

const config = defaultConfig();
const cap = { cpuMillis: 2000, memoryBytes: 4 * GiB, gpus: 0 };

describe('relief estimate', () => {
  it('measured: the agent’s fresh per-replica footprint wins over a declaration', () => {
    const fp = footprintEstimate(service({ resources: { cpu: '1', memory: '1Gi' } }), { cpuMillis: 500, memoryBytes: GiB }, config);
    expect(fp.cpu).toEqual({ source: 'measured', millis: 500 });
    expect(shareOn(fp, cap)).toEqual({ cpu: 0.25, memory: 0.25 });
  });

  it('declared: the service’s resources over the node’s capacity, per dimension', () => {
    const fp = footprintEstimate(service({ resources: { cpu: '500m' } }), undefined, config);
    expect(fp.cpu).toEqual({ source: 'declared', millis: 500 });
    expect(fp.memory).toEqual({ source: 'default', share: 0.06 });
    expect(shareOn(fp, cap)).toEqual({ cpu: 0.25, memory: 0.06 });
  });

  it('default: CPU 0.12 and memory 0.06 of any node', () => {
    const fp = footprintEstimate(service(), undefined, config);
    expect(shareOn(fp, cap)).toEqual({ cpu: 0.12, memory: 0.06 });
    expect(shareOn(fp, { cpuMillis: 64_000, memoryBytes: 256 * GiB, gpus: 0 })).toEqual({ cpu: 0.12, memory: 0.06 });
  });

  it('the default clears the relief floor on its own (sized just above it)', () => {
    const fp = footprintEstimate(service(), undefined, config);
    const e = estimateSrc({ cpu: 0.9, memory: 0.2 }, shareOn(fp, cap), fp, config);
    expect(e).toMatchObject({ dominant: 'cpu', reliefSource: 'default' });
    expect(e.relief).toBeCloseTo(0.12, 12);
    expect(e.score).toBeCloseTo(0.11, 12);
    expect(clearsReliefFloor(e, config)).toBe(true);
  });

  it('relief follows src’s dominant dimension', () => {
    const fp = footprintEstimate(service(), { cpuMillis: 200, memoryBytes: 2 * GiB }, config);
    const e = estimateSrc({ cpu: 0.5, memory: 0.95 }, shareOn(fp, cap), fp, config);
    expect(e).toMatchObject({ dominant: 'memory', relief: 0.5, reliefSource: 'measured' });
    expect(e.after).toBeCloseTo(0.45, 12); // max(0.5 − 0.1, 0.95 − 0.5)
  });

  it('the relief floor compares composite pressure before and after (the other dimension may cap it)', () => {
    const fp = footprintEstimate(service(), { cpuMillis: 600, memoryBytes: 0 }, config);
    const e = estimateSrc({ cpu: 0.9, memory: 0.85 }, shareOn(fp, cap), fp, config);
    expect(e.relief).toBeCloseTo(0.3, 12);
    expect(e.after).toBeCloseTo(0.85, 12);
    expect(clearsReliefFloor(e, config)).toBe(false);
  });

  it('a drop of exactly 0.10 clears the floor despite float noise (0.95 → 0.85)', () => {
    const fp = footprintEstimate(service(), { cpuMillis: 200, memoryBytes: 0 }, config);
    const e = estimateSrc({ cpu: 0.95, memory: 0 }, shareOn(fp, cap), fp, config);
    expect(e.before - e.after).not.toBe(0.1);
    expect(clearsReliefFloor(e, config)).toBe(true);
  });
});

describe('post-move clamping', () => {
  it('src never goes below 0 and relief is what src actually had', () => {
    const fp = footprintEstimate(service(), { cpuMillis: 1800, memoryBytes: 3 * GiB }, config);
    const e = estimateSrc({ cpu: 0.6, memory: 0.3 }, shareOn(fp, cap), fp, config);
    expect(e.afterDims).toEqual({ cpu: 0, memory: 0 });
    expect(e.relief).toBe(0.6);
    expect(e.after).toBe(0);
  });

  it('dst is not clamped: the fit check must see the overflow', () => {
    expect(postDst({ cpu: 0.6, memory: 0.2 }, { cpu: 0.5, memory: 0.1 })).toEqual({ cpu: 1.1, memory: 0.30000000000000004, pressure: 1.1 });
  });

  it('a replica with a footprint on a node without capacity cannot fit there', () => {
    const fp = footprintEstimate(service(), { cpuMillis: 100, memoryBytes: 0 }, config);
    expect(shareOn(fp, { cpuMillis: 0, memoryBytes: GiB, gpus: 0 }).cpu).toBe(Infinity);
  });
});

describe('destination pipeline', () => {
  const share = { cpu: 0.2, memory: 0.1 };
  const dst = (extra: Partial<DstInput> = {}): DstInput => ({ node: 'b', ewma: { cpu: 0.2, memory: 0.2 }, capacity: cap, rejection: () => undefined, ...extra });

  it('passes a cool, eligible destination', () => {
    expect(evaluateDst(dst(), share, config)).toMatchObject({ node: 'b', before: 0.2, after: 0.4 });
    expect(evaluateDst(dst(), share, config).stage).toBeUndefined();
  });

  it.each<[string, Partial<DstInput>, string, string]>([
    ['scheduler: memory', { rejection: () => ({ filter: 'memory', reason: 'no_capacity_memory', detail: 'x' }) }, 'memory', 'resource_limits'],
    ['scheduler: ports', { rejection: () => ({ filter: 'ports', reason: 'port_conflict', detail: 'x' }) }, 'ports', 'resource_limits'],
    ['scheduler: gpus', { rejection: () => ({ filter: 'gpus', reason: 'no_capacity_gpu', detail: 'x' }) }, 'gpus', 'resource_limits'],
    ['scheduler: hosts', { rejection: () => ({ filter: 'hosts', reason: 'cannot_satisfy_host_placement', detail: 'x' }) }, 'hosts', 'anti_affinity'],
    ['scheduler: anti-affinity', { rejection: () => ({ filter: 'anti_affinity', reason: 'cannot_satisfy_host_placement', detail: 'x' }) }, 'anti_affinity', 'anti_affinity'],
    ['scheduler: node NotReady/cordoned', { rejection: () => ({ filter: 'eligibility', reason: 'no_nodes_active', detail: 'cordoned' }) }, 'eligibility', 'no_eligible_dst'],
    ['post-move CPU over 1.0', { ewma: { cpu: 0.85, memory: 0.1 } }, 'post_fit', 'resource_limits'],
    ['post-move memory over 1.0', { ewma: { cpu: 0.1, memory: 0.95 } }, 'post_fit', 'resource_limits'],
    ['dst cap: 0.55 + 0.2 = 0.75 is not below 0.75', { ewma: { cpu: 0.55, memory: 0.1 } }, 'dst_cap', 'dst_cap'],
    ['node cooldown', { receivedAgoMs: 60_000 }, 'cooldown_node', 'cooldown_node'],
    ['ping-pong: moved away from here', { movedAway: true }, 'ping_pong', 'no_eligible_dst'],
  ])('rejects: %s', (_n, extra, stage, reason) => {
    expect(evaluateDst(dst(extra), share, config)).toMatchObject({ stage, reason });
  });

  it('hard filters come first: a destination failing a scheduler filter and a soft gate reports the filter', () => {
    const v = evaluateDst(dst({ ewma: { cpu: 0.7, memory: 0.1 }, receivedAgoMs: 1000, rejection: () => ({ filter: 'anti_affinity', reason: 'cannot_satisfy_host_placement', detail: 'x' }) }), share, config);
    expect(v.stage).toBe('anti_affinity');
  });

  it('resource fit before dst cap before node cooldown', () => {
    expect(evaluateDst(dst({ ewma: { cpu: 0.9, memory: 0.1 }, receivedAgoMs: 1000 }), share, config).stage).toBe('post_fit');
    expect(evaluateDst(dst({ ewma: { cpu: 0.6, memory: 0.1 }, receivedAgoMs: 1000 }), share, config).stage).toBe('dst_cap');
  });

  it('eligibility before the ping-pong exclusion before the scheduler’s other filters', () => {
    expect(evaluateDst(dst({ movedAway: true, rejection: () => ({ filter: 'eligibility', reason: 'no_nodes_active', detail: 'x' }) }), share, config).stage).toBe('eligibility');
    expect(evaluateDst(dst({ movedAway: true, rejection: () => ({ filter: 'memory', reason: 'no_capacity_memory', detail: 'x' }) }), share, config).stage).toBe('ping_pong');
  });

  it('every stage maps to a skip reason, and every scheduler filter is in the pipeline', () => {
    expect(DST_STAGES.map(stageReason).every((r) => typeof r === 'string')).toBe(true);
    for (const f of Object.keys(FILTER_SKIP_REASON)) if (f !== 'excluded' && f !== 'eligibility') expect(DST_STAGES).toContain(f);
  });
});

describe('anti-affinity per placement mode (the scheduler’s own filters)', () => {
  // web-0 on a (hot), web-1 on b; c is free.
  function check(spec: ServiceSpec, dstNode: string) {
    const w = new World().addNode('a').addNode('b').addNode('c');
    w.add(replica('d-web-0', 'a', { spec, index: 0 }), replica('d-web-1', 'b', { spec, index: 1 }));
    const snap = w.snapshot(T0, {});
    const placer = placerFor(snap, T0);
    const req: PlacementRequest = { replica: 'd-web-0', deployment: 'd', service: 'web', spec, index: 0, exclude: ['a'] };
    const v = evaluateDst({ node: dstNode, ewma: { cpu: 0.1, memory: 0.1 }, capacity: snap.nodes[0]!.status!.capacity, rejection: () => placer.check(req, dstNode) }, { cpu: 0.1, memory: 0.1 }, config);
    return v.reason ?? 'pass';
  }

  it.each<[string, ServiceSpec, string, string]>([
    ['spread: no second replica of the service on dst', service(), 'b', 'anti_affinity'],
    ['spread: a node without the service is fine', service(), 'c', 'pass'],
    ['hosts: dst must be listed', service({ placement: { mode: 'hosts', hosts: ['a', 'b'] } }), 'c', 'anti_affinity'],
    ['hosts: a listed node that runs the service is still one per node', service({ placement: { mode: 'hosts', hosts: ['a', 'b', 'c'] } }), 'b', 'anti_affinity'],
    ['hosts: a listed free node is fine', service({ placement: { mode: 'hosts', hosts: ['a', 'c'] } }), 'c', 'pass'],
    ['pack: no anti-affinity', service({ placement: { mode: 'pack' } }), 'b', 'pass'],
    ['nodeSelector: dst must carry the labels', service({ placement: { nodeSelector: { disk: 'ssd' } } }), 'c', 'anti_affinity'],
  ])('%s', (_n, spec, dstNode, expected) => {
    expect(check(spec, dstNode)).toBe(expected);
  });

  it('global: never a candidate at all (excluded by construction, not skipped)', () => {
    const w = new World().addNode('a').addNode('b');
    const g = service({ placement: { mode: 'global' } });
    w.add(replica('d-agent-a', 'a', { spec: g, service: 'agent' }));
    const h = new Harness(w);
    const loads = { a: { cpu: 0.95 }, b: { cpu: 0.1 } };
    const [, c] = h.run(2, loads);
    expect(c!.plan.excluded).toEqual([expect.objectContaining({ replica: 'd-agent-a', reason: 'global' })]);
    expect(c!.plan.candidates).toEqual([]);
    expect(h.audit().map((a) => a.payload.reason)).toEqual(['no_candidate']);
  });

  it('memory requests are hard (seed 004): a dst whose memory is booked is resource_limits', () => {
    const w = new World().addNode('a').addNode('b', { memoryBytes: 512 * 1024 ** 2 });
    const big = service({ resources: { memory: '600Mi' } });
    w.add(replica('d-web-0', 'a', { spec: big }));
    const h = new Harness(w);
    const [, c] = h.run(2, { a: { cpu: 0.95 }, b: { cpu: 0.1 } });
    expect(c!.plan.candidates[0]).toMatchObject({ replica: 'd-web-0', verdict: 'skipped', reason: 'resource_limits', dst: 'b' });
    expect(c!.plan.candidates[0]!.detail).toContain('memory');
  });
});
