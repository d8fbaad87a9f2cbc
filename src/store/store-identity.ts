// Whether a store is still the one whose state is held: the reflector asks it of every reply, and
// the reads kept between CLI commands (src/store/kept-reads.ts) of the store as it is now.
import type { IResponseHeader } from 'etcd3';
import type { StoreReplacedReason } from '../api/reasons/store.js';

/** What a reflector last knew of the store it follows (StoreIdentity), and what a reply's header says now. */
export interface StoreIdentity {
  clusterId?: string;
  /** Every change up to here is held. */
  revision: number;
}

/**
 * Whether a reply's header shows a store other than the one whose changes are held: another
 * cluster id, or a revision behind the held one (a store's revision never goes back). Pure: the
 * caller confirms a revision seen from one member with a linearizable read before acting on it.
 */
export function storeReplaced(known: StoreIdentity, header: Pick<IResponseHeader, 'cluster_id' | 'revision'>): { reason: StoreReplacedReason; detail: string } | undefined {
  if (known.clusterId && header.cluster_id && header.cluster_id !== known.clusterId)
    return { reason: 'cluster_changed', detail: `cluster id ${known.clusterId} is now ${header.cluster_id}` };
  const now = Number(header.revision);
  if (known.revision > 0 && now < known.revision) return { reason: 'revision_backwards', detail: `held up to revision ${known.revision}, the store is at ${now}` };
  return undefined;
}
