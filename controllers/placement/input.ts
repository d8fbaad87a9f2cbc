// The one builder of a placer from stored state, so every controller that places or moves
// (scheduler, drain, rebalancer) sees nodes, their eligibility and their occupancy the same way.
import { nodeLabels, unschedulableBecause } from '../../src/api/nodes.js';
import { keys } from '../../src/api/keys.js';
import { hostPortList } from '../../src/api/ports.js';
import type { AddressClaim, Heartbeat, NetworkConfig, Node, NodeDrain, NodeSettings, NodeSettingsSpec, NodeSubnet, ReplicaCommand, ReplicaDesired, ServiceAddress, VolumeHome } from '../../src/api/types.js';
import { degradedBecause, nodeConditions, resolveNodeSettings, restartCountsAgainstNode, type NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { Versioned } from '../../src/store/store.js';
import type { Cache } from '../../src/runtime/cache.js';
import type { ReplicaIndex } from '../../src/runtime/replicas.js';
import type { Op } from '../../src/store/writer.js';
import { DEFAULT_PLACEMENT_CONFIG, footprintOf, Placer, type NodeInfo, type PlacedReplica, type PlacementConfig, type PlacementInput } from './placer.js';
import { claimedByNode, type NetworkView } from './ipam.js';

export interface StoredState {
  nodes: Iterable<Node>;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  desired: Iterable<ReplicaDesired>;
  volumeHomes: Iterable<VolumeHome>;
  /** Restart bookkeeping by store key (commands/<host>/<replica>): recent failures per node. */
  commands?: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** The cluster network: each node's subnets and the addresses claimed (IPAM, ipam.ts). */
  network?: NetworkView;
  /** The cluster's node-eligibility settings (config/nodes); absent: the defaults. */
  settings?: NodeSettingsResolved;
}

/** Restarts within this long before now count against a node (seed 004: failure de-prioritization). */
export const RECENT_FAILURE_WINDOW_MS = 10 * 60_000;

/**
 * Per node, the health restarts of its replicas whose last restart is recent: each replica counts
 * its consecutive restarts (cleared once it is ready again), so a node where replicas keep
 * failing scores lower for new placements, and one that recovered stops counting. A restart
 * ordered for an act outside jaco (docker rm, docker pause) is not the node's failure.
 */
export function recentFailuresOf(commands: ReadonlyMap<string, Versioned<ReplicaCommand>> | undefined, now: number): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, c] of commands ?? []) {
    const st = c.value.status;
    if (!restartCountsAgainstNode(st, RECENT_FAILURE_WINDOW_MS, now)) continue;
    const host = key.split('/')[1]!;
    out.set(host, (out.get(host) ?? 0) + st.restarts);
  }
  return out;
}

/** What a controller's snapshot holds that a placer is built from. */
export interface PlacementView {
  nodes: Iterable<Node>;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  replicas: ReplicaIndex;
  volumeHomes: Iterable<VolumeHome>;
  commands?: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  network?: NetworkView;
  settings?: NodeSettingsResolved;
}

/**
 * The mod revisions of the keys a node's eligibility was judged from — `nodes/<host>` (capacity,
 * its agent's labels), `nodespecs/<host>` (cordon, runtime labels, trust) and `drains/<host>` — by
 * store key; a key absent from the map is absent.
 */
export type EligibilityRevisions = ReadonlyMap<string, number>;

export function eligibilityRevisions(cache: Cache): EligibilityRevisions {
  const out = new Map<string, number>();
  for (const kind of ['nodes', 'nodespecs', 'drains'] as const) {
    const source = cache.kind(kind);
    for (const v of source.items.values()) out.set(v.key, v.modRevision);
    // A key whose newest value is unreadable is at that value's revision (the guard must hold against it).
    for (const u of source.unreadable.values()) out.set(u.key, u.modRevision);
  }
  return out;
}

/**
 * Preconditions for an act that puts a replica on `host`: the node, node spec and drain keys are as
 * they were judged, so a cordon or drain that lands between the decision and the commit refuses the
 * act (the next pass decides again) instead of a replica landing on a node that is leaving.
 */
export function eligibilityGuard(revisions: EligibilityRevisions, host: string): Op[] {
  return [keys.node(host), keys.nodeSpec(host), keys.drain(host)].map((key) => ({ op: 'check', key, modRevision: revisions.get(key) ?? 0 }));
}

/**
 * The cluster's node-eligibility settings as a cache holds them (config/nodes), defaults filled
 * in. A stored value the CLI validated cannot fail here; one that somehow does is read as the
 * defaults (the reader logs nothing: `jaco node settings` shows the error).
 */
export function nodeSettingsOf(cache: Cache): NodeSettingsResolved {
  const spec: NodeSettingsSpec | undefined = cache.holds('nodeSettings') ? [...cache.kind<NodeSettings>('nodeSettings').items.values()][0]?.value.spec : undefined;
  try {
    return resolveNodeSettings(spec);
  } catch {
    return resolveNodeSettings(undefined);
  }
}

/** The cluster network as a cache holds it (the sources network, subnets and addresses). */
export function networkViewOf(cache: Cache): NetworkView {
  const config = [...cache.kind<NetworkConfig>('network').items.values()][0]?.value.spec;
  const subnets = cache.kind<NodeSubnet>('subnets');
  return {
    ...(config ? { config } : {}),
    subnets: new Map([...subnets.items.values()].map((v) => [v.value.spec.node, v])),
    claims: cache.kind<AddressClaim>('addresses').items,
    ...(cache.holds('serviceAddresses') ? { services: new Map([...cache.kind<ServiceAddress>('serviceAddresses').items.values()].map((v) => [`${v.value.spec.deployment}/${v.value.spec.service}`, v])) } : {}),
  };
}

function* desiredOf(replicas: ReplicaIndex): Generator<ReplicaDesired> {
  for (const e of replicas.byId.values()) for (const c of e.copies) yield c.desired;
}

/** A placer with every desired copy accounted on its node (both copies of a moving replica). */
export function placerFor(v: PlacementView, now: number, config: PlacementConfig = DEFAULT_PLACEMENT_CONFIG): Placer {
  return new Placer(placementInputFrom({ nodes: v.nodes, heartbeats: v.heartbeats, drains: v.drains, desired: desiredOf(v.replicas), volumeHomes: v.volumeHomes, commands: v.commands, network: v.network, settings: v.settings }, now), config);
}

// Parsing the quantities of every desired key on every pass is most of building the input: the
// answer for a stored object never changes (informers replace objects, they never mutate them).
const placedOf = new WeakMap<ReplicaDesired, PlacedReplica>();

/**
 * What a desired key occupies on its node. A replica preemption stopped occupies nothing: freeing
 * it is the point (the scheduler places it again when it fits). One a forced drain stopped occupies
 * all it had: it resumes where it is — its data is there — as soon as its node is uncordoned, and
 * nothing else may be placed into its memory, its fixed ports or its volume meanwhile (the drain
 * cordons the node while it is stopped, so this only matters once the node takes placements again).
 */
export function placedReplicaOf(d: ReplicaDesired): PlacedReplica | undefined {
  if (d.spec.suspended && d.spec.suspended.reason !== 'node_drained') return undefined;
  let p = placedOf.get(d);
  // Assigned dynamic host ports occupy the node like fixed ones.
  if (!p) placedOf.set(d, (p = { id: d.spec.replica, deployment: d.spec.deployment, service: d.spec.service, node: d.spec.node, ...footprintOf(d.spec.template), ports: hostPortList(d.spec) }));
  return p;
}

export function placementInputFrom(s: StoredState, now: number): PlacementInput {
  const settings = s.settings ?? resolveNodeSettings(undefined);
  const desired = [...s.desired];
  const nodes = nodeInfosOf(s, serviceOfReplica(desired), now);
  const placed: PlacedReplica[] = [];
  for (const d of desired) {
    const p = placedReplicaOf(d);
    if (p) placed.push(p);
  }
  const volumeHomes: Record<string, string> = {};
  for (const v of s.volumeHomes) volumeHomes[`${v.spec.deployment}/${v.spec.volume}`] = v.spec.node;
  return { nodes, placed, volumeHomes, defaultDiskBytes: settings.defaultDiskBytes, ...(s.network ? { claimed: claimedByNode(s.network.claims) } : {}) };
}

/** "<deployment>/<service>" of a replica id, from the desired keys (a replica restarted but since removed counts as itself). */
export function serviceOfReplica(desired: Iterable<ReplicaDesired>): (replica: string) => string | undefined {
  const m = new Map<string, string>();
  for (const d of desired) m.set(d.spec.replica, `${d.spec.deployment}/${d.spec.service}`);
  return (r) => m.get(r);
}

/**
 * Every node as the placer sees it at `now`: capacity, labels, eligibility, whether it is
 * degraded (src/api/eligibility.ts), recent failures, subnets. `serviceOf` names a replica's
 * "<deployment>/<service>" (failures across several services degrade a node).
 */
export function nodeInfosOf(s: Pick<StoredState, 'nodes' | 'heartbeats' | 'drains' | 'commands' | 'network' | 'settings'>, serviceOf: (replica: string) => string | undefined, now: number): NodeInfo[] {
  const failures = recentFailuresOf(s.commands, now);
  const settings = s.settings ?? resolveNodeSettings(undefined);
  const nodes = [...s.nodes];
  const conditions = nodeConditions({ nodes, heartbeats: s.heartbeats, commands: s.commands, serviceOf, settings }, now);
  return nodes.map((n) => ({
    name: n.metadata.name,
    capacity: n.status?.capacity ?? { cpuMillis: 0, memoryBytes: 0, gpus: 0 },
    labels: nodeLabels(n),
    ineligible: unschedulableBecause(n, s.heartbeats.get(n.metadata.name), s.drains.get(n.metadata.name)),
    degraded: degradedBecause(conditions.get(n.metadata.name)!),
    ...(n.status?.portRange ? { portRange: n.status.portRange } : {}),
    ...(failures.get(n.metadata.name) ? { recentFailures: failures.get(n.metadata.name) } : {}),
    ...subnetsOf(s.network, n.metadata.name),
  }));
}

function subnetsOf(network: NetworkView | undefined, node: string): { subnets?: { ipv4: string; ipv6: string } } {
  const s = network?.subnets.get(node)?.value.spec;
  return s ? { subnets: { ipv4: s.ipv4, ipv6: s.ipv6 } } : {};
}
