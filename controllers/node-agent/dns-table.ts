// What the node's resolver answers, decided without sockets: a decoded query and the name table
// in, a reply packet (or "forward it", or "drop it") out. dns.ts owns the sockets, the wire format
// and forwarding; everything a client can observe about a query that is not forwarded is decided
// here, so it is table-tested (dns-table.test.ts).
import { isIPv4, isIPv6 } from 'node:net';
import type { Answer, DecodedPacket, OptAnswer, Packet, Question } from 'dns-packet';
import type { DnsOutcome } from '../../src/api/reasons/dns.js';

/** The addresses a name answers with: A records from ipv4, AAAA records from ipv6. */
export interface NameAddresses {
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/** What the caller hands setNames: the whole table, replacing the previous one. */
export interface NameTableInput {
  /** `web.shop` → { ipv4: ['10.208.0.7'], ipv6: ['fd12:3456:789a:ffff::7'] }; any case, trailing dot or not. */
  readonly names: Readonly<Record<string, NameAddresses>> | ReadonlyMap<string, NameAddresses>;
  /**
   * Suffixes the table is authoritative for (the deployments: `shop`): a name strictly under one
   * that the table lacks is NXDOMAIN instead of being forwarded. `''` is the root: every name.
   */
  readonly zones: readonly string[];
}

/** The table as the server holds it: names lower case without the trailing dot. */
export interface NameTable {
  readonly names: ReadonlyMap<string, NameAddresses>;
  readonly zones: ReadonlySet<string>;
}

export interface RejectedName {
  name: string;
  why: string;
}

export const EMPTY_TABLE: NameTable = { names: new Map(), zones: new Set() };

/** Lower case, without one trailing dot: how names are compared (DNS names are case-insensitive). */
export function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

// Letters, digits, hyphens, and underscores (compose service names may have them); a label of at
// most 63 bytes, a name of at most 253: what the wire can carry.
const LABEL = /^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/;

function nameProblem(name: string): string | undefined {
  if (name.length === 0) return 'empty name';
  if (name.length > 253) return 'longer than 253 characters';
  const bad = name.split('.').find((l) => !LABEL.test(l));
  return bad === undefined ? undefined : `label ${JSON.stringify(bad)} is not 1–63 letters, digits, '-' or '_' (no leading or trailing '-')`;
}

/**
 * Validates and normalizes a table. A bad entry (a name the wire cannot carry, an address of the
 * wrong family) is left out and reported, the rest is kept: one bad service never takes the
 * cluster's names down. Names differing only in case are merged.
 */
export function compileNameTable(input: NameTableInput): { table: NameTable; rejected: RejectedName[] } {
  const names = new Map<string, NameAddresses>();
  const rejected: RejectedName[] = [];
  const entries = input.names instanceof Map ? [...input.names] : Object.entries(input.names as Record<string, NameAddresses>);
  for (const [raw, addrs] of entries) {
    const name = normalizeName(raw);
    const problem = nameProblem(name) ?? addressProblem(addrs);
    if (problem) {
      rejected.push({ name: raw, why: problem });
      continue;
    }
    const had = names.get(name);
    names.set(name, had ? { ipv4: unique([...had.ipv4, ...addrs.ipv4]), ipv6: unique([...had.ipv6, ...addrs.ipv6]) } : { ipv4: unique(addrs.ipv4), ipv6: unique(addrs.ipv6) });
  }
  const zones = new Set<string>();
  for (const raw of input.zones) {
    const zone = normalizeName(raw);
    const problem = zone === '' ? undefined : nameProblem(zone);
    if (problem) rejected.push({ name: raw, why: `zone: ${problem}` });
    else zones.add(zone);
  }
  return { table: { names, zones }, rejected };
}

function addressProblem(a: NameAddresses): string | undefined {
  const v4 = a.ipv4.find((x) => !isIPv4(x));
  if (v4 !== undefined) return `${JSON.stringify(v4)} is not an IPv4 address`;
  const v6 = a.ipv6.find((x) => !isIPv6(x));
  if (v6 !== undefined) return `${JSON.stringify(v6)} is not an IPv6 address`;
  return undefined;
}

const unique = (xs: readonly string[]) => [...new Set(xs)];

/** Whether `name` (normalized) lies strictly under one of the table's zones. */
export function inZone(name: string, zones: ReadonlySet<string>): boolean {
  if (zones.size === 0 || name === '') return false;
  if (zones.has('')) return true;
  for (let dot = name.indexOf('.'); dot >= 0; dot = name.indexOf('.', dot + 1)) {
    if (zones.has(name.slice(dot + 1))) return true;
  }
  return false;
}

export interface QueryContext {
  /** TTL of answers from the table, in seconds. */
  ttl: number;
  /** Whether any upstream is configured: names outside the table are forwarded, else SERVFAIL. */
  forwarding: boolean;
}

/** What to do with one decoded message. */
export type Reply =
  | { kind: 'answer'; outcome: Exclude<DnsOutcome, 'forwarded' | 'malformed'>; packet: Packet }
  | { kind: 'forward'; question: Question }
  | { kind: 'drop'; why: string };

/** The largest UDP answer this server sends to an EDNS client (the DNS flag day 2020 figure: no fragments). */
export const MAX_UDP_PAYLOAD = 1232;
/** Without EDNS a UDP answer is at most 512 bytes (RFC 1035). */
export const CLASSIC_UDP_PAYLOAD = 512;

// Header flag bits (dns-packet puts the opcode and rcode in `flags` too).
const AA = 1 << 10;
const TC = 1 << 9;
const RD = 1 << 8;
const RA = 1 << 7;
const CD = 1 << 4;
const OPCODE_MASK = 0xf << 11;

const RCODES = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, NOTIMP: 4, REFUSED: 5, BADVERS: 16 } as const;
type Rcode = keyof typeof RCODES;

/** dns-packet decodes the opcode and rcode as names; its type declarations leave them out. */
type Decoded = DecodedPacket & { opcode?: string; rcode?: string };

/**
 * The answer to one message. The ladder, first match wins:
 *   a response → dropped (never answer an answer: that is how loops and reflection start);
 *   EDNS version above 0 → BADVERS; more than one OPT → FORMERR (RFC 6891);
 *   opcode other than QUERY → NOTIMP;
 *   not exactly one question → FORMERR (RFC 9619: no server answers several, no client sends them);
 *   a name of the table → its addresses (A, AAAA, both for ANY), NODATA for any other type;
 *   a name strictly under a zone → NXDOMAIN;
 *   anything else → forwarded, or SERVFAIL when there is no upstream.
 * A class other than IN (or ANY) for a cluster name is REFUSED: the table holds Internet addresses.
 */
export function decideQuery(query: Decoded, table: NameTable, ctx: QueryContext): Reply {
  if (query.type === 'response') return { kind: 'drop', why: 'a response, not a query' };
  const opts = (query.additionals ?? []).filter((a): a is OptAnswer => a.type === 'OPT');
  if (opts.length > 1) return reject(query, 'FORMERR', ctx);
  if (opts[0] && (opts[0].ednsVersion ?? 0) !== 0) return reject(query, 'BADVERS', ctx);
  if ((query.opcode ?? 'QUERY') !== 'QUERY') return reject(query, 'NOTIMP', ctx);
  const questions = query.questions ?? [];
  if (questions.length !== 1) return reject(query, 'FORMERR', ctx);
  const question = questions[0]!;
  const name = normalizeName(question.name);
  const entry = table.names.get(name);
  const cluster = entry !== undefined || inZone(name, table.zones);
  if (cluster && question.class !== undefined && question.class !== 'IN' && question.class !== 'ANY') return reject(query, 'REFUSED', ctx);
  if (entry) {
    const answers = addressAnswers(question, entry, ctx.ttl);
    return { kind: 'answer', outcome: answers.length ? 'answered' : 'nodata', packet: reply(query, 'NOERROR', ctx, { authoritative: true, answers }) };
  }
  if (cluster) return { kind: 'answer', outcome: 'nxdomain', packet: reply(query, 'NXDOMAIN', ctx, { authoritative: true }) };
  if (ctx.forwarding) return { kind: 'forward', question };
  return { kind: 'answer', outcome: 'servfail', packet: reply(query, 'SERVFAIL', ctx) };
}

/** SERVFAIL for a query that could not be forwarded (the shell decides that, after trying). */
export function servfail(query: Decoded, ctx: QueryContext): Packet {
  return reply(query, 'SERVFAIL', ctx);
}

function reject(query: Decoded, rcode: Rcode, ctx: QueryContext): Reply {
  return { kind: 'answer', outcome: 'rejected', packet: reply(query, rcode, ctx) };
}

function addressAnswers(q: Question, entry: NameAddresses, ttl: number): Answer[] {
  const type: string = q.type; // dns-packet decodes type 255 as ANY; its declarations lack it
  const a = type === 'A' || type === 'ANY';
  const aaaa = type === 'AAAA' || type === 'ANY';
  // The owner name as asked, case included: resolvers that randomize case (0x20) match on it.
  return [
    ...(a ? entry.ipv4.map((data): Answer => ({ type: 'A', name: q.name, class: 'IN', ttl, data })) : []),
    ...(aaaa ? entry.ipv6.map((data): Answer => ({ type: 'AAAA', name: q.name, class: 'IN', ttl, data })) : []),
  ];
}

function reply(query: Decoded, rcode: Rcode, ctx: QueryContext, o: { authoritative?: boolean; answers?: Answer[] } = {}): Packet {
  const code = RCODES[rcode];
  const flags = ((query.flags ?? 0) & (OPCODE_MASK | RD | CD)) | (o.authoritative ? AA : 0) | (ctx.forwarding ? RA : 0) | (code & 0xf);
  const edns = (query.additionals ?? []).some((a) => a.type === 'OPT');
  // An EDNS query gets an OPT back (RFC 6891), which also carries the upper bits of BADVERS.
  const opt: OptAnswer = { type: 'OPT', name: '.', udpPayloadSize: MAX_UDP_PAYLOAD, extendedRcode: code >> 4, ednsVersion: 0, flags: 0, flag_do: false, options: [] };
  return {
    type: 'response',
    id: query.id ?? 0,
    flags,
    // FORMERR for several questions echoes none: there is no one question to echo.
    questions: query.questions?.length === 1 ? query.questions : [],
    answers: o.answers ?? [],
    authorities: [],
    additionals: edns ? [opt] : [],
  };
}

/** The most bytes a UDP answer to `query` may have: what its EDNS OPT offers, within 512–1232. */
export function udpPayloadLimit(query: Packet): number {
  const opt = (query.additionals ?? []).find((a): a is OptAnswer => a.type === 'OPT');
  if (!opt) return CLASSIC_UDP_PAYLOAD;
  return Math.min(MAX_UDP_PAYLOAD, Math.max(CLASSIC_UDP_PAYLOAD, opt.udpPayloadSize ?? CLASSIC_UDP_PAYLOAD));
}

/**
 * An answer too large for UDP, cut down: the TC bit, the question and the OPT, no records. A
 * client then asks again over TCP (RFC 7766); a partial answer would be cached as if whole.
 */
export function truncated(packet: Packet): Packet {
  return {
    type: 'response',
    id: packet.id ?? 0,
    flags: (packet.flags ?? 0) | TC,
    questions: packet.questions ?? [],
    answers: [],
    authorities: [],
    additionals: (packet.additionals ?? []).filter((a) => a.type === 'OPT'),
  };
}

const TYPE_LABELS = new Set(['A', 'AAAA', 'ANY', 'CNAME', 'HTTPS', 'MX', 'NS', 'PTR', 'SOA', 'SRV', 'SVCB', 'TXT']);

/** A question's type as a metric label: the common ones by name, the rest `other` (a bounded set). */
export function typeLabel(query: Packet | undefined): string {
  const q = query?.questions;
  if (!q || q.length !== 1) return 'none';
  return TYPE_LABELS.has(q[0]!.type) ? q[0]!.type : 'other';
}
