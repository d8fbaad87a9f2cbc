// IPAM at placement (seed 004 §4, placement step 5; docs/networking.md): every node has subnets of
// the cluster network (subnets/<node>, its index claimed by subnetindex/<n>), and a cluster-network
// replica copy gets a host number of its node's subnets — the same in both families — claimed by
// addresses/<node>/<n> in the very transaction that places it: no two copies ever share an address,
// by the store's word rather than by luck. A claim outlives its desired key while a container may
// still hold the address (its node still reports the replica with it), and is released after.
// Pure: the scheduler and the movers call these with their snapshots.
import { keys } from '../../src/api/keys.js';
import { hostNumbers, nodeSubnets, replicaAddress, serviceAddress, serviceAddressCount, subnetCount, type NetworkConfigSpec } from '../../src/api/network.js';
import { API_VERSION, type AddressClaim, type NodeSubnet, type ReplicaAddress, type ReplicaDesired, type ReplicaObserved, type ServiceAddress, type ServiceAddressClaim, type SubnetIndexClaim } from '../../src/api/types.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';

/** What a controller's snapshot holds of the cluster network. */
export interface NetworkView {
  config?: NetworkConfigSpec;
  /** By node name. */
  subnets: ReadonlyMap<string, Versioned<NodeSubnet>>;
  /** By store key (addresses/<node>/<n>). */
  claims: ReadonlyMap<string, Versioned<AddressClaim>>;
  /** Service addresses by `<deployment>/<service>` (the scheduler's view only). */
  services?: ReadonlyMap<string, Versioned<ServiceAddress>>;
}

export const EMPTY_NETWORK: NetworkView = { subnets: new Map(), claims: new Map() };

/** Host numbers claimed on each node. */
export function claimedByNode(claims: ReadonlyMap<string, Versioned<AddressClaim>>): Map<string, Set<number>> {
  const out = new Map<string, Set<number>>();
  for (const [key, c] of claims) {
    const n = Number(key.slice(key.lastIndexOf('/') + 1));
    if (!Number.isInteger(n)) continue;
    let s = out.get(c.value.spec.node);
    if (!s) out.set(c.value.spec.node, (s = new Set()));
    s.add(n);
  }
  return out;
}

const iso = (t: number) => new Date(t).toISOString();

/**
 * A free host number of a node's subnets for a replica: the first not taken from a point derived
 * from the replica id, so a number freed a moment ago is not the next one handed out (as
 * assignHostPorts does for ports). Undefined when every one is taken.
 */
export function chooseAddress(replica: string, subnets: { ipv4: string; ipv6: string }, taken: ReadonlySet<number>): { address: ReplicaAddress; hostNumber: number } | undefined {
  const { first, last } = hostNumbers(subnets.ipv4);
  const size = last - first + 1;
  const start = startOf(replica) % size;
  for (let k = 0; k < size; k++) {
    const n = first + ((start + k) % size);
    if (!taken.has(n)) return { address: replicaAddress(subnets, n), hostNumber: n };
  }
  return undefined;
}

/** 32-bit FNV-1a of the replica id: where its search starts. */
function startOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The claim of an address given at placement, to create in the placement's act. */
export function addressClaimOp(d: Pick<ReplicaDesired['spec'], 'node' | 'replica' | 'deployment' | 'service'>, given: { address: ReplicaAddress; hostNumber: number }, now: number): Op {
  const value: AddressClaim = {
    apiVersion: API_VERSION,
    kind: 'AddressClaim',
    metadata: { name: `${d.node}.${given.hostNumber}` },
    spec: { node: d.node, replica: d.replica, deployment: d.deployment, service: d.service, ipv4: given.address.ipv4, ipv6: given.address.ipv6, since: iso(now) },
  };
  return { op: 'create', key: keys.address(d.node, given.hostNumber), value };
}

/** A subnet the scheduler gives a node: its two keys, created together. */
export interface SubnetGrant {
  node: string;
  subnet: NodeSubnet;
  ops: Op[];
}

/**
 * Subnets for the nodes that have none: the lowest free indexes, nodes in name order
 * (deterministic). Nodes past the cluster's capacity of subnets get none (the ipam filter then
 * says so for them).
 */
export function subnetsToGive(nodes: Iterable<string>, view: NetworkView, now: number): SubnetGrant[] {
  if (!view.config) return [];
  const used = new Set([...view.subnets.values()].map((s) => s.value.spec.index));
  const capacity = subnetCount(view.config);
  const out: SubnetGrant[] = [];
  let next = 0;
  for (const node of [...nodes].filter((n) => !view.subnets.has(n)).sort()) {
    while (used.has(next)) next++;
    if (next >= capacity) break;
    const { ipv4, ipv6 } = nodeSubnets(view.config, next);
    const subnet: NodeSubnet = { apiVersion: API_VERSION, kind: 'NodeSubnet', metadata: { name: node }, spec: { node, index: next, ipv4, ipv6, since: iso(now) } };
    const claim: SubnetIndexClaim = { apiVersion: API_VERSION, kind: 'SubnetIndexClaim', metadata: { name: String(next) }, spec: { node } };
    out.push({ node, subnet, ops: [{ op: 'create', key: keys.subnet(node), value: subnet }, { op: 'create', key: keys.subnetIndex(next), value: claim }] });
    used.add(next);
  }
  return out;
}

/** What may still hold an address: a node's desired copies and what its agent reports. */
export interface Holders {
  /** Whether the node is still in the cluster (nodes/<node>): a removed node's containers are gone with it. */
  nodeExists(node: string): boolean;
  /** Whether a desired copy on the node carries the address (CIDR, as claims and specs write it). */
  carried(node: string, ipv4: string): boolean;
  observed(node: string, replica: string): ReplicaObserved | undefined;
}

/**
 * Claims no copy holds any more: no desired copy of the replica on the node carries the address,
 * and its node's agent reports no container of it that may (none at all, or one with another
 * address). On a node that is NotReady nothing is known: its observed records stay, and so do
 * its claims. A removed node's claims all go.
 */
export function releasableClaims(view: NetworkView, h: Holders): Versioned<AddressClaim>[] {
  const out: Versioned<AddressClaim>[] = [];
  for (const c of view.claims.values()) {
    const spec = c.value.spec;
    // The common case first and cheapest: the copy it was given to still carries it.
    if (h.carried(spec.node, spec.ipv4)) continue;
    if (!h.nodeExists(spec.node)) {
      out.push(c);
      continue;
    }
    const o = h.observed(spec.node, spec.replica)?.status;
    if (o && (!o.address || o.address.ipv4 === spec.ipv4)) continue;
    out.push(c);
  }
  return out.length > 1 ? out.sort((a, b) => (a.key < b.key ? -1 : 1)) : out;
}

/** Subnets of nodes that left the cluster and hold no claim any more: their keys, to delete. */
export function releasableSubnets(view: NetworkView, nodeExists: (node: string) => boolean, releasing: ReadonlySet<string>): Versioned<NodeSubnet>[] {
  const gone = [...view.subnets.values()].filter((s) => !nodeExists(s.value.spec.node));
  if (!gone.length) return [];
  const claimed = new Set([...view.claims.values()].filter((c) => !releasing.has(c.key)).map((c) => c.value.spec.node));
  return gone.filter((s) => !claimed.has(s.value.spec.node)).sort((a, b) => (a.key < b.key ? -1 : 1));
}

/**
 * A service's address: a free number of the service range from a point derived from its name
 * (deterministic; `taken` holds the numbers in use, this pass's included), with the two keys to
 * create together. Undefined when the range is full.
 */
export function serviceAddressFor(cfg: NetworkConfigSpec, deployment: string, service: string, taken: Set<number>, now: number, aliases: readonly string[] = []): { value: ServiceAddress; ops: Op[] } | undefined {
  const count = serviceAddressCount(cfg);
  const start = startOf(`${deployment}/${service}`) % count;
  for (let k = 0; k < count; k++) {
    const n = 1 + ((start + k) % count);
    if (taken.has(n)) continue;
    taken.add(n);
    const a = serviceAddress(cfg, n);
    const value: ServiceAddress = { apiVersion: API_VERSION, kind: 'ServiceAddress', metadata: { name: `${deployment}-${service}` }, spec: { deployment, service, number: n, ipv4: a.ipv4, ipv6: a.ipv6, since: iso(now), ...(aliases.length ? { aliases: [...aliases] } : {}) } };
    const claim: ServiceAddressClaim = { apiVersion: API_VERSION, kind: 'ServiceAddressClaim', metadata: { name: String(n) }, spec: { deployment, service } };
    return { value, ops: [{ op: 'create', key: keys.serviceAddress(deployment, service), value }, { op: 'create', key: keys.serviceAddressNumber(n), value: claim }] };
  }
  return undefined;
}
