// The rollout controller's Prometheus metrics (registered on the process registry). Label values
// are the closed unions of src/api/reasons/rollout.ts, the same strings as the audit log and RolloutPlan.
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';
import { ROLLOUT_RESULTS, STEP_RESULTS } from '../../src/api/reasons/rollout.js';
import type { MetricEvent } from './decide.js';

export const rolloutMetrics = {
  rollouts: new Counter({ name: 'jaco_rollouts_total', help: 'Rolling updates that ended, by result (completed, aborted, superseded)', labelNames: ['result'], registers: [registry] }),
  inProgress: new Gauge({ name: 'jaco_rollout_in_progress', help: 'Rolling updates in progress (services), as the leader sees them', registers: [registry] }),
  stepDuration: new Histogram({
    name: 'jaco_rollout_step_duration_seconds',
    help: 'From writing a replica’s new revision to seeing it running and healthy',
    buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300],
    registers: [registry],
  }),
  steps: new Counter({ name: 'jaco_rollout_steps_total', help: 'Rolling-update steps that ended, by result (done, failed, reverted, superseded)', labelNames: ['result'], registers: [registry] }),
};

// Every label value exists from the start, so dashboards and rate() see zeros rather than gaps.
for (const result of Object.keys(ROLLOUT_RESULTS)) rolloutMetrics.rollouts.inc({ result }, 0);
for (const result of Object.keys(STEP_RESULTS)) rolloutMetrics.steps.inc({ result }, 0);

export function countMetric(e: MetricEvent): void {
  if (e.metric === 'rollout') rolloutMetrics.rollouts.inc({ result: e.result });
  else {
    rolloutMetrics.steps.inc({ result: e.result });
    if (e.seconds !== undefined) rolloutMetrics.stepDuration.observe(e.seconds);
  }
}
