// Canary replicas (update.canary, docs/rollout.md "Canary"): while a rollout with canaries is in
// progress or paused, the service wants `canary.replicas` replicas beyond spec.replicas. The
// scheduler places them like any replica (the serving template is the rollout's target), marked
// spec.canary so the rollout controller can tell them from the replicas it steps. Replicas and
// canaries are counted apart (decide.ts): a scale during the canary phase scales the replicas, and
// when the rollout ends (completed or aborted) every canary goes, whatever the replicas' count.
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { RolloutPlan } from '../../src/api/types.js';

export interface CanaryWant {
  /** Extra replicas beside spec.replicas. */
  count: number;
  /** The rollout's target revision (written into each canary's marker). */
  revision: number;
}

/** What a service's rollout plan asks of the scheduler: canaries while it is live, none after. */
export function canariesWanted(plan: RolloutPlan | undefined): CanaryWant | undefined {
  const p = plan?.spec;
  if (!p?.canary?.replicas || (p.state !== 'in_progress' && p.state !== 'paused')) return undefined;
  return { count: p.canary.replicas, revision: p.toRevision };
}

export const isCanary = (e: ReplicaEntry): boolean => e.copies.some((c) => !!c.desired.spec.canary);
