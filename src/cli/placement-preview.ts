// `jaco apply --dry-run`'s placement preview (like `nomad job plan`): what the scheduler would do
// now if the apply landed — which replicas it would place where, which it would remove, and which
// would stay unschedulable and why. Not a second scheduler: the scheduler's own pure decide runs
// on one read of the store with the applied deployments put in place of the stored ones.
import { schedulerSnapshotOf, SCHEDULER_READS } from '../../controllers/scheduler/controller.js';
import { decide, schedulerConfig } from '../../controllers/scheduler/decide.js';
import { unschedulableReasonOf } from '../api/reasons/scheduling.js';
import { API_VERSION, type Deployment, type DeploymentSpec } from '../api/types.js';
import { logger } from '../observability/log.js';
import { Cache } from '../runtime/cache.js';
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
  const cache = await Cache.read(store, SCHEDULER_READS, logger('apply'));
  const snap = schedulerSnapshotOf(cache, now);
  const deployments = new Map(snap.deployments);
  for (const i of items) {
    const cur = deployments.get(i.name);
    const generation = (cur?.value.metadata.generation ?? 0) + 1;
    const value: Deployment = { apiVersion: API_VERSION, kind: 'Deployment', metadata: { ...(cur?.value.metadata ?? {}), name: i.name, generation }, spec: i.spec };
    deployments.set(i.name, { key: `deployments/${i.name}`, modRevision: 0, createRevision: 0, version: 0, ...cur, value });
  }
  const plan = decide({ ...snap, deployments }, now, schedulerConfig(PRODUCTION));
  return previewLines(plan, new Set(items.map((i) => i.name)));
}
