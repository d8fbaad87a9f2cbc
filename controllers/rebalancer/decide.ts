// The rebalancer's cycle (seed 000, ADR 0002): decide(state, snapshot, now, config) folds fresh
// pressure samples into the leader-local EWMAs, advances the rebalancer's own in-flight moves,
// checks the cluster gates, then wires the planners (pressure, placement conformance, spread,
// coalescing, preemption: each says what it wants as move intents) to the arbiter, the one place
// a move starts (arbiter.ts). It returns at most one move (conformance: one per budget), the audit
// records of every skip and refusal, the next leader-local state and the explanation
// `jaco rebalance plan` prints. Pure: no I/O, no clock, deterministic (ties by node
// name, then replica id). Effects of acts that must land first (cooldowns, the ping-pong
// exclusion, which skips were recorded) are applied by afterCommit once the shell knows they did.
import { nodeLabels, nodeReady, unschedulableBecause } from '../../src/api/nodes.js';
import type { NetworkView } from '../placement/ipam.js';
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { DisruptionLedger, Heartbeat, Node, NodeDrain, PressureSample, ReplicaCommand, ServiceSpec, VolumeHome } from '../../src/api/types.js';
import type { ReplicaEntry, ReplicaIndex } from '../../src/runtime/replicas.js';
import type { Versioned } from '../../src/store/store.js';
import { durationMs } from '../../src/api/units.js';
import type { Act } from '../../src/runtime/acts.js';
import type { AuditRecord } from '../../src/store/audit.js';
import { advanceMoves, inFlight, MoveBook, type Copy, type MoveOutcome, type MoveRefusal } from '../moves/move.js';
import type { Placer } from '../placement/placer.js';
import type { EligibilityRevisions } from '../placement/input.js';
import { Arbiter } from './arbiter.js';
import { capacityOf, exclusionOf, planPressure, postOf } from './candidates.js';
import { PingPong } from './ping-pong.js';
import { planSpread, type SpreadView } from './spread.js';
import { planCoalesce, type CoalesceView, type PendingService } from './coalesce.js';
import { planConform, type ConformView } from './conform.js';
import { planPreempt, type PreemptView } from './preempt.js';
import { atLeast, below, type Config } from './config.js';
import { composite, fold, readingOf, type Dimension, type NodeEwma } from './pressure.js';
import type { Gate, NoPlanReason, NoPreemptReason, SkipReason, Exclusion } from '../../src/api/reasons/rebalance.js';
import { footprintEstimate, type ReliefSource } from './scorer.js';

/** What the audit log last recorded for a key: a candidate's skip, or why a pending service gets no help. */
type AuditedReason = SkipReason | NoPlanReason | NoPreemptReason;

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
  /** Fresh samples by node (PressureSource.samples()). */
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
  /** Every deployment's generation (a change to it triggers new balancing: the ping-pong exclusion ends). */
  generations?: ReadonlyMap<string, number>;
  /** The placer, on first use: the cache's, kept between passes and patched from its changes (placement/kept.ts). */
  placer: () => Placer;
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
  const received = prune(state.received, (t) => now - t < config.cooldownNodeMs);
  const { views, silent, nextNodes } = readSignal(state, snap, nodeObjs, received, now, config, countedCycle);
  // 2. The rebalancer's own in-flight moves: cut over, complete or abandon those that are due.
  const book = new MoveBook(snap);
  const { advanced, inFlightViews } = advanceOwnMoves(book, snap, nodeObjs, now);
  // 3. Cluster gates, cheapest first; the first that does not hold stops the cycle.
  const moving = inFlightViews.length;
  const { gates, src, closed } = clusterGates(views, silent, inFlightViews, config);

  const skipRepeatMs = config.cycleMs * SKIP_REPEAT_CYCLES;
  const audited = new Map<string, { reason: AuditedReason; at: number }>();
  // Gate-stopped cycles keep the skip memory (an oscillating trigger must not re-record every skip).
  if (closed) for (const [k, v] of state.audited) if (now - v.at < skipRepeatMs) audited.set(k, v);
  let placer: Placer | undefined;
  const placerOnce = () => (placer ??= snap.placer());
  const viewOf = new Map(views.map((v) => [v.node, v]));
  const arbiter = new Arbiter({ book, placer: placerOnce, now, config, countedCycle, moving, hotOverTrigger: !!src && atLeast(src.pressure, config.trigger), received, viewOf, pingPong: new PingPong(snap.replicas, snap.eligibility, snap.generations) });
  const moveTimeoutMs = (e: ReplicaEntry) => durationMs(e.copies[0]!.desired.spec.template.update?.stepTimeout, config.moveTimeoutMs);
  const recorder = new SkipRecorder(state.audited, audited, now, skipRepeatMs, arbiter.acts);

  // The pipeline: each planner says what it wants; the arbiter starts at most one move a cycle.
  // 4. Pressure first: a node over the trigger is the urgent problem (only when every cluster gate holds).
  const pressure = !closed && src ? planPressure({ hot: src, views, nodes: nodeObjs, sample: snap.samples.get(src.node)!, replicas: snap.replicas, book, placer: placerOnce(), arbiter, config }) : undefined;
  if (pressure && src) {
    arbiter.offer(pressure.intents);
    recorder.pressureSkips(src, pressure, config, gates, arbiter.move);
  } else gates.push({ gate: 'candidates', holds: null, detail: `not evaluated: stopped by ${closed?.gate ?? 'pressure_data'}` });

  // 5. Placement conformance next: a broken hard constraint goes before spread and coalescing, as many at once as each budget allows.
  const labels = new Map(snap.nodes.map((n) => [n.metadata.name, nodeLabels(n)]));
  const conforming = planConform({ book, placer: placerOnce, placements: snap.placements ?? new Map(), labels, moveTimeoutMs });
  let step = conforming.next();
  for (; !step.done; step = conforming.next()) arbiter.offer([step.value], { each: true });
  const conform = step.value;

  // 6. Spread skew once pressure had its turn: destinations keep under the pressure cap and out of cooldown.
  const spread = planSpread({
    book,
    placer: placerOnce,
    moveTimeoutMs,
    exclusion: exclusionOf,
    replicaCooldown: (copy) => arbiter.replicaCooldown(copy),
    dstRefusal: (node, copy) => arbiter.nodeCooldownText(node) ?? underPressureCap(viewOf.get(node), copy, nodeObjs.get(node)!, config),
    movedAwayFrom: (copy) => arbiter.movedAwayFrom(copy.desired.spec.deployment, copy.desired.spec.service),
  });
  arbiter.offer(spread.intents);

  // 7. Coalescing: room for a replica the scheduler cannot place for capacity, only on a complete plan.
  const { pending, pendingSince } = pendingOf(state, snap, now);
  const coalesce = planCoalesce({ book, placer: placerOnce, pending, now, graceMs: 2 * config.cycleMs, exclusion: exclusionOf, moveTimeoutMs });
  if (coalesce.intent) arbiter.offer([coalesce.intent]);

  // 8. Preemption last: only for what coalescing could not serve (its refusals included), one disruption per cycle.
  const unserved = pending.filter((p) => coalesce.views.some((v) => v.deployment === p.deployment && v.service === p.service && v.verdict === 'no_plan'));
  const preempt = planPreempt({ book, placer: placerOnce, pending: unserved, priorityOf: (d, s, t) => snap.priorities?.get(`${d}/${s}`) ?? t.priority ?? 0, now, moveTimeoutMs });
  for (const v of preempt.views) {
    const c = coalesce.views.find((x) => x.deployment === v.deployment && x.service === v.service);
    if (c) c.preempt = v;
  }
  if (preempt.want) arbiter.preempt(preempt.want);

  // 9. Refusals: a pending service neither coalescing nor preemption can serve, once per change of reason.
  if (countedCycle) recorder.refusals(coalesce.views);
  const acts = [...advanced, ...arbiter.acts];
  const move = arbiter.move;
  const stoppedBy: Gate = arbiter.acted ? 'none' : (closed?.gate ?? 'candidates');
  const candidates = pressure?.candidates ?? [];
  const excluded = pressure?.excluded ?? [];

  const plan: RebalancePlan = {
    at: new Date(now).toISOString(),
    cycle: state.cycles + (countedCycle ? 1 : 0),
    countedCycle,
    thresholds: thresholdsOf(config),
    nodes: views,
    silent,
    ...(src ? { src: src.node } : {}),
    gates,
    stoppedBy,
    candidates,
    excluded,
    ...(move ? { move } : {}),
    placement: conform,
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

/** Why a spread move may not land on a node beyond the scheduler's filters: no fresh sample, or pressure after it at the cap. */
function underPressureCap(v: NodeView | undefined, copy: Copy, node: Node, config: Config): string | undefined {
  if (!v) return 'no fresh pressure sample';
  const after = postOf(v, footprintEstimate(copy.desired.spec.template, undefined, config), capacityOf(node));
  return below(after, config.dstCap) ? undefined : `pressure after the move ${f2(after)} ≥ ${config.dstCap}`;
}

/** Services pending for capacity, with when this leader first saw each (coalescing waits a grace). */
function pendingOf(state: RebalancerState, snap: Snapshot, now: number): { pending: PendingService[]; pendingSince: Map<string, number> } {
  const pendingSince = new Map<string, number>();
  const pending = (snap.pending ?? []).map((p) => {
    const key = `${p.deployment}/${p.service}`;
    const since = state.pendingSince?.get(key) ?? now;
    pendingSince.set(key, since);
    return { ...p, since };
  });
  return { pending, pendingSince };
}

const thresholdsOf = (c: Config): RebalancePlan['thresholds'] => ({ trigger: c.trigger, consecutiveCycles: c.consecutiveCycles, imbalanceGap: c.imbalanceGap, reliefFloor: c.reliefFloor, dstCap: c.dstCap, dstFit: c.dstFit, moveCost: c.moveCost });

/** Step 1: each node's EWMA folded with its fresh sample, its view, and the nodes that are silent. */
function readSignal(state: RebalancerState, snap: Snapshot, nodeObjs: ReadonlyMap<string, Node>, received: ReadonlyMap<string, number>, now: number, config: Config, countedCycle: boolean) {
  // Why each node takes no moves (NotReady, cordoned, draining…), as the scheduler judges it.
  const whyIneligible = new Map(snap.nodes.map((n) => [n.metadata.name, unschedulableBecause(n, snap.heartbeats.get(n.metadata.name), snap.drains.get(n.metadata.name))]));
  const nextNodes = new Map<string, NodeState>();
  const views: NodeView[] = [];
  const silent: { node: string; why: string }[] = [];
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

  return { views, silent, nextNodes };
}

/** Step 2: the rebalancer's own moves advanced (cutover, completed, abandoned), and those still in flight. */
function advanceOwnMoves(book: MoveBook, snap: Snapshot, nodeObjs: ReadonlyMap<string, Node>, now: number) {
  // A move toward a node that is NotReady or gone is abandoned at once; one away from it completes.
  const lost = new Set<string>();
  for (const id of book.moving()) {
    const dst = inFlight(book.copies(id))!;
    for (const n of [dst.desired.spec.node, dst.desired.spec.move!.from]) if (!nodeObjs.has(n) || !nodeReady(snap.heartbeats.get(n))) lost.add(n);
  }
  const steps = advanceMoves(book, now, { by: 'rebalancer', lostNodes: lost }, (n, r) => snap.replicas.observed(n, r));
  const advanced: RebalanceAct[] = steps.map((s) =>
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

  return { advanced, inFlightViews };
}

/** Step 3: the cluster gates in order, the most pressured node, and the first gate that does not hold. */
function clusterGates(views: readonly NodeView[], silent: readonly unknown[], inFlightViews: readonly InFlightView[], config: Config) {
  const moving = inFlightViews.length;
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
  gates.push({ gate: 'move_in_flight', holds: moving === 0, detail: moving ? `${moving} rebalancer move(s) in flight: ${inFlightViews.map((m) => `${m.replica} ${m.src}→${m.dst}`).join(', ')}` : 'no rebalancer move in flight' });
  const closed = gates.find((g) => g.holds !== true);

  return { gates, src, closed };
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

function prune<K, V>(m: ReadonlyMap<K, V>, keep: (v: V) => boolean): Map<K, V> {
  const out = new Map<K, V>();
  for (const [k, v] of m) if (keep(v)) out.set(k, v);
  return out;
}


/**
 * The skips and refusals a cycle records: one rebalance_skipped per candidate or pending service,
 * unless the same reason was recorded within SKIP_REPEAT_CYCLES (no flooding of the audit log).
 */
class SkipRecorder {
  constructor(
    private readonly last: RebalancerState['audited'],
    private readonly audited: Map<string, { reason: AuditedReason; at: number }>,
    private readonly now: number,
    private readonly repeatMs: number,
    private readonly acts: RebalanceAct[],
  ) {}

  /** Whether `key` gets a record for `reason` now (false: recorded recently, the memory kept). */
  private due(key: string, reason: AuditedReason): boolean {
    const last = this.last.get(key);
    if (last && last.reason === reason && this.now - last.at < this.repeatMs) {
      this.audited.set(key, last);
      return false;
    }
    return true;
  }

  private skip(hot: NodeView, config: Config, key: string, reason: SkipReason, c: CandidateView | undefined, view: { audited?: boolean }): void {
    view.audited = this.due(key, reason);
    if (!view.audited) return;
    const record: AuditRecord = { type: 'rebalance_skipped', time: this.now, ...(c ? { deployment: c.deployment } : {}), payload: auditPayload(c, hot, config, reason) };
    this.acts.push({ label: `rebalance skip ${key}`, ops: [], audit: [record], effect: { kind: 'skip', key, reason } });
  }

  /** The pressure path's skips, and its candidates gate. */
  pressureSkips(hot: NodeView, p: { candidates: CandidateView[]; excluded: ExcludedView[] }, config: Config, gates: GateView[], move: MoveView | undefined): void {
    for (const c of p.candidates) if (c.verdict === 'skipped') this.skip(hot, config, c.replica, c.reason!, c, c);
    if (!p.candidates.length) {
      const noCandidate: { audited?: boolean } = {};
      this.skip(hot, config, `node:${hot.node}`, 'no_candidate', undefined, noCandidate);
      gates.push({ gate: 'candidates', holds: false, detail: `no candidate on ${hot.node}: ${p.excluded.length} replica(s) excluded${noCandidate.audited === false ? ' (already recorded)' : ''}` });
      return;
    }
    const n = p.candidates.filter((c) => c.verdict === 'movable' || c.verdict === 'move').length;
    const chosen = move?.trigger === 'pressure' ? move : undefined;
    gates.push({ gate: 'candidates', holds: !!chosen, detail: `${n} of ${p.candidates.length} candidate(s) on ${hot.node} can move${chosen ? `; chosen ${chosen.replica} → ${chosen.dst}` : ''}` });
  }

  /** Pending services neither coalescing nor preemption can serve (rebalance_skipped with its trigger). */
  refusals(views: readonly CoalesceView[]): void {
    for (const c of views) {
      if (c.verdict !== 'no_plan' || !c.noPlan) continue;
      const p = c.preempt?.verdict === 'none' && c.preempt.noPreempt ? c.preempt : undefined;
      if (c.preempt && !p) continue; // preemption acts on it (or waits its turn)
      const key = `pending:${c.deployment}/${c.service}`;
      const [trigger, reason] = p ? (['preempt', p.noPreempt!] as const) : (['coalesce', c.noPlan] as const);
      if (!this.due(key, reason)) continue;
      const payload = { for: `${c.deployment}/${c.service}`, trigger, reason, pending_reason: c.reason, ...(p ? { coalesce_reason: c.noPlan, priority: p.priority } : {}), detail: p ? p.detail : c.detail };
      this.acts.push({ label: `rebalance refusal ${c.deployment}/${c.service}`, ops: [], audit: [{ type: 'rebalance_skipped', time: this.now, deployment: c.deployment, payload }], effect: { kind: 'refusal', key, trigger, reason } });
    }
  }
}
