// The prefixes a controller can watch, each with the kind stored under it: one catalogue, so no
// controller restates the key layout. A controller declares the informers it needs with
// `informersFor('nodes', 'desired', …)`.
import { keys } from '../api/keys.js';
import type { InformerSpec } from './controller.js';

export const WATCHABLE = {
  deployments: { prefix: keys.deployments(), kind: 'Deployment' },
  revisions: { prefix: keys.revisions(), kind: 'DeploymentRevision' },
  statuses: { prefix: keys.deploymentStatuses(), kind: 'DeploymentStatus' },
  rollouts: { prefix: keys.rollouts(), kind: 'RolloutPlan' },
  nodes: { prefix: keys.nodes(), kind: 'Node' },
  heartbeats: { prefix: keys.heartbeats(), kind: 'Heartbeat' },
  drains: { prefix: keys.drains(), kind: 'NodeDrain' },
  desired: { prefix: keys.desiredOf(), kind: 'ReplicaDesired' },
  observed: { prefix: keys.observedOf(), kind: 'ReplicaObserved' },
  commands: { prefix: keys.commandsOf(), kind: 'ReplicaCommand' },
  counters: { prefix: keys.counters(), kind: 'ReplicaCounter' },
  volumes: { prefix: keys.volumeHomes(), kind: 'VolumeHome' },
  endpoints: { prefix: keys.endpointsAll(), kind: 'Endpoints' },
  decisions: { prefix: keys.decisions(), kind: 'PlacementDecision' },
} as const satisfies Record<string, InformerSpec>;

export type Watchable = keyof typeof WATCHABLE;

/** The informer specs of the named prefixes, as Controller's `informers` option takes them. */
export function informersFor<N extends Watchable>(...names: N[]): Pick<typeof WATCHABLE, N> {
  return Object.fromEntries(names.map((n) => [n, WATCHABLE[n]])) as Pick<typeof WATCHABLE, N>;
}
