// The prefixes a process can hold in its cache, each with the kind stored under it: one catalogue,
// so no controller restates the key layout. A controller names the ones it reads (`reads`).
import { keys } from '../api/keys.js';
import type { SourceSpec } from '../store/reflector.js';

export const WATCHABLE = {
  // Service specs held frozen (shared), so their spec hashes are computed once (api/serving.ts).
  deployments: { prefix: keys.deployments(), kind: 'Deployment', share: [['spec', 'services']] },
  revisions: { prefix: keys.revisions(), kind: 'DeploymentRevision', share: [['spec', 'template', 'services']] },
  statuses: { prefix: keys.deploymentStatuses(), kind: 'DeploymentStatus' },
  rollouts: { prefix: keys.rollouts(), kind: 'RolloutPlan' },
  nodes: { prefix: keys.nodes(), kind: 'Node' },
  heartbeats: { prefix: keys.heartbeats(), kind: 'Heartbeat' },
  drains: { prefix: keys.drains(), kind: 'NodeDrain' },
  // Every replica of a service at one revision carries the same template: held once.
  desired: { prefix: keys.desiredOf(), kind: 'ReplicaDesired', share: [['spec', 'template']] },
  observed: { prefix: keys.observedOf(), kind: 'ReplicaObserved' },
  commands: { prefix: keys.commandsOf(), kind: 'ReplicaCommand' },
  counters: { prefix: keys.counters(), kind: 'ReplicaCounter' },
  disruptions: { prefix: keys.disruptionsAll(), kind: 'DisruptionLedger' },
  volumes: { prefix: keys.volumeHomes(), kind: 'VolumeHome' },
  endpoints: { prefix: keys.endpointsAll(), kind: 'Endpoints' },
  ingresses: { prefix: keys.ingresses(), kind: 'IngressStatus' },
  // Only their keys: a decision (every node's verdict) is read by `jaco explain`, not by controllers.
  decisions: { prefix: keys.decisions(), kind: 'PlacementDecision', keysOnly: true },
} as const satisfies Record<string, SourceSpec>;

export type Watchable = keyof typeof WATCHABLE;
