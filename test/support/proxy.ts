// A loopback TCP proxy that a test can cut and restore: a real network partition between one
// client and etcd, without touching etcd itself. It also fronts a unix socket (Docker's), so one
// node-agent can lose its Docker engine while the engine stays up for everyone else.
// Two finer faults reproduce lost messages for real: a request that reaches etcd while its reply
// never comes back (`loseReplyTo`), and, for HTTP/2 (gRPC) traffic, single server frames that
// never arrive (`dropFrames`), such as one watch event.
import { rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface ProxyOptions {
  /**
   * The traffic is HTTP/2 (etcd's gRPC): split what the server sends into frames from the first
   * byte, so `dropFrames` can remove whole frames without breaking the connection's framing.
   */
  http2?: boolean;
}

export interface LoseReplyOptions {
  /** How long the request has to reach etcd and commit before the connection is cut (default 300 ms). */
  settleMs?: number;
  /** Then refuse new connections for this long, so the client's own retries fail too (default 0). */
  refuseMs?: number;
}

interface Pair {
  client: Socket;
  upstream: Socket;
  /** Replies on this connection are discarded (a request whose reply is lost is in flight). */
  blackholed: boolean;
  /** The end of the last client chunk, so a pattern split across two chunks is still seen. */
  tail: Buffer;
  /** Server bytes not yet forming a whole HTTP/2 frame (http2 mode). */
  pending: Buffer;
}

interface RequestWatch {
  pattern: Buffer;
  onSeen(pair: Pair): void;
}

const FRAME_HEADER = 9;
const FRAME_DATA = 0x0;
const FLAG_END_STREAM = 0x1;

export class TcpProxy {
  private server?: Server;
  private pairs = new Set<Pair>();
  private paused = false;
  private refuseTimer?: NodeJS.Timeout;
  private requestWatches: RequestWatch[] = [];
  private frameFilters: ((payload: Buffer) => boolean)[] = [];
  port = 0;
  private listenPath?: string;

  /** target: a loopback TCP port, or the path of a unix socket. */
  constructor(
    private readonly target: number | string,
    private readonly opts: ProxyOptions = {},
  ) {}

  /** Listens on a free loopback port (http://127.0.0.1:PORT), or on a unix socket (unix://PATH). */
  async start(listenPath?: string): Promise<string> {
    this.server = createServer((client) => {
      if (this.paused || this.refusing?.(client)) return client.destroy();
      const upstream = typeof this.target === 'number' ? connect(this.target, '127.0.0.1') : connect(this.target);
      const pair: Pair = { client, upstream, blackholed: false, tail: Buffer.alloc(0), pending: Buffer.alloc(0) };
      this.pairs.add(pair);
      client.on('data', (chunk: Buffer) => this.fromClient(pair, chunk));
      upstream.on('data', (chunk: Buffer) => this.fromServer(pair, chunk));
      // A half-close travels on, as pipe() would carry it.
      client.on('end', () => upstream.end());
      upstream.on('end', () => !pair.blackholed && client.end());
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    if (listenPath) {
      this.listenPath = listenPath;
      rmSync(listenPath, { force: true });
      await new Promise<void>((r) => this.server!.listen(listenPath, () => r()));
      return `unix://${listenPath}`;
    }
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', () => r()));
    const a = this.server.address();
    this.port = typeof a === 'object' && a ? a.port : 0;
    return `http://127.0.0.1:${this.port}`;
  }

  private fromClient(pair: Pair, chunk: Buffer): void {
    const seen = Buffer.concat([pair.tail, chunk]);
    const longest = Math.max(0, ...this.requestWatches.map((w) => w.pattern.length));
    pair.tail = longest > 1 ? seen.subarray(Math.max(0, seen.length - (longest - 1))) : Buffer.alloc(0);
    for (const w of [...this.requestWatches])
      if (seen.includes(w.pattern)) {
        this.requestWatches.splice(this.requestWatches.indexOf(w), 1);
        w.onSeen(pair); // before forwarding: a blackhole must be in place before the reply can come
      }
    pair.upstream.write(chunk);
  }

  private fromServer(pair: Pair, chunk: Buffer): void {
    if (pair.blackholed) return;
    if (!this.opts.http2) {
      pair.client.write(chunk);
      return;
    }
    // Forward whole frames only, leaving out the DATA frames a filter matches.
    let buf = pair.pending.length ? Buffer.concat([pair.pending, chunk]) : chunk;
    const out: Buffer[] = [];
    while (buf.length >= FRAME_HEADER) {
      const length = buf.readUIntBE(0, 3);
      if (buf.length < FRAME_HEADER + length) break;
      const frame = buf.subarray(0, FRAME_HEADER + length);
      buf = buf.subarray(FRAME_HEADER + length);
      const type = frame[3]!;
      const flags = frame[4]!;
      // A frame that ends its stream is never dropped: that would leave a call open forever.
      const payload = frame.subarray(FRAME_HEADER);
      if (type === FRAME_DATA && !(flags & FLAG_END_STREAM) && this.frameFilters.some((f) => f(payload))) continue;
      out.push(frame);
    }
    pair.pending = Buffer.from(buf);
    if (out.length) pair.client.write(Buffer.concat(out));
  }

  /** Resolves when a client sends bytes containing `pattern` (e.g. a key it asks about). */
  waitForRequest(pattern: string | Buffer): Promise<void> {
    return new Promise((resolve) => this.requestWatches.push({ pattern: Buffer.from(pattern), onSeen: () => resolve() }));
  }

  /**
   * The next request containing `pattern` reaches the server, but its reply never comes back:
   * the connection it went on stops delivering anything to the client and is cut after
   * `settleMs`. Resolves once the connection has been cut.
   */
  loseReplyTo(pattern: string | Buffer, opts: LoseReplyOptions = {}): Promise<void> {
    return new Promise((resolve) =>
      this.requestWatches.push({
        pattern: Buffer.from(pattern),
        onSeen: (pair) => {
          pair.blackholed = true;
          setTimeout(() => {
            if (opts.refuseMs) this.refuseFor(opts.refuseMs);
            pair.client.destroy();
            pair.upstream.destroy();
            this.pairs.delete(pair);
            resolve();
          }, opts.settleMs ?? 300);
        },
      }),
    );
  }

  /**
   * HTTP/2 only: server DATA frames whose payload matches are dropped until the returned function
   * is called. The connection stays up; only those messages are lost.
   */
  dropFrames(match: (payload: Buffer) => boolean): () => void {
    if (!this.opts.http2) throw new Error('dropFrames needs a proxy made with { http2: true }');
    this.frameFilters.push(match);
    return () => {
      this.frameFilters = this.frameFilters.filter((f) => f !== match);
    };
  }

  private refuseFor(ms: number): void {
    this.paused = true;
    clearTimeout(this.refuseTimer);
    this.refuseTimer = setTimeout(() => (this.paused = false), ms);
  }

  /** Cuts every connection and refuses new ones. */
  pause(): void {
    this.paused = true;
    clearTimeout(this.refuseTimer);
    for (const p of this.pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    this.pairs.clear();
  }

  resume(): void {
    clearTimeout(this.refuseTimer);
    this.paused = false;
  }

  private refusing?: (client: Socket) => boolean;

  /**
   * Cuts only some clients: connections whose client side `match`es are ended now, and new ones
   * refused, until `refuseFrom(undefined)` (a one-way cut between two peers sharing this proxy).
   */
  refuseFrom(match: ((client: Socket) => boolean) | undefined): void {
    this.refusing = match;
    if (!match) return;
    for (const p of [...this.pairs]) {
      if (!match(p.client)) continue;
      p.client.destroy();
      p.upstream.destroy();
      this.pairs.delete(p);
    }
  }

  async close(): Promise<void> {
    this.pause();
    this.requestWatches = [];
    await new Promise<void>((r) => this.server?.close(() => r()) ?? r());
    if (this.listenPath) rmSync(this.listenPath, { force: true });
  }
}
