// What shows that etcd was replaced under a cache — restored from a snapshot, or restarted empty
// (src/store/reflector.ts storeReplaced). The same strings label jaco_store_replaced_total, the log
// and /healthz (docs/store.md).

export const STORE_REPLACED = {
  cluster_changed: 'etcd answers with another cluster id than before',
  revision_backwards: "the store's revision is behind the revision already held",
  future_revision: 'a read at the held revision was refused as a future revision',
} as const;
export type StoreReplacedReason = keyof typeof STORE_REPLACED;
