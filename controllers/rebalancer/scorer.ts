// The scorer (seed 000, "Selection policy"): a candidate's relief estimate and score, the
// predicted pressures after a move, and each destination's verdict through the hard filters (the
// scheduler's own, then the post-move fit) and the soft gates (dst cap, node cooldown). Pure.
import type { FilterName } from '../../src/api/reasons/scheduling.js';
import type { Rejection } from '../placement/placer.js';
import { FILTER_ORDER } from '../../src/api/reasons/scheduling.js';
import { cpuMillis, formatDuration, memoryBytes } from '../../src/api/units.js';
import type { Capacity, ReplicaFootprint, ServiceSpec } from '../../src/api/types.js';
import { atLeast, atMost, below, f2, type Config } from './config.js';
import { composite, type Dimension } from './pressure.js';
import type { SkipReason } from '../../src/api/reasons/rebalance.js';

/** Where a relief estimate came from, most trusted first. */
export type ReliefSource = 'measured' | 'declared' | 'default';

/** A replica's footprint per dimension: an absolute amount (measured or declared) or a default share. */
export interface Footprint {
  cpu: { source: ReliefSource; millis?: number; share?: number };
  memory: { source: ReliefSource; bytes?: number; share?: number };
}

export interface Utilisation {
  cpu: number;
  memory: number;
}

/**
 * What a replica occupies: its footprint measured by the agent's fresh sample, else its declared
 * resources, else seed 001's conservative defaults (CPU 0.12, memory 0.06 of a node), per dimension.
 */
export function footprintEstimate(template: ServiceSpec, measured: ReplicaFootprint | undefined, config: Pick<Config, 'defaultRelief'>): Footprint {
  if (measured) return { cpu: { source: 'measured', millis: measured.cpuMillis }, memory: { source: 'measured', bytes: measured.memoryBytes } };
  const cpu = cpuMillis(template.resources?.cpu);
  const mem = memoryBytes(template.resources?.memory);
  return {
    cpu: cpu > 0 ? { source: 'declared', millis: cpu } : { source: 'default', share: config.defaultRelief.cpu },
    memory: mem > 0 ? { source: 'declared', bytes: mem } : { source: 'default', share: config.defaultRelief.memory },
  };
}

/** One dimension of a footprint as a share of a capacity: an amount over it, or a default share. */
export function dimShare(amount: number | undefined, share: number | undefined, cap: number): number {
  if (amount === undefined) return share!;
  return cap > 0 ? amount / cap : amount > 0 ? Infinity : 0;
}

/** The footprint as a share of one node's capacity (the unit pressure is measured in). */
export function shareOn(f: Footprint, cap: Capacity): Utilisation {
  return { cpu: dimShare(f.cpu.millis, f.cpu.share, cap.cpuMillis), memory: dimShare(f.memory.bytes, f.memory.share, cap.memoryBytes) };
}

export interface SrcEstimate {
  dominant: Dimension;
  /** The replica's share of src's dominant dimension, clamped to what src has. */
  relief: number;
  reliefSource: ReliefSource;
  score: number;
  before: number;
  after: number;
  afterDims: Utilisation;
}

/**
 * Relief and score of moving a replica off src. Post-move src utilisation is clamped at 0: a
 * measured footprint can exceed the (smoothed) EWMA it is subtracted from.
 */
export function estimateSrc(src: Utilisation, share: Utilisation, f: Footprint, config: Pick<Config, 'moveCost'>): SrcEstimate {
  const { pressure: before, dominant } = composite(src);
  const afterDims = { cpu: Math.max(0, src.cpu - share.cpu), memory: Math.max(0, src.memory - share.memory) };
  const relief = src[dominant] - afterDims[dominant];
  return { dominant, relief, reliefSource: f[dominant].source, score: relief - config.moveCost, before, after: composite(afterDims).pressure, afterDims };
}

/** Predicted dst utilisation after the move (not clamped: the fit check needs the overflow). */
export function postDst(dst: Utilisation, share: Utilisation): Utilisation & { pressure: number } {
  const after = { cpu: dst.cpu + share.cpu, memory: dst.memory + share.memory };
  return { ...after, pressure: composite(after).pressure };
}

/** True when the move relieves src by at least the relief floor. */
export function clearsReliefFloor(e: SrcEstimate, config: Pick<Config, 'reliefFloor'>): boolean {
  return atLeast(e.before - e.after, config.reliefFloor);
}

// ---------------------------------------------------------------- destinations

/** The skip reason each of the scheduler's filters stands for, when it rejects a destination. */
export const FILTER_SKIP_REASON: Record<FilterName, SkipReason> = {
  eligibility: 'no_eligible_dst',
  degraded: 'no_eligible_dst',
  excluded: 'no_eligible_dst',
  hosts: 'anti_affinity',
  node_selector: 'anti_affinity',
  runtime: 'anti_affinity',
  devices: 'anti_affinity',
  volume_locality: 'anti_affinity',
  volume_in_use: 'resource_limits',
  memory: 'resource_limits',
  gpus: 'resource_limits',
  disk: 'resource_limits',
  max_per_node: 'anti_affinity',
  ports: 'resource_limits',
  ipam: 'resource_limits',
  anti_affinity: 'anti_affinity',
};

/**
 * A destination's pipeline, in order. The first stage a destination fails is its verdict; among
 * destinations, the one that got furthest names the candidate's skip reason (the obstacle nearest
 * to a move). Eligibility and the ping-pong exclusion first (the node is not a target at all), the
 * scheduler's own filters in its order, then the post-move fit, then the soft gates: the dst cap
 * (lasting) before the node cooldown (which passes on its own within minutes).
 */
export const DST_STAGES = [
  'eligibility',
  'ping_pong',
  ...(FILTER_ORDER.filter((f) => f !== 'eligibility' && f !== 'excluded') as Exclude<FilterName, 'eligibility' | 'excluded'>[]),
  'post_fit',
  'dst_cap',
  'cooldown_node',
] as const;
export type DstStage = 'eligibility' | 'ping_pong' | Exclude<FilterName, 'eligibility' | 'excluded'> | 'post_fit' | 'dst_cap' | 'cooldown_node';

export const STAGE_RANK: Record<DstStage, number> = Object.fromEntries(DST_STAGES.map((s, i) => [s, i])) as Record<DstStage, number>;
/** Rank of a destination that passes every stage. */
export const PASS_RANK = DST_STAGES.length;

export function stageReason(s: DstStage): SkipReason {
  switch (s) {
    case 'ping_pong':
      return 'no_eligible_dst';
    case 'post_fit':
      return 'resource_limits';
    case 'dst_cap':
      return 'dst_cap';
    case 'cooldown_node':
      return 'cooldown_node';
    default:
      return FILTER_SKIP_REASON[s];
  }
}

/** What the soft stages of a destination depend on: plain numbers, cheap to recompute. */
export interface DstFacts {
  /** The service moved away from this node since balancing was last triggered (seed 002). */
  pingPong: boolean;
  /** Predicted utilisation after the move. */
  postCpu: number;
  postMemory: number;
  post: number;
  /** The node received a move within the node cooldown. */
  received: boolean;
}

/** The first failing stage that does not need the scheduler's filters (ping-pong, fit, cap, cooldown). */
export function softStage(f: DstFacts, config: Pick<Config, 'dstFit' | 'dstCap'>): DstStage | undefined {
  if (f.pingPong) return 'ping_pong';
  if (!atMost(f.postCpu, config.dstFit) || !atMost(f.postMemory, config.dstFit)) return 'post_fit';
  if (!below(f.post, config.dstCap)) return 'dst_cap';
  if (f.received) return 'cooldown_node';
  return undefined;
}

/**
 * The destination's verdict: the first stage of the pipeline it fails, or undefined when it
 * passes. `rejection` is the scheduler's hard filters for it (Placer.check).
 */
export function dstStage(f: DstFacts, rejection: Rejection | undefined, config: Pick<Config, 'dstFit' | 'dstCap'>): DstStage | undefined {
  if (rejection?.filter === 'eligibility' || rejection?.filter === 'excluded') return 'eligibility';
  if (f.pingPong) return 'ping_pong';
  if (rejection) return rejection.filter as DstStage;
  return softStage(f, config);
}

/**
 * The furthest rank a destination could reach whatever the scheduler's filters say: lets the
 * caller skip Placer.check for destinations that cannot beat the furthest one seen so far.
 */
export function softRankBound(f: DstFacts, config: Pick<Config, 'dstFit' | 'dstCap'>): number {
  const s = softStage(f, config);
  return s ? STAGE_RANK[s] : PASS_RANK;
}

export interface DstInput {
  node: string;
  ewma: Utilisation;
  capacity: Capacity;
  /** The scheduler's hard filters for this replica on this node (Placer.check). */
  rejection: () => Rejection | undefined;
  /** The service moved away from this node since balancing was last triggered (the ping-pong exclusion). */
  movedAway?: boolean;
  /** This node last received a move this long ago (ms), within the node cooldown. */
  receivedAgoMs?: number;
}

export interface DstVerdict {
  node: string;
  /** The first failing stage; absent when the destination passes. */
  stage?: DstStage;
  reason?: SkipReason;
  detail: string;
  before: number;
  after: number;
  afterDims: Utilisation;
}

export function dstFacts(d: Pick<DstInput, 'ewma' | 'movedAway' | 'receivedAgoMs'>, share: Utilisation): DstFacts {
  const post = postDst(d.ewma, share);
  return { pingPong: !!d.movedAway, postCpu: post.cpu, postMemory: post.memory, post: post.pressure, received: d.receivedAgoMs !== undefined };
}

/** Runs one destination through the pipeline, with a human detail of its verdict. */
export function evaluateDst(d: DstInput, share: Utilisation, config: Config): DstVerdict {
  const f = dstFacts(d, share);
  const rej = d.rejection();
  const stage = dstStage(f, rej, config);
  const before = composite(d.ewma).pressure;
  const base = { node: d.node, before, after: f.post, afterDims: { cpu: f.postCpu, memory: f.postMemory } };
  if (!stage) return { ...base, detail: `pressure ${f2(before)} → ${f2(f.post)}` };
  return { ...base, stage, reason: stageReason(stage), detail: stageDetail(stage, d, f, rej, config) };
}

function stageDetail(stage: DstStage, d: DstInput, f: DstFacts, rej: Rejection | undefined, config: Config): string {
  switch (stage) {
    case 'ping_pong':
      return `the service moved away from ${d.node} since balancing was last triggered; not moved back until a node or its deployment changes (seed 002)`;
    case 'post_fit':
      return `after the move cpu ${f2(f.postCpu)}, memory ${f2(f.postMemory)}; each must stay ≤ ${config.dstFit}`;
    case 'dst_cap':
      return `pressure after the move ${f2(f.post)} ≥ ${config.dstCap}`;
    case 'cooldown_node':
      return `received a move ${formatDuration(d.receivedAgoMs ?? 0)} ago; node cooldown ${formatDuration(config.cooldownNodeMs)}`;
    default:
      return `${rej!.filter}: ${rej!.detail}`;
  }
}

