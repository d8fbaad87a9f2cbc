// The rollout controller's pure core (seed 001, "Rolling updates"): from one snapshot of
// deployments, revisions, replicas, plans and statuses, decide the next move of every service's
// rolling update — start, step, complete, abort and revert, supersede — as CAS-guarded acts.
// No I/O, no clock (`now` comes in), deterministic: ties by index, then node, then replica id.
import { isPullFailure } from '../../src/api/reasons/agent.js';
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import { minReadyAt, notReadyBecause, replicaRunning } from '../../src/api/readiness.js';
import { canonicalJson, isJob, leavingMs, startsFirst } from '../../src/api/spec.js';
import { planOfIncarnation, servingTemplate, templateOf, type ServingTemplate } from '../../src/api/serving.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentRevision,
  type DeploymentStatus,
  type DisruptionLedger,
  type Heartbeat,
  type ReplicaCommand,
  type ReplicaDesired,
  type ReplicaObserved,
  type RolloutPlan,
  type RolloutPlanSpec,
  type RolloutStep,
  type ServiceRolloutStatus,
} from '../../src/api/types.js';
import { updateControls, type UpdateControls } from '../../src/api/update.js';
import type { ReplicaIndex } from '../../src/runtime/replicas.js';
import type { Act } from '../../src/runtime/acts.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import { MAX_TXN_OPS } from '../../src/store/store.js';
import { admits, budgetOf, LedgerBook, type Budget } from '../disruption/budget.js';
import { unitFailureOf } from './progress.js';
import { completionGuard, type EvidenceRevisions } from './evidence.js';
import { REQUEST_APPLIES_TO, type FailureReason, type PauseReason, type RolloutResult, type StartReason, type StepDirection, type StepResult } from '../../src/api/reasons/rollout.js';

/** Everything decide reads. Maps are keyed as noted; the shell builds them from its informers. */
export interface RolloutSnapshot extends EvidenceRevisions {
  /** By deployment name. */
  deployments: ReadonlyMap<string, Versioned<Deployment>>;
  /** By key (keys.revision(name, n)). */
  revisions: ReadonlyMap<string, DeploymentRevision>;
  /** Every replica with its copies and what their agents observe. */
  replicas: ReplicaIndex;
  /** Restart commands by store key. */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** Disruption ledgers by `<deployment>/<service>`. */
  ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>;
  /** By node name. */
  heartbeats: ReadonlyMap<string, Heartbeat>;
  /** By `<deployment>/<service>`. */
  plans: ReadonlyMap<string, Versioned<RolloutPlan>>;
  /** By deployment name. */
  statuses: ReadonlyMap<string, Versioned<DeploymentStatus>>;
}

export interface RolloutConfig {
  /** Step timeout of a service that does not set update.stepTimeout (timings.stepTimeoutMs). */
  stepTimeoutMs: number;
}

export type MetricEvent = { metric: 'rollout'; result: RolloutResult } | { metric: 'step'; result: StepResult; seconds?: number };

export interface RolloutAct extends Act<MetricEvent> {
  audit: AuditRecord[];
  metrics: MetricEvent[];
}

/** Why a service is waiting: for logs, never for decisions. */
export interface Note {
  deployment: string;
  service: string;
  note: string;
}

export interface RolloutDecision {
  acts: RolloutAct[];
  /** Plans in progress once the acts land (jaco_rollout_in_progress). */
  inProgress: number;
  /** The earliest time a pass could decide something new without any event (a ready time, a timeout). */
  wakeAt?: number;
  notes: Note[];
}

// ---------------------------------------------------------------- replicas as the rollout sees them

/** One replica id of a service: one desired copy, or two while a move is in flight. */
export interface ReplicaGroup {
  id: string;
  index?: number;
  /** Sorted by node. */
  copies: Versioned<ReplicaDesired>[];
  observed: (ReplicaObserved | undefined)[];
  moving: boolean;
  suspended: boolean;
  /** A canary (update.canary): placed by the scheduler beside the service for a rollout, never stepped by a revert. */
  canary: boolean;
  /** The copy's node is NotReady: leave the replica to the scheduler's node-lost handling. */
  nodeDown: boolean;
}

/**
 * When the copy counts as ready at `hash` (src/api/readiness.ts: running at its desired revision
 * and spec, healthy, or up for update.minReadyTime without a health check): `now` or earlier when
 * ready, a later time when only the minimum ready time is missing, undefined when not on its way.
 */
export function readyAt(d: ReplicaDesired, o: ReplicaObserved | undefined, hash: string, now: number): number | undefined {
  if (d.spec.specHash !== hash) return undefined;
  const why = notReadyBecause(d, o, now);
  if (why === undefined) return now;
  if (why !== 'min_ready_time') return undefined;
  return minReadyAt(d, o);
}

function groupReady(g: ReplicaGroup, hash: string, now: number): { ready: boolean; at?: number } {
  let soonest: number | undefined;
  g.copies.forEach((c, i) => {
    const at = readyAt(c.value, g.observed[i], hash, now);
    if (at !== undefined) soonest = Math.min(soonest ?? at, at);
  });
  return { ready: soonest !== undefined && soonest <= now, at: soonest };
}

const groupRunning = (g: ReplicaGroup) => !g.nodeDown && g.observed.some(replicaRunning);
/** A copy needs a step toward `target`: another spec hash, or a revision older than the service's last restart (jaco rollout restart). */
const copyStale = (d: ReplicaDesired, target: Target) =>
  d.spec.specHash !== target.specHash || d.spec.revision < (target.restartRevision ?? 0) || (!!target.exactRevision && d.spec.revision !== target.revision);
const groupStale = (g: ReplicaGroup, target: Target) => g.copies.some((c) => copyStale(c.value, target));
/** The replicas a rollout steps: not suspended, and not canaries (the scheduler scales those away when the rollout ends). */
const steppable = (g: ReplicaGroup, target: Target) => !g.suspended && !g.canary && groupStale(g, target);

/** Where a service's replicas go: the serving template, and for a forward rollout the revision of its last restart. */
type Target = ServingTemplate & { restartRevision?: number; exactRevision?: boolean };
const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A service's replicas (the shared index) as the rollout reads them, joined with node readiness. */
export function replicaGroups(s: RolloutSnapshot, deployment: string, service: string, now: number): ReplicaGroup[] {
  return s.replicas
    .service(deployment, service)
    .map((e) => {
      const copies = e.copies.map((c) => ({ key: c.key, modRevision: c.modRevision, createRevision: 0, version: 0, value: c.desired }));
      return {
        id: e.id,
        index: e.index,
        copies,
        observed: e.copies.map((c) => c.observed),
        // In flight while a move marker is on a copy (two copies until cutover, one until complete).
        moving: e.copies.some((c) => c.desired.spec.move || c.desired.spec.movingTo),
        suspended: e.copies.every((c) => !!c.desired.spec.suspended),
        canary: e.copies.some((c) => !!c.desired.spec.canary),
        nodeDown: e.copies.every((c) => !nodeReady(s.heartbeats.get(c.desired.spec.node))),
      };
    })
    .sort(byPosition);
}

/** Step order: by index (spread, pack, hosts), then node (global replicas are node by node), then id. */
function byPosition(a: ReplicaGroup, b: ReplicaGroup): number {
  const ia = a.index ?? Number.MAX_SAFE_INTEGER;
  const ib = b.index ?? Number.MAX_SAFE_INTEGER;
  return ia - ib || cmp(a.copies[0]?.value.spec.node ?? '', b.copies[0]?.value.spec.node ?? '') || cmp(a.id, b.id);
}

// ---------------------------------------------------------------- per-service decision

interface ServiceCtx {
  /** The disruption ledgers of this pass (every rollout step records itself). */
  ledger: LedgerBook;
  now: number;
  iso: string;
  deployment: Versioned<Deployment>;
  name: string;
  service: string;
  generation: number;
  groups: ReplicaGroup[];
  plan?: Versioned<RolloutPlan>;
  snapshot: RolloutSnapshot;
  /** The service's update block, resolved (src/api/update.ts). */
  controls: UpdateControls;
  /** The last revision that restarted the service (jaco rollout restart), or 0. */
  restartRevision: number;
  /** The same for every service, by `<deployment>/<service>` (a dependency restarted with it). */
  restarts: ReadonlyMap<string, number>;
  /** spec.update.atomic: another service's rollout to this generation failed; this one goes back too. */
  unitFailed?: UnitFailure;
}

/** The service whose failed (or aborted) rollout sends an atomic deployment back, and why. */
export interface UnitFailure {
  service: string;
  reason: FailureReason;
}

/** What one pass does to one service: the plan after it, and the act that gets it there. */
class ServicePass {
  plan?: RolloutPlanSpec;
  readonly ops: Op[] = [];
  readonly audit: AuditRecord[] = [];
  readonly metrics: MetricEvent[] = [];
  readonly notes: string[] = [];
  wakeAt?: number;
  /** Every replica runs the current generation's target and no rollout is pending or aborted. */
  settled = false;
  /** The canaries as this pass leaves them (status.rollout.services[s].canary). */
  canary?: ServiceRolloutStatus['canary'];

  constructor(readonly c: ServiceCtx) {
    this.plan = c.plan ? structuredClone(c.plan.value.spec) : undefined;
  }

  wake(t: number): void {
    this.wakeAt = Math.min(this.wakeAt ?? t, t);
  }

  record(type: AuditRecord['type'], payload: Record<string, unknown>): void {
    const p = this.plan!;
    this.audit.push({
      type,
      time: this.c.now,
      deployment: this.c.name,
      payload: { deployment: this.c.name, service: this.c.service, from_revision: p.fromRevision, to_revision: p.toRevision, ...payload },
    });
  }
}

/**
 * The previous revision's template of a service, for reverts: its revision record, else a replica
 * still at it. Reverting a restart (same hash both ways) goes back to the exact revision, so the
 * restarted containers are replaced again.
 */
function fromTemplate(c: ServiceCtx, plan: RolloutPlanSpec): Target | undefined {
  const exact = plan.fromHash === plan.toHash ? { exactRevision: true } : {};
  const rev = c.snapshot.revisions.get(keys.revision(c.name, plan.fromRevision))?.spec.template.services[c.service];
  // A record of another spec under that number is not the revision the plan left: a deployment
  // deleted and re-created numbers its revisions afresh (the simulation, seed 11639).
  const recorded = rev && templateOf(plan.fromRevision, rev);
  if (recorded && recorded.specHash === plan.fromHash) return { ...recorded, ...exact };
  for (const g of c.groups)
    for (const d of g.copies)
      if (d.value.spec.specHash === plan.fromHash) return { revision: exact.exactRevision ? plan.fromRevision : d.value.spec.revision, specHash: d.value.spec.specHash, template: d.value.spec.template, ...exact };
  return undefined;
}

function revisionSpec(c: ServiceCtx) {
  return (n: number) => c.snapshot.revisions.get(keys.revision(c.name, n));
}

const live = (p: RolloutPlanSpec | undefined): p is RolloutPlanSpec => p?.state === 'in_progress' || p?.state === 'paused';

function decideService(c: ServiceCtx): ServicePass {
  const pass = new ServicePass(c);
  // An operator's request (jaco rollout pause|resume|abort) is carried out first, and cleared.
  if (pass.plan?.request) takeRequest(pass);
  const prev = pass.plan;
  // An aborted rollout to this generation is not tried again until the next apply: only revert.
  if (prev?.state === 'aborted' && prev.toRevision === c.generation) {
    const from = fromTemplate(c, prev);
    if (!from) pass.notes.push(`cannot revert: revision ${prev.fromRevision} is gone and no replica runs it`);
    else runSteps(pass, from, 'revert');
    return pass;
  }
  const serving = servingTemplate(c.deployment.value, c.service, c.plan?.value, revisionSpec(c))!;
  // A restart applies to the current revision's rollout, never to one serving an aborted rollout's fromRevision.
  const target: Target = serving.revision === c.generation ? { ...serving, restartRevision: c.restartRevision } : serving;
  const stale = c.groups.filter((g) => steppable(g, target));
  if (c.unitFailed && target.revision === c.generation) {
    // The unit failed: a rollout toward this generation — under way, paused or even completed —
    // goes back; one not started yet is recorded as aborted before its first step.
    const toGeneration = prev && prev.toRevision === c.generation && prev.state !== 'aborted';
    if (toGeneration || (stale.length && !live(prev))) {
      if (!toGeneration) createPlan(pass, target, stale);
      abort(pass, 'atomic_rollback', undefined, { failed_service: c.unitFailed.service, failed_reason: c.unitFailed.reason });
      return pass;
    }
  }
  if (live(prev) && prev.toHash === target.specHash && prev.toRevision <= c.generation) {
    // A new apply that did not change this service's container keeps its rollout going.
    prev.toRevision = target.revision;
    runSteps(pass, target, 'forward');
    return pass;
  }
  if (!stale.length && !live(prev)) {
    pass.settled = true;
    return pass;
  }
  startPlan(pass, target, stale);
  return pass;
}

/**
 * The first restart: true dependency whose replicas are not all ready at the spec hash the target
 * was applied with (dependsOn.X.specHash) and past the dependency's own last restart (jaco rollout
 * restart restarts it with its dependents), or undefined. A job dependency runs to completion and
 * is never "ready": it holds nothing.
 */
export function dependencyNotRecreated(c: Pick<ServiceCtx, 'snapshot' | 'name' | 'now' | 'deployment' | 'restarts'>, target: ServingTemplate): string | undefined {
  for (const [dep, d] of Object.entries(target.template.dependsOn ?? {})) {
    if (!d.restart || !d.specHash) continue;
    const spec = c.deployment.value.spec.services[dep];
    if (!spec || isJob(spec)) continue;
    const since = c.restarts.get(`${c.name}/${dep}`) ?? 0;
    const recreated = (g: ReplicaGroup) => g.copies.some((cp, i) => cp.value.spec.revision >= since && (readyAt(cp.value, g.observed[i], d.specHash!, c.now) ?? Infinity) <= c.now);
    if (!replicaGroups(c.snapshot, c.name, dep, c.now).every((g) => g.suspended || recreated(g))) return dep;
  }
  return undefined;
}

/** pause: no new step starts (steps in flight finish); resume: steps start again; abort: revert now. */
function takeRequest(pass: ServicePass): void {
  const { c } = pass;
  const plan = pass.plan!;
  const { action } = plan.request!;
  delete plan.request;
  if (!REQUEST_APPLIES_TO[action].includes(plan.state)) {
    pass.notes.push(`ignored ${action}: the rollout is ${plan.state}`);
  } else if (action === 'pause') {
    plan.state = 'paused';
    plan.pausedAt = c.iso;
    pass.record('rollout_paused', { reason: 'operator' satisfies PauseReason, step: plan.currentStep, total_steps: plan.totalSteps });
  } else if (action === 'promote') {
    if (plan.canary && !plan.canary.promotedAt) promote(pass, 'operator');
    else pass.notes.push(`ignored promote: ${plan.canary ? 'the canaries are already promoted' : 'the rollout has no canary'}`);
  } else if (action === 'resume') {
    plan.state = 'in_progress';
    delete plan.pausedAt;
    delete plan.failureReason;
    plan.resumedAt = c.iso;
    pass.record('rollout_resumed', { step: plan.currentStep, total_steps: plan.totalSteps });
  } else abort(pass, 'operator_abort');
}

/** Creates a plan toward `target` (superseding one in progress or paused) and takes its first steps. */
function startPlan(pass: ServicePass, target: ServingTemplate, stale: ReplicaGroup[]): void {
  createPlan(pass, target, stale);
  runSteps(pass, target, 'forward');
}

/** A new plan toward `target`, superseding one in progress or paused (audited as started). */
function createPlan(pass: ServicePass, target: ServingTemplate, stale: ReplicaGroup[]): void {
  const { c } = pass;
  const prev = pass.plan;
  const superseding = live(prev);
  // Until a rollout completes, the revision that last served everywhere stays the one to go back to.
  const keepFrom = prev && prev.state !== 'completed' && prev.toRevision <= c.generation;
  const from = keepFrom ? { revision: prev.fromRevision, specHash: prev.fromHash } : commonRevision(stale);
  if (superseding) {
    pass.metrics.push({ metric: 'rollout', result: 'superseded' });
    for (const _s of activeSteps(prev)) pass.metrics.push({ metric: 'step', result: 'superseded' });
  }
  pass.plan = {
    deployment: c.name,
    service: c.service,
    fromRevision: from.revision,
    toRevision: target.revision,
    fromHash: from.specHash,
    toHash: target.specHash,
    totalSteps: stale.length,
    currentStep: 0,
    state: 'in_progress',
    startedAt: c.iso,
    steps: [],
    incarnation: c.deployment.createRevision,
    // A canary is tried beside old replicas: with none to step (a service re-created mid-rollout, found
    // by the canary simulation, seed 490) there is nothing to compare it with, nor to go back to.
    ...(c.controls.canary > 0 && stale.length ? { canary: { replicas: c.controls.canary } } : {}),
  };
  const reason: StartReason = superseding ? 'superseded' : 'new_revision';
  pass.record('rollout_started', {
    reason,
    total_steps: stale.length,
    ...(superseding ? { superseded_revision: prev.toRevision } : {}),
    ...(pass.plan.canary ? { canary: pass.plan.canary.replicas } : {}),
  });
}

/** The (revision, hash) most stale replicas run; ties to the lower revision. */
function commonRevision(stale: ReplicaGroup[]): { revision: number; specHash: string } {
  const counts = new Map<string, { revision: number; specHash: string; n: number }>();
  for (const g of stale)
    for (const d of g.copies) {
      const k = `${d.value.spec.revision}/${d.value.spec.specHash}`;
      const e = counts.get(k) ?? { revision: d.value.spec.revision, specHash: d.value.spec.specHash, n: 0 };
      e.n++;
      counts.set(k, e);
    }
  const best = [...counts.values()].sort((a, b) => b.n - a.n || a.revision - b.revision || cmp(a.specHash, b.specHash))[0];
  return best ?? { revision: 0, specHash: '' };
}

const activeSteps = (p: RolloutPlanSpec): RolloutStep[] => p.steps.filter((s) => !s.finishedAt);

function finishStep(pass: ServicePass, step: RolloutStep, result: StepResult): void {
  step.finishedAt = pass.c.iso;
  step.result = result;
  const seconds = (pass.c.now - Date.parse(step.startedAt)) / 1000;
  pass.metrics.push({ metric: 'step', result, ...(result === 'done' ? { seconds } : {}) });
}

/** Which failure a step that did not become ready shows (the reason codes of seed 001). */
function failureOf(c: ServiceCtx, g: ReplicaGroup, hash: string, toRevision: number): FailureReason | undefined {
  const atTarget = g.copies.map((d, i) => ({ d: d.value, o: g.observed[i]?.status })).filter((x) => x.d.spec.specHash === hash);
  // Exhaustion counts only for this generation: older flags are cleared by the scheduler on apply.
  const exhausted = (node: string) => {
    const st = c.snapshot.commands.get(keys.command(node, g.id))?.value.status;
    return !!st?.exhausted && st.generation >= toRevision;
  };
  if (atTarget.some((x) => exhausted(x.d.spec.node))) return 'restart_exhausted';
  const pull = atTarget.find((x) => isPullFailure(x.o?.code))?.o?.code;
  if (isPullFailure(pull)) return pull;
  if (atTarget.some((x) => x.o?.specHash === hash && (x.o.state === 'degraded' || x.o.health === 'unhealthy'))) return 'health_check_failed';
  return undefined;
}

/**
 * Forward steps in flight: finished when their replica is ready (and stayed ready for
 * update.monitor), failed at the step timeout, on restart_exhausted, or when the replica stops
 * being ready during the monitor. Returns the steps still in flight and the failures of this pass.
 */
function watchForward(pass: ServicePass, target: ServingTemplate): { inFlight: RolloutStep[]; failed: { step: RolloutStep; reason: FailureReason }[] } {
  const { c } = pass;
  const plan = pass.plan!;
  const ctl = c.controls;
  const inFlight: RolloutStep[] = [];
  const failed: { step: RolloutStep; reason: FailureReason }[] = [];
  for (const step of activeSteps(plan)) {
    const g = c.groups.find((x) => x.id === step.replica);
    if (!g) {
      pass.notes.push(`replica ${step.replica} of a step is gone; next step`);
      finishStep(pass, step, 'done');
      continue;
    }
    const ready = groupReady(g, target.specHash, c.now);
    if (ready.ready) {
      if (ctl.monitorMs > 0) {
        step.readyAt ??= c.iso;
        const until = Date.parse(step.readyAt) + ctl.monitorMs;
        if (c.now < until) {
          pass.wake(until);
          pass.notes.push(`monitoring ${step.replica} at revision ${plan.toRevision} until ${new Date(until).toISOString()}`);
          inFlight.push(step);
          continue;
        }
      }
      finishStep(pass, step, 'done');
      continue;
    }
    const failure = failureOf(c, g, target.specHash, plan.toRevision);
    if (step.readyAt) {
      failed.push({ step, reason: failure ?? 'monitor_failed' });
      continue;
    }
    const deadline = stepDeadline(step, ctl.stepTimeoutMs);
    if (c.now < deadline && failure !== 'restart_exhausted') {
      pass.wake(deadline);
      if (ready.at !== undefined) pass.wake(ready.at);
      pass.notes.push(`waiting for ${step.replica} to be ready at revision ${plan.toRevision}`);
      inFlight.push(step);
      continue;
    }
    failed.push({ step, reason: failure ?? 'step_timeout' });
  }
  return { inFlight, failed };
}

/** When a step times out: the step timeout after its start, and after the old container's leaving for a stop-first step. */
const stepDeadline = (step: RolloutStep, stepTimeoutMs: number) => Date.parse(step.startedAt) + (step.leavingMs ?? 0) + stepTimeoutMs;

/** Revert steps in flight: done when back and ready, or given up at the step timeout (never held for ever). */
function watchRevert(pass: ServicePass, target: ServingTemplate): RolloutStep[] {
  const { c } = pass;
  const inFlight: RolloutStep[] = [];
  for (const step of activeSteps(pass.plan!)) {
    const g = c.groups.find((x) => x.id === step.replica);
    const ready = g ? groupReady(g, target.specHash, c.now) : { ready: true };
    const deadline = stepDeadline(step, c.controls.stepTimeoutMs);
    if (ready.ready) finishStep(pass, step, 'reverted');
    else if (c.now < deadline) {
      pass.wake(deadline);
      if (ready.at !== undefined) pass.wake(ready.at);
      pass.notes.push(`waiting for ${step.replica} to be ready back at revision ${target.revision}`);
      inFlight.push(step);
    } else {
      // A revert that does not come up is not retried forever: the next one may go when the budget allows.
      pass.notes.push(`revert of ${step.replica} did not become ready within the step timeout`);
      finishStep(pass, step, 'reverted');
    }
  }
  return inFlight;
}

/** When the rollout last made progress: its start, its last resume, or its last finished step. */
function lastProgress(plan: RolloutPlanSpec): number {
  let t = Date.parse(plan.resumedAt ?? plan.startedAt);
  if (plan.canary?.promotedAt) t = Math.max(t, Date.parse(plan.canary.promotedAt));
  for (const s of plan.steps) if (s.result === 'done' && s.finishedAt) t = Math.max(t, Date.parse(s.finishedAt));
  return Math.max(t, Date.parse(plan.startedAt));
}

/**
 * Failures of this pass, against update.failureAction and maxFailureRatio: a tolerated failure
 * leaves its replica at the new revision (the scheduler's restarts own it) and the rollout goes on;
 * otherwise rollback aborts and reverts, pause stops new steps until the operator acts.
 */
function onFailures(pass: ServicePass, failed: { step: RolloutStep; reason: FailureReason }[]): void {
  const { c } = pass;
  const plan = pass.plan!;
  const ctl = c.controls;
  for (const { step } of failed) finishStep(pass, step, 'failed');
  const failures = plan.steps.filter((s) => s.result === 'failed').length;
  const tolerated = ctl.failureAction === 'continue' || failures <= ctl.maxFailureRatio * Math.max(plan.totalSteps, 1);
  if (tolerated || plan.state !== 'in_progress') {
    for (const { step, reason } of failed) {
      pass.notes.push(`step of ${step.replica} failed (${reason}); ${plan.state === 'in_progress' ? 'tolerated, going on' : `the rollout is ${plan.state}`}`);
      pass.record('rollout_step_failed', { replica: step.replica, node: step.node, step: plan.currentStep, total_steps: plan.totalSteps, reason, failed_steps: failures });
    }
    return;
  }
  const first = failed[0]!;
  if (ctl.failureAction === 'pause') pause(pass, first.reason, first.step);
  else abort(pass, first.reason, first.step);
}

function pause(pass: ServicePass, reason: FailureReason, step?: RolloutStep): void {
  const plan = pass.plan!;
  plan.state = 'paused';
  plan.pausedAt = pass.c.iso;
  plan.failureReason = reason;
  pass.record('rollout_paused', { reason, step: plan.currentStep, total_steps: plan.totalSteps, ...(step ? { replica: step.replica, node: step.node } : {}) });
}

/**
 * The step machine, forward (toward the plan's target) or revert (back to fromRevision after an
 * abort): watch the steps in flight, apply the failure policy and the progress deadline, then start
 * as many steps as parallelism, the disruption budget, surge and delay allow — or complete.
 */
function runSteps(pass: ServicePass, target: ServingTemplate, direction: StepDirection): void {
  const { c } = pass;
  const plan = pass.plan!;
  const ctl = c.controls;
  let inFlight: RolloutStep[];
  if (direction === 'forward') {
    const w = watchForward(pass, target);
    inFlight = w.inFlight;
    if (w.failed.length) onFailures(pass, w.failed);
    if (plan.state === 'aborted') return;
    // Canaries waiting for the operator's promote are not a rollout that stopped making progress.
    const awaitingPromote = !!plan.canary?.readySince && !plan.canary.promotedAt;
    if (plan.state === 'in_progress' && ctl.progressDeadlineMs !== undefined && !awaitingPromote) {
      const due = lastProgress(plan) + ctl.progressDeadlineMs;
      if (c.now >= due) {
        if (ctl.failureAction === 'rollback') return abort(pass, 'progress_deadline');
        // continue cannot go on past a deadline: it pauses for the operator, as pause does.
        pause(pass, 'progress_deadline');
      } else pass.wake(due);
    }
  } else inFlight = watchRevert(pass, target);

  let stale = c.groups.filter((g) => steppable(g, target));
  let canaryPhase = false;
  if (direction === 'forward' && plan.canary) {
    canaryPhase = canaries(pass, target, inFlight);
    // Before promotion only the canaries move: stale ones (of a superseded rollout) step to the target.
    if (canaryPhase) stale = c.groups.filter((g) => g.canary && !g.suspended && groupStale(g, target));
  }
  if (!stale.length) {
    if (canaryPhase) {
      updateTotals(pass, target, inFlight);
      return;
    }
    if (direction === 'forward') {
      updateTotals(pass, target, inFlight);
      if (!inFlight.length && plan.state === 'in_progress') complete(pass, target);
    }
    return;
  }
  if (direction === 'forward' && plan.state === 'paused') {
    pass.notes.push(plan.failureReason ? `paused after ${plan.failureReason}: jaco rollout resume|abort, or apply` : 'paused: jaco rollout resume to go on');
    updateTotals(pass, target, inFlight);
    return;
  }
  // A service that restarts with a dependency (dependsOn restart: true) restarts after it: no
  // step starts until every replica of the dependency is ready at the spec this one was applied with.
  const dependency = direction === 'forward' ? dependencyNotRecreated(c, target) : undefined;
  if (dependency) {
    pass.notes.push(`waits for ${dependency} to be recreated first (dependsOn ${dependency} restart: true)`);
    updateTotals(pass, target, inFlight);
    return;
  }
  // Forward steps go at update's pace, reverts at update.rollback's.
  const pace: Pace = direction === 'forward' ? ctl : { ...ctl.revert, maxSurge: ctl.maxSurge };
  // update.delay: the next step waits this long after the last one finished.
  if (pace.delayMs > 0) {
    const last = Math.max(-Infinity, ...plan.steps.filter((s) => s.finishedAt).map((s) => Date.parse(s.finishedAt!)));
    if (c.now < last + pace.delayMs) {
      pass.wake(last + pace.delayMs);
      pass.notes.push(`delay: the next step starts at ${new Date(last + pace.delayMs).toISOString()}`);
      if (direction === 'forward') updateTotals(pass, target, inFlight);
      return;
    }
  }
  const picks = fitInOneAct(pass, pickNext(pass, stale, pace, inFlight), target);
  const started = picks.map(({ group, stopFirst }) => {
    const step = startStep(pass, group, target, stopFirst);
    if (canaryPhase) step.canary = true;
    else if (direction === 'forward') plan.currentStep++;
    // Each forward step its own number, even when several start in one pass.
    return { step, n: plan.currentStep };
  });
  // One ledger write per act, however many steps it starts: the act is one transaction, and the
  // ledger's compare-and-swap is what keeps a concurrent mover from spending the same budget.
  if (picks.length) pass.ops.push(...c.ledger.record(c.name, c.service, { replica: picks.at(-1)!.group.id, by: 'rollout', kind: 'rollout_step', now: c.now }));
  if (direction === 'forward') updateTotals(pass, target, [...inFlight, ...started.map((s) => s.step)]);
  for (const { step, n } of started)
    pass.record('rollout_step', { replica: step.replica, node: step.node, step: n, total_steps: plan.totalSteps, revision: target.revision, reason: direction, ...(step.canary ? { canary: true } : {}) });
}

/**
 * The canary phase of a forward rollout (update.canary). Each canary the scheduler placed at the
 * target gets a step of its own when first seen, so it is watched like any step (step timeout,
 * failures, monitor) and a failing canary fails the rollout under failureAction. Once every canary
 * is ready — at least plan.canary.replicas of them, none of their steps in flight — the rollout
 * waits for `jaco rollout promote`, or promotes itself after update.autoPromote. Returns whether
 * the rollout is still in its canary phase (only canaries step).
 */
function canaries(pass: ServicePass, target: Target, inFlight: RolloutStep[]): boolean {
  const { c } = pass;
  const plan = pass.plan!;
  const canary = plan.canary!;
  const groups = c.groups.filter((g) => g.canary && !g.suspended);
  const ready = groups.filter((g) => !groupStale(g, target) && groupReady(g, target.specHash, c.now).ready).length;
  pass.canary = { replicas: canary.replicas, ready, promoted: !!canary.promotedAt };
  if (canary.promotedAt) return false;
  if (plan.state !== 'in_progress') return true;
  for (const g of groups) {
    if (groupStale(g, target) || plan.steps.some((s) => s.replica === g.id)) continue;
    const step: RolloutStep = { replica: g.id, node: g.copies[0]!.value.spec.node, startedAt: c.iso, canary: true };
    plan.steps.push(step);
    inFlight.push(step);
    pass.wake(c.now + c.controls.stepTimeoutMs);
  }
  const watching = inFlight.some((s) => s.canary);
  if (ready < canary.replicas || ready < groups.length || watching) {
    delete canary.readySince;
    pass.notes.push(`canary: ${ready} of ${canary.replicas} ready at revision ${plan.toRevision}`);
    return true;
  }
  canary.readySince ??= c.iso;
  const due = c.controls.autoPromoteMs === undefined ? undefined : Date.parse(canary.readySince) + c.controls.autoPromoteMs;
  if (due !== undefined && c.now >= due) {
    promote(pass, 'auto');
    return false;
  }
  if (due !== undefined) pass.wake(due);
  pass.notes.push(
    `canary: ${ready} of ${canary.replicas} ready at revision ${plan.toRevision}; ` +
      (due !== undefined ? `promoting at ${new Date(due).toISOString()} (update.autoPromote)` : `waiting for jaco rollout promote ${c.name}/${c.service}`),
  );
  return true;
}

/** The canaries are promoted: the rolling update of the other replicas goes on (canaries stay until it ends). */
function promote(pass: ServicePass, by: 'operator' | 'auto'): void {
  const canary = pass.plan!.canary!;
  canary.promotedAt = pass.c.iso;
  canary.promotedBy = by;
  delete canary.readySince;
  if (pass.canary) pass.canary.promoted = true;
  pass.record('rollout_promoted', { by, canaries: canary.replicas });
}

/** Writes of an act besides its steps': the plan, the ledger and the leader's fence. */
const ACT_BASE_OPS = 4;

/**
 * The picks whose writes fit one transaction with the plan, the ledger and every audit record
 * (etcd's --max-txn-ops): an act over the limit could never land, so a large parallelism starts
 * its steps over consecutive passes instead (each landing act wakes the next).
 */
function fitInOneAct(pass: ServicePass, picks: { group: ReplicaGroup; stopFirst: boolean }[], target: ServingTemplate): { group: ReplicaGroup; stopFirst: boolean }[] {
  let used = pass.ops.length + pass.audit.length + ACT_BASE_OPS;
  const out: typeof picks = [];
  for (const p of picks) {
    const cost = p.group.copies.filter((c) => copyStale(c.value, target)).length + 1; // its copies and its audit record
    if (used + cost > MAX_TXN_OPS) {
      pass.notes.push(`${picks.length - out.length} more step(s) start on the next pass: one act holds at most ${MAX_TXN_OPS} writes`);
      break;
    }
    used += cost;
    out.push(p);
  }
  return out;
}

/** totalSteps = steps taken + stale replicas still to go (follows scaling during the rollout). */
function updateTotals(pass: ServicePass, target: ServingTemplate, inFlight: RolloutStep[]): void {
  const plan = pass.plan!;
  const busy = new Set(inFlight.map((s) => s.replica));
  const remaining = pass.c.groups.filter((g) => !busy.has(g.id) && steppable(g, target)).length;
  plan.totalSteps = plan.currentStep + remaining;
}

/** How fast steps go: forward at update's pace, reverts at update.rollback's. */
type Pace = Pick<UpdateControls, 'parallelism' | 'delayMs' | 'order' | 'maxSurge'>;

/**
 * The replicas to step now, at most `slots`. Replicas that are not ready go first (stepping them
 * cannot cost availability), then by position. The disruption budget (update.maxUnavailable, shared
 * with moves) bounds every step: a running replica is stepped only while the replicas disrupted —
 * not running, moving, mid step, restarting, including the steps picked in this pass — leave room;
 * a replica that is not running may always be stepped (it cannot take anything further down).
 * maxSurge bounds the start-first steps in flight (extra containers): beyond it a step goes
 * stop-first.
 */
function pickNext(pass: ServicePass, stale: ReplicaGroup[], ctl: Pace, inFlight: RolloutStep[]): { group: ReplicaGroup; stopFirst: boolean }[] {
  const { c } = pass;
  const slots = ctl.parallelism - inFlight.length;
  const readyNow = (g: ReplicaGroup) => g.copies.every((d, i) => (readyAt(d.value, g.observed[i], d.value.spec.specHash, c.now) ?? Infinity) <= c.now);
  const candidates = stale
    .filter((g) => {
      if (g.moving) pass.notes.push(`${g.id} has a move in flight; stepping it after the move`);
      else if (g.nodeDown) pass.notes.push(`${g.id} is on a NotReady node; left to the scheduler`);
      return !g.moving && !g.nodeDown;
    })
    .sort((a, b) => Number(readyNow(a)) - Number(readyNow(b)) || byPosition(a, b));
  if (slots <= 0) {
    if (candidates.length) pass.notes.push(`waiting: ${inFlight.length} step(s) in flight, parallelism ${ctl.parallelism}`);
    return [];
  }
  // The shared disruption budget: moves, steps and pending restarts of the service all count; so
  // does a replica whose node is NotReady even if its last observation says running.
  const budget = serviceBudget(c);
  for (const g of c.groups) if (!g.suspended && !groupRunning(g) && !budget.disrupted.has(g.id)) budget.disrupted.set(g.id, 'down');
  // Surge in flight: steps written start-first, by the agent's own rule (startsFirst), counted
  // until they finish, whether or not the agent has reported the extra container yet: the bound
  // must hold before it does.
  let surge = inFlight.filter((s) => c.groups.find((x) => x.id === s.replica)?.copies.some((d) => startsFirst(d.value.spec.template))).length;
  // Whether a step of a running replica at this pace would run its new container beside the old one.
  const template = c.deployment.value.spec.services[c.service];
  const paceStartsFirst = startsFirst({ ...(template ?? { image: '' }), update: { ...template?.update, order: ctl.order } });
  const picks: { group: ReplicaGroup; stopFirst: boolean }[] = [];
  let held: string | undefined;
  for (const g of candidates) {
    if (picks.length >= slots) break;
    const running = groupRunning(g);
    if (running) {
      const verdict = admits(budget, g.id);
      if (!verdict.ok) {
        held ??= verdict.detail;
        continue;
      }
    }
    // A replica that is not running has no old container to keep: its order costs nothing.
    const startFirst = running && paceStartsFirst;
    // Stop-first when this pace asks for it (a revert's own order), or when the surge is spent.
    const stopFirst = running && (ctl.order === 'stop-first' || (startFirst && surge >= ctl.maxSurge));
    if (startFirst && !stopFirst) surge++;
    budget.disrupted.set(g.id, 'stepping');
    picks.push({ group: g, stopFirst });
  }
  if (!picks.length && candidates.length) pass.notes.push(`waiting: ${held ?? 'no room'}`);
  else if (picks.length < Math.min(slots, candidates.length) && held) pass.notes.push(`${picks.length} step(s) started; more wait: ${held}`);
  return picks;
}

/** The service's disruption budget as the snapshot shows it. */
function serviceBudget(c: ServiceCtx): Budget {
  const template = c.deployment.value.spec.services[c.service];
  return budgetOf(c.snapshot.replicas.service(c.name, c.service), (id) => c.snapshot.replicas.byId.get(id)?.copies ?? [], template, { commands: c.snapshot.commands });
}

/** Writes the target into the replica's desired copies and returns the step it adds to the plan; `stopFirst` when the surge is spent (the agent then stops the old container first). */
function startStep(pass: ServicePass, g: ReplicaGroup, target: ServingTemplate, stopFirst: boolean): RolloutStep {
  const { c } = pass;
  const template = stopFirst ? { ...target.template, update: { ...target.template.update, order: 'stop-first' as const } } : target.template;
  for (const d of g.copies) {
    if (!copyStale(d.value, target)) continue;
    const next: ReplicaDesired = { ...d.value, spec: { ...d.value.spec, revision: target.revision, specHash: target.specHash, template } };
    pass.ops.push({ op: 'update', key: d.key, value: next, modRevision: d.modRevision });
  }
  // The agent replaces a running replica stop-first whenever the template it gets does not start
  // first (startsFirst: a cluster-network replica, a stateful one, a port), not only when the
  // surge is spent: each such step waits for the old container to leave before its clock runs.
  const stopsFirst = stopFirst || (groupRunning(g) && !startsFirst(template));
  const leaving = stopsFirst ? Math.max(0, ...g.copies.map((d) => leavingMs(d.value.spec.template))) : 0;
  const step: RolloutStep = { replica: g.id, node: g.copies[0]!.value.spec.node, startedAt: c.iso, ...(leaving ? { leavingMs: leaving } : {}) };
  pass.plan!.steps.push(step);
  pass.wake(stepDeadline(step, c.controls.stepTimeoutMs));
  return step;
}

/** An agent reports an old container of the replica, or one not yet at the target spec. */
const reportsOld = (g: ReplicaGroup, hash: string) => g.observed.some((o) => o && (o.status.specHash !== hash || o.status.replacing));

/** Replicas an agent still reports with an old container, or not yet at the target spec. */
function oldContainers(c: ServiceCtx, hash: string): string[] {
  return c.groups.filter((g) => !g.suspended && !g.nodeDown && reportsOld(g, hash)).map((g) => g.id);
}

function complete(pass: ServicePass, target: ServingTemplate): void {
  const plan = pass.plan!;
  // Canaries of an earlier rollout at another spec are not stepped (the scheduler scales them
  // away), but until they are gone their agents may start their containers: not complete yet
  // (canary simulation, seed 3019).
  const leftover = pass.c.groups.filter((g) => g.canary && !g.suspended && groupStale(g, target)).map((g) => g.id);
  if (leftover.length) {
    pass.notes.push(`every replica is at revision ${plan.toRevision}; waiting for the canaries ${leftover.join(', ')} of an earlier rollout to be scaled away`);
    return;
  }
  // Completed on observed state: no agent still runs a container of an old revision.
  const old = oldContainers(pass.c, target.specHash);
  if (old.length) {
    pass.notes.push(`every replica is at revision ${plan.toRevision}; waiting for the old container(s) of ${old.join(', ')} to stop`);
    return;
  }
  // The snapshot it judged from is compared (evidence.ts): no replica placed unseen, no node whose old container it excused as NotReady alive after all.
  const excused = pass.c.groups.filter((g) => !g.suspended && g.nodeDown && reportsOld(g, target.specHash)).flatMap((g) => g.copies.map((d) => d.value.spec.node));
  pass.ops.push(...completionGuard(pass.c.snapshot, pass.c.name, pass.c.service, excused));
  plan.state = 'completed';
  plan.finishedAt = pass.c.iso;
  plan.totalSteps = plan.currentStep;
  pass.settled = true;
  pass.metrics.push({ metric: 'rollout', result: 'completed' });
  pass.record('rollout_completed', { total_steps: plan.totalSteps, duration_seconds: (pass.c.now - Date.parse(plan.startedAt)) / 1000 });
}

/**
 * Aborts (a failed step, the progress deadline, the operator) and starts reverting in the same act:
 * steps still in flight end as failed, and every replica already moved goes back. No half-rolled
 * state stays.
 */
function abort(pass: ServicePass, reason: FailureReason, step?: RolloutStep, extra: Record<string, unknown> = {}): void {
  const { c } = pass;
  const plan = pass.plan!;
  for (const s of activeSteps(plan)) finishStep(pass, s, 'failed');
  plan.state = 'aborted';
  plan.failureReason = reason;
  plan.finishedAt = c.iso;
  delete plan.pausedAt;
  pass.metrics.push({ metric: 'rollout', result: 'aborted' });
  pass.record('rollout_aborted', { step: plan.currentStep, total_steps: plan.totalSteps, reason, ...(step ? { replica: step.replica, node: step.node } : {}), ...extra });
  const from = fromTemplate(c, plan);
  if (from) runSteps(pass, from, 'revert');
  else pass.notes.push(`cannot revert: revision ${plan.fromRevision} is gone and no replica runs it`);
}

// ---------------------------------------------------------------- the whole pass

function serviceRolloutStatus(p: RolloutPlanSpec): ServiceRolloutStatus {
  return {
    state: p.state,
    fromRevision: p.fromRevision,
    toRevision: p.toRevision,
    currentStep: p.currentStep,
    totalSteps: p.totalSteps,
    ...(p.failureReason ? { failureReason: p.failureReason } : {}),
  };
}

function planObject(spec: RolloutPlanSpec): RolloutPlan {
  return { apiVersion: API_VERSION, kind: 'RolloutPlan', metadata: { name: `${spec.deployment}-${spec.service}` }, spec };
}


/** By `<deployment>/<service>`: the newest stored revision, up to the deployment's current one, that restarted the service. */
function restartRevisions(s: RolloutSnapshot): Map<string, number> {
  const out = new Map<string, number>();
  for (const r of s.revisions.values()) {
    const { deployment, revision, restarted } = r.spec;
    if (!restarted?.length || revision > (s.deployments.get(deployment)?.value.metadata.generation ?? 0)) continue;
    for (const svc of restarted) out.set(`${deployment}/${svc}`, Math.max(out.get(`${deployment}/${svc}`) ?? 0, revision));
  }
  return out;
}

export function decide(s: RolloutSnapshot, now: number, cfg: RolloutConfig): RolloutDecision {
  const iso = new Date(now).toISOString();
  const ledger = new LedgerBook(s.ledgers);
  const restarts = restartRevisions(s);
  const acts: RolloutAct[] = [];
  const notes: Note[] = [];
  let inProgress = 0;
  let wakeAt: number | undefined;

  for (const [name, dv] of [...s.deployments].sort(([a], [b]) => cmp(a, b))) {
    const generation = dv.value.metadata.generation ?? 1;
    const services: Record<string, ServiceRolloutStatus> = {};
    let settled = true;
    // spec.update.atomic: one service's failure (stored, or decided earlier in this pass) sends
    // every other service back; services decided before it follow on the next pass.
    const atomic = !!dv.value.spec.update?.atomic;
    const stored = atomic ? unitFailureOf([...s.plans.values()].filter((p) => p.value.spec.deployment === name && planOfIncarnation(dv, p.value)).map((p) => p.value.spec), generation) : undefined;
    let unitFailed: UnitFailure | undefined = stored && { service: stored.service, reason: stored.reason as FailureReason };
    for (const service of Object.keys(dv.value.spec.services).sort()) {
      // A job is never rolled: the scheduler runs it afresh at each changed spec (controllers/scheduler/job.ts).
      if (isJob(dv.value.spec.services[service]!)) continue;
      // A plan of the deployment's previous incarnation (deleted and re-created) is none; it is replaced or deleted below.
      const kept = s.plans.get(`${name}/${service}`);
      const plan = kept && planOfIncarnation(dv, kept.value) ? kept : undefined;
      const groups = replicaGroups(s, name, service, now);
      const ctx: ServiceCtx = {
        ledger,
        now,
        iso,
        deployment: dv,
        name,
        service,
        generation,
        groups,
        plan,
        snapshot: s,
        // The applied manifest's update block (the template's has defaults filled in; update.stepTimeout absent → the timings' default).
        controls: updateControls(dv.value.spec.services[service], groups.length, cfg),
        restartRevision: restarts.get(`${name}/${service}`) ?? 0,
        restarts,
        ...(unitFailed && unitFailed.service !== service ? { unitFailed } : {}),
      };
      const pass = decideService(ctx);
      if (atomic && !unitFailed && pass.plan?.state === 'aborted' && pass.plan.toRevision === generation) unitFailed = { service, reason: (pass.plan.failureReason as FailureReason | undefined) ?? 'operator_abort' };
      for (const note of pass.notes) notes.push({ deployment: name, service, note });
      if (pass.wakeAt !== undefined) wakeAt = Math.min(wakeAt ?? pass.wakeAt, pass.wakeAt);
      settled &&= pass.settled;
      if (pass.plan) {
        services[service] = { ...serviceRolloutStatus(pass.plan), ...(pass.canary && live(pass.plan) ? { canary: pass.canary } : {}) };
        if (pass.plan.state === 'in_progress') inProgress++;
      }
      const planChanged = pass.plan && canonicalJson(pass.plan) !== canonicalJson(kept?.value.spec);
      if (!pass.plan && kept && !plan) {
        acts.push({ label: `rollout ${name}/${service} (previous incarnation)`, ops: [{ op: 'delete', key: kept.key, modRevision: kept.modRevision }], audit: [], metrics: [] });
        continue;
      }
      if (!planChanged && !pass.ops.length) continue;
      const key = keys.rollout(name, service);
      const planOp: Op = kept ? { op: 'update', key, value: planObject(pass.plan!), modRevision: kept.modRevision } : { op: 'create', key, value: planObject(pass.plan!) };
      acts.push({ label: `rollout ${name}/${service}`, ops: [planOp, ...pass.ops], audit: pass.audit, metrics: pass.metrics });
    }
    const st = s.statuses.get(name);
    const prevApplied = st?.value.status?.rollout?.appliedRevision ?? 0;
    const appliedRevision = settled ? generation : prevApplied <= generation ? prevApplied : 0;
    const statusAct = rolloutStatusAct(name, st, { appliedRevision, services }, iso);
    if (statusAct) acts.push(statusAct);
  }

  // Plans (and status fields) of deployments and services that are gone.
  for (const [k, p] of [...s.plans].sort(([a], [b]) => cmp(a, b))) {
    const { deployment, service } = p.value.spec;
    if (s.deployments.get(deployment)?.value.spec.services[service]) continue;
    acts.push({ label: `rollout ${k} (deleted)`, ops: [{ op: 'delete', key: p.key, modRevision: p.modRevision }], audit: [], metrics: [] });
  }
  for (const [name, st] of [...s.statuses].sort(([a], [b]) => cmp(a, b))) {
    if (s.deployments.has(name) || !st.value.status?.rollout) continue;
    const { rollout: _r, ...rest } = st.value.status;
    const op: Op = Object.keys(rest).length
      ? { op: 'update', key: st.key, value: { ...st.value, status: rest }, modRevision: st.modRevision }
      : { op: 'delete', key: st.key, modRevision: st.modRevision };
    acts.push({ label: `rollout status ${name} (deleted)`, ops: [op], audit: [], metrics: [] });
  }
  return { acts, inProgress, wakeAt, notes };
}

/** deploymentstatus/<name>.status.rollout, read-modify-write preserving the scheduler's field. */
function rolloutStatusAct(
  name: string,
  cur: Versioned<DeploymentStatus> | undefined,
  want: { appliedRevision: number; services: Record<string, ServiceRolloutStatus> },
  iso: string,
): RolloutAct | undefined {
  const have = cur?.value.status?.rollout;
  if (have && canonicalJson({ a: have.appliedRevision, s: have.services }) === canonicalJson({ a: want.appliedRevision, s: want.services })) return undefined;
  const rollout = { ...want, updatedAt: iso };
  const key = keys.deploymentStatus(name);
  const op: Op = cur
    ? { op: 'update', key, value: { ...cur.value, status: { ...cur.value.status, rollout } }, modRevision: cur.modRevision }
    : { op: 'create', key, value: { apiVersion: API_VERSION, kind: 'DeploymentStatus', metadata: { name }, status: { rollout } } satisfies DeploymentStatus };
  return { label: `rollout status ${name}`, ops: [op], audit: [], metrics: [] };
}
