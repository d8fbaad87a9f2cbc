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
import type { Node, PressureSample } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { durationMs } from '../../src/api/units.js';
import { advanceMoves, inFlight, MoveBook, type Copy } from '../moves/move.js';
import type { Placer } from '../placement/placer.js';
import { Arbiter } from './arbiter.js';
import { capacityOf, exclusionOf, planPressure, postOf } from './candidates.js';
import { PingPong } from './ping-pong.js';
import { planSpread } from './spread.js';
import { planCoalesce } from './coalesce.js';
import { planConform } from './conform.js';
import { planPreempt } from './preempt.js';
import { atLeast, below, type Config } from './config.js';
import { composite, fold, readingOf } from './pressure.js';
import type { Gate } from '../../src/api/reasons/rebalance.js';
import { footprintEstimate } from './scorer.js';
import { SKIP_REPEAT_CYCLES, SkipRecorder } from './skips.js';
import type { AuditedReason, Cycle, Effect, GateView, InFlightView, NodeState, NodeView, PendingService, RebalanceAct, RebalancePlan, RebalancerState, Snapshot } from './plan.js';

export function initialState(): RebalancerState {
  return { cycles: 0, nodes: new Map(), received: new Map(), audited: new Map() };
}

// ---------------------------------------------------------------- helpers

const f2 = (x: number) => x.toFixed(2);
const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

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
