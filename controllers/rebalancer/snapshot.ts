// What the rebalancer reads, and how its snapshot is built from the cache: one function for the
// controller and for `jaco rebalance plan` recomputing from a one-shot read of the store.
import { eligibilityRevisions } from '../placement/input.js';
import type { DisruptionLedger, Heartbeat, Node, NodeDrain, ReplicaCommand, VolumeHome } from '../../src/api/types.js';
import { byRest, valuesByRest, type Cache } from '../../src/runtime/cache.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import type { Watchable } from '../../src/runtime/watchable.js';
import type { Config } from './config.js';
import type { Snapshot } from './decide.js';
import { StateBackedSource } from './pressure.js';

/** The prefixes the rebalancer reads. */
export const REBALANCER_READS = ['nodes', 'heartbeats', 'drains', 'desired', 'observed', 'volumes', 'disruptions', 'commands'] as const satisfies readonly Watchable[];

/** The cycle's snapshot: the cache's contents plus each node's fresh pressure sample (StateBackedSource). */
export function snapshotOf(cache: Cache, now: number, config: Pick<Config, 'freshnessIntervals'>): Snapshot {
  const heartbeats = valuesByRest(cache.kind<Heartbeat>('heartbeats'));
  return {
    samples: new StateBackedSource(() => heartbeats.values(), config.freshnessIntervals).samples(now),
    nodes: [...cache.kind<Node>('nodes').items.values()].map((n) => n.value),
    heartbeats,
    drains: valuesByRest(cache.kind<NodeDrain>('drains')),
    replicas: cache.index(REPLICAS),
    ledgers: byRest(cache.kind<DisruptionLedger>('disruptions')),
    commands: cache.kind<ReplicaCommand>('commands').items,
    volumeHomes: [...cache.kind<VolumeHome>('volumes').items.values()].map((v) => v.value),
    eligibility: eligibilityRevisions(cache),
  };
}
