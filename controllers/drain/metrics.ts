// The drain controller's Prometheus metrics (registered on the process registry). Label values are
// the closed union of src/api/reasons/drain.ts, the same strings as drains/<host>.status and the audit log.
import { Counter, Gauge } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';
import { observeMoveDuration } from '../moves/metrics.js';
import type { DrainMetricEvent } from './decide.js';
import { DRAIN_MOVE_RESULTS } from '../../src/api/reasons/drain.js';

export const drainMetrics = {
  moves: new Counter({
    name: 'jaco_drain_moves_total',
    help: 'Drain moves that ended, by result (completed, move_timeout, dst_failed, dst_lost, cancelled)',
    labelNames: ['result'],
    registers: [registry],
  }),
  inProgress: new Gauge({ name: 'jaco_drains_in_progress', help: 'Node drains pending or draining, as the leader sees them', registers: [registry] }),
};

// Every label value exists from the start, so dashboards and rate() see zeros rather than gaps.
for (const result of Object.keys(DRAIN_MOVE_RESULTS)) drainMetrics.moves.inc({ result }, 0);

export function countDrainMetric(e: DrainMetricEvent): void {
  drainMetrics.moves.inc({ result: e.result });
  if (e.seconds !== undefined) observeMoveDuration('drain', e.seconds);
}
