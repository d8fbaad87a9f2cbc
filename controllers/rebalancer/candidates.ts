// The pressure planner (seed 000): the candidates on the most pressured node, each scored by the
// relief its move would bring and run through every destination, coolest first. It returns the
// movable ones as move intents, highest score first (ties by replica id), and the arbiter starts
// the first the move mechanism accepts. Pure: no I/O, the clock comes in.
import { isJob, isStateful, placementMode } from '../../src/api/spec.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { Capacity, Node } from '../../src/api/types.js';
import { durationMs, formatDuration } from '../../src/api/units.js';
import { EXCLUSIONS, type Exclusion } from '../../src/api/reasons/rebalance.js';
import { inFlight, type Copy } from '../moves/move.js';
import type { Placer, PlacementRequest } from '../placement/placer.js';
import { below, byName, EPSILON, f2, type Config } from './config.js';
import type { CandidateView, ExcludedView, MoveIntent, NodeView } from './plan.js';
import { auditPayload } from './skips.js';
import type { CycleView } from './view.js';
import {
  clearsReliefFloor,
  dimShare,
  dstStage,
  estimateSrc,
  evaluateDst,
  footprintEstimate,
  PASS_RANK,
  shareOn,
  softRankBound,
  STAGE_RANK,
  type DstFacts,
  type DstInput,
  type DstVerdict,
  type Footprint,
  type Utilisation,
} from './scorer.js';

/** Why a copy may not move at all, whatever asks (pressure, spread, coalescing): by construction never audited. */
export function exclusionOf(copies: readonly Copy[], srcCopy: Copy): Exclusion | undefined {
  const spec = srcCopy.desired.spec;
  if (inFlight(copies) || srcCopy.desired.spec.movingTo) return 'moving';
  if (placementMode(spec.template) === 'global') return 'global';
  if (isStateful(spec.template)) return 'stateful';
  if (spec.template.rebalance === 'disabled') return 'opted_out';
  if (isJob(spec.template)) return 'job';
  if (spec.suspended) return 'suspended';
  if (!replicaRunning(srcCopy.observed)) return 'not_running';
  return undefined;
}

export interface PressureInput {
  /** The most pressured node, past every cluster gate. */
  hot: NodeView;
  /** The cycle's view: every node with a fresh sample, the hot node's measured replicas, the move book, the placer, the cooldowns and the ping-pong exclusion. */
  view: CycleView;
  config: Config;
}

export interface PressurePlan {
  candidates: CandidateView[];
  excluded: ExcludedView[];
  /** The movable candidates' moves, highest score first (ties by replica id). */
  intents: MoveIntent[];
}

/** Every replica on the hot node judged; the movable ones as intents. */
export function planPressure(input: PressureInput): PressurePlan {
  const { hot, view, config } = input;
  const { nodes, book } = view;
  const placer = view.placer();
  const sample = view.sample(hot.node)!;
  const srcCap = capacityOf(nodes.get(hot.node)!);
  // Destinations: every other node with a fresh sample, coolest first (ties by name).
  const dsts = view.signal.filter((v) => v.node !== hot.node).sort((a, b) => a.pressure - b.pressure || byName(a.node, b.node));
  const table: DstTable = { views: dsts, capacity: dsts.map((d) => capacityOf(nodes.get(d.node)!)), receivedAgo: dsts.map((d) => view.nodeCooldown(d.node)) };
  const full = dsts.length <= config.explainDsts;
  const candidates: CandidateView[] = [];
  const excluded: ExcludedView[] = [];
  for (const e of book.replicas.onNode(hot.node)) {
    const id = e.id;
    const copies = book.copies(id);
    const copy = copies.find((c) => c.desired.spec.node === hot.node)!;
    const ex = exclusionOf(copies, copy);
    if (ex) {
      excluded.push({ replica: id, reason: ex, detail: EXCLUSIONS[ex] });
      continue;
    }
    const spec = copy.desired.spec;
    const fp = footprintEstimate(spec.template, sample.replicas[id], config);
    const est = estimateSrc(hot, shareOn(fp, srcCap), fp, config);
    const c: CandidateView = { replica: id, deployment: spec.deployment, service: spec.service, verdict: 'skipped', detail: '', dominant: est.dominant, relief: est.relief, reliefSource: est.reliefSource, score: est.score, srcBefore: est.before, srcAfter: est.after };
    candidates.push(c);
    // Candidate-level gates first: the lasting one (relief floor) before the passing one.
    if (!clearsReliefFloor(est, config)) {
      Object.assign(c, { reason: 'relief_floor', detail: `${est.dominant} relief ${f2(est.relief)} (${est.reliefSource}): src ${f2(est.before)} → ${f2(est.after)}, needs a drop of ${config.reliefFloor}` });
      continue;
    }
    const placedAgo = view.replicaCooldown(copy);
    if (placedAgo !== undefined) {
      Object.assign(c, { reason: 'cooldown_replica', detail: `placed or moved ${formatDuration(Math.max(0, placedAgo))} ago; replica cooldown ${formatDuration(config.cooldownReplicaMs)}` });
      continue;
    }
    if (!dsts.length) {
      Object.assign(c, { reason: 'no_eligible_dst', detail: 'no other node has a fresh pressure sample' });
      continue;
    }
    const req: PlacementRequest = { replica: id, deployment: spec.deployment, service: spec.service, spec: view.book.shape(spec), index: spec.index, exclude: [hot.node] };
    const { best, furthest, all } = destinations(table, fp, req, placer, view.movedAwayFrom(spec.deployment, spec.service), full, config);
    const shown = best ?? furthest!;
    Object.assign(c, { dst: shown.node, dstBefore: shown.before, dstAfter: shown.after });
    if (all) c.dsts = all.map((v) => ({ node: v.node, ...(v.stage ? { stage: v.stage, reason: v.reason } : {}), detail: v.detail, after: v.after }));
    if (best) Object.assign(c, { verdict: 'movable', detail: `to ${best.node}: src ${f2(est.before)} → ${f2(est.after)}, dst ${f2(best.before)} → ${f2(best.after)}` });
    else Object.assign(c, { reason: furthest!.reason, detail: `best destination ${furthest!.node}: ${furthest!.detail}` });
  }
  // The winner: highest score, ties by replica id.
  const movable = candidates.filter((c) => c.verdict === 'movable').sort((a, b) => b.score - a.score || byName(a.replica, b.replica));
  const intents = movable.map((c): MoveIntent => {
    const spec = book.copies(c.replica).find((x) => x.desired.spec.node === hot.node)!.desired.spec;
    return {
      trigger: 'pressure',
      replica: c.replica,
      deployment: c.deployment,
      service: c.service,
      src: hot.node,
      dst: c.dst!,
      why: `moved off ${hot.node} for pressure: ${c.detail}`,
      // The scheduler's verdicts over the nodes, stored with the move; the rebalancer's reason is the why.
      verdicts: () => placer.decide({ replica: c.replica, deployment: spec.deployment, service: spec.service, spec: view.book.shape(spec), index: spec.index, exclude: [hot.node] }),
      timeoutMs: durationMs(spec.template.update?.stepTimeout, config.moveTimeoutMs),
      payload: auditPayload(c, hot, config),
      view: { dominant: c.dominant, relief: c.relief, score: c.score, srcBefore: c.srcBefore, srcAfter: c.srcAfter, dstBefore: c.dstBefore!, dstAfter: c.dstAfter! },
      started: () => (c.verdict = 'move'),
      held: (why) => (c.detail = `${c.detail}; not chosen: ${why}`),
      refused: (refusal, detail) => Object.assign(c, { verdict: 'refused', refusal, detail: `${c.detail}; the move mechanism refused: ${refusal} (${detail})` }),
    };
  });
  return { candidates, excluded, intents };
}

/** The destinations of a cycle, coolest first, with what their verdicts need. */
interface DstTable {
  views: NodeView[];
  capacity: Capacity[];
  /** How long ago each received a move, when within the node cooldown. */
  receivedAgo: (number | undefined)[];
}

/**
 * Runs one candidate through every destination: the best that passes (lowest pressure after the
 * move, ties by name) and the one that got furthest down the pipeline. The scheduler's filters
 * run once over all nodes (Placer.candidates); Placer.check names a rejection only for a
 * destination that could still beat the furthest one, and human details are written only for
 * the two verdicts kept (every verdict on a cluster small enough to list them all).
 */
function destinations(
  t: DstTable,
  fp: Footprint,
  req: PlacementRequest,
  placer: Placer,
  movedAway: ReadonlySet<string>,
  full: boolean,
  config: Config,
): { best?: DstVerdict; furthest?: DstVerdict; all?: DstVerdict[] } {
  const passing = new Set(placer.candidates(req));
  // One scoring model (seed 003): among passing destinations the scheduler's standing (peers of the
  // service, recent failures) decides first, measured post-move pressure next, then the name.
  const standing = placer.standing(req);
  let bestStanding = -Infinity;
  const facts: DstFacts = { pingPong: false, postCpu: 0, postMemory: 0, post: 0, received: false };
  let bestI = -1;
  let furthestI = -1;
  let furthestRank = -1;
  for (let i = 0; i < t.views.length; i++) {
    const v = t.views[i]!;
    facts.pingPong = movedAway.has(v.node);
    facts.postCpu = v.cpu + dimShare(fp.cpu.millis, fp.cpu.share, t.capacity[i]!.cpuMillis);
    facts.postMemory = v.memory + dimShare(fp.memory.bytes, fp.memory.share, t.capacity[i]!.memoryBytes);
    facts.post = Math.max(facts.postCpu, facts.postMemory);
    facts.received = t.receivedAgo[i] !== undefined;
    // A destination that can neither pass nor get further than the furthest so far changes nothing.
    const bound = softRankBound(facts, config);
    if (!full && bound < PASS_RANK && bound <= furthestRank) continue;
    const stage = dstStage(facts, passing.has(v.node) ? undefined : placer.check(req, v.node), config);
    const rank = stage ? STAGE_RANK[stage] : PASS_RANK;
    if (rank === PASS_RANK) {
      const b = bestI >= 0 ? t.views[bestI]! : undefined;
      const bPost = bestI >= 0 ? postOf(b!, fp, t.capacity[bestI]!) : Infinity;
      const s = standing(v.node);
      if (!b || s > bestStanding || (s === bestStanding && (facts.post < bPost - EPSILON || (Math.abs(facts.post - bPost) <= EPSILON && v.node < b.node)))) {
        bestI = i;
        bestStanding = s;
      }
    } else if (rank > furthestRank) {
      furthestI = i;
      furthestRank = rank;
    }
  }
  const verdict = (i: number): DstVerdict => {
    const v = t.views[i]!;
    const input: DstInput = {
      node: v.node,
      ewma: v,
      capacity: t.capacity[i]!,
      rejection: () => (passing.has(v.node) ? undefined : placer.check(req, v.node)),
      ...(movedAway.has(v.node) ? { movedAway: true } : {}),
      ...(t.receivedAgo[i] !== undefined ? { receivedAgoMs: t.receivedAgo[i] } : {}),
    };
    return evaluateDst(input, shareOn(fp, t.capacity[i]!), config);
  };
  return {
    ...(bestI >= 0 ? { best: verdict(bestI) } : {}),
    ...(furthestI >= 0 ? { furthest: verdict(furthestI) } : {}),
    ...(full ? { all: t.views.map((_, i) => verdict(i)) } : {}),
  };
}

export function postOf(v: Utilisation, fp: Footprint, cap: Capacity): number {
  return Math.max(v.cpu + dimShare(fp.cpu.millis, fp.cpu.share, cap.cpuMillis), v.memory + dimShare(fp.memory.bytes, fp.memory.share, cap.memoryBytes));
}

export function capacityOf(n: Node): Capacity {
  return n.status?.capacity ?? { cpuMillis: 0, memoryBytes: 0, gpus: 0 };
}

/** Why a spread move may not land on a node beyond the scheduler's filters: no fresh sample, or pressure after it at the cap. */
export function underPressureCap(v: NodeView | undefined, copy: Copy, node: Node, config: Config): string | undefined {
  if (!v) return 'no fresh pressure sample';
  const after = postOf(v, footprintEstimate(copy.desired.spec.template, undefined, config), capacityOf(node));
  return below(after, config.dstCap) ? undefined : `pressure after the move ${f2(after)} ≥ ${config.dstCap}`;
}
