// The rebalancer's world on the one table-test harness (test/support/harness.ts): nodes with their
// nodespecs, deployments with what the scheduler reports unschedulable, desired copies and what
// the agents observe are stored objects; each cycle the agents' heartbeats carry that cycle's
// pressure samples, the rebalancer's own snapshot function reads the Cache, and its plan is
// committed act by act (a move the store's compare-and-swap refuses does not land), as the runtime
// runs it. Table tests and the benchmark drive the cycle through it.
import { keys } from '../../src/api/keys.js';
import { withDefaults, specHash } from '../../src/api/spec.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentStatus,
  type Heartbeat,
  type MoveMarker,
  type Node,
  type NodeSpecRecord,
  type PressureSample,
  type ReplicaCommand,
  type ReplicaDesired,
  type ReplicaFootprint,
  type ReplicaObserved,
  type ServiceSpec,
} from '../../src/api/types.js';
import type { Versioned } from '../../src/store/store.js';
import { defaultConfig, type Config } from '../../controllers/rebalancer/config.js';
import { rebalancerController } from '../../controllers/rebalancer/controller.js';
import type { PendingService, RebalancerState, Snapshot } from '../../controllers/rebalancer/plan.js';
import { desiredObject, GiB, Harness as StoreHarness, heartbeatObject, iso, nodeObject, observedObject, StoreWorld, T0 } from './harness.js';

export { GiB, T0 };

export function service(extra: Partial<ServiceSpec> = {}): ServiceSpec {
  return withDefaults({ image: 'jaco-demo/busybox:1', replicas: 3, ...extra });
}

export interface NodeOpts {
  cpuMillis?: number;
  memoryBytes?: number;
  gpus?: number;
  labels?: Record<string, string>;
  cordoned?: boolean;
}

/** A node as its agent registers it: 1 CPU and 4 GiB unless told, a day before T0 (a cordon in `spec`: the layout before nodespecs/). */
export function nodeObj(name: string, o: NodeOpts = {}): Node {
  return nodeObject(name, { cpuMillis: o.cpuMillis ?? 1000, memoryBytes: o.memoryBytes, gpus: o.gpus, labels: o.labels, spec: { unschedulable: o.cordoned ?? false }, registeredAt: T0 - 86_400_000 });
}

export function heartbeat(name: string, now: number, pressure?: PressureSample, intervalMs = 30_000): Heartbeat {
  return heartbeatObject(name, now, { intervalMs, ...(pressure ? { pressure } : {}) });
}

export interface ReplicaOpts {
  deployment?: string;
  service?: string;
  spec?: ServiceSpec;
  placedAt?: number;
  running?: boolean;
  move?: MoveMarker;
  index?: number;
}

/** A replica's copy as World.add stores it: its desired key and, unless it is not running, its agent's report. */
export interface ReplicaCopy {
  desired: ReplicaDesired;
  observed?: ReplicaObserved;
}

/** A stored copy as read back: the desired key with its revisions, and its agent's report if any. */
export interface StoredCopy {
  desired: Versioned<ReplicaDesired>;
  observed?: ReplicaObserved;
}

/** A replica placed a day before T0 (unless told) and running since then (unless told not to). */
export function replica(id: string, node: string, o: ReplicaOpts = {}): ReplicaCopy {
  const spec = o.spec ?? service();
  const deployment = o.deployment ?? id.split('-')[0]!;
  const svc = o.service ?? id.split('-')[1]!;
  const d = desiredObject({
    replica: id,
    deployment,
    service: svc,
    node,
    revision: 1,
    specHash: specHash(spec),
    template: spec,
    placedAt: iso(o.placedAt ?? T0 - 86_400_000),
    ...(o.index !== undefined ? { index: o.index } : {}),
    ...(o.move ? { move: o.move } : {}),
  });
  const observed = o.running === false ? undefined : observedObject(d, 'running', T0, { startedAt: iso(T0 - 86_400_000) });
  return { desired: d, ...(observed ? { observed } : {}) };
}

/** Utilisation of one node in one sample, with optional per-replica footprints. */
export interface Load {
  cpu: number;
  memory?: number;
  replicas?: Record<string, Partial<ReplicaFootprint>>;
}

export function sample(now: number, l: Load): PressureSample {
  const replicas: Record<string, ReplicaFootprint> = {};
  for (const [id, f] of Object.entries(l.replicas ?? {})) replicas[id] = { cpuMillis: f.cpuMillis ?? 0, memoryBytes: f.memoryBytes ?? 0 };
  return { time: iso(now), cpuUtil: l.cpu, memoryUtil: l.memory ?? 0.1, replicas };
}

/** A service the scheduler reports unschedulable for capacity: its deployment's spec of it, and why. */
export type Pending = Omit<PendingService, 'since'>;

const controllerOf = (config: Config) => rebalancerController({} as never, { config });
type CycleResult = ReturnType<ReturnType<typeof controllerOf>['decide']>;

export class World extends StoreWorld {
  /** Nodes whose agent is down: no heartbeat (NotReady). */
  readonly notReady = new Set<string>();
  /** Nodes whose agent reports its data root 99% full: degraded (src/api/eligibility.ts). */
  readonly diskFull = new Set<string>();
  readonly harness: StoreHarness<RebalancerState, Snapshot, unknown, CycleResult>;

  constructor(readonly config: Config = defaultConfig()) {
    super();
    this.heartbeatIntervalMs = 30_000;
    this.harness = new StoreHarness(this, controllerOf(config));
  }

  /** A node registered by its agent, and what operators decided about it (nodespecs/: cordoned or not). Again: re-registered, a node change. */
  addNode(name: string, o: NodeOpts = {}): this {
    this.put(keys.node(name), { ...nodeObj(name, o), spec: {} });
    this.put(keys.nodeSpec(name), { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name }, spec: { unschedulable: o.cordoned ?? false } } satisfies NodeSpecRecord);
    return this;
  }

  /** A node's key written again (re-registered, relabelled…): a node change. */
  touchNode(name: string): this {
    this.put(keys.node(name), this.get<Node>(keys.node(name)));
    return this;
  }

  /** The registered nodes, by name. */
  get nodes(): Map<string, Node> {
    return new Map(this.under<Node>('nodes/').map((v) => [v.value.metadata.name, v.value]));
  }

  /**
   * Copies as the scheduler placed them, with their agents' reports; each copy's template is its
   * service's spec in the deployment (generation 1; of copies with different templates, the last).
   */
  add(...copies: ReplicaCopy[]): this {
    for (const c of copies) {
      const s = c.desired.spec;
      this.withService(s.deployment, s.service, s.template);
      this.put(keys.desired(s.node, s.replica), c.desired);
      if (c.observed) this.put(keys.observed(s.node, s.replica), c.observed);
    }
    return this;
  }

  /** The deployment with `spec` as its service `service`, at its generation (1 if new): written only when it changes. */
  private withService(name: string, service: string, spec: ServiceSpec): void {
    const cur = this.get<Deployment>(keys.deployment(name));
    if (cur && JSON.stringify(cur.spec.services[service]) === JSON.stringify(spec)) return;
    this.putDeployment(name, { ...cur?.spec.services, [service]: spec }, { generation: cur?.metadata.generation ?? 1, record: false });
  }

  /** `jaco apply` of a changed service spec (placement, say): the deployment's next generation. */
  applyChange(name: string, service: string, change: Partial<ServiceSpec>): void {
    const cur = this.get<Deployment>(keys.deployment(name))!;
    this.putDeployment(name, { ...cur.spec.services, [service]: { ...cur.spec.services[service]!, ...change } }, { record: false });
  }

  /** The deployment applied again unchanged (its generation moves on: new balancing). */
  redeploy(name: string): void {
    const cur = this.get<Deployment>(keys.deployment(name))!;
    this.putDeployment(name, cur.spec.services, { record: false });
  }

  /**
   * What the scheduler reports unschedulable for capacity, in place of what it reported before:
   * each pending service's spec in its deployment and its count and reason in the deployment's status.
   */
  pend(...pending: Pending[]): this {
    for (const k of this.keys(keys.deploymentStatuses())) this.remove(k);
    const byDeployment = new Map<string, Pending[]>();
    for (const p of pending) byDeployment.set(p.deployment, [...(byDeployment.get(p.deployment) ?? []), p]);
    for (const [name, ps] of byDeployment) {
      for (const p of ps) this.withService(name, p.service, p.spec);
      const services = Object.fromEntries(ps.map((p) => [p.service, { desired: p.count, placed: 0, unschedulable: { reason: p.reason, count: p.count, message: '', nodes: {} } }]));
      this.put(keys.deploymentStatus(name), { apiVersion: API_VERSION, kind: 'DeploymentStatus', metadata: { name }, status: { scheduling: { observedGeneration: 1, updatedAt: iso(this.now), services } } } satisfies DeploymentStatus);
    }
    return this;
  }

  /** `restarts` health restarts of a replica on `node`, the last at `at` (a node where replicas keep failing). */
  failing(node: string, replica: string, restarts: number, at: number): this {
    this.put(keys.command(node, replica), { apiVersion: API_VERSION, kind: 'ReplicaCommand', metadata: { name: replica }, spec: { replica, op: 'restart', seq: restarts, issuedAt: iso(at), reason: 'unhealthy' }, status: { restarts, lastRestartAt: iso(at), generation: 1 } } as ReplicaCommand);
    return this;
  }

  /** Every stored copy with its agent's report, by key. */
  get replicas(): StoredCopy[] {
    return this.under<ReplicaDesired>('desired/').map((d) => {
      const o = this.get<ReplicaObserved>(keys.observed(d.value.spec.node, d.value.spec.replica));
      return { desired: d, ...(o ? { observed: o } : {}) };
    });
  }

  /** The agent of a copy's node no longer reports it (its container is gone). */
  unobserve(node: string, replica: string): void {
    this.remove(keys.observed(node, replica));
  }

  /**
   * The agents: every copy that `which` picks (by default, those without a report yet) is observed
   * running at its desired spec, started a minute before `now`, without a health check (ready).
   */
  observeRunning(now: number, which: (r: StoredCopy) => boolean = (r) => !r.observed): void {
    for (const r of this.replicas) if (which(r)) this.put(keys.observed(r.desired.value.spec.node, r.desired.value.spec.replica), observedObject(r.desired.value, 'running', now));
  }

  /** The agents remove the containers of copies no longer desired: their reports go. */
  agentsFollow(): void {
    for (const o of this.under<ReplicaObserved>('observed/')) {
      const s = o.value.status;
      if (!this.get(keys.desired(s.node, s.replica))) this.remove(o.key);
    }
  }

  /** Every agent that is up beats at `now`, its sample carrying its node's load (a node without a load is silent). */
  beatWith(now: number, loads: Record<string, Load>): void {
    for (const name of this.nodes.keys()) {
      if (this.notReady.has(name)) {
        this.remove(keys.heartbeat(name));
        continue;
      }
      const l = loads[name];
      const disk = this.diskFull.has(name) ? { disk: { path: '/var/lib/docker', totalBytes: 100 * GiB, usedBytes: 99 * GiB, availableBytes: GiB, capped: false, driver: 'overlay2' } } : {};
      this.putHeartbeat(name, now, { ...(l ? { pressure: sample(now, l) } : {}), ...disk });
    }
  }

  /** The rebalancer's snapshot at `now`, the agents having reported `loads` (see beatWith). */
  snapshot(now: number, loads: Record<string, Load>): Snapshot {
    this.beatWith(now, loads);
    return this.harness.snapshot(now);
  }
}

/** Runs cycles against a world through the rebalancer's ControllerSpec, committing each plan, and records each. */
export class Harness {
  readonly cycles: CycleResult[] = [];
  /** Where this harness's audit records start in the world's. */
  private readonly auditFrom: number;

  constructor(readonly world: World) {
    this.auditFrom = world.audit.length;
  }

  get state(): RebalancerState {
    return this.world.harness.state;
  }

  set state(s: RebalancerState) {
    this.world.harness.state = s;
  }

  get now(): number {
    return this.world.now;
  }

  set now(t: number) {
    this.world.now = t;
  }

  /** One cycle at the current time (the agents beat with `loads`, then follow what landed), then the clock advances one cycle. */
  cycle(loads: Record<string, Load>): CycleResult {
    this.world.beatWith(this.now, loads);
    const c = this.world.harness.pass(this.now);
    this.world.agentsFollow();
    this.cycles.push(c);
    this.now += this.world.config.cycleMs;
    return c;
  }

  run(n: number, loads: Record<string, Load> | ((i: number) => Record<string, Load>)): CycleResult[] {
    return Array.from({ length: n }, (_, i) => this.cycle(typeof loads === 'function' ? loads(i) : loads));
  }

  /** Every audit record of this harness's acts that landed, in order. */
  audit(): { type: string; payload: Record<string, unknown> }[] {
    return this.world.audit.slice(this.auditFrom);
  }
}

/** Runs `cycles` cycles at `loads` against a world, every new copy observed running after each (the agents). */
export function runCycles(w: World, cycles: number, loads: Record<string, Load>): Harness {
  const h = new Harness(w);
  for (let i = 0; i < cycles; i++) {
    h.cycle(loads);
    w.observeRunning(T0);
  }
  return h;
}
