// The deterministic simulation: two copies of `jaco controller all` — each the runtime's real
// Manager (one Reflector-fed Cache, one Runner per controller: scheduler, rollout, drain,
// rebalancer) — and simulated node-agents, on one simulated etcd (etcd.ts: the in-memory key
// space with the writer's compare-and-swap rules, history, compaction). The runners commit with
// the real commitEach, fenced by simulated election keys, with their audit records paired by the
// real AuditLog. One seeded PRNG and a fake clock (the test's fake timers) drive everything: which
// component acts next, agent delays, which faults fire. Same seed, same trace.
//
// Faults: stale decisions (another controller's pass, or the operator, lands between a decision
// and its commit: CAS conflicts); lost replies; leadership lost mid-pass and between passes (two
// candidates per controller, the deposed one still believing it leads); a controller process
// restarting; a cache that lags (decisions from a stale snapshot), a watch that drops (resumed
// from the reflector's own revision), loses events (healed by the consistency check) or is
// cancelled by a compaction (relist); malformed values (schema-invalid, unknown fields, a frozen
// key); an oversized spec; agents dying and returning; containers crashing; operator actions
// (scale, new image, rollback, cordon, drain, remove node, delete and re-create).
import { keys } from '../../src/api/keys.js';
import { nodeAsDecided, nodeReady } from '../../src/api/nodes.js';
import { templateOf } from '../../src/api/serving.js';
import { isStateful, placementMode } from '../../src/api/spec.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentRevision,
  type DeploymentStatus,
  type Heartbeat,
  type Node,
  type NodeCopy,
  type NodeDrain,
  type NodeSpec,
  type NodeSpecRecord,
  type ReplicaCommand,
  type ReplicaDesired,
  type ReplicaObserved,
  type RolloutPlan,
  type ServiceSpec,
} from '../../src/api/types.js';
import { Manager } from '../../src/runtime/manager.js';
import { WATCHABLE } from '../../src/runtime/watchable.js';
import type { ControllerSpec, Runner } from '../../src/runtime/runner.js';
import { deepFreeze } from '../../src/store/interner.js';
import { encodeJson } from '../../src/store/store.js';
import type { Fence } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { CONTROLLERS } from '../../controllers/index.js';
import { testLogger } from '../support/log.js';
import { prng } from '../support/random.js';
import { SharedReader, SimEtcd, type ClientFaults, type LandedTxn } from './etcd.js';
import { ACT_INVARIANTS, BREADTH_LIVENESS, BREADTH_STATE_INVARIANTS, BREADTH_TXN_INVARIANTS, copiesConverged, STATE_INVARIANTS, TXN_INVARIANTS, type Invariant, type TxnInvariant } from './invariants.js';
import { simConfig, simSealedOf, simSecret, SimKeyFile } from './secrets.js';
import { fileId } from '../../src/api/files.js';
import { decide, START_REPORT_DELAY_MS, type AgentSnapshot, type InvalidDesired } from '../../controllers/node-agent/decide.js';
import type { FileState } from '../../controllers/node-agent/files.js';
import { SimEngine } from './engine.js';
import type { Act } from '../../src/runtime/acts.js';

export const T0 = Date.parse('2026-11-21T10:00:00Z');
/** An agent's lease in the simulation: as long as its heartbeat's former freshness window (3 × 10 s). */
const LEASE_TTL_MS = 30_000;
/** The step at which n2's clock jumps 10 minutes (a fault of every run). */
const CLOCK_JUMP_STEP = 100;
const iso = (ms: number) => new Date(ms).toISOString();
/** One silent logger for every simulated process (a pino logger costs ~1 % of a seed to make, per process start). */
const LOG = testLogger();
const CONTROLLER_NAMES = Object.keys(CONTROLLERS);

export interface SimOptions {
  nodes: number;
  steps: number;
  /** Steps at the end with no faults and every agent up: the liveness window. */
  quietSteps: number;
  /** Print every step (SIM_TRACE=1). */
  trace?: boolean;
  /**
   * Every service rolls out with a canary (update.canary 1, autoPromote 5s), and the operator
   * sometimes promotes by hand (sim-canary.test.ts): the canary path under the same faults.
   */
  canary?: boolean;
  /**
   * The workload's breadth (sim-breadth.test.ts): a deployment `infra` with a global service
   * (`agent`, one replica per eligible node) and a stateful one (`db`, one replica with a named
   * volume: never moved or re-placed); drains are sometimes forced (stateful replicas stopped where
   * they are, resumed once the node is uncordoned), a blocked drain is forced or cancelled, and the
   * invariants of BREADTH_INVARIANTS hold too.
   */
  breadth?: boolean;
  /**
   * A pass that decides in steps (the scheduler, service by service) sends each step's acts as
   * it is decided (sim-stepped.test.ts), and the faults between decision and commit fall between
   * the steps of one pass too: another controller lands, the leadership changes, a reply is lost.
   */
  stepped?: boolean;
}

/** The fake clock the runtime's timers run on (test/sim/clock.ts). */
export interface SimTimers {
  /** Sets the clock to `ms` and forgets every pending timer. */
  reset(ms: number): void;
  /** Moves the clock on, running the timers that come due. */
  advance(ms: number): void;
}

export class SimFailure extends Error {
  override name = 'SimFailure';
}

/** Lets every promise chain started so far run to its end (etcd answers at once here). */
// A next-tick callback runs once the microtask queue has drained — every promise chain included —
// and, unlike setImmediate, without a turn of the event loop (a poll of the OS each time: ~10 % of
// a seed, three per step). Nothing here waits on real I/O or macrotasks.
const settle = () => new Promise<void>((r) => process.nextTick(r));

/**
 * Hand edits' oversized services: one whose deployment value just fits an etcd request (1.5 MiB)
 * but whose replica (template + desired fields + decision + audit) cannot; one whose replicas fit
 * one by one but not together.
 */
const HUGE = 'x'.repeat(1_570_000);
const LARGE = 'x'.repeat(900_000);

/** One copy of `jaco controller all`. */
export class Proc {
  readonly faults: ClientFaults = { watchers: new Set() };
  manager!: Manager;
  /** The fence of each controller this process believes it leads. */
  readonly leads = new Map<string, Fence>();
  /** Its election key per controller (absent: not campaigning). */
  readonly campaign = new Map<string, Fence>();
  /** Its watch is slow until then: its cache holds an older cut of the store. */
  lagUntil = 0;
  /** Starts of this process (a restart makes a new Manager). */
  incarnation = 0;

  constructor(readonly name: string) {}

  runner(controller: string): Runner {
    return this.manager.runner(controller);
  }
}

interface Passing {
  proc: Proc;
  controller: string;
  nested: boolean;
  /** The acts of this pass already handed to commit (a stepped pass sends them step by step). */
  sent: number;
}

export class Sim {
  readonly etcd = new SimEtcd();
  now = T0;
  readonly r: () => number;
  readonly nodes: string[];
  readonly procs: Proc[];
  readonly down = new Set<string>();
  readonly trace: string[] = [];
  faults = true;
  step = 0;
  /** Simulated time from the end of faults to convergence. */
  quietMs = 0;
  /** Keys the operator broke by hand, with the last good value (restored later). */
  readonly broken = new Map<string, unknown>();
  /** Keys holding a value that is not JSON, put by hand where nothing else writes (junk()). */
  private readonly junkKeys = new Set<string>();
  /** When each node was last seen NotReady (its heartbeat lapsed), or absent. */
  readonly lapsedAt = new Map<string, number>();
  /** Each agent's last lease keepalive (true time): its heartbeat goes LEASE_TTL_MS after it. */
  private readonly keptAt = new Map<string, number>();
  /** When each agent last rewrote its heartbeat (true time). */
  private readonly beatAt = new Map<string, number>();
  /**
   * How far each node's clock is off the true one (ms): every time its agent writes is on it
   * (issue 29). Seed by seed n1 runs 10 min ahead, behind, or in step, and n2's clock jumps 10 min
   * at step CLOCK_JUMP_STEP; liveness and readiness must not notice.
   */
  readonly clockOffset = new Map<string, number>();
  /** Counts of faults injected, by kind (reported by the test). */
  readonly injected = new Map<string, number>();
  private readonly passing: Passing[] = [];
  private failure?: SimFailure;
  /** Decoded values of the truth, by key, at their mod revision. */
  private readonly decoded = new Map<string, { rev: number; value: unknown }>();
  private readonly reader = new SharedReader(LOG);
  /** Which oversized deployment this seed's operator hand-writes, if any. */
  private readonly oversized?: 'big' | 'large';
  /** The cluster key file both controller processes read (a rotation adds a key to it). */
  readonly keyFile = new SimKeyFile();
  /** Each node's key generation (a re-key: its agent lost its state directory). */
  private readonly nodeKeyGen = new Map<string, number>();
  /** The secret app/web uses now (the operator rotates it: a new name). */
  private secretGen = 1;

  constructor(
    readonly seed: number,
    readonly opts: SimOptions,
    private readonly timers: SimTimers,
  ) {
    this.r = prng(seed);
    this.oversized = seed % 200 === 7 ? 'big' : seed % 200 === 107 ? 'large' : undefined;
    timers.reset(T0);
    this.nodes = Array.from({ length: opts.nodes }, (_, i) => `n${i + 1}`);
    this.procs = ['p1', 'p2'].map((n) => new Proc(n));
    this.stateInvariants = opts.breadth ? [...STATE_INVARIANTS, ...BREADTH_STATE_INVARIANTS] : STATE_INVARIANTS;
    const txnInvariants = opts.breadth ? [...TXN_INVARIANTS, ...BREADTH_TXN_INVARIANTS] : TXN_INVARIANTS;
    this.etcd.onTxn = (t) => this.checkTxn(t, txnInvariants);
    const offset = [0, 600_000, -600_000][seed % 3]!;
    if (offset) {
      this.clockOffset.set('n1', offset);
      this.count('node clock offset');
    }
    for (const n of this.nodes) this.addNode(n);
    // app/web uses a secret and a config (docs/secrets.md): its replicas start only once their
    // node has its copies, which only the secrets controller makes.
    this.put(keys.secret('db_password_1'), simSecret('db_password_1', 'sim-value-1', this.keyFile.primary));
    this.put(keys.config('app.conf'), simConfig('app.conf', 'level = debug\n'));
    this.deploy('app', { web: { ...this.service(3, 1), ...this.webFiles() }, api: this.service(2, 1) });
    // side/worker is on the cluster network: its replicas get addresses (IPAM) wherever they go.
    this.put(keys.networkConfig(), { apiVersion: API_VERSION, kind: 'NetworkConfig', metadata: { name: 'network' }, spec: { ipv4: '10.208.0.0/12', ipv6: 'fd4a:17c2:9e01::/48' } });
    this.deploy('side', { worker: { ...this.service(2, 1), network: 'cluster' } });
    if (opts.breadth) this.deploy('infra', { agent: this.globalService(1), db: this.statefulService(1, 1) });
  }

  /** The invariants checked after every step (the breadth variant's too). */
  private readonly stateInvariants: readonly Invariant[];

  // ------------------------------------------------------------------ the truth, read

  /** A node as operators see it: nodes/<host> joined with nodespecs/<host> (src/api/nodes.ts). */
  decidedNode(n: string): Node | undefined {
    const node = this.get<Node>(keys.node(n));
    return node && nodeAsDecided(node, this.get<NodeSpecRecord>(keys.nodeSpec(n)));
  }

  get<T>(key: string): T | undefined {
    const c = this.etcd.get(key);
    if (!c) return undefined;
    const d = this.decoded.get(key);
    if (d?.rev === c.modRevision) return d.value as T;
    let value: unknown;
    try {
      value = JSON.parse(c.text);
    } catch {
      value = c.text;
    }
    // The truth as read never changes in place (new values are new writes): frozen, so the spec
    // hashes the liveness check takes of it are memoized as the controllers' are (api/serving.ts).
    deepFreeze(value);
    this.decoded.set(key, { rev: c.modRevision, value });
    return value as T;
  }

  has(key: string): boolean {
    return this.etcd.get(key) !== undefined;
  }

  keys(prefix: string): readonly string[] {
    return this.etcd.keys(prefix);
  }

  /** Every readable value under a prefix (a value that is not JSON is no object of its kind: left out). */
  under<T>(prefix: string): { key: string; value: T }[] {
    return this.keys(prefix)
      .map((key) => ({ key, value: this.get<T>(key)! }))
      .filter((v) => typeof v.value === 'object' && v.value !== null);
  }

  /** Deployments as the operator knows them: a hand-broken one by its last good value; a frozen one not at all. */
  deployments(): Deployment[] {
    const out: Deployment[] = [];
    for (const key of this.keys('deployments/')) {
      const v = this.broken.has(key) ? this.broken.get(key) : this.get(key);
      if (v && typeof v === 'object' && key !== keys.deployment('ghost')) out.push(v as Deployment);
    }
    return out;
  }

  private desiredAt?: { rev: number; values: ReplicaDesired[] };

  /** Every desired value (decoded once per change under desired/: the invariants read it every step). */
  desired(): ReplicaDesired[] {
    const rev = this.etcd.changedAt('desired/');
    if (this.desiredAt?.rev !== rev) this.desiredAt = { rev, values: this.under<ReplicaDesired>('desired/').map((v) => v.value) };
    return this.desiredAt.values;
  }

  /**
   * Whether a node has been Ready without a lapse for the last `ms`, as of now — mid-step too: a
   * heartbeat that went stale since the last step's end is a lapse now (lapsedAt, refreshed at the
   * end of each step, does not know it yet: seed 60348 counted a node 0.4 s into its lapse as Ready).
   */
  readyThroughout(node: string, ms: number): boolean {
    return readyNow(this, node) && this.now - (this.lapsedAt.get(node) ?? -Infinity) > ms;
  }

  // ------------------------------------------------------------------ helpers

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }

  log(what: string): void {
    const line = `#${this.step} t+${((this.now - T0) / 1000).toFixed(1)}s ${what}`;
    this.trace.push(line);
    if (this.opts.trace) console.log(line);
  }

  private count(kind: string): void {
    this.injected.set(kind, (this.injected.get(kind) ?? 0) + 1);
  }

  service(replicas: number, image: number): ServiceSpec {
    const canary = this.opts.canary ? { canary: 1, autoPromote: '5s' } : {};
    return { image: `jaco-demo/busybox:${image}`, replicas, update: { minReadyTime: '1s', stepTimeout: '60s', maxUnavailable: 1, ...canary } };
  }

  /** A global service (placement: global, no replica count): one replica per eligible node. */
  globalService(image: number): ServiceSpec {
    return { image: `jaco-demo/busybox:${image}`, placement: { mode: 'global' }, update: { minReadyTime: '1s', stepTimeout: '60s', maxUnavailable: 1 } };
  }

  /** A stateful service: a named volume, so at most one replica (seed 004), stop-first rollouts. */
  statefulService(replicas: number, image: number): ServiceSpec {
    return { image: `jaco-demo/busybox:${image}`, replicas, volumes: [{ type: 'volume', source: 'data', target: '/data' }], update: { minReadyTime: '1s', stepTimeout: '60s', maxUnavailable: 1 } };
  }

  /** `jaco rollout promote`: a request on a rollout whose canaries wait (false when none does). */
  private promote(): boolean {
    const waiting = this.under<RolloutPlan>('rollouts/').filter(({ value: p }) => typeof p === 'object' && p.spec?.canary && !p.spec.canary.promotedAt && !p.spec.request && (p.spec.state === 'in_progress' || p.spec.state === 'paused'));
    if (!waiting.length) return false;
    const { key, value } = this.pick(waiting);
    this.log(`operator: rollout promote ${value.spec.deployment}/${value.spec.service}`);
    this.put(key, { ...value, spec: { ...value.spec, request: { action: 'promote', requestedAt: iso(this.now) } } });
    return true;
  }

  /** An unconditional write as its own revision (as the store's own writes encode it; nothing read back). */
  private put(key: string, value: unknown): void {
    this.etcd.kv.applyRaw([{ key, text: encodeJson(value) }]);
  }

  private remove(key: string): void {
    this.etcd.kv.remove(key);
  }

  /** What operators decided about a node, written as the CLI writes it (nodespecs/<host>). */
  private decide(n: string, spec: NodeSpec): void {
    this.put(keys.nodeSpec(n), { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name: n }, spec } satisfies NodeSpecRecord);
  }

  private addNode(name: string, unschedulable = false): void {
    this.put(keys.node(name), {
      apiVersion: API_VERSION,
      kind: 'Node',
      metadata: { name, labels: {} },
      spec: unschedulable ? { unschedulable: true } : {},
      status: { capacity: { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3, gpus: 0 }, agentVersion: 'sim', registeredAt: iso(T0), secretsKey: this.nodeKey(name) },
    });
    this.heartbeat(name);
  }

  /** A node's current key (its public half as its agent publishes it). */
  nodeKey(name: string): { id: string; publicKey: string } {
    const gen = this.nodeKeyGen.get(name) ?? 1;
    return { id: `nk-${name}-${gen}`, publicKey: Buffer.from(`${name}-${gen}`).toString('base64') };
  }

  /** app/web's secret and config, as apply pins them (version: the object's uid). */
  private webFiles(): Pick<ServiceSpec, 'secrets' | 'configs'> {
    const name = `db_password_${this.secretGen}`;
    return { secrets: [{ source: name, target: 'db_password', version: `uid-${name}` }], configs: [{ source: 'app.conf', version: 'uid-app.conf' }] };
  }

  /** A node's clock: the true time plus its offset. */
  agentNow(node: string): number {
    return this.now + (this.clockOffset.get(node) ?? 0);
  }

  /** The agent's heartbeat, on its lease (kept alive now), with the time of its own clock. */
  private heartbeat(name: string): void {
    this.keptAt.set(name, this.now);
    this.beatAt.set(name, this.now);
    this.put(keys.heartbeat(name), { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(this.agentNow(name)), intervalMs: 10_000, agentVersion: 'sim', dockerUp: true } });
  }

  /** Leases not kept alive for LEASE_TTL_MS expire: etcd deletes their heartbeats (liveness is the lease). */
  private expireLeases(): void {
    for (const n of this.nodes) {
      if (!this.has(keys.heartbeat(n)) || this.now - (this.keptAt.get(n) ?? -Infinity) <= LEASE_TTL_MS) continue;
      this.log(`the lease of ${n} expires: its heartbeat goes`);
      this.remove(keys.heartbeat(n));
      this.lapsedAt.set(n, this.now);
    }
  }

  /** What `jaco apply` (or `jaco rollback`) writes: the deployment at its next generation, and its revision record. */
  deploy(name: string, services: Record<string, ServiceSpec>, cause = 'apply'): void {
    const key = keys.deployment(name);
    const prev = (this.broken.get(key) ?? this.get<Deployment>(key)) as Deployment | undefined;
    const generation = prev && typeof prev === 'object' ? (prev.metadata.generation ?? 1) + 1 : 1;
    const d: Deployment = { apiVersion: API_VERSION, kind: 'Deployment', metadata: { name, generation, creationTimestamp: iso(this.now) }, spec: { services } };
    this.broken.delete(key);
    this.put(key, d);
    this.put(keys.revision(name, generation), {
      apiVersion: API_VERSION,
      kind: 'DeploymentRevision',
      metadata: { name: `${name}-${generation}` },
      spec: { deployment: name, revision: generation, appliedAt: iso(this.now), cause, summary: 'sim', template: d.spec },
    } satisfies DeploymentRevision);
  }

  // ------------------------------------------------------------------ the agents

  /**
   * One agent pass: the node-agent's real decide (controllers/node-agent/decide.ts) over this
   * node's desired, commands, copies and what it last reported, and over its simulated engine
   * (engine.ts: the containers and starts decide reads as facts); the plan is carried out on the
   * engine, and its observed writes and deletes land. A running container may crash.
   */
  private agent(node: string): void {
    const engine = this.engine(node);
    if (!this.has(keys.node(node))) {
      // Removed from the cluster — only on the removal recorded: the agent stops its containers and exits.
      if (this.get<NodeDrain>(keys.drain(node))?.status?.state === 'removed') {
        engine.clear();
        for (const k of this.keys(keys.observedOf(node))) this.remove(k);
        return;
      }
      // Gone with no removal recorded: the store lost it; the agent registers again and keeps its containers.
      this.log(`agent ${node}: its node key is gone with no removal recorded; registers it again`);
      this.addNode(node);
    }
    const now = this.agentNow(node);
    engine.advance(now, this.now);
    const plan = decide(this.agentSnapshot(node, engine), now, { healthRefreshMs: 10_000, startReportDelayMs: START_REPORT_DELAY_MS });
    engine.apply(plan, now, this.now, () => 100 + Math.floor(this.r() * 2000));
    for (const status of plan.observe) this.put(keys.observed(node, status.replica), { apiVersion: API_VERSION, kind: 'ReplicaObserved', metadata: { name: status.replica }, status } satisfies ReplicaObserved);
    for (const r of plan.forget) this.remove(keys.observed(node, r));
    if (this.faults && this.r() < 0.01) {
      const running = engine.containers.filter((c) => c.role !== 'sandbox' && c.state === 'running');
      if (running.length) {
        const c = this.pick(running);
        this.log(`crash ${node}/${c.replica}`);
        engine.crash(c.id, now);
      }
    }
    // The liveness keepalive; the heartbeat rewritten at most every 2 s (an agent's is ~2 s; its interval says 10).
    this.keptAt.set(node, this.now);
    if (!this.has(keys.heartbeat(node)) || this.now - (this.beatAt.get(node) ?? -Infinity) >= 2000) this.heartbeat(node);
  }

  private readonly engines = new Map<string, SimEngine>();

  /** A node's simulated engine (made on first use; it outlives its agent's deaths). */
  engine(node: string): SimEngine {
    let e = this.engines.get(node);
    if (!e) this.engines.set(node, (e = new SimEngine(node, () => this.now)));
    return e;
  }

  /**
   * What decide sees on a node, as the agent's snapshot (agent.ts) builds it from its cache: a
   * desired value it cannot use (not a ReplicaDesired, or naming another node or replica) is
   * invalid; its memory of what it reported is the store's observed keys (it is their only writer).
   */
  private agentSnapshot(node: string, engine: SimEngine): AgentSnapshot {
    const desired = new Map<string, ReplicaDesired>();
    const invalid = new Map<string, InvalidDesired>();
    const prefix = keys.desiredOf(node);
    for (const key of this.keys(prefix)) {
      const id = key.slice(prefix.length);
      const v = this.get<ReplicaDesired>(key);
      const s = typeof v === 'object' && v !== null ? v.spec : undefined;
      if (!s) invalid.set(id, { reason: `${key} is not a ReplicaDesired` });
      else if (s.node !== node || s.replica !== id) invalid.set(id, { reason: `${key} names node ${JSON.stringify(s.node)}, replica ${JSON.stringify(s.replica)}`, deployment: s.deployment, service: s.service });
      else desired.set(id, v!);
    }
    const rest = <T extends { status?: unknown; spec?: unknown }>(p: string, of: (v: T) => unknown) =>
      new Map(this.under<T>(p).filter((x) => of(x.value) !== undefined).map((x) => [x.key.slice(p.length), x.value] as const));
    const commands = rest<ReplicaCommand>(keys.commandsOf(node), (v) => v.spec);
    const observed = new Map([...rest<ReplicaObserved>(keys.observedOf(node), (v) => v.status)].map(([k, v]) => [k, v.status]));
    // Its monotonic clock is the true time: a node's clock offset moves its wall clock only.
    return { node, mono: this.now, desired, invalid, commands, observed, ...engine.facts(this.agentNow(node)), retiring: engine.retiring, files: this.fileStates(node) };
  }

  // ------------------------------------------------------------------ the controller processes

  /** Starts (or restarts) a controller process: a new Manager lists everything and campaigns. */
  private async startProc(p: Proc): Promise<void> {
    p.incarnation++;
    p.leads.clear();
    // The old incarnation's leases expire: its election keys go.
    for (const c of p.campaign.values()) if (this.has(c.key)) this.remove(c.key);
    p.campaign.clear();
    p.lagUntil = 0;
    const specs = CONTROLLER_NAMES.map((name) => {
      const spec = CONTROLLERS[name]!(FAST, { secrets: { crypto: this.keyFile } }) as ControllerSpec<unknown, unknown>;
      // Leadership is the simulation's (election keys in the simulated etcd); the fence and the
      // reaction to a refused fence are the runtime's.
      return {
        ...spec,
        elected: false,
        fence: () => p.leads.get(name),
        ready: () => p.leads.has(name),
        fenced: () => {
          this.log(`${p.name}/${name}: write refused by the fence; deposed`);
          p.leads.delete(name);
        },
      } satisfies ControllerSpec<unknown, unknown>;
    });
    p.manager = new Manager(
      {
        store: this.etcd.client(p.name, p.faults),
        timings: FAST,
        log: LOG,
        identity: `${p.name}.${p.incarnation}`,
        clock: () => this.now,
        manual: true,
        stepCommits: !!this.opts.stepped,
        cache: { reader: this.reader },
        beforeCommit: (acts) => this.beforeCommit(acts),
      },
      specs,
    );
    const started = p.manager.start();
    await settle();
    await started;
    for (const name of CONTROLLER_NAMES) this.campaign(p, name);
  }

  /** A candidate's election key: leaders/<controller>/<lease>, its create revision the fence. */
  private campaign(p: Proc, controller: string): void {
    const key = `${keys.leaders(controller)}${p.name}-${this.etcd.rev}`;
    this.etcd.kv.put(key, { identity: p.name });
    p.campaign.set(controller, { controller, key, createRevision: this.etcd.rev });
    this.log(`${p.name}/${controller}: campaigns (${key})`);
  }

  /** The candidate with the lowest create revision leads. */
  leaderKey(controller: string): string | undefined {
    const rev = this.etcd.changedAt('leaders/');
    if (this.leadersAt.rev !== rev) this.leadersAt = { rev, byController: new Map() };
    if (this.leadersAt.byController.has(controller)) return this.leadersAt.byController.get(controller);
    let best: { key: string; rev: number } | undefined;
    for (const key of this.keys(keys.leaders(controller))) {
      const rev = this.etcd.get(key)!.createRevision;
      if (!best || rev < best.rev) best = { key, rev };
    }
    this.leadersAt.byController.set(controller, best?.key);
    return best?.key;
  }

  private leadersAt: { rev: number; byController: Map<string, string | undefined> } = { rev: -1, byController: new Map() };

  /** Each controller's leader learns it leads (its term starts afresh: leader-local state reset). */
  private elect(): void {
    for (const name of CONTROLLER_NAMES) {
      const key = this.leaderKey(name);
      if (!key) continue; // no candidate: nobody leads until one campaigns
      const p = this.procs.find((x) => x.campaign.get(name)?.key === key);
      if (!p || p.leads.get(name)?.key === key) continue;
      const runner = p.runner(name);
      runner.state = runner.spec.initialState();
      runner.failures.clear();
      p.leads.set(name, p.campaign.get(name)!);
      this.log(`${p.name}/${name}: elected (${key})`);
    }
  }

  /** The leader's lease is lost (paused, cut off): its key goes, it does not know yet. */
  private loseLease(p: Proc, controller: string): void {
    const c = p.campaign.get(controller);
    if (!c) return;
    this.count('leadership lost');
    this.log(`${p.name}/${controller}: lease lost (${c.key}); it still believes it leads`);
    this.remove(c.key);
    p.campaign.delete(controller);
  }

  /** A process that lost its lease notices (a keepalive failed) and campaigns again. */
  private notice(p: Proc): void {
    for (const name of CONTROLLER_NAMES) {
      if (p.campaign.has(name)) continue;
      if (p.leads.delete(name)) this.log(`${p.name}/${name}: notices its lease is gone; stops writing`);
      this.campaign(p, name);
    }
  }

  /** One pass of a controller by a process that believes it leads it. */
  private async pass(controller: string): Promise<void> {
    const leaders = this.procs.filter((p) => p.leads.has(controller));
    if (!leaders.length) return;
    const p = this.pick(leaders);
    this.passing.push({ proc: p, controller, nested: this.passing.length > 0, sent: 0 });
    try {
      await p.runner(controller).passNow();
    } finally {
      this.passing.pop();
      p.faults.loseNextReply = false;
    }
  }

  /** Runs after a pass decided, before its writes: where decisions go stale. */
  private async beforeCommit(acts: readonly Act[]): Promise<void> {
    const cur = this.passing[this.passing.length - 1];
    if (!cur) return;
    for (const act of acts)
      for (const inv of ACT_INVARIANTS) {
        const broken = inv.check(this, cur.controller, act);
        if (broken && !this.failure) this.failure = new SimFailure(`seed ${this.seed}, step ${this.step}: invariant "${inv.name}" broken: ${broken}`);
      }
    const labels = acts.map((a) => a.label);
    if (labels.length) this.log(`${cur.proc.name}/${cur.controller} decided: ${labels.join('; ')}`);
    // Part of this pass went out already: what happens now happens between the steps of one pass.
    const midPass = cur.sent > 0;
    cur.sent += acts.length;
    if (!this.faults || cur.nested || !acts.length) return;
    const f = this.r();
    if (midPass && f < 0.3) this.count('fault between the steps of a pass');
    if (f < 0.1) {
      // Another controller's pass lands between this decision and its commit.
      const others = this.procs.flatMap((p) => [...p.leads.keys()].filter((c) => c !== cur.controller).map((c) => [p, c] as const));
      if (!others.length) return;
      const [op, oc] = this.pick(others);
      this.count('stale decision');
      this.log(`${cur.proc.name}/${cur.controller}: ${op.name}/${oc} lands first`);
      this.passing.push({ proc: op, controller: oc, nested: true, sent: 0 });
      try {
        await op.runner(oc).passNow();
      } finally {
        this.passing.pop();
      }
    } else if (f < 0.15) {
      this.count('lost reply');
      this.log(`${cur.proc.name}/${cur.controller}: the reply of its next commit will be lost`);
      cur.proc.faults.loseNextReply = true;
    } else if (f < 0.25) {
      this.count('operator between decision and commit');
      this.log(`${cur.proc.name}/${cur.controller}: the operator acts first`);
      this.operator();
    } else if (f < 0.3) {
      // Leadership changes mid-pass: the other candidate takes over before this commit is sent.
      this.log(`${cur.proc.name}/${cur.controller}: leadership changes mid-pass`);
      this.loseLease(cur.proc, cur.controller);
      this.elect();
    }
  }

  /** Commits checked against the invariants on transactions; a failure stops the run at the next check. */
  private checkTxn(t: LandedTxn, invariants: readonly TxnInvariant[]): void {
    if (this.failure) return;
    for (const inv of invariants) {
      const broken = inv.check(this, t);
      if (broken) this.failure = new SimFailure(`seed ${this.seed}, step ${this.step}: invariant "${inv.name}" broken: ${broken}`);
    }
  }

  // ------------------------------------------------------------------ the caches' view

  /** Delivers each process's watch events, unless its stream lags. */
  private deliver(): void {
    for (const p of this.procs) {
      if (this.faults && this.now < p.lagUntil) continue;
      for (const w of [...p.faults.watchers]) w.deliver();
    }
  }

  private watchFault(): void {
    const p = this.pick(this.procs);
    const w = [...p.faults.watchers][0];
    const roll = this.r();
    if (roll < 0.35) {
      p.lagUntil = this.now + 500 + Math.floor(this.r() * 8000);
      this.count('cache lags');
      this.log(`${p.name}: its watch lags until t+${((p.lagUntil - T0) / 1000).toFixed(1)}s (decisions from a stale cache)`);
    } else if (roll < 0.6 && w) {
      this.count('watch disconnect');
      this.log(`${p.name}: watch disconnected (resumes from the reflector's revision)`);
      w.disconnect();
    } else if (roll < 0.8 && w) {
      const lost = 1 + Math.floor(this.r() * 3);
      w.lose(lost);
      this.count('watch gap');
      this.log(`${p.name}: its watch will lose the next ${lost} revision(s) of events (the consistency check must heal it)`);
    } else {
      const rev = this.etcd.rev - Math.floor(this.r() * 5);
      this.count('compaction');
      this.log(`etcd compacted at revision ${rev}`);
      this.etcd.compact(rev);
    }
  }

  // ------------------------------------------------------------------ the operator

  private operator(): void {
    if (this.opts.canary && this.r() < 0.15 && this.promote()) return;
    if (this.opts.breadth && this.r() < 0.15 && this.settleDrain()) return;
    const deps = this.deployments().filter((d) => d.metadata.name !== 'big' && d.metadata.name !== 'large');
    const roll = this.r();
    if (roll < 0.2 && deps.length) {
      const d = this.pick(deps);
      const svc = this.pick(Object.keys(d.spec.services));
      const s = d.spec.services[svc]!;
      // A global service has no replica count; a stateful one runs at most one (apply refuses more).
      if (placementMode(s) === 'global') return;
      const replicas = Math.max(0, Math.min(isStateful(s) ? 1 : 5, (s.replicas ?? 1) + this.pick([-1, 1, 2])));
      this.log(`operator: scale ${d.metadata.name}/${svc} to ${replicas}`);
      this.deploy(d.metadata.name, { ...d.spec.services, [svc]: { ...s, replicas } });
    } else if (roll < 0.4 && deps.length) {
      const d = this.pick(deps);
      const svc = this.pick(Object.keys(d.spec.services));
      const s = d.spec.services[svc]!;
      const image = s.image.endsWith(':1') ? 2 : 1;
      this.log(`operator: new image for ${d.metadata.name}/${svc} (:${image})`);
      this.deploy(d.metadata.name, { ...d.spec.services, [svc]: { ...s, image: `jaco-demo/busybox:${image}` } });
    } else if (roll < 0.45 && deps.length) {
      const d = this.pick(deps);
      const gen = d.metadata.generation ?? 1;
      const rec = this.get<DeploymentRevision>(keys.revision(d.metadata.name, gen - 1));
      if (!rec) return;
      this.log(`operator: rollback ${d.metadata.name} to revision ${gen - 1}`);
      this.deploy(d.metadata.name, rec.spec.template.services, `rollback to revision ${gen - 1}`);
    } else if (roll < 0.53) {
      const n = this.pick(this.nodes);
      const node = this.decidedNode(n);
      if (!node || this.broken.has(keys.node(n))) return;
      const cordon = !node.spec?.unschedulable;
      this.log(`operator: ${cordon ? 'cordon' : 'uncordon'} ${n}`);
      this.decide(n, cordon ? { unschedulable: true } : {});
    } else if (roll < 0.63) {
      const n = this.pick(this.nodes);
      // One drain at a time; a removal's record stays (the drain controller retires it on a rejoin).
      if (this.keys('drains/').some((k) => this.get<NodeDrain>(k)?.status?.state !== 'removed') || this.broken.has(keys.node(n))) return;
      const node = this.decidedNode(n);
      if (!node) return;
      // Removing a node is a drain that ends by removing it (jaco node remove).
      const remove = this.r() < 0.3;
      // --force: stateful replicas are stopped where they are (breadth only: the others keep their draws).
      const force = !!this.opts.breadth && this.r() < 0.5;
      if (force) this.count('forced drain');
      this.log(`operator: ${remove ? 'remove node' : 'drain'} ${n}${force ? ' --force' : ''}`);
      this.decide(n, { ...node.spec, unschedulable: true });
      this.put(keys.drain(n), { apiVersion: API_VERSION, kind: 'NodeDrain', metadata: { name: n }, spec: { node: n, timeout: '30s', force, remove, requestedAt: iso(this.now) } } satisfies NodeDrain);
    } else if (roll < 0.66) {
      // A removed node's agent registers it again (jaco agent --rejoin).
      const gone = this.nodes.filter((n) => !this.has(keys.node(n)));
      if (!gone.length) return;
      const n = this.pick(gone);
      this.log(`operator: ${n} rejoins`);
      this.addNode(n);
    } else if (roll < 0.7 && deps.some((d) => d.metadata.name === 'side')) {
      this.log('operator: delete side');
      this.broken.delete(keys.deployment('side'));
      this.remove(keys.deployment('side'));
    } else if (roll < 0.74 && !this.has(keys.deployment('side'))) {
      this.log('operator: apply side (re-created)');
      this.deploy('side', { worker: { ...this.service(2, 1), network: 'cluster' } });
    } else if (roll < 0.86) {
      this.malformed();
    } else if (roll < 0.9) {
      this.repair();
    } else if (roll < 0.94) {
      this.rotateSecret();
    } else if (roll < 0.97) {
      this.rekeyNode();
    } else if (roll < 0.99) {
      this.count('cluster key rotated');
      this.log(`operator: adds cluster key ${this.keyFile.rotate().id} to the key file (jaco secret key rotate)`);
    }
  }

  /** A rotation of app/web's secret: a new one (jaco secret create db_password_N), applied. */
  private rotateSecret(): void {
    const app = this.deployments().find((d) => d.metadata.name === 'app');
    if (!app?.spec.services.web) return;
    this.secretGen++;
    const name = `db_password_${this.secretGen}`;
    this.count('secret rotated');
    this.log(`operator: jaco secret create ${name}; apply app with it`);
    this.put(keys.secret(name), simSecret(name, `sim-value-${this.secretGen}`, this.keyFile.primary));
    this.deploy('app', { ...app.spec.services, web: { ...app.spec.services.web, ...this.webFiles() } });
  }

  /** A node's agent comes back with a new key (its state directory was lost): it registers it. */
  private rekeyNode(): void {
    const n = this.pick(this.nodes);
    const node = this.get<Node>(keys.node(n));
    if (!node?.status || this.broken.has(keys.node(n))) return;
    this.nodeKeyGen.set(n, (this.nodeKeyGen.get(n) ?? 1) + 1);
    this.count('node re-keyed');
    this.log(`agent ${n}: a new node key ${this.nodeKey(n).id} (its state directory was lost)`);
    this.put(keys.node(n), { ...node, status: { ...node.status, secretsKey: this.nodeKey(n) } });
  }

  /**
   * A node's copies as its agent finds them (controllers/node-agent/files.ts ReplicaFiles.states):
   * ready when sealed to the node's current key for its own place, else unreadable and why.
   */
  private fileStates(node: string): Map<string, FileState> {
    const key = this.nodeKey(node).id;
    const out = new Map<string, FileState>();
    for (const { value: c } of this.under<NodeCopy>(keys.copiesOf(node))) {
      if (!c.spec) continue;
      const aad = `copy/${node}/${c.spec.kind}/${c.spec.name}/${c.spec.uid}`;
      const state: FileState =
        c.spec.node !== node ? { state: 'unreadable', detail: `the copy names node ${c.spec.node}` }
        : c.spec.nodeKey !== key ? { state: 'unreadable', detail: `sealed to node key ${c.spec.nodeKey}; this node's key is ${key}` }
        : simSealedOf(c.spec.sealed).aad !== aad ? { state: 'unreadable', detail: `sealed for ${simSealedOf(c.spec.sealed).aad}, not ${aad}` }
        : { state: 'ready', uid: c.spec.uid };
      out.set(fileId(c.spec.kind, c.spec.name), state);
    }
    return out;
  }

  /**
   * The operator settles a drain in progress (a stateful replica blocks a drain without --force
   * for good): adds --force to it (`jaco node drain HOST --force` on a node being drained: its
   * progress is kept), or cancels it (`--cancel`: the node stays cordoned). False when none runs.
   */
  private settleDrain(): boolean {
    const running = this.under<NodeDrain>('drains/').filter(({ value: d }) => typeof d === 'object' && !!d.spec && !['completed', 'aborted', 'removed'].includes(d.status?.state ?? ''));
    if (!running.length) return false;
    const { key, value } = this.pick(running);
    if (!value.spec.force && this.r() < 0.6) {
      this.count('drain forced in progress');
      this.log(`operator: drain ${value.spec.node} --force (added to the drain in progress)`);
      this.put(key, { ...value, spec: { ...value.spec, force: true } });
    } else {
      this.count('drain cancelled');
      this.log(`operator: drain ${value.spec.node} --cancel`);
      this.remove(key);
    }
    return true;
  }

  /** A hand edit (etcdctl put) leaves a value this version cannot read — or reads with a field it does not know. */
  private malformed(): void {
    const roll = this.r();
    // Breadth only (the others keep their draws): a value that is not JSON under any watched prefix.
    if (this.opts.breadth && roll >= 0.15 && roll < 0.35) return this.junk();
    if (roll < 0.15 && !this.has(keys.deployment('ghost'))) {
      this.count('malformed value');
      this.log('operator: hand-writes deployments/ghost, schema-invalid (frozen: nothing may act on it)');
      this.etcd.kv.putRaw(keys.deployment('ghost'), JSON.stringify({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name: 'ghost', generation: 1 }, spec: { services: { w: { image: 7, replicas: 'two' } } } }));
      return;
    }
    const targets = [...this.keys('deployments/').filter((k) => !['ghost', 'big', 'large'].some((n) => k === keys.deployment(n))), ...this.keys('nodes/')].filter((k) => !this.broken.has(k) && !this.junkKeys.has(k));
    if (!targets.length) return;
    const key = this.pick(targets);
    const good = this.get<Record<string, unknown>>(key)!;
    const kind = this.r();
    this.count('malformed value');
    if (kind < 0.25) {
      // An unknown field (a newer CLI): pruned on read, the value stays in effect.
      this.log(`operator: hand-edits ${key} with an unknown field`);
      this.etcd.kv.putRaw(key, JSON.stringify({ ...good, spec: { ...(good.spec as object), fromTheFuture: { x: 1 } } }));
      return;
    }
    this.broken.set(key, good);
    if (kind < 0.5) {
      this.log(`operator: hand-edits ${key}: not JSON`);
      this.etcd.kv.putRaw(key, `${JSON.stringify(good).slice(0, 20)}…`);
    } else if (key.startsWith('nodes/')) {
      this.log(`operator: hand-edits ${key}: schema-invalid capacity`);
      this.etcd.kv.putRaw(key, JSON.stringify({ ...good, status: { ...(good.status as object), capacity: { cpuMillis: 'lots' } } }));
    } else {
      this.log(`operator: hand-edits ${key}: schema-invalid replicas`);
      const d = good as unknown as Deployment;
      this.etcd.kv.putRaw(key, JSON.stringify({ ...d, spec: { services: Object.fromEntries(Object.entries(d.spec.services).map(([n, s]) => [n, { ...s, replicas: 'three' }])) } }));
    }
  }

  /**
   * A key nobody wrote, holding a value that is not JSON (etcdctl put, a half-restored backup),
   * under any prefix a controller or agent watches — a node's own desired/observed/commands ones
   * included. Every process must carry on around it; the operator deletes it later (repair).
   */
  private junk(): void {
    // A new key under each prefix (a key of its own, such as clusterkey, made unreadable is the hand edit malformed() makes).
    const prefixes = Object.values(WATCHABLE)
      .map((w) => w.prefix)
      .filter((p) => p.endsWith('/'));
    const prefix = this.pick(prefixes);
    const perNode = ['desired/', 'observed/', 'commands/', 'copies/', 'addresses/'].includes(prefix);
    const key = `${prefix}${perNode ? `${this.pick(this.nodes)}/` : ''}junk-${this.step}`;
    if (this.has(key)) return;
    this.count('non-JSON value');
    this.log(`operator: puts a value that is not JSON at ${key}`);
    this.junkKeys.add(key);
    this.etcd.kv.putRaw(key, 'not json {');
  }

  /** The operator puts a broken value right (its last good version, as a new write). */
  private repair(key?: string): void {
    if (!key && this.junkKeys.size && this.r() < 0.5) {
      const j = this.pick([...this.junkKeys]);
      this.junkKeys.delete(j);
      this.log(`operator: deletes ${j}`);
      this.remove(j);
      return;
    }
    const k = key ?? (this.broken.size ? this.pick([...this.broken.keys()]) : undefined);
    if (!k) return;
    const good = this.broken.get(k) as { spec?: object } | undefined;
    this.broken.delete(k);
    if (!this.has(k)) return;
    this.log(`operator: repairs ${k}`);
    // A node repaired keeps the cordon the operator set meanwhile (none: repairs happen before).
    this.put(k, good);
  }

  /**
   * A deployment written by hand (etcdctl put: no revision record) too large for the acts that
   * place it: `big`, one replica of which no request can carry (refused at decide time, reported
   * spec_too_large, nobody else held up); `large`, whose replicas fit only one act each.
   */
  private oversizedDeployment(name: 'big' | 'large'): void {
    this.count('oversized spec');
    this.log(`operator: hand-writes deployments/${name}, ${name === 'big' ? 'one replica larger than an etcd request' : 'replicas that fit one request each'}`);
    const services = { blob: { ...this.service(2, 1), env: { BLOB: name === 'big' ? HUGE : LARGE } } };
    this.put(keys.deployment(name), { apiVersion: API_VERSION, kind: 'Deployment', metadata: { name, generation: 1, creationTimestamp: iso(this.now) }, spec: { services } } satisfies Deployment);
  }

  // ------------------------------------------------------------------ the run

  /** One step: time passes, then an agent, a controller, the operator, or a fault acts. */
  async tick(): Promise<void> {
    this.step++;
    const dt = 50 + Math.floor(this.r() * 1500);
    this.now += dt;
    this.timers.advance(dt);
    this.expireLeases();
    if (this.faults && this.step === CLOCK_JUMP_STEP) {
      const jump = this.seed % 2 ? -600_000 : 600_000;
      this.clockOffset.set('n2', (this.clockOffset.get('n2') ?? 0) + jump);
      this.count('node clock offset');
      this.log(`the clock of n2 jumps ${jump / 1000} s`);
    }
    // Timers start consistency checks: they finish before the next events arrive (a check that
    // sees its watch move on gives up until the next period — here it always would).
    await settle();
    this.deliver();
    await settle();
    this.elect();
    const roll = this.r();
    if (!this.faults) for (const n of this.nodes) this.agent(n); // quiet: every agent keeps up
    if (roll < 0.35) {
      const n = this.pick(this.nodes);
      if (!this.down.has(n)) this.agent(n);
    } else if (roll < 0.8) {
      await this.pass(this.pick(CONTROLLER_NAMES));
    } else if (roll < 0.88) {
      if (this.faults) this.operator();
    } else if (roll < 0.93) {
      if (this.faults) this.watchFault();
    } else if (roll < 0.96) {
      if (this.faults) this.leadershipFault();
    } else if (this.faults) {
      const n = this.pick(this.nodes);
      if (this.down.has(n)) {
        this.log(`agent ${n} returns`);
        this.down.delete(n);
        this.engine(n).agentRestarts();
      } else if (this.down.size < this.nodes.length - 2 && this.r() < 0.3) {
        this.count('agent dies');
        this.log(`agent ${n} dies`);
        this.down.add(n);
      }
    }
    if (this.faults && this.oversized && this.step === 40) this.oversizedDeployment(this.oversized);
    // A process that lost its lease notices after a while.
    for (const p of this.procs) if (this.r() < 0.15 || !this.faults) this.notice(p);
    // Finished drains are cleared by the operator (the next one may start); a removal's record stays.
    for (const d of this.under<NodeDrain>('drains/')) if (['completed', 'aborted'].includes(d.value.status?.state ?? '')) this.remove(d.key);
    await settle();
    for (const n of this.nodes) if (!this.has(keys.node(n)) || !readyNow(this, n)) this.lapsedAt.set(n, this.now);
    this.check(this.stateInvariants);
  }

  private leadershipFault(): void {
    const roll = this.r();
    if (roll < 0.85) {
      const name = this.pick(CONTROLLER_NAMES);
      const p = this.procs.find((x) => x.leads.has(name));
      if (p) this.loseLease(p, name);
    } else {
      const p = this.pick(this.procs);
      this.count('controller process restart');
      this.log(`${p.name}: the controller process restarts (its cache relists, it campaigns again)`);
      p.leads.clear();
      this.restarting.push(p);
    }
  }

  private readonly restarting: Proc[] = [];

  /** What the store holds of one service (desired copies with what their agents observe, its rollout plan), for a failure report. */
  describeService(deployment: string, service: string): string {
    const lines = this.desired()
      .filter((d) => d.spec.deployment === deployment && d.spec.service === service)
      .map((d) => {
        const o = this.get<ReplicaObserved>(keys.observed(d.spec.node, d.spec.replica));
        return `  ${d.spec.replica}@${d.spec.node} rev ${d.spec.revision} ${d.spec.specHash}${d.spec.move ? ` move from ${d.spec.move.from}` : ''}${d.spec.movingTo ? ` moving to ${d.spec.movingTo.node}` : ''}${d.spec.suspended ? ' suspended' : ''}: observed ${o ? `${o.status.state} rev ${o.status.revision} ${o.status.specHash}` : 'nothing'}`;
      });
    const plan = this.get<RolloutPlan>(keys.rollout(deployment, service));
    return [`${deployment}/${service}:`, ...lines, `  plan: ${plan ? JSON.stringify(plan.spec) : 'none'}`].join('\n');
  }

  /** The controller processes as a failure report shows them. */
  describeProcs(): string {
    return this.procs
      .map((p) => `${p.name}: cache ${p.manager.cache.synced ? 'synced' : 'NOT synced'} at revision ${p.manager.cache.revision} (etcd at ${this.etcd.rev}), leads ${[...p.leads.keys()].join(',') || 'nothing'}`)
      .join('; ') + `; leaders: ${CONTROLLER_NAMES.map((c) => `${c} ${this.leaderKey(c)} [${this.keys(keys.leaders(c)).join(' ')}] campaigns ${this.procs.map((p) => p.campaign.get(c)?.key).join(' ')}`).join(', ')}`;
  }

  /** The desired/ revision the state invariants last held at (they read desired values and the constant node list only). */
  private stateCheckedAt = -1;

  check(invariants: readonly Invariant[]): void {
    if (this.failure) throw this.failure;
    if (invariants === this.stateInvariants) {
      const rev = this.etcd.changedAt('desired/');
      if (rev === this.stateCheckedAt) return;
      this.stateCheckedAt = rev;
    }
    for (const inv of invariants) {
      const broken = inv.check(this);
      if (broken) throw new SimFailure(`seed ${this.seed}, step ${this.step}: invariant "${inv.name}" broken: ${broken}`);
    }
  }

  /** The whole run: faults for steps − quietSteps, then a quiet window in which everything must converge. */
  async run(): Promise<void> {
    try {
      for (const p of this.procs) await this.startProc(p);
      this.elect();
      for (let i = 0; i < this.opts.steps - this.opts.quietSteps; i++) {
        await this.tick();
        while (this.restarting.length) {
          const p = this.restarting.shift()!;
          await p.manager.stop();
          await this.startProc(p);
        }
      }
      this.faults = false;
      this.log('faults stop; every agent returns; the operator repairs hand edits, re-adds removed nodes, uncordons every node and cancels drains');
      this.down.clear();
      for (const k of [...this.broken.keys()]) this.repair(k);
      for (const n of this.nodes) {
        if (this.has(keys.node(n))) this.decide(n, {});
        else this.addNode(n);
      }
      for (const k of this.keys('drains/')) this.remove(k);
      const quietFrom = this.now;
      for (let i = 0; i < this.opts.quietSteps; i++) {
        await this.tick();
        if (!converged(this)) {
          this.quietMs = this.now - quietFrom;
          return;
        }
      }
      throw new SimFailure(`seed ${this.seed}: not converged ${((this.now - quietFrom) / 1000).toFixed(0)} s (${this.opts.quietSteps} steps) after faults stopped: ${converged(this)}; ${this.describeProcs()}\n${this.deployments().flatMap((d) => Object.keys(d.spec.services).map((s) => this.describeService(d.metadata.name, s))).join('\n')}`);
    } finally {
      for (const p of this.procs) await p.manager?.stop();
    }
  }
}

/**
 * Liveness: every wanted replica of every deployment runs once, at its service's current spec — or,
 * when the rollout to the deployment's current generation was aborted, at the spec it reverted to
 * (seed 001: an aborted rollout stays reverted until the next apply). A hand-written deployment
 * too large for one request has no replica (refused at decide time), and holds nobody else up.
 */
export function converged(sim: Sim): string | undefined {
  const desired = sim.desired();
  const problems: string[] = [];
  for (const d of sim.deployments()) {
    if (d.metadata.name === 'big') {
      const placed = desired.filter((x) => x.spec.deployment === 'big');
      if (placed.length) problems.push(`big: ${placed.length} replica(s) of a spec no act can carry`);
      // Refused at decide time, with its reason in the deployment's status.
      const st = sim.get<DeploymentStatus>(keys.deploymentStatus('big'))?.status?.scheduling?.services.blob?.unschedulable;
      if (st?.reason !== 'spec_too_large') problems.push(`big: status says ${st ? st.reason : 'nothing'}, not spec_too_large`);
      continue;
    }
    for (const [svc, spec] of Object.entries(d.spec.services)) {
      // A global service: one per registered, schedulable, Ready node (globalOnEveryEligibleNode says which is missing).
      const want = placementMode(spec) === 'global' ? sim.nodes.filter((n) => sim.has(keys.node(n)) && !sim.decidedNode(n)?.spec?.unschedulable && readyNow(sim, n)).length : (spec.replicas ?? 1);
      const current = templateOf(d.metadata.generation ?? 1, spec).specHash;
      const plan = sim.get<RolloutPlan>(keys.rollout(d.metadata.name, svc))?.spec;
      // Reverted until the next apply (any new generation of the deployment counts) — if there is
      // something to revert to: the revision record of that spec, or a replica still at it (the
      // rollout's fromTemplate). Otherwise the current spec serves: a re-created deployment's first
      // rollout, from replicas its previous incarnation left, aborted once none of them was left
      // (breadth seed 26425; seed 11639 is the other branch).
      const reverted = plan?.state === 'aborted' && plan.toRevision === (d.metadata.generation ?? 1);
      const rec = reverted ? sim.get<DeploymentRevision>(keys.revision(d.metadata.name, plan.fromRevision))?.spec.template.services[svc] : undefined;
      const canRevert = reverted && ((rec && templateOf(plan.fromRevision, rec).specHash === plan.fromHash) || desired.some((x) => x.spec.deployment === d.metadata.name && x.spec.service === svc && x.spec.specHash === plan.fromHash));
      const target = canRevert ? plan!.fromHash : current;
      const ids = new Set<string>();
      for (const r of desired.filter((x) => x.spec.deployment === d.metadata.name && x.spec.service === svc)) {
        const o = sim.get<ReplicaObserved>(keys.observed(r.spec.node, r.spec.replica));
        if (o?.status.state === 'running' && o.status.specHash === r.spec.specHash && r.spec.specHash === target) ids.add(r.spec.replica);
      }
      if (ids.size !== want) problems.push(`${d.metadata.name}/${svc}: ${ids.size} of ${want} running at ${target === current ? 'its current spec' : 'the spec its aborted rollout reverted to'}`);
    }
  }
  if (sim.has(keys.deployment('ghost')) && desired.some((x) => x.spec.deployment === 'ghost')) problems.push('ghost: replicas of a deployment that was never readable');
  const copies = copiesConverged.check(sim);
  if (copies) problems.push(`${copiesConverged.name}: ${copies}`);
  if (sim.opts.breadth)
    for (const inv of BREADTH_LIVENESS) {
      const broken = inv.check(sim);
      if (broken) problems.push(`${inv.name}: ${broken}`);
    }
  return problems.length ? problems.join('; ') : undefined;
}

/** Whether a node's heartbeat says it is Ready now (the scheduler's own rule). */
export function readyNow(sim: Sim, node: string): boolean {
  return nodeReady(sim.get<Heartbeat>(keys.heartbeat(node)));
}
