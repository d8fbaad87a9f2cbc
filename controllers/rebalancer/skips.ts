// What a cycle writes to the audit log besides its moves: one rebalance_skipped per candidate or
// pending service the cycle cannot help, recorded once per change of reason (no flooding), with
// seed 000's payload — the same one rebalance_moved carries for a pressure move.
import type { SkipReason } from '../../src/api/reasons/rebalance.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Config } from './config.js';
import type { AuditedReason, CandidateView, CoalesceView, ExcludedView, GateView, MoveView, NodeView, RebalanceAct, RebalancerState } from './plan.js';

const r4 = (x: number | undefined) => (x === undefined || !Number.isFinite(x) ? (x ?? null) : Math.round(x * 10_000) / 10_000);
/** How often a skip that keeps its reason is recorded again: every 120 cycles (1 h in production). */
export const SKIP_REPEAT_CYCLES = 120;

/** The audit payload of seed 000, the same for rebalance_moved and rebalance_skipped. */
export function auditPayload(c: CandidateView | undefined, src: NodeView, config: Pick<Config, 'moveCost'>, reason?: SkipReason): Record<string, unknown> {
  return {
    replica_id: c?.replica ?? null,
    deployment: c?.deployment ?? null,
    service: c?.service ?? null,
    src: src.node,
    dst: c?.dst ?? null,
    dominant: c?.dominant ?? src.dominant,
    relief: r4(c?.relief),
    score: r4(c?.score),
    move_cost: config.moveCost,
    src_pressure_before: r4(c?.srcBefore ?? src.pressure),
    dst_pressure_before: r4(c?.dstBefore),
    src_pressure_after: r4(c?.srcAfter),
    dst_pressure_after: r4(c?.dstAfter),
    ...(reason ? { reason } : {}),
    ...(c ? { relief_source: c.reliefSource } : {}),
    detail: c?.detail ?? null,
  };
}

/**
 * The skips and refusals a cycle records: one rebalance_skipped per candidate or pending service,
 * unless the same reason was recorded within SKIP_REPEAT_CYCLES (no flooding of the audit log).
 */
export class SkipRecorder {
  constructor(
    private readonly last: RebalancerState['audited'],
    private readonly audited: Map<string, { reason: AuditedReason; at: number }>,
    private readonly now: number,
    private readonly repeatMs: number,
    private readonly acts: RebalanceAct[],
  ) {}

  /** Whether `key` gets a record for `reason` now (false: recorded recently, the memory kept). */
  private due(key: string, reason: AuditedReason): boolean {
    const last = this.last.get(key);
    if (last && last.reason === reason && this.now - last.at < this.repeatMs) {
      this.audited.set(key, last);
      return false;
    }
    return true;
  }

  private skip(hot: NodeView, config: Config, key: string, reason: SkipReason, c: CandidateView | undefined, view: { audited?: boolean }): void {
    view.audited = this.due(key, reason);
    if (!view.audited) return;
    const record: AuditRecord = { type: 'rebalance_skipped', time: this.now, ...(c ? { deployment: c.deployment } : {}), payload: auditPayload(c, hot, config, reason) };
    this.acts.push({ label: `rebalance skip ${key}`, ops: [], audit: [record], effect: { kind: 'skip', key, reason } });
  }

  /** The pressure path's skips, and its candidates gate. */
  pressureSkips(hot: NodeView, p: { candidates: CandidateView[]; excluded: ExcludedView[] }, config: Config, gates: GateView[], move: MoveView | undefined): void {
    for (const c of p.candidates) if (c.verdict === 'skipped') this.skip(hot, config, c.replica, c.reason!, c, c);
    if (!p.candidates.length) {
      const noCandidate: { audited?: boolean } = {};
      this.skip(hot, config, `node:${hot.node}`, 'no_candidate', undefined, noCandidate);
      gates.push({ gate: 'candidates', holds: false, detail: `no candidate on ${hot.node}: ${p.excluded.length} replica(s) excluded${noCandidate.audited === false ? ' (already recorded)' : ''}` });
      return;
    }
    const n = p.candidates.filter((c) => c.verdict === 'movable' || c.verdict === 'move').length;
    const chosen = move?.trigger === 'pressure' ? move : undefined;
    gates.push({ gate: 'candidates', holds: !!chosen, detail: `${n} of ${p.candidates.length} candidate(s) on ${hot.node} can move${chosen ? `; chosen ${chosen.replica} → ${chosen.dst}` : ''}` });
  }

  /** Pending services neither coalescing nor preemption can serve (rebalance_skipped with its trigger). */
  refusals(views: readonly CoalesceView[]): void {
    for (const c of views) {
      if (c.verdict !== 'no_plan' || !c.noPlan) continue;
      const p = c.preempt?.verdict === 'none' && c.preempt.noPreempt ? c.preempt : undefined;
      if (c.preempt && !p) continue; // preemption acts on it (or waits its turn)
      const key = `pending:${c.deployment}/${c.service}`;
      const [trigger, reason] = p ? (['preempt', p.noPreempt!] as const) : (['coalesce', c.noPlan] as const);
      if (!this.due(key, reason)) continue;
      const payload = { for: `${c.deployment}/${c.service}`, trigger, reason, pending_reason: c.reason, ...(p ? { coalesce_reason: c.noPlan, priority: p.priority } : {}), detail: p ? p.detail : c.detail };
      this.acts.push({ label: `rebalance refusal ${c.deployment}/${c.service}`, ops: [], audit: [{ type: 'rebalance_skipped', time: this.now, deployment: c.deployment, payload }], effect: { kind: 'refusal', key, trigger, reason } });
    }
  }
}
