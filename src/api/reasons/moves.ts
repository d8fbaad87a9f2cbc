// The move mechanism's closed vocabularies (controllers/moves): why a move may not start and why one
// was abandoned. The same strings appear in drain status, audit payloads and metric labels.

/** Why a move may not start: closed union, the same strings in drain status, audit and metrics. */
export const MOVE_REFUSALS = {
  move_in_flight: 'the replica is already being moved',
  budget_exceeded: 'the service already has as many replicas moving or down as update.maxUnavailable allows',
  replica_not_running: 'the replica is not running; moving it would not keep anything serving',
  stateful_replica: 'the replica has volumes: its data cannot follow it to another node',
  global_replica: 'global replicas run one per node and are never moved',
  replica_suspended: 'the replica is stopped (drained with --force) and stays where it is',
  same_node: 'the destination is the source',
  unknown_replica: 'no desired copy of the replica on the source node',
  no_address: "the destination has no free address of its subnets for a cluster-network replica (or no subnets yet)",
  too_large: "the move's start (the replica's spec twice: source and destination) is larger than one etcd request (--max-request-bytes); apply refuses such specs",
} as const;
export type MoveRefusal = keyof typeof MOVE_REFUSALS;

/** Why a move was abandoned: closed union, the same strings in drain status, audit and metrics. */
export const ABANDON_REASONS = {
  move_timeout: 'the destination copy was not running and healthy by the deadline',
  dst_failed: 'the destination copy failed to start, or its container exited (no restart is made during a move); a drain tries another node',
  dst_lost: 'the destination node went NotReady or away before the copy was ready',
  cancelled: 'the actor withdrew the move (e.g. its drain aborted)',
} as const;
export type AbandonReason = keyof typeof ABANDON_REASONS;
