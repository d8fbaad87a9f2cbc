// What the overlay's WireGuard interface holds now, read from the tools' own output: `wg show <if>
// dump` (key, port, peers with their handshakes and counters), `ip -j -d addr show dev <if>` (the
// link: kind, up, MTU, addresses) and `ip -j route show dev <if> proto <ours>` (the routes the
// overlay made). Pure parsing; overlay.ts runs the commands. The private key `wg show dump` prints
// first is dropped here and never kept.
import { isIPv4, isIPv6 } from 'node:net';
import { bareAddress, canonicalCidr, joinHostPort, splitHostPort } from '../../src/api/network.js';

export interface ObservedPeer {
  publicKey: string;
  /** host:port as wg prints it (IPv6 in brackets); absent while none is known. */
  endpoint?: string;
  /** Canonical CIDRs (canonicalCidr), in wg's order. */
  allowedIps: string[];
  /** Unix seconds of the latest handshake; 0: never. */
  latestHandshake: number;
  rxBytes: number;
  txBytes: number;
  /** Seconds; absent when off. */
  keepaliveSec?: number;
}

export interface ObservedRoute {
  /** Canonical CIDR. */
  dst: string;
  /** The preferred source address, when the route names one. */
  src?: string;
}

/** The interface as it is. `exists: false` leaves every other field empty. */
export interface InterfaceState {
  exists: boolean;
  /** The link's kind: `wireguard` (the kernel's), `tun` (wireguard-go), or another. */
  kind?: string;
  /** `wg show` answered for it: it is a WireGuard interface (kernel, or a userspace one with its socket). */
  wireguard: boolean;
  up: boolean;
  mtu?: number;
  /** The public half of the key it holds (absent: no key set). */
  publicKey?: string;
  listenPort?: number;
  /** Its global addresses as canonical CIDRs (link-local ones left out). */
  addresses: string[];
  peers: ObservedPeer[];
  routes: ObservedRoute[];
}

export const NO_INTERFACE: InterfaceState = { exists: false, wireguard: false, up: false, addresses: [], peers: [], routes: [] };

export class OverlayParseError extends Error {
  override name = 'OverlayParseError';
}

/** address/length in one spelling; a bare address is a host route (/32, /128), as `ip -j` prints one. */
const spelled = (text: string) => canonicalCidr(text, { bare: true });

/** An endpoint in one spelling (the address canonical, IPv6 in brackets); undefined when it is not address:port. */
export function canonicalEndpoint(text: string): string | undefined {
  const hp = splitHostPort(text);
  if (!hp || hp.port < 1) return undefined;
  // An IPv6 address only in brackets, and nothing but an address (no name) in either form.
  if (text.startsWith('[') ? !isIPv6(hp.host) : !isIPv4(hp.host)) return undefined;
  return joinHostPort(bareAddress(hp.host), hp.port);
}

const none = (s: string | undefined) => (s === undefined || s === '(none)' ? undefined : s);

/**
 * `wg show <if> dump`: the interface's line (private key, public key, listen port, fwmark), then
 * one line per peer (public key, preshared key, endpoint, allowed IPs, latest handshake, bytes
 * received, bytes sent, persistent keepalive), tab-separated, `(none)` or `off` where unset.
 */
export function parseWgDump(text: string): Pick<InterfaceState, 'publicKey' | 'listenPort' | 'peers'> {
  const lines = text.split('\n').filter((l) => l.trim());
  const head = lines[0]?.split('\t');
  if (!head || head.length !== 4) throw new OverlayParseError('wg show dump: the first line is not the interface (4 fields)');
  const port = Number(head[2]);
  const publicKey = none(head[1]);
  const peers = lines.slice(1).map((l, i) => {
    const f = l.split('\t');
    if (f.length !== 8) throw new OverlayParseError(`wg show dump: peer line ${i + 1} has ${f.length} fields, not 8`);
    const [key, , endpoint, allowed, handshake, rx, tx, keepalive] = f as [string, string, string, string, string, string, string, string];
    const nums = [handshake, rx, tx].map(Number);
    if (nums.some((n) => !Number.isInteger(n) || n < 0)) throw new OverlayParseError(`wg show dump: peer line ${i + 1} has a counter that is not a number`);
    const ep = none(endpoint);
    const ka = keepalive === 'off' ? undefined : Number(keepalive);
    return {
      publicKey: key,
      ...(ep ? { endpoint: canonicalEndpoint(ep) ?? ep } : {}),
      allowedIps: none(allowed) ? allowed.split(',').map((a) => spelled(a.trim())) : [],
      latestHandshake: nums[0]!,
      rxBytes: nums[1]!,
      txBytes: nums[2]!,
      ...(ka !== undefined && Number.isInteger(ka) && ka > 0 ? { keepaliveSec: ka } : {}),
    } satisfies ObservedPeer;
  });
  return { ...(publicKey ? { publicKey } : {}), ...(Number.isInteger(port) && port > 0 ? { listenPort: port } : {}), peers };
}

interface IpAddrJson {
  ifname?: string;
  flags?: string[];
  mtu?: number;
  linkinfo?: { info_kind?: string };
  addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[];
}

/** `ip -j -d addr show dev <if>`: the link (an empty list: no such interface). */
export function parseIpAddr(json: string): Pick<InterfaceState, 'exists' | 'kind' | 'up' | 'mtu' | 'addresses'> {
  const links = JSON.parse(json || '[]') as IpAddrJson[];
  const link = links[0];
  if (!link) return { exists: false, up: false, addresses: [] };
  const addresses = (link.addr_info ?? []).filter((a) => a.local && a.scope !== 'link' && a.scope !== 'host').map((a) => spelled(`${a.local}/${a.prefixlen}`));
  return {
    exists: true,
    ...(link.linkinfo?.info_kind ? { kind: link.linkinfo.info_kind } : {}),
    up: (link.flags ?? []).includes('UP'),
    ...(typeof link.mtu === 'number' ? { mtu: link.mtu } : {}),
    addresses,
  };
}

/** `ip -j route show dev <if> proto <ours>` (IPv4 or IPv6). */
export function parseIpRoutes(json: string): ObservedRoute[] {
  const routes = JSON.parse(json || '[]') as { dst?: string; prefsrc?: string }[];
  return routes.filter((r) => r.dst && r.dst !== 'default').map((r) => ({ dst: spelled(r.dst!), ...(r.prefsrc ? { src: bareAddress(r.prefsrc) } : {}) }));
}
