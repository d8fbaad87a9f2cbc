// The prom-client registry of a jaco process, and the metrics shared by every controller.
// Controller-specific metrics live beside their controller and register here too. All names
// start with jaco_; the label values are the same closed reason codes the audit log uses.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { readerMetrics } from './reader-metrics.js';

export const registry = new Registry();
collectDefaultMetrics({ register: registry, prefix: 'jaco_process_' });

export const metrics = {
  leader: new Gauge({ name: 'jaco_leader', help: '1 while this process leads the controller', labelNames: ['controller'], registers: [registry] }),
  malformedKeys: new Counter({
    name: 'jaco_malformed_keys_total',
    help: 'Stored values that failed to decode or validate, by key prefix',
    labelNames: ['prefix'],
    registers: [registry],
  }),
  unreadableKeys: new Gauge({
    name: 'jaco_unreadable_keys',
    help: 'Keys whose current value cannot be read (the last readable version stays in effect), by key prefix',
    labelNames: ['prefix'],
    registers: [registry],
  }),
  prunedFields: new Counter({
    name: 'jaco_pruned_fields_total',
    help: 'Unknown fields ignored when reading stored values (written by a newer jaco, or by hand), by key prefix',
    labelNames: ['prefix'],
    registers: [registry],
  }),
  informerInconsistencies: new Counter({
    name: 'jaco_informer_inconsistencies_total',
    help: 'Consistency checks that found held state different from the store (each relists), by key prefix',
    labelNames: ['prefix'],
    registers: [registry],
  }),
  reconcileDuration: new Histogram({
    name: 'jaco_reconcile_duration_seconds',
    help: 'Duration of one controller pass (snapshot, decide, write)',
    labelNames: ['controller'],
    buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  }),
  reconcileErrors: new Counter({ name: 'jaco_reconcile_errors_total', help: 'Controller passes that failed, by kind of error', labelNames: ['controller', 'error'], registers: [registry] }),
  actFailures: new Counter({
    name: 'jaco_act_failures_total',
    help: 'Acts that did not land, by controller and reason (conflict, unreadable_key, too_large, too_many_ops, duplicate_key)',
    labelNames: ['controller', 'reason'],
    registers: [registry],
  }),
  writeConflicts: new Counter({ name: 'jaco_write_conflicts_total', help: 'Transactions that failed a compare-and-swap precondition', labelNames: ['controller'], registers: [registry] }),
  informerRelists: new Counter({ name: 'jaco_informer_relists_total', help: 'Informer relists (watch compacted or failed)', labelNames: ['prefix'], registers: [registry] }),
  storeReplaced: new Counter({
    name: 'jaco_store_replaced_total',
    help: 'Times a cache found etcd replaced under it (restored from a snapshot, or restarted empty) and relisted from scratch, by what showed it',
    labelNames: ['reason'],
    registers: [registry],
  }),
  droppedWatchResponses: new Counter({
    name: 'jaco_watch_responses_dropped_total',
    help: "Watch responses etcd3's watch manager would have thrown on or misrouted, dropped (src/store/watch-guard.ts): late_answer (for a watch already gone), after_end (on a stream that had ended)",
    labelNames: ['reason'],
    registers: [registry],
  }),
  staleElectionKeys: new Counter({
    name: 'jaco_election_stale_keys_total',
    help: 'Election keys found with no lease, or with a lease etcd no longer has, and removed so a campaign could go on',
    labelNames: ['controller'],
    registers: [registry],
  }),
};

// The store's readers count into this registry from now on (reader-metrics.ts).
Object.assign(readerMetrics, {
  malformedKeys: metrics.malformedKeys,
  unreadableKeys: metrics.unreadableKeys,
  prunedFields: metrics.prunedFields,
  informerInconsistencies: metrics.informerInconsistencies,
  informerRelists: metrics.informerRelists,
  storeReplaced: metrics.storeReplaced,
  droppedWatchResponses: metrics.droppedWatchResponses,
} satisfies typeof readerMetrics);
