// One way to claim a key, as etcd's concurrency package does (issue 31): create it if nobody has,
// in one transaction that otherwise reads what is there. The create revision is the claim's fence
// (writer.ts: Compare(CreateRevision(key) == it)). A claim on a lease recognises its own key by
// that lease: a commit whose reply was lost, or that etcd3 re-sent after a dropped connection, has
// landed, and the key found in place is this claim's. Leader election (leadership.ts), the agent's
// claim of its node (node-agent/presence.ts) and the cluster's identity (cluster.ts) claim alike.
import type { IKeyValue } from 'etcd3';
import type { Store } from './store.js';

export type Claim =
  /** The key is this claim's: made now, or found carrying this claim's lease (adopted: a lost reply). */
  | { ours: true; createRevision: number; adopted: boolean }
  /** Someone else holds it: here is what they wrote. */
  | { ours: false; holder: IKeyValue };

/** Claims `key` (relative to the store's prefix) with `value`, bound to `lease` when given. */
export async function claimKey(store: Store, key: string, value: string, lease?: string): Promise<Claim> {
  const put = store.ns.put(key).value(value);
  try {
    const res = await store.ns
      .if(key, 'Create', '==', 0)
      .then(lease ? put.lease(lease) : put)
      .else(store.ns.get(key))
      .commit();
    if (res.succeeded) return { ours: true, createRevision: Number(res.header.revision), adopted: false };
    const holder = res.responses?.[0]?.response_range?.kvs?.[0];
    if (!holder) throw new Error(`claim of ${key}: the key exists, but the same transaction did not read it`);
    return boundTo(holder, lease) ? { ours: true, createRevision: Number(holder.create_revision), adopted: true } : { ours: false, holder };
  } catch (e) {
    // No reply: the create may have landed all the same. Only a lease tells whose it is.
    if (!lease) throw e;
    const kv = (await store.ns.get(key).exec()).kvs[0];
    if (kv && boundTo(kv, lease)) return { ours: true, createRevision: Number(kv.create_revision), adopted: true };
    throw e;
  }
}

/** A key bound to this claim's lease is this claim's own (a lease is one process's, one grant's). */
function boundTo(kv: IKeyValue, lease: string | undefined): boolean {
  return !!lease && lease !== '0' && kv.lease === lease;
}
