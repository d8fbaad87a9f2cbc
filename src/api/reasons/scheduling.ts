// Why a node was rejected for a replica, and why a replica is unschedulable: closed unions with
// their descriptions. The same strings appear in deploymentstatus, `jaco status`/`explain`, audit
// records and the jaco_scheduler_unschedulable_replicas{reason} metric.

/** Service-level reasons a replica cannot be placed (seed 004 and issue 4). */
export const UNSCHEDULABLE_REASONS = {
  // Seed 004's name; statuses written before it say no_nodes_ready (LEGACY_UNSCHEDULABLE_REASONS).
  no_nodes_active: 'no node is Ready and schedulable (all NotReady, cordoned, draining or without capacity)',
  no_capacity_memory: 'no eligible node has the memory left for this replica (memory is never overcommitted)',
  no_capacity_gpu: 'no eligible node has enough free GPUs',
  no_capacity_disk: "no eligible node has the scratch disk left for this replica (resources.disk, else the cluster's defaultInstanceEphemeralDisk; booked like memory against the node's data-root filesystem)",
  node_degraded: 'every otherwise eligible node is degraded (disk pressure, repeated failures, overlay peers unreachable): no new placements until the causes clear or `jaco node trust`',
  port_conflict: 'every eligible node already has one of its host ports taken',
  max_per_node: 'every eligible node already runs placement.maxPerNode replicas of the service',
  node_selector_mismatch: 'no eligible node carries the labels in placement.nodeSelector',
  runtime_missing: "no eligible node's Docker engine has the service's runtime (container.runtime; compose runtime:)",
  device_missing: 'no eligible node offers every device the service asks for (container.devices: jaco agent --device; resources.gpuIds: its GPUs by id)',
  cannot_satisfy_host_placement: 'fewer of the listed hosts are eligible than replicas are wanted',
  volume_locality_no_node: "the node holding the service's volumes is not eligible",
  volume_in_use: 'its named volume is attached read-write by another replica (or it would attach read-write a volume others use): one writer per volume (seed 004)',
  preempted: 'stopped to make room for a higher-priority service (priority preemption): placed again as soon as capacity exists',
  spec_too_large: 'one replica of the service is larger than an etcd request can carry (--max-request-bytes): shrink its spec (env, command)',
  ipam_exhausted: "no eligible node has a free address in its subnets for a cluster-network replica (seed 004: if IPAM allocation fails, placement fails)",
} as const;
export type UnschedulableReason = keyof typeof UNSCHEDULABLE_REASONS;

/** Names older versions wrote, still read from stored statuses: the reason each now goes by. */
export const LEGACY_UNSCHEDULABLE_REASONS: Readonly<Record<string, UnschedulableReason>> = { no_nodes_ready: 'no_nodes_active' };

/** A stored unschedulable reason as it reads today (an older name mapped to its current one). */
export const unschedulableReasonOf = (stored: string): string => LEGACY_UNSCHEDULABLE_REASONS[stored] ?? stored;

/** The filters, in pipeline order; each rejects a node with one node-level reason. */
export const FILTERS = {
  eligibility: 'node is NotReady, cordoned, draining or has no capacity',
  excluded: 'node excluded by the caller (the source of a move)',
  hosts: 'node is not in placement.hosts',
  node_selector: 'node lacks a label in placement.nodeSelector',
  runtime: "the node's Docker engine lacks the service's runtime (or the node reports none)",
  devices: 'the node does not offer a device the service asks for (a host device, or a GPU by id)',
  volume_locality: "node is not the home of the service's volumes",
  degraded: 'node is degraded (disk pressure, repeated failures or overlay peers unreachable) and not trusted by an operator',
  volume_in_use: 'a named volume it mounts is in use on the node by another replica, and one of the two mounts is read-write',
  memory: 'memory requests of the node plus this replica (each with overhead) exceed its capacity',
  gpus: 'not enough free GPUs',
  disk: 'scratch disk booked on the node plus this replica exceeds its data-root filesystem',
  ports: 'a host port of the service is taken on the node',
  ipam: "the node has no free address in its subnets (or no subnets yet) for a cluster-network replica",
  max_per_node: 'the node already runs placement.maxPerNode replicas of this service',
  anti_affinity: 'the node already runs a replica of this service',
} as const;
export type FilterName = keyof typeof FILTERS;

/** The service-level reason a filter's rejection stands for. */
export const FILTER_REASON: Record<FilterName, UnschedulableReason> = {
  eligibility: 'no_nodes_active',
  degraded: 'node_degraded',
  excluded: 'no_nodes_active',
  hosts: 'cannot_satisfy_host_placement',
  node_selector: 'node_selector_mismatch',
  runtime: 'runtime_missing',
  devices: 'device_missing',
  volume_locality: 'volume_locality_no_node',
  volume_in_use: 'volume_in_use',
  memory: 'no_capacity_memory',
  gpus: 'no_capacity_gpu',
  disk: 'no_capacity_disk',
  ports: 'port_conflict',
  ipam: 'ipam_exhausted',
  max_per_node: 'max_per_node',
  anti_affinity: 'cannot_satisfy_host_placement',
};

export const FILTER_ORDER = Object.keys(FILTERS) as FilterName[];

/** What made the scheduler place a replica (decisions/<dep>/<replica>.spec.trigger, audit, metrics). */
export const PLACE_TRIGGERS = {
  scale_up: 'the service wants more replicas than exist (new deployment, scale up, replica removed)',
  canary: "a canary beside the service's replicas, for a rollout with update.canary (scaled away when the rollout ends)",
  global_node: 'a global service gained an eligible node without its replica',
  node_lost: "the replica's node was NotReady past the grace period: re-placed, same id",
  preempted: 'a replica stopped by priority preemption, placed again (same id) once capacity exists',
  crash_loop: 'the replica exhausted its restarts on its node while its spec runs ready elsewhere: re-placed once on another node, same id',
} as const;
export type PlaceTrigger = keyof typeof PLACE_TRIGGERS;

/** What put a replica where it is, as its stored decision says: a scheduler placement, or a mover's move. */
export const MOVE_DECISION_TRIGGERS = {
  drain: 'a drain moved the replica off its node, make-before-break, to where the placer put it',
  rebalance: 'the rebalancer moved it (pressure, spread or coalescing), make-before-break',
} as const;
export type DecisionTrigger = PlaceTrigger | keyof typeof MOVE_DECISION_TRIGGERS;

/** Why the scheduler removes a replica (every copy of it). */
export const REMOVE_REASONS = {
  scale_down: 'the service wants fewer replicas: the highest indexes go, not-running ones first',
  deployment_deleted: 'its deployment was deleted',
  service_removed: 'its service is no longer in the deployment',
  mode_changed: 'the service changed to or from placement global (ids differ between the two)',
  node_gone: 'the node of a global replica no longer exists',
  duplicate: 'a surplus copy of a replica outside any move (hand edit, older release): the best copy stays',
  job_superseded: "a job's run of an earlier spec: the changed spec runs afresh under new replica ids",
} as const;
export type RemoveReason = keyof typeof REMOVE_REASONS;

/** The observed states that make the scheduler restart a replica (seed 001, health and restart policy). */
export const RESTART_CAUSES = {
  degraded: 'the health check is failing',
  exited: 'the container exited or was OOM-killed',
  failed: 'the agent gave up starting it (e.g. Docker could not start the container)',
  removed: 'the container was removed outside jaco (docker rm; jaco down removes a local cluster\'s containers)',
  paused: 'the container was paused outside jaco (docker pause)',
} as const;
export type RestartCause = keyof typeof RESTART_CAUSES;

/**
 * Restart causes that are someone's act outside jaco, not the health of the node: a restart for one
 * of them does not count toward the node's repeated_failures nor its recent-failure score
 * (src/api/eligibility.ts restartCountsAgainstNode).
 */
export const OUTSIDE_RESTART_CAUSES: ReadonlySet<RestartCause> = new Set(['removed', 'paused']);

/** Replica conditions the scheduler reports in deploymentstatus and `jaco status`. */
export const REPLICA_CONDITIONS = {
  restart_exhausted: 'failed 3 times in a row without running in between: no more restarts until the next apply',
  node_lost: 'its node is NotReady past the grace period and it has volumes, so it stays there',
} as const;
export type ReplicaCondition = keyof typeof REPLICA_CONDITIONS;
