// A harness for the scheduler's pure core: an in-memory key space with etcd's compare-and-swap
// rules, from which snapshots are read and into which plans are applied act by act. Table tests
// and benchmarks drive decide() through it pass after pass and record every plan; it stands in
// for nothing real (integration and e2e tests use real etcd and Docker).
import { keys, replicaId } from '../../src/api/keys.js';
import { templateOf } from '../../src/api/serving.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentSpec,
  type Heartbeat,
  type Node,
  type ObservedState,
  type ReplicaDesired,
  type ReplicaObserved,
  type ServiceSpec,
} from '../../src/api/types.js';
import { memoryBytes, cpuMillis } from '../../src/api/units.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import { byNode, decide, schedulerConfig, trackNotReady, type SchedulerConfig, type SchedulerPlan, type SchedulerSnapshot } from '../../controllers/scheduler/decide.js';

export const T0 = Date.parse('2026-11-21T10:00:00Z');
export const iso = (ms: number) => new Date(ms).toISOString();

/** Fast-timing-like config: 3 s node-lost grace, 500 ms restart back-off. */
export const TEST_CONFIG: SchedulerConfig = schedulerConfig({ nodeLostGraceMs: 3_000, restartBackoffMs: 500 });

export interface NodeOpts {
  cpu?: string;
  memory?: string;
  gpus?: number;
  labels?: Record<string, string>;
  ready?: boolean;
  cordoned?: boolean;
}

export class World {
  readonly kv = new Map<string, Versioned<unknown>>();
  revision = 100;
  now = T0;
  readonly audit: AuditRecord[] = [];
  readonly plans: SchedulerPlan[] = [];
  readonly notReadySince = new Map<string, number>();
  /** Nodes whose agent is down: advance() does not keep their heartbeat fresh. */
  readonly down = new Set<string>();
  /** Overrides of the informers' seen revisions (default: caught up). */
  seen?: { deployments: number; desired: number; nodes: number };

  constructor(readonly config: SchedulerConfig = TEST_CONFIG) {}

  put(key: string, value: unknown): Versioned<unknown> {
    const prev = this.kv.get(key);
    const v = { key, value, modRevision: ++this.revision, createRevision: prev?.createRevision ?? this.revision, version: (prev?.version ?? 0) + 1 };
    this.kv.set(key, v);
    return v;
  }

  get<T>(key: string): T | undefined {
    return this.kv.get(key)?.value as T | undefined;
  }

  list<T>(prefix: string): Versioned<T>[] {
    return [...this.kv.values()].filter((v) => v.key.startsWith(prefix)).sort((a, b) => (a.key < b.key ? -1 : 1)) as Versioned<T>[];
  }

  deploy(name: string, services: Record<string, ServiceSpec>, generation?: number): Deployment {
    const prev = this.get<Deployment>(keys.deployment(name));
    const d: Deployment = {
      apiVersion: API_VERSION,
      kind: 'Deployment',
      metadata: { name, generation: generation ?? (prev ? (prev.metadata.generation ?? 1) + 1 : 1), creationTimestamp: iso(T0) },
      spec: { services } as DeploymentSpec,
    };
    this.put(keys.deployment(name), d);
    return d;
  }

  undeploy(name: string): void {
    this.kv.delete(keys.deployment(name));
    this.revision++;
  }

  node(name: string, o: NodeOpts = {}): void {
    const n: Node = {
      apiVersion: API_VERSION,
      kind: 'Node',
      metadata: { name, labels: o.labels ?? {} },
      spec: o.cordoned ? { unschedulable: true } : {},
      status: { capacity: { cpuMillis: cpuMillis(o.cpu ?? '2'), memoryBytes: memoryBytes(o.memory ?? '4Gi'), gpus: o.gpus ?? 0 }, agentVersion: 'test', registeredAt: iso(T0 - 3_600_000) },
    };
    this.put(keys.node(name), n);
    if (o.ready !== false) this.heartbeat(name);
    else this.down.add(name);
  }

  heartbeat(name: string, time = this.now): void {
    this.down.delete(name);
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(time), intervalMs: 1000, agentVersion: 'test', dockerUp: true } };
    this.put(keys.heartbeat(name), hb);
  }

  nodeDown(name: string): void {
    this.kv.delete(keys.heartbeat(name));
    this.down.add(name);
    this.revision++;
  }

  /** A desired key as the scheduler would have written it, at the deployment's current revision. */
  replica(dep: string, svc: string, at: number | string, node: string, extra: Partial<ReplicaDesired['spec']> = {}): Versioned<ReplicaDesired> {
    const d = this.get<Deployment>(keys.deployment(dep))!;
    const t = templateOf(d.metadata.generation ?? 1, d.spec.services[svc]!);
    const id = replicaId(dep, svc, at);
    const value: ReplicaDesired = {
      apiVersion: API_VERSION,
      kind: 'ReplicaDesired',
      metadata: { name: id },
      spec: { replica: id, deployment: dep, service: svc, node, ...(typeof at === 'number' ? { index: at } : {}), revision: t.revision, specHash: t.specHash, template: t.template, placedAt: iso(this.now), ...extra },
    };
    return this.put(keys.desired(node, id), value) as Versioned<ReplicaDesired>;
  }

  /** What the agent of a replica's node reports (every copy, or the one on `node`). */
  observe(replica: string, state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}, node?: string): void {
    const copies = this.list<ReplicaDesired>(keys.desiredOf()).filter((d) => d.value.spec.replica === replica && (!node || d.value.spec.node === node));
    for (const c of copies) this.observeCopy(c.value, state, extra);
  }

  private observeCopy(d: ReplicaDesired, state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}): void {
    const s = d.spec;
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: s.replica },
      status: { replica: s.replica, node: s.node, deployment: s.deployment, service: s.service, state, revision: s.revision, specHash: s.specHash, health: 'none', startedAt: iso(this.now - 60_000), observedAt: iso(this.now), ...extra },
    };
    this.put(keys.observed(s.node, s.replica), o);
  }

  /** Every desired replica observed running (and ready: started a minute ago). */
  runAll(): void {
    for (const d of this.list<ReplicaDesired>(keys.desiredOf())) this.observeCopy(d.value, 'running');
  }

  /** The agent executed the pending restart command of a replica (and reports `state`). */
  ack(replica: string, state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}): void {
    const cmd = this.list<{ spec: { seq: number; replica: string } }>(keys.commandsOf()).find((c) => c.value.spec.replica === replica);
    this.observe(replica, state, { ackedCommand: cmd?.value.spec.seq, startedAt: iso(this.now), ...extra });
  }

  snapshot(): SchedulerSnapshot {
    const rest = <T>(prefix: string) => new Map(this.list<T>(prefix).map((v) => [v.key.slice(prefix.length), v] as const));
    const vals = <T>(prefix: string) => new Map(this.list<T>(prefix).map((v) => [v.key.slice(prefix.length), v.value] as const));
    return {
      deployments: rest(keys.deployments()),
      revisions: new Map(this.list(keys.revisions()).map((v) => [v.key, v.value as never])),
      rollouts: vals(keys.rollouts()),
      nodes: vals(keys.nodes()),
      heartbeats: vals(keys.heartbeats()),
      drains: vals(keys.drains()),
      desired: this.list(keys.desiredOf()),
      observed: byNode(this.list<ReplicaObserved>(keys.observedOf()).map((v) => v.value)),
      commands: new Map(this.list(keys.commandsOf()).map((v) => [v.key, v])),
      counters: rest(keys.counters()),
      volumeHomes: rest(keys.volumeHomes()),
      endpoints: rest(keys.endpointsAll()),
      decisions: new Map(this.list(keys.decisions()).map((v) => [v.key, v])),
      statuses: rest(keys.deploymentStatuses()),
      notReadySince: this.notReadySince,
      seen: this.seen ?? { deployments: this.revision, desired: this.revision, nodes: this.revision },
    } as SchedulerSnapshot;
  }

  /** Whether an op's precondition holds now. */
  private holds(o: Op): boolean {
    const cur = this.kv.get(o.key);
    switch (o.op) {
      case 'create':
        return !cur;
      case 'update':
      case 'check':
        return (cur?.modRevision ?? 0) === o.modRevision;
      case 'delete':
        return o.modRevision === undefined || (cur?.modRevision ?? 0) === o.modRevision;
      case 'put':
        return true;
    }
  }

  /** Applies a plan act by act, each all-or-nothing; returns the labels that conflicted. */
  apply(plan: SchedulerPlan): string[] {
    const conflicted: string[] = [];
    for (const act of plan.acts) {
      if (!act.ops.every((o) => this.holds(o))) {
        conflicted.push(act.label);
        continue;
      }
      this.revision++;
      for (const o of act.ops) {
        if (o.op === 'delete') this.kv.delete(o.key);
        else if (o.op !== 'check') {
          const prev = this.kv.get(o.key);
          this.kv.set(o.key, { key: o.key, value: structuredClone(o.value), modRevision: this.revision, createRevision: prev?.createRevision ?? this.revision, version: (prev?.version ?? 0) + 1 });
        }
      }
      this.audit.push(...act.audit);
    }
    return conflicted;
  }

  /** One pass: decide over the current state and apply the plan. */
  pass(): SchedulerPlan {
    const snap = this.snapshot();
    trackNotReady(this.notReadySince, snap.nodes.keys(), snap.heartbeats, this.now);
    const plan = decide(snap, this.now, this.config);
    this.plans.push(plan);
    this.apply(plan);
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
    for (const n of this.list<Node>(keys.nodes())) if (!this.down.has(n.value.metadata.name)) this.heartbeat(n.value.metadata.name);
  }

  desired(filter: { deployment?: string; service?: string } = {}): ReplicaDesired[] {
    return this.list<ReplicaDesired>(keys.desiredOf())
      .map((v) => v.value)
      .filter((d) => (!filter.deployment || d.spec.deployment === filter.deployment) && (!filter.service || d.spec.service === filter.service));
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
