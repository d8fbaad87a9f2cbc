// The rebalancer's cycle (seed 000, ADR 0002): decide(state, snapshot, now, config) folds fresh
// pressure samples into the leader-local EWMAs, advances the rebalancer's own in-flight moves,
// checks the cluster gates, scores the candidates on the most pressured node and returns at most
// one move, the audit records of every per-candidate skip, the next leader-local state and the
// explanation `jaco rebalance plan` prints. Pure: no I/O, no clock, deterministic (ties by node
// name, then replica id). Effects of acts that must land first (cooldowns, the ping-pong
// exclusion, which skips were recorded) are applied by afterCommit once the shell knows they did.
import { nodeLabels, nodeReady, unschedulableBecause } from '../../src/api/nodes.js';
import { replicaRunning } from '../../src/api/readiness.js';
import { isJob, isStateful, placementMode } from '../../src/api/spec.js';
import type { NetworkView } from '../placement/ipam.js';
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { Capacity, DisruptionLedger, Heartbeat, Node, NodeDrain, PressureSample, ReplicaCommand, ServiceSpec, VolumeHome } from '../../src/api/types.js';
import type { ReplicaEntry, ReplicaIndex } from '../../src/runtime/replicas.js';
import type { Versioned } from '../../src/store/store.js';
import { durationMs, formatDuration } from '../../src/api/units.js';
import type { Act } from '../../src/runtime/acts.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Op } from '../../src/store/writer.js';
import { advanceMoves, inFlight, MoveBook, startMove, type Copy, type MoveOutcome, type MoveRefusal } from '../moves/move.js';
import type { Placer, PlacementRequest } from '../placement/placer.js';
import { placerFor, type EligibilityRevisions } from '../placement/input.js';
import { planSpread, type SpreadView } from './spread.js';
import { planCoalesce, type CoalesceView, type PendingService } from './coalesce.js';
import { planConform, type ConformView } from './conform.js';
import { planPreempt, type PreemptView } from './preempt.js';
import { atLeast, below, EPSILON, type Config } from './config.js';
import { composite, fold, readingOf, type Dimension, type NodeEwma } from './pressure.js';
import { EXCLUSIONS, type Exclusion, type Gate, type NoPlanReason, type NoPreemptReason, type SkipReason } from '../../src/api/reasons/rebalance.js';

/** What the audit log last recorded for a key: a candidate's skip, or why a pending service gets no help. */
type AuditedReason = SkipReason | NoPlanReason | NoPreemptReason;
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
  type ReliefSource,
  type Utilisation,
} from './scorer.js';

// ---------------------------------------------------------------- state and snapshot

export interface NodeState {
  ewma: NodeEwma;
  /** Consecutive cycles at or over the trigger (reset by a cycle under it or without a sample). */
  over: number;
}

export interface RebalancerState {
  cycles: number;
  /** When the last counted cycle ran; passes closer than half a cycle re-evaluate it. */
  lastCycleAt?: number;
  nodes: ReadonlyMap<string, NodeState>;
  /** Node → when it last received a move (node cooldown). */
  received: ReadonlyMap<string, number>;
  /** Skip key → the reason last recorded in the audit log, and when (no flooding). */
  audited: ReadonlyMap<string, { reason: AuditedReason; at: number }>;
  /** Pending service (`<deployment>/<service>`) → when this leader first saw it unschedulable for capacity. */
  pendingSince?: ReadonlyMap<string, number>;
  /** Set on a state rebuilt outside the leader: counters and cooldowns are assumptions. */
  seeded?: boolean;
}

export function initialState(): RebalancerState {
  return { cycles: 0, nodes: new Map(), received: new Map(), audited: new Map() };
}

/** What the cycle reads: the cache's view (snapshot.ts builds it) and the fresh pressure samples. */
export interface Snapshot {
  /** Fresh samples by node (PressureSource.samples(now)). */
  samples: ReadonlyMap<string, PressureSample>;
  nodes: readonly Node[];
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  /** Every replica with its copies and what their agents observe. */
  replicas: ReplicaIndex;
  /** Disruption ledgers by `<deployment>/<service>`. */
  ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>;
  /** Restart commands by store key (the disruption budget counts pending ones). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  volumeHomes: readonly VolumeHome[];
  /** Mod revisions of the node and drain keys (a move start compares its destination's). */
  eligibility: EligibilityRevisions;
  /** Services the scheduler cannot place for capacity (memory, GPUs, ports): coalescing's work. */
  pending?: readonly Omit<PendingService, 'since'>[];
  /** Every service's current placement by `<deployment>/<service>` (placement conformance). */
  placements?: ReadonlyMap<string, ServiceSpec['placement']>;
  /** Every service's current priority by `<deployment>/<service>` (preemption; templates may lag: priority is not in the spec hash). */
  priorities?: ReadonlyMap<string, number>;
  /** The cluster network: a moved cluster-network replica gets an address on its destination. */
  network?: NetworkView;
  /** The cluster's node-eligibility settings (degraded destinations, default scratch disk). */
  settings?: NodeSettingsResolved;
}

// ---------------------------------------------------------------- the plan (explanation)

export interface NodeView {
  node: string;
  cpu: number;
  memory: number;
  pressure: number;
  dominant: Dimension;
  /** Consecutive cycles at or over the trigger. */
  over: number;
  sampleAt: string;
  /** Why it takes no moves (NotReady, cordoned, draining…), if so. */
  ineligible?: string;
  /** It received a move this long ago, within the node cooldown. */
  cooldownMs?: number;
}

export interface GateView {
  gate: Gate;
  /** null: not evaluated (an earlier gate has no data to evaluate it on). */
  holds: boolean | null;
  detail: string;
}

export type Verdict = 'move' | 'movable' | 'skipped' | 'refused';

export interface CandidateView {
  replica: string;
  deployment: string;
  service: string;
  verdict: Verdict;
  reason?: SkipReason;
  refusal?: MoveRefusal;
  detail: string;
  dominant: Dimension;
  relief: number;
  reliefSource: ReliefSource;
  score: number;
  srcBefore: number;
  srcAfter: number;
  dst?: string;
  dstBefore?: number;
  dstAfter?: number;
  /** For skips: whether this cycle writes an audit record (false: same reason recorded recently). */
  audited?: boolean;
  /** On small clusters: every destination's verdict, coolest first. */
  dsts?: { node: string; stage?: string; reason?: SkipReason; detail: string; after: number }[];
}

export interface ExcludedView {
  replica: string;
  reason: Exclusion;
  detail: string;
}

export interface MoveView {
  /** What asked for the move: a pressured node, a spread service's skew, or room for a pending replica. */
  trigger: 'pressure' | 'placement' | 'spread' | 'coalesce' | 'preempt';
  replica: string;
  deployment: string;
  service: string;
  src: string;
  dst: string;
  dominant: Dimension;
  relief: number;
  score: number;
  srcBefore: number;
  srcAfter: number;
  dstBefore: number;
  dstAfter: number;
  moveId: string;
}

export interface InFlightView {
  replica: string;
  src: string;
  dst: string;
  startedAt: string;
  deadline: string;
  /** What this cycle does with it, if anything. */
  outcome?: MoveOutcome;
}

export interface RebalancePlan {
  at: string;
  cycle: number;
  /** False when this pass re-evaluated the current cycle (or only explained it): counters did not advance. */
  countedCycle: boolean;
  thresholds: Pick<Config, 'trigger' | 'consecutiveCycles' | 'imbalanceGap' | 'reliefFloor' | 'dstCap' | 'dstFit' | 'moveCost'>;
  nodes: NodeView[];
  silent: { node: string; why: string }[];
  src?: string;
  gates: GateView[];
  /** The gate that stopped the cycle; 'none' when it chose a move. */
  stoppedBy: Gate;
  candidates: CandidateView[];
  excluded: ExcludedView[];
  move?: MoveView;
  /** Replicas on nodes their service's placement no longer allows, and what this cycle does about each. */
  placement: ConformView[];
  /** Spread services as this cycle judged their skew (only those with more than one replica on a node are worth a look). */
  spread: SpreadView[];
  /** Pending services and the plan that would make room for each (coalescing). */
  coalesce: CoalesceView[];
  /** Pending services coalescing could not serve, and the lower-priority replicas each would evict. */
  preempt: PreemptView[];
  inFlight: InFlightView[];
  /** Set on a plan recomputed outside the leader: what was assumed. */
  assumptions?: string[];
}

/** What landing an act means for leader-local state (applied by afterCommit). */
export type Effect =
  | { kind: 'move'; trigger: MoveView['trigger']; replica: string; src: string; dst: string }
  | { kind: 'skip'; key: string; reason: AuditedReason }
  /** A pending service the rescheduler can do nothing for, recorded (the metric counts it by trigger and reason). */
  | { kind: 'refusal'; key: string; trigger: 'coalesce' | 'preempt'; reason: NoPlanReason | NoPreemptReason }
  /** Replicas stopped for a higher-priority pending one (the metric counts them). */
  | { kind: 'preempt'; stopped: number };

export interface RebalanceAct extends Act {
  effect?: Effect;
}

export interface Cycle {
  state: RebalancerState;
  acts: RebalanceAct[];
  plan: RebalancePlan;
}

// ---------------------------------------------------------------- helpers

const r4 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? (x ?? null) : Math.round(x * 10_000) / 10_000);
const f2 = (x: number) => x.toFixed(2);
const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** How often a skip that keeps its reason is recorded again: every 120 cycles (1 h in production). */
export const SKIP_REPEAT_CYCLES = 120;

function exclusionOf(copies: readonly Copy[], srcCopy: Copy): Exclusion | undefined {
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

/** The audit payload of seed 000, the same for rebalance_moved and rebalance_skipped. */
export function auditPayload(c: CandidateView | undefined, src: NodeView, config: Pick<Config, 'moveCost'>, reason?: SkipReason): Record<string, unknown> {
  return {
    replica_id: c?.replica ?? null,
    deployment: c?.deployment ?? null,
    service: c?.service ?? null,
    src: src.node,
    dst: c?.dst ?? null,
    dominant: c?.dominant ?? src.dominant,
    relief: r4(c?.relief),
    score: r4(c?.score),
    move_cost: config.moveCost,
    src_pressure_before: r4(c?.srcBefore ?? src.pressure),
    dst_pressure_before: r4(c?.dstBefore),
    src_pressure_after: r4(c?.srcAfter),
    dst_pressure_after: r4(c?.dstAfter),
    ...(reason ? { reason } : {}),
    ...(c ? { relief_source: c.reliefSource } : {}),
    detail: c?.detail ?? null,
  };
}

// ---------------------------------------------------------------- the cycle

export interface DecideOptions {
  /** Explain only (`jaco rebalance plan`): never counts as a cycle, whatever the time. */
  explainOnly?: boolean;
}

export function decide(state: RebalancerState, snap: Snapshot, now: number, config: Config, opts: DecideOptions = {}): Cycle {
  const countedCycle = !opts.explainOnly && (state.lastCycleAt === undefined || now - state.lastCycleAt >= config.cycleMs / 2);

  // 1. Signal: fold each fresh sample into its node's EWMA; a node without one is silent.
  const nodeObjs = new Map(snap.nodes.map((n) => [n.metadata.name, n]));
  // Why each node takes no moves (NotReady, cordoned, draining…), as the scheduler judges it.
  const whyIneligible = new Map(snap.nodes.map((n) => [n.metadata.name, unschedulableBecause(n, snap.heartbeats.get(n.metadata.name), snap.drains.get(n.metadata.name), now)]));
  const nextNodes = new Map<string, NodeState>();
  const views: NodeView[] = [];
  const silent: { node: string; why: string }[] = [];
  const received = prune(state.received, (t) => now - t < config.cooldownNodeMs);
  for (const name of [...new Set([...nodeObjs.keys(), ...snap.samples.keys()])].sort(byName)) {
    const prev = state.nodes.get(name);
    const sample = snap.samples.get(name);
    const node = nodeObjs.get(name);
    if (!sample || !node) {
      silent.push({ node: name, why: !node ? 'not registered' : 'no fresh pressure sample' });
      if (prev) nextNodes.set(name, { ewma: prev.ewma, over: countedCycle ? 0 : prev.over });
      continue;
    }
    const ewma = fold(prev?.ewma, readingOf(sample), now, config.ewmaWindowMs);
    const c = composite(ewma);
    const over = countedCycle ? (atLeast(c.pressure, config.trigger) ? (prev?.over ?? 0) + 1 : 0) : (prev?.over ?? 0);
    nextNodes.set(name, { ewma, over });
    const got = received.get(name);
    const why = whyIneligible.get(name);
    views.push({
      node: name,
      cpu: ewma.cpu,
      memory: ewma.memory,
      pressure: c.pressure,
      dominant: c.dominant,
      over,
      sampleAt: sample.time,
      ...(why ? { ineligible: why } : {}),
      ...(got !== undefined ? { cooldownMs: now - got } : {}),
    });
  }

  // 2. The rebalancer's own in-flight moves: cut over, complete or abandon those that are due.
  const book = new MoveBook(snap);
  // A move toward a node that is NotReady or gone is abandoned at once; one away from it completes.
  const lost = new Set<string>();
  for (const id of book.moving()) {
    const dst = inFlight(book.copies(id))!;
    for (const n of [dst.desired.spec.node, dst.desired.spec.move!.from]) if (!nodeObjs.has(n) || !nodeReady(snap.heartbeats.get(n), now)) lost.add(n);
  }
  const steps = advanceMoves(book, now, { by: 'rebalancer', lostNodes: lost }, (n, r) => snap.replicas.observed(n, r));
  const acts: RebalanceAct[] = steps.map((s) =>
    s.outcome === 'cutover'
      ? { label: `rebalance move cutover ${s.replica} ${s.src}→${s.dst}`, ops: s.ops, audit: [] }
      : {
          label: `rebalance move ${s.outcome} ${s.replica} ${s.src}→${s.dst}`,
          ops: s.ops,
          audit: [
            {
              type: s.outcome === 'completed' ? 'rebalance_completed' : 'rebalance_abandoned',
              time: now,
              deployment: s.deployment,
              payload: { replica_id: s.replica, deployment: s.deployment, service: s.service, src: s.src, dst: s.dst, move_id: s.moveId, duration_ms: s.durationMs, ...(s.reason ? { reason: s.reason } : {}) },
            },
          ],
        },
  );
  const outcome = new Map(steps.map((s) => [s.replica, s.outcome]));
  const inFlightViews: InFlightView[] = [];
  for (const id of book.moving()) {
    const m = inFlight(book.copies(id))?.desired.spec;
    if (m?.move?.by !== 'rebalancer') continue;
    const o = outcome.get(id);
    inFlightViews.push({ replica: id, src: m.move.from, dst: m.node, startedAt: m.move.startedAt, deadline: m.move.deadline, ...(o ? { outcome: o } : {}) });
  }
  inFlightViews.sort((a, b) => byName(a.replica, b.replica));

  // 3. Cluster gates, cheapest first; the first that does not hold stops the cycle.
  const gates: GateView[] = [];
  let src: NodeView | undefined;
  let min: NodeView | undefined;
  for (const v of views) {
    if (!src || v.pressure > src.pressure) src = v;
    if (!min || v.pressure < min.pressure) min = v;
  }
  if (!src || !min) {
    gates.push({ gate: 'pressure_data', holds: false, detail: `no node has a fresh pressure sample (${silent.length} silent)` });
    for (const g of ['trigger_threshold', 'consecutive_cycles', 'imbalance_gap'] as const) gates.push({ gate: g, holds: null, detail: 'no data' });
  } else {
    gates.push({ gate: 'pressure_data', holds: true, detail: `${views.length} node(s) with fresh samples, ${silent.length} silent` });
    gates.push({ gate: 'trigger_threshold', holds: atLeast(src.pressure, config.trigger), detail: `max pressure ${f2(src.pressure)} (${src.node}, ${src.dominant}) vs trigger ${config.trigger}` });
    gates.push({ gate: 'consecutive_cycles', holds: src.over >= config.consecutiveCycles, detail: `${src.node} at or over the trigger for ${src.over} consecutive cycle(s), ${config.consecutiveCycles} needed` });
    const gap = src.pressure - min.pressure;
    gates.push({ gate: 'imbalance_gap', holds: atLeast(gap, config.imbalanceGap), detail: `max − min = ${f2(src.pressure)} (${src.node}) − ${f2(min.pressure)} (${min.node}) = ${f2(gap)} vs ${config.imbalanceGap}` });
  }
  const moving = inFlightViews.length;
  gates.push({ gate: 'move_in_flight', holds: moving === 0, detail: moving ? `${moving} rebalancer move(s) in flight: ${inFlightViews.map((m) => `${m.replica} ${m.src}→${m.dst}`).join(', ')}` : 'no rebalancer move in flight' });
  const closed = gates.find((g) => g.holds !== true);

  const candidates: CandidateView[] = [];
  const excluded: ExcludedView[] = [];
  const skipRepeatMs = config.cycleMs * SKIP_REPEAT_CYCLES;
  const audited = new Map<string, { reason: AuditedReason; at: number }>();
  // Gate-stopped cycles keep the skip memory (an oscillating trigger must not re-record every skip).
  if (closed) for (const [k, v] of state.audited) if (now - v.at < skipRepeatMs) audited.set(k, v);
  let move: MoveView | undefined;
  let stoppedBy: Gate = closed?.gate ?? 'candidates';
  let placer: Placer | undefined;
  const placerOnce = () => (placer ??= placerFor(snap, now));

  // 4. Candidates on the most pressured node: evaluated only when every cluster gate holds.
  if (!closed && src) {
    const hot = src;
    const srcNode = nodeObjs.get(hot.node)!;
    const srcCap = capacityOf(srcNode);
    const sample = snap.samples.get(hot.node)!;
    const placer = placerOnce();
    // Destinations: every other node with a fresh sample, coolest first (ties by name).
    const dsts = views.filter((v) => v.node !== hot.node).sort((a, b) => a.pressure - b.pressure || byName(a.node, b.node));
    const table: DstTable = {
      views: dsts,
      capacity: dsts.map((d) => capacityOf(nodeObjs.get(d.node)!)),
      receivedAgo: dsts.map((d) => (received.has(d.node) ? now - received.get(d.node)! : undefined)),
    };
    const full = dsts.length <= config.explainDsts;
    for (const e of snap.replicas.onNode(hot.node)) {
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
      const c: CandidateView = {
        replica: id,
        deployment: spec.deployment,
        service: spec.service,
        verdict: 'skipped',
        detail: '',
        dominant: est.dominant,
        relief: est.relief,
        reliefSource: est.reliefSource,
        score: est.score,
        srcBefore: est.before,
        srcAfter: est.after,
      };
      candidates.push(c);
      // Candidate-level gates first: the lasting one (relief floor) before the passing one.
      if (!clearsReliefFloor(est, config)) {
        Object.assign(c, { reason: 'relief_floor', detail: `${est.dominant} relief ${f2(est.relief)} (${est.reliefSource}): src ${f2(est.before)} → ${f2(est.after)}, needs a drop of ${config.reliefFloor}` });
        continue;
      }
      const placedAgo = now - Date.parse(spec.placedAt);
      if (placedAgo < config.cooldownReplicaMs) {
        Object.assign(c, { reason: 'cooldown_replica', detail: `placed or moved ${formatDuration(Math.max(0, placedAgo))} ago; replica cooldown ${formatDuration(config.cooldownReplicaMs)}` });
        continue;
      }
      if (!dsts.length) {
        Object.assign(c, { reason: 'no_eligible_dst', detail: 'no other node has a fresh pressure sample' });
        continue;
      }
      const req: PlacementRequest = { replica: id, deployment: spec.deployment, service: spec.service, spec: spec.template, index: spec.index, exclude: [hot.node] };
      const movedAway = lastMoveAway(copy, now, config);
      const { best, furthest, all } = destinations(table, fp, req, placer, movedAway, full, config);
      const shown = best ?? furthest!;
      Object.assign(c, { dst: shown.node, dstBefore: shown.before, dstAfter: shown.after });
      if (all) c.dsts = all.map((v) => ({ node: v.node, ...(v.stage ? { stage: v.stage, reason: v.reason } : {}), detail: v.detail, after: v.after }));
      if (best) Object.assign(c, { verdict: 'movable', detail: `to ${best.node}: src ${f2(est.before)} → ${f2(est.after)}, dst ${f2(best.before)} → ${f2(best.after)}` });
      else Object.assign(c, { reason: furthest!.reason, detail: `best destination ${furthest!.node}: ${furthest!.detail}` });
    }
    if (!candidates.length) stoppedBy = 'candidates';

    // 5. The winner: highest score, ties by replica id, through the shared move mechanism.
    const movable = candidates.filter((c) => c.verdict === 'movable').sort((a, b) => b.score - a.score || byName(a.replica, b.replica));
    for (const c of movable) {
      if (move) {
        c.detail = `${c.detail}; not chosen: one move per cycle (${move.replica} scores higher)`;
        continue;
      }
      const spec = book.copies(c.replica).find((x) => x.desired.spec.node === hot.node)!.desired.spec;
      const moveId = `rb-${now}-${c.replica}`;
      const timeoutMs = durationMs(spec.template.update?.stepTimeout, config.moveTimeoutMs);
      // The scheduler's verdicts over the nodes, stored with the move; the rebalancer's reason is the why.
      const verdicts = placer.decide({ replica: c.replica, deployment: spec.deployment, service: spec.service, spec: spec.template, index: spec.index, exclude: [hot.node] });
      const decision = { verdicts, why: `moved off ${hot.node} for pressure: ${c.detail}` };
      const started = startMove(book, { replica: c.replica, src: hot.node, dst: c.dst!, by: 'rebalancer', id: moveId, now, timeoutMs, decision });
      if (!started.ok) {
        Object.assign(c, { verdict: 'refused', refusal: started.refusal, detail: `${c.detail}; the move mechanism refused: ${started.refusal} (${started.detail})` });
        continue;
      }
      c.verdict = 'move';
      move = { trigger: 'pressure', replica: c.replica, deployment: c.deployment, service: c.service, src: hot.node, dst: c.dst!, dominant: c.dominant, relief: c.relief, score: c.score, srcBefore: c.srcBefore, srcAfter: c.srcAfter, dstBefore: c.dstBefore!, dstAfter: c.dstAfter!, moveId };
      stoppedBy = 'none';
      acts.push({
        label: `rebalance move ${c.replica} ${hot.node}→${c.dst}`,
        ops: started.ops,
        audit: [{ type: 'rebalance_moved', time: now, deployment: c.deployment, payload: { ...auditPayload(c, hot, config), move_id: moveId, trigger: 'pressure' } }],
        effect: { kind: 'move', trigger: 'pressure', replica: c.replica, src: hot.node, dst: c.dst! },
      });
    }

    // 6. Skips: one record per candidate, unless the same reason was recorded recently.
    const skip = (key: string, reason: SkipReason, c: CandidateView | undefined, view: { audited?: boolean }) => {
      const last = state.audited.get(key);
      if (last && last.reason === reason && now - last.at < skipRepeatMs) {
        audited.set(key, last);
        view.audited = false;
        return;
      }
      view.audited = true;
      const record: AuditRecord = { type: 'rebalance_skipped', time: now, ...(c ? { deployment: c.deployment } : {}), payload: auditPayload(c, hot, config, reason) };
      acts.push({ label: `rebalance skip ${key}`, ops: [], audit: [record], effect: { kind: 'skip', key, reason } });
    };
    for (const c of candidates) if (c.verdict === 'skipped') skip(c.replica, c.reason!, c, c);
    if (!candidates.length) {
      const noCandidate: { audited?: boolean } = {};
      skip(`node:${hot.node}`, 'no_candidate', undefined, noCandidate);
      gates.push({ gate: 'candidates', holds: false, detail: `no candidate on ${hot.node}: ${excluded.length} replica(s) excluded${noCandidate.audited === false ? ' (already recorded)' : ''}` });
    } else {
      const n = candidates.filter((c) => c.verdict === 'movable' || c.verdict === 'move').length;
      gates.push({ gate: 'candidates', holds: !!move, detail: `${n} of ${candidates.length} candidate(s) on ${hot.node} can move${move ? `; chosen ${move.replica} → ${move.dst}` : ''}` });
    }
  } else {
    gates.push({ gate: 'candidates', holds: null, detail: `not evaluated: stopped by ${closed?.gate ?? 'pressure_data'}` });
  }

  // Moves for spread and coalescing: the same view, act and audit record, told apart by trigger.
  const viewOf = new Map(views.map((v) => [v.node, v]));
  const moveTimeoutMs = (e: ReplicaEntry) => durationMs(e.copies[0]!.desired.spec.template.update?.stepTimeout, config.moveTimeoutMs);
  const startedMove = (trigger: 'placement' | 'spread' | 'coalesce' | 'preempt', m: Pick<MoveView, 'replica' | 'deployment' | 'service' | 'src' | 'dst'>, ops: Op[], moveId: string, payload: Record<string, unknown>) => {
    const [from, to] = [viewOf.get(m.src), viewOf.get(m.dst)];
    const [srcP, dstP] = [from?.pressure ?? 0, to?.pressure ?? 0];
    move = { trigger, replica: m.replica, deployment: m.deployment, service: m.service, src: m.src, dst: m.dst, dominant: to?.dominant ?? 'memory', relief: 0, score: 0, srcBefore: srcP, srcAfter: srcP, dstBefore: dstP, dstAfter: dstP, moveId };
    stoppedBy = 'none';
    acts.push({
      label: `rebalance ${trigger} ${m.replica} ${m.src}→${m.dst}`,
      ops,
      audit: [{ type: 'rebalance_moved', time: now, deployment: m.deployment, payload: { replica_id: m.replica, deployment: m.deployment, service: m.service, src: m.src, dst: m.dst, trigger, move_id: moveId, ...payload } }],
      effect: { kind: 'move', trigger, replica: m.replica, src: m.src, dst: m.dst },
    });
  };

  // 6. Placement conformance: replicas on nodes their service's placement no longer allows (a
  // changed hosts or nodeSelector) move to where the scheduler places them — a broken hard
  // constraint goes before spread and coalescing, as many at once as each service's budget allows.
  const conform = planConform({
    book,
    placer: placerOnce,
    placements: snap.placements ?? new Map(),
    labels: new Map(snap.nodes.map((n) => [n.metadata.name, nodeLabels(n)])),
    now,
    moveTimeoutMs,
    mayMove: countedCycle && !move,
  });
  for (const m of conform.moves) startedMove('placement', { ...m.view, src: m.view.node }, m.start.ops, m.moveId, { broken: m.view.broken, detail: m.view.detail });

  // 7. Spread skew, once the pressure path has had its turn: still one move per cycle, cluster-wide,
  // and none while a rebalancer move is in flight. Destinations keep under the pressure cap.
  const spread = planSpread({
    book,
    placer: placerOnce,
    now,
    cooldownReplicaMs: config.cooldownReplicaMs,
    moveTimeoutMs,
    exclusion: exclusionOf,
    dstRefusal: (node, copy) => {
      if (received.has(node)) return `received a move ${formatDuration(now - received.get(node)!)} ago (node cooldown)`;
      const v = viewOf.get(node);
      if (!v) return 'no fresh pressure sample';
      const after = postOf(v, footprintEstimate(copy.desired.spec.template, undefined, config), capacityOf(nodeObjs.get(node)!));
      return below(after, config.dstCap) ? undefined : `pressure after the move ${f2(after)} ≥ ${config.dstCap}`;
    },
    movedFrom: (copy) => lastMoveAway(copy, now, config)?.from,
    // A node at or over the trigger is the more urgent problem: spread waits for the pressure path.
    mayMove: countedCycle && !move && moving === 0 && !(src && atLeast(src.pressure, config.trigger)),
  });
  if (spread.move) {
    const m = spread.move.view;
    startedMove('spread', m, spread.move.start.ops, spread.move.moveId, { counts_before: m.counts, skew_before: m.skew, detail: m.detail });
  }

  // 8. Coalescing: room for a replica the scheduler cannot place for capacity, by moving the
  // fewest movable replicas out of its way — only on a complete plan, one move per cycle.
  const pendingSince = new Map<string, number>();
  const pending: PendingService[] = (snap.pending ?? []).map((p) => {
    const key = `${p.deployment}/${p.service}`;
    const since = state.pendingSince?.get(key) ?? now;
    pendingSince.set(key, since);
    return { ...p, since };
  });
  const coalesce = planCoalesce({ book, placer: placerOnce, pending, now, graceMs: 2 * config.cycleMs, exclusion: exclusionOf, moveTimeoutMs, mayMove: countedCycle && !move && moving === 0 });
  if (coalesce.move) {
    const { view, start, moveId } = coalesce.move;
    const first = view.plan[0]!;
    startedMove('coalesce', { replica: first.replica, deployment: first.deployment, service: first.service, src: first.from, dst: first.to }, start.ops, moveId, { for: `${view.deployment}/${view.service}`, pending_reason: view.reason, hole_node: view.node, plan: view.plan, detail: view.detail });
  }

  // 9. Preemption by priority: a pending service coalescing found no plan for evicts the fewest
  // lower-priority replicas in its way — each migrated when it fits elsewhere, else stopped — one
  // disruption per cycle and none while a rebalancer move is in flight.
  const unserved = pending.filter((p) => coalesce.views.some((v) => v.deployment === p.deployment && v.service === p.service && v.verdict === 'no_plan'));
  const preempt = planPreempt({
    book,
    placer: placerOnce,
    pending: unserved,
    priorityOf: (d, s, t) => snap.priorities?.get(`${d}/${s}`) ?? t.priority ?? 0,
    now,
    moveTimeoutMs,
    // One disruption per cycle: a move started or in flight lands first.
    blockedBy: !countedCycle ? 'explain only' : move ? `${move.trigger} move ${move.replica} started this cycle` : moving ? `${moving} rebalancer move(s) in flight` : undefined,
  });
  for (const v of preempt.views) {
    const c = coalesce.views.find((x) => x.deployment === v.deployment && x.service === v.service);
    if (c) c.preempt = v;
  }
  if (preempt.move) {
    const { view, victim, start, moveId } = preempt.move;
    startedMove('preempt', { replica: victim.replica, deployment: victim.deployment, service: victim.service, src: victim.node, dst: victim.to! }, start.ops, moveId, {
      for: `${view.deployment}/${view.service}`,
      for_priority: view.priority,
      priority: victim.priority,
      pending_reason: view.reason,
      hole_node: view.node,
      victims: view.victims,
      detail: view.detail,
    });
  } else if (preempt.stop) {
    const { view, victims, ops, audit } = preempt.stop;
    stoppedBy = 'none';
    acts.push({ label: `rebalance preempt ${victims.map((v) => v.replica).join(',')} on ${view.node} for ${view.deployment}/${view.service}`, ops, audit, effect: { kind: 'preempt', stopped: victims.length } });
  }

  // 10. Refusals: a pending service neither coalescing nor preemption can serve is recorded once per
  // change of reason (rebalance_skipped with its trigger), like a pressure candidate's skip.
  if (countedCycle)
    for (const c of coalesce.views) {
      if (c.verdict !== 'no_plan' || !c.noPlan) continue;
      const p = c.preempt?.verdict === 'none' && c.preempt.noPreempt ? c.preempt : undefined;
      if (c.preempt && !p) continue; // preemption acts on it (or waits its turn)
      const key = `pending:${c.deployment}/${c.service}`;
      const [trigger, reason] = p ? (['preempt', p.noPreempt!] as const) : (['coalesce', c.noPlan] as const);
      const last = state.audited.get(key);
      if (last && last.reason === reason && now - last.at < skipRepeatMs) {
        audited.set(key, last);
        continue;
      }
      const payload = { for: `${c.deployment}/${c.service}`, trigger, reason, pending_reason: c.reason, ...(p ? { coalesce_reason: c.noPlan, priority: p.priority } : {}), detail: p ? p.detail : c.detail };
      acts.push({ label: `rebalance refusal ${c.deployment}/${c.service}`, ops: [], audit: [{ type: 'rebalance_skipped', time: now, deployment: c.deployment, payload }], effect: { kind: 'refusal', key, trigger, reason } });
    }

  const plan: RebalancePlan = {
    at: new Date(now).toISOString(),
    cycle: state.cycles + (countedCycle ? 1 : 0),
    countedCycle,
    thresholds: { trigger: config.trigger, consecutiveCycles: config.consecutiveCycles, imbalanceGap: config.imbalanceGap, reliefFloor: config.reliefFloor, dstCap: config.dstCap, dstFit: config.dstFit, moveCost: config.moveCost },
    nodes: views,
    silent,
    ...(src ? { src: src.node } : {}),
    gates,
    stoppedBy,
    candidates,
    excluded,
    ...(move ? { move } : {}),
    placement: conform.views,
    spread: spread.views.filter((v) => v.verdict !== 'even'),
    coalesce: coalesce.views,
    preempt: preempt.views,
    inFlight: inFlightViews,
  };
  const next: RebalancerState = {
    cycles: plan.cycle,
    ...(countedCycle ? { lastCycleAt: now } : state.lastCycleAt !== undefined ? { lastCycleAt: state.lastCycleAt } : {}),
    nodes: nextNodes,
    received,
    audited,
    ...(pendingSince.size ? { pendingSince } : {}),
    ...(state.seeded ? { seeded: true } : {}),
  };
  return { state: next, acts, plan };
}

/**
 * The node a replica was last moved away from, within the ping-pong exclusion (seed 002): what its
 * completed move (drain or rebalancer) left in the desired record, so every leader sees it.
 */
function lastMoveAway(copy: Copy, now: number, config: Config): { from: string; agoMs: number } | undefined {
  const last = copy.desired.spec.movedFrom;
  const agoMs = last ? now - Date.parse(last.at) : Infinity;
  return last && agoMs < config.pingPongMs ? { from: last.node, agoMs } : undefined;
}

/** Leader-local effects of the acts that landed: node cooldown, recorded skips. */
export function afterCommit(state: RebalancerState, landed: readonly RebalanceAct[], now: number): RebalancerState {
  const effects = landed.map((a) => a.effect).filter((e): e is Effect => !!e);
  if (!effects.length) return state;
  const received = new Map(state.received);
  const audited = new Map(state.audited);
  for (const e of effects) {
    if (e.kind === 'move') received.set(e.dst, now);
    else if (e.kind === 'skip' || e.kind === 'refusal') audited.set(e.key, { reason: e.reason, at: now });
  }
  return { ...state, received, audited };
}

/**
 * A state rebuilt outside the leader (`jaco rebalance plan` when the leader does not answer):
 * EWMAs seeded from the latest samples, a node over the trigger assumed to have been over for
 * the required cycles, node cooldowns from recent rebalance_moved audit records (the ping-pong
 * exclusion needs nothing: it is in the desired records).
 */
export function seedState(samples: ReadonlyMap<string, PressureSample>, recentMoves: readonly { dst: string; at: number }[], now: number, config: Config): RebalancerState {
  const nodes = new Map<string, NodeState>();
  for (const [name, s] of samples) {
    const ewma = fold(undefined, readingOf(s), now, config.ewmaWindowMs);
    nodes.set(name, { ewma, over: atLeast(composite(ewma).pressure, config.trigger) ? config.consecutiveCycles : 0 });
  }
  const received = new Map<string, number>();
  for (const m of [...recentMoves].sort((a, b) => a.at - b.at)) if (now - m.at < config.cooldownNodeMs) received.set(m.dst, m.at);
  return { ...initialState(), nodes, received, seeded: true };
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
  movedAway: { from: string; agoMs: number } | undefined,
  full: boolean,
  config: Config,
): { best?: DstVerdict; furthest?: DstVerdict; all?: DstVerdict[] } {
  const passing = new Set(placer.candidates(req));
  const facts: DstFacts = { pingPong: false, postCpu: 0, postMemory: 0, post: 0, received: false };
  let bestI = -1;
  let furthestI = -1;
  let furthestRank = -1;
  for (let i = 0; i < t.views.length; i++) {
    const v = t.views[i]!;
    facts.pingPong = movedAway?.from === v.node;
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
      if (!b || facts.post < bPost - EPSILON || (Math.abs(facts.post - bPost) <= EPSILON && v.node < b.node)) bestI = i;
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
      ...(movedAway?.from === v.node ? { movedAwayAgoMs: movedAway.agoMs } : {}),
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

function postOf(v: Utilisation, fp: Footprint, cap: Capacity): number {
  return Math.max(v.cpu + dimShare(fp.cpu.millis, fp.cpu.share, cap.cpuMillis), v.memory + dimShare(fp.memory.bytes, fp.memory.share, cap.memoryBytes));
}

function capacityOf(n: Node): Capacity {
  return n.status?.capacity ?? { cpuMillis: 0, memoryBytes: 0, gpus: 0 };
}

function prune<K, V>(m: ReadonlyMap<K, V>, keep: (v: V) => boolean): Map<K, V> {
  const out = new Map<K, V>();
  for (const [k, v] of m) if (keep(v)) out.set(k, v);
  return out;
}

