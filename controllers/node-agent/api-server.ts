// The agent's logs and exec endpoint: HTTPS with mutual TLS, on the node's address, published in
// its Node (status.api). `jaco logs` and `jaco exec` dial it directly — the bytes never go through
// etcd. It is a narrow, authorised window on Docker's own API for this node's replicas only: a
// replica id is looked up among the agent's containers (never a raw container id from outside),
// and the exec calls are Docker's (create, start hijacked over an HTTP upgrade, resize, inspect),
// passed through with the stream format Docker gives (multiplexed stdout/stderr without a TTY).
//
// Trust (docs/operate.md): the TLS layer admits only certificates the cluster CA issued for client
// use (a node's or the registry's server certificate is refused); the common name then says the
// role — operator:<name> may read logs and exec, viewer:<name> only read logs (src/pki/identity.ts).
// Every request is logged with who made it.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type Docker from 'dockerode';
import type { Logger } from '../../src/observability/log.js';
import { refusal, type ApiAction, type TlsMaterial } from '../../src/pki/identity.js';
import type { ContainerFacts } from './facts.js';
import { agentMetrics } from './metrics.js';
import { PREVIOUS_LINES, PreviousLogs } from './previous-logs.js';
import { joinHostPort } from '../../src/api/network.js';

/** The agent's default port for the endpoint (beside /metrics on 9465 and the ingress's 9466). */
export const DEFAULT_API_PORT = 9467;

/** An exec created but never started is forgotten after this long. */
const EXEC_UNSTARTED_TTL_MS = 60_000;
/** A started exec whose end nobody asked about is forgotten after a day (its shell may still run). */
const EXEC_STARTED_TTL_MS = 86_400_000;

export interface AgentApiOptions {
  node: string;
  /** Where it listens (the node's address; port 0: any free one). */
  host: string;
  port: number;
  tls: TlsMaterial;
  docker: Docker;
  /** The agent's containers as it knows them now. */
  containers: () => Iterable<ContainerFacts>;
  log: Logger;
  /** Where the previous containers' lines outlive the agent (its state directory's previous/); else memory only. */
  previousDir?: string;
  now?: () => number;
}

/** An exec this agent created: only its creator may start, resize or inspect it. */
interface ExecSession {
  replica: string;
  container: string;
  who: string;
  tty: boolean;
  stdin: boolean;
  createdAt: number;
  started: boolean;
}

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/**
 * The replica's container a request means: the one named (a prefix of its id, which must be the
 * replica's), else the running one, else the newest. Sandboxes never.
 */
export function replicaContainer(containers: Iterable<ContainerFacts>, replica: string, id?: string): ContainerFacts | undefined {
  const mine = [...containers].filter((c) => c.replica === replica && c.role !== 'sandbox');
  if (id) return mine.find((c) => c.id.startsWith(id));
  return mine.sort((a, b) => Number(b.state === 'running') - Number(a.state === 'running') || (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))[0];
}

export class AgentApi {
  private server?: Server;
  private readonly execs = new Map<string, ExecSession>();
  /** Open streams (logs followed, exec sessions): closed when the agent stops. */
  private readonly open = new Set<{ destroy(): void }>();
  private readonly now: () => number;
  private readonly sockets = new Set<Duplex>();
  /** Per replica: the last lines of its last removed container (Docker's stream format, timestamps on). */
  private readonly previous: PreviousLogs;
  endpoint = '';

  constructor(private readonly opts: AgentApiOptions) {
    this.now = opts.now ?? Date.now;
    this.previous = new PreviousLogs(opts.previousDir);
  }

  async start(): Promise<string> {
    const { tls } = this.opts;
    // allowHalfOpen: a client's end of stdin (EOF to the command) must not end the command's output.
    const server = createServer({ ca: tls.ca, cert: tls.cert, key: tls.key, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.2', allowHalfOpen: true } as Parameters<typeof createServer>[0], (req, res) => void this.handle(req, res));
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket as TLSSocket, head));
    server.on('tlsClientError', (e: Error) => this.opts.log.debug({ err: e.message }, 'api: TLS handshake refused'));
    // Every connection, to close them all on stop (a followed log or a shell would hold it open).
    server.on('connection', (socket: Duplex) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    this.server = server;
    const a = server.address() as AddressInfo;
    this.endpoint = joinHostPort(a.address, a.port);
    this.opts.log.info({ endpoint: this.endpoint }, 'logs and exec endpoint listening (mutual TLS)');
    return this.endpoint;
  }

  async stop(): Promise<void> {
    for (const s of this.open) s.destroy();
    this.open.clear();
    const server = this.server;
    if (!server) return;
    const closed = new Promise<void>((r) => server.close(() => r()));
    for (const socket of this.sockets) socket.destroy();
    await closed;
  }

  // ------------------------------------------------------------------ requests

  /** The caller's certificate name, when it may do `action` (else HttpError 403). */
  private authorize(socket: TLSSocket, action: ApiAction, what: string): string {
    const cn = socket.getPeerCertificate()?.subject?.CN as string | string[] | undefined;
    const name = Array.isArray(cn) ? cn.join(',') : cn;
    const why = refusal(name, action);
    if (why) {
      agentMetrics.apiRequests.inc({ action, result: 'forbidden' });
      this.opts.log.warn({ who: name, action, what }, `api: refused: ${why}`);
      throw new HttpError(403, why);
    }
    return name!;
  }

  private container(replica: string, id?: string): ContainerFacts {
    const c = replicaContainer(this.opts.containers(), replica, id);
    if (!c) throw new HttpError(404, id ? `replica ${replica} has no container ${id} on node ${this.opts.node}` : `replica ${replica} has no container on node ${this.opts.node}`);
    return c;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://agent');
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    try {
      if (parts[0] !== 'v1') throw new HttpError(404, `no such endpoint ${url.pathname}`);
      if (req.method === 'GET' && parts[1] === 'replicas' && parts[3] === 'logs' && parts.length === 4) return await this.logs(req, res, parts[2]!, url.searchParams);
      if (req.method === 'POST' && parts[1] === 'replicas' && parts[3] === 'exec' && parts.length === 4) return await this.execCreate(req, res, parts[2]!);
      if (parts[1] === 'exec' && parts.length >= 3) {
        const session = this.session(req, parts[2]!);
        if (req.method === 'POST' && parts[3] === 'resize') return await this.execResize(res, parts[2]!, url.searchParams);
        if (req.method === 'GET' && parts.length === 3) return await this.execInspect(res, parts[2]!, session);
      }
      throw new HttpError(404, `no such endpoint ${req.method} ${url.pathname}`);
    } catch (e) {
      const status = e instanceof HttpError ? e.status : dockerStatus(e);
      if (!res.headersSent) {
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ message: (e as Error).message }));
      } else res.destroy();
    }
  }

  /** Keeps the last lines of a replica's container about to be removed (a restart's, a replacement's). */
  async keepPrevious(id: string, replica: string): Promise<void> {
    const container = this.opts.docker.getContainer(id);
    const tty = !!(await container.inspect()).Config?.Tty;
    const log = (await container.logs({ stdout: true, stderr: true, timestamps: true, tail: PREVIOUS_LINES, follow: false })) as unknown as Buffer;
    this.previous.keep(replica, { container: id, tty, log });
  }

  private async logs(req: IncomingMessage, res: ServerResponse, replica: string, q: URLSearchParams): Promise<void> {
    const who = this.authorize(req.socket as TLSSocket, 'logs', replica);
    if (q.get('previous') === '1') {
      const p = this.previous.get(replica);
      if (!p) throw new HttpError(404, `node ${this.opts.node} kept no previous container of replica ${replica} (none was restarted or replaced on it${this.opts.previousDir ? '' : ' since its agent started'})`);
      this.opts.log.info({ who, replica, container: p.container, previous: true }, 'api: logs');
      agentMetrics.apiRequests.inc({ action: 'logs', result: 'ok' });
      res.writeHead(200, { 'Content-Type': p.tty ? 'application/vnd.docker.raw-stream' : 'application/vnd.docker.multiplexed-stream', 'X-Jaco-Container': p.container, 'X-Jaco-Tty': p.tty ? '1' : '0' });
      res.end(p.log);
      return;
    }
    const c = this.container(replica, q.get('container') ?? undefined);
    const follow = q.get('follow') === '1';
    const since = q.get('since');
    const tail = q.get('tail');
    if (since !== null && !/^\d+(\.\d+)?$/.test(since)) throw new HttpError(400, `since: ${JSON.stringify(since)} is not a Unix time`);
    if (tail !== null && !/^\d+$/.test(tail)) throw new HttpError(400, `tail: ${JSON.stringify(tail)} is not a count`);
    const container = this.opts.docker.getContainer(c.id);
    const tty = !!(await container.inspect()).Config?.Tty;
    this.opts.log.info({ who, replica, container: c.name, follow }, 'api: logs');
    agentMetrics.apiRequests.inc({ action: 'logs', result: 'ok' });
    const base = { stdout: true, stderr: true, timestamps: true, ...(since !== null ? { since: Number(since) } : {}), ...(tail !== null ? { tail: Number(tail) } : {}) };
    const head = { 'Content-Type': tty ? 'application/vnd.docker.raw-stream' : 'application/vnd.docker.multiplexed-stream', 'X-Jaco-Container': c.id, 'X-Jaco-Tty': tty ? '1' : '0' };
    if (!follow) {
      const buf = (await container.logs({ ...base, follow: false })) as unknown as Buffer;
      res.writeHead(200, head);
      res.end(buf);
      return;
    }
    const stream = (await container.logs({ ...base, follow: true })) as NodeJS.ReadableStream & { destroy(): void };
    res.writeHead(200, head);
    // Each write goes out at once: a followed line is shown as it is written.
    res.flushHeaders();
    this.open.add(stream);
    const done = () => {
      this.open.delete(stream);
      stream.destroy();
    };
    req.on('close', done);
    stream.on('error', () => res.destroy());
    stream.on('end', () => {
      done();
      res.end();
    });
    stream.pipe(res, { end: false });
  }

  private async readJson(req: IncomingMessage): Promise<unknown> {
    let body = '';
    for await (const chunk of req as AsyncIterable<Buffer>) {
      body += chunk.toString();
      if (body.length > 1 << 20) throw new HttpError(413, 'request body over 1 MiB');
    }
    try {
      return JSON.parse(body || '{}');
    } catch {
      throw new HttpError(400, 'the body is not JSON');
    }
  }

  private async execCreate(req: IncomingMessage, res: ServerResponse, replica: string): Promise<void> {
    const body = (await this.readJson(req)) as { cmd?: unknown; tty?: unknown; stdin?: unknown };
    const cmd = body.cmd;
    if (!Array.isArray(cmd) || !cmd.length || !cmd.every((a) => typeof a === 'string')) throw new HttpError(400, 'cmd: a non-empty list of strings');
    const who = this.authorize(req.socket as TLSSocket, 'exec', replica);
    const c = this.container(replica);
    if (c.state !== 'running') throw new HttpError(409, `replica ${replica}'s container on node ${this.opts.node} is ${c.state}, not running`);
    const tty = body.tty === true;
    const stdin = body.stdin === true;
    const exec = await this.opts.docker.getContainer(c.id).exec({ Cmd: cmd as string[], AttachStdin: stdin, AttachStdout: true, AttachStderr: true, Tty: tty });
    this.prune();
    this.execs.set(exec.id, { replica, container: c.id, who, tty, stdin, createdAt: this.now(), started: false });
    this.opts.log.info({ who, replica, container: c.name, cmd, tty, stdin, exec: exec.id }, 'api: exec');
    agentMetrics.apiRequests.inc({ action: 'exec', result: 'ok' });
    res.writeHead(201, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ id: exec.id }));
  }

  /** The caller's own exec (another certificate's is not found, as if it did not exist). */
  private session(req: IncomingMessage, id: string): ExecSession {
    const who = this.authorize(req.socket as TLSSocket, 'exec', id);
    const s = this.execs.get(id);
    if (!s || s.who !== who) throw new HttpError(404, `no exec ${id} of yours on node ${this.opts.node}`);
    return s;
  }

  private async execResize(res: ServerResponse, id: string, q: URLSearchParams): Promise<void> {
    const [h, w] = [Number(q.get('h')), Number(q.get('w'))];
    if (!(Number.isInteger(h) && h > 0 && Number.isInteger(w) && w > 0)) throw new HttpError(400, 'h and w: positive whole numbers');
    await this.opts.docker.getExec(id).resize({ h, w });
    res.writeHead(200);
    res.end();
  }

  private async execInspect(res: ServerResponse, id: string, s: ExecSession): Promise<void> {
    const info = await this.opts.docker.getExec(id).inspect();
    if (!info.Running && s.started) this.execs.delete(id);
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ running: info.Running, exitCode: info.ExitCode }));
  }

  /** POST /v1/exec/<id>/start with Upgrade: tcp — Docker's hijacked stream, both ways. */
  private async upgrade(req: IncomingMessage, socket: TLSSocket, head: Buffer): Promise<void> {
    const fail = (status: number, message: string) => {
      socket.end(`HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : status === 404 ? 'Not Found' : 'Error'}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${JSON.stringify({ message })}`);
    };
    const parts = new URL(req.url ?? '/', 'https://agent').pathname.split('/').filter(Boolean);
    if (req.method !== 'POST' || parts[0] !== 'v1' || parts[1] !== 'exec' || parts[3] !== 'start' || parts.length !== 4) return fail(404, `no upgrade at ${req.method} ${req.url}`);
    const id = decodeURIComponent(parts[2]!);
    let s: ExecSession;
    try {
      s = this.session(req, id);
    } catch (e) {
      return fail((e as HttpError).status ?? 500, (e as Error).message);
    }
    if (s.started) return fail(409, `exec ${id} was started already`);
    s.started = true;
    let stream: Duplex;
    try {
      stream = (await this.opts.docker.getExec(id).start({ hijack: true, stdin: s.stdin, Tty: s.tty })) as Duplex;
    } catch (e) {
      return fail(dockerStatus(e), (e as Error).message);
    }
    socket.write(`HTTP/1.1 101 UPGRADED\r\nContent-Type: ${s.tty ? 'application/vnd.docker.raw-stream' : 'application/vnd.docker.multiplexed-stream'}\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n`);
    const session = { destroy: () => (stream.destroy(), socket.destroy()) };
    this.open.add(session);
    if (head.length) stream.write(head);
    // The client's EOF on stdin is the command's; the command's end is the client's.
    socket.pipe(stream, { end: false });
    socket.on('end', () => (s.stdin ? (stream as Duplex & { end(): void }).end() : undefined));
    stream.pipe(socket, { end: false });
    stream.on('end', () => socket.end());
    const close = () => {
      this.open.delete(session);
      stream.destroy();
    };
    socket.on('close', close);
    socket.on('error', close);
    stream.on('error', () => socket.destroy());
  }

  private prune(): void {
    const now = this.now();
    for (const [id, s] of this.execs) if (now - s.createdAt > (s.started ? EXEC_STARTED_TTL_MS : EXEC_UNSTARTED_TTL_MS)) this.execs.delete(id);
  }
}

/** Docker's HTTP status of an error (dockerode sets statusCode), else 502: the engine failed us. */
function dockerStatus(e: unknown): number {
  const code = (e as { statusCode?: number }).statusCode;
  return typeof code === 'number' && code >= 400 && code < 600 ? (code === 500 ? 502 : code) : 502;
}
