// The scheduler's world on the one table-test harness (test/support/harness.ts): the scheduler's
// own snapshot function and decide run through its ControllerSpec, plans applied act by act and
// recorded. Table tests and benchmarks drive decide() through it pass after pass.
import { keys, replicaId } from '../../src/api/keys.js';
import { templateOf } from '../../src/api/serving.js';
import {
  API_VERSION,
  type Deployment,
  type Node,
  type NodeDrain,
  type NodeSpec,
  type NodeSpecRecord,
  type ObservedState,
  type ReplicaDesired,
  type ReplicaObserved,
  type ServiceSpec,
} from '../../src/api/types.js';
import { memoryBytes, cpuMillis } from '../../src/api/units.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import type { SchedulerState } from '../../controllers/scheduler/snapshot.js';
import { decide } from '../../controllers/scheduler/decide.js';
import { schedulerConfig, type ActMetrics, type SchedulerConfig, type SchedulerPlan, type SchedulerSnapshot } from '../../controllers/scheduler/plan.js';
import { Harness, iso, StoreWorld, T0 } from './harness.js';

export { T0, iso };

/** Fast-timing-like config: 3 s node-lost grace, 500 ms restart back-off. */
export const TEST_CONFIG: SchedulerConfig = schedulerConfig({ nodeLostGraceMs: 3_000, nodeLostFailoverGraceMs: 10_000, restartBackoffMs: 500 });

export interface NodeOpts {
  cpu?: string;
  memory?: string;
  gpus?: number;
  labels?: Record<string, string>;
  ready?: boolean;
  cordoned?: boolean;
}

export class World extends StoreWorld<ActMetrics> {
  readonly harness: Harness<SchedulerState, SchedulerSnapshot, ActMetrics, SchedulerPlan>;
  readonly plans: SchedulerPlan[] = [];
  /** Nodes whose agent is down: advance() does not keep their heartbeat fresh. */
  readonly down = new Set<string>();

  constructor(readonly config: SchedulerConfig = TEST_CONFIG) {
    super();
    this.harness = new Harness(this, schedulerController({} as never, { config }));
  }

  /** The store itself (tables write raw values through it). */
  get store(): this {
    return this;
  }

  /** The leader's NotReady clocks. */
  get notReadySince(): ReadonlyMap<string, number> {
    return this.harness.state.notReadySince;
  }

  /** A new term: the leader-local memory starts afresh. */
  newTerm(): void {
    this.harness.state = { notReadySince: new Map() };
  }

  list<T>(prefix: string): Versioned<T>[] {
    return this.under<T>(prefix);
  }

  /** A deployment as applied (no revision record: the scheduler reads none). */
  deploy(name: string, services: Record<string, ServiceSpec>, generation?: number): Deployment {
    return this.putDeployment(name, services, { generation, record: false, createdAt: T0 });
  }

  undeploy(name: string): void {
    this.remove(keys.deployment(name));
  }

  node(name: string, o: NodeOpts = {}): void {
    this.putNode(name, { cpuMillis: cpuMillis(o.cpu ?? '2'), memoryBytes: memoryBytes(o.memory ?? '4Gi'), gpus: o.gpus, labels: o.labels, spec: o.cordoned ? { unschedulable: true } : {}, silent: true });
    if (o.ready !== false) this.heartbeat(name);
    else this.down.add(name);
  }

  /** What operators decided about a node, as the CLI writes it (nodespecs/<host>). */
  decideNode(name: string, spec: NodeSpec): void {
    this.put(keys.nodeSpec(name), { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name }, spec } satisfies NodeSpecRecord);
  }

  heartbeat(name: string, time = this.now): void {
    this.down.delete(name);
    this.putHeartbeat(name, time);
  }

  /** `jaco node remove` as the drain controller ends it: node and heartbeat deleted, the removal recorded. */
  removeNode(name: string): void {
    this.remove(keys.node(name));
    this.remove(keys.nodeSpec(name));
    this.remove(keys.heartbeat(name));
    this.down.add(name);
    const drain: NodeDrain = { apiVersion: API_VERSION, kind: 'NodeDrain', metadata: { name }, spec: { node: name, timeout: '5m', force: false, remove: true, requestedAt: iso(this.now) }, status: { state: 'removed', replicas: {}, finishedAt: iso(this.now) } } as NodeDrain;
    this.put(keys.drain(name), drain);
  }

  nodeDown(name: string): void {
    this.remove(keys.heartbeat(name));
    this.down.add(name);
  }

  /** A desired key as the scheduler would have written it, at the deployment's current revision. */
  replica(dep: string, svc: string, at: number | string, node: string, extra: Partial<ReplicaDesired['spec']> = {}): Versioned<ReplicaDesired> {
    const d = this.get<Deployment>(keys.deployment(dep))!;
    const t = templateOf(d.metadata.generation ?? 1, d.spec.services[svc]!);
    const id = replicaId(dep, svc, at);
    this.desire({ replica: id, deployment: dep, service: svc, node, ...(typeof at === 'number' ? { index: at } : {}), revision: t.revision, specHash: t.specHash, template: t.template, placedAt: iso(this.now), ...extra });
    return this.versioned<ReplicaDesired>(keys.desired(node, id))!;
  }

  /** What the agent of a replica's node reports (every copy, or the one on `node`). */
  observe(replica: string, state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}, node?: string): void {
    for (const c of this.copies(replica)) if (!node || c.spec.node === node) this.report(c, state, extra);
  }

  /** Every desired replica observed running (and ready: started a minute ago). */
  runAll(): void {
    for (const d of this.copies()) this.report(d, 'running');
  }

  /** The agent executed the pending restart command of a replica (and reports `state`). */
  ack(replica: string, state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}): void {
    const cmd = this.list<{ spec: { seq: number; replica: string } }>(keys.commandsOf()).find((c) => c.value.spec.replica === replica);
    this.observe(replica, state, { ackedCommand: cmd?.value.spec.seq, startedAt: iso(this.now), ...extra });
  }

  snapshot(): SchedulerSnapshot {
    return this.harness.snapshot(this.now);
  }

  /** Applies a plan act by act, each all-or-nothing; returns the labels that conflicted. */
  apply(plan: SchedulerPlan): string[] {
    this.harness.apply(plan.acts);
    return this.harness.conflicted;
  }

  /** One pass: decide over the current state and apply the plan. */
  pass(): SchedulerPlan {
    const plan = this.harness.pass(this.now);
    this.plans.push(plan);
    return plan;
  }

  /** Passes until one plans nothing (at most `max`); returns the passes that planned something. */
  converge(max = 50): SchedulerPlan[] {
    const out: SchedulerPlan[] = [];
    for (let i = 0; i < max; i++) {
      const p = this.pass();
      if (!p.acts.length) return out;
      out.push(p);
    }
    throw new Error(`no convergence after ${max} passes; last plan: ${this.plans.at(-1)!.acts.map((a) => a.label).join(', ')}`);
  }

  /** Time passes; the agents that are up keep their heartbeats fresh. */
  advance(ms: number): void {
    this.now += ms;
    for (const n of this.list<Node>(keys.nodes())) if (typeof n.value === 'object' && !this.down.has(n.value.metadata.name)) this.heartbeat(n.value.metadata.name);
  }

  desired(filter: { deployment?: string; service?: string } = {}): ReplicaDesired[] {
    return this.copies().filter((d) => (!filter.deployment || d.spec.deployment === filter.deployment) && (!filter.service || d.spec.service === filter.service));
  }

  /** Replica id → node, for a service. */
  placement(dep: string, svc?: string): Record<string, string> {
    return Object.fromEntries(this.desired({ deployment: dep, service: svc }).map((d) => [d.spec.replica, d.spec.node]));
  }

  auditOf(type: string): AuditRecord[] {
    return this.audit.filter((a) => a.type === type);
  }
}

export function decideOnce(w: World): SchedulerPlan {
  return decide(w.snapshot(), w.now, w.config);
}

/** A deterministic shuffle (an LCG seeded by `seed`): property tests feed decide inputs in many orders. */
export function shuffled<T>(xs: readonly T[], seed: number): T[] {
  const a = [...xs];
  let s = seed;
  for (let i = a.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const j = s % (i + 1);
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}
