// The rebalancer's cycle (seed 000, ADR 0002): decide(state, snapshot, now, config) reads the
// cluster once into one view (view.ts: each node's EWMA folded with its fresh sample, the move
// book, pending services…), advances the rebalancer's own in-flight moves, checks the cluster
// gates, then wires the planners (pressure, placement conformance, spread, coalescing,
// preemption: each reads the view and says what it wants as move intents) to the arbiter, the one
// place a move starts (arbiter.ts). It returns at most one move (conformance: one per budget), the
// audit records of every skip and refusal, the next leader-local state and the explanation
// `jaco rebalance plan` prints. Pure: no I/O, no clock, deterministic (ties by node name, then
// replica id). Effects of acts that must land first (cooldowns, the ping-pong exclusion, which
// skips were recorded) are applied by afterCommit (state.ts) once the shell knows they did.
import type { Gate } from '../../src/api/reasons/rebalance.js';
import { durationMs } from '../../src/api/units.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { Arbiter } from './arbiter.js';
import { exclusionOf, planPressure, underPressureCap } from './candidates.js';
import { planCoalesce } from './coalesce.js';
import { atLeast, type Config } from './config.js';
import { planConform } from './conform.js';
import { clusterGates, thresholdsOf } from './gates.js';
import { advanceOwnMoves } from './own-moves.js';
import type { AuditedReason, Cycle, RebalancePlan, RebalancerState, Snapshot } from './plan.js';
import { planPreempt } from './preempt.js';
import { SKIP_REPEAT_CYCLES, SkipRecorder } from './skips.js';
import { planSpread } from './spread.js';
import { CycleView } from './view.js';

export interface DecideOptions {
  /** Explain only (`jaco rebalance plan`): never counts as a cycle, whatever the time. */
  explainOnly?: boolean;
}

export function decide(state: RebalancerState, snap: Snapshot, now: number, config: Config, opts: DecideOptions = {}): Cycle {
  const countedCycle = !opts.explainOnly && (state.lastCycleAt === undefined || now - state.lastCycleAt >= config.cycleMs / 2);

  // 1. One view of the cluster, read once: the signal (each fresh sample folded into its node's EWMA; a node without one is silent) and what the planners need.
  const view = new CycleView(state, snap, now, config, countedCycle);
  // 2. The rebalancer's own in-flight moves: cut over, complete or abandon those that are due.
  const { advanced, inFlightViews } = advanceOwnMoves(view, now);
  // 3. Cluster gates, cheapest first; the first that does not hold stops the cycle.
  const { gates, src, closed } = clusterGates(view.signal, view.silent, inFlightViews, config);

  const skipRepeatMs = config.cycleMs * SKIP_REPEAT_CYCLES;
  const audited = new Map<string, { reason: AuditedReason; at: number }>();
  // Gate-stopped cycles keep the skip memory (an oscillating trigger must not re-record every skip).
  if (closed) for (const [k, v] of state.audited) if (now - v.at < skipRepeatMs) audited.set(k, v);
  const placer = () => view.placer();
  const arbiter = new Arbiter({ view, now, countedCycle, moving: inFlightViews.length, hotOverTrigger: !!src && atLeast(src.pressure, config.trigger) });
  const moveTimeoutMs = (e: ReplicaEntry) => durationMs(e.copies[0]!.desired.spec.template.update?.stepTimeout, config.moveTimeoutMs);
  const recorder = new SkipRecorder(state.audited, audited, now, skipRepeatMs, arbiter.acts);
  const { book } = view;

  // The pipeline: each planner says what it wants; the arbiter starts at most one move a cycle.
  // 4. Pressure first: a node over the trigger is the urgent problem (only when every cluster gate holds).
  const pressure = !closed && src ? planPressure({ hot: src, view, config }) : undefined;
  if (pressure && src) {
    arbiter.offer(pressure.intents);
    recorder.pressureSkips(src, pressure, config, gates, arbiter.move);
  } else gates.push({ gate: 'candidates', holds: null, detail: `not evaluated: stopped by ${closed?.gate ?? 'pressure_data'}` });

  // 5. Placement conformance next: a broken hard constraint goes before spread and coalescing, as many at once as each budget allows.
  const conforming = planConform({ book, placer, labels: view.labels, moveTimeoutMs });
  let step = conforming.next();
  for (; !step.done; step = conforming.next()) arbiter.offer([step.value], { each: true });
  const conform = step.value;

  // 6. Spread skew once pressure had its turn: destinations keep under the pressure cap and out of cooldown.
  const spread = planSpread({
    book,
    placer,
    moveTimeoutMs,
    exclusion: exclusionOf,
    replicaCooldown: (copy) => view.replicaCooldown(copy),
    dstRefusal: (node, copy) => view.nodeCooldownText(node) ?? underPressureCap(view.viewOf.get(node), copy, view.nodes.get(node)!, config),
    movedAwayFrom: (copy) => view.movedAwayFrom(copy.desired.spec.deployment, copy.desired.spec.service),
  });
  arbiter.offer(spread.intents);

  // 7. Coalescing: room for a replica the scheduler cannot place for capacity, only on a complete plan.
  const coalesce = planCoalesce({ book, placer, pending: view.pending, now, graceMs: 2 * config.cycleMs, exclusion: exclusionOf, moveTimeoutMs });
  if (coalesce.intent) arbiter.offer([coalesce.intent]);

  // 8. Preemption last: only for what coalescing could not serve (its refusals included), one disruption per cycle.
  const unserved = view.pending.filter((p) => coalesce.views.some((v) => v.deployment === p.deployment && v.service === p.service && v.verdict === 'no_plan'));
  const preempt = planPreempt({ book, placer, pending: unserved, priorityOf: (d, s, t) => view.priorityOf(d, s, t), now, moveTimeoutMs });
  for (const v of preempt.views) {
    const c = coalesce.views.find((x) => x.deployment === v.deployment && x.service === v.service);
    if (c) c.preempt = v;
  }
  if (preempt.want) arbiter.preempt(preempt.want);

  // 9. Refusals: a pending service neither coalescing nor preemption can serve, once per change of reason.
  if (countedCycle) recorder.refusals(coalesce.views);
  const move = arbiter.move;
  const stoppedBy: Gate = arbiter.acted ? 'none' : (closed?.gate ?? 'candidates');

  const plan: RebalancePlan = {
    at: new Date(now).toISOString(),
    cycle: state.cycles + (countedCycle ? 1 : 0),
    countedCycle,
    thresholds: thresholdsOf(config),
    nodes: [...view.signal],
    silent: [...view.silent],
    ...(src ? { src: src.node } : {}),
    gates,
    stoppedBy,
    candidates: pressure?.candidates ?? [],
    excluded: pressure?.excluded ?? [],
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
    nodes: view.nextNodes,
    received: view.received,
    audited,
    ...(view.pendingSince.size ? { pendingSince: view.pendingSince } : {}),
    ...(state.seeded ? { seeded: true } : {}),
  };
  return { state: next, acts: [...advanced, ...arbiter.acts], plan };
}
