// What the rebalancer reads, and how its snapshot is built from stored objects: one function for
// the shell (informer contents) and for `jaco rebalance plan` recomputing from a store read.
import { informersFor } from '../../src/runtime/informers.js';
import type { Heartbeat, Node, NodeDrain, ReplicaDesired, ReplicaObserved, VolumeHome } from '../../src/api/types.js';
import type { Versioned } from '../../src/store/store.js';
import type { Config } from './config.js';
import type { Snapshot } from './decide.js';
import { StateBackedSource } from './pressure.js';

/** The prefixes the rebalancer watches (its informers), and what `plan` reads without a leader. */
export const REBALANCER_INFORMERS = informersFor('nodes', 'heartbeats', 'drains', 'desired', 'observed', 'volumes');

export interface StoredObjects {
  nodes: Iterable<Versioned<Node>>;
  heartbeats: Iterable<Versioned<Heartbeat>>;
  drains: Iterable<Versioned<NodeDrain>>;
  desired: Iterable<Versioned<ReplicaDesired>>;
  observed: Iterable<Versioned<ReplicaObserved>>;
  volumes: Iterable<Versioned<VolumeHome>>;
}

const rest = (prefix: string, key: string) => key.slice(prefix.length);

/** The cycle's snapshot: stored objects plus each node's fresh pressure sample (StateBackedSource). */
export function snapshotOf(o: StoredObjects, now: number, config: Pick<Config, 'freshnessIntervals'>): Snapshot {
  const P = REBALANCER_INFORMERS;
  const heartbeats = new Map([...o.heartbeats].map((h) => [rest(P.heartbeats.prefix, h.key), h.value]));
  return {
    samples: new StateBackedSource(() => heartbeats.values(), config.freshnessIntervals).samples(now),
    nodes: [...o.nodes].map((n) => n.value),
    heartbeats,
    drains: new Map([...o.drains].map((d) => [rest(P.drains.prefix, d.key), d.value])),
    desired: [...o.desired].map((d) => ({ key: d.key, modRevision: d.modRevision, value: d.value })),
    observed: new Map([...o.observed].map((x) => [rest(P.observed.prefix, x.key), x.value])),
    volumeHomes: [...o.volumes].map((v) => v.value),
  };
}
