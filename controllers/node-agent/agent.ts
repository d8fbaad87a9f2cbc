// The node-agent shell: registers nodes/<host>, keeps heartbeats/<host> alive on its own lease
// with the latest pressure sample, watches desired/ and commands/ of its host, keeps a picture of
// its Docker containers (resync + events), and on every change runs decide() and carries the plan
// out (start workers, stops, observed/<host>/ writes). It never writes desired state, never
// restarts a container on its own, and leaves workloads running when etcd or Docker blink.
import { hostname } from 'node:os';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type Capacity, type Heartbeat, type Node, type NodeDrain, type PressureSample, type ReplicaCommand, type ReplicaDesired, type ReplicaObserved, type ReplicaObservedStatus } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { Informer } from '../../src/store/informer.js';
import { withTimeout, type Store } from '../../src/store/store.js';
import { commitActs, type Act, type Op } from '../../src/store/writer.js';
import type { Timings } from '../../src/timings.js';
import { VERSION } from '../../src/version.js';
import { CgroupReader } from './cgroup.js';
import type { StopReason } from './codes.js';
import { ContainerCache } from './container-cache.js';
import type { Owner } from './container-spec.js';
import { decide, type AgentPlan, type AgentSnapshot, type InvalidDesired, type StartOrder, type StartProgress } from './decide.js';
import { DockerRuntime, DockerUnreachableError } from './docker.js';
import { agentMetrics } from './metrics.js';
import { PressureSampler } from './pressure.js';
import { Slots, StartWorker } from './starter.js';

/** create+start calls in flight at once (see Slots). */
const START_SLOTS = 4;

export interface AgentOptions {
  node: string;
  store: Store;
  timings: Timings;
  /** Heartbeat and pressure sampling period (seed 001: node_status_interval). */
  statusIntervalMs: number;
  capacity: Capacity;
  labels: Record<string, string>;
  /** unix:///var/run/docker.sock or tcp://host:port. */
  dockerHost: string;
  /** Register again although a drain removed this node from the cluster. */
  rejoin: boolean;
  log: Logger;
  /** Where cgroups are mounted (tests point it at fixtures). */
  cgroupRoot?: string;
}

/** The node was removed from the cluster (jaco node remove) and --rejoin was not given. */
export class NodeRemovedError extends Error {
  override name = 'NodeRemovedError';
  readonly recoverable = false;
  constructor(readonly node: string) {
    super(`node ${node} was removed from the cluster; start with --rejoin to add it again`);
  }
}

/** Why the agent ends by itself (the node was removed while it ran). */
export interface AgentExit {
  code: number;
  reason: string;
}

type Lease = ReturnType<Store['ns']['lease']>;
type Watcher = Awaited<ReturnType<ReturnType<Store['ns']['watch']>['create']>>;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class NodeAgent {
  readonly log: Logger;
  readonly cache = new ContainerCache();
  /** Resolves when the agent ends by itself (node removed); the CLI exits with its code. */
  readonly exited: Promise<AgentExit>;
  private resolveExit!: (e: AgentExit) => void;
  private owner!: Owner;
  private docker!: DockerRuntime;
  private sampler!: PressureSampler;
  private desiredInf!: Informer<ReplicaDesired>;
  private commandInf!: Informer<ReplicaCommand>;
  /** A watch of the single key nodes/<host>: prompt notice of a removal (each heartbeat checks too). */
  private nodeWatch?: Watcher;
  /** observed/<node>/<replica> as last written (the agent is its only writer). */
  private readonly observed = new Map<string, ReplicaObservedStatus>();
  private readonly acked = new Map<string, number>();
  /** deployment/service of malformed desired keys, read raw for the failed report. */
  private readonly invalidMeta = new Map<string, Pick<InvalidDesired, 'deployment' | 'service'>>();
  private readonly invalidCounted = new Set<string>();
  private readonly workers = new Map<string, StartWorker>();
  private readonly slots = new Slots(START_SLOTS);
  private readonly stopping = new Map<string, Promise<void>>();
  /** Containers whose in-flight stop also removes them. */
  private readonly stopRemoves = new Set<string>();
  /** Containers whose stop failed: not retried before the time given (back-off). */
  private readonly stopRetryAt = new Map<string, { at: number; backoffMs: number }>();
  /** Per replica: the back-off after a start that was interrupted by an error. */
  private readonly startBackoff = new Map<string, number>();
  private dockerUp = false;
  private dockerSynced = false;
  private dockerDownSince?: number;
  private eventsAbort?: AbortController;
  private lease?: Lease;
  private leaseId?: string;
  private leaseLost = false;
  private heartbeatFailing = false;
  private stopped = false;
  private removing = false;
  private passTimer?: NodeJS.Timeout;
  private recheckTimer?: NodeJS.Timeout;
  private passRunning = false;
  private again = false;
  private writeBackoffMs = 0;
  private readonly timers: NodeJS.Timeout[] = [];
  /** One-shot timers (back-offs), cleared on stop. */
  private readonly pending = new Set<NodeJS.Timeout>();
  private heartbeatTimer?: NodeJS.Timeout;
  private sampling?: Promise<PressureSample>;
  private lastPressure?: PressureSample;

  constructor(readonly opts: AgentOptions) {
    this.log = opts.log;
    this.exited = new Promise((r) => (this.resolveExit = r));
  }

  get node(): string {
    return this.opts.node;
  }

  // ------------------------------------------------------------------ start and stop

  /** Registers the node and starts every loop; throws NodeRemovedError when it must not run. */
  async start(): Promise<void> {
    const { store, node, timings } = this.opts;
    const uid = (await this.untilEtcd('read the cluster uid', () => clusterInfo(store))).uid;
    this.owner = { clusterUid: uid, node };
    await this.untilEtcd('register the node', () => this.register());
    await this.untilEtcd('read observed state', () => this.loadObserved());
    this.docker = new DockerRuntime(this.opts.dockerHost, this.owner);
    this.sampler = new PressureSampler(new CgroupReader(this.opts.cgroupRoot), (id) => this.docker.stats(id), this.opts.capacity);

    this.desiredInf = new Informer<ReplicaDesired>(store, keys.desiredOf(node), { kind: 'ReplicaDesired', log: this.log });
    this.commandInf = new Informer<ReplicaCommand>(store, keys.commandsOf(node), { kind: 'ReplicaCommand', log: this.log });
    this.desiredInf.on('malformed', (key) => void this.onMalformed(key));
    for (const inf of [this.desiredInf, this.commandInf]) {
      inf.on('change', () => this.trigger());
      inf.on('relisted', () => this.trigger());
    }
    await Promise.all([this.desiredInf.start(), this.commandInf.start()]);
    await this.watchNode();

    await this.ping();
    void this.dockerLoop();
    await this.heartbeat();
    this.scheduleHeartbeat();
    this.timers.push(setInterval(() => void this.resyncTick(), timings.dockerResyncMs));
    this.timers.push(setInterval(() => this.trigger(0), timings.safetyTickMs));
    this.log.info(
      { cluster: uid, capacity: this.opts.capacity, labels: this.opts.labels, docker: this.opts.dockerHost, statusIntervalMs: this.opts.statusIntervalMs, timings: timings.name },
      'node-agent started',
    );
  }

  /** Stops the loops; containers keep running (an agent restart adopts them). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.clearTimers();
    this.eventsAbort?.abort();
    for (const w of this.workers.values()) w.cancel();
    await Promise.all([this.desiredInf?.stop(), this.commandInf?.stop(), this.nodeWatch?.cancel().catch(() => undefined)]);
    // The heartbeat goes with its lease: the node turns NotReady at once rather than after the TTL.
    await this.lease?.revoke().catch(() => undefined);
  }

  private after(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.pending.delete(t);
      fn();
    }, ms);
    this.pending.add(t);
  }

  private clearTimers(): void {
    for (const t of this.timers) clearInterval(t);
    for (const t of this.pending) clearTimeout(t);
    clearTimeout(this.passTimer);
    clearTimeout(this.recheckTimer);
    clearTimeout(this.heartbeatTimer);
  }

  health(): { ok: boolean; detail: Record<string, unknown> } {
    const informers = {
      desired: !!this.desiredInf?.synced,
      commands: !!this.commandInf?.synced,
    };
    const synced = Object.values(informers).every(Boolean);
    return {
      ok: this.dockerUp && synced && !this.removing && !this.stopped,
      detail: {
        node: this.node,
        docker: { up: this.dockerUp, host: this.opts.dockerHost, synced: this.dockerSynced },
        informers,
        containers: this.cache.size,
        startsInFlight: [...this.workers.values()].filter((w) => w.progress.phase !== 'failed').length,
        ...(this.removing ? { removing: true } : {}),
      },
    };
  }

  /** Retries an etcd step with back-off until it succeeds (the agent may boot before etcd). */
  private async untilEtcd<T>(what: string, fn: () => Promise<T>): Promise<T> {
    let backoff = this.opts.timings.backoffMinMs;
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof NodeRemovedError || this.stopped) throw e;
        const err = this.opts.store.unreachable(e);
        this.log.warn({ err: err.message, retryInMs: backoff }, `could not ${what}; retrying`);
        await sleep(backoff);
        backoff = Math.min(backoff * 2, this.opts.timings.backoffMaxMs);
      }
    }
  }

  // ------------------------------------------------------------------ node and observed state

  /** Creates or updates nodes/<host>: status and labels are the agent's, spec (cordon) is kept. */
  private async register(): Promise<void> {
    const { store, node, labels, capacity, rejoin } = this.opts;
    for (;;) {
      const [cur, drain] = await Promise.all([store.get<Node>(keys.node(node)), store.get<NodeDrain>(keys.drain(node))]);
      if (!cur && drain?.value.status?.state === 'removed') {
        if (!rejoin) throw new NodeRemovedError(node);
        this.log.warn({ drain: drain.value.spec }, `node ${node} was removed from the cluster; rejoining (--rejoin)`);
      }
      const now = new Date().toISOString();
      const metadata = { ...(cur?.value.metadata ?? { name: node, creationTimestamp: now }) };
      delete metadata.resourceVersion;
      if (Object.keys(labels).length) metadata.labels = labels;
      else delete metadata.labels;
      const next: Node = {
        apiVersion: API_VERSION,
        kind: 'Node',
        metadata,
        spec: cur?.value.spec ?? {},
        status: { capacity, agentVersion: VERSION, hostname: hostname(), registeredAt: cur?.value.status?.registeredAt ?? now },
      };
      const op: Op = cur ? { op: 'update', key: keys.node(node), value: next, modRevision: cur.modRevision } : { op: 'create', key: keys.node(node), value: next };
      const res = await commitActs(store, [{ label: `register ${node}`, ops: [op] }]);
      if (res.committed.length) {
        this.log.info({ capacity, labels, created: !cur }, cur ? 'node registration updated' : 'node registered');
        return;
      }
      // Someone (the CLI cordoning) wrote the node meanwhile: read it again.
    }
  }

  private async loadObserved(): Promise<void> {
    const prefix = keys.observedOf(this.node);
    const { items } = await this.opts.store.list<ReplicaObserved>(prefix);
    for (const i of items) {
      const s = i.value.status;
      if (!s) continue;
      const replica = i.key.slice(prefix.length);
      this.observed.set(replica, s);
      if (s.ackedCommand !== undefined) this.acked.set(replica, s.ackedCommand);
    }
  }

  private async onMalformed(key: string): Promise<void> {
    agentMetrics.malformedDesired.inc();
    try {
      // The informer keeps malformed values out of `items`; read the raw value for its names.
      const raw = await this.opts.store.get<{ spec?: { deployment?: unknown; service?: unknown } }>(key);
      const spec = raw?.value?.spec;
      const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
      this.invalidMeta.set(key, { deployment: str(spec?.deployment), service: str(spec?.service) });
    } catch {
      // not JSON at all: report without names
    }
    this.trigger();
  }

  // ------------------------------------------------------------------ Docker

  private setDockerUp(up: boolean, err?: Error): void {
    agentMetrics.dockerUp.set(up ? 1 : 0);
    if (up && !this.dockerUp) {
      if (this.dockerDownSince !== undefined) this.log.info({ docker: this.opts.dockerHost, downForMs: Date.now() - this.dockerDownSince }, 'Docker is reachable again');
      this.dockerDownSince = undefined;
    }
    if (!up && (this.dockerUp || this.dockerDownSince === undefined)) {
      this.dockerDownSince = Date.now();
      this.dockerSynced = false;
      this.log.error({ docker: this.opts.dockerHost, err: err?.message }, `cannot reach Docker at ${this.opts.dockerHost}; containers are left as they are, retrying with back-off`);
    }
    this.dockerUp = up;
  }

  private async ping(): Promise<boolean> {
    try {
      await this.docker.ping();
      this.setDockerUp(true);
      return true;
    } catch (e) {
      this.setDockerUp(false, e as Error);
      return false;
    }
  }

  /** Connects, follows events, resyncs; on any failure marks Docker down and retries with back-off. */
  private async dockerLoop(): Promise<void> {
    const { backoffMinMs, backoffMaxMs } = this.opts.timings;
    let backoff = backoffMinMs;
    while (!this.stopped && !this.removing) {
      const ac = new AbortController();
      this.eventsAbort = ac;
      try {
        await this.docker.ping();
        this.setDockerUp(true);
        // Events first, then the full resync, so nothing that happens in between is missed.
        const { ended } = await this.docker.watchEvents((id, action) => this.onDockerEvent(id, action), ac.signal);
        await this.resync();
        backoff = backoffMinMs;
        await ended;
        if (this.stopped || this.removing) return;
        throw new DockerUnreachableError(this.opts.dockerHost, 'the event stream ended');
      } catch (e) {
        ac.abort();
        if (this.stopped || this.removing) return;
        this.setDockerUp(false, e as Error);
        await sleep(backoff);
        backoff = Math.min(backoff * 2, backoffMaxMs);
      }
    }
  }

  /** Lists and inspects every container of this agent (adoption on start; missed events later). */
  private async resync(): Promise<void> {
    const since = this.cache.begin();
    const ids = await this.docker.listOwn();
    const facts = await Promise.all(ids.map((id) => this.docker.inspect(id)));
    for (const f of facts) if (f) this.cache.put(f, since);
    this.cache.sweep(new Set(ids), since);
    if (!this.dockerSynced) this.log.info({ containers: ids.length }, 'containers adopted from Docker');
    this.dockerSynced = true;
    this.trigger();
  }

  private async resyncTick(): Promise<void> {
    if (this.stopped || this.removing || !this.dockerUp) return;
    try {
      await this.resync();
    } catch (e) {
      // The loop notices through its event stream; make sure it does.
      this.setDockerUp(false, e as Error);
      this.eventsAbort?.abort();
    }
  }

  private onDockerEvent(id: string, action: string): void {
    if (action.startsWith('exec_')) return; // health check probes
    if (action === 'destroy') {
      this.cache.remove(id);
      this.trigger();
      return;
    }
    void this.refresh(id).catch(() => undefined);
  }

  /** Re-inspects one container into the cache. */
  private async refresh(id: string): Promise<void> {
    const since = this.cache.begin();
    const f = await this.docker.inspect(id);
    if (f) this.cache.put(f, since);
    else this.cache.remove(id);
    this.trigger();
  }

  /**
   * Stops (and removes) a container; concurrent calls for one container share the stop. A call
   * that must remove the container while a stop-only is in flight (a suspended replica's node is
   * removed) waits for that stop and then removes it.
   */
  private stopContainer(id: string, reason: StopReason, replica: string, remove = true): Promise<void> {
    const running = this.stopping.get(id);
    if (running) {
      if (!remove || this.stopRemoves.has(id)) return running;
      return running.catch(() => undefined).then(() => this.stopContainer(id, reason, replica, remove));
    }
    if (remove) this.stopRemoves.add(id);
    const name = this.cache.get(id)?.name ?? id.slice(0, 12);
    const p = (async () => {
      this.log.info({ replica, container: name, reason }, remove ? 'stopping and removing container' : 'stopping container');
      await this.docker.stop(id);
      if (remove) {
        await this.docker.remove(id);
        this.cache.remove(id);
      } else await this.refresh(id);
      agentMetrics.stops.inc({ reason });
    })();
    const tracked = p
      .then(() => void this.stopRetryAt.delete(id))
      .catch((e: Error) => {
        const { backoffMinMs, backoffMaxMs } = this.opts.timings;
        const backoffMs = Math.min(Math.max((this.stopRetryAt.get(id)?.backoffMs ?? 0) * 2, backoffMinMs), backoffMaxMs);
        this.stopRetryAt.set(id, { at: Date.now() + backoffMs, backoffMs });
        this.after(backoffMs + 10, () => this.trigger(0));
        this.log.warn({ replica, container: name, reason, err: e.message, retryInMs: backoffMs }, 'could not stop the container; will try again');
        throw e;
      })
      .finally(() => {
        this.stopping.delete(id);
        this.stopRemoves.delete(id);
        this.trigger();
      });
    this.stopping.set(id, tracked);
    return tracked;
  }

  // ------------------------------------------------------------------ reconcile

  private ready(): boolean {
    return !this.stopped && !this.removing && this.dockerUp && this.dockerSynced && this.desiredInf.synced && this.commandInf.synced;
  }

  /** Schedules a pass after the debounce (or `delayMs`); one pass at a time. */
  private trigger(delayMs = this.opts.timings.debounceMs): void {
    if (this.stopped || this.removing) return;
    if (this.passRunning) {
      this.again = true;
      return;
    }
    if (this.passTimer) return;
    this.passTimer = setTimeout(() => {
      this.passTimer = undefined;
      void this.pass();
    }, Math.max(delayMs, this.writeBackoffMs));
  }

  /** What decide() sees: informer contents, containers, starts and stops under way. */
  private snapshot(): AgentSnapshot {
    const node = this.node;
    const desired = new Map<string, ReplicaDesired>();
    const invalid = new Map<string, InvalidDesired>();
    const dPrefix = keys.desiredOf(node);
    for (const [key, v] of this.desiredInf.items) {
      const replica = key.slice(dPrefix.length);
      const s = v.value.spec;
      const why =
        s.node !== node ? `desired/${node}/${replica} names node ${JSON.stringify(s.node)}` : s.replica !== replica ? `desired/${node}/${replica} names replica ${JSON.stringify(s.replica)}` : undefined;
      if (!why) {
        desired.set(replica, v.value);
        continue;
      }
      invalid.set(replica, { reason: why, deployment: s.deployment, service: s.service });
      const seen = `${key}@${v.modRevision}`;
      if (!this.invalidCounted.has(seen)) {
        this.invalidCounted.add(seen);
        agentMetrics.malformedDesired.inc();
        this.log.error({ key, reason: why }, 'desired key not meant for this node; reporting it as failed (invalid_spec)');
      }
    }
    for (const [key, reason] of this.desiredInf.malformed) invalid.set(key.slice(dPrefix.length), { reason, ...this.invalidMeta.get(key) });
    for (const key of this.invalidMeta.keys()) if (!this.desiredInf.malformed.has(key)) this.invalidMeta.delete(key);
    const cPrefix = keys.commandsOf(node);
    const commands = new Map([...this.commandInf.items].map(([k, v]) => [k.slice(cPrefix.length), v.value]));
    const starts = new Map<string, StartProgress>([...this.workers].map(([r, w]) => [r, w.progress]));
    for (const id of this.stopRetryAt.keys()) if (!this.cache.get(id)) this.stopRetryAt.delete(id);
    return {
      node,
      desired,
      invalid,
      commands,
      observed: this.observed,
      acked: this.acked,
      containers: this.cache.values(),
      starts,
      // A stop that failed is not ordered again before its back-off ends.
      stopping: new Set([...this.stopping.keys(), ...[...this.stopRetryAt].filter(([, r]) => r.at > Date.now()).map(([id]) => id)]),
    };
  }

  private async pass(): Promise<void> {
    if (!this.ready()) return;
    this.passRunning = true;
    try {
      const now = Date.now();
      const plan = decide(this.snapshot(), now, { healthRefreshMs: this.opts.statusIntervalMs });
      this.execute(plan);
      await this.writeObserved(plan);
      this.writeBackoffMs = 0;
      if (plan.recheckAt !== undefined) {
        clearTimeout(this.recheckTimer);
        this.recheckTimer = setTimeout(() => this.trigger(0), Math.max(0, plan.recheckAt - Date.now()) + 10);
      }
    } catch (e) {
      const { backoffMinMs, backoffMaxMs } = this.opts.timings;
      this.writeBackoffMs = Math.min(Math.max(this.writeBackoffMs * 2, backoffMinMs), backoffMaxMs);
      agentMetrics.observedWrites.inc({ result: 'failed' });
      this.log.warn({ err: this.opts.store.unreachable(e).message, retryInMs: this.writeBackoffMs }, 'could not write observed state; containers are left as they are, retrying');
      this.again = true;
    } finally {
      this.passRunning = false;
      if (this.again) {
        this.again = false;
        this.trigger();
      }
    }
  }

  private execute(plan: AgentPlan): void {
    for (const c of plan.cancels) {
      const w = this.workers.get(c.replica);
      if (!w) continue;
      w.cancel();
      this.workers.delete(c.replica);
      if (w.progress.phase !== 'failed') this.log.info({ replica: c.replica, reason: c.reason, revision: w.progress.revision }, 'start cancelled');
    }
    for (const s of plan.starts) this.launch(s);
    for (const s of plan.stops) void this.stopContainer(s.containerId, s.reason, s.replica, s.remove).catch(() => undefined);
    const counts = new Map<string, number>();
    for (const c of this.cache.values()) counts.set(c.state, (counts.get(c.state) ?? 0) + 1);
    agentMetrics.containers.reset();
    for (const [state, n] of counts) agentMetrics.containers.set({ state }, n);
  }

  private launch(order: StartOrder): void {
    this.workers.get(order.replica)?.cancel();
    const w = new StartWorker(order, {
      docker: this.docker,
      slots: this.slots,
      owner: this.owner,
      timings: this.opts.timings,
      log: this.log,
      refresh: (id) => this.refresh(id),
      stop: (id, reason, replica) => this.stopContainer(id, reason, replica),
      changed: () => this.trigger(),
    });
    this.workers.set(order.replica, w);
    if (order.command !== undefined) this.log.info({ replica: order.replica, seq: order.command }, 'executing restart command');
    void w.run().then((result) => {
      if (result !== 'cancelled' && order.command !== undefined) {
        this.acked.set(order.replica, Math.max(this.acked.get(order.replica) ?? -1, order.command));
        agentMetrics.commands.inc({ op: 'restart' });
      }
      const mine = this.workers.get(order.replica) === w;
      if (w.interrupted && mine) {
        // Interrupted by an error (Docker away, a stop that failed): the worker stays in the map,
        // so nothing new starts, until its back-off ends.
        const { backoffMinMs, backoffMaxMs } = this.opts.timings;
        const backoffMs = Math.min(Math.max((this.startBackoff.get(order.replica) ?? 0) * 2, backoffMinMs), backoffMaxMs);
        this.startBackoff.set(order.replica, backoffMs);
        this.after(backoffMs, () => {
          if (this.workers.get(order.replica) === w) this.workers.delete(order.replica);
          this.trigger(0);
        });
        return;
      }
      if (result === 'started') this.startBackoff.delete(order.replica);
      // A terminal failure stays (decide will not retry it); anything else makes way for the next pass.
      if (mine && result !== 'invalid_spec') this.workers.delete(order.replica);
      this.trigger();
    });
  }

  private async writeObserved(plan: AgentPlan): Promise<void> {
    const node = this.node;
    const acts: Act[] = [
      ...plan.observe.map((status) => {
        const obj: ReplicaObserved = {
          apiVersion: API_VERSION,
          kind: 'ReplicaObserved',
          metadata: { name: this.desiredInf.items.get(keys.desired(node, status.replica))?.value.metadata.name ?? status.replica },
          status,
        } as ReplicaObserved;
        return { label: `observe ${status.replica}`, ops: [{ op: 'put', key: keys.observed(node, status.replica), value: obj } as Op] };
      }),
      ...plan.forget.map((r) => ({ label: `forget ${r}`, ops: [{ op: 'delete', key: keys.observed(node, r) } as Op] })),
    ];
    if (!acts.length) return;
    await commitActs(this.opts.store, acts);
    agentMetrics.observedWrites.inc({ result: 'ok' }, acts.length);
    for (const s of plan.observe) {
      this.observed.set(s.replica, s);
      this.log.debug({ replica: s.replica, state: s.state, code: s.code, revision: s.revision }, 'observed');
    }
    for (const r of plan.forget) {
      this.observed.delete(r);
      this.acked.delete(r);
      this.startBackoff.delete(r);
    }
  }

  // ------------------------------------------------------------------ heartbeat and pressure

  /** Fixed rate: the time a heartbeat takes does not stretch the interval others judge freshness by. */
  private scheduleHeartbeat(delayMs = this.opts.statusIntervalMs): void {
    if (this.stopped || this.removing) return;
    this.heartbeatTimer = setTimeout(() => {
      const began = Date.now();
      void this.heartbeat().finally(() => this.scheduleHeartbeat(Math.max(0, this.opts.statusIntervalMs - (Date.now() - began))));
    }, delayMs);
  }

  private async ensureLease(): Promise<string> {
    if (this.lease && this.leaseId && !this.leaseLost) return this.leaseId;
    void this.lease?.revoke().catch(() => undefined);
    const lease = this.opts.store.ns.lease(this.opts.timings.heartbeatTtlSec, { autoKeepAlive: true });
    this.lease = lease;
    this.leaseId = undefined;
    lease.on('lost', (e: Error) => {
      if (this.lease !== lease || this.stopped) return;
      this.leaseLost = true;
      this.log.warn({ err: e.message }, 'heartbeat lease lost; a new one is granted with the next heartbeat');
    });
    this.leaseId = await lease.grant();
    this.leaseLost = false;
    return this.leaseId;
  }

  /** Watches nodes/<host> alone (the agent reads no other node); a broken watch is re-made on the next heartbeat. */
  private async watchNode(): Promise<void> {
    if (this.nodeWatch || this.stopped || this.removing) return;
    const w = await this.opts.store.ns.watch().key(keys.node(this.node)).create();
    this.nodeWatch = w;
    w.on('delete', () => void this.onNodeRemoved());
    w.on('error', (e: Error) => {
      if (this.nodeWatch === w) this.nodeWatch = undefined;
      this.log.debug({ err: e.message }, 'node watch ended; the next heartbeat checks the node and watches again');
    });
  }

  /**
   * Samples pressure (when Docker answers) and rewrites heartbeats/<host> on the agent's lease,
   * only while nodes/<host> exists: a removed node gets no heartbeat back.
   */
  private async heartbeat(): Promise<void> {
    if (this.stopped || this.removing) return;
    try {
      const pressure = await this.currentPressure();
      const leaseId = await this.ensureLease();
      const hb: Heartbeat = {
        apiVersion: API_VERSION,
        kind: 'Heartbeat',
        metadata: { name: this.node },
        spec: {
          node: this.node,
          time: new Date().toISOString(),
          intervalMs: this.opts.statusIntervalMs,
          agentVersion: VERSION,
          dockerUp: this.dockerUp,
          ...(pressure ? { pressure } : {}),
        },
      } as Heartbeat;
      for (let attempt = 0; ; attempt++) {
        const node = await this.opts.store.get<Node>(keys.node(this.node));
        if (!node) return void (await this.onNodeRemoved());
        const ops: Op[] = [
          { op: 'check', key: keys.node(this.node), modRevision: node.modRevision },
          { op: 'put', key: keys.heartbeat(this.node), value: hb, lease: leaseId },
        ];
        // A conflict is the CLI cordoning the node meanwhile: read it again.
        if ((await commitActs(this.opts.store, [{ label: 'heartbeat', ops }])).committed.length || attempt >= 2) break;
      }
      await this.watchNode();
      if (this.heartbeatFailing) {
        this.log.info('heartbeat written again; etcd is reachable; relisting desired state');
        void this.relistStore();
      }
      this.heartbeatFailing = false;
    } catch (e) {
      // The lease expired on the server (the agent was cut off longer than its TTL): grant anew.
      if (/lease not found/i.test((e as Error).message ?? '')) this.leaseLost = true;
      agentMetrics.heartbeatFailures.inc();
      if (!this.heartbeatFailing) this.log.warn({ err: this.opts.store.unreachable(e).message }, 'could not write the heartbeat; containers keep running, retrying every interval');
      this.heartbeatFailing = true;
    }
  }

  /**
   * After an etcd outage, list and watch afresh rather than wait for the client's watch to
   * reconnect on its own back-off: what changed meanwhile is acted on at once.
   */
  private async relistStore(): Promise<void> {
    await Promise.all([this.desiredInf.start(), this.commandInf.start()]);
    this.trigger();
  }

  /**
   * The latest sample, taken now when it is quick; a slow one (Docker's stats fallback on a busy
   * engine) must not hold the heartbeat back, so after half an interval the previous sample goes.
   */
  private async currentPressure(): Promise<PressureSample | undefined> {
    if (!this.dockerUp || !this.dockerSynced) return undefined;
    this.sampling ??= this.samplePressure()
      .then((p) => (this.lastPressure = p))
      .finally(() => (this.sampling = undefined));
    return withTimeout(this.sampling, this.opts.statusIntervalMs / 2, 'sampling is slow').catch(() => this.lastPressure);
  }

  private async samplePressure(): Promise<PressureSample> {
    const end = agentMetrics.sampleDuration.startTimer();
    try {
      const r = await this.sampler.sample(this.cache.values());
      agentMetrics.pressure.set({ dimension: 'cpu' }, r.sample.cpuUtil);
      agentMetrics.pressure.set({ dimension: 'memory' }, r.sample.memoryUtil);
      if (r.fallbacks) agentMetrics.sampleFallbacks.inc(r.fallbacks);
      return r.sample;
    } finally {
      end();
    }
  }

  // ------------------------------------------------------------------ node removal

  /**
   * nodes/<host> was deleted (jaco node remove): stop and remove every container with its grace,
   * delete this node's observed keys and heartbeat, and end with exit code 0.
   */
  private async onNodeRemoved(): Promise<void> {
    if (this.removing || this.stopped) return;
    const node = this.node;
    // The informer also drops a key whose value turned malformed: only a key that is gone counts.
    try {
      if (await this.opts.store.get(keys.node(node))) {
        this.log.warn({ key: keys.node(node) }, 'nodes/<node> still exists; not a removal');
        return;
      }
    } catch (e) {
      this.log.warn({ err: this.opts.store.unreachable(e).message }, 'could not confirm the node removal; the next relist decides');
      return;
    }
    if (this.removing || this.stopped) return;
    this.removing = true;
    this.log.warn(`node ${node} was deleted from the cluster (nodes/${node}); stopping and removing its containers`);
    this.clearTimers();
    for (const w of this.workers.values()) w.cancel();
    this.workers.clear();
    let code = 0;
    let removed = 0;
    try {
      const ids = new Set([...this.cache.values().map((c) => c.id), ...(this.docker ? await this.docker.listOwn() : [])]);
      const results = await Promise.allSettled([...ids].map((id) => this.stopContainer(id, 'node_removed', this.cache.get(id)?.replica ?? '')));
      removed = results.filter((r) => r.status === 'fulfilled').length;
      if (removed < ids.size) throw new Error(`${ids.size - removed} container(s) could not be removed`);
    } catch (e) {
      code = 1;
      this.log.error({ err: (e as Error).message }, 'could not remove every container of the removed node; remove them by hand (label jaco.dev/node)');
    }
    this.eventsAbort?.abort();
    try {
      const { items } = await this.opts.store.list<ReplicaObserved>(keys.observedOf(node));
      const ops: Act[] = [...items.map((i) => ({ label: 'forget', ops: [{ op: 'delete', key: i.key } as Op] })), { label: 'heartbeat', ops: [{ op: 'delete', key: keys.heartbeat(node) }] }];
      await commitActs(this.opts.store, ops);
      await this.lease?.revoke().catch(() => undefined);
      this.lease = undefined;
    } catch (e) {
      code = 1;
      this.log.error({ err: this.opts.store.unreachable(e).message }, 'could not delete the observed keys and heartbeat of the removed node');
    }
    const reason = `node ${node} was removed from the cluster: ${removed} container(s) stopped and removed, observed state and heartbeat deleted; exiting`;
    this.log.info({ containers: removed }, reason);
    this.resolveExit({ code, reason });
  }
}
