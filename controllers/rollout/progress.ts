// How far a deployment's rollout has got, as `jaco rollout status` reports it: one line per
// service, and a phase — complete when the rollout controller has applied the current revision
// everywhere (status.rollout.appliedRevision) and every replica runs healthy at its desired spec;
// aborted when a rollout to the current revision was aborted. Pure: the CLI feeds it informers.
import { unschedulableReasonOf } from '../../src/api/reasons/scheduling.js';
import { replicaReady } from '../../src/api/readiness.js';
import { placementMode } from '../../src/api/spec.js';
import type { Deployment, DeploymentStatus, ReplicaDesired, ReplicaObserved, RolloutPlan, RolloutPlanSpec } from '../../src/api/types.js';
import { FAILURE_REASONS, type FailureReason } from '../../src/api/reasons/rollout.js';

export interface ProgressInput {
  deployment?: Deployment;
  status?: DeploymentStatus;
  /** The deployment's plans (rollouts/<name>/…). */
  plans: RolloutPlan[];
  /** The deployment's desired replicas with what their agents observe. */
  replicas: { desired: ReplicaDesired; observed?: ReplicaObserved }[];
  now: number;
}

/** paused: a rollout to the current revision paused after a failure (failureAction pause); paused by the operator is still progressing. */
export type RolloutPhase = 'progressing' | 'complete' | 'aborted' | 'paused' | 'missing';

export interface Progress {
  phase: RolloutPhase;
  revision: number;
  /** Per service, in name order: what it is doing now. */
  lines: { service: string; text: string }[];
  /** An atomic deployment (spec.update.atomic) that went back as one: the service that failed first, why, and where all go back to. */
  unit?: { service: string; reason: string; fromRevision: number };
}

function describeFailure(reason: string | undefined): string {
  return reason && Object.hasOwn(FAILURE_REASONS, reason) ? `${reason}: ${FAILURE_REASONS[reason as FailureReason]}` : (reason ?? 'unknown reason');
}

export function rolloutProgress(i: ProgressInput): Progress {
  const d = i.deployment;
  if (!d) return { phase: 'missing', revision: 0, lines: [] };
  const revision = d.metadata.generation ?? 1;
  const scheduling = i.status?.status?.scheduling;
  const schedulingCurrent = !!scheduling && scheduling.observedGeneration >= revision;
  let aborted = false;
  let pausedOnFailure = false;
  let settled = (i.status?.status?.rollout?.appliedRevision ?? 0) === revision;
  const lines: Progress['lines'] = [];
  for (const service of Object.keys(d.spec.services).sort()) {
    const plan = i.plans.find((p) => p.spec.service === service)?.spec;
    const all = i.replicas.filter((r) => r.desired.spec.service === service && !r.desired.spec.suspended);
    // Canaries (update.canary) are counted on their own line: "3 of 3 updated" means the replicas.
    const reps = all.filter((r) => !r.desired.spec.canary);
    const ids = new Set(reps.map((r) => r.desired.spec.replica));
    const ready = new Set(reps.filter((r) => replicaReady(r.desired, r.observed, i.now)).map((r) => r.desired.spec.replica));
    const sch = scheduling?.services[service];
    const spec = d.spec.services[service]!;
    const want = schedulingCurrent && sch ? sch.desired : placementMode(spec) === 'global' ? ids.size : (spec.replicas ?? 1);
    const parts: string[] = [];
    if (plan?.state === 'in_progress') {
      settled = false;
      const steps = plan.steps.filter((x) => !x.finishedAt);
      const active = steps.length ? ` (${steps.map((x) => `${x.replica} on ${x.node}`).join(', ')})` : ' (waiting for room in the disruption budget, or the update delay, before the next step)';
      const updated = new Set(reps.filter((r) => r.desired.spec.specHash === plan.toHash && replicaReady(r.desired, r.observed, i.now)).map((r) => r.desired.spec.replica));
      if (plan.canary && !plan.canary.promotedAt) {
        const canaries = all.filter((r) => r.desired.spec.canary && r.desired.spec.specHash === plan.toHash && replicaReady(r.desired, r.observed, i.now)).length;
        const next = plan.canary.readySince ? `waiting for jaco rollout promote ${d.metadata.name}/${service}${spec.update?.autoPromote ? ` (or update.autoPromote ${spec.update.autoPromote})` : ''}` : 'starting';
        parts.push(`canary of revision ${plan.toRevision}: ${canaries} of ${plan.canary.replicas} ready beside the ${want} replicas of revision ${plan.fromRevision}; ${next}`);
      } else parts.push(`rolling revision ${plan.fromRevision} → ${plan.toRevision}: step ${plan.currentStep} of ${plan.totalSteps}${active}, ${updated.size} of ${want} updated`);
    } else if (plan?.state === 'paused') {
      settled = false;
      const why = plan.failureReason ? `after ${describeFailure(plan.failureReason)}; jaco rollout resume|abort, or apply a fix` : 'by the operator; jaco rollout resume to go on';
      if (plan.failureReason && plan.toRevision === revision) pausedOnFailure = true;
      parts.push(`rollout to revision ${plan.toRevision} paused at step ${plan.currentStep} of ${plan.totalSteps} ${why}`);
    } else if (plan?.state === 'aborted' && plan.toRevision === revision) {
      aborted = true;
      const reverting = reps.filter((r) => r.desired.spec.specHash !== plan.fromHash).length;
      parts.push(
        `rollout to revision ${plan.toRevision} aborted at step ${plan.currentStep} of ${plan.totalSteps} (${describeFailure(plan.failureReason)}); ` +
          `revision ${plan.fromRevision} keeps serving${reverting ? `, ${reverting} replica(s) going back` : ''}`,
      );
    } else if (plan?.state === 'completed' && plan.toRevision === revision) parts.push(`rolled out revision ${plan.toRevision} in ${plan.totalSteps} step(s)`);
    if (plan?.state !== 'in_progress') parts.push(`${ready.size} of ${want} replicas ready`);
    if (sch?.unschedulable && schedulingCurrent) parts.push(`${sch.unschedulable.count} unschedulable (${unschedulableReasonOf(sch.unschedulable.reason)}): ${sch.unschedulable.message}`);
    if (ready.size < want || ready.size < ids.size) settled = false;
    lines.push({ service, text: parts.join('; ') });
  }
  const phase = aborted ? 'aborted' : pausedOnFailure ? 'paused' : settled ? 'complete' : 'progressing';
  const unit = d.spec.update?.atomic && aborted ? unitFailureOf(i.plans.map((p) => p.spec), revision) : undefined;
  return { phase, revision, lines, ...(unit ? { unit } : {}) };
}

/**
 * The service whose failure sends an atomic deployment (spec.update.atomic) back: among one
 * deployment's plans aborted on their way to `revision`, the first (by name) that failed by itself,
 * else the first that followed. The rollout controller and `jaco rollout status` both ask this.
 */
export function unitFailureOf(plans: readonly RolloutPlanSpec[], revision: number): { service: string; reason: string; fromRevision: number } | undefined {
  const aborted = plans
    .filter((p) => p.state === 'aborted' && p.toRevision === revision)
    .sort((a, b) => Number(a.failureReason === 'atomic_rollback') - Number(b.failureReason === 'atomic_rollback') || (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
  const first = aborted[0];
  return first && { service: first.service, reason: first.failureReason ?? 'operator_abort', fromRevision: first.fromRevision };
}
