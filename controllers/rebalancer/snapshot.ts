// What the rebalancer reads, and how its snapshot is built from the cache: one function for the
// controller and for `jaco rebalance plan` recomputing from a one-shot read of the store.
import { withDefaults } from '../../src/api/spec.js';
import type { Deployment, DeploymentStatus, NodeDrain } from '../../src/api/types.js';
import { valuesByRest, type Cache } from '../../src/runtime/cache.js';
import { nodeValuesOf } from '../../src/runtime/nodes.js';
import { MOVER_READS, moverView } from '../moves/move.js';
import { KEPT_PLACER } from '../placement/kept.js';
import type { Config } from './config.js';
import { StateBackedSource } from './pressure.js';
import { CAPACITY_REASONS } from './coalesce.js';
import type { PendingService, Snapshot } from './plan.js';

/** The prefixes the rebalancer reads: a mover's (the deployments among them), and the deployments' status (pending replicas). */
export const REBALANCER_READS = [...MOVER_READS, 'statuses'] as const;

/** The cycle's snapshot: the cache's contents plus each node's fresh pressure sample (StateBackedSource). */
export function snapshotOf(cache: Cache, now: number, config: Pick<Config, 'freshnessIntervals'>): Snapshot {
  const view = moverView(cache);
  const snap: Snapshot = {
    ...view,
    samples: new StateBackedSource(() => view.heartbeats.values(), config.freshnessIntervals).samples(),
    nodes: [...nodeValuesOf(cache).values()],
    drains: valuesByRest(cache.kind<NodeDrain>('drains')),
    pending: pendingOf(cache),
    priorities: prioritiesOf(cache),
    generations: new Map([...valuesByRest(cache.kind<Deployment>('deployments'))].map(([name, d]) => [name, d.metadata.generation ?? 0])),
    // The cache's placer, patched from its changes rather than built for every cycle (issue 30).
    placer: () => cache.index(KEPT_PLACER).at(snap, now),
  };
  return snap;
}

/** Every service's current priority (the deployment's spec: priority is not in the spec hash). */
function prioritiesOf(cache: Cache): Map<string, number> {
  const out = new Map<string, number>();
  for (const [name, d] of valuesByRest(cache.kind<Deployment>('deployments'))) for (const [svc, spec] of Object.entries(d.spec.services)) out.set(`${name}/${svc}`, spec.priority ?? 0);
  return out;
}

/** Services the scheduler reports unschedulable for capacity, with the spec a new replica would carry. */
function pendingOf(cache: Cache): Omit<PendingService, 'since'>[] {
  const deployments = valuesByRest(cache.kind<Deployment>('deployments'));
  const out: Omit<PendingService, 'since'>[] = [];
  for (const [name, status] of valuesByRest(cache.kind<DeploymentStatus>('statuses'))) {
    for (const [service, st] of Object.entries(status.status?.scheduling?.services ?? {})) {
      const u = st.unschedulable;
      const spec = deployments.get(name)?.spec.services[service];
      if (u && u.count > 0 && spec && CAPACITY_REASONS.includes(u.reason)) out.push({ deployment: name, service, spec: withDefaults(spec), reason: u.reason, count: u.count });
    }
  }
  return out.sort((a, b) => (`${a.deployment}/${a.service}` < `${b.deployment}/${b.service}` ? -1 : 1));
}
