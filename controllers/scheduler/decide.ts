// The scheduler's pure core: one snapshot of the cache (plus the leader's "NotReady since" memory)
// and the clock in, the plan of one pass out — named buckets (place, stop, replaceLost, restart,
// commandStatus, status, endpoints, cleanup), each item with its reason, and the CAS-guarded acts
// that carry them out. No I/O, no clock of its own, deterministic: services in placement order,
// replicas by index, nodes by name. The jobs of a pass live beside it, one file each:
// membership.ts, node-loss.ts, health.ts, routing.ts, bookkeeping.ts (pass.ts is what they share).
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { PlaceTrigger, RemoveReason, RestartCause, UnschedulableReason } from '../../src/api/reasons/scheduling.js';
import { servingTemplate, type ServingTemplate } from '../../src/api/serving.js';
import { isJob, placementMode } from '../../src/api/spec.js';
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
  type ReplicaCommand,
  type ReplicaCommandStatus,
  type ReplicaCounter,
  type ReplicaDesired,
  type RolloutPlan,
  type ServiceSchedulingStatus,
  type ServiceSpec,
  type Unschedulable,
  type VolumeHome,
} from '../../src/api/types.js';
import type { Act, ActFailure } from '../../src/runtime/acts.js';
import { allSteps } from '../../src/runtime/steps.js';
import type { ReplicaEntry, ReplicaIndex } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import type { EligibilityRevisions } from '../placement/input.js';
import { DEFAULT_PLACEMENT_CONFIG, type Decision, type PlacementConfig } from '../placement/placer.js';
import { cleanup, writeStatuses } from './bookkeeping.js';
import { health } from './health.js';
import { healCopies } from './copies.js';
import { reconcileJob } from './job.js';
import { waitingFor } from './dependencies.js';
import { canariesWanted, isCanary } from './canary.js';
import { keptReplicas, placeIndexed, removeOrphanedReplicas, scaleDown, scaleGlobal } from './membership.js';
import { replaceLost } from './node-loss.js';
import { returnPreempted } from './preempted.js';
import { cmp, iso, SchedulerPass } from './pass.js';
import { MAX_CONSECUTIVE_RESTARTS, type RestartPolicy } from './restarts.js';
import { endpoints } from './routing.js';

/** Everything decide reads: the scheduler's view of the cache (controller.ts builds it). */
export interface SchedulerSnapshot {
  /** By deployment name. */
  deployments: ReadonlyMap<string, Versioned<Deployment>>;
  /** Deployments whose key exists but cannot be read (and never could): present, frozen. */
  frozenDeployments: ReadonlySet<string>;
  /** By key (keys.revision(name, n)). */
  revisions: ReadonlyMap<string, DeploymentRevision>;
  /** By `<deployment>/<service>`. */
  rollouts: ReadonlyMap<string, RolloutPlan>;
  /** By node name. */
  nodes: ReadonlyMap<string, Node>;
  /** Nodes whose key exists but cannot be read: neither gone nor schedulable. */
  frozenNodes: ReadonlySet<string>;
  /** Mod revisions of the node and drain keys (an act placing on a node compares them). */
  eligibility: EligibilityRevisions;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  /**
   * Mod revisions of the heartbeat keys, by node (absent: no heartbeat). A re-placement off a lost
   * node compares its node's: one judged from a cache that lags, or missed the node's heartbeats,
   * is refused instead of moving replicas off a node that is alive.
   */
  heartbeatRevisions: ReadonlyMap<string, number>;
  /** By host: the revision of the newest Ready heartbeat seen (LAST_READY), what each NotReady clock judged. */
  lastReady: ReadonlyMap<string, number>;
  drains: ReadonlyMap<string, NodeDrain>;
  /** Every replica with its copies and what their agents observe (the shared index). */
  replicas: ReplicaIndex;
  /** By store key (commands/<host>/<replica>). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** By `<deployment>/<service>`. */
  counters: ReadonlyMap<string, Versioned<ReplicaCounter>>;
  /** By `<deployment>/<volume>`. */
  volumeHomes: ReadonlyMap<string, Versioned<VolumeHome>>;
  /** By `<deployment>/<service>`. */
  endpoints: ReadonlyMap<string, Versioned<Endpoints>>;
  /** By store key (decisions/<deployment>/<replica>); their values are not needed. */
  decisions: ReadonlyMap<string, { key: string; modRevision: number }>;
  /** By deployment name. */
  statuses: ReadonlyMap<string, Versioned<DeploymentStatus>>;
  /** The cluster network: its ranges, each node's subnets, the addresses claimed (IPAM). */
  network: NetworkView;
  /** The cluster's node-eligibility settings (degraded nodes, default scratch disk; config/nodes). */
  settings?: NodeSettingsResolved;
  /** Leader-local: since when (ms) each NotReady node has been seen NotReady. */
  notReadySince: ReadonlyMap<string, number>;
  /** The scheduler's acts that keep failing (reported in their deployment's status). */
  failing: readonly ActFailure[];
}

export { decisionValue } from '../placement/decision.js';
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import { giveServiceAddress, grantSubnets, releaseAddresses } from './network.js';
import type { NetworkView } from '../placement/ipam.js';

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

/**
 * Leader-local memory of NotReady nodes: a node is NotReady "since" the first pass that saw it so
 * (a new leader starts the clocks again, so a node is never declared lost on a stale memory).
 * Each clock remembers the node's last Ready heartbeat as it judged it (`judged`: its revision
 * from LAST_READY, 0 for none): a newer one means the node was Ready in between — even if no pass
 * saw it so — and this lapse is a new one, its clock starts now. Kept by name alone, the clock of
 * an earlier lapse outlived the node's return, and a fresh lapse was judged past the grace at once
 * (the simulation, seeds 55069 and 61211).
 */
export function trackNotReady(
  since: Map<string, number>,
  judged: Map<string, number>,
  hosts: Iterable<string>,
  heartbeats: ReadonlyMap<string, Heartbeat>,
  lastReady: ReadonlyMap<string, number>,
  now: number,
): void {
  const all = new Set(hosts);
  for (const h of [...since.keys()]) if (!all.has(h)) since.delete(h);
  for (const h of [...judged.keys()]) if (!since.has(h)) judged.delete(h);
  for (const h of all) {
    if (nodeReady(heartbeats.get(h))) {
      since.delete(h);
      judged.delete(h);
      continue;
    }
    const ready = lastReady.get(h) ?? 0;
    // Ready since the clock last judged it (its heartbeat gone, or rewritten with Docker down, since).
    const returned = judged.has(h) && judged.get(h) !== ready;
    if (!since.has(h) || returned) since.set(h, now);
    judged.set(h, ready);
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

export interface SchedulerAct extends Act<ActMetrics> {
  audit: AuditRecord[];
}

export interface SchedulerPlan {
  place: PlaceItem[];
  stop: StopItem[];
  replaceLost: ReplaceItem[];
  restart: RestartItem[];
  commandStatus: CommandStatusItem[];
  /**
   * Stateful replicas left on lost nodes (status node_lost), each with the evidence of loss its
   * first report compares (node-loss.ts lossGuard): a report judged from a cache that lags is refused.
   */
  stranded: { replica: string; node: string; guard: Op[] }[];
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


export function desiredValue(
  id: string,
  deployment: string,
  service: string,
  node: string,
  index: number | undefined,
  t: ServingTemplate,
  now: number,
  hostPorts: Record<string, number> = {},
): ReplicaDesired {
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: id },
    spec: {
      replica: id,
      deployment,
      service,
      node,
      ...(index !== undefined ? { index } : {}),
      revision: t.revision,
      specHash: t.specHash,
      template: t.template,
      placedAt: iso(now),
      ...(Object.keys(hostPorts).length ? { hostPorts } : {}),
    },
  };
}

/** The status a service reports when `count` of its replicas hit this decision. */
export function unschedulableOf(d: Decision, count: number, missing?: string[]): Unschedulable {
  const nodes: Record<string, string> = {};
  for (const v of d.verdicts) if (v.rejected) nodes[v.node] = `${v.rejected.filter}: ${v.rejected.detail}`;
  return { reason: d.reason ?? 'no_nodes_active', count, message: d.why, nodes, ...(missing?.length ? { missing } : {}) };
}

/**
 * Adds `u` to the service's status: counts add up; the first reason heads it, except that a reason
 * the rescheduler can act on (capacity) heads one that only waits (`preempted`): a service with a
 * preempted replica and another pending for capacity still gets coalescing and preemption for it.
 */
export function addUnschedulable(st: ServiceSchedulingStatus, u: Unschedulable): void {
  const cur = st.unschedulable;
  if (!cur) st.unschedulable = u;
  else if (cur.reason === 'preempted' && u.reason !== 'preempted') st.unschedulable = { ...u, count: cur.count + u.count, message: `${u.message}; and ${cur.message}` };
  else st.unschedulable = { ...cur, count: cur.count + u.count };
}

// ---------------------------------------------------------------- the pass

export function decide(snap: SchedulerSnapshot, now: number, cfg: SchedulerConfig): SchedulerPlan {
  return allSteps(decideSteps(snap, now, cfg));
}

/**
 * The pass, in steps (runner.ts decideSteps): yields the acts of each service as it is decided,
 * so the runtime writes the first services' placements while it decides the rest. Returns the
 * whole plan, whose acts are every act yielded, in order, and the statuses last.
 */
export function* decideSteps(snap: SchedulerSnapshot, now: number, cfg: SchedulerConfig): Generator<readonly SchedulerAct[], SchedulerPlan, void> {
  const pass = new SchedulerPass(snap, now, cfg);
  let handed = 0;
  const step = () => pass.plan.acts.slice(handed, (handed = pass.plan.acts.length));
  // Replicas whose deployment or service is gone first: they are not any service's to count.
  removeOrphanedReplicas(pass);
  // Nodes get their subnets before anything is placed: this pass's placements use them.
  grantSubnets(pass);
  yield step();
  // Services in priority order, so a higher-priority service takes the last free capacity; each
  // fixes membership (mode change, lost nodes, scale) before its restarts, status and endpoints.
  for (const [dep, svc, spec] of servicesInPlacementOrder(snap)) {
    reconcileService(pass, dep, svc, spec);
    yield step();
  }
  // Bookkeeping of what no longer exists: commands, decisions, counters, endpoints, statuses,
  // addresses and subnets.
  cleanup(pass);
  releaseAddresses(pass);
  // Last: the status reports what the acts above leave behind.
  writeStatuses(pass);
  return pass.plan;
}

/** Descending priority across deployments, then deployment and service name (seed 002). */
function servicesInPlacementOrder(snap: SchedulerSnapshot): [string, string, ServiceSpec][] {
  const out: [string, string, ServiceSpec, number][] = [];
  for (const [dep, d] of snap.deployments) for (const [svc, spec] of Object.entries(d.value.spec.services)) out.push([dep, svc, spec, spec.priority ?? 0]);
  out.sort((a, b) => b[3] - a[3] || cmp(a[0], b[0]) || cmp(a[1], b[1]));
  return out.map(([d, s, spec]) => [d, s, spec]);
}

/**
 * Keys of the service's desired copies that cannot be read (and never could): by the names in the
 * value when it is JSON at all, else by the replica id in the key (ids of two services never
 * collide: apply refuses it).
 */
function frozenOf(snap: SchedulerSnapshot, dep: string, svc: string): string[] {
  const out: string[] = [];
  for (const f of snap.replicas.frozen.values()) {
    const id = f.key.slice(f.key.lastIndexOf('/') + 1);
    if (f.deployment !== undefined && f.service !== undefined ? f.deployment === dep && f.service === svc : id.startsWith(`${dep}-${svc}-`)) out.push(f.key);
  }
  return out.sort();
}

function reconcileService(pass: SchedulerPass, dep: string, svc: string, spec: ServiceSpec): void {
  const { snap } = pass;
  const d = snap.deployments.get(dep)!.value;
  // What new replicas get (hashing the spec is not free: only when something is placed).
  let served: ServingTemplate | undefined;
  const template = () => (served ??= servingTemplate(d, svc, pass.rolloutPlan(dep, svc), (n) => snap.revisions.get(keys.revision(dep, n)))!);
  const st: ServiceSchedulingStatus = { desired: 0, placed: 0 };
  const replicas = snap.replicas.service(dep, svc);
  const unreadable = frozenOf(snap, dep, svc);
  let kept: ReplicaEntry[];
  if (unreadable.length) {
    // A replica whose desired key cannot be read is neither counted nor replaced: the service's
    // membership holds still until the key is fixed (restarts and endpoints carry on).
    kept = [...replicas];
    st.desired = placementMode(spec) === 'global' ? kept.length : (spec.replicas ?? 1);
    st.placed = kept.length;
    st.unreadable = unreadable;
    pass.plan.waiting.push({ deployment: dep, service: svc, note: `membership held: unreadable desired key(s) ${unreadable.join(', ')}` });
  } else {
    // Surplus copies are healed first: everything after counts each replica once, as it will be.
    kept = keptReplicas(pass, healCopies(pass, replicas), spec);
    // Dependencies hold new placements (not the replicas already there).
    const waiting = waitingFor(pass, dep, d, spec);
    if (waiting.length) {
      st.waitingForDependency = waiting;
      pass.plan.waiting.push({ deployment: dep, service: svc, note: `waiting for ${waiting.join(', ')} (dependsOn)` });
    }
    if (isJob(spec)) kept = reconcileJob(pass, dep, svc, spec, template, kept, waiting.length > 0, d.metadata.generation ?? 1, st);
    else if (placementMode(spec) === 'global') {
      if (waiting.length) st.desired = st.placed = kept.length;
      else scaleGlobal(pass, dep, svc, spec, template, kept, st);
    } else {
      // Scale down before re-placing lost replicas: a replica about to go is not worth moving.
      const want = spec.replicas ?? 1;
      // A rollout's canaries (canary.ts) are a pool of their own beside the replicas: each pool is
      // scaled to what is wanted of it — the canaries to none once their rollout has ended — so a
      // canary never stands in for a replica, nor a replica for a canary.
      const canary = canariesWanted(pass.rolloutPlan(dep, svc));
      const canaryWant = canary?.count ?? 0;
      kept = replaceLost(pass, [...scaleDown(pass, kept.filter((e) => !isCanary(e)), want), ...scaleDown(pass, kept.filter(isCanary), canaryWant)], spec, st);
      // Replicas stopped by preemption stay members (no new index replaces them): placed again when they fit.
      let placed = kept.length - returnPreempted(pass, spec, kept, st);
      const replicasKept = kept.filter((e) => !isCanary(e)).length;
      const missing = Math.max(0, want - replicasKept) + Math.max(0, canaryWant - (kept.length - replicasKept));
      if (missing && !waiting.length) placed += placeIndexed(pass, dep, svc, spec, template, kept, missing, st, canary && { from: Math.max(0, want - replicasKept), revision: canary.revision });
      st.desired = want;
      st.placed = Math.min(placed, want);
      if (canary) st.canaries = placed - st.placed;
    }
  }
  // A job's runs are judged by reconcileJob: an exit 0 is its end, not a restart cause.
  if (!isJob(spec)) for (const e of kept) health(pass, e, d.metadata.generation ?? 1);
  const c = pass.conditionOf(dep, svc);
  if (c?.exhausted.length) st.restartExhausted = c.exhausted.sort();
  if (c?.nodeLost.length) st.nodeLost = c.nodeLost.sort();
  if (st.unschedulable) {
    const r = st.unschedulable.reason;
    pass.plan.unschedulable[r] = (pass.plan.unschedulable[r] ?? 0) + st.unschedulable.count;
  }
  let bySvc = pass.plan.status.get(dep);
  if (!bySvc) pass.plan.status.set(dep, (bySvc = {}));
  bySvc[svc] = st;
  endpoints(pass, dep, svc, kept);
  giveServiceAddress(pass, dep, svc);
}
