// `jaco ingress`: one node's ingress on the shared runtime, unelected (like the node-agent). Its
// cache holds deployments/ (published ports), endpoints/ (who is routable) and nodes/ (this
// node's address); its pass diffs them against what HAProxy routes (decide.ts) and carries the
// plan out on its HAProxy child (haproxy.ts): a reload for a new frontend set, runtime API
// commands for servers. Its pass writes nothing to etcd; beside it, what it routes is reported as
// ingresses/<node> (report.ts). One plan is carried out at a time; a failed command makes the
// next pass reload from the whole picture (the state is then known again).
import { Counter, Gauge } from 'prom-client';
import { keys } from '../../src/api/keys.js';
import type { Deployment, Endpoints, NetworkConfig, Node, ServiceAddress } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import { registry } from '../../src/observability/metrics.js';
import { Manager } from '../../src/runtime/manager.js';
import type { ControllerSpec, PassResult, Runner } from '../../src/runtime/runner.js';
import type { Store } from '../../src/store/store.js';
import type { Timings } from '../../src/timings.js';
import { commandsOf, decide, DEFAULT_INGRESS_CONFIG, routesOf, serviceRoutesOf, wantedServers, type HaproxyView, type IngressConfig, type IngressPlan, type IngressSnapshot, type RuntimeOp } from './decide.js';
import { availableParallelism } from 'node:os';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { serviceRanges } from '../../src/api/network.js';
import type { Cache } from '../../src/runtime/cache.js';

const execFileP = promisify(execFile);

/** The service ranges of the cluster network, once config/network exists. */
function serviceRangesOf(cache: Cache): { ipv4: string; ipv6: string } | undefined {
  const cfg = [...cache.kind<NetworkConfig>('network').items.values()][0]?.value.spec;
  return cfg ? serviceRanges(cfg) : undefined;
}
import { BindError, frontendName, HaproxyProcess, ingressThreads, parseStat, renderConfig, runtimeCommand, runtimeOk, SERVER_CHECK, type BindFailure } from './haproxy.js';
import { ingressStatusOf, StatusReporter } from './report.js';

const registers = [registry];
export const ingressMetrics = {
  routes: new Gauge({ name: 'jaco_ingress_routes', help: 'Published ports this ingress answers on', registers }),
  servers: new Gauge({ name: 'jaco_ingress_servers', help: 'Servers (replica copies) in the backends, by state (ready, drain)', labelNames: ['state'], registers }),
  reloads: new Counter({ name: 'jaco_ingress_reloads_total', help: 'HAProxy configuration loads (start, a changed frontend set, recovery), by result', labelNames: ['result'], registers }),
  commands: new Counter({ name: 'jaco_ingress_runtime_commands_total', help: 'Runtime API ops sent to HAProxy, by op and result (ok, failed, held: a drained server HAProxy would not delete yet, connections still on it)', labelNames: ['op', 'result'], registers }),
  requests: new Gauge({ name: 'jaco_ingress_requests_total', help: 'Requests HAProxy answered, per backend (from its own counters)', labelNames: ['backend'], registers }),
  unbound: new Gauge({ name: 'jaco_ingress_unbound_frontends', help: 'Frontends HAProxy could not bind (a port held by another process, an address the node lacks), left out until retried', registers }),
  errors: new Gauge({ name: 'jaco_ingress_errors_total', help: 'Connection and response errors and 5xx answers, per backend (from its own counters)', labelNames: ['backend'], registers }),
};

export interface IngressOptions {
  node: string;
  store: Store;
  timings: Timings;
  log: Logger;
  /** Where HAProxy's config and socket live (one directory per node). */
  dir: string;
  config?: IngressConfig;
  haproxyBinary?: string;
  /** How often HAProxy's counters and checks are read and the status refreshed (default 2 s). */
  statusIntervalMs?: number;
  /**
   * Answer every service's own ports on its service addresses (docs/networking.md): the service
   * ranges are made local to this node's network namespace. Only where the ingress has a
   * namespace of its own — a host, or a node of `jaco up` — not several ingresses sharing one.
   */
  serviceAddresses?: boolean;
}

interface IngressPass extends PassResult<null> {
  plan: IngressPlan;
}

export class Ingress {
  readonly haproxy: HaproxyProcess;
  private manager?: Manager;
  private runner?: Runner<null, IngressSnapshot, unknown, IngressPass>;
  /** What HAProxy routes, as far as what was carried out goes. */
  private view: HaproxyView = { servers: new Map() };
  private busy = false;
  private stopped = false;
  private lastNotes = '';
  private readonly reporter: StatusReporter;
  private refreshTimer?: NodeJS.Timeout;
  /** HAProxy's check status by `<backend>/<server>`, as last read. */
  private checks = new Map<string, string>();
  private conflicts: IngressSnapshot['conflicts'] = [];
  /** The cluster's service ranges (with serviceAddresses), and the ones made local so far. */
  private serviceRanges?: { ipv4: string; ipv6: string };
  private localRanges?: string;
  /**
   * Frontends HAProxy could not bind, left out of its config so every other route still loads;
   * tried again after the longest back-off (timings.backoffMaxMs: a reload from the whole picture) or with the next change
   * of the frontend set.
   */
  private unbound = new Map<string, BindFailure>();
  private unboundKey?: string;
  private unboundRetry?: NodeJS.Timeout;

  constructor(readonly opts: IngressOptions) {
    this.haproxy = new HaproxyProcess(opts.dir, opts.log, opts.haproxyBinary, () => {
      this.view = { servers: new Map() };
      this.runner?.trigger();
    });
    this.reporter = new StatusReporter(opts.store, opts.node, opts.timings.heartbeatTtlSec, opts.log);
  }

  /** What HAProxy routes now (tests, /healthz). */
  get routed(): HaproxyView {
    return this.view;
  }

  async start(): Promise<void> {
    const { store, timings, log, node } = this.opts;
    // Each source on its own watch: etcd RBAC lets an ingress read these and nothing else (deploy/etcd/rbac.sh).
    this.manager = new Manager({ store, timings, log, identity: `ingress ${node}`, cache: { watch: 'each' } }, [this.spec()]);
    this.runner = this.manager.runners[0] as Runner<null, IngressSnapshot, unknown, IngressPass>;
    await this.manager.start();
    this.reporter.start();
    this.refreshTimer = setInterval(() => void this.scrape().then(() => this.report()), this.opts.statusIntervalMs ?? 2000);
    this.refreshTimer.unref();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.refreshTimer);
    clearTimeout(this.unboundRetry);
    await this.manager?.stop();
    await this.reporter.stop();
    await this.haproxy.stop();
  }

  /** Resolves once a pass ran and its plan was carried out (tests). */
  async settled(): Promise<void> {
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
  }

  health(): { ok: boolean; detail: Record<string, unknown> } {
    const synced = !!this.manager?.cache.synced;
    const ok = synced && this.haproxy.running && this.view.configKey !== undefined;
    const servers: Record<string, Record<string, string>> = {};
    for (const [b, m] of this.view.servers) servers[b] = Object.fromEntries([...m].map(([n, s]) => [n, `${s.addr}:${s.port} ${s.state}`]));
    return { ok, detail: { node: this.opts.node, synced, haproxy: { running: this.haproxy.running, pid: this.haproxy.pid, socket: this.haproxy.socket }, servers } };
  }

  /** Refreshes the per-backend request and error gauges and each server's check from HAProxy's `show stat`. */
  async scrape(): Promise<void> {
    if (!this.haproxy.running) return;
    try {
      const checks = new Map<string, string>();
      for (const s of parseStat(await runtimeCommand(this.haproxy.socket, 'show stat', 1000))) {
        if (s.server === 'FRONTEND') continue;
        if (s.server !== 'BACKEND') {
          checks.set(`${s.backend}/${s.server}`, s.status);
          continue;
        }
        ingressMetrics.requests.set({ backend: s.backend }, s.requests);
        ingressMetrics.errors.set({ backend: s.backend }, s.errors);
      }
      this.checks = checks;
    } catch {
      // Scraping is best effort: /healthz says whether HAProxy runs.
    }
  }

  /** Reports what this ingress routes (ingresses/<node>), written when it changed. */
  private report(): void {
    if (this.stopped) return;
    this.reporter.report(ingressStatusOf(this.opts.node, this.view, this.checks, this.haproxy.running, this.conflicts, Date.now(), [...this.unbound.values()]));
  }

  private spec(): ControllerSpec<null, IngressSnapshot, unknown, IngressPass> {
    const cfg = this.opts.config ?? DEFAULT_INGRESS_CONFIG;
    return {
      name: 'ingress',
      reads: ['deployments', 'endpoints', 'nodes', ...(this.opts.serviceAddresses ? (['network', 'serviceAddresses'] as const) : [])],
      elected: false,
      // One plan at a time: the next pass decides from what the last one left.
      ready: () => !this.busy && !this.stopped,
      initialState: () => null,
      snapshot: ({ cache }) => {
        const deployments = cache.kind<Deployment>('deployments');
        const endpoints = cache.kind<Endpoints>('endpoints');
        const nodes = cache.kind<Node>('nodes');
        const deps = [...deployments.items.values()].map((v) => v.value);
        const published = routesOf(deps);
        this.conflicts = published.conflicts;
        const services = this.opts.serviceAddresses ? cache.kind<ServiceAddress>('serviceAddresses') : undefined;
        const routes = [...published.routes, ...(services ? serviceRoutesOf(deps, (d, s) => services.items.get(keys.serviceAddress(d, s))?.value.spec) : [])];
        this.serviceRanges = services ? serviceRangesOf(cache) : undefined;
        const address = nodes.items.get(keys.node(this.opts.node))?.value.status?.address;
        return { node: this.opts.node, address, routes, conflicts: published.conflicts, want: wantedServers(routes, (d, s) => endpoints.items.get(keys.endpoints(d, s))?.value), haproxy: this.view };
      },
      decide: (_state, snap, now) => {
        const plan = decide(snap, now, cfg);
        return { plan, acts: [], wakeAt: plan.wakeAt, notes: plan.notes };
      },
      perform: ({ plan }) => {
        if (!plan.reload && !plan.ops.length) return this.logNotes(plan);
        this.busy = true;
        void this.carryOut(plan).finally(() => {
          this.busy = false;
          if (!this.stopped) this.runner?.trigger(0);
        });
      },
    };
  }

  /**
   * The service ranges as local addresses of this node (`ip route replace local … dev lo`): HAProxy
   * then binds any service address, and a container whose default route leads to its node reaches
   * every service at its node's ingress. Done once per range.
   */
  private async makeServiceRangesLocal(): Promise<void> {
    const r = this.serviceRanges;
    if (!r || this.localRanges === `${r.ipv4} ${r.ipv6}`) return;
    for (const [family, range] of [['-4', r.ipv4], ['-6', r.ipv6]] as const) await execFileP('ip', [family, 'route', 'replace', 'local', range, 'dev', 'lo']);
    this.localRanges = `${r.ipv4} ${r.ipv6}`;
    this.opts.log.info({ ranges: [r.ipv4, r.ipv6] }, 'service addresses are local to this node');
  }

  /**
   * Loads a config with the frontends that bind: a start or reload HAProxy refuses because some
   * could not (a port another process holds, an address this node lacks) is loaded again without
   * them — one route that cannot be answered must not keep every other route from changing.
   * Each such frontend is logged, counted, reported in ingresses/<node>, and tried again later.
   */
  private async load(reload: NonNullable<IngressPlan['reload']>): Promise<void> {
    // A new frontend set is a new chance for every frontend.
    if (reload.key !== this.unboundKey) this.unbound.clear();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.haproxy.apply(renderConfig({ socket: this.haproxy.socket, address: reload.address, routes: reload.routes, servers: reload.servers, unbound: new Set(this.unbound.keys()), threads: ingressThreads(availableParallelism()) }));
        break;
      } catch (e) {
        if (!(e instanceof BindError) || attempt > 0) throw e;
        for (const f of e.failures) {
          this.unbound.set(f.frontend, f);
          this.opts.log.error({ frontend: f.frontend, address: f.address, reason: f.reason, retryInMs: this.opts.timings.backoffMaxMs }, `cannot answer on ${f.address}: ${f.reason}; the other routes load without it`);
        }
      }
    }
    this.unboundKey = reload.key;
    ingressMetrics.unbound.set(this.unbound.size);
    clearTimeout(this.unboundRetry);
    if (this.unbound.size)
      this.unboundRetry = setTimeout(() => {
        // Reload from the whole picture: what frees its port meanwhile binds.
        this.unbound.clear();
        this.unboundKey = undefined;
        this.view = { ...this.view, configKey: undefined };
        this.runner?.trigger();
      }, this.opts.timings.backoffMaxMs).unref();
  }

  private logNotes(plan: IngressPlan): void {
    const text = JSON.stringify(plan.notes);
    if (text !== this.lastNotes && plan.notes.length) this.opts.log.warn({ notes: plan.notes }, 'ingress waits or ignores');
    this.lastNotes = text;
  }

  /**
   * The servers after a plan, with each one whose deletion HAProxy refused (connections still on
   * it) kept, in maintenance, marked held: the next passes ask again until they have ended.
   */
  private withHeld(servers: IngressPlan['next']['servers'], held: readonly RuntimeOp[]): IngressPlan['next']['servers'] {
    if (!held.length) return servers;
    const out = new Map([...servers].map(([b, m]) => [b, new Map(m)]));
    const now = Date.now();
    for (const o of held) {
      const was = this.view.servers.get(o.backend)?.get(o.server);
      if (!was) continue;
      if (was.heldAt === undefined) this.opts.log.info({ backend: o.backend, server: o.server }, 'server drained, connections still on it: deleted when they end');
      out.get(o.backend)?.set(o.server, { ...was, heldAt: now });
    }
    return out;
  }

  private async carryOut(plan: IngressPlan): Promise<void> {
    const log = this.opts.log;
    this.logNotes(plan);
    try {
      if (plan.reload) {
        const { address } = plan.reload;
        if (plan.reload.routes.some((r) => r.addresses)) await this.makeServiceRangesLocal();
        await this.load(plan.reload);
        ingressMetrics.reloads.inc({ result: 'ok' });
        const bound = plan.reload.routes.filter((r) => !this.unbound.has(frontendName(r)));
        log.info({ routes: bound.map((r) => `${address}:${r.published} → ${r.deployment}/${r.service}`) }, 'haproxy configured');
      }
      const held: RuntimeOp[] = [];
      for (const o of plan.ops) {
        try {
          let result: 'ok' | 'held' = 'ok';
          for (const c of commandsOf(o, SERVER_CHECK)) result = await runtimeOk(this.haproxy.socket, c);
          ingressMetrics.commands.inc({ op: o.op, result });
          if (result === 'held') held.push(o);
          else log.info({ backend: o.backend, server: o.server, op: o.op }, `server ${o.op}${o.op === 'remove' && o.cut ? ' (its connections cut: past the drain limit)' : ''}`);
        } catch (e) {
          ingressMetrics.commands.inc({ op: o.op, result: 'failed' });
          throw e;
        }
      }
      this.view = { ...plan.next, servers: this.withHeld(plan.next.servers, held) };
    } catch (e) {
      if (plan.reload) ingressMetrics.reloads.inc({ result: 'failed' });
      // HAProxy's state is not known any more: the next pass configures it from the whole picture.
      log.error({ err: (e as Error).message }, 'could not carry out the routing plan; reloading from the whole picture');
      this.view = { servers: new Map() };
      await new Promise((r) => setTimeout(r, this.opts.timings.backoffMinMs));
    }
    // One backend per route (decide keeps an entry for every route, empty or not).
    ingressMetrics.routes.set(this.view.servers.size);
    const counts = { ready: 0, drain: 0 };
    for (const m of this.view.servers.values()) for (const s of m.values()) counts[s.state]++;
    for (const [state, n] of Object.entries(counts)) ingressMetrics.servers.set({ state }, n);
    this.report();
  }
}
