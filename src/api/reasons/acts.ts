// Why a controller's act did not land (src/runtime/acts.ts): the same strings in deployment status,
// logs and the jaco_act_failures_total{reason} label.

/** Why an act did not land: closed union, the same strings in status, logs and metric labels. */
export const ACT_FAILURES = {
  conflict: 'a compare-and-swap precondition no longer held (the cache was behind, or another writer won)',
  unreadable_key: 'the act writes a key whose stored value this version cannot read; it waits until the key is fixed',
  too_large: "the act is larger than one etcd request (--max-request-bytes)",
  too_many_ops: 'the act has more operations than one etcd transaction holds (--max-txn-ops)',
  duplicate_key: 'the act writes one key twice, which etcd refuses in one transaction (a defect of the controller that planned it)',
} as const;
export type ActFailureReason = keyof typeof ACT_FAILURES;
