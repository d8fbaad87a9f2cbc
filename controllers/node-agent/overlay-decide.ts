// The overlay's pure core (docs/networking.md, "Between nodes: the WireGuard overlay"): the WireGuard full mesh as this node
// should hold it — a peer for every other node that publishes a key and an endpoint and has
// subnets, allowed its subnets, which are routed over the interface — against what the interface
// holds now, and the `wg`/`ip` steps between the two. Level-triggered like every pass: the same
// nodes, subnets and interface give the same steps, whatever woke it. overlay.ts observes the
// interface and carries the steps out; nothing here runs a command or reads a clock.
import { isIPv4 } from 'node:net';
import { canonicalCidr, gatewayOf, parseCidr } from '../../src/api/network.js';
import { PEER_SKIPS, type OverlayDown, type PeerSkip } from '../../src/api/reasons/overlay.js';
import type { Node, NodeSubnet } from '../../src/api/types.js';
import { canonicalEndpoint, type InterfaceState, type ObservedRoute } from './overlay-observe.js';

export const DEFAULT_OVERLAY_PORT = 51820;
export const DEFAULT_OVERLAY_INTERFACE = 'jaco-wg';
/** 1500 less WireGuard's worst case (IPv6 outer header 40 + UDP 8 + WireGuard 32): fits any 1500-byte link. */
export const OVERLAY_MTU = 1420;
/**
 * Every peer is kept alive every 25 s (WireGuard's own recommendation): handshakes then happen
 * whether or not replicas talk, so the age of a peer's latest handshake says whether it is reachable.
 * With fast timings every 5 s, so a test can judge a cut overlay in seconds (a max age of 15 s).
 */
export const KEEPALIVE_SEC = { production: 25, fast: 5 } as const;
/** WireGuard renews a session every 120 s while packets flow (keepalives do): older than this, a peer is not answering. */
export const STALE_HANDSHAKE_SEC = 180;
/** The routing protocol number the overlay's routes carry: the ones it may replace or delete, and no one else's. */
export const OVERLAY_ROUTE_PROTO = '106';

/** What this node's overlay is: its interface, port, MTU, key. */
export interface OverlaySettings {
  interface: string;
  port: number;
  mtu: number;
  keepaliveSec: number;
  /** The private key's file (wg reads it there: the key is never on a command line). */
  keyFile: string;
  /** The public half of this node's key. */
  publicKey: string;
}

/** A node as the overlay sees it: its published overlay and its subnets. */
export interface OverlayNode {
  name: string;
  overlay?: { publicKey: string; endpoint: string };
  subnets?: { ipv4: string; ipv6: string };
}

/** A peer this node should have. */
export interface Peer {
  node: string;
  publicKey: string;
  endpoint: string;
  /** Its subnets, canonical: IPv4 then IPv6. */
  allowedIps: string[];
}

export interface SkippedNode {
  node: string;
  reason: PeerSkip;
}

export interface OverlaySnapshot {
  /** This node. */
  node: string;
  settings: OverlaySettings;
  /** Every node of nodes/, with its subnets from subnets/ (this one included). */
  nodes: ReadonlyMap<string, OverlayNode>;
  /** The interface as last observed (undefined: not yet). */
  iface?: InterfaceState;
}

/** One thing to do to the interface: make it, or one `wg`/`ip` invocation (its arguments after the program). */
export type OverlayStep = { op: 'create'; why: string } | { op: 'wg' | 'ip'; args: string[]; why: string };

export interface OverlayHealth {
  up: boolean;
  reason?: OverlayDown;
  interface: string;
  /** The interface's kind: wireguard (kernel) or tun (wireguard-go). */
  kind?: string;
  listenPort?: number;
  peers: { expected: number; configured: number };
  /** Nodes that should be peers and are not (or whose subnets are not routed). */
  missing: string[];
  /** Configured peers with no handshake yet, and with none for longer than STALE_HANDSHAKE_SEC. */
  noHandshake: string[];
  stale: string[];
  /** Steps still to carry out. */
  pending: number;
}

/** Per configured peer, for the metrics. */
export interface PeerStats {
  node: string;
  /** Seconds since its latest handshake; undefined: none yet. */
  handshakeAgeSec?: number;
  rxBytes: number;
  txBytes: number;
}

export interface OverlayPlan {
  peers: Peer[];
  skipped: SkippedNode[];
  steps: OverlayStep[];
  health: OverlayHealth;
  stats: PeerStats[];
}

// ---------------------------------------------------------------- the nodes

/** The overlay's view of nodes/ and subnets/: each Node with its subnets. */
export function overlayNodes(nodes: Iterable<Node>, subnets: Iterable<NodeSubnet>): Map<string, OverlayNode> {
  const sub = new Map([...subnets].map((s) => [s.spec.node, { ipv4: s.spec.ipv4, ipv6: s.spec.ipv6 }]));
  const out = new Map<string, OverlayNode>();
  for (const n of nodes) {
    const name = n.metadata.name;
    const overlay = n.status?.overlay;
    const s = sub.get(name);
    out.set(name, { name, ...(overlay ? { overlay: { publicKey: overlay.publicKey, endpoint: overlay.endpoint } } : {}), ...(s ? { subnets: s } : {}) });
  }
  return out;
}

/** A WireGuard key: 32 bytes in standard base64 (44 characters, one `=`). */
export function isWireGuardKey(k: string): boolean {
  return /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/.test(k);
}

function subnetsOf(s: OverlayNode['subnets']): string[] | undefined {
  if (!s) return undefined;
  try {
    if (parseCidr(s.ipv4).family !== 4 || parseCidr(s.ipv6).family !== 6) return undefined;
    return [canonicalCidr(s.ipv4, { bare: true }), canonicalCidr(s.ipv6, { bare: true })];
  } catch {
    return undefined;
  }
}

/**
 * The peers of `self`: every other node with a valid published key and endpoint and valid subnets,
 * by name. Two nodes with one key: the first by name is the peer (WireGuard keys a peer by it).
 */
export function peersOf(self: string, ownPublicKey: string, nodes: ReadonlyMap<string, OverlayNode>): { peers: Peer[]; skipped: SkippedNode[] } {
  const peers: Peer[] = [];
  const skipped: SkippedNode[] = [];
  const keys = new Set<string>();
  for (const n of [...nodes.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    if (n.name === self) continue;
    const skip = (reason: PeerSkip) => skipped.push({ node: n.name, reason });
    if (!n.overlay) {
      skip('no_overlay');
      continue;
    }
    if (!n.subnets) {
      skip('no_subnets');
      continue;
    }
    const { publicKey } = n.overlay;
    const endpoint = canonicalEndpoint(n.overlay.endpoint);
    const allowedIps = subnetsOf(n.subnets);
    if (!isWireGuardKey(publicKey)) skip('bad_key');
    else if (!endpoint) skip('bad_endpoint');
    else if (!allowedIps) skip('bad_subnets');
    else if (publicKey === ownPublicKey) skip('own_key');
    else if (keys.has(publicKey)) skip('duplicate_key');
    else {
      keys.add(publicKey);
      peers.push({ node: n.name, publicKey, endpoint, allowedIps });
    }
  }
  return { peers, skipped };
}

// ---------------------------------------------------------------- the interface

/** What the interface should hold besides its peers: this node's gateway addresses and a route per peer subnet. */
export interface DesiredInterface {
  /** The first host of each of this node's subnets (/32, /128): the node's own source on the overlay. */
  addresses: string[];
  routes: ObservedRoute[];
}

export function desiredInterface(self: OverlayNode | undefined, peers: readonly Peer[]): DesiredInterface {
  const own = subnetsOf(self?.subnets) ?? [];
  const gateways = own.map((s) => gatewayOf(s));
  const addresses = gateways.map((g) => canonicalCidr(g, { bare: true }));
  // Traffic the node itself sends over the overlay (its ingress to a replica elsewhere) leaves from
  // its own subnet: the far end accepts only sources in this node's allowed IPs.
  const srcOf = (dst: string) => gateways.find((g) => isIPv4(g) === isIPv4(dst.slice(0, dst.indexOf('/'))));
  const routes = peers.flatMap((p) => p.allowedIps.map((dst) => ({ dst, ...(srcOf(dst) ? { src: srcOf(dst)! } : {}) })));
  return { addresses, routes };
}

const EMPTY: InterfaceState = { exists: false, wireguard: true, up: false, addresses: [], peers: [], routes: [] };
const sameSet = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join() === [...b].sort().join();

/**
 * The steps from the interface as it is to the interface as it should be, in the order they can
 * run: make it; key and port; MTU; addresses; up; peers (one `wg set`: removals, then additions and
 * changes); routes (replaced, then the overlay's own routes nothing wants deleted). An interface of
 * that name that is not WireGuard is left alone (no steps).
 */
export function overlaySteps(s: OverlaySettings, desired: DesiredInterface, peers: readonly Peer[], observed: InterfaceState): OverlayStep[] {
  const steps: OverlayStep[] = [];
  const dev = s.interface;
  if (observed.exists && !observed.wireguard) return [];
  const cur = observed.exists ? observed : EMPTY;
  const ip = (why: string, ...args: string[]) => steps.push({ op: 'ip', args, why });
  if (!observed.exists) steps.push({ op: 'create', why: `no interface ${dev}` });
  if (cur.publicKey !== s.publicKey || cur.listenPort !== s.port)
    steps.push({ op: 'wg', args: ['set', dev, 'private-key', s.keyFile, 'listen-port', String(s.port)], why: cur.publicKey !== s.publicKey ? "the node's key" : `listen port ${s.port}` });
  if (cur.mtu !== s.mtu) ip(`MTU ${s.mtu}`, 'link', 'set', 'dev', dev, 'mtu', String(s.mtu));
  for (const a of desired.addresses) if (!cur.addresses.includes(a)) ip(`the node's own address ${a}`, 'addr', 'replace', a, 'dev', dev);
  for (const a of cur.addresses) if (!desired.addresses.includes(a)) ip(`${a} is not the node's any more`, 'addr', 'del', a, 'dev', dev);
  if (!cur.up) ip('bring it up', 'link', 'set', 'dev', dev, 'up');

  const wanted = new Map(peers.map((p) => [p.publicKey, p]));
  const peerArgs: string[] = [];
  const changed: string[] = [];
  for (const o of cur.peers)
    if (!wanted.has(o.publicKey)) {
      peerArgs.push('peer', o.publicKey, 'remove');
      changed.push(`remove ${o.publicKey.slice(0, 8)}…`);
    }
  const held = new Map(cur.peers.map((o) => [o.publicKey, o]));
  for (const p of peers) {
    const o = held.get(p.publicKey);
    if (o && o.endpoint === p.endpoint && sameSet(o.allowedIps, p.allowedIps) && o.keepaliveSec === s.keepaliveSec) continue;
    peerArgs.push('peer', p.publicKey, 'endpoint', p.endpoint, 'allowed-ips', p.allowedIps.join(','), 'persistent-keepalive', String(s.keepaliveSec));
    changed.push(`${o ? 'update' : 'add'} ${p.node}`);
  }
  if (peerArgs.length) steps.push({ op: 'wg', args: ['set', dev, ...peerArgs], why: `peers: ${changed.join(', ')}` });

  const routed = new Map(cur.routes.map((r) => [r.dst, r]));
  for (const r of desired.routes) {
    const o = routed.get(r.dst);
    if (o && o.src === r.src) continue;
    ip(`route ${r.dst}`, 'route', 'replace', r.dst, 'dev', dev, 'proto', OVERLAY_ROUTE_PROTO, ...(r.src ? ['src', r.src] : []));
  }
  const keep = new Set(desired.routes.map((r) => r.dst));
  for (const r of cur.routes) if (!keep.has(r.dst)) ip(`no peer holds ${r.dst} any more`, 'route', 'del', r.dst, 'dev', dev, 'proto', OVERLAY_ROUTE_PROTO);
  return steps;
}

// ---------------------------------------------------------------- health

export function overlayHealth(s: OverlaySettings, peers: readonly Peer[], observed: InterfaceState | undefined, pending: number, nowMs: number): { health: OverlayHealth; stats: PeerStats[] } {
  const base = { interface: s.interface, pending };
  const down = (reason: OverlayDown, configured = 0, missing = peers.map((p) => p.node)) => ({
    health: { ...base, up: false, reason, ...(observed?.kind ? { kind: observed.kind } : {}), peers: { expected: peers.length, configured }, missing, noHandshake: [], stale: [] },
    stats: [],
  });
  if (!observed) return down('not_observed');
  if (!observed.exists) return down('no_interface');
  if (!observed.wireguard) return down('not_wireguard');
  const held = new Map(observed.peers.map((o) => [o.publicKey, o]));
  const routed = new Set(observed.routes.map((r) => r.dst));
  const missing: string[] = [];
  const stats: PeerStats[] = [];
  const noHandshake: string[] = [];
  const stale: string[] = [];
  const nowSec = Math.floor(nowMs / 1000);
  for (const p of peers) {
    const o = held.get(p.publicKey);
    if (!o || !sameSet(o.allowedIps, p.allowedIps) || !p.allowedIps.every((a) => routed.has(a))) {
      missing.push(p.node);
      continue;
    }
    const age = o.latestHandshake ? Math.max(0, nowSec - o.latestHandshake) : undefined;
    if (age === undefined) noHandshake.push(p.node);
    else if (age > STALE_HANDSHAKE_SEC) stale.push(p.node);
    stats.push({ node: p.node, ...(age !== undefined ? { handshakeAgeSec: age } : {}), rxBytes: o.rxBytes, txBytes: o.txBytes });
  }
  const keyed = observed.publicKey === s.publicKey && observed.listenPort === s.port;
  const health: OverlayHealth = {
    ...base,
    up: keyed && !missing.length,
    ...(!keyed ? { reason: 'key_not_set' as const } : missing.length ? { reason: 'peers_missing' as const } : {}),
    ...(observed.kind ? { kind: observed.kind } : {}),
    ...(observed.listenPort ? { listenPort: observed.listenPort } : {}),
    peers: { expected: peers.length, configured: peers.length - missing.length },
    missing,
    noHandshake,
    stale,
  };
  return { health, stats };
}

// ---------------------------------------------------------------- the pass

/** The whole decision: peers, the steps to take the interface there, and how it stands. */
export function decideOverlay(snap: OverlaySnapshot, nowMs: number): OverlayPlan {
  const { peers, skipped } = peersOf(snap.node, snap.settings.publicKey, snap.nodes);
  const desired = desiredInterface(snap.nodes.get(snap.node), peers);
  const steps = snap.iface ? overlaySteps(snap.settings, desired, peers, snap.iface) : [];
  const { health, stats } = overlayHealth(snap.settings, peers, snap.iface, steps.length, nowMs);
  return { peers, skipped, steps, health, stats };
}

/** Why each skipped node is no peer, in words (the agent's log). */
export const skipWhy = (s: SkippedNode) => `${s.node}: ${PEER_SKIPS[s.reason]}`;
