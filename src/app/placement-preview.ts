// `jaco apply --dry-run`'s placement preview (like `nomad job plan`): what the scheduler would do
// now if the apply landed — which replicas it would place where, which it would remove, and which
// would stay unschedulable and why — and, for a replica that would not fit for capacity, what the
// rescheduler would move or preempt to make room. Not a second scheduler: the scheduler's and the
// rebalancer's own pure decides run on one read of the store with the applied deployments in place.
import { CAPACITY_REASONS } from '../../controllers/rebalancer/coalesce.js';
import type { PendingService } from '../../controllers/rebalancer/plan.js';
import { defaultConfig } from '../../controllers/rebalancer/config.js';
import { decide as rebalance } from '../../controllers/rebalancer/decide.js';
import { seedState } from '../../controllers/rebalancer/state.js';
import { preemptText } from '../../controllers/rebalancer/preempt.js';
import { REBALANCER_READS, snapshotOf } from '../../controllers/rebalancer/snapshot.js';
import { schedulerSnapshotOf, SCHEDULER_READS } from '../../controllers/scheduler/snapshot.js';
import { decide } from '../../controllers/scheduler/decide.js';
import { schedulerConfig } from '../../controllers/scheduler/plan.js';
import { unschedulableReasonOf } from '../api/reasons/scheduling.js';
import { withDefaults } from '../api/spec.js';
import { API_VERSION, type Deployment, type DeploymentSpec } from '../api/types.js';
import { Cache } from '../runtime/cache.js';
import { readCut } from './read.js';
import type { Store } from '../store/store.js';
import { PRODUCTION } from '../timings.js';

export interface PreviewItem {
  name: string;
  spec: DeploymentSpec;
}

/** Lines of the preview, per applied deployment: placements, removals, unschedulable services. */
export function previewLines(plan: ReturnType<typeof decide>, names: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const p of plan.place.filter((x) => names.has(x.deployment)).sort((a, b) => (a.replica < b.replica ? -1 : 1)))
    out.push(`${p.deployment}/${p.service}: ${p.replica} would be placed on ${p.node} (${p.why})`);
  for (const s of plan.stop.filter((x) => names.has(x.deployment)).sort((a, b) => (a.replica < b.replica ? -1 : 1)))
    out.push(`${s.deployment}/${s.service}: ${s.replica} would be removed from ${s.nodes.join(', ')} (${s.reason})`);
  for (const [dep, services] of [...plan.status].filter(([d]) => names.has(d)).sort(([a], [b]) => (a < b ? -1 : 1)))
    for (const [svc, st] of Object.entries(services).sort(([a], [b]) => (a < b ? -1 : 1))) {
      const u = st.unschedulable;
      if (u) out.push(`${dep}/${svc}: ${u.count} replica(s) would be unschedulable: ${unschedulableReasonOf(u.reason)} — ${u.message}`);
      if (st.waitingForDependency?.length) out.push(`${dep}/${svc}: would wait for ${st.waitingForDependency.join(', ')} (dependsOn)`);
    }
  return out;
}

/**
 * What the scheduler would decide now with `items` applied. Changed specs of running replicas are
 * the rollout controller's (it replaces them in place, one step at a time): the preview covers
 * what the scheduler does — new replicas, removals, what cannot be placed.
 */
export async function placementPreview(store: Store, items: readonly PreviewItem[], now = Date.now()): Promise<string[]> {
  const cache = await readCut(store, [...new Set([...SCHEDULER_READS, ...REBALANCER_READS])]);
  const snap = schedulerSnapshotOf(cache, now);
  const deployments = new Map(snap.deployments);
  for (const i of items) {
    const cur = deployments.get(i.name);
    const generation = (cur?.value.metadata.generation ?? 0) + 1;
    const value: Deployment = { apiVersion: API_VERSION, kind: 'Deployment', metadata: { ...(cur?.value.metadata ?? {}), name: i.name, generation }, spec: i.spec };
    deployments.set(i.name, { key: `deployments/${i.name}`, modRevision: 0, createRevision: 0, version: 0, ...cur, value });
  }
  const plan = decide({ ...snap, deployments }, now, schedulerConfig(PRODUCTION));
  const names = new Set(items.map((i) => i.name));
  return [...previewLines(plan, names), ...roomLines(cache, plan, deployments, names, now)];
}

/**
 * For each applied service that would not fit for capacity: the rescheduler's coalescing plan
 * (the moves that would make room), as its pure cycle computes it on the store as it is, with the
 * service counted as pending past its grace.
 */
function roomLines(cache: Cache, plan: ReturnType<typeof decide>, deployments: ReadonlyMap<string, { value: Deployment }>, names: ReadonlySet<string>, now: number): string[] {
  const pending: Omit<PendingService, 'since'>[] = [];
  for (const [dep, services] of plan.status)
    for (const [service, st] of Object.entries(services)) {
      const u = st.unschedulable;
      const spec = deployments.get(dep)?.value.spec.services[service];
      if (names.has(dep) && u && spec && CAPACITY_REASONS.includes(u.reason)) pending.push({ deployment: dep, service, spec: withDefaults(spec), reason: u.reason, count: u.count });
    }
  if (!pending.length) return [];
  const config = defaultConfig(PRODUCTION);
  const snap = { ...snapshotOf(cache, now, config), pending };
  const state = { ...seedState(snap.samples, [], now, config), pendingSince: new Map(pending.map((p) => [`${p.deployment}/${p.service}`, now - 2 * config.cycleMs])) };
  const room = rebalance(state, snap, now, config, { explainOnly: true }).plan;
  const preempting = new Map(room.preempt.map((v) => [`${v.deployment}/${v.service}`, v]));
  return room.coalesce.map((v) => {
    if (v.plan?.length) return `${v.deployment}/${v.service}: the rescheduler would make room on ${v.node} by moving ${v.plan.map((m) => `${m.replica} ${m.from} → ${m.to}`).join(', ')}, one at a time`;
    // No coalescing plan: lower-priority replicas may make way (priority preemption).
    const p = preempting.get(`${v.deployment}/${v.service}`);
    if (p?.victims?.length) return `${v.deployment}/${v.service}: ${preemptText(p)}`;
    return `${v.deployment}/${v.service}: the rescheduler could not make room (${v.noPlan ?? v.verdict}): ${v.detail}${p ? `; no preemption either (${p.noPreempt ?? p.verdict}): ${p.detail}` : ''}`;
  });
}
