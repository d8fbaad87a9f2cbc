// A placer kept between passes (issue 30: the rebalancer's cycle at 1,000 nodes / 10,000 replicas
// went from 2.7 ms to 21 ms when the placer came to be rebuilt every pass). It is built once from
// the cache, then patched from the cache's own batches: a desired key's old value leaves its node
// and its new one arrives, an address claim is counted or freed. What changes with time alone —
// a node's eligibility (heartbeat freshness, cordon, drain), its recent failures — is read afresh
// for each pass (cheap: one entry per node); a change the occupancy was counted against (node
// names, capacity, subnets, volume homes, the network's config) builds it afresh. A pass borrows
// it: its own what-ifs and assumed moves are undone before the next pass or the next patch, so a
// kept placer always equals a fresh build from the same cache (kept.test.ts proves it).
import { resolveNodeSettings } from '../../src/api/eligibility.js';
import type { AddressClaim, ReplicaDesired } from '../../src/api/types.js';
import type { Cache, IndexDef } from '../../src/runtime/cache.js';
import type { Change } from '../../src/store/reflector.js';
import type { Versioned } from '../../src/store/store.js';
import { nodeInfosOf, placedReplicaOf, placerFor, type PlacementView } from './input.js';
import { DEFAULT_PLACEMENT_CONFIG, type Placer, type PlacementConfig } from './placer.js';

export class KeptPlacer {
  private placer?: Placer;

  constructor(private readonly config: PlacementConfig = DEFAULT_PLACEMENT_CONFIG) {}

  /** A desired key changed: its old value's occupancy leaves its node, its new value's arrives. */
  desiredChanged(prev: ReplicaDesired | undefined, next: ReplicaDesired | undefined): void {
    if (!this.placer) return;
    this.placer.rollback();
    const was = prev && placedReplicaOf(prev);
    if (was) this.placer.forget(was.id, was.node);
    const now = next && placedReplicaOf(next);
    if (now) this.placer.assume(now);
  }

  /** An address claim (addresses/<…>/<host number>) appeared or went. */
  claimChanged(key: string, prev: AddressClaim | undefined, next: AddressClaim | undefined): void {
    if (!this.placer) return;
    this.placer.rollback();
    const n = Number(key.slice(key.lastIndexOf('/') + 1));
    if (!Number.isInteger(n)) return;
    if (prev && prev.spec.node !== next?.spec.node) this.placer.setClaimed(prev.spec.node, n, false);
    if (next) this.placer.setClaimed(next.spec.node, n, true);
  }

  /** Something else the occupancy was counted from changed (volume homes, the network's config): built afresh on next use. */
  invalidate(): void {
    this.placer = undefined;
  }

  /** The placer for a pass at `now`, lent to it: its edits are undone before the next pass or patch. */
  at(v: PlacementView, now: number): Placer {
    this.placer?.rollback();
    // A new default scratch disk changes what every replica without its own books: counted afresh.
    if (this.placer && this.placer.defaultDiskBytes !== (v.settings ?? resolveNodeSettings(undefined)).defaultDiskBytes) this.placer = undefined;
    const serviceOf = (replica: string) => {
      const d = v.replicas.byId.get(replica)?.copies[0]?.desired.spec;
      return d ? `${d.deployment}/${d.service}` : undefined;
    };
    if (!this.placer?.refreshNodes(nodeInfosOf(v, serviceOf, now))) this.placer = placerFor(v, now, this.config);
    this.placer.mark();
    return this.placer;
  }
}

/** The cache's kept placer: one per process, patched from every batch that touches what it counts. */
export const KEPT_PLACER: IndexDef<KeptPlacer> = {
  name: 'kept-placer',
  sources: ['desired', 'addresses', 'volumes', 'network'],
  build: () => new KeptPlacer(),
  apply(kept: KeptPlacer, changes: readonly Change[], _cache: Cache): void {
    for (const c of changes) {
      // An unreadable value leaves the last readable one in effect (as the replica index does).
      if (c.type === 'unreadable') continue;
      const prev = (c.prev as Versioned<unknown> | undefined)?.value;
      const next = (c.value as Versioned<unknown> | undefined)?.value;
      if (c.source === 'desired') kept.desiredChanged(prev as ReplicaDesired | undefined, next as ReplicaDesired | undefined);
      else if (c.source === 'addresses') kept.claimChanged(c.key, prev as AddressClaim | undefined, next as AddressClaim | undefined);
      else kept.invalidate();
    }
  },
};
