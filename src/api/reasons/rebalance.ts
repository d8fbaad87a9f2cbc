// The rebalancer's closed vocabularies (seed 000, ADR 0002): why a candidate was skipped, which
// gate stopped a cycle, and why a replica on the hot node is not a candidate at all. The same
// strings appear in rebalance_skipped audit records, `jaco rebalance plan` and metric labels.

/** Why one candidate (replica on the most pressured node) was not moved: the audit `reason`. */
export const SKIP_REASONS = {
  cooldown_replica: 'the replica was placed or moved less than the replica cooldown ago (10 min)',
  cooldown_node: 'the best destination received a move less than the node cooldown ago (2 min)',
  dst_cap: 'the move would push the destination to 0.75 pressure or more: it would relocate the hotspot',
  relief_floor: 'moving the replica would lower the source pressure by less than 0.10',
  resource_limits: 'the destination lacks memory, GPUs or ports for it, or would exceed 1.0 CPU or memory after the move',
  anti_affinity: 'its placement forbids every destination (spread: the node already runs the service; hosts: not listed)',
  no_eligible_dst: 'no other node can take a move: none is Ready and schedulable with a fresh pressure sample',
  no_candidate: 'the most pressured node runs no movable replica (all stateful, global, opted out, moving or not running)',
} as const;
export type SkipReason = keyof typeof SKIP_REASONS;
export const SKIP_REASON_NAMES = Object.keys(SKIP_REASONS) as SkipReason[];

/** The cluster-level gates of a cycle, in the order they are checked; `none` means a move was made. */
export const GATES = {
  pressure_data: 'at least one node has a fresh pressure sample (none: the rebalancer is silent)',
  trigger_threshold: 'the most pressured node is at 0.85 pressure or more',
  consecutive_cycles: 'that node has been at or over the trigger for 2 consecutive cycles',
  imbalance_gap: 'max − min pressure across nodes is 0.25 or more (not uniformly busy)',
  move_in_flight: 'no rebalancer move is still in flight (one move lands, the next cycle re-evaluates)',
  candidates: 'at least one candidate passes every per-candidate gate and the move mechanism accepts it',
  none: 'nothing stopped the cycle: it committed a move',
} as const;
export type Gate = keyof typeof GATES;
export const GATE_NAMES = Object.keys(GATES) as Gate[];

/** Why a replica on the hot node is not a candidate: by construction, never audited (seed 000). */
export const EXCLUSIONS = {
  stateful: 'has volumes: its data cannot follow it',
  global: 'placement global: one replica per node, never moved',
  opted_out: 'rebalance: disabled on its service',
  job: 'a job (mode: job): it runs to completion where it is, never moved',
  moving: 'a move of it is already in flight',
  suspended: 'stopped by a forced drain',
  not_running: 'not running: moving it relieves nothing',
} as const;
export type Exclusion = keyof typeof EXCLUSIONS;

/** Why a replica the scheduler cannot place gets no coalescing plan (`jaco rebalance plan`). */
export const NO_PLAN_REASONS = {
  no_plan_fits: 'no set of movable replicas on any node makes room that the moved replicas can find elsewhere',
  only_stateful_blockers: 'the replicas in the way are stateful, global or opted out: they never move',
  would_exceed_budget: "the plan's next move would take its service past its disruption budget (update.maxUnavailable)",
} as const;
export type NoPlanReason = keyof typeof NO_PLAN_REASONS;

/** Why a pending replica that coalescing could not serve preempts nothing (`jaco rebalance plan`). */
export const NO_PREEMPT_REASONS = {
  no_lower_priority: 'no node would take it even with every replica of lower priority gone (equal or higher priority, stateful, global and same-service replicas are never preempted)',
  would_exceed_budget: "the victims it needs would take their service past its disruption budget (update.maxUnavailable)",
} as const;
export type NoPreemptReason = keyof typeof NO_PREEMPT_REASONS;
