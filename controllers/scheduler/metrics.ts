// The scheduler's Prometheus metrics (registered on the process registry). Label values are the
// closed unions of src/api/reasons/scheduling.ts: the same strings as deploymentstatus, decisions and the audit log.
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';
import { PLACE_TRIGGERS, UNSCHEDULABLE_REASONS, type UnschedulableReason } from '../../src/api/reasons/scheduling.js';
import type { ActMetrics } from './plan.js';

export const schedulerMetrics = {
  reconcileDuration: new Histogram({
    name: 'jaco_scheduler_reconcile_duration_seconds',
    help: 'One scheduler pass: snapshot of the informers and the pure decide (the write is in jaco_reconcile_duration_seconds)',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [registry],
  }),
  placements: new Counter({ name: 'jaco_scheduler_placements_total', help: 'Replicas placed, by trigger (scale_up, global_node, node_lost)', labelNames: ['trigger'], registers: [registry] }),
  unschedulable: new Gauge({ name: 'jaco_scheduler_unschedulable_replicas', help: 'Replicas that cannot be placed, by reason, as of the last pass', labelNames: ['reason'], registers: [registry] }),
  restarts: new Counter({ name: 'jaco_replica_restarts_total', help: 'Health-driven restart commands issued, by deployment and service', labelNames: ['deployment', 'service'], registers: [registry] }),
};

// Every label value exists from the start, so dashboards see zeros rather than gaps.
for (const trigger of Object.keys(PLACE_TRIGGERS)) schedulerMetrics.placements.inc({ trigger }, 0);
for (const reason of Object.keys(UNSCHEDULABLE_REASONS)) schedulerMetrics.unschedulable.set({ reason }, 0);

export function setUnschedulable(byReason: Partial<Record<UnschedulableReason, number>>): void {
  for (const reason of Object.keys(UNSCHEDULABLE_REASONS) as UnschedulableReason[]) schedulerMetrics.unschedulable.set({ reason }, byReason[reason] ?? 0);
}

export function countLanded(m: ActMetrics | undefined): void {
  if (m?.placements) schedulerMetrics.placements.inc({ trigger: m.placements.trigger }, m.placements.count);
  if (m?.restarts) schedulerMetrics.restarts.inc(m.restarts);
}
