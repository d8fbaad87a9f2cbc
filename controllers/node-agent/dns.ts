// The node's DNS server: where the containers of this node ask for names (their resolv.conf
// names it, with `search DEPLOYMENT`). It answers the cluster's names from a table the agent
// replaces whole (setNames), says NXDOMAIN at once under the cluster's zones, and forwards every
// other name to the host's resolvers. This file owns the sockets (UDP and TCP, node:dgram and
// node:net), the wire format (dns-packet) and forwarding; what a query is answered is decided in
// dns-table.ts. A bad packet, a slow upstream or a client that hangs up never throws out of here.
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { setMaxListeners } from 'node:events';
import { readFile } from 'node:fs/promises';
import net, { isIPv6, type AddressInfo } from 'node:net';
import dnsPacket, { type DecodedPacket, type Packet } from 'dns-packet';
import { logger, type Logger } from '../../src/observability/log.js';
import type { DnsOutcome, DnsUpstreamFailure } from '../../src/api/reasons/dns.js';
import { compileNameTable, decideQuery, EMPTY_TABLE, normalizeName, servfail, truncated, typeLabel, udpPayloadLimit, type NameTable, type NameTableInput, type QueryContext, type RejectedName } from './dns-table.js';
import { dnsMetrics } from './metrics.js';
import { upstreamsFromResolvConf, type ListenAddress, type Upstream } from './resolv-conf.js';
import { joinHostPort } from '../../src/api/network.js';

export type { ListenAddress, Upstream } from './resolv-conf.js';
export type { NameAddresses, NameTableInput, RejectedName } from './dns-table.js';

export interface DnsServerOptions {
  /** Where to answer, over UDP and TCP alike. Port 53 unless given; 0 picks one free for both (tests). */
  listen: readonly { address: string; port?: number }[];
  /**
   * A resolv.conf whose nameservers are the upstreams (the host's, /etc/resolv.conf), less this
   * server's own addresses. Read at start, and again while queries come, at most every
   * resolvConfRefreshMs: a host whose resolver changes (DHCP, a VPN) is followed.
   */
  resolvConf?: string;
  /** Upstreams given directly, instead of resolvConf. With neither, nothing is forwarded: SERVFAIL. */
  upstreams?: readonly Upstream[];
  /** TTL of the table's answers, in seconds (default 5): a moved or new service is seen quickly. */
  ttlSeconds?: number;
  /** How long one upstream is given to answer before the next is asked (default 2000 ms). */
  forwardTimeoutMs?: number;
  /** Forwards in flight at most; past it, SERVFAIL at once (default 512). */
  maxForwards?: number;
  /** A TCP client idle this long is closed (default 10 s, RFC 7766 suggests seconds). */
  tcpIdleMs?: number;
  resolvConfRefreshMs?: number;
  log?: Logger;
}

export const DNS_DEFAULTS = { ttlSeconds: 5, forwardTimeoutMs: 2000, maxForwards: 512, tcpIdleMs: 10_000, resolvConfRefreshMs: 5000 } as const;
const MAX_TCP_CONNECTIONS = 256;
/** A TCP message's length is two bytes. */
const MAX_TCP_MESSAGE = 0xffff;
/** Malformed packets are logged at most this often, with the count since the last line. */
const MALFORMED_LOG_MS = 60_000;
/** Tries at a free port shared by UDP and TCP when the caller asked for port 0. */
const FREE_PORT_TRIES = 8;

/** A listen address could not be bound: names the transport, address and port, and why. */
export class DnsBindError extends Error {
  override name = 'DnsBindError';
  constructor(
    readonly transport: 'udp' | 'tcp',
    readonly address: string,
    readonly port: number,
    readonly code: string | undefined,
    detail: string,
  ) {
    super(`DNS server cannot listen on ${transport} ${joinHostPort(address, port)}: ${detail}`);
  }
}

/** Why one upstream did not serve a forwarded query; the next one is asked. */
class UpstreamError extends Error {
  override name = 'UpstreamError';
  constructor(
    readonly reason: DnsUpstreamFailure,
    detail: string,
    /** A declined answer (SERVFAIL, REFUSED): sent back if no upstream answers better. */
    readonly answer?: Forwarded,
  ) {
    super(detail);
  }
}

type Transport = 'udp' | 'tcp';
type Decoded = DecodedPacket & { rcode?: string; opcode?: string };
interface Forwarded {
  bytes: Buffer;
  packet: Decoded;
}

export class DnsServer {
  readonly #opts: Required<Omit<DnsServerOptions, 'resolvConf' | 'upstreams' | 'log' | 'listen'>>;
  readonly #log: Logger;
  #table: NameTable = EMPTY_TABLE;
  #rejectedText = '';
  #upstreams: readonly Upstream[];
  #resolvConfReadAt = -Infinity;
  #resolvConfReading = false;
  #bound: ListenAddress[] = [];
  #udp: dgram.Socket[] = [];
  #tcp: net.Server[] = [];
  readonly #connections = new Set<net.Socket>();
  #forwarding = 0;
  #stopping = new AbortController();
  #malformed = { since: 0, loggedAt: -Infinity };
  #overloadLoggedAt = -Infinity;

  constructor(private readonly options: DnsServerOptions) {
    const o = options;
    this.#opts = {
      ttlSeconds: o.ttlSeconds ?? DNS_DEFAULTS.ttlSeconds,
      forwardTimeoutMs: o.forwardTimeoutMs ?? DNS_DEFAULTS.forwardTimeoutMs,
      maxForwards: o.maxForwards ?? DNS_DEFAULTS.maxForwards,
      tcpIdleMs: o.tcpIdleMs ?? DNS_DEFAULTS.tcpIdleMs,
      resolvConfRefreshMs: o.resolvConfRefreshMs ?? DNS_DEFAULTS.resolvConfRefreshMs,
    };
    this.#log = options.log ?? logger('dns');
    this.#upstreams = options.upstreams ?? [];
  }

  /** Where the server answers, ports as bound (the ones picked for port 0). */
  get addresses(): readonly ListenAddress[] {
    return this.#bound;
  }

  get upstreams(): readonly Upstream[] {
    return this.#upstreams;
  }

  /** Binds every listen address over UDP and TCP, then reads the resolv.conf. All or nothing. */
  async start(): Promise<void> {
    this.#stopping = new AbortController();
    setMaxListeners(0, this.#stopping.signal); // one listener per forward in flight
    try {
      for (const { address, port = 53 } of this.options.listen) this.#bound.push({ address, port: await this.#bindBoth(address, port) });
    } catch (e) {
      await this.stop();
      throw e;
    }
    if (this.options.resolvConf) await this.#readResolvConf();
    this.#log.info({ listen: this.#bound.map((a) => joinHostPort(a.address, a.port)), upstreams: this.#upstreams.map((a) => joinHostPort(a.address, a.port)), ttl: this.#opts.ttlSeconds }, 'DNS server listening');
  }

  /** Closes every socket; forwards in flight end at once, unanswered. */
  async stop(): Promise<void> {
    this.#stopping.abort();
    for (const c of this.#connections) c.destroy();
    await Promise.all([
      ...this.#udp.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
      ...this.#tcp.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
    ]);
    this.#udp = [];
    this.#tcp = [];
    this.#bound = [];
  }

  /**
   * Replaces the whole name table; the next query is answered from it. Entries the wire cannot
   * carry are left out and returned (logged when they change).
   */
  setNames(input: NameTableInput): RejectedName[] {
    const { table, rejected } = compileNameTable(input);
    this.#table = table;
    dnsMetrics.names.set(table.names.size);
    const text = JSON.stringify(rejected);
    if (text !== this.#rejectedText && rejected.length) this.#log.warn({ rejected }, 'names left out of the DNS table');
    this.#rejectedText = text;
    return rejected;
  }

  /** Replaces the upstreams, for a caller that manages them itself (with resolvConf, its next re-read replaces them again). */
  setUpstreams(upstreams: readonly Upstream[]): void {
    this.#upstreams = [...upstreams];
  }

  // ---- answering ------------------------------------------------------------------------------

  /** The bytes to send back for one message, or undefined for none. Never throws. */
  async #answer(msg: Buffer, transport: Transport): Promise<Buffer | undefined> {
    let query: Decoded;
    try {
      query = dnsPacket.decode(msg) as Decoded;
    } catch (e) {
      this.#dropMalformed(transport, (e as Error).message);
      return undefined;
    }
    try {
      this.#maybeRereadResolvConf();
      const ctx = this.#context();
      const reply = decideQuery(query, this.#table, ctx);
      if (reply.kind === 'drop') {
        this.#dropMalformed(transport, reply.why);
        return undefined;
      }
      if (reply.kind === 'forward') return await this.#forward(msg, query, transport, ctx);
      this.#count(transport, query, reply.outcome);
      return this.#fit(dnsPacket.encode(reply.packet), reply.packet, transport, query);
    } catch (e) {
      // A bug, not a client's fault: answer SERVFAIL rather than leave the client waiting (if
      // even that cannot be encoded, nothing: a rejection here would take the agent down).
      this.#log.error({ err: e, transport, question: query.questions?.[0] }, 'DNS query failed');
      this.#count(transport, query, 'servfail');
      try {
        return dnsPacket.encode(servfail(query, this.#context()));
      } catch {
        return undefined;
      }
    }
  }

  #context(): QueryContext {
    return { ttl: this.#opts.ttlSeconds, forwarding: this.#upstreams.length > 0 };
  }

  /** The answer as it goes out: cut down to the TC bit when larger than the client takes over UDP (or TCP can frame). */
  #fit(bytes: Buffer, packet: Packet, transport: Transport, query: Packet): Buffer {
    if (bytes.length <= (transport === 'tcp' ? MAX_TCP_MESSAGE : udpPayloadLimit(query))) return bytes;
    dnsMetrics.truncated.inc();
    return dnsPacket.encode(truncated(packet));
  }

  #count(transport: Transport, query: Packet | undefined, outcome: DnsOutcome): void {
    dnsMetrics.queries.inc({ transport, type: typeLabel(query), outcome });
  }

  #dropMalformed(transport: Transport, why: string): void {
    this.#count(transport, undefined, 'malformed');
    this.#malformed.since++;
    const now = performance.now();
    if (now - this.#malformed.loggedAt < MALFORMED_LOG_MS) return;
    this.#log.warn({ dropped: this.#malformed.since, transport, why }, 'malformed DNS messages dropped');
    this.#malformed = { since: 0, loggedAt: now };
  }

  // ---- forwarding -----------------------------------------------------------------------------

  async #forward(msg: Buffer, query: Decoded, transport: Transport, ctx: QueryContext): Promise<Buffer> {
    if (this.#forwarding >= this.#opts.maxForwards) {
      const now = performance.now();
      if (now - this.#overloadLoggedAt >= MALFORMED_LOG_MS) {
        this.#log.warn({ inFlight: this.#forwarding }, 'too many DNS forwards in flight: SERVFAIL until some end');
        this.#overloadLoggedAt = now;
      }
      this.#count(transport, query, 'servfail');
      return dnsPacket.encode(servfail(query, ctx));
    }
    this.#forwarding++;
    const t0 = performance.now();
    try {
      const got = await this.#askUpstreams(msg, query, transport);
      const outcome: DnsOutcome = got ? 'forwarded' : 'servfail';
      dnsMetrics.forwardDuration.observe({ outcome }, (performance.now() - t0) / 1000);
      this.#count(transport, query, outcome);
      if (!got) return dnsPacket.encode(servfail(query, ctx));
      return this.#fit(got.bytes, { ...got.packet, id: query.id }, transport, query);
    } finally {
      this.#forwarding--;
    }
  }

  /**
   * Each upstream in turn, under its own id: over UDP, again over TCP when the answer is
   * truncated; straight over TCP for a client that asked over TCP (its answer is a large one).
   * The first good answer goes back with the client's id.
   */
  async #askUpstreams(msg: Buffer, query: Decoded, transport: Transport): Promise<Forwarded | undefined> {
    let declined: Forwarded | undefined;
    for (const upstream of this.#upstreams) {
      if (this.#stopping.signal.aborted) return undefined;
      const id = randomInt(0, 0x10000);
      const out = Buffer.from(msg);
      out.writeUInt16BE(id, 0);
      try {
        let got = this.#check(transport === 'tcp' ? await this.#tcpExchange(upstream, out) : await this.#udpExchange(upstream, out), id, query);
        if (got.packet.flag_tc && transport === 'udp') got = this.#check(await this.#tcpExchange(upstream, out), id, query);
        got.bytes.writeUInt16BE(query.id ?? 0, 0);
        return got;
      } catch (e) {
        const reason: DnsUpstreamFailure = e instanceof UpstreamError ? e.reason : 'error';
        if (e instanceof UpstreamError && e.answer) declined = e.answer;
        dnsMetrics.upstreamFailures.inc({ reason });
        this.#log.debug({ upstream: joinHostPort(upstream.address, upstream.port), reason, err: (e as Error).message, question: query.questions?.[0] }, 'DNS upstream did not answer');
      }
    }
    if (declined) declined.bytes.writeUInt16BE(query.id ?? 0, 0);
    return declined;
  }

  /** The upstream's answer if it is one to this question; a declined answer is kept in the error. */
  #check(bytes: Buffer, id: number, query: Decoded): Forwarded {
    let packet: Decoded;
    try {
      packet = dnsPacket.decode(bytes) as Decoded;
    } catch (e) {
      throw new UpstreamError('bad_answer', `undecodable answer: ${(e as Error).message}`);
    }
    const [asked] = query.questions ?? [];
    const [answered] = packet.questions ?? [];
    if (packet.type !== 'response' || packet.id !== id || packet.questions?.length !== 1 || !asked || !answered || normalizeName(answered.name) !== normalizeName(asked.name) || answered.type !== asked.type) {
      throw new UpstreamError('bad_answer', 'the answer does not match the question');
    }
    const got = { bytes: Buffer.from(bytes), packet };
    if (packet.rcode === 'SERVFAIL' || packet.rcode === 'REFUSED' || packet.rcode === 'NOTIMP') throw new UpstreamError('declined', `answered ${packet.rcode}`, got);
    return got;
  }

  /** One datagram to the upstream and its answer. A connected socket takes datagrams from that peer only, and learns at once of a closed port. */
  #udpExchange(upstream: Upstream, out: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket(isIPv6(upstream.address) ? 'udp6' : 'udp4');
      const signal = this.#stopping.signal;
      let settled = false;
      const done = (err: Error | undefined, answer?: Buffer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        socket.close();
        if (err) reject(err);
        else resolve(answer!);
      };
      const onAbort = () => done(new UpstreamError('error', 'the DNS server is stopping'));
      const timer = setTimeout(() => done(new UpstreamError('timeout', `no answer in ${this.#opts.forwardTimeoutMs} ms`)), this.#opts.forwardTimeoutMs);
      signal.addEventListener('abort', onAbort);
      socket.on('error', (e) => done(new UpstreamError('error', e.message)));
      // Another id on this socket is a late or forged datagram: wait for ours.
      socket.on('message', (m) => m.length >= 2 && m.readUInt16BE(0) === out.readUInt16BE(0) && done(undefined, m));
      // A connect that fails (no route from this namespace, EACCES) hands its error to this callback
      // and leaves the socket unconnected: sending then would throw out of the event loop.
      socket.connect(upstream.port, upstream.address, ((e?: Error) => {
        if (e) done(new UpstreamError('error', e.message));
        else socket.send(out, (err) => err && done(new UpstreamError('error', err.message)));
      }) as () => void);
    });
  }

  /** One query over TCP (a 2-byte length, then the message) and its answer. */
  #tcpExchange(upstream: Upstream, out: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: upstream.address, port: upstream.port });
      const signal = this.#stopping.signal;
      let settled = false;
      let pending = Buffer.alloc(0);
      const done = (err: Error | undefined, answer?: Buffer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        socket.destroy();
        if (err) reject(err);
        else resolve(answer!);
      };
      const onAbort = () => done(new UpstreamError('error', 'the DNS server is stopping'));
      const timer = setTimeout(() => done(new UpstreamError('timeout', `no answer over TCP in ${this.#opts.forwardTimeoutMs} ms`)), this.#opts.forwardTimeoutMs);
      signal.addEventListener('abort', onAbort);
      socket.on('error', (e) => done(new UpstreamError('error', e.message)));
      socket.on('close', () => done(new UpstreamError('error', 'the connection closed before a whole answer')));
      socket.on('connect', () => socket.write(framed(out)));
      socket.on('data', (chunk) => {
        pending = Buffer.concat([pending, chunk]);
        if (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) done(undefined, pending.subarray(2, 2 + pending.readUInt16BE(0)));
      });
    });
  }

  #maybeRereadResolvConf(): void {
    if (!this.options.resolvConf || this.#resolvConfReading || performance.now() - this.#resolvConfReadAt < this.#opts.resolvConfRefreshMs) return;
    this.#resolvConfReading = true;
    void this.#readResolvConf().finally(() => (this.#resolvConfReading = false));
  }

  async #readResolvConf(): Promise<void> {
    const path = this.options.resolvConf!;
    this.#resolvConfReadAt = performance.now();
    let text: string;
    try {
      text = await readFile(path, 'utf8');
    } catch (e) {
      // A missing file is a host without resolvers; anything else keeps the upstreams we have.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') {
        this.#log.warn({ path, err: (e as Error).message }, 'cannot read resolv.conf: keeping the upstreams');
        return;
      }
      text = '';
    }
    const { upstreams, ignored } = upstreamsFromResolvConf(text, this.#bound);
    if (JSON.stringify(upstreams) !== JSON.stringify(this.#upstreams)) {
      this.#log.info({ path, upstreams: upstreams.map((a) => joinHostPort(a.address, a.port)), ignored }, upstreams.length ? 'DNS upstreams' : 'no DNS upstreams: names outside the cluster get SERVFAIL');
    }
    this.#upstreams = upstreams;
  }

  // ---- sockets --------------------------------------------------------------------------------

  /** UDP and TCP on one address and port; for port 0, a port free for both. Returns the port. */
  async #bindBoth(address: string, port: number): Promise<number> {
    for (let attempt = 1; ; attempt++) {
      const tcp = await this.#listenTcp(address, port);
      const bound = (tcp.address() as AddressInfo).port;
      try {
        this.#udp.push(await this.#bindUdp(address, bound));
        this.#tcp.push(tcp);
        return bound;
      } catch (e) {
        await new Promise<void>((resolve) => tcp.close(() => resolve()));
        if (!(port === 0 && e instanceof DnsBindError && e.code === 'EADDRINUSE' && attempt < FREE_PORT_TRIES)) throw e;
      }
    }
  }

  #bindUdp(address: string, port: number): Promise<dgram.Socket> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket({ type: isIPv6(address) ? 'udp6' : 'udp4', ipv6Only: isIPv6(address) });
      socket.once('error', (e: NodeJS.ErrnoException) => {
        socket.close();
        reject(new DnsBindError('udp', address, port, e.code, e.message));
      });
      socket.bind({ address, port, exclusive: true }, () => {
        socket.removeAllListeners('error');
        socket.on('error', (e) => this.#log.warn({ err: e.message, address }, 'DNS UDP socket error'));
        socket.on('message', (msg, peer) => {
          void this.#answer(msg, 'udp').then((reply) => {
            if (!reply) return;
            try {
              socket.send(reply, peer.port, peer.address);
            } catch {
              // Stopped meanwhile: the client asks again elsewhere.
            }
          });
        });
        resolve(socket);
      });
    });
  }

  #listenTcp(address: string, port: number): Promise<net.Server> {
    return new Promise((resolve, reject) => {
      const server = net.createServer((c) => this.#serveTcp(c));
      server.maxConnections = MAX_TCP_CONNECTIONS;
      server.once('error', (e: NodeJS.ErrnoException) => reject(new DnsBindError('tcp', address, port, e.code, e.message)));
      server.listen({ host: address, port, ipv6Only: isIPv6(address), exclusive: true }, () => {
        server.removeAllListeners('error');
        server.on('error', (e) => this.#log.warn({ err: e.message, address }, 'DNS TCP server error'));
        resolve(server);
      });
    });
  }

  /** One TCP client: length-prefixed messages, several per connection, answered as they are ready (RFC 7766). */
  #serveTcp(c: net.Socket): void {
    this.#connections.add(c);
    c.on('close', () => this.#connections.delete(c));
    c.on('error', () => undefined); // a client that resets is not our problem
    c.setNoDelay(true);
    c.setTimeout(this.#opts.tcpIdleMs, () => c.destroy());
    let pending = Buffer.alloc(0);
    c.on('data', (chunk) => {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const msg = Buffer.from(pending.subarray(2, 2 + pending.readUInt16BE(0)));
        pending = pending.subarray(2 + msg.length);
        void this.#answer(msg, 'tcp').then((reply) => reply && !c.destroyed && c.write(framed(reply)));
      }
    });
  }
}

/** A message as TCP carries it: its length in two bytes first (RFC 1035 §4.2.2). */
function framed(msg: Buffer): Buffer {
  const head = Buffer.alloc(2);
  head.writeUInt16BE(msg.length);
  return Buffer.concat([head, msg]);
}

