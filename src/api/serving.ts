// Which revision a service's NEW replicas are created at: the rule the scheduler (which creates
// replicas) and the rollout controller (which moves existing replicas between revisions) share.
//
// Normally it is the deployment's current revision (metadata.generation). When the service's
// last rollout toward that revision was aborted, the previous revision keeps serving: new
// replicas are created at the rollout's fromRevision, until the next apply (a new generation)
// starts over. Services whose spec hash did not change keep their replicas' revision as is.
import { specHash, withDefaults } from './spec.js';
import type { Deployment, DeploymentRevision, RolloutPlan, ServiceSpec } from './types.js';

export interface ServingTemplate {
  revision: number;
  specHash: string;
  /** The service spec with defaults applied (what ReplicaDesired.spec.template carries). */
  template: ServiceSpec;
}

/**
 * The template new replicas of `service` get. `revisionSpec(n)` returns the stored spec of
 * revision n (revisions/<name>/<n>), or undefined when it is gone.
 */
/**
 * The plan of a service as it bears on the deployment's current incarnation: a plan made before
 * the deployment was deleted and re-created (its `incarnation` another create revision of the
 * deployment key) is none — the new incarnation's revision numbers may repeat the old ones, and an
 * old aborted plan would otherwise send the new replicas back to the old incarnation's spec
 * (breadth simulation, seed 26425).
 */
export function planOfIncarnation<P extends { spec: { incarnation?: number } }>(deployment: { createRevision: number }, plan: P | undefined): P | undefined {
  const made = plan?.spec.incarnation;
  return made === undefined || made === deployment.createRevision ? plan : undefined;
}

export function servingTemplate(
  deployment: Deployment,
  service: string,
  plan: RolloutPlan | undefined,
  revisionSpec: (n: number) => DeploymentRevision | undefined,
): ServingTemplate | undefined {
  const generation = deployment.metadata.generation ?? 1;
  if (plan && plan.spec.state === 'aborted' && plan.spec.toRevision === generation) {
    // Only the record of the spec the plan left: revision numbers start again at 1 when a
    // deployment is deleted and re-created, so the number alone may name another spec (the
    // simulation, seed 11639). Without it, the current spec serves, and the rollout reverts
    // what it places (from a replica still at fromHash).
    const prev = revisionSpec(plan.spec.fromRevision)?.spec.template.services[service];
    const t = prev && templateOf(plan.spec.fromRevision, prev);
    if (t && t.specHash === plan.spec.fromHash) return t;
  }
  const cur = deployment.spec.services[service];
  return cur ? templateOf(generation, cur) : undefined;
}

export function templateOf(revision: number, spec: ServiceSpec): ServingTemplate {
  return { revision, specHash: hashOf(spec), template: withDefaults(spec) };
}

/**
 * Spec hashes of deeply frozen spec objects: a spec held in the cache (frozen by its interner:
 * see WATCHABLE's `share`) is hashed once, not by every controller on every pass — a service with
 * a large env cost milliseconds per pass. A spec any part of which is not frozen may still change
 * in place, so it is hashed afresh each time (never a stale hash). Entries go with their specs.
 */
const hashes = new WeakMap<ServiceSpec, string>();

/** Whether nothing in `v` can change in place (checking is cheap next to hashing: no strings read). */
function deeplyFrozen(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return true;
  return Object.isFrozen(v) && Object.values(v).every(deeplyFrozen);
}

function hashOf(spec: ServiceSpec): string {
  if (!deeplyFrozen(spec)) return specHash(spec);
  let h = hashes.get(spec);
  if (h === undefined) hashes.set(spec, (h = specHash(spec)));
  return h;
}
