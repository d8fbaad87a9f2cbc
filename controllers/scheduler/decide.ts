// The scheduler's pure reconcile core: one snapshot of the store (plus the leader's "NotReady
// since" memory) and the clock in, the plan of one pass out — named buckets (place, stop,
// replaceLost, restart, exhaust, recover, status, endpoints, cleanup), each item with its reason,
// and the CAS-guarded acts that carry them out. No I/O, no clock of its own, deterministic:
// deployments and services in placement order, replicas by id, nodes by name.
import { keys, replicaId } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import { replicaReady, replicaRunning } from '../../src/api/readiness.js';
import { servingTemplate, type ServingTemplate } from '../../src/api/serving.js';
import { canonicalJson, isStateful, placementMode } from '../../src/api/spec.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentRevision,
  type DeploymentStatus,
  type EndpointAddress,
  type Endpoints,
  type Heartbeat,
  type Node,
  type NodeDrain,
  type PlacementDecision,
  type ReplicaCommand,
  type ReplicaCommandStatus,
  type ReplicaCounter,
  type ReplicaDesired,
  type ReplicaObserved,
  type RolloutPlan,
  type ServiceSchedulingStatus,
  type ServiceSpec,
  type Unschedulable,
  type VolumeHome,
} from '../../src/api/types.js';
import type { AuditRecord } from '../../src/store/audit.js';
import { MAX_TXN_OPS, type Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import type { PlannedAct } from '../../src/runtime/controller.js';
import { inFlight, type Copy } from '../moves/move.js';
import { DEFAULT_PLACEMENT_CONFIG, footprintOf, Placer, type Decision, type PlacementConfig, type PlacementRequest } from './placement.js';
import { placementInputFrom } from './placement-input.js';
import type { PlaceTrigger, RemoveReason, RestartCause, UnschedulableReason } from './reasons.js';
import { judgeRestart, MAX_CONSECUTIVE_RESTARTS, type RestartPolicy } from './restarts.js';

/** Everything decide reads. Maps are keyed as noted; the shell builds them from its informers. */
export interface SchedulerSnapshot {
  /** By deployment name. */
  deployments: ReadonlyMap<string, Versioned<Deployment>>;
  /** By key (keys.revision(name, n)). */
  revisions: ReadonlyMap<string, DeploymentRevision>;
  /** By `<deployment>/<service>`. */
  rollouts: ReadonlyMap<string, RolloutPlan>;
  /** By node name. */
  nodes: ReadonlyMap<string, Node>;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  desired: readonly Versioned<ReplicaDesired>[];
  /** By node, then replica id (two lookups with strings at hand: the idle pass's hot loop). */
  observed: ReadonlyMap<string, ReadonlyMap<string, ReplicaObserved>>;
  /** By store key (commands/<host>/<replica>). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** By `<deployment>/<service>`. */
  counters: ReadonlyMap<string, Versioned<ReplicaCounter>>;
  /** By `<deployment>/<volume>`. */
  volumeHomes: ReadonlyMap<string, Versioned<VolumeHome>>;
  /** By `<deployment>/<service>`. */
  endpoints: ReadonlyMap<string, Versioned<Endpoints>>;
  /** By store key (decisions/<deployment>/<replica>). */
  decisions: ReadonlyMap<string, Versioned<PlacementDecision>>;
  /** By deployment name. */
  statuses: ReadonlyMap<string, Versioned<DeploymentStatus>>;
  /** Leader-local: since when (ms) each NotReady node has been seen NotReady. */
  notReadySince: ReadonlyMap<string, number>;
  /**
   * The store revision each informer has seen. Guards against acting on one informer ahead of
   * another: an orphan is only an orphan if the informer that would show its owner is caught up.
   */
  seen: { deployments: number; desired: number; nodes: number };
}

export interface SchedulerConfig {
  placement: PlacementConfig;
  /** A node NotReady this long is lost: its stateless replicas are re-placed. */
  nodeLostGraceMs: number;
  restart: RestartPolicy;
  /** Written into decisions and audit records. */
  actor: string;
}

export function schedulerConfig(t: { nodeLostGraceMs: number; restartBackoffMs: number }, placement: PlacementConfig = DEFAULT_PLACEMENT_CONFIG): SchedulerConfig {
  return { placement, nodeLostGraceMs: t.nodeLostGraceMs, restart: { backoffMs: t.restartBackoffMs, maxRestarts: MAX_CONSECUTIVE_RESTARTS }, actor: 'scheduler' };
}

/** Observed replicas by node, then replica id (the snapshot's shape), from keyed values. */
export function byNode(observed: Iterable<ReplicaObserved>): Map<string, Map<string, ReplicaObserved>> {
  const out = new Map<string, Map<string, ReplicaObserved>>();
  for (const o of observed) {
    let m = out.get(o.status.node);
    if (!m) out.set(o.status.node, (m = new Map()));
    m.set(o.status.replica, o);
  }
  return out;
}

/**
 * Leader-local memory of NotReady nodes: a node is NotReady "since" the first pass that saw it so
 * (a new leader starts the clocks again, so a node is never declared lost on a stale memory).
 */
export function trackNotReady(since: Map<string, number>, hosts: Iterable<string>, heartbeats: ReadonlyMap<string, Heartbeat>, now: number): void {
  const all = new Set(hosts);
  for (const h of [...since.keys()]) if (!all.has(h)) since.delete(h);
  for (const h of all) {
    if (nodeReady(heartbeats.get(h), now)) since.delete(h);
    else if (!since.has(h)) since.set(h, now);
  }
}

// ---------------------------------------------------------------- the plan

export interface PlaceItem {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  index?: number;
  trigger: PlaceTrigger;
  why: string;
}

export interface StopItem {
  replica: string;
  deployment: string;
  service: string;
  /** Every node with a copy (two while a move is in flight). */
  nodes: string[];
  reason: RemoveReason;
}

export interface ReplaceItem {
  replica: string;
  deployment: string;
  service: string;
  from: string[];
  to: string;
  notReadyForMs: number;
  why: string;
}

export interface RestartItem {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  cause: RestartCause;
  /** Consecutive restarts including this one. */
  restarts: number;
  seq: number;
}

export interface CommandStatusItem {
  replica: string;
  node: string;
  kind: 'exhaust' | 'recover' | 'reset';
  status: ReplicaCommandStatus;
}

export interface ServiceNote {
  deployment: string;
  service: string;
  note: string;
}

export interface CleanupItem {
  key: string;
  why: string;
}

export interface ActMetrics {
  placements?: { trigger: PlaceTrigger; count: number };
  restarts?: { deployment: string; service: string };
}

export interface SchedulerAct extends PlannedAct {
  audit: AuditRecord[];
  /** Counted only once the act has landed. */
  metrics?: ActMetrics;
}

export interface SchedulerPlan {
  place: PlaceItem[];
  stop: StopItem[];
  replaceLost: ReplaceItem[];
  restart: RestartItem[];
  commandStatus: CommandStatusItem[];
  /** Stateful replicas left on lost nodes (status node_lost). */
  stranded: { replica: string; node: string }[];
  /** Per deployment, the scheduling status this pass leaves (written only when it changed). */
  status: Map<string, Record<string, ServiceSchedulingStatus>>;
  /** Endpoints that changed (written this pass). */
  endpoints: { deployment: string; service: string; addresses: EndpointAddress[] }[];
  cleanup: CleanupItem[];
  /** Replicas of a service not placed this pass for a reason other than being unschedulable. */
  waiting: ServiceNote[];
  /** Unschedulable replicas by reason, all services (the gauge). */
  unschedulable: Partial<Record<UnschedulableReason, number>>;
  acts: SchedulerAct[];
  /** The earliest time a pass could decide something new without any event. */
  wakeAt?: number;
}

// ---------------------------------------------------------------- values written

const iso = (ms: number) => new Date(ms).toISOString();

export function desiredValue(
  id: string,
  deployment: string,
  service: string,
  node: string,
  index: number | undefined,
  t: ServingTemplate,
  now: number,
): ReplicaDesired {
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: id },
    spec: { replica: id, deployment, service, node, ...(index !== undefined ? { index } : {}), revision: t.revision, specHash: t.specHash, template: t.template, placedAt: iso(now) },
  };
}

export function decisionValue(d: Decision, trigger: PlaceTrigger, now: number, actor: string): PlacementDecision {
  return {
    apiVersion: API_VERSION,
    kind: 'PlacementDecision',
    metadata: { name: d.replica },
    spec: {
      replica: d.replica,
      deployment: d.deployment,
      service: d.service,
      at: iso(now),
      actor,
      mode: d.mode,
      ...(d.chosen ? { chosen: d.chosen } : {}),
      why: d.why,
      ...(d.reason ? { reason: d.reason } : {}),
      verdicts: d.verdicts,
      ...(d.omitted ? { omitted: d.omitted } : {}),
      trigger,
    },
  };
}

/** The status a service reports when `count` of its replicas hit this decision. */
export function unschedulableOf(d: Decision, count: number, missing?: string[]): Unschedulable {
  const nodes: Record<string, string> = {};
  for (const v of d.verdicts) if (v.rejected) nodes[v.node] = `${v.rejected.filter}: ${v.rejected.detail}`;
  return { reason: d.reason ?? 'no_nodes_ready', count, message: d.why, nodes, ...(missing?.length ? { missing } : {}) };
}

// ---------------------------------------------------------------- the pass

/** One replica id of a service with its desired copies (two while a move is in flight). */
interface Group {
  id: string;
  deployment: string;
  service: string;
  index?: number;
  copies: NodeCopy[];
  /** Its restart commands (one per node it was restarted on; usually none). */
  commands?: Versioned<ReplicaCommand>[];
}

/** A copy with its node's readiness, judged once per pass. */
interface NodeCopy extends Copy {
  nodeReady: boolean;
}

/** The ops that fit in one transaction besides the fence. */
const TXN_OPS = MAX_TXN_OPS - 1;
/** Ops a new indexed replica takes: its desired key, its decision and its audit record. */
const OPS_PER_PLACEMENT = 3;

export function decide(snap: SchedulerSnapshot, now: number, cfg: SchedulerConfig): SchedulerPlan {
  const pass = new Pass(snap, now, cfg);
  // Replicas whose deployment or service is gone first: they are not any service's to count.
  pass.removeOrphanedReplicas();
  // Services in priority order, so a higher-priority service takes the last free capacity; each
  // fixes membership (mode change, lost nodes, scale) before its restarts, status and endpoints.
  for (const [dep, svc, spec] of pass.servicesInPlacementOrder()) pass.reconcileService(dep, svc, spec);
  // Bookkeeping of what no longer exists: commands, decisions, counters, endpoints, statuses.
  pass.cleanup();
  // Last: the status reports what the acts above leave behind.
  pass.writeStatuses();
  return pass.plan;
}

class Pass {
  readonly plan: SchedulerPlan = {
    place: [],
    stop: [],
    replaceLost: [],
    restart: [],
    commandStatus: [],
    stranded: [],
    status: new Map(),
    endpoints: [],
    cleanup: [],
    waiting: [],
    unschedulable: {},
    acts: [],
  };
  /** Replica groups by deployment, then service, in id order. */
  private readonly groups = new Map<string, Map<string, Group[]>>();
  /** Every replica id with its desired copies. */
  private readonly byId = new Map<string, Group>();
  /** Keys this pass deletes (so cleanup does not delete them twice). */
  private readonly deleted = new Set<string>();
  /** Per service: replicas stranded and exhausted (status). */
  private readonly conditions = new Map<string, { exhausted: string[]; nodeLost: string[] }>();
  private placerCache?: Placer;
  private readonly iso: string;

  constructor(readonly snap: SchedulerSnapshot, readonly now: number, readonly cfg: SchedulerConfig) {
    this.iso = iso(now);
    // Group desired keys by replica id (indexReplicas' grouping, in one sweep: this is the idle
    // pass's hot loop over every replica).
    for (const d of snap.desired) {
      const s = d.value.spec;
      const copy: NodeCopy = { key: d.key, modRevision: d.modRevision, desired: d.value, observed: snap.observed.get(s.node)?.get(s.replica), nodeReady: this.ready(s.node) };
      const g = this.byId.get(s.replica);
      if (g) {
        g.copies.push(copy);
        g.copies.sort((a, b) => cmp(a.desired.spec.node, b.desired.spec.node));
        g.index ??= s.index;
        continue;
      }
      const group: Group = { id: s.replica, deployment: s.deployment, service: s.service, index: s.index, copies: [copy] };
      this.byId.set(s.replica, group);
      let bySvc = this.groups.get(s.deployment);
      if (!bySvc) this.groups.set(s.deployment, (bySvc = new Map()));
      const list = bySvc.get(s.service);
      if (list) list.push(group);
      else bySvc.set(s.service, [group]);
    }
    // Replica order within a service is by index, or id for global ones (input order must not matter).
    for (const bySvc of this.groups.values()) for (const list of bySvc.values()) list.sort((a, b) => (a.index ?? -1) - (b.index ?? -1) || cmp(a.id, b.id));
    for (const c of snap.commands.values()) {
      const g = this.byId.get(c.value.spec.replica);
      if (g) (g.commands ??= []).push(c);
    }
  }

  /** The restart command of a replica's copy on a node. */
  private command(g: Group, node: string): Versioned<ReplicaCommand> | undefined {
    return g.commands?.find((c) => c.key === keys.command(node, g.id));
  }

  /** Built on first use: an idle pass never needs it. */
  private get placer(): Placer {
    this.placerCache ??= new Placer(
      placementInputFrom(
        {
          nodes: this.snap.nodes.values(),
          heartbeats: this.snap.heartbeats,
          drains: this.snap.drains,
          desired: this.snap.desired.map((d) => d.value),
          volumeHomes: [...this.snap.volumeHomes.values()].map((v) => v.value),
        },
        this.now,
      ),
      this.cfg.placement,
    );
    return this.placerCache;
  }

  // -------------------------------------------------------------- nodes

  private readonly readyCache = new Map<string, boolean>();
  private ready(host: string): boolean {
    let r = this.readyCache.get(host);
    if (r === undefined) this.readyCache.set(host, (r = nodeReady(this.snap.heartbeats.get(host), this.now)));
    return r;
  }

  /**
   * A node that no longer exists: once the nodes informer has seen past the copy's last write (a
   * node this informer does not know yet may just have registered).
   */
  private nodeGone(c: Copy): boolean {
    return !this.snap.nodes.has(c.desired.spec.node) && c.modRevision <= this.snap.seen.nodes;
  }

  /** How long a copy's node has been lost, or undefined while it is not (Ready, or within the grace). */
  private lostFor(c: Copy): number | undefined {
    const host = c.desired.spec.node;
    if (this.nodeGone(c)) return Infinity; // removed from the cluster: nothing runs there for us
    if (!this.snap.nodes.has(host)) return undefined;
    if (this.ready(host)) return undefined;
    const since = this.snap.notReadySince.get(host);
    if (since === undefined) return undefined;
    const t = this.now - since;
    if (t >= this.cfg.nodeLostGraceMs) return t;
    this.wake(since + this.cfg.nodeLostGraceMs);
    return undefined;
  }

  private wake(at: number | undefined): void {
    if (at !== undefined && at > this.now) this.plan.wakeAt = Math.min(this.plan.wakeAt ?? at, at);
  }

  // -------------------------------------------------------------- order

  servicesInPlacementOrder(): [string, string, ServiceSpec][] {
    const out: [string, string, ServiceSpec, number][] = [];
    for (const [dep, d] of this.snap.deployments) for (const [svc, spec] of Object.entries(d.value.spec.services)) out.push([dep, svc, spec, spec.priority ?? 0]);
    // Descending priority across deployments, then deployment and service name (seed 002).
    out.sort((a, b) => b[3] - a[3] || cmp(a[0], b[0]) || cmp(a[1], b[1]));
    return out.map(([d, s, spec]) => [d, s, spec]);
  }

  // -------------------------------------------------------------- membership

  removeOrphanedReplicas(): void {
    for (const [dep, bySvc] of [...this.groups].sort(([a], [b]) => cmp(a, b))) {
      const d = this.snap.deployments.get(dep);
      for (const [svc, list] of [...bySvc].sort(([a], [b]) => cmp(a, b))) {
        if (d && d.value.spec.services[svc]) continue;
        for (const g of list) {
          // Only once the deployments informer has seen past the replica's last write: a replica of
          // a deployment this informer does not know yet is not an orphan.
          if (g.copies.some((c) => c.modRevision > this.snap.seen.deployments)) continue;
          this.remove(g, d ? 'service_removed' : 'deployment_deleted');
        }
      }
    }
  }

  reconcileService(dep: string, svc: string, spec: ServiceSpec): void {
    const d = this.snap.deployments.get(dep)!.value;
    // What new replicas get (hashing the spec is not free: only when something is placed).
    let served: ServingTemplate | undefined;
    const t = () => (served ??= servingTemplate(d, svc, this.snap.rollouts.get(`${dep}/${svc}`), (n) => this.snap.revisions.get(keys.revision(dep, n)))!);
    const mode = placementMode(spec);
    const st: ServiceSchedulingStatus = { desired: 0, placed: 0 };
    let kept: Group[] = [];
    for (const g of this.groups.get(dep)?.get(svc) ?? []) {
      // Indexed ids and host-keyed ids cannot be mixed: a change to or from global replaces them.
      if ((mode === 'global') !== (g.index === undefined)) this.remove(g, 'mode_changed');
      else if (mode === 'global' && g.copies.every((c) => this.nodeGone(c))) this.remove(g, 'node_gone');
      else kept.push(g);
    }
    if (mode === 'global') this.scaleGlobal(dep, svc, spec, t, kept, st);
    else {
      // Scale down before re-placing lost replicas: a replica about to go is not worth moving.
      const want = spec.replicas ?? 1;
      kept = this.replaceLost(this.scaleDown(kept, want), spec, st);
      st.desired = want;
      st.placed = kept.length;
      if (kept.length < want) st.placed += this.placeIndexed(dep, svc, spec, t, kept, want - kept.length, st);
    }
    for (const g of kept) this.health(g, d.metadata.generation ?? 1);
    const c = this.conditions.get(`${dep}/${svc}`);
    if (c?.exhausted.length) st.restartExhausted = c.exhausted.sort();
    if (c?.nodeLost.length) st.nodeLost = c.nodeLost.sort();
    if (st.unschedulable) this.plan.unschedulable[st.unschedulable.reason as UnschedulableReason] = (this.plan.unschedulable[st.unschedulable.reason as UnschedulableReason] ?? 0) + st.unschedulable.count;
    let bySvc = this.plan.status.get(dep);
    if (!bySvc) this.plan.status.set(dep, (bySvc = {}));
    bySvc[svc] = st;
    this.endpoints(dep, svc, kept);
  }

  private condition(g: Group) {
    const k = `${g.deployment}/${g.service}`;
    let c = this.conditions.get(k);
    if (!c) this.conditions.set(k, (c = { exhausted: [], nodeLost: [] }));
    return c;
  }

  /** Deletes of every desired key of a replica and of the restart command beside each. */
  private deleteCopies(g: Group): Op[] {
    const ops: Op[] = [];
    for (const c of g.copies) {
      ops.push(this.deleteOp(c));
      const cmd = this.command(g, c.desired.spec.node);
      if (cmd) ops.push(this.deleteOp(cmd));
    }
    return ops;
  }

  /** Removes every copy of a replica, with its commands and decision. */
  private remove(g: Group, reason: RemoveReason): void {
    const ops = this.deleteCopies(g);
    const dec = this.snap.decisions.get(keys.decision(g.deployment, g.id));
    if (dec) ops.push(this.deleteOp(dec));
    const nodes = g.copies.map((c) => c.desired.spec.node);
    this.plan.stop.push({ replica: g.id, deployment: g.deployment, service: g.service, nodes, reason });
    this.plan.acts.push({
      label: `remove ${g.id}`,
      ops,
      audit: [{ type: 'replica_removed', time: this.now, deployment: g.deployment, payload: { replica: g.id, service: g.service, nodes, reason } }],
    });
  }

  private deleteOp(v: { key: string; modRevision: number }): Op {
    this.deleted.add(v.key);
    return { op: 'delete', key: v.key, modRevision: v.modRevision };
  }

  /**
   * Node loss: a stateless replica whose every copy is on a lost node is re-placed in one act (its
   * desired key leaves the lost node and appears on the new one, same id); a stateful one stays
   * and reports node_lost; a suspended one stays where the drain left it.
   */
  private replaceLost(kept: Group[], spec: ServiceSpec, st: ServiceSchedulingStatus): Group[] {
    const out: Group[] = [];
    for (const g of kept) {
      if (g.copies.every((c) => c.nodeReady)) {
        out.push(g); // the common case: nothing is lost
        continue;
      }
      const live = g.copies.filter((c) => !c.desired.spec.suspended);
      const lost = live.map((c) => this.lostFor(c));
      if (!live.length || lost.some((l) => l === undefined)) {
        out.push(g);
        continue;
      }
      const base = live.find((c) => !c.desired.spec.move) ?? live[0]!;
      if (isStateful(base.desired.spec.template)) {
        this.condition(g).nodeLost.push(g.id);
        this.plan.stranded.push({ replica: g.id, node: base.desired.spec.node });
        out.push(g);
        continue;
      }
      // Its own revision and resources (the rollout owns those), today's placement constraints.
      const req: PlacementRequest = { replica: g.id, deployment: g.deployment, service: g.service, index: g.index, spec: { ...base.desired.spec.template, placement: spec.placement } };
      const decision = this.placer.place(req);
      if (!decision.chosen) {
        addUnschedulable(st, unschedulableOf(decision, 1));
        out.push(g);
        continue;
      }
      const notReadyForMs = Math.min(...(lost as number[]));
      const from = g.copies.map((c) => c.desired.spec.node);
      const { move: _m, suspended: _s, ...rest } = base.desired.spec;
      const moved: ReplicaDesired = { ...base.desired, metadata: { name: g.id }, spec: { ...rest, node: decision.chosen, placedAt: this.iso } };
      const newKey = keys.desired(decision.chosen, g.id);
      const ops = this.deleteCopies(g);
      ops.push({ op: 'create', key: newKey, value: moved }, { op: 'put', key: keys.decision(g.deployment, g.id), value: decisionValue(decision, 'node_lost', this.now, this.cfg.actor) });
      this.plan.replaceLost.push({ replica: g.id, deployment: g.deployment, service: g.service, from, to: decision.chosen, notReadyForMs, why: decision.why });
      this.plan.acts.push({
        label: `replace ${g.id}`,
        ops,
        audit: [
          {
            type: 'node_lost',
            time: this.now,
            deployment: g.deployment,
            payload: { replica: g.id, service: g.service, node: from.join(','), to: decision.chosen, notReadyForMs: Number.isFinite(notReadyForMs) ? notReadyForMs : null, why: decision.why },
          },
        ],
        metrics: { placements: { trigger: 'node_lost', count: 1 } },
      });
      // From here on the replica is its new copy (restarts and endpoints look at it there).
      out.push({ ...g, copies: [{ key: newKey, modRevision: 0, desired: moved, nodeReady: true }] });
    }
    return out;
  }

  /** spread, pack and hosts over `want`: not-running replicas go first, then the highest indexes. */
  private scaleDown(kept: Group[], want: number): Group[] {
    if (kept.length <= want) return kept;
    const up = (g: Group) => g.copies.some((c) => c.nodeReady && replicaRunning(c.observed));
    const order = [...kept].sort((a, b) => Number(up(a)) - Number(up(b)) || (b.index ?? 0) - (a.index ?? 0) || cmp(a.id, b.id));
    const gone = new Set(order.slice(0, kept.length - want));
    for (const g of order) if (gone.has(g)) this.remove(g, 'scale_down');
    return kept.filter((g) => !gone.has(g));
  }

  /** Places up to `count` new replicas in one act (with the counter's CAS); returns how many. */
  private placeIndexed(dep: string, svc: string, spec: ServiceSpec, template: () => ServingTemplate, existing: Group[], count: number, st: ServiceSchedulingStatus): number {
    const counter = this.snap.counters.get(`${dep}/${svc}`);
    // The counter moved in a transaction the desired informer has not shown yet: the replicas it
    // created are not in this snapshot, so counting now would place them twice. Wait for it.
    if (counter && counter.modRevision > this.snap.seen.desired) {
      this.plan.waiting.push({ deployment: dep, service: svc, note: `waiting for the desired informer to reach revision ${counter.modRevision}` });
      return 0;
    }
    let next = Math.max(counter?.value.spec.next ?? 0, ...this.indexesOf(dep, svc).map((i) => i + 1));
    const mode = placementMode(spec);
    // The footprint of what will run (the serving template), today's placement constraints.
    const t = template();
    const shape: ServiceSpec = { ...t.template, placement: spec.placement };
    const request = (index: number): PlacementRequest => ({ replica: replicaId(dep, svc, index), deployment: dep, service: svc, index, spec: shape });

    if (mode === 'hosts') {
      // All or nothing (seed 001): fewer listed hosts able to take one than wanted → none placed.
      const cands = this.placer.candidates(request(next));
      if (cands.length < count) {
        const listed = [...new Set(spec.placement?.hosts ?? [])].sort();
        const holding = new Set(existing.flatMap((g) => g.copies.map((c) => c.desired.spec.node)));
        const missing = listed.filter((h) => !cands.includes(h) && !holding.has(h));
        const d = this.placer.decide(request(next));
        const why = `${cands.length} of the ${listed.length} listed host(s) can take a replica and ${count} are wanted: none placed (all or nothing)${missing.length ? `; missing: ${missing.join(', ')}` : ''}`;
        addUnschedulable(st, { ...unschedulableOf({ ...d, reason: 'cannot_satisfy_host_placement' }, count, missing), message: why });
        return 0;
      }
    }

    const volumes = this.volumesWithoutHome(dep, spec);
    const cap = Math.max(1, Math.floor((TXN_OPS - 1 - volumes.length) / OPS_PER_PLACEMENT));
    const ops: Op[] = [];
    const audit: AuditRecord[] = [];
    let placed = 0;
    for (; placed < Math.min(count, cap); placed++) {
      const index = next;
      const decision = this.placer.place(request(index));
      if (!decision.chosen) {
        addUnschedulable(st, unschedulableOf(decision, count - placed));
        break;
      }
      next++;
      const id = decision.replica;
      if (placed === 0) for (const v of volumes) ops.push(this.recordVolumeHome(dep, v, decision.chosen));
      ops.push({ op: 'create', key: keys.desired(decision.chosen, id), value: desiredValue(id, dep, svc, decision.chosen, index, t, this.now) });
      ops.push({ op: 'put', key: keys.decision(dep, id), value: decisionValue(decision, 'scale_up', this.now, this.cfg.actor) });
      audit.push({ type: 'replica_placed', time: this.now, deployment: dep, payload: { replica: id, service: svc, node: decision.chosen, revision: t.revision, trigger: 'scale_up', why: decision.why } });
      this.plan.place.push({ replica: id, deployment: dep, service: svc, node: decision.chosen, index, trigger: 'scale_up', why: decision.why });
    }
    if (placed < count && !st.unschedulable) this.plan.waiting.push({ deployment: dep, service: svc, note: `${count - placed} more replica(s) next pass (one transaction per service per pass)` });
    if (!placed) return 0;
    const counterKey = keys.counter(dep, svc);
    const value: ReplicaCounter = { apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name: `${dep}-${svc}` }, spec: { next } };
    // The counter's CAS makes the act's indexes this leader's alone: they are never handed out twice.
    ops.unshift(counter ? { op: 'update', key: counterKey, value, modRevision: counter.modRevision } : { op: 'create', key: counterKey, value });
    this.plan.acts.push({ label: `place ${dep}/${svc} ${next - placed}..${next - 1}`, ops, audit, metrics: { placements: { trigger: 'scale_up', count: placed } } });
    return placed;
  }

  /** Indexes of every replica of the service, including ones being removed (never reused). */
  private indexesOf(dep: string, svc: string): number[] {
    return (this.groups.get(dep)?.get(svc) ?? []).flatMap((g) => (g.index !== undefined ? [g.index] : []));
  }

  /** Named volumes of a service that have no home yet: the first placement records them. */
  private volumesWithoutHome(dep: string, spec: ServiceSpec): string[] {
    return [...new Set((spec.volumes ?? []).filter((v) => v.type === 'volume').map((v) => v.source))].filter((v) => !this.snap.volumeHomes.has(`${dep}/${v}`)).sort();
  }

  private recordVolumeHome(dep: string, volume: string, node: string): Op {
    this.placer.recordVolumeHome(dep, volume, node);
    const value: VolumeHome = { apiVersion: API_VERSION, kind: 'VolumeHome', metadata: { name: `${dep}-${volume}` }, spec: { deployment: dep, volume, node, since: this.iso } };
    return { op: 'create', key: keys.volumeHome(dep, volume), value };
  }

  /**
   * global: one replica per eligible node (Ready, schedulable, matching the node selector).
   * Nodes that merely went NotReady, cordoned or draining keep theirs: no churn.
   */
  private scaleGlobal(dep: string, svc: string, spec: ServiceSpec, template: () => ServingTemplate, kept: Group[], st: ServiceSchedulingStatus): void {
    const holding = new Set(kept.flatMap((g) => g.copies.map((c) => c.desired.spec.node)));
    let t: ServingTemplate | undefined;
    let shape: ServiceSpec | undefined;
    let wanted = kept.length;
    const rejected: Decision[] = [];
    for (const host of this.placer.names) {
      if (holding.has(host)) continue;
      t ??= template();
      shape ??= { ...t.template, placement: spec.placement };
      const id = replicaId(dep, svc, host);
      const req: PlacementRequest = { replica: id, deployment: dep, service: svc, spec: shape };
      const rej = this.placer.check(req, host, { antiAffinity: false });
      // Not a node this service runs on at all (yet): not counted as wanted.
      if (rej && (rej.filter === 'eligibility' || rej.filter === 'node_selector')) continue;
      wanted++;
      const verdict = rej ? { node: host, rejected: rej } : { node: host, score: { total: 0, parts: {} } };
      const decision: Decision = {
        replica: id,
        deployment: dep,
        service: svc,
        mode: 'global',
        verdicts: [verdict],
        ...(rej
          ? { reason: rej.reason, why: `global: ${host} is eligible but cannot run it (${rej.reason}): ${rej.detail}` }
          : { chosen: host, why: `global: one replica per eligible node; ${host} is Ready, schedulable and passes every filter` }),
      };
      if (rej) {
        rejected.push(decision);
        continue;
      }
      this.placer.assume({ id, deployment: dep, service: svc, node: host, ...footprintOf(shape) });
      this.plan.place.push({ replica: id, deployment: dep, service: svc, node: host, trigger: 'global_node', why: decision.why });
      this.plan.acts.push({
        label: `place ${id}`,
        ops: [
          { op: 'create', key: keys.desired(host, id), value: desiredValue(id, dep, svc, host, undefined, t, this.now) },
          { op: 'put', key: keys.decision(dep, id), value: decisionValue(decision, 'global_node', this.now, this.cfg.actor) },
        ],
        audit: [{ type: 'replica_placed', time: this.now, deployment: dep, payload: { replica: id, service: svc, node: host, revision: t.revision, trigger: 'global_node', why: decision.why } }],
        metrics: { placements: { trigger: 'global_node', count: 1 } },
      });
      st.placed++;
    }
    st.desired = wanted;
    st.placed += kept.length;
    if (rejected.length) {
      const first = rejected[0]!;
      const nodes = Object.fromEntries(rejected.map((d) => [d.verdicts[0]!.node, `${d.verdicts[0]!.rejected!.filter}: ${d.verdicts[0]!.rejected!.detail}`]));
      addUnschedulable(st, { reason: first.reason!, count: rejected.length, message: `${rejected.length} eligible node(s) cannot run their replica; first: ${first.why}`, nodes });
    }
  }

  // -------------------------------------------------------------- health

  /** Restart bookkeeping of one replica that stays (skipped while moving, suspended or on a NotReady node). */
  private health(g: Group, generation: number): void {
    if (g.copies.length !== 1 || inFlight(g.copies)) return; // a move in flight: the move mechanism watches it
    const c = g.copies[0]!;
    const s = c.desired.spec;
    const cmd = this.command(g, s.node);
    if (cmd?.value.status?.exhausted && cmd.value.status.generation === generation) this.condition(g).exhausted.push(g.id);
    if (s.suspended || c.modRevision === 0 || !c.nodeReady) return; // nothing current to judge
    const v = judgeRestart(c.desired, c.observed, cmd?.value, generation, this.now, this.cfg.restart);
    if (v.kind === 'none') return this.wake(v.wakeAt);
    const key = keys.command(s.node, g.id);
    const value: ReplicaCommand = {
      apiVersion: API_VERSION,
      kind: 'ReplicaCommand',
      metadata: { name: g.id },
      spec: cmd?.value.spec ?? { replica: g.id, op: 'restart', seq: 0, issuedAt: this.iso, reason: 'bookkeeping' },
      status: v.status,
    };
    const audit: AuditRecord[] = [];
    const o = c.observed?.status;
    const observed = o ? `${o.state}${o.code ? ` (${o.code})` : ''}${o.details ? `: ${o.details}` : ''}` : 'not observed';
    if (v.kind === 'restart') {
      value.spec = { replica: g.id, op: 'restart', seq: v.seq, issuedAt: this.iso, reason: `${v.cause}: ${observed}` };
      this.plan.restart.push({ replica: g.id, deployment: s.deployment, service: s.service, node: s.node, cause: v.cause, restarts: v.status.restarts, seq: v.seq });
      audit.push({ type: 'replica_restarted', time: this.now, deployment: s.deployment, payload: { replica: g.id, service: s.service, node: s.node, cause: v.cause, observed, restarts: v.status.restarts, seq: v.seq } });
    } else {
      this.plan.commandStatus.push({ replica: g.id, node: s.node, kind: v.kind, status: v.status });
      if (v.kind === 'exhaust') {
        this.condition(g).exhausted.push(g.id);
        audit.push({ type: 'restart_exhausted', time: this.now, deployment: s.deployment, payload: { replica: g.id, service: s.service, node: s.node, cause: v.cause, observed, restarts: v.status.restarts } });
      } else {
        const at = this.condition(g).exhausted.indexOf(g.id);
        if (at >= 0) this.condition(g).exhausted.splice(at, 1);
      }
    }
    this.plan.acts.push({
      label: `${v.kind} ${s.node}/${g.id}`,
      ops: [cmd ? { op: 'update', key, value, modRevision: cmd.modRevision } : { op: 'create', key, value }],
      audit,
      ...(v.kind === 'restart' ? { metrics: { restarts: { deployment: s.deployment, service: s.service } } } : {}),
    });
  }

  // -------------------------------------------------------------- routing

  /**
   * endpoints/<dep>/<svc>: the copies that are ready (replicaReady) on Ready nodes, with their
   * host ports. Compared in place with the stored list: an idle pass allocates nothing here.
   */
  private endpoints(dep: string, svc: string, kept: Group[]): void {
    const cur = this.snap.endpoints.get(`${dep}/${svc}`);
    const stored = cur?.value.spec.addresses;
    let addresses: EndpointAddress[] | undefined = stored ? undefined : [];
    let n = 0;
    for (const g of kept)
      for (const c of g.copies) {
        if (c.modRevision === 0 || c.observed?.status.state !== 'running' || !c.nodeReady || !readyMemo(c.desired, c.observed, this.now)) continue;
        const ports = c.desired.spec.template.ports ?? [];
        if (!addresses) {
          const s = stored![n];
          if (s && s.replica === g.id && s.node === c.desired.spec.node && samePorts(s.ports, ports)) {
            n++;
            continue;
          }
          addresses = stored!.slice(0, n);
        }
        addresses.push({ replica: g.id, node: c.desired.spec.node, ports: [...ports] });
      }
    if (!addresses && n === stored!.length) return;
    addresses ??= stored!.slice(0, n);
    this.plan.endpoints.push({ deployment: dep, service: svc, addresses });
    const key = keys.endpoints(dep, svc);
    const value: Endpoints = { apiVersion: API_VERSION, kind: 'Endpoints', metadata: { name: `${dep}-${svc}` }, spec: { deployment: dep, service: svc, addresses } };
    this.plan.acts.push({ label: `endpoints ${dep}/${svc}`, ops: [cur ? { op: 'update', key, value, modRevision: cur.modRevision } : { op: 'create', key, value }], audit: [] });
  }

  // -------------------------------------------------------------- bookkeeping

  cleanup(): void {
    const orphans: [Versioned<unknown>, string][] = [];
    const caughtUp = (v: Versioned<unknown>, rev: number) => v.modRevision <= rev;
    // Commands whose copy is gone (a finished move, a removal another controller made).
    for (const cmd of this.snap.commands.values()) {
      const s = cmd.value.spec;
      const nodes = this.byId.get(s.replica)?.copies.map((c) => keys.command(c.desired.spec.node, s.replica)) ?? [];
      if (!nodes.includes(cmd.key) && caughtUp(cmd, this.snap.seen.desired)) orphans.push([cmd, 'its replica has no desired key on that node']);
    }
    for (const dec of this.snap.decisions.values())
      if (!this.byId.has(dec.value.spec.replica) && caughtUp(dec, this.snap.seen.desired)) orphans.push([dec, `replica ${dec.value.spec.replica} no longer exists`]);
    const serviceGone = (dep: string, svc: string) => !this.snap.deployments.get(dep)?.value.spec.services[svc];
    for (const [k, v] of this.snap.counters) {
      const [dep, svc] = k.split('/') as [string, string];
      if (serviceGone(dep, svc) && caughtUp(v, this.snap.seen.deployments)) orphans.push([v, `service ${k} no longer exists`]);
    }
    for (const [k, v] of this.snap.endpoints)
      if (serviceGone(v.value.spec.deployment, v.value.spec.service) && caughtUp(v, this.snap.seen.deployments)) orphans.push([v, `service ${k} no longer exists`]);
    for (const [dep, v] of this.snap.statuses) if (!this.snap.deployments.has(dep) && caughtUp(v, this.snap.seen.deployments)) orphans.push([v, `deployment ${dep} no longer exists`]);
    for (const [v, why] of orphans.sort(([a], [b]) => cmp(a.key, b.key))) {
      if (this.deleted.has(v.key)) continue;
      this.plan.cleanup.push({ key: v.key, why });
      this.plan.acts.push({ label: `cleanup ${v.key}`, ops: [this.deleteOp(v)], audit: [] });
    }
  }

  /**
   * deploymentstatus/<name>.status.scheduling, written only when it changed (an idle cluster sees
   * no writes), read-modify-write with CAS so the rollout controller's field is kept.
   */
  writeStatuses(): void {
    for (const [dep, services] of [...this.plan.status].sort(([a], [b]) => cmp(a, b))) {
      const d = this.snap.deployments.get(dep)!.value;
      const cur = this.snap.statuses.get(dep);
      const prev = cur?.value.status?.scheduling;
      const scheduling = { observedGeneration: d.metadata.generation ?? 1, updatedAt: this.iso, services };
      if (prev && canonicalJson({ ...prev, updatedAt: '' }) === canonicalJson({ ...scheduling, updatedAt: '' })) continue;
      const audit: AuditRecord[] = [];
      for (const [svc, s] of Object.entries(services)) {
        const before = prev?.services[svc];
        const u = s.unschedulable;
        if (u && u.reason !== before?.unschedulable?.reason)
          audit.push({ type: 'placement_failed', time: this.now, deployment: dep, payload: { service: svc, reason: u.reason, count: u.count, message: u.message, nodes: u.nodes, ...(u.missing ? { missing: u.missing } : {}) } });
        const newlyLost = (s.nodeLost ?? []).filter((r) => !before?.nodeLost?.includes(r));
        for (const r of newlyLost) {
          const node = this.plan.stranded.find((x) => x.replica === r)?.node;
          audit.push({ type: 'node_lost', time: this.now, deployment: dep, payload: { replica: r, service: svc, node, stranded: true, why: 'the replica has volumes: its data is on that node, so it stays (node_lost)' } });
        }
      }
      const key = keys.deploymentStatus(dep);
      const value: DeploymentStatus = cur
        ? { ...cur.value, status: { ...cur.value.status, scheduling } }
        : { apiVersion: API_VERSION, kind: 'DeploymentStatus', metadata: { name: dep }, status: { scheduling } };
      this.plan.acts.push({ label: `status ${dep}`, ops: [cur ? { op: 'update', key, value, modRevision: cur.modRevision } : { op: 'create', key, value }], audit });
    }
  }
}

/**
 * replicaReady, remembered per (desired, observed) pair. Readiness of a fixed pair only ever turns
 * true as time passes (the minimum ready time running out), so once ready at `t` it is ready at
 * every later time: the memo answers exactly what replicaReady would, without re-parsing a start
 * time for every running replica on every pass (the idle pass's biggest cost). Stored objects
 * are never mutated (informers replace them), so identity is a safe key.
 */
const readySince = new WeakMap<ReplicaObserved, WeakMap<ReplicaDesired, number>>();
function readyMemo(d: ReplicaDesired, o: ReplicaObserved, now: number): boolean {
  const at = readySince.get(o)?.get(d);
  if (at !== undefined && now >= at) return true;
  if (!replicaReady(d, o, now)) return false;
  let m = readySince.get(o);
  if (!m) readySince.set(o, (m = new WeakMap()));
  m.set(d, Math.min(at ?? now, now));
  return true;
}

function samePorts(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}

function addUnschedulable(st: ServiceSchedulingStatus, u: Unschedulable): void {
  if (!st.unschedulable) st.unschedulable = u;
  else st.unschedulable = { ...st.unschedulable, count: st.unschedulable.count + u.count };
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

