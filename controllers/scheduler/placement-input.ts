// Builds the placement core's input from stored objects, so every controller that places or
// moves (scheduler, drain, rebalancer) sees nodes and their occupancy the same way.
import { unschedulableBecause } from '../../src/api/nodes.js';
import type { Heartbeat, Node, NodeDrain, ReplicaDesired, VolumeHome } from '../../src/api/types.js';
import { footprintOf, type PlacedReplica, type PlacementInput } from './placement.js';

export interface StoredState {
  nodes: Iterable<Node>;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  desired: Iterable<ReplicaDesired>;
  volumeHomes: Iterable<VolumeHome>;
}

// Parsing the quantities of every desired key on every pass is most of building the input: the
// answer for a stored object never changes (informers replace objects, they never mutate them).
const placedOf = new WeakMap<ReplicaDesired, PlacedReplica>();

/** What a desired key occupies on its node; a suspended replica (stopped by a forced drain) occupies nothing. */
export function placedReplicaOf(d: ReplicaDesired): PlacedReplica | undefined {
  if (d.spec.suspended) return undefined;
  let p = placedOf.get(d);
  if (!p) placedOf.set(d, (p = { id: d.spec.replica, deployment: d.spec.deployment, service: d.spec.service, node: d.spec.node, ...footprintOf(d.spec.template) }));
  return p;
}

export function placementInputFrom(s: StoredState, now: number): PlacementInput {
  const nodes = [...s.nodes].map((n) => ({
    name: n.metadata.name,
    capacity: n.status?.capacity ?? { cpuMillis: 0, memoryBytes: 0, gpus: 0 },
    labels: n.metadata.labels ?? {},
    ineligible: unschedulableBecause(n, s.heartbeats.get(n.metadata.name), s.drains.get(n.metadata.name), now),
  }));
  const placed: PlacedReplica[] = [];
  for (const d of s.desired) {
    const p = placedReplicaOf(d);
    if (p) placed.push(p);
  }
  const volumeHomes: Record<string, string> = {};
  for (const v of s.volumeHomes) volumeHomes[`${v.spec.deployment}/${v.spec.volume}`] = v.spec.node;
  return { nodes, placed, volumeHomes };
}
