// The rollout controller's closed vocabularies: why a rollout aborted, why one started, which way a
// step goes, how a rollout ended, the states of a plan and what an operator may ask of it. The same
// strings appear in RolloutPlan.failureReason, audit payloads (`reason`), metric labels and
// `jaco rollout status`.
import { IMAGE_ERROR_CODES } from './images.js';

export const FAILURE_REASONS = {
  step_timeout: 'the replica of the current step was not running and healthy at the new revision within the step timeout',
  image_pull_failed: 'the new image could not be pulled (the node-agent reported image_pull_failed)',
  // The node-agent named why the new image could not be pulled.
  ...IMAGE_ERROR_CODES,
  health_check_failed: 'the replica started at the new revision but its health check failed (state degraded)',
  restart_exhausted: 'the replica failed 3 times in a row at the new revision; the scheduler stopped restarting it',
  monitor_failed: 'the replica was ready at the new revision but stopped being ready within update.monitor',
  progress_deadline: 'no step completed within update.progressDeadline',
  operator_abort: 'the operator aborted the rollout (jaco rollout abort)',
  atomic_rollback: 'another service of this deployment (spec.update.atomic) failed or was aborted: the deployment goes back as one unit',
} as const;
export type FailureReason = keyof typeof FAILURE_REASONS;

export const START_REASONS = {
  new_revision: "the service's spec hash differs from what its replicas run",
  superseded: 'a newer apply replaced a rollout that was still in progress',
} as const;
export type StartReason = keyof typeof START_REASONS;

export const STEP_DIRECTIONS = {
  forward: 'a replica moves to the new revision',
  revert: 'after an abort, a replica goes back to the previous revision',
} as const;
export type StepDirection = keyof typeof STEP_DIRECTIONS;

/** jaco_rollouts_total{result}. */
export const ROLLOUT_RESULTS = {
  completed: 'every replica runs the new revision',
  aborted: 'a step failed; the replicas went back to the previous revision',
  superseded: 'a newer apply replaced the rollout before it finished',
} as const;
export type RolloutResult = keyof typeof ROLLOUT_RESULTS;

/** jaco_rollout_steps_total{result}: how a step ended (RolloutStep.result). */
export const STEP_RESULTS = {
  done: 'the replica ran healthy at the new revision',
  failed: 'the step failed (or was in flight when the rollout aborted); tolerated failures leave the replica to the scheduler',
  reverted: 'a replica went back to the previous revision after an abort',
  superseded: 'the step was in flight when a newer apply replaced the rollout',
} as const;
export type StepResult = keyof typeof STEP_RESULTS;

/** Why a rollout is paused (audit rollout_paused `reason`): the operator, or a failure under failureAction pause. */
export type PauseReason = 'operator' | FailureReason;

/** Where a RolloutPlan is: stepping, held by the operator or a failure, or ended. */
export type RolloutState = 'in_progress' | 'paused' | 'completed' | 'aborted';

/** What an operator asks of a rollout (`jaco rollout pause|resume|abort|promote`). */
export type RolloutAction = 'pause' | 'resume' | 'abort' | 'promote';

/**
 * The plan states each operator request (jaco rollout pause|resume|abort) acts on: the CLI writes a
 * request only on such a plan, and the controller clears any other with a note. One table for both.
 */
export const REQUEST_APPLIES_TO: Readonly<Record<RolloutAction, readonly RolloutState[]>> = {
  pause: ['in_progress'],
  resume: ['paused'],
  abort: ['in_progress', 'paused'],
  promote: ['in_progress', 'paused'],
};

/** Where a rollout's canaries are (update.canary): placed and watched, ready and waiting for promote, or promoted. */
export type CanaryPhase = 'starting' | 'waiting' | 'promoted';
export const canaryPhase = (c: { readySince?: string; promotedAt?: string }): CanaryPhase => (c.promotedAt ? 'promoted' : c.readySince ? 'waiting' : 'starting');
