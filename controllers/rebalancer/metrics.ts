// The rebalancer's Prometheus metrics (seed 000, issue 7), registered on the process registry.
// Label values are the closed unions of src/api/reasons/rebalance.ts and pressure.ts: the audit log's strings.
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../../src/observability/metrics.js';
import type { RebalancePlan } from './plan.js';
import { DIMENSIONS } from './pressure.js';
import { GATE_NAMES, SKIP_REASON_NAMES, type Gate, type SkipReason } from '../../src/api/reasons/rebalance.js';

export const rebalanceMetrics = {
  moves: new Counter({ name: 'jaco_rebalance_moves_total', help: 'Moves the rebalancer committed (rebalance_moved audit records), by trigger (pressure, placement, spread, coalesce, preempt)', labelNames: ['trigger'], registers: [registry] }),
  preempted: new Counter({
    name: 'jaco_rebalance_preempted_total',
    help: 'Lower-priority replicas the rebalancer stopped for a higher-priority pending one (replica_preempted); migrations count in jaco_rebalance_moves_total{trigger="preempt"}',
    registers: [registry],
  }),
  refusals: new Counter({
    name: 'jaco_rebalance_refusals_total',
    help: 'Pending services the rescheduler could not serve, recorded (rebalance_skipped with a trigger): by trigger (coalesce, preempt) and reason',
    labelNames: ['trigger', 'reason'],
    registers: [registry],
  }),
  outcomes: new Counter({
    name: 'jaco_rebalance_move_outcomes_total',
    help: 'Rebalancer moves that finished, by outcome (completed, abandoned)',
    labelNames: ['outcome'],
    registers: [registry],
  }),
  skips: new Counter({
    name: 'jaco_rebalance_skips_total',
    help: 'Per-candidate skips, by reason, counted every cycle (the audit log records each skip once per change)',
    labelNames: ['reason'],
    registers: [registry],
  }),
  pressure: new Gauge({
    name: 'jaco_node_pressure',
    help: 'The rebalancer leader’s EWMA utilisation of each node with a fresh sample, by dimension (cpu, memory)',
    labelNames: ['node', 'dimension'],
    registers: [registry],
  }),
  cycleDuration: new Histogram({
    name: 'jaco_rebalance_cycle_duration_seconds',
    help: 'One rebalancer cycle: snapshot and decision (the write is in jaco_reconcile_duration_seconds)',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  }),
  gate: new Gauge({
    name: 'jaco_rebalance_gate',
    help: 'The gate that stopped the last cycle (1) and the others (0); gate="none": the cycle moved a replica',
    labelNames: ['gate'],
    registers: [registry],
  }),
};

for (const reason of SKIP_REASON_NAMES) rebalanceMetrics.skips.inc({ reason }, 0);
for (const trigger of ['pressure', 'placement', 'spread', 'coalesce', 'preempt']) rebalanceMetrics.moves.inc({ trigger }, 0);
rebalanceMetrics.preempted.inc(0);

export function setGate(stoppedBy: Gate | undefined): void {
  for (const g of GATE_NAMES) rebalanceMetrics.gate.set({ gate: g }, g === stoppedBy ? 1 : 0);
}

/** Per-cycle metrics of a counted cycle: node pressure gauges (silent nodes dropped) and skips. */
export function recordCycle(plan: RebalancePlan, shown: Set<string>): Set<string> {
  const now = new Set<string>();
  for (const n of plan.nodes) {
    now.add(n.node);
    for (const d of DIMENSIONS) rebalanceMetrics.pressure.set({ node: n.node, dimension: d }, n[d]);
  }
  for (const node of shown) if (!now.has(node)) for (const d of DIMENSIONS) rebalanceMetrics.pressure.remove({ node, dimension: d });
  if (plan.countedCycle) {
    for (const c of plan.candidates) if (c.verdict === 'skipped') rebalanceMetrics.skips.inc({ reason: c.reason as SkipReason });
    if (plan.src && !plan.candidates.length && plan.gates.some((g) => g.gate === 'candidates' && g.holds === false)) rebalanceMetrics.skips.inc({ reason: 'no_candidate' });
  }
  return now;
}

/** A leader that steps down stops reporting: its numbers would go stale next to the new leader's. */
export function clearCycleMetrics(shown: Set<string>): void {
  for (const node of shown) for (const d of DIMENSIONS) rebalanceMetrics.pressure.remove({ node, dimension: d });
  rebalanceMetrics.gate.reset();
}
