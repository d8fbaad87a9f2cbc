// The cluster network's address plan (seed 004 §4; docs/networking.md): an IPv4 range and an IPv6
// ULA /48 per cluster, a subnet of each per node (by the node's subnet index), and a replica's
// addresses by a host number within its node's subnets — the same number in both families, so one
// claim (addresses/<node>/<n>) makes both unique. Pure: parsing, formatting, subnet arithmetic.
// It is also jaco's one parser and printer of addresses (parseAddressPrefix, formatAddress,
// splitHostPort, joinHostPort): the agent's kernel spellings (canonicalCidr, in node-agent/cni.ts)
// and the overlay's reading of wg and ip (overlay-observe.ts) build on them.
import { isIPv4, isIPv6 } from 'node:net';

/** A replica's own addresses, e.g. { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' }. */
export interface ReplicaAddress {
  ipv4: string;
  ipv6: string;
}

/** config/network: the cluster's ranges. Fixed once replicas hold addresses from them. */
export interface NetworkConfigSpec {
  /** IPv4 range of the cluster, e.g. 10.208.0.0/12; each node a /subnetBits4 of it. */
  ipv4: string;
  /** IPv6 ULA /48 of the cluster, e.g. fd4a:17c2:9e01::/48; each node a /64 of it. */
  ipv6: string;
  /** Prefix length of a node's IPv4 subnet (default 24: 253 replicas per node). */
  subnetBits4?: number;
  /** IPv4 range of service addresses (default 10.207.0.0/16); IPv6 ones are the ULA's :ffff::/64. */
  services4?: string;
}

export const DEFAULT_IPV4_RANGE = '10.208.0.0/12';
export const DEFAULT_SERVICES4_RANGE = '10.207.0.0/16';
/** The /64 of the cluster's ULA that service addresses come from (node subnets never reach it). */
const SERVICES6_SUBNET = 0xffff;
export const DEFAULT_SUBNET_BITS4 = 24;
const SUBNET_BITS6 = 64;

export class NetworkPlanError extends Error {
  override name = 'NetworkPlanError';
}

/** A ULA /48 from 40 random bits (RFC 4193: fd00::/8, a pseudo-random global id). */
export function ulaFromRandom(bytes: Uint8Array): string {
  if (bytes.length < 5) throw new NetworkPlanError('a ULA needs 40 random bits');
  const id = [...bytes.slice(0, 5)].reduce((n, b) => (n << 8n) | BigInt(b), 0n);
  return formatCidr({ base: ((0xfdn << 40n) | id) << 80n, bits: 48, family: 6 });
}

// ---------------------------------------------------------------- IPv4 and IPv6 as big integers

function v4ToInt(a: string): bigint {
  if (!isIPv4(a)) throw new NetworkPlanError(`${JSON.stringify(a)} is not an IPv4 address`);
  return a.split('.').reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
}

function intToV4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
}

function v6ToInt(a: string): bigint {
  if (!isIPv6(a) || a.includes('.')) throw new NetworkPlanError(`${JSON.stringify(a)} is not an IPv6 address`);
  const [head, tail] = a.includes('::') ? a.split('::') : [a, undefined];
  const hs = head ? head.split(':') : [];
  const ts = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = [...hs, ...Array<string>(8 - hs.length - ts.length).fill('0'), ...ts];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** RFC 5952 text: lower case, the longest run of zero groups (of two or more) as ::. */
function intToV6(n: bigint): string {
  const g = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = [-1, 0];
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > best[1]! && j - i >= 2) best = [i, j - i];
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best[0]! < 0) return hex.join(':');
  return `${hex.slice(0, best[0]).join(':')}::${hex.slice(best[0]! + best[1]!).join(':')}`;
}

interface Cidr {
  base: bigint;
  bits: number;
  family: 4 | 6;
}

/** An address as a number (32 or 128 bits) with a prefix length; host bits may be set (a replica's 10.208.3.5/24). */
export interface AddressPrefix {
  family: 4 | 6;
  value: bigint;
  prefix: number;
}

/**
 * Parses "a.b.c.d/len" or "x:…:y/len", host bits allowed; with `bare`, an address alone is a host
 * route (/32, /128), as `ip -j` prints one. Throws NetworkPlanError naming the text.
 */
export function parseAddressPrefix(text: string, opts: { bare?: boolean } = {}): AddressPrefix {
  const key = opts.bare ? `bare:${text}` : text;
  const hit = spelled.get(key);
  if (hit) return hit;
  const p = parseAddressPrefixText(text, opts.bare);
  if (spelled.size > 10_000) spelled.clear();
  spelled.set(key, p);
  return p;
}

// Parsed addresses, by text: an agent's pass spells every replica's addresses (issue 26's profile).
const spelled = new Map<string, AddressPrefix>();

function parseAddressPrefixText(text: string, bare = false): AddressPrefix {
  const slash = text.lastIndexOf('/');
  const addr = slash < 0 ? text : text.slice(0, slash);
  const family = isIPv4(addr) ? 4 : isIPv6(addr) && !addr.includes('.') ? 6 : undefined;
  const width = family === 4 ? 32 : 128;
  const len = slash < 0 ? (bare ? width : NaN) : /^\d+$/.test(text.slice(slash + 1)) ? Number(text.slice(slash + 1)) : NaN;
  if (!family || !(len <= width)) throw new NetworkPlanError(`${JSON.stringify(text)} is not an address with its prefix length (a CIDR: a.b.c.d/len, or an IPv6 address/len)`);
  return { family, value: family === 4 ? v4ToInt(addr) : v6ToInt(addr), prefix: len };
}

/** An address from its number: IPv4 dotted, IPv6 in RFC 5952 form (lower case, the longest zero run as ::). */
export function formatAddress(family: 4 | 6, value: bigint): string {
  return family === 4 ? intToV4(value) : intToV6(value);
}

/**
 * "host:port" or "[ipv6]:port" split (the brackets dropped); undefined when it is neither, or the
 * port is not a number of 0–65535. The host is not checked: callers say what it must be.
 */
export function splitHostPort(text: string): { host: string; port: number } | undefined {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:[\]]+):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[2]);
  return port <= 65535 ? { host: m[1]!, port } : undefined;
}

/** host:port, an IPv6 address in brackets. */
export function joinHostPort(host: string, port: number): string {
  return isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

// Parsed ranges, by text: a pass gives thousands of addresses from a few hundred subnets.
const parsed = new Map<string, Cidr>();

export function parseCidr(text: string): Cidr {
  const hit = parsed.get(text);
  if (hit) return hit;
  const c = parseCidrText(text);
  if (parsed.size > 10_000) parsed.clear();
  parsed.set(text, c);
  return c;
}

/** A range: an address with its prefix length and no host bits set. */
function parseCidrText(text: string): Cidr {
  const { family, value: n, prefix: bits } = parseAddressPrefix(text);
  const width = family === 4 ? 32 : 128;
  const host = (1n << BigInt(width - bits)) - 1n;
  if (n & host) throw new NetworkPlanError(`${text}: host bits are set (the network is ${formatCidr({ base: n & ~host, bits, family })})`);
  return { base: n, bits, family };
}

function formatCidr(c: Cidr): string {
  return `${c.family === 4 ? intToV4(c.base) : intToV6(c.base)}/${c.bits}`;
}

const addr = (c: Cidr, n: bigint) => (c.family === 4 ? intToV4(n) : intToV6(n));

// ---------------------------------------------------------------- the plan

/** How many node subnets the cluster's ranges hold (the smaller of the two families). */
export function subnetCount(cfg: NetworkConfigSpec): number {
  const v4 = parseCidr(cfg.ipv4);
  const v6 = parseCidr(cfg.ipv6);
  const sub4 = cfg.subnetBits4 ?? DEFAULT_SUBNET_BITS4;
  if (sub4 < v4.bits || sub4 > 30) throw new NetworkPlanError(`subnetBits4 ${sub4} must be between the range's ${v4.bits} and 30`);
  if (v6.bits > SUBNET_BITS6) throw new NetworkPlanError(`${cfg.ipv6}: the IPv6 range must be /64 or larger`);
  return Math.min(2 ** (sub4 - v4.bits), 2 ** Math.min(SUBNET_BITS6 - v6.bits, 30));
}

/** A node's subnets (CIDR text) for subnet index `index`. */
export function nodeSubnets(cfg: NetworkConfigSpec, index: number): { ipv4: string; ipv6: string } {
  if (!Number.isInteger(index) || index < 0 || index >= subnetCount(cfg)) throw new NetworkPlanError(`subnet index ${index} is outside the cluster's ${subnetCount(cfg)} subnets`);
  const v4 = parseCidr(cfg.ipv4);
  const v6 = parseCidr(cfg.ipv6);
  const sub4 = cfg.subnetBits4 ?? DEFAULT_SUBNET_BITS4;
  const s4: Cidr = { base: v4.base + (BigInt(index) << BigInt(32 - sub4)), bits: sub4, family: 4 };
  const s6: Cidr = { base: v6.base + (BigInt(index) << BigInt(128 - SUBNET_BITS6)), bits: SUBNET_BITS6, family: 6 };
  return { ipv4: formatCidr(s4), ipv6: formatCidr(s6) };
}

/** Host numbers a node's subnets give replicas: 2 … 2^(32-bits)-2 (1 is the node's gateway; 0 and the last are the network's and broadcast's). */
export function hostNumbers(subnet4: string): { first: number; last: number } {
  const bits = parseCidr(subnet4).bits;
  return { first: 2, last: 2 ** (32 - bits) - 2 };
}

/** The replica address of host number `n` in a node's subnets. */
export function replicaAddress(subnets: { ipv4: string; ipv6: string }, n: number): ReplicaAddress {
  const s4 = parseCidr(subnets.ipv4);
  const s6 = parseCidr(subnets.ipv6);
  const { first, last } = hostNumbers(subnets.ipv4);
  if (!Number.isInteger(n) || n < first || n > last) throw new NetworkPlanError(`host number ${n} is outside ${first}–${last} of ${subnets.ipv4}`);
  return { ipv4: `${addr(s4, s4.base + BigInt(n))}/${s4.bits}`, ipv6: `${addr(s6, s6.base + BigInt(n))}/${s6.bits}` };
}

/**
 * The gateway of a replica address's prefix: its first host (10.208.3.1 for 10.208.3.5/24), held
 * by the node's end of every veth. A /32 or /128 has no host for it: the gateway then lies outside
 * the prefix, and the CNI plugin refuses it (network_failed) rather than jaco guessing.
 */
export function gatewayOf(cidrAddress: string): string {
  const c = parseAddressPrefix(cidrAddress);
  const width = c.family === 4 ? 32n : 128n;
  const all = (1n << width) - 1n;
  const network = c.value & ~((1n << (width - BigInt(c.prefix))) - 1n) & all;
  return formatAddress(c.family, (network + 1n) & all);
}

/** The address alone, canonical ("fd4a:17c2:9e01:0003::5/64" → "fd4a:17c2:9e01:3::5"); an address alone is spelled canonically too. */
export function bareAddress(cidrAddress: string): string {
  const c = parseAddressPrefix(cidrAddress, { bare: true });
  return formatAddress(c.family, c.value);
}

/** The CIDR in canonical form, as `ip` prints it; with `bare`, an address alone is a host route (/32, /128). */
export function canonicalCidr(cidrAddress: string, opts: { bare?: boolean } = {}): string {
  const c = parseAddressPrefix(cidrAddress, opts);
  return `${formatAddress(c.family, c.value)}/${c.prefix}`;
}

/** The service address ranges of a cluster: IPv4 (services4) and the ULA's :ffff::/64. */
export function serviceRanges(cfg: NetworkConfigSpec): { ipv4: string; ipv6: string } {
  const v6 = parseCidr(cfg.ipv6);
  return { ipv4: cfg.services4 ?? DEFAULT_SERVICES4_RANGE, ipv6: formatCidr({ base: v6.base + (BigInt(SERVICES6_SUBNET) << 64n), bits: 64, family: 6 }) };
}

/** How many service addresses the ranges hold (host numbers 1 … 2^(32-bits)-2). */
export function serviceAddressCount(cfg: NetworkConfigSpec): number {
  return 2 ** (32 - parseCidr(serviceRanges(cfg).ipv4).bits) - 2;
}

/** Service address number `n` (1-based) in both families, without prefix length. */
export function serviceAddress(cfg: NetworkConfigSpec, n: number): { ipv4: string; ipv6: string } {
  const r = serviceRanges(cfg);
  const s4 = parseCidr(r.ipv4);
  const s6 = parseCidr(r.ipv6);
  if (!Number.isInteger(n) || n < 1 || n > serviceAddressCount(cfg)) throw new NetworkPlanError(`service address ${n} is outside 1–${serviceAddressCount(cfg)} of ${r.ipv4}`);
  return { ipv4: addr(s4, s4.base + BigInt(n)), ipv6: addr(s6, s6.base + BigInt(n)) };
}

/** Checks a network config: both ranges parse, IPv6 is a ULA, the subnets fit. */
export function checkNetworkConfig(cfg: NetworkConfigSpec): void {
  const v6 = parseCidr(cfg.ipv6);
  if (v6.family !== 6 || v6.base >> 120n !== 0xfdn) throw new NetworkPlanError(`${cfg.ipv6} is not an IPv6 unique local range (fd00::/8)`);
  const v4 = parseCidr(cfg.ipv4);
  if (v4.family !== 4) throw new NetworkPlanError(`${cfg.ipv4} is not an IPv4 range`);
  subnetCount(cfg);
  const s4 = parseCidr(serviceRanges(cfg).ipv4);
  if (s4.family !== 4 || s4.bits > 30) throw new NetworkPlanError(`services4 ${cfg.services4} is not an IPv4 range of /30 or larger`);
  const end = (c: { base: bigint; bits: number }) => c.base + (1n << BigInt(32 - c.bits)) - 1n;
  if (s4.base <= end(v4) && v4.base <= end(s4)) throw new NetworkPlanError(`services4 ${serviceRanges(cfg).ipv4} overlaps the node subnets' range ${cfg.ipv4}`);
}
