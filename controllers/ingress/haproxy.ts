// The ingress's HAProxy: its skeleton configuration (pure), its runtime API on a unix socket, and
// the process (master-worker, a child of `jaco ingress`, never the system service). The config
// holds frontends and backends; servers come and go through the runtime API, and only a change of
// the frontend set reloads (the servers of that moment are then written into the config, so a
// reload never leaves a backend empty).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import type { Logger } from '../../src/observability/log.js';

/**
 * One port of one service: a frontend and its backend. A published port is answered on the node's
 * address; a service's own port on the service's addresses (`addresses`, answered on every node).
 */
export interface Route {
  /** The port it answers on: the published port, or the service's container port. */
  published: number;
  deployment: string;
  service: string;
  portName: string;
  backend: string;
  /** The service's addresses (IPv4, IPv6) for a service route; absent for a published port (the node's address). */
  addresses?: string[];
  /** tcp: connections are passed on as they are; http: requests (the port is named http, or says app_protocol http). */
  mode: 'tcp' | 'http';
}

/** A frontend's name: one per published port, one per service port. */
export function frontendName(r: Route): string {
  return r.addresses ? safe(`fe_svc_${r.deployment}_${r.service}_${r.portName}`) : `fe_${r.published}`;
}

/** HAProxy's bind of one address (IPv6 with its family prefix: the last colon is the port's). */
const bindOf = (addr: string, port: number) => (addr.includes(':') ? `ipv6@${addr}:${port}` : `${addr}:${port}`);

export interface ServerAddr {
  addr: string;
  port: number;
}

/** How long a reload may take to show a new worker (a loaded machine is slow to fork and parse). */
const RELOAD_TIMEOUT_MS = 20_000;
/** A reload signal not answered by a new worker this long is sent again (it may have been lost). */
const RELOAD_RESIGNAL_MS = 3_000;

/** HAProxy names take letters, digits, '-', '_', '.' and ':'. */
const safe = (s: string) => s.replace(/[^A-Za-z0-9_.:-]/g, '_');

export function backendName(deployment: string, service: string, portName: string): string {
  return safe(`be_${deployment}_${service}_${portName}`);
}

/** A server per (replica, node, port): a moved replica's two copies are two servers, a new port a new one. */
export function serverName(replica: string, node: string, port: number): string {
  return safe(`${replica}__${node}_${port}`);
}

/** HAProxy's own health checks: the second line behind jaco's routing decisions. */
export const SERVER_CHECK = 'check inter 1s fall 2 rise 1';

export interface ConfigInput {
  socket: string;
  address: string;
  routes: readonly Route[];
  /** Servers written statically (those routed at the moment of a reload), by backend. */
  servers: ReadonlyMap<string, ReadonlyMap<string, ServerAddr>>;
  /**
   * Frontends left out because HAProxy could not bind them (a port another process holds, an
   * address the node does not have): their backends stay, so the runtime API still finds them.
   */
  unbound?: ReadonlySet<string>;
  /** HAProxy's threads (ingressThreads); absent: HAProxy's default, one per CPU. */
  threads?: number;
}

/**
 * The ingress's share of a node's CPUs: half of them, at least one. It shares the node with the
 * replicas it forwards to; on two cores, a second thread fighting them cost a service address
 * 40 % more latency per hop (docs/benchmarks.md, the service address).
 */
export function ingressThreads(cpus: number): number {
  return Math.max(1, Math.floor(cpus / 2));
}

/** A frontend HAProxy could not bind, as its alert says it. */
export interface BindFailure {
  frontend: string;
  /** The address:port it tried. */
  address: string;
  /** The system's reason (Address already in use, Cannot assign requested address, …). */
  reason: string;
}

/** HAProxy's alerts: "Binding [cfg:12] for frontend fe_x: cannot bind socket (Address already in use) for [127.0.0.1:80]". */
const BIND_ALERT = /for (?:frontend|proxy) (\S+): cannot bind socket \(([^)]*)\) for \[([^\]]+)\]/;

/** The bind failures in HAProxy's output (every failing frontend is named, all at once). */
export function parseBindFailures(lines: readonly string[]): BindFailure[] {
  const out: BindFailure[] = [];
  for (const l of lines) {
    const m = BIND_ALERT.exec(l);
    if (m && !out.some((f) => f.frontend === m[1] && f.address === m[3])) out.push({ frontend: m[1]!, reason: m[2]!, address: m[3]! });
  }
  return out;
}

/** A start or reload refused because frontends could not bind: the caller leaves them out and loads again. */
export class BindError extends Error {
  override name = 'BindError';
  constructor(readonly failures: readonly BindFailure[]) {
    super(`haproxy could not bind ${failures.map((f) => `${f.frontend} on ${f.address} (${f.reason})`).join(', ')}`);
  }
}

/** The skeleton configuration (deterministic: routes by port, servers by name). */
export function renderConfig(c: ConfigInput): string {
  const out = [
    '# Written by jaco ingress: frontends and backends only; servers change through the runtime API.',
    'global',
    // expose-fd listeners: a reload's new worker takes the listening sockets over from the old
    // one (a seamless reload: no connection refused or reset while the frontend set changes).
    `  stats socket ${c.socket} mode 600 level admin expose-fd listeners`,
    '  stats timeout 30s',
    '  maxconn 4096',
    ...(c.threads ? [`  nbthread ${c.threads}`] : []),
    // An old worker gives up on connections still open this long after a reload.
    '  hard-stop-after 30s',
    '',
    'defaults',
    // Each frontend and backend says its own mode (tcp unless the port speaks HTTP).
    '  mode tcp',
    '  timeout connect 2s',
    '  timeout client 30s',
    '  timeout server 30s',
    '  timeout http-keep-alive 5s',
    '  retries 2',
    '  option redispatch 1',
    '',
  ];
  const routes = [...c.routes].sort((a, b) => a.published - b.published || (frontendName(a) < frontendName(b) ? -1 : 1));
  for (const r of routes) {
    if (c.unbound?.has(frontendName(r))) continue;
    // A service address is answered because the service range is local to the node
    // (Ingress.makeServiceRangesLocal). A local route lets an IPv4 socket bind any address of it,
    // not an IPv6 one (its bind wants the address on a link): `transparent` binds it regardless
    // (IPV6_TRANSPARENT; the ingress runs as root), else HAProxy refuses the whole configuration.
    const binds = r.addresses ? r.addresses.map((a) => `  bind ${bindOf(a, r.published)} transparent`) : [`  bind ${bindOf(c.address, r.published)}`];
    // On a reload the old worker keeps a client's idle keep-alive connection until its next
    // request and answers that one with "Connection: close", instead of closing it under a client
    // that may be sending on it at that moment (a failed request).
    const http = r.mode === 'http' ? ['  option idle-close-on-response'] : [];
    out.push(`frontend ${frontendName(r)}`, `  mode ${r.mode}`, ...binds, ...http, `  default_backend ${r.backend}`, '');
  }
  // A published port and the service's own port of the same service port share one backend.
  const backends = new Map(routes.map((r) => [r.backend, r]));
  for (const [name, r] of [...backends].sort(([a], [b]) => (a < b ? -1 : 1))) {
    out.push(`backend ${name}`, `  mode ${r.mode}`, '  balance roundrobin');
    const servers = c.servers.get(name);
    for (const s of [...(servers?.keys() ?? [])].sort()) {
      const x = servers!.get(s)!;
      out.push(`  server ${s} ${x.addr}:${x.port} ${SERVER_CHECK}`);
    }
    out.push('');
  }
  return out.join('\n');
}

export class RuntimeApiError extends Error {
  override name = 'RuntimeApiError';
}

/** Sends one command to the runtime API and returns its answer (the socket closes after it). */
export function runtimeCommand(socket: string, command: string, timeoutMs = 5000): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(socket);
    let out = '';
    const timer = setTimeout(() => {
      s.destroy();
      reject(new RuntimeApiError(`${command}: no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    s.setEncoding('utf8');
    s.on('connect', () => s.write(`${command}\n`));
    s.on('data', (d: string) => (out += d));
    s.on('error', (e) => {
      clearTimeout(timer);
      reject(new RuntimeApiError(`${command}: ${e.message}`));
    });
    s.on('close', () => {
      clearTimeout(timer);
      resolve(out.trim());
    });
  });
}

/** What HAProxy answers to a command that worked: nothing, or one of these. */
const OK_ANSWER = /^(|New server registered\.|Server deleted\.)$/;
/** Its refusal to delete a server that connections are still on (in maintenance, it gets no new ones). */
const STILL_CONNECTED = /^Server still has connections attached to it/;

/**
 * Sends a command that must work; `held` when HAProxy refused to delete a server because
 * connections are still on it (asked again later), any other answer is an error.
 */
export async function runtimeOk(socket: string, command: string): Promise<'ok' | 'held'> {
  const a = await runtimeCommand(socket, command);
  if (OK_ANSWER.test(a)) return 'ok';
  if (command.startsWith('del server ') && STILL_CONNECTED.test(a)) return 'held';
  throw new RuntimeApiError(`${command}: ${a}`);
}

/** The worker's pid from `show info` (changes when a reload's new worker takes the socket). */
export async function workerPid(socket: string): Promise<number | undefined> {
  try {
    const m = /^Pid: (\d+)$/m.exec(await runtimeCommand(socket, 'show info', 1000));
    return m ? Number(m[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Per backend and server: sessions, requests and errors from `show stat` (CSV). */
export interface ServerStat {
  backend: string;
  server: string;
  status: string;
  sessions: number;
  requests: number;
  errors: number;
  /** Connection retries and redispatches (HAProxy's own second line: a request it had to re-route). */
  retries: number;
}

export function parseStat(csv: string): ServerStat[] {
  const lines = csv.split('\n').filter((l) => l.trim());
  const head = lines.shift()?.replace(/^# /, '').split(',') ?? [];
  const col = (name: string) => head.indexOf(name);
  const [px, sv, st, stot, rtot, econ, eresp, h5, wretr, wredis] = ['pxname', 'svname', 'status', 'stot', 'req_tot', 'econ', 'eresp', 'hrsp_5xx', 'wretr', 'wredis'].map(col);
  return lines.map((l) => {
    const f = l.split(',');
    const n = (i: number) => Number(f[i!]) || 0;
    return { backend: f[px!]!, server: f[sv!]!, status: f[st!] ?? '', sessions: n(stot!), requests: n(rtot!) || n(stot!), errors: n(econ!) + n(eresp!) + n(h5!), retries: n(wretr!) + n(wredis!) };
  });
}

/**
 * The HAProxy child: master-worker in the foreground (-W -db), its config and socket under the
 * data dir. reload() sends SIGUSR2 to the master and waits until a new worker answers on the
 * socket; the old worker finishes its connections and exits on its own.
 */
export class HaproxyProcess {
  readonly configFile: string;
  readonly socket: string;
  private proc?: ChildProcess;
  private stopping = false;
  private restarts = 0;
  /** HAProxy's output while a config is being applied (its alerts name what failed). */
  private output?: string[];
  /** Resolves when the running process has exited and its output is all read. */
  private closed?: Promise<void>;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    private readonly binary = process.env.JACO_HAPROXY ?? 'haproxy',
    private readonly onExit: () => void = () => undefined,
  ) {
    mkdirSync(dir, { recursive: true });
    this.configFile = join(dir, 'haproxy.cfg');
    this.socket = join(dir, 'haproxy.sock');
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /**
   * Writes the config and (re)starts HAProxy with it; resolves once the runtime API answers.
   * Throws BindError when frontends could not bind (HAProxy names them): a start then exits, and a
   * reload leaves the old worker serving the old config.
   */
  async apply(config: string): Promise<void> {
    writeFileSync(this.configFile, config);
    this.output = [];
    const starting = !this.running;
    try {
      if (starting) return await this.start();
      const before = await workerPid(this.socket);
      this.proc!.kill('SIGUSR2');
      let signalledAt = Date.now();
      await this.until(async () => {
        const pid = await workerPid(this.socket);
        if (pid !== undefined && pid !== before) return true;
        // A signal that reached the master while it was re-executing itself (after an earlier
        // failed reload) is lost: ask again. A reload more is harmless (the listeners pass on).
        if (Date.now() - signalledAt > RELOAD_RESIGNAL_MS && this.running) {
          this.proc!.kill('SIGUSR2');
          signalledAt = Date.now();
        }
        return false;
      }, 'a reloaded worker', RELOAD_TIMEOUT_MS);
    } catch (e) {
      if (starting) {
        // A start that failed exits (HAProxy gives up when a listener fails): let it finish, so that
        // every alert is read and the next apply starts afresh instead of signalling a dying process.
        if (this.running) this.proc!.kill('SIGTERM');
        await this.closed;
      } else if (this.output?.some((l) => l.includes('cannot bind socket'))) {
        // A failed reload: the master re-executes itself to wait on the old worker ("Loading
        // failure!"); the next reload's signal must not come in the middle of that.
        for (const until = Date.now() + 5_000; Date.now() < until && this.running && !this.output?.some((l) => l.includes('Loading failure')); ) await new Promise((r) => setTimeout(r, 50));
      }
      const failures = parseBindFailures(this.output ?? []);
      throw failures.length ? new BindError(failures) : e;
    } finally {
      this.output = undefined;
    }
  }

  private async start(): Promise<void> {
    if (existsSync(this.socket)) rmSync(this.socket, { force: true });
    const proc = spawn(this.binary, ['-W', '-db', '-f', this.configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.proc = proc;
    this.closed = new Promise((r) => proc.once('close', () => r()));
    const lines = (d: Buffer) => {
      for (const l of d.toString().split('\n'))
        if (l.trim()) {
          this.log.info({ haproxy: l.trim() }, 'haproxy');
          this.output?.push(l);
        }
    };
    proc.stdout!.on('data', lines);
    proc.stderr!.on('data', lines);
    proc.once('exit', (code, signal) => {
      if (this.stopping) return;
      this.restarts++;
      this.log.error({ code, signal, restarts: this.restarts }, 'haproxy exited; it is started again with the next pass');
      this.onExit();
    });
    await this.until(async () => (await workerPid(this.socket)) !== undefined, 'haproxy to answer on its socket');
  }

  private async until(ok: () => Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (await ok()) return;
      if (!this.running) throw new RuntimeApiError(`haproxy exited while waiting for ${what} (see the log above)`);
      // A reload whose listeners failed: the master says so and keeps the old worker; no new one comes.
      if (this.output?.some((l) => l.includes('cannot bind socket'))) throw new RuntimeApiError(`haproxy could not bind while waiting for ${what}`);
      if (Date.now() > deadline) throw new RuntimeApiError(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    const p = this.proc;
    if (!p || !this.running) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(() => p.kill('SIGKILL'), 5000);
      p.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      // SIGUSR1: soft stop (finish the connections under way).
      p.kill('SIGUSR1');
    });
  }
}
