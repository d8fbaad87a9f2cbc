// The cluster's identity: a uid created once per store prefix (whoever asks first creates it).
// It labels containers, so two clusters sharing a Docker engine never touch each other's.
import { randomUUID } from 'node:crypto';
import { keys } from '../api/keys.js';
import { claimKey } from './claim.js';
import type { Store } from './store.js';

export interface ClusterInfo {
  uid: string;
  createdAt: string;
}

/**
 * The cluster's identity, created by the first to ask — with a new uid, or with `fresh`: an agent
 * that finds the store lost its node (restarted empty) puts back the uid its containers carry, so
 * they stay this cluster's.
 */
export async function clusterInfo(store: Store, fresh: ClusterInfo = { uid: randomUUID(), createdAt: new Date().toISOString() }): Promise<ClusterInfo> {
  const key = keys.cluster();
  const claim = await claimKey(store, key, JSON.stringify(fresh));
  return claim.ours ? fresh : (JSON.parse(claim.holder.value.toString('utf8')) as ClusterInfo);
}

/** The uid in the cluster key's stored text, or undefined when it holds none (not JSON, no uid). */
export function clusterUidOf(text: string): string | undefined {
  try {
    const uid = (JSON.parse(text) as { uid?: unknown } | null)?.uid;
    return typeof uid === 'string' ? uid : undefined;
  } catch {
    return undefined;
  }
}
