// The one harness of the controllers' table tests. StoreWorld: a cluster's stored objects in a
// MemoryStore (etcd's compare-and-swap rules) read through the runtime's Cache — nodes with their
// heartbeats, deployments with their revision records, desired copies and what the agents report —
// on a clock the test moves, with a controller's plan committed act by act as the runtime would
// (audit records and metrics kept when their act lands). Each controller's world (rollout, drain,
// scheduler, rebalancer — its agents' heartbeats carrying each cycle's pressure samples) is a thin
// layer on it: its own decide call and the shortcuts its tables read; the move mechanism's tables
// (controllers/moves/move.test.ts) store their copies in one and read moverView.
// Harness: a controller run through its own ControllerSpec (snapshot, decide, next) on one.
// It stands in for nothing real (integration and e2e tests use real etcd and Docker).
import { keys } from '../../src/api/keys.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentRevision,
  type DeploymentSpec,
  type Heartbeat,
  type HeartbeatSpec,
  type Node,
  type ObservedState,
  type ReplicaDesired,
  type ReplicaDesiredSpec,
  type ReplicaObserved,
  type ReplicaObservedStatus,
  type ServiceSpec,
} from '../../src/api/types.js';
import { Cache } from '../../src/runtime/cache.js';
import type { Act } from '../../src/runtime/acts.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import { AUDIT_OP_COUNTS, type AuditRecord } from '../../src/store/audit.js';
import { MAX_TXN_OPS } from '../../src/store/store.js';
import { txnCounts, type Fence } from '../../src/store/writer.js';
import { MemoryStore } from './memory-store.js';

export const T0 = Date.parse('2026-11-21T10:00:00Z');
export const iso = (ms: number) => new Date(ms).toISOString();
export const GiB = 1024 ** 3;

export interface NodeOpts {
  cpuMillis?: number;
  memoryBytes?: number;
  gpus?: number;
  labels?: Record<string, string>;
  spec?: Node['spec'];
  /** Write no heartbeat (the node's agent is not up). */
  silent?: boolean;
}

/** A plan as the harness commits it: acts with their audit records and metrics. */
export interface Plan<M> {
  acts: readonly { label: string; ops: Act['ops']; audit?: readonly AuditRecord[]; metrics?: readonly M[] }[];
}

// ------------------------------------------------------------------ the objects, as their writers write them

/** A registered node: 2 CPUs and 4 GiB unless told, registered an hour before T0 unless told. */
export function nodeObject(name: string, o: NodeOpts & { registeredAt?: number } = {}): Node {
  return {
    apiVersion: API_VERSION,
    kind: 'Node',
    metadata: { name, labels: o.labels ?? {} },
    spec: o.spec ?? {},
    status: { capacity: { cpuMillis: o.cpuMillis ?? 2000, memoryBytes: o.memoryBytes ?? 4 * GiB, gpus: o.gpus ?? 0 }, agentVersion: 'test', registeredAt: iso(o.registeredAt ?? T0 - 3_600_000) },
  };
}

/** A node agent's heartbeat at `at` (a 1 s interval unless told). */
export function heartbeatObject(name: string, at: number, extra: Partial<HeartbeatSpec> = {}): Heartbeat {
  return { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(at), intervalMs: 1000, agentVersion: 'test', dockerUp: true, ...extra } };
}

export function desiredObject(spec: ReplicaDesiredSpec): ReplicaDesired {
  return { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: spec.replica }, spec };
}

/** What the agent of a copy's node reports at `now`: at the copy's spec, started a minute before, unless `extra` says otherwise. */
export function observedObject(d: ReplicaDesired, state: ObservedState, now: number, extra: Partial<ReplicaObservedStatus> = {}): ReplicaObserved {
  const s = d.spec;
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaObserved',
    metadata: { name: s.replica },
    status: { replica: s.replica, node: s.node, deployment: s.deployment, service: s.service, state, revision: s.revision, specHash: s.specHash, health: 'none', startedAt: iso(now - 60_000), observedAt: iso(now), ...extra },
  };
}

/** The stored objects of a cluster, the clock, and the commit of a plan (see the header). */
export class StoreWorld<M = unknown> extends MemoryStore {
  readonly cache = new Cache(this);
  readonly audit: AuditRecord[] = [];
  readonly metrics: M[] = [];
  /** Heartbeats' declared interval (a long one never goes stale in a test that moves the clock far). */
  heartbeatIntervalMs = 1000;

  constructor(public now: number = T0) {
    super();
  }

  /** A registered node (2 CPUs, 4 GiB unless told) and, unless silent, its agent's heartbeat. */
  putNode(name: string, o: NodeOpts = {}): Node {
    const n = nodeObject(name, o);
    this.put(keys.node(name), n);
    if (!o.silent) this.putHeartbeat(name);
    return n;
  }

  /** A node's agent beats (at `at`, now by default). */
  putHeartbeat(name: string, at = this.now, extra: Partial<HeartbeatSpec> = {}): void {
    this.put(keys.heartbeat(name), heartbeatObject(name, at, { intervalMs: this.heartbeatIntervalMs, ...extra }));
  }

  /** Keeps every registered node's heartbeat fresh except the ones listed. */
  beat(except: Iterable<string> = []): void {
    const skip = new Set(except);
    for (const n of this.under<Node>('nodes/')) if (typeof n.value === 'object' && !skip.has(n.value.metadata.name)) this.putHeartbeat(n.value.metadata.name);
  }

  /** What `jaco apply` writes: the deployment at `generation` (its next by default) and, unless told not to, its revision record. */
  putDeployment(name: string, services: Record<string, ServiceSpec>, o: { generation?: number; update?: DeploymentSpec['update']; record?: boolean; createdAt?: number } = {}): Deployment {
    const cur = this.get<Deployment>(keys.deployment(name));
    const generation = o.generation ?? (cur?.metadata.generation ?? 0) + 1;
    const spec = { services, ...(o.update ? { update: o.update } : {}) } as DeploymentSpec;
    const d: Deployment = { apiVersion: API_VERSION, kind: 'Deployment', metadata: { name, generation, ...(o.createdAt !== undefined ? { creationTimestamp: iso(o.createdAt) } : {}) }, spec };
    this.put(keys.deployment(name), d);
    if (o.record !== false)
      this.put(keys.revision(name, generation), {
        apiVersion: API_VERSION,
        kind: 'DeploymentRevision',
        metadata: { name: `${name}-${generation}` },
        spec: { deployment: name, revision: generation, appliedAt: iso(this.now), cause: 'apply', summary: '', template: spec },
      } satisfies DeploymentRevision);
    return d;
  }

  /** A desired copy as a controller would have written it. */
  desire(spec: ReplicaDesiredSpec): ReplicaDesired {
    const d = desiredObject(spec);
    this.put(keys.desired(spec.node, spec.replica), d);
    return d;
  }

  /** Every desired copy (of one replica, when named). */
  copies(replica?: string): ReplicaDesired[] {
    return this.under<ReplicaDesired>('desired/')
      .map((v) => v.value)
      .filter((d) => typeof d === 'object' && (!replica || d.spec.replica === replica));
  }

  /** What the agent of a copy's node reports: at the copy's spec, started a minute ago, observed now, unless `extra` says otherwise. */
  report(d: ReplicaDesired, state: ObservedState, extra: Partial<ReplicaObservedStatus> = {}): ReplicaObserved {
    const o = observedObject(d, state, this.now, extra);
    this.put(keys.observed(d.spec.node, d.spec.replica), o);
    return o;
  }

  /**
   * Commits a plan act by act, each all-or-nothing on its preconditions (etcd's limits checked):
   * the audit records and metrics of what landed are kept, `landed` hears of each act that did.
   */
  commit(plan: Plan<M>, landed?: (act: Plan<M>['acts'][number]) => void, fence?: Fence): Set<string> {
    const out = new Set<string>();
    for (const act of plan.acts) {
      assertFits(act);
      if (!this.applyAct(act.ops as Act['ops'], fence)) continue;
      out.add(act.label);
      this.audit.push(...(act.audit ?? []));
      this.metrics.push(...(act.metrics ?? []));
      landed?.(act);
    }
    return out;
  }
}

/** A controller run through its own spec on a StoreWorld: its snapshot function, its decide, its state moved on by what landed. */
export class Harness<S, Snap, M = unknown, R extends PassResult<S, M> = PassResult<S, M>> {
  state: S;
  /** Labels of the acts that did not land, per pass. */
  conflicted: string[] = [];

  constructor(
    readonly world: StoreWorld<M>,
    readonly spec: ControllerSpec<S, Snap, M, R>,
  ) {
    this.state = spec.initialState();
  }

  get audit(): AuditRecord[] {
    return this.world.audit;
  }

  get metrics(): M[] {
    return this.world.metrics;
  }

  snapshot(now: number): Snap {
    return this.spec.snapshot({ cache: this.world.cache, failing: [] }, this.state, now);
  }

  /** Decides without applying anything. */
  decide(now: number): R {
    return this.spec.decide(this.state, this.snapshot(now), now);
  }

  /** Applies acts in order, each all-or-nothing; returns the labels that landed. */
  apply(acts: readonly Act<M>[], fence?: Fence): Set<string> {
    const ok = new Set<object>();
    const landed = this.world.commit({ acts }, (a) => ok.add(a), fence);
    this.conflicted = acts.filter((a) => !ok.has(a)).map((a) => a.label);
    return landed;
  }

  /** One pass: decide, apply, move the state on. */
  pass(now: number): R {
    const r = this.decide(now);
    const landed = this.apply(r.acts);
    if (r.next) this.state = r.next(landed);
    return r;
  }
}

/**
 * An act etcd would refuse fails the test here, loudly: the runtime commits every act in a fenced
 * transaction with its audit records (creates), and etcd takes at most MAX_TXN_OPS compares and as
 * many writes (writer.txnCounts). Table tests apply acts without etcd, so without this an act sized
 * by a wrong count would pass them and never land in production.
 */
function assertFits(act: { label: string; ops: Act['ops']; audit?: readonly unknown[] }): void {
  const c = txnCounts(act.ops, true);
  const n = act.audit?.length ?? 0;
  const compares = c.compares + n * AUDIT_OP_COUNTS.compares;
  const writes = c.writes + n * AUDIT_OP_COUNTS.writes;
  if (compares > MAX_TXN_OPS || writes > MAX_TXN_OPS) throw new Error(`act ${act.label} has ${writes} writes and ${compares} compares with its fence and audit records: etcd refuses more than ${MAX_TXN_OPS} of either`);
}
