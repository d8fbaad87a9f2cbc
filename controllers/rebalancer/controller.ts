// The rebalancer on the shared runtime: cycle-driven (a pass every cycle, no change triggers),
// leader-elected, around the pure cycle in decide.ts. Its state — EWMAs, counters, cooldowns — is
// leader-local (ADR 0002) and starts afresh with every term; the effects of acts that must land
// first (cooldowns, the ping-pong exclusion, recorded skips) follow only the acts that landed. It
// serves `jaco rebalance plan` on the process's metrics address (GET /rebalance/plan) while it leads.
import { jsonRoutes } from '../../src/observability/server.js';
import type { Logger } from '../../src/observability/log.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { observeMoveDuration } from '../moves/metrics.js';
import { defaultConfig, type Config } from './config.js';
import { decide } from './decide.js';
import { afterCommit, initialState } from './state.js';
import { PLAN_PATH, type PlanResponse, type RebalanceAct, type RebalancePlan, type RebalancerState, type Snapshot } from './plan.js';
import { clearCycleMetrics, rebalanceMetrics, recordCycle, setGate } from './metrics.js';
import { REBALANCER_READS, snapshotOf } from './snapshot.js';

export interface RebalancerOptions {
  config?: Config;
}

interface CycleResult extends PassResult<RebalancerState> {
  acts: RebalanceAct[];
  plan: RebalancePlan;
}

/** The rebalancer as the runtime runs it (`jaco controller rebalancer|all`). */
export function rebalancerController(timings: Timings, opts: RebalancerOptions = {}): ControllerSpec<RebalancerState, Snapshot, unknown, CycleResult> {
  const config = opts.config ?? defaultConfig(timings);
  // Log and metric memory of the shell (not decision state): what was last said, and shown.
  let lastCycle: PlanResponse['lastCycle'];
  let lastStop = '';
  let shownNodes = new Set<string>();
  let log: Logger | undefined;
  return {
    name: 'rebalancer',
    reads: REBALANCER_READS,
    eventDriven: false,
    tickMs: config.cycleMs,
    initialState,
    snapshot: ({ cache }, _state, now) => snapshotOf(cache, now, config),
    decide(state, snap, now) {
      const stop = rebalanceMetrics.cycleDuration.startTimer();
      const cycle = decide(state, snap, now, config);
      stop();
      return {
        acts: cycle.acts,
        plan: cycle.plan,
        next: (landed) => afterCommit(cycle.state, cycle.acts.filter((a) => landed.has(a.label)), now),
      };
    },
    afterPass(_state, { plan, acts }, landed) {
      shownNodes = recordCycle(plan, shownNodes);
      const done = acts.filter((a) => landed.has(a.label));
      const moved = plan.move && done.some((a) => a.effect?.kind === 'move') ? plan.move : undefined;
      for (const a of done) {
        if (a.effect?.kind === 'move') rebalanceMetrics.moves.inc({ trigger: a.effect.trigger });
        if (a.effect?.kind === 'preempt') rebalanceMetrics.preempted.inc(a.effect.stopped);
        if (a.effect?.kind === 'refusal') rebalanceMetrics.refusals.inc({ trigger: a.effect.trigger, reason: a.effect.reason });
        for (const r of a.audit ?? []) {
          if (r.type !== 'rebalance_completed' && r.type !== 'rebalance_abandoned') continue;
          rebalanceMetrics.outcomes.inc({ outcome: r.type === 'rebalance_completed' ? 'completed' : 'abandoned' });
          if (r.type === 'rebalance_completed') observeMoveDuration('rebalancer', Number(r.payload.duration_ms) / 1000);
        }
      }
      // A planned move that did not land (conflict) is retried by the next cycle: not "none".
      const preempted = done.some((a) => a.effect?.kind === 'preempt');
      const stoppedBy = plan.stoppedBy === 'none' && !moved && !preempted ? 'candidates' : plan.stoppedBy;
      setGate(stoppedBy);
      if (plan.countedCycle) lastCycle = { at: plan.at, cycle: plan.cycle, stoppedBy, ...(moved ? { move: `${moved.replica} ${moved.src}→${moved.dst}` } : {}) };
      // One log line per change of outcome, not per cycle ("cluster uniformly busy: nothing to do").
      const gate = plan.gates.find((g) => g.gate === stoppedBy);
      const stopKey = `${stoppedBy} ${plan.src ?? ''}`;
      if (stopKey !== lastStop && stoppedBy !== 'none') log?.info({ gate: stoppedBy, detail: gate?.detail, src: plan.src }, 'rebalance cycle stopped at a gate');
      lastStop = stopKey;
    },
    leadershipChanged(leading) {
      lastCycle = undefined;
      lastStop = '';
      if (!leading) {
        clearCycleMetrics(shownNodes);
        shownNodes = new Set();
      }
    },
    attach(runner) {
      log = runner.log;
      // The plan as the leader sees it now, without moving anything.
      const route = async () => {
        if (!runner.isLeader()) return { status: 503, body: { leader: false, error: 'this process does not lead the rebalancer' } };
        const now = Date.now();
        const { plan } = decide(runner.state, snapshotOf(runner.cache, now, config), now, config, { explainOnly: true });
        const body: PlanResponse = { source: 'leader', identity: runner.identity, plan, ...(lastCycle ? { lastCycle } : {}) };
        return { status: 200, body };
      };
      jsonRoutes.set(PLAN_PATH, route);
      return () => {
        if (jsonRoutes.get(PLAN_PATH) === route) jsonRoutes.delete(PLAN_PATH);
      };
    },
  };
}
