// The scheduler on the shared runtime: its snapshot (snapshot.ts, with the NotReady clocks it
// keeps for its term), its pure core (decide.ts) and its metrics.
import { allSteps } from '../../src/runtime/steps.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { decideSteps } from './decide.js';
import { schedulerConfig, type ActMetrics, type SchedulerAct, type SchedulerConfig, type SchedulerPlan, type SchedulerSnapshot } from './plan.js';
import { countLanded, schedulerMetrics, setUnschedulable } from './metrics.js';
import { SCHEDULER_READS, schedulerSnapshot, type SchedulerState } from './snapshot.js';

export interface SchedulerOptions {
  config?: SchedulerConfig;
}

/** The scheduler as the runtime runs it (`jaco controller scheduler|all`). */
export function schedulerController(timings: Timings, opts: SchedulerOptions = {}): ControllerSpec<SchedulerState, SchedulerSnapshot, ActMetrics, SchedulerPlan> {
  const config = opts.config ?? schedulerConfig(timings);
  function* steps(_state: SchedulerState, snap: SchedulerSnapshot, now: number): Generator<readonly SchedulerAct[], SchedulerPlan & Pick<PassResult<SchedulerState>, 'next'>, void> {
    // The decide's own time, without the writes the runner sends between its steps.
    let busy = 0;
    const plan = decideSteps(snap, now, config);
    for (;;) {
      const t = performance.now();
      const s = plan.next();
      busy += performance.now() - t;
      if (!s.done) {
        yield s.value;
        continue;
      }
      schedulerMetrics.reconcileDuration.observe(busy / 1000);
      // Every clock judged the heartbeat this snapshot holds (trackNotReady restarts the others).
      return { ...s.value, next: () => ({ notReadySince: snap.notReadySince, failoverClocks: snap.failoverClocks, notReadyJudged: new Map([...snap.notReadySince.keys()].map((h) => [h, snap.lastReady.get(h) ?? 0])) }) };
    }
  }
  return {
    name: 'scheduler',
    reads: SCHEDULER_READS,
    initialState: () => ({ notReadySince: new Map() }),
    snapshot: schedulerSnapshot,
    decide: (state, snap, now) => allSteps(steps(state, snap, now)),
    // Service by service: a pass placing thousands of replicas writes while it decides.
    decideSteps: steps,
    countMetric: countLanded,
    afterPass: (_state, plan) => setUnschedulable(plan.unschedulable),
    leadershipChanged: (leading) => leading || setUnschedulable({}),
  };
}
