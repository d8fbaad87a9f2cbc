// The secrets controller's metrics. Label values are the closed unions of src/api/reasons/secrets.ts.
import { Counter, Gauge } from 'prom-client';
import { COPY_REASONS, COPY_WAITS } from '../../src/api/reasons/secrets.js';
import { registry } from '../../src/observability/metrics.js';

export interface SecretsMetricEvent {
  event: 'copied' | 'removed';
  reason: string;
}

export const secretsMetrics = {
  copies: new Counter({
    name: 'jaco_secret_copies_total',
    help: "Nodes' copies of secrets and configs written (by reason: missing, source_changed, node_key_changed) or removed (unused)",
    labelNames: ['event', 'reason'],
    registers: [registry],
  }),
  waiting: new Gauge({
    name: 'jaco_secret_copies_waiting',
    help: "Copies a node's replicas need that cannot be made now, by why (node_has_no_key, source_missing, cannot_open, no_cluster_key)",
    labelNames: ['why'],
    registers: [registry],
  }),
  staleAtRest: new Gauge({ name: 'jaco_secrets_sealed_to_old_keys', help: 'Secrets at rest still sealed to an older cluster key (re-sealed in batches)', registers: [registry] }),
};

for (const reason of Object.keys(COPY_REASONS)) secretsMetrics.copies.inc({ event: 'copied', reason }, 0);
secretsMetrics.copies.inc({ event: 'removed', reason: 'unused' }, 0);

export function countSecretsMetric(e: SecretsMetricEvent): void {
  secretsMetrics.copies.inc({ event: e.event, reason: e.reason });
}

export function setWaiting(counts: ReadonlyMap<string, number>): void {
  for (const why of Object.keys(COPY_WAITS)) secretsMetrics.waiting.set({ why }, counts.get(why) ?? 0);
}
