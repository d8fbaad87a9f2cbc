// Every audit event type jaco writes, with what it records. The same strings are the `--type`
// filter of `jaco audit` and appear in docs/audit.md.

export const AUDIT_TYPES = {
  deployment_applied: 'a deployment was created or changed by apply (or rollback): new revision',
  deployment_deleted: 'a deployment was deleted',
  node_cordoned: 'a node was cordoned or uncordoned',
  node_labeled: "an operator changed a node's runtime labels (jaco node label): what was set and removed",
  registry_login: "a registry's access was stored (jaco registry login): host, user, whether a CA is set, insecure — never the password",
  registry_logout: "a registry's stored access was removed (jaco registry logout)",
  image_settings_changed: "the cluster's image setting changed (jaco registry default): default registry, short names at Docker Hub",
  replica_placed: 'the scheduler placed a new replica',
  replica_removed: 'the scheduler removed a replica (scale down, deployment deleted)',
  replica_healed: 'the scheduler healed a replica with surplus copies (kept the best, removed the others) or a lost move marker',
  placement_failed: 'a replica could not be placed: reason code and per-node breakdown',
  replica_restarted: 'the scheduler restarted a degraded or exited replica',
  restart_exhausted: 'a replica failed 3 times in a row; no more restarts until the next apply',
  replica_relocated: 'a replica exhausted its restarts on its node and was re-placed once on another node (crash-loop escalation): from, to, why',
  node_lost: 'a node was NotReady past the grace period; its stateless replicas were re-placed',
  rollout_started: 'a rolling update of a service began',
  rollout_step: 'one replica of a rolling update was updated',
  rollout_completed: 'every replica of a service runs the new revision',
  rollout_aborted: 'a rolling update was aborted and reverted: reason',
  rollout_paused: 'a rolling update was paused (jaco rollout pause, or failureAction pause): reason',
  rollout_resumed: 'a paused rolling update was resumed (jaco rollout resume)',
  rollout_promoted: "a rollout's canaries were promoted (jaco rollout promote, or update.autoPromote): by",
  rollout_step_failed: 'a step failed and the rollout went on (failureAction continue, or within maxFailureRatio): reason',
  drain_started: 'a node drain began',
  drain_move_started: 'a drain began moving a replica make-before-break: source, destination',
  replica_moved: 'a replica was moved make-before-break (drain)',
  drain_move_abandoned: 'a drain move was abandoned (destination not healthy by the deadline, failed or lost); the source keeps serving',
  drain_replica_dropped: 'a drain dropped a global replica from its node (global replicas are never moved: one runs per node)',
  drain_replica_stopped: 'a forced drain stopped a stateful replica where it is (suspended until its node is schedulable again)',
  drain_completed: 'a node drain finished',
  drain_aborted: 'a node drain was aborted: reason',
  node_removed: 'a drained node was removed from the cluster',
  replica_resumed: 'a replica stopped by a forced drain started again: its node is schedulable again',
  rebalance_moved: 'the rebalancer moved a replica off a pressured node, or to even out a spread service',
  replica_preempted: 'the rebalancer stopped a lower-priority replica to make room for a higher-priority pending one: victim, its priority, the beneficiary and its priority, node',
  rebalance_skipped: 'the rebalancer considered a candidate and skipped it: reason; or a pending service neither coalescing nor preemption can serve: for, trigger, reason',
  rebalance_completed: 'a rebalancer move finished: the replica runs healthy on dst and src was stopped',
  rebalance_abandoned: 'a rebalancer move was abandoned (dst not healthy by the deadline, failed or lost); src keeps serving',
  secret_created: 'a secret was created (jaco secret create, or a compose file at apply): name, size, the cluster key it is sealed to — never its value',
  secret_removed: 'a secret was removed (jaco secret rm, or apply/delete removing what a compose file made once nothing refers to it)',
  config_created: 'a config was created (jaco config create, or a compose file at apply): name, size, digest',
  config_removed: 'a config was removed (jaco config rm, or apply/delete removing what a compose file made)',
  secret_copied: "the secrets controller wrote a node's copy of a secret or config, sealed to the node's key: node, kind, name, reason",
  secret_copy_removed: "the secrets controller removed a node's copy that no replica on the node uses any more",
  secret_resealed: 'the secrets controller re-sealed a secret at rest to the newest cluster key: name, from, to',
  cluster_key_published: "the secrets controller published the public half of the cluster key new secrets are sealed to: id, previous",
} as const;

export type AuditType = keyof typeof AUDIT_TYPES;

export function isAuditType(t: string): t is AuditType {
  return Object.hasOwn(AUDIT_TYPES, t);
}
