// The scheduler's pure core, the orchestrator of one pass: one snapshot of the cache (plus the
// leader's "NotReady since" memory) and the clock in, the plan out (plan.ts: named buckets, each item
// with its reason, and the CAS-guarded acts that carry them out). No I/O, no clock of its own,
// deterministic: services in placement order, replicas by index, nodes by name. This file only
// wires the jobs of a pass, which live beside it one file each — membership.ts, node-loss.ts,
// preempted.ts, job.ts, health.ts, routing.ts, network.ts, bookkeeping.ts — and share pass.ts; none
// imports this file back (controllers/structure.test.ts).
import { keys } from '../../src/api/keys.js';
import { servingTemplate, type ServingTemplate } from '../../src/api/serving.js';
import { isJob, placementMode } from '../../src/api/spec.js';
import type { ServiceSchedulingStatus, ServiceSpec } from '../../src/api/types.js';
import { allSteps } from '../../src/runtime/steps.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { cleanup, writeStatuses } from './bookkeeping.js';
import { health } from './health.js';
import { healCopies } from './copies.js';
import { reconcileJob } from './job.js';
import { waitingFor } from './dependencies.js';
import { canariesWanted, isCanary } from './canary.js';
import { keptReplicas, placeIndexed, removeOrphanedReplicas, scaleDown, scaleGlobal } from './membership.js';
import { giveServiceAddress, grantSubnets, releaseAddresses } from './network.js';
import { replaceLost } from './node-loss.js';
import { returnPreempted } from './preempted.js';
import { cmp, SchedulerPass } from './pass.js';
import type { SchedulerAct, SchedulerConfig, SchedulerPlan, SchedulerSnapshot } from './plan.js';
import { endpoints } from './routing.js';

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
