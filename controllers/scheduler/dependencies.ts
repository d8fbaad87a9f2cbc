// Dependencies (a service's dependsOn, compose's depends_on): no replica of a service is placed
// while a service it depends on does not have all its replicas started (service_started) or
// ready (service_healthy), or while a job it depends on has not succeeded at its current spec
// (service_completed_successfully). Replicas already running are left alone; the gate holds new ones.
import { minReadyAt, replicaReady, replicaRunning } from '../../src/api/readiness.js';
import { templateOf } from '../../src/api/serving.js';
import { placementMode } from '../../src/api/spec.js';
import { jobWaitReason, sameSpec } from './job.js';
import type { Deployment, DependencyCondition, ServiceSpec } from '../../src/api/types.js';
import type { SchedulerPass } from './pass.js';

/** Whether one dependency meets its condition now (and when it could by time alone, for a wake). */
function met(pass: SchedulerPass, deployment: string, d: Deployment, name: string, condition: DependencyCondition): boolean {
  const spec = d.spec.services[name];
  if (!spec) return true; // apply refuses an unknown dependency; a stale spec holds nothing
  if (condition === 'service_completed_successfully') return jobOf(pass, deployment, d, name)?.state === 'succeeded';
  const entries = pass.snap.replicas.service(deployment, name);
  const wanted = placementMode(spec) === 'global' ? Math.max(1, entries.length) : (spec.replicas ?? 1);
  if (entries.length < wanted) return false;
  return entries.every((e) =>
    e.copies.some((c) => {
      if (!pass.ready(c.desired.spec.node)) return false;
      if (condition === 'service_started') return replicaRunning(c.observed);
      if (replicaReady(c.desired, c.observed, pass.now)) return true;
      pass.wake(minReadyAt(c.desired, c.observed)); // ready by time alone (minReadyTime): come back then
      return false;
    }),
  );
}

/** A job's result at its current spec: decided earlier in this pass, else as last stored. */
function jobOf(pass: SchedulerPass, deployment: string, d: Deployment, name: string) {
  const r = pass.plan.status.get(deployment)?.[name]?.job ?? pass.snap.statuses.get(deployment)?.value.status?.scheduling?.services[name]?.job;
  const current = { specHash: templateOf(d.metadata.generation ?? 1, d.spec.services[name]!).specHash, incarnation: pass.snap.deployments.get(deployment)?.createRevision ?? 0 };
  return sameSpec(r, current) ? r : undefined;
}

/**
 * The dependencies of a service that do not meet their condition yet, by name; a job's with how
 * it stands ("migrate (failed: exit 3 after 3 attempts)").
 */
export function waitingFor(pass: SchedulerPass, deployment: string, d: Deployment, spec: ServiceSpec): string[] {
  return Object.entries(spec.dependsOn ?? {})
    .filter(([name, { condition }]) => !met(pass, deployment, d, name, condition))
    .map(([name, { condition }]) => (condition === 'service_completed_successfully' ? `${name} (${jobWaitReason(jobOf(pass, deployment, d, name))})` : name))
    .sort();
}
