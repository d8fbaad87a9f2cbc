// Metrics of the shared move mechanism, registered once for every controller that moves replicas
// (drain, rebalancer): both run in one `jaco controller all` process, so the metric lives here,
// labelled by actor, rather than in either controller.
import { Histogram } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';
import type { MoveActor } from '../../src/api/types.js';

export const moveMetrics = {
  duration: new Histogram({
    name: 'jaco_move_duration_seconds',
    help: 'Make-before-break moves, from writing the destination copy to removing the source, by actor (drain, rebalancer)',
    labelNames: ['by'],
    buckets: [1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
    registers: [registry],
  }),
};

export function observeMoveDuration(by: MoveActor, seconds: number): void {
  moveMetrics.duration.observe({ by }, seconds);
}
