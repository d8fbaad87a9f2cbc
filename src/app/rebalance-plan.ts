// The rebalancer's plan as an operator reads it (`jaco rebalance plan`, `explain`, `status` and
// the dashboard): asked of the leader (GET /rebalance/plan on the metrics address its election key
// advertises) or, when no leader answers, recomputed from one read of the store — and its text.
import { defaultConfig } from '../../controllers/rebalancer/config.js';
import { PLAN_PATH, type PlanResponse } from '../../controllers/rebalancer/plan.js';
import type { CoalesceView, RebalancePlan } from '../../controllers/rebalancer/plan.js';
import { preemptText } from '../../controllers/rebalancer/preempt.js';
import { decide } from '../../controllers/rebalancer/decide.js';
import { seedState } from '../../controllers/rebalancer/state.js';
import { REBALANCER_READS, snapshotOf } from '../../controllers/rebalancer/snapshot.js';
import { keys } from '../api/keys.js';
import type { AuditEvent } from '../api/types.js';
import { formatDuration } from '../api/units.js';
import { readAudit } from '../store/audit.js';
import type { Timings } from '../timings.js';
import type { Store } from '../store/store.js';
import { readCut } from './read.js';
import { table } from './output.js';

export type { CoalesceView, RebalancePlan };

export interface PlanReport {
  source: 'leader' | 'store';
  /** The leader's election identity (source leader). */
  identity?: string;
  /** Why the leader was not asked or did not answer (source store). */
  reason?: string;
  lastCycle?: PlanResponse['lastCycle'];
  plan: RebalancePlan;
}

/** The rebalancer leader's election value (identity, with "metrics=<url>"), or undefined. */
export async function rebalancerLeader(store: Store): Promise<string | undefined> {
  const { kvs } = await store.listRaw(keys.leaders('rebalancer'));
  const first = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0];
  return first?.value.toString('utf8');
}

export async function askLeader(store: Store, timeoutMs: number): Promise<PlanReport | string> {
  const identity = await rebalancerLeader(store);
  if (!identity) return 'no rebalancer is running (no election key under leaders/rebalancer/)';
  const url = /\bmetrics=(\S+)/.exec(identity)?.[1];
  if (!url) return `the leader (${identity}) does not advertise a metrics address`;
  try {
    const res = await fetch(`${url}${PLAN_PATH}`, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return `the leader at ${url} answered ${res.status}`;
    const body = (await res.json()) as PlanResponse;
    return { source: 'leader', identity: body.identity, ...(body.lastCycle ? { lastCycle: body.lastCycle } : {}), plan: body.plan };
  } catch (e) {
    return `the leader at ${url} did not answer (${(e as Error).message})`;
  }
}

/** Recomputes the plan from one read of the store (EWMAs seeded from the latest samples), as a rebalancer on `timings` would. */
export async function planFromStore(store: Store, timings: Timings, now = Date.now()): Promise<RebalancePlan> {
  const config = defaultConfig(timings);
  const cache = await readCut(store, REBALANCER_READS);
  const moved = await readAudit(store, { types: ['rebalance_moved'] }, cache.revision);
  const snap = snapshotOf(cache, now, config);
  const recent = moved.events.map(({ value: e }: { value: AuditEvent }) => ({ dst: String(e.spec.payload.dst), at: Date.parse(e.spec.time) }));
  const plan = decide(seedState(snap.samples, recent, now, config), snap, now, config, { explainOnly: true }).plan;
  return {
    ...plan,
    assumptions: [
      'EWMAs seeded from the latest samples (the leader smooths them over 5 minutes)',
      'a node at or over the trigger is assumed to have been so for the required consecutive cycles',
      'node cooldowns rebuilt from recent rebalance_moved audit records',
    ],
  };
}

/** The plan: the leader's when it answers within `timeoutMs`, else recomputed from the store (saying why). */
export async function currentPlan(store: Store, timings: Timings, opts: { timeoutMs: number; fromStore?: boolean }): Promise<PlanReport> {
  const asked = opts.fromStore ? 'asked for with --from-store' : await askLeader(store, opts.timeoutMs);
  if (typeof asked !== 'string') return asked;
  return { source: 'store', reason: asked, plan: await planFromStore(store, timings) };
}

/** One line on what the rescheduler does for a pending service: a coalescing move under way, or why none — and then what preemption does. */
export function coalesceText(v: CoalesceView): string {
  const verdict = v.noPlan ? `${v.verdict}: ${v.noPlan}` : v.verdict;
  const preempt = v.preempt ? `; preemption: ${preemptText(v.preempt)}${v.preempt.verdict === 'held' ? ` (${v.preempt.verdict})` : ''}` : '';
  return `${verdict}${v.node ? ` (room on ${v.node})` : ''} — ${v.detail}${preempt}`;
}

const n2 = (x: number | undefined | null) => (x === undefined || x === null ? '-' : x.toFixed(2));
const dash = (rows: (string | number | undefined)[][]) => rows.map((r) => r.map((c) => (c === undefined || c === '' ? '-' : c)));

export function renderPlan(r: PlanReport): string {
  const p = r.plan;
  const out: string[] = [];
  out.push(r.source === 'leader' ? `Plan of the rebalancer leader (${r.identity}) at ${p.at}, cycle ${p.cycle}` : `Plan recomputed from the store at ${p.at}: ${r.reason}`);
  if (r.lastCycle) out.push(`Last cycle ${r.lastCycle.cycle} at ${r.lastCycle.at}: ${r.lastCycle.move ? `moved ${r.lastCycle.move}` : `stopped by ${r.lastCycle.stoppedBy}`}`);
  for (const a of p.assumptions ?? []) out.push(`Assumed: ${a}`);
  out.push('');
  const nodeRows = [
    ...p.nodes.map((n) => {
      const notes = [n.node === p.src ? 'most pressured' : '', n.ineligible ?? '', n.cooldownMs !== undefined ? `received a move ${formatDuration(n.cooldownMs)} ago` : ''].filter(Boolean).join('; ');
      return [n.node, n2(n.cpu), n2(n.memory), n2(n.pressure), n.dominant, n.over, notes];
    }),
    ...p.silent.map((s) => [s.node, '-', '-', '-', '-', '-', `silent: ${s.why}`]),
  ];
  out.push(nodeRows.length ? table(['NODE', 'CPU', 'MEMORY', 'PRESSURE', 'DOMINANT', 'OVER', 'NOTE'], dash(nodeRows)).trimEnd() : 'No nodes.');
  out.push('');
  out.push(table(['GATE', 'HOLDS', 'DETAIL'], p.gates.map((g) => [g.gate, g.holds === null ? '-' : g.holds ? 'yes' : 'no', g.detail])).trimEnd());
  if (p.candidates.length) {
    out.push('');
    const rows = p.candidates.map((c) => [
      c.replica,
      `${c.deployment}/${c.service}`,
      `${n2(c.relief)} ${c.reliefSource}`,
      n2(c.score),
      c.verdict === 'skipped' ? `skip: ${c.reason}` : c.verdict === 'refused' ? `refused: ${c.refusal}` : c.verdict,
      c.dst,
      `${n2(c.srcBefore)}→${n2(c.srcAfter)}`,
      c.dst ? `${n2(c.dstBefore)}→${n2(c.dstAfter)}` : '-',
      c.detail,
    ]);
    out.push(table(['CANDIDATE', 'SERVICE', 'RELIEF', 'SCORE', 'VERDICT', 'DST', 'SRC', 'DST PRESSURE', 'DETAIL'], dash(rows)).trimEnd());
  }
  if (p.excluded.length) out.push('', `Not candidates: ${p.excluded.map((e) => `${e.replica} (${e.reason})`).join(', ')}`);
  if (p.spread?.length) {
    out.push('');
    const rows = p.spread.map((v) => [`${v.deployment}/${v.service}`, Object.entries(v.counts).map(([n, c]) => `${n}=${c}`).join(' '), v.skew, v.verdict, v.detail]);
    out.push(table(['SPREAD SERVICE', 'REPLICAS PER NODE', 'SKEW', 'VERDICT', 'DETAIL'], dash(rows)).trimEnd());
  }
  if (p.placement?.length) {
    out.push('');
    const rows = p.placement.map((v) => [v.replica, `${v.deployment}/${v.service}`, v.node, v.broken, v.verdict, v.dst, v.detail]);
    out.push(table(['MISPLACED', 'SERVICE', 'ON', 'NO LONGER', 'VERDICT', 'DST', 'DETAIL'], dash(rows)).trimEnd());
  }
  if (p.coalesce?.length) {
    out.push('');
    const rows = p.coalesce.map((v) => [`${v.deployment}/${v.service}`, v.reason, v.noPlan ? `${v.verdict}: ${v.noPlan}` : v.verdict, v.node, v.detail]);
    out.push(table(['PENDING SERVICE', 'REASON', 'VERDICT', 'ROOM ON', 'PLAN'], dash(rows)).trimEnd());
  }
  if (p.preempt?.length) out.push('', 'Preemption (pending services coalescing cannot make room for):', ...p.preempt.map((v) => `  ${preemptText(v)}${v.verdict === 'held' ? ` — ${v.verdict}: ${v.detail}` : ''}`));
  if (p.inFlight.length) out.push('', `In flight: ${p.inFlight.map((m) => `${m.replica} ${m.src}→${m.dst} (deadline ${m.deadline})`).join(', ')}`);
  out.push('');
  const m = p.move;
  if (m?.trigger === 'placement') out.push(`Move (placement): ${m.replica} ${m.src} → ${m.dst}: ${p.placement.find((v) => v.replica === m.replica)?.detail ?? ''}`);
  else if (m?.trigger === 'spread') out.push(`Move (spread): ${m.replica} ${m.src} → ${m.dst}: ${p.spread.find((v) => v.replica === m.replica)?.detail ?? ''}`);
  else if (m?.trigger === 'preempt') out.push(`Move (preempt): ${m.replica} ${m.src} → ${m.dst}: ${p.preempt.find((v) => v.victims?.some((x) => x.replica === m.replica))?.detail ?? ''}`);
  else if (m?.trigger === 'coalesce') out.push(`Move (coalesce): ${m.replica} ${m.src} → ${m.dst}: ${p.coalesce.find((v) => v.plan?.[0]?.replica === m.replica)?.detail ?? ''}`);
  else if (m) out.push(`Move: ${m.replica} ${m.src} → ${m.dst}: ${m.src} ${n2(m.srcBefore)} → ${n2(m.srcAfter)}, ${m.dst} ${n2(m.dstBefore)} → ${n2(m.dstAfter)} (${m.dominant} relief ${n2(m.relief)}, score ${n2(m.score)})`);
  else out.push(`No move: stopped by ${p.stoppedBy} (${p.gates.find((g) => g.gate === p.stoppedBy)?.detail ?? ''})`);
  return out.join('\n') + '\n';
}
