// The dashboard's HTTP server: the page and its bundle (built into dist/web by scripts/build-web.mjs,
// served from here: no CDN), one server-sent-event stream that pushes the whole picture on every
// change of the cache, read-only API calls answered by the CLI's own functions (explain, history,
// diff, plan), and the actions when started with --allow-actions. It binds where it is told
// (127.0.0.1 by default) and reads etcd with the operator's credentials (the Store it is given).
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { isIP, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { rebalancerConfig } from '../app/controllers.js';
import { yamlDiff } from '../api/change.js';
import type { AuditEvent, DeploymentRevision, Heartbeat, ReplicaDesired } from '../api/types.js';
import { findDecision, renderDecision } from '../app/decisions.js';
import { askLeader, planFromStore, renderPlan, type PlanReport } from '../app/rebalance-plan.js';
import type { Logger } from '../observability/log.js';
import { PACKAGE_ROOT } from '../paths.js';
import { Cache } from '../runtime/cache.js';
import type { Store, Versioned } from '../store/store.js';
import type { Timings } from '../timings.js';
import { isActionKind, runAction } from './actions.js';
import { PressureHistory } from './pressure-history.js';
import { DASHBOARD_READS, dashboardState } from './state.js';
import type { AuditView } from './wire.js';

export const ASSETS_DIR = join(PACKAGE_ROOT, 'dist', 'web');
/** Changes within this are drawn once (the controllers' own debounce is 50 ms). */
const DEBOUNCE_MS = 200;
/** Heartbeat freshness and ages change without events: redraw this often regardless. */
const TICK_MS = 2000;

export interface DashboardOptions {
  store: Store;
  host: string;
  port: number;
  allowActions: boolean;
  timings: Timings;
  log: Logger;
  assetsDir?: string;
}

const PAGE = (actions: boolean) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>jaco dashboard</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/assets/dashboard.css"></head>
<body data-actions="${actions}"><div id="app">Connecting…</div><script src="/assets/dashboard.js"></script></body></html>
`;

/**
 * DNS rebinding: a web page of a name that later resolves to 127.0.0.1 could read this server as
 * its own origin. Its requests carry that name as Host, so only an address or localhost is served.
 */
export function hostAllowed(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.replace(/:\d+$/, '').replace(/^\[(.*)\]$/, '$1');
  return name === 'localhost' || isIP(name) !== 0;
}

const auditView = (key: string, e: AuditEvent): AuditView => ({
  key,
  time: e.spec.time,
  type: e.spec.type,
  actor: e.spec.actor,
  ...(e.spec.deployment ? { deployment: e.spec.deployment } : {}),
  payload: e.spec.payload,
});

export class DashboardServer {
  private readonly cache: Cache;
  private readonly history: PressureHistory;
  private readonly config: ReturnType<typeof rebalancerConfig>;
  private readonly clients = new Set<ServerResponse>();
  private readonly server: Server;
  private plan?: PlanReport;
  private lastFrame = '';
  private timer?: NodeJS.Timeout;
  private tick?: NodeJS.Timeout;
  private planTimer?: NodeJS.Timeout;
  private stopped = false;

  constructor(private readonly o: DashboardOptions) {
    this.cache = Cache.onStore(o.store, DASHBOARD_READS, { log: o.log });
    this.config = rebalancerConfig(o.timings);
    this.history = new PressureHistory(this.config.ewmaWindowMs);
    this.server = createServer((req, res) => void this.route(req, res).catch((e) => this.fail(res, e)));
  }

  /** Starts reading etcd and listening; resolves to the page's URL. */
  async start(): Promise<string> {
    await this.cache.start();
    this.observePressure();
    this.cache.on('changed', (touched, _routine, changes) => {
      if (touched.has('heartbeats')) this.observePressure();
      // New audit records go out as they come; the picture is drawn from everything else.
      const records = changes.filter((c) => c.source === 'audit' && c.type === 'put' && c.value);
      if (records.length) this.send('audit', records.map((c) => auditView(c.key, (c.value as Versioned<AuditEvent>).value)));
      if (touched.size > (touched.has('audit') ? 1 : 0)) this.schedule();
    });
    this.tick = setInterval(() => this.schedule(), TICK_MS);
    void this.refreshPlan();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.o.port, this.o.host, () => resolve());
    });
    const a = this.server.address() as AddressInfo;
    return `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/`;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.planTimer);
    clearInterval(this.tick);
    for (const c of this.clients) c.end();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
    await this.cache.stop();
  }

  private observePressure(): void {
    const hbs = [...this.cache.kind<Heartbeat>('heartbeats').items.values()].map((v) => v.value);
    const fresh = this.history.observe(hbs, Date.now());
    if (Object.keys(fresh).length) this.send('pressure', fresh);
  }

  /** The rebalancer's plan, from its leader (or recomputed from the store), once per cycle. */
  private async refreshPlan(): Promise<void> {
    try {
      const asked = await askLeader(this.o.store, 2000);
      this.plan = typeof asked !== 'string' ? asked : { source: 'store', reason: asked, plan: await planFromStore(this.o.store, this.o.timings) };
      this.schedule();
    } catch (e) {
      this.o.log.warn({ err: (e as Error).message }, 'could not read the rebalancer plan');
    }
    if (!this.stopped) this.planTimer = setTimeout(() => void this.refreshPlan(), Math.min(30_000, Math.max(2000, this.config.cycleMs)));
  }

  private schedule(): void {
    if (!this.timer && !this.stopped) this.timer = setTimeout(() => ((this.timer = undefined), this.broadcast()), DEBOUNCE_MS);
  }

  private frame(): string {
    return JSON.stringify(
      dashboardState({ cache: this.cache, history: this.history, allowActions: this.o.allowActions, thresholds: { trigger: this.config.trigger, dstCap: this.config.dstCap }, now: Date.now(), ...(this.plan ? { plan: this.plan } : {}) }),
    );
  }

  private broadcast(): void {
    if (!this.clients.size) return;
    const f = this.frame();
    // Only "at" differs between two frames of an unchanged cluster: send none.
    const body = f.slice(f.indexOf(',"allowActions"'));
    if (body === this.lastFrame) return;
    this.lastFrame = body;
    for (const c of this.clients) c.write(`event: state\ndata: ${f}\n\n`);
  }

  private send(event: string, data: unknown): void {
    const msg = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    for (const c of this.clients) c.write(msg);
  }

  private events(req: IncomingMessage, res: ServerResponse): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
    // The audit records the cache holds (the newest: WATCHABLE's bound); the stream then carries every new one.
    const backlog = [...this.cache.kind<AuditEvent>('audit').items.values()].sort((a, b) => (a.key < b.key ? -1 : 1));
    res.write(`event: state\ndata: ${this.frame()}\n\n`);
    res.write(`event: pressure\ndata: ${JSON.stringify(this.history.all())}\n\n`);
    res.write(`event: audit\ndata: ${JSON.stringify(backlog.map((v) => auditView(v.key, v.value)))}\n\n`);
    this.clients.add(res);
    req.on('close', () => this.clients.delete(res));
  }

  private asset(res: ServerResponse, file: string, type: string): void {
    let body: Buffer;
    try {
      body = readFileSync(join(this.o.assetsDir ?? ASSETS_DIR, file));
    } catch {
      return this.json(res, 500, { error: `${file} is not built: run make build (npm run build)` });
    }
    res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache' });
    res.end(body);
  }

  private json(res: ServerResponse, code: number, v: unknown): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify(v));
  }

  private fail(res: ServerResponse, e: unknown): void {
    this.o.log.warn({ err: (e as Error).message }, 'dashboard request failed');
    if (!res.headersSent) this.json(res, 500, { error: (e as Error).message });
    else res.end();
  }

  private async route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://dashboard');
    const q = (k: string) => url.searchParams.get(k) ?? '';
    res.setHeader('content-security-policy', "default-src 'self'; style-src 'self' 'unsafe-inline'");
    res.setHeader('x-content-type-options', 'nosniff');
    if (!hostAllowed(req.headers.host)) return this.json(res, 421, { error: 'the dashboard answers only to an address or localhost in Host (see docs/dashboard.md, Security)' });
    if (req.method === 'POST' && url.pathname.startsWith('/api/actions/')) return this.action(req, res, url.pathname.slice('/api/actions/'.length));
    if (req.method !== 'GET') return this.json(res, 405, { error: 'method not allowed' });
    switch (url.pathname) {
      case '/':
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        return void res.end(PAGE(this.o.allowActions));
      case '/assets/dashboard.js':
        return this.asset(res, 'dashboard.js', 'text/javascript; charset=utf-8');
      case '/assets/dashboard.css':
        return this.asset(res, 'dashboard.css', 'text/css; charset=utf-8');
      case '/events':
        return this.events(req, res);
      case '/healthz':
        return this.json(res, 200, { synced: this.cache.synced, revision: this.cache.revision });
      case '/api/explain':
        return this.explain(res, q('replica'));
      case '/api/history':
        return this.json(res, 200, this.revisions(q('deployment')).map((r) => ({ revision: r.spec.revision, appliedAt: r.spec.appliedAt, cause: r.spec.cause, summary: r.spec.summary })));
      case '/api/diff': {
        const name = q('deployment');
        const revs = this.revisions(name);
        const [a, b] = [Number(q('from')), Number(q('to'))].map((n) => revs.find((r) => r.spec.revision === n));
        if (!a || !b) return this.json(res, 404, { error: `revisions ${q('from')} and ${q('to')} of ${name} are not both stored` });
        return this.json(res, 200, { diff: yamlDiff(`deployment/${name}`, a.spec.template, b.spec.template, { from: `revision ${a.spec.revision}`, to: `revision ${b.spec.revision}` }) || '(the same spec)' });
      }
      case '/api/plan':
        return this.plan ? this.json(res, 200, { text: renderPlan(this.plan), report: this.plan }) : this.json(res, 503, { error: 'no plan read yet' });
      default:
        return this.json(res, 404, { error: 'not found' });
    }
  }

  private revisions(name: string): DeploymentRevision[] {
    return [...this.cache.kind<DeploymentRevision>('revisions').items.values()]
      .map((v) => v.value)
      .filter((r) => r.spec.deployment === name)
      .sort((a, b) => a.spec.revision - b.spec.revision);
  }

  /** `jaco explain REPLICA`: the stored decision, found and rendered by the CLI's functions. */
  private async explain(res: ServerResponse, replica: string): Promise<void> {
    const dec = await findDecision(this.o.store, this.cache, replica);
    if (!dec) return this.json(res, 404, { error: `no placement decision stored for replica "${replica}"`, cli: `jaco explain ${replica}` });
    const copies = [...this.cache.kind<ReplicaDesired>('desired').items.values()].map((v) => v.value).filter((d) => d.spec.replica === replica);
    return this.json(res, 200, { cli: `jaco explain ${replica}`, text: renderDecision(dec, Date.now(), copies), decision: dec.spec });
  }

  private async action(req: IncomingMessage, res: ServerResponse, kind: string): Promise<void> {
    if (!this.o.allowActions) return this.json(res, 403, { error: 'actions are off: start the dashboard with --allow-actions' });
    // A page of another origin may POST here too (the browser sends it): refuse anything not from ours.
    const origin = req.headers.origin;
    if (!origin || new URL(origin).host !== req.headers.host || !req.headers['content-type']?.startsWith('application/json'))
      return this.json(res, 403, { error: 'actions are taken only from the dashboard page' });
    if (!isActionKind(kind)) return this.json(res, 404, { error: `no action ${kind}` });
    let body = '';
    for await (const chunk of req) body += chunk;
    const target = String((JSON.parse(body || '{}') as { target?: unknown }).target ?? '');
    const r = await runAction(this.o.store, kind, target, this.o.timings);
    this.o.log.info({ action: kind, target, ok: r.ok }, 'dashboard action');
    this.json(res, r.ok ? 200 : 409, r);
  }
}
