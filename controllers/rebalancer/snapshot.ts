// What the rebalancer reads, and how its snapshot is built from the cache: one function for the
// controller and for `jaco rebalance plan` recomputing from a one-shot read of the store.
import type { Node, NodeDrain } from '../../src/api/types.js';
import { valuesByRest, type Cache } from '../../src/runtime/cache.js';
import { MOVER_READS, moverView } from '../moves/move.js';
import type { Config } from './config.js';
import type { Snapshot } from './decide.js';
import { StateBackedSource } from './pressure.js';

/** The prefixes the rebalancer reads. */
export const REBALANCER_READS = MOVER_READS;

/** The cycle's snapshot: the cache's contents plus each node's fresh pressure sample (StateBackedSource). */
export function snapshotOf(cache: Cache, now: number, config: Pick<Config, 'freshnessIntervals'>): Snapshot {
  const view = moverView(cache);
  return {
    ...view,
    samples: new StateBackedSource(() => view.heartbeats.values(), config.freshnessIntervals).samples(now),
    nodes: [...cache.kind<Node>('nodes').items.values()].map((n) => n.value),
    drains: valuesByRest(cache.kind<NodeDrain>('drains')),
  };
}
