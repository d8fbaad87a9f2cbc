// The drain controller's closed vocabularies: why a replica of a draining node is where it is,
// why a drain aborted, how a drain move ended. The same strings appear in drains/<host>.status,
// audit payloads, the jaco_drain_moves_total{result} label and `jaco node drain --wait`.
import { ABANDON_REASONS, MOVE_REFUSALS } from './moves.js';
import { UNSCHEDULABLE_REASONS } from './scheduling.js';

/** Reasons a drain gives a replica, besides the move refusals and unschedulable reasons it passes on. */
export const DRAIN_REPLICA_REASONS = {
  global_replica: 'placement global: the node\'s copy is dropped, not moved (the service runs one replica per node)',
  job_replica: "a job's replica (mode: job) that is not running: dropped, not moved; the scheduler places it elsewhere only if the job has no result yet",
  job_running: "a job's run under way: it finishes on the node, then its replica is dropped (a job is never moved)",
  stateful_replica: 'the replica has volumes and its data cannot follow it: the drain waits (jaco node drain --force stops it)',
  node_drained: 'stopped by a forced drain: the data stays on the node, the replica is not placed elsewhere',
  inbound_move: 'a move onto this node was in flight when the drain started; it finishes (or is abandoned) first',
  drain_aborted: 'the drain aborted while this replica was moving: the move was abandoned, the replica stays',
  replica_removed: 'the replica was removed while the node drained (scale down, deployment deleted)',
} as const;

/** Every reason a replica's drain status may carry. */
export type DrainReplicaReason = keyof typeof DRAIN_REPLICA_REASONS | keyof typeof MOVE_REFUSALS | keyof typeof ABANDON_REASONS | keyof typeof UNSCHEDULABLE_REASONS;

export const ALL_REPLICA_REASONS: Record<DrainReplicaReason, string> = { ...UNSCHEDULABLE_REASONS, ...MOVE_REFUSALS, ...ABANDON_REASONS, ...DRAIN_REPLICA_REASONS };

/** Why a drain aborted (drains/<host>.status.reason, drain_aborted audit). */
export const DRAIN_ABORT_REASONS = {
  drain_timeout: 'a replica could not be moved within the drain timeout (--timeout, default 5m): the old replica keeps running, the node stays cordoned',
  cancelled: 'the operator cancelled the drain (jaco node drain --cancel): moves in flight are withdrawn, the node stays cordoned',
} as const;
export type DrainAbortReason = keyof typeof DRAIN_ABORT_REASONS;

/** How a drain move ended: jaco_drain_moves_total{result}. */
export const DRAIN_MOVE_RESULTS = {
  completed: 'the replacement ran healthy; the old copy was removed',
  ...ABANDON_REASONS,
} as const;
export type DrainMoveResult = keyof typeof DRAIN_MOVE_RESULTS;
