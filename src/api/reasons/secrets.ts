// The secrets controller's closed vocabularies: why a node's copy is written or waits, and why a
// secret cannot be used. The same strings are audit payloads, metric labels and log fields
// (docs/secrets.md lists them).

/** Why a copy is written (audit secret_copied `reason`, jaco_secret_copies_total{reason}). */
export const COPY_REASONS = {
  missing: 'a replica desired on the node uses it and the node has no copy',
  source_changed: 'the copy is of another object of the same name (deleted and made again)',
  node_key_changed: 'the node published a new key (its agent lost its state directory): the copy is sealed to it again',
} as const;

/** Why a node waits for a copy (the controller's notes; the agent reports the replica secret_missing meanwhile). */
export const COPY_WAITS = {
  node_has_no_key: 'the node has published no key (an agent older than secrets)',
  source_missing: 'the secret (config) does not exist; a copy already on the node is kept for the replicas that use it',
  cannot_open: "the secret cannot be opened with the controller's cluster key file (sealed to a key it does not hold, or altered)",
  no_cluster_key: 'the controller was started without a cluster key file (--secrets-key-file): it copies configs only',
} as const;
export type CopyWaitReason = keyof typeof COPY_WAITS;

/** Why a copy is removed (audit secret_copy_removed `reason`). */
export const COPY_REMOVALS = {
  unused: 'no replica desired on the node uses it any more',
} as const;
