// The node-agent: one host's controller on the shared runtime, unelected, fenced by its claim on
// the node. It is composed of parts, one job each:
//   presence.ts     registration, the claim on heartbeats/<host>, heartbeats with pressure, removal
//   engine.ts       the container engine behind one interface: Docker (docker.ts) or hollow
//   docker-view.ts  the picture of its containers (events + resync)
//   executor.ts     carrying out starts and stops on the engine
//   network.ts      a cluster-network replica's addresses in its sandbox (cni.ts: CNI ptp)
//   probes.ts       the health checks it runs itself (healthcheck.http/.tcp) against its replicas
//   decide.ts       the pure core: desired replicas + containers + work under way → plan
//   overlay.ts      the WireGuard mesh between nodes: a second controller on its manager (--overlay)
//   names.ts        the node's resolver for its cluster-network replicas (dns.ts): another controller
// The runtime (src/runtime) holds its cache of desired/<host>/ and commands/<host>/, runs the pass
// and writes observed/<host>/. The agent never writes desired state, never restarts a container on
// its own, and leaves workloads running when etcd or Docker blink.
import { Backoff, sleep } from '../../src/backoff.js';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type Capacity, type HeartbeatSpec, type ImageSettings, type ImageSettingsSpec, type NodeCopy, type PressureSample, type Registry, type ReplicaCommand, type ReplicaDesired, type ReplicaObserved, type ReplicaObservedStatus } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import type { Act } from '../../src/runtime/acts.js';
import type { Cache } from '../../src/runtime/cache.js';
import { Manager } from '../../src/runtime/manager.js';
import type { ControllerSpec, PassResult, Runner } from '../../src/runtime/runner.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { withTimeout } from '../../src/store/store.js';
import { commitActs, type Op } from '../../src/store/writer.js';
import { CgroupReader } from './cgroup.js';
import { decide, START_REPORT_DELAY_MS, type AgentPlan, type AgentSnapshot, type InvalidDesired } from './decide.js';
import { DockerEngine } from './docker.js';
import { DockerView } from './docker-view.js';
import { EarlyHealth } from './early-health.js';
import { monotonicNow, RunningClock } from './running-clock.js';
import { AgentProbes, dialProbe } from './probes.js';
import { Executor } from './executor.js';
import { agentMetrics } from './metrics.js';
import { Presence } from './presence.js';
import { Overlay } from './overlay.js';
import { NodeUsageReader, type PressureMode } from './node-usage.js';
import { PressureSampler } from './pressure.js';
import { readStorageFacts, sampleDisk, type StorageFacts } from './disk.js';
import type { ContainerEngine, Owner, EngineFactory } from './engine.js';
import { DEFAULT_IMAGE_SETTINGS, dockerAuthConfig, qualifyImage, registryAccessFor, registrySecretOf, type PullAuth } from '../../src/images/access.js';
import { formatReference, parseImageReference } from '../../src/images/reference.js';
import { NoDelivery, ReplicaFiles, TmpfsDelivery } from './files.js';
import { loadOrCreateNodeKey } from '../../src/secrets/keyfile.js';
import { generateKeyPair, type KeyPair } from '../../src/secrets/seal.js';
import { join } from 'node:path';
import { CniNetwork, DEFAULT_CNI_BIN_DIR } from './cni.js';
import { MemoryNetwork } from './network.js';
import { DEFAULT_SANDBOX_IMAGE } from './sandbox.js';
import { NodeResolver } from './names.js';
import { AgentApi } from './api-server.js';
import type { AgentOptions } from './options.js';

export { NodeRemovedError } from './presence.js';

/** How often the agent looks for secrets' tmpfs left behind by containers that are gone. */
const FILES_SWEEP_MS = 10_000;

/** Why the agent ends by itself (the node was removed while it ran). */
export interface AgentExit {
  code: number;
  reason: string;
}

/** The agent's memory of its own writes: what it last wrote to observed/<host>/, by replica. */
export interface AgentState {
  observed: ReadonlyMap<string, ReplicaObservedStatus>;
}

interface AgentPass extends PassResult<AgentState> {
  plan: AgentPlan;
  /** When it was decided, on the monotonic clock (its starts' queuedAt). */
  mono: number;
}


export class NodeAgent {
  readonly log: Logger;
  /** Resolves when the agent ends by itself (node removed); the CLI exits with its code. */
  readonly exited: Promise<AgentExit>;
  private resolveExit!: (e: AgentExit) => void;
  private owner!: Owner;
  private view!: DockerView;
  private executor!: Executor;
  private presence!: Presence;
  private sampler!: PressureSampler;
  private early!: EarlyHealth;
  private readonly running = new RunningClock();
  private probes!: AgentProbes;
  private manager?: Manager;
  private runner?: Runner<AgentState, AgentSnapshot, unknown, AgentPass>;
  /** The node's resolver for its cluster-network replicas (names.ts). */
  private resolver?: NodeResolver;
  private sampling?: Promise<PressureSample>;
  private lastPressure?: PressureSample;
  /** Docker's storage (disk.ts): read once at start; absent while the engine did not answer, or hollow. */
  private storage?: StorageFacts;
  /** Desired keys reported as invalid (counted once per revision). */
  private readonly invalidCounted = new Set<string>();
  private stopped = false;
  private removing = false;
  /** What the agent last knew it had written to observed/<host>/ (the runner's memory starts from it). */
  private knownObserved: ReadonlyMap<string, ReplicaObservedStatus> = new Map();
  /** Reading observed/ again after the store was replaced (no pass meanwhile). */
  private reloading = false;
  private reloadGen = 0;
  /** A missing node key is being looked into (the heartbeat and the node watch both report it). */
  private checkingRemoval = false;
  /** Containers held out of routing before their stop, since when (decide's plan.retiring). */
  private retiring: ReadonlyMap<string, number> = new Map();
  /** The node's copies of secrets and configs, opened with its own key. */
  private files!: ReplicaFiles;
  private lastSweep = 0;
  private overlay?: Overlay;
  /** The logs and exec endpoint, when it serves one. */
  private api?: AgentApi;

  constructor(readonly opts: AgentOptions) {
    this.log = opts.log;
    this.exited = new Promise((r) => (this.resolveExit = r));
  }

  get node(): string {
    return this.opts.node;
  }

  /** What its pressure measures: the whole host, or its own containers (AgentOptions.pressureMode). */
  get pressureMode(): PressureMode {
    return this.opts.pressureMode ?? (this.opts.engine ? 'containers' : 'node');
  }

  /** The containers the agent knows (tests). */
  get containers() {
    return this.view.cache;
  }

  // ------------------------------------------------------------------ start and stop

  /** Registers and claims the node and starts every loop; throws NodeRemovedError when it must not run. */
  async start(): Promise<void> {
    const { store, node, timings } = this.opts;
    const uid = (await this.untilEtcd('read the cluster uid', () => clusterInfo(store))).uid;
    this.owner = { clusterUid: uid, node, ...(this.opts.address ? { address: this.opts.address } : {}) };
    const trigger = () => this.runner?.trigger();
    const makeEngine: EngineFactory = this.opts.engine ?? ((o) => new DockerEngine(this.opts.dockerHost, o));
    const engine = makeEngine(this.owner);
    const nodeKey = this.nodeKey();
    // Hollow nodes (an engine of their own) have no files to write; a real host writes each on a tmpfs.
    const delivery = this.opts.stateDir && !this.opts.engine ? new TmpfsDelivery(join(this.opts.stateDir, 'files'), this.log) : new NoDelivery();
    this.files = new ReplicaFiles(node, nodeKey, delivery, this.log);
    // Synced: a first pressure sample can go at once (heartbeats otherwise wait an interval).
    this.view = new DockerView(engine, timings, this.log, trigger, () => this.presence?.beatNow());
    const network = this.opts.network ?? (this.opts.engine ? new MemoryNetwork() : new CniNetwork(this.opts.cniBinDir ?? DEFAULT_CNI_BIN_DIR));
    this.executor = new Executor(
      this.view,
      this.owner,
      timings,
      this.log,
      trigger,
      network,
      () => this.sandboxImage(),
      {
        dirOf: (c) => this.files.dirOf(c),
        prepare: (c, t) => this.files.prepare(c, t, (kind, name) => this.manager?.cache.kind<NodeCopy>('copies').get(`${kind}/${name}`)?.value),
        release: (c) => this.files.release(c),
      },
      (image) => this.registryAuth(image),
      (id, replica) => this.api?.keepPrevious(id, replica) ?? Promise.resolve(),
    );
    this.early = new EarlyHealth(engine.exec?.bind(engine), (id) => this.view.cache.get(id), this.log, trigger);
    this.probes = new AgentProbes(engine.probe?.bind(engine) ?? dialProbe, (id) => this.view.cache.get(id), this.log, trigger);
    this.sampler = new PressureSampler(engine.usage ?? new CgroupReader(this.opts.cgroupRoot), (id) => engine.stats(id), this.opts.capacity, {
      mode: this.pressureMode,
      node: new NodeUsageReader(this.opts.cgroupRoot),
    });
    this.overlay = this.makeOverlay();
    this.storage = await this.readStorage(engine);
    if (this.storage) this.executor.capDisk = this.storage.capped;
    // The node's scratch disk: declared (--capacity disk=…), else the data root's filesystem.
    const diskBytes = this.opts.capacity.diskBytes ?? (this.storage ? await sampleDisk(this.storage).then((d) => d.totalBytes, () => undefined) : undefined);
    const capacity = diskBytes !== undefined ? { ...this.opts.capacity, diskBytes } : this.opts.capacity;
    // Listening before the node is registered: the endpoint it publishes answers.
    const apiEndpoint = await this.startApi(engine);
    this.presence = new Presence({
      ...this.opts,
      capacity: await this.withRuntimes(engine, capacity),
      health: () => this.healthSamples(),
      secretsKey: { id: nodeKey.id, publicKey: nodeKey.publicKey },
      overlay: this.overlay?.publication,
      ...(apiEndpoint ? { apiEndpoint } : {}),
      pressure: () => this.currentPressure(),
      dockerUp: () => this.view.up,
      removed: () => void this.onNodeRemoved(),
      claimChanged: (held) => {
        // Another agent runs the node now: nothing may be done to its containers from here.
        if (!held) this.executor.stopAll();
        trigger();
      },
    });
    await this.view.start();
    await this.untilEtcd('register and claim the node', () => this.presence.start());
    this.knownObserved = await this.untilEtcd('read observed state', () => this.loadObserved());
    const desiredPrefix = keys.desiredOf(node);
    const commandsPrefix = keys.commandsOf(node);
    // What it pulls with (registries/): only an agent that pulls (not a hollow one) holds it.
    const pulls = !this.opts.engine;
    if (this.opts.resolver ?? !this.opts.engine) this.resolver = new NodeResolver({ log: this.log.child({ component: 'dns' }) });
    const copiesPrefix = keys.copiesOf(node);
    this.manager = new Manager(
      {
        store,
        timings,
        log: this.log,
        identity: `agent ${node}`,
        ...(this.opts.clock ? { clock: this.opts.clock } : {}),
        extraSources: pulls ? ['registries', 'imageSettings'] : [],
        // Each of its own prefixes on its own watch: etcd RBAC lets an agent read nothing else.
        cache: {
          specs: { desired: { prefix: desiredPrefix, kind: 'ReplicaDesired' }, commands: { prefix: commandsPrefix, kind: 'ReplicaCommand' }, copies: { prefix: copiesPrefix, kind: 'NodeCopy' } },
          watch: 'each',
        },
      },
      [this.spec(), ...(this.overlay ? [this.overlay.spec()] : []), ...(this.resolver ? [this.resolver.spec()] : [])],
    );
    this.runner = this.manager.runners[0] as Runner<AgentState, AgentSnapshot, unknown, AgentPass>;
    // Before the runner's own listener: its memory restarts from what the new store holds.
    this.manager.cache.on('replaced', () => void this.reloadObserved());
    await this.overlay?.start();
    await this.manager.start();
    // Files of containers removed while the agent was away.
    await this.sweepFiles((this.opts.clock ?? Date.now)());
    this.log.info(
      { cluster: uid, capacity: this.opts.capacity, labels: this.opts.labels, docker: engine.host, statusIntervalMs: this.opts.statusIntervalMs, pressureMode: this.pressureMode, timings: timings.name },
      'node-agent started',
    );
  }

  /**
   * The cluster's credentials for an image's registry, as the engine takes them (none stored:
   * none): the user from registries/<host>, the password from this node's copy of the secret the
   * record names. decide holds a start until that copy is here (AgentSnapshot.pullSecrets); a copy
   * gone between the two throws FileDeliveryError (the start is retried).
   */
  private registryAuth(image: string): PullAuth | undefined {
    const cache = this.manager?.cache;
    if (!cache?.holds('registries')) return undefined;
    let registry: string;
    try {
      registry = qualifyImage(parseImageReference(image), this.imageSettings()).registry;
    } catch {
      return undefined;
    }
    const copies = cache.kind<NodeCopy>('copies');
    const access = registryAccessFor(registry, [...cache.kind<Registry>('registries').items.values()].map((v) => v.value), undefined, (secret) => this.files.registryPassword(secret, copies.get(`secret/${secret}`)?.value));
    return access.credentials ? dockerAuthConfig(registry, access.credentials) : undefined;
  }

  /** The cluster's image setting (config/images) as the cache holds it. */
  private imageSettings(): ImageSettingsSpec {
    const cache = this.manager?.cache;
    if (!cache?.holds('imageSettings')) return DEFAULT_IMAGE_SETTINGS;
    return [...cache.kind<ImageSettings>('imageSettings').items.values()][0]?.value.spec ?? DEFAULT_IMAGE_SETTINGS;
  }

  /**
   * The pause image as the engine pulls it: a short name at the cluster's default registry
   * (config/images, held in the cache), like any replica's image. Throws ShortNameError when the
   * cluster has no default registry and Docker Hub is off.
   */
  private sandboxImage(): string {
    const image = this.opts.sandboxImage ?? DEFAULT_SANDBOX_IMAGE;
    const ref = parseImageReference(image);
    return ref.shortName ? formatReference(qualifyImage(ref, this.imageSettings())) : image;
  }

  /** Stops the loops; containers keep running (an agent restart adopts them). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.view?.stop();
    this.executor?.stopAll();
    this.early?.stop();
    this.probes?.stop();
    this.overlay?.stop();
    await this.api?.stop();
    await this.manager?.stop();
    await this.resolver?.stop();
    // The heartbeat goes with its lease: the node turns NotReady at once rather than after the TTL.
    await this.presence?.stop(true);
  }

  health(): { ok: boolean; detail: Record<string, unknown> } {
    const cache = this.manager?.cache;
    const synced = !!cache?.synced;
    const claimed = !!this.presence?.fence();
    return {
      ok: !!this.view?.up && synced && claimed && !this.removing && !this.stopped,
      detail: {
        node: this.node,
        pressureMode: this.pressureMode,
        docker: this.view?.health(),
        cache: { synced, revision: cache?.revision, store: cache?.storeHealth() },
        claim: this.presence?.health(),
        containers: this.view?.cache.size ?? 0,
        startsInFlight: this.executor?.startsInFlight() ?? 0,
        failingActs: this.runner?.failures.persistent().length ?? 0,
        ...(this.overlay ? { overlay: this.overlay.health() } : {}),
        ...(this.resolver ? { resolver: this.resolver.health() } : {}),
        ...(this.removing ? { removing: true } : {}),
      },
    };
  }

  /** Retries an etcd step with back-off until it succeeds (the agent may boot before etcd). */
  private async untilEtcd<T>(what: string, fn: () => Promise<T>): Promise<T> {
    const retry = new Backoff(this.opts.timings.backoffMinMs, this.opts.timings.backoffMaxMs);
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if ((e as Error).name === 'NodeRemovedError' || this.stopped) throw e;
        const err = this.opts.store.unreachable(e);
        const retryInMs = retry.next();
        this.log.warn({ err: err.message, retryInMs }, `could not ${what}; retrying`);
        await sleep(retryInMs);
      }
    }
  }

  /**
   * The store was replaced (restored, wiped): what the agent remembers writing to observed/ is
   * read again from it, and no pass runs until then (every key it lacks is written again, every
   * key of a replica gone is forgotten).
   */
  private async reloadObserved(): Promise<void> {
    const gen = ++this.reloadGen;
    this.reloading = true;
    try {
      const observed = await this.untilEtcd('read observed state again', () => this.loadObserved());
      if (gen !== this.reloadGen) return;
      this.knownObserved = observed;
      this.runner?.reset();
      this.reloading = false;
    } catch {
      if (gen === this.reloadGen) this.reloading = false; // stopped meanwhile
    }
  }

  private async loadObserved(): Promise<Map<string, ReplicaObservedStatus>> {
    const prefix = keys.observedOf(this.node);
    const { items } = await this.opts.store.list<ReplicaObserved>(prefix);
    return new Map(items.filter((i) => i.value.status).map((i) => [i.key.slice(prefix.length), i.value.status]));
  }

  // ------------------------------------------------------------------ the pass

  /** The agent as the runtime runs it. */
  private spec(): ControllerSpec<AgentState, AgentSnapshot, unknown, AgentPass> {
    return {
      name: 'node-agent',
      reads: ['desired', 'commands', 'copies'],
      elected: false,
      initialState: () => ({ observed: this.knownObserved }),
      ready: () => !this.stopped && !this.removing && !this.reloading && this.view.up && this.view.synced && !!this.presence.fence(),
      fence: () => this.presence.fence(),
      snapshot: ({ cache }, state, now) => this.snapshot(cache, state, now),
      decide: (state, snap, now) => {
        const plan = decide(snap, now, { healthRefreshMs: this.opts.statusIntervalMs, startReportDelayMs: START_REPORT_DELAY_MS });
        this.retiring = plan.retiring;
        return { plan, mono: snap.mono, acts: this.observeActs(plan), wakeAt: plan.recheckAt, next: (landed) => this.afterWrite(state, plan, landed) };
      },
      // Starts and stops go at once; a restart only once its acknowledgement is stored (afterPass).
      perform: ({ plan, mono }, now) => {
        this.executor.execute(plan, { restarts: false, mono });
        // New containers get the agent's own first health checks (issue 14: a step need not wait
        // for Docker's first interval).
        this.early.sync(this.view.cache.values());
        // Agent-run checks (healthcheck.http/.tcp) of every running container that has one.
        this.probes.sync(this.view.cache.values());
        void this.sweepFiles(now);
      },
      afterPass: (_state, { plan }, landed) => {
        for (const s of plan.starts) if (s.kind === 'restart' && landed.has(`observe ${s.replica}`)) this.executor.launch(s);
        const n = plan.observe.filter((o) => landed.has(`observe ${o.replica}`)).length + plan.forget.filter((r) => landed.has(`forget ${r}`)).length;
        if (n) agentMetrics.observedWrites.inc({ result: 'ok' }, n);
      },
      fenced: () => this.presence.reclaim(),
    };
  }

  /** What decide() sees: the cache's desired and commands, containers, starts and stops under way. */
  private snapshot(cache: Cache, state: AgentState, now: number): AgentSnapshot {
    const node = this.node;
    const desiredSrc = cache.kind<ReplicaDesired>('desired');
    const desired = new Map<string, ReplicaDesired>();
    const invalid = new Map<string, InvalidDesired>();
    const reportInvalid = (key: string, rev: number, inv: InvalidDesired) => {
      invalid.set(desiredSrc.rest(key), inv);
      const seen = `${key}@${rev}`;
      if (this.invalidCounted.has(seen)) return;
      this.invalidCounted.add(seen);
      agentMetrics.malformedDesired.inc();
      this.log.error({ key, reason: inv.reason }, 'desired key this agent cannot run; reporting it as failed (invalid_spec)');
    };
    for (const [key, v] of desiredSrc.items) {
      const replica = desiredSrc.rest(key);
      const s = v.value.spec;
      const why = s.node !== node ? `desired/${node}/${replica} names node ${JSON.stringify(s.node)}` : s.replica !== replica ? `desired/${node}/${replica} names replica ${JSON.stringify(s.replica)}` : undefined;
      if (why) reportInvalid(key, v.modRevision, { reason: why, deployment: s.deployment, service: s.service });
      else desired.set(replica, v.value);
    }
    // Unreadable with a readable version: that version stays in effect (its container keeps running).
    // With none, the key is frozen: reported, nothing started.
    for (const [key, u] of desiredSrc.unreadable) {
      if (desiredSrc.items.has(key)) continue;
      const spec = (u.raw as { spec?: { deployment?: unknown; service?: unknown } } | undefined)?.spec;
      const str = (x: unknown) => (typeof x === 'string' ? x : undefined);
      reportInvalid(key, u.modRevision, { reason: u.reason, deployment: str(spec?.deployment), service: str(spec?.service) });
    }
    const commandsSrc = cache.kind<ReplicaCommand>('commands');
    const commands = new Map([...commandsSrc.items].map(([k, v]) => [commandsSrc.rest(k), v.value]));
    // Docker's health, with the agent's own first check until Docker has spoken (early-health.ts),
    // and the agent's verdicts for the checks it runs itself (probes.ts).
    // How long each has run, on the agent's monotonic clock (readiness: minReadyTime).
    const containers = this.running.stamp(this.probes.overlay(this.early.overlay(this.view.cache.values()), state.observed), now);
    const mono = monotonicNow();
    return {
      node,
      mono,
      desired,
      invalid,
      commands,
      observed: state.observed,
      containers: containers.filter((c) => c.role !== 'sandbox'),
      sandboxes: containers.filter((c) => c.role === 'sandbox'),
      starts: this.executor.starts(),
      stopping: this.executor.stoppingIds(mono),
      retiring: this.retiring,
      files: this.files.states(cache.kind<NodeCopy>('copies').items.values()),
      pullSecrets: this.pullSecrets(cache, desired.values()),
    };
  }

  /** The registry password secret of each desired image whose registry the cluster stores one for. */
  private pullSecrets(cache: Cache, desired: Iterable<ReplicaDesired>): Map<string, string> {
    const out = new Map<string, string>();
    if (!cache.holds('registries')) return out;
    const registries = [...cache.kind<Registry>('registries').items.values()].map((v) => v.value);
    if (!registries.length) return out;
    const settings = this.imageSettings();
    for (const d of desired) {
      const image = d.spec.template.image;
      if (out.has(image)) continue;
      const secret = registrySecretOf(image, registries, settings)?.secret;
      if (secret) out.set(image, secret);
    }
    return out;
  }

  /**
   * Unmounts the secrets' tmpfs of containers that are gone (removed behind the agent's back, or
   * while it was stopped; a start cancelled before its create): at most every FILES_SWEEP_MS.
   */
  private async sweepFiles(now: number): Promise<void> {
    if (now - this.lastSweep < FILES_SWEEP_MS || !this.view.synced) return;
    this.lastSweep = now;
    const keep = new Set([...this.view.cache.values().map((c) => c.name), ...this.executor.startingNames()]);
    try {
      const gone = await this.files.sweep(`jaco-${this.owner.clusterUid.slice(0, 8)}-${this.node}-`, (c) => keep.has(c));
      if (gone.length) this.log.info({ containers: gone }, 'removed the secrets and configs of containers that are gone');
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'could not sweep the files of containers that are gone');
    }
  }

  /** Starts the logs and exec endpoint when asked for (on Docker only); resolves to what it publishes. */
  private async startApi(engine: ReturnType<EngineFactory>): Promise<string | undefined> {
    const api = this.opts.api;
    if (!api) return undefined;
    if (!(engine instanceof DockerEngine)) {
      this.log.warn('no logs and exec endpoint: the container engine is not Docker');
      return undefined;
    }
    const previousDir = this.opts.stateDir ? join(this.opts.stateDir, 'previous') : undefined;
    this.api = new AgentApi({ node: this.node, ...api, docker: engine.docker, containers: () => this.view.cache.values(), log: this.log.child({ component: 'api' }), ...(previousDir ? { previousDir } : {}) });
    return this.api.start();
  }

  /** The node's end of the WireGuard mesh, when asked for (its key is made on the first start). */
  /**
   * Its capacity with the runtimes its engine has (docker info), unless declared: placement
   * filters a service's runtime on them (runtime_missing). An engine away at the start leaves
   * them unknown, said in the log: such a node takes no service that names a runtime.
   */
  private async withRuntimes(engine: ContainerEngine, capacity: Capacity): Promise<Capacity> {
    if (capacity.runtimes || !engine.runtimes) return capacity;
    try {
      return { ...capacity, runtimes: await engine.runtimes() };
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'could not read the engine\'s runtimes: the node offers none until the agent restarts');
      return capacity;
    }
  }

  private makeOverlay(): Overlay | undefined {
    const { overlay, stateDir, address } = this.opts;
    if (!overlay) return undefined;
    if (!stateDir || !address) throw new Error('the overlay needs the agent\'s state directory (its key) and the node\'s address (its endpoint)');
    const active = () => !this.stopped && !this.removing && !!this.presence?.fence();
    return new Overlay({ ...overlay, node: this.node, address, stateDir, timings: this.opts.timings, log: this.log, active });
  }

  /** The node's own key: from its state directory (made there on the first start), or for this run only. */
  private nodeKey(): KeyPair {
    if (!this.opts.stateDir) return generateKeyPair('nk');
    const { key, created } = loadOrCreateNodeKey(this.opts.stateDir);
    this.log.info({ key: key.id, stateDir: this.opts.stateDir, created }, created ? 'made the node key' : 'node key read');
    return key;
  }

  /** observed/<host>/<replica> writes: the agent is their only writer (fenced by its claim). */
  private observeActs(plan: AgentPlan): Act[] {
    const node = this.node;
    return [
      ...plan.observe.map((status) => ({
        label: `observe ${status.replica}`,
        ops: [{ op: 'put', key: keys.observed(node, status.replica), value: { apiVersion: API_VERSION, kind: 'ReplicaObserved', metadata: { name: status.replica }, status } satisfies ReplicaObserved } as Op],
      })),
      ...plan.forget.map((r) => ({ label: `forget ${r}`, ops: [{ op: 'delete', key: keys.observed(node, r) } as Op] })),
    ];
  }

  /** The agent's memory of its observed keys follows what landed. */
  private afterWrite(state: AgentState, plan: AgentPlan, landed: ReadonlySet<string>): AgentState {
    const observed = new Map(state.observed);
    for (const s of plan.observe) {
      if (!landed.has(`observe ${s.replica}`)) continue;
      observed.set(s.replica, s);
      this.log.debug({ replica: s.replica, state: s.state, code: s.code, revision: s.revision }, 'observed');
    }
    for (const r of plan.forget) {
      if (!landed.has(`forget ${r}`)) continue;
      observed.delete(r);
      this.executor.forget(r);
    }
    return { observed };
  }

  // ------------------------------------------------------------------ disk and overlay health

  /** Docker's data root and driver, when the engine answers within a few seconds (else the disk goes unreported). */
  private async readStorage(engine: ContainerEngine): Promise<StorageFacts | undefined> {
    if (!engine.storageInfo) return undefined;
    try {
      const f = await withTimeout(readStorageFacts(() => engine.storageInfo!()), 5000, 'docker info is slow');
      this.log.info({ dataRoot: f.dataRoot, driver: f.driver, backingFs: f.backingFs, capped: f.capped }, f.capped ? 'scratch disk: booked and capped (StorageOpt size)' : `scratch disk: booked, not capped: ${f.driver} on ${f.backingFs ?? 'an unknown filesystem'}`);
      return f;
    } catch (e) {
      this.log.warn({ err: (e as Error).message }, 'could not read Docker\'s storage: the node reports no disk until the agent restarts');
      return undefined;
    }
  }

  /** The heartbeat's disk and overlay samples (degraded is judged from them, src/api/eligibility.ts). */
  private async healthSamples(): Promise<Pick<HeartbeatSpec, 'disk' | 'overlay'>> {
    const disk = this.storage ? await sampleDisk(this.storage).catch(() => undefined) : undefined;
    const overlay = this.overlay?.sample();
    return { ...(disk ? { disk } : {}), ...(overlay ? { overlay } : {}) };
  }

  // ------------------------------------------------------------------ pressure

  /**
   * The latest sample, taken now when it is quick; a slow one (Docker's stats fallback on a busy
   * engine) must not hold the heartbeat back, so after half an interval the previous sample goes.
   */
  private async currentPressure(): Promise<PressureSample | undefined> {
    if (!this.view?.up || !this.view.synced) return undefined;
    this.sampling ??= this.samplePressure()
      .then((p) => (this.lastPressure = p))
      .finally(() => (this.sampling = undefined));
    return withTimeout(this.sampling, this.opts.statusIntervalMs / 2, 'sampling is slow').catch(() => this.lastPressure);
  }

  private async samplePressure(): Promise<PressureSample> {
    const end = agentMetrics.sampleDuration.startTimer();
    try {
      const r = await this.sampler.sample(this.view.cache.values());
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
   * nodes/<host> was found missing. Only a recorded removal (jaco node remove: drains/<host>
   * removed, in the transaction that deleted the node) stops and removes every container, deletes
   * this node's observed keys and heartbeat and ends with exit code 0. Without that record the store
   * lost the node (restored, wiped, a hand delete): the agent registers it again and keeps running
   * everything — no container is touched on the absence of state.
   */
  private async onNodeRemoved(): Promise<void> {
    if (this.removing || this.stopped || this.checkingRemoval) return;
    const node = this.node;
    this.checkingRemoval = true;
    try {
      const absence = await this.presence.absence();
      if (absence === 'present') return;
      if (absence === 'lost') {
        agentMetrics.nodeReregistrations.inc();
        this.log.warn(
          { key: keys.node(node), drain: keys.drain(node) },
          `nodes/${node} is gone but no removal of this node is recorded: the store lost it (restored from a snapshot, restarted empty, deleted by hand); registering it again and keeping every container`,
        );
        await this.presence.register();
        // A store restarted empty lost the cluster's uid too: the one this node's containers carry goes back.
        const { uid } = await clusterInfo(this.opts.store, { uid: this.owner.clusterUid, createdAt: new Date().toISOString() });
        if (uid !== this.owner.clusterUid)
          this.log.error({ stored: uid, ours: this.owner.clusterUid }, "the store holds another cluster uid than this node's containers carry; they are left alone (restart the agent to join the cluster as it is now)");
        return;
      }
    } catch (e) {
      if ((e as Error).name !== 'NodeRemovedError') {
        this.log.warn({ err: this.opts.store.unreachable(e).message }, 'could not tell whether the node was removed; the next heartbeat checks again');
        return;
      }
      // Removed between the look and the registration: the removal goes on below.
    } finally {
      this.checkingRemoval = false;
    }
    if (this.removing || this.stopped) return;
    this.removing = true;
    await this.api?.stop();
    this.log.warn(`node ${node} was deleted from the cluster (nodes/${node}); stopping and removing its containers`);
    await this.manager?.stop();
    this.executor.stopAll();
    this.early.stop();
    this.probes.stop();
    let code = 0;
    let removed = 0;
    try {
      const ids = new Set([...this.view.cache.values().map((c) => c.id), ...(await this.view.docker.listOwn())]);
      // The replicas' containers first, then their sandboxes (addresses, then the container).
      const isSandbox = (id: string) => this.view.cache.get(id)?.role === 'sandbox';
      const stopAll = (list: string[]) => Promise.allSettled(list.map((id) => this.executor.stop(id, 'node_removed', this.view.cache.get(id)?.replica ?? '')));
      const results = [...(await stopAll([...ids].filter((id) => !isSandbox(id)))), ...(await stopAll([...ids].filter(isSandbox)))];
      removed = results.filter((r) => r.status === 'fulfilled').length;
      if (removed < ids.size) throw new Error(`${ids.size - removed} container(s) could not be removed`);
    } catch (e) {
      code = 1;
      this.log.error({ err: (e as Error).message }, 'could not remove every container of the removed node; remove them by hand (label jaco.dev/node)');
    }
    this.view.stop();
    await this.overlay?.remove();
    try {
      const { items } = await this.opts.store.list<ReplicaObserved>(keys.observedOf(node));
      await commitActs(this.opts.store, [...items.map((i) => ({ label: 'forget', ops: [{ op: 'delete', key: i.key } as Op] })), { label: 'heartbeat', ops: [{ op: 'delete', key: keys.heartbeat(node) }] }]);
      await this.presence.release();
    } catch (e) {
      code = 1;
      this.log.error({ err: this.opts.store.unreachable(e).message }, 'could not delete the observed keys and heartbeat of the removed node');
    }
    const reason = `node ${node} was removed from the cluster: ${removed} container(s) stopped and removed, observed state and heartbeat deleted; exiting`;
    this.log.info({ containers: removed }, reason);
    this.resolveExit({ code, reason });
  }
}
