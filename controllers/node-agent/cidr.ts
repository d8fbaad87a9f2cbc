// A replica's addresses as the kernel spells them: CIDRs in canonical form (as `ip` prints them),
// bare, and the gateway of their prefix (its first host, held by the node's end of every veth).
// Pure, tables beside it; the CNI config (cni.ts), the sandbox (sandbox.ts) and MemoryNetwork
// (network.ts) spell addresses alike through it.
import { isIPv4, isIPv6 } from 'node:net';

interface Cidr {
  family: 4 | 6;
  /** The address as a number: 32 or 128 bits. */
  value: bigint;
  prefix: number;
}

function parseV6(a: string): bigint {
  const [head, tail, ...more] = a.split('::');
  if (more.length) throw new Error('more than one "::"');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined ? (tail ? tail.split(':') : []) : [];
  const groups = tail !== undefined ? [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t] : h;
  if (groups.length !== 8) throw new Error('not eight groups');
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** Parses "a.b.c.d/len" or "x:…:y/len"; throws an Error naming what is wrong. */
export function parseCidr(cidr: string): Cidr {
  const slash = cidr.lastIndexOf('/');
  const addr = slash < 0 ? cidr : cidr.slice(0, slash);
  const prefix = slash < 0 ? NaN : Number(cidr.slice(slash + 1));
  const family = isIPv4(addr) ? 4 : isIPv6(addr) ? 6 : undefined;
  const bits = family === 4 ? 32 : 128;
  if (!family || !Number.isInteger(prefix) || prefix < 0 || prefix > bits || !/^\d+$/.test(cidr.slice(slash + 1)))
    throw new Error(`"${cidr}" is not an address with its prefix length (a.b.c.d/len, or an IPv6 address/len)`);
  const value = family === 4 ? addr.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o)), 0n) : parseV6(addr);
  return { family, value, prefix };
}

function format(family: 4 | 6, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 255n)).join('.');
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => ((value >> s) & 0xffffn).toString(16));
  // The WHATWG URL parser writes IPv6 in its canonical (RFC 5952) form: the longest run of zero groups as "::".
  return new URL(`http://[${groups.join(':')}]/`).hostname.slice(1, -1);
}

/** The address alone, canonical ("fd4a:17c2:9e01:0003::5/64" → "fd4a:17c2:9e01:3::5"). */
export function bareAddress(cidr: string): string {
  const c = parseCidr(cidr);
  return format(c.family, c.value);
}

/** The CIDR in canonical form, as `ip` prints it. */
export function canonicalCidr(cidr: string): string {
  const c = parseCidr(cidr);
  return `${format(c.family, c.value)}/${c.prefix}`;
}

/**
 * The gateway of a replica's prefix: its first host (10.208.3.1 for 10.208.3.5/24), held by the
 * node's end of every veth. A /32 or /128 has no host for it: the gateway then lies outside the
 * prefix, and the plugin refuses it (network_failed) rather than jaco guessing.
 */
export function gatewayOf(cidr: string): string {
  const c = parseCidr(cidr);
  const bits = c.family === 4 ? 32n : 128n;
  const host = (1n << (bits - BigInt(c.prefix))) - 1n;
  const network = c.value & ~host & ((1n << bits) - 1n);
  return format(c.family, (network + 1n) & ((1n << bits) - 1n));
}
