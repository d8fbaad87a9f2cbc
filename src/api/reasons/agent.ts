// The node-agent's closed vocabularies: observed reason codes, why a container is stopped, how a
// start ends. The same strings appear in ReplicaObserved.status.code, the agent's logs and the
// labels of its metrics (docs/node-agent.md lists them).
import { IMAGE_ERROR_CODES } from './images.js';

/** ReplicaObserved.status.code values the agent sets (a suspended replica carries its own reason). */
export const OBSERVED_CODES = {
  pulling: 'the image is being pulled (first attempt)',
  image_pull_failed: 'pulling the image failed for a reason none of the codes below names; the agent retries with back-off (details: "<image>: <error>")',
  // A failed pull whose cause is known (src/api/reasons/images.ts): retried with back-off too.
  ...IMAGE_ERROR_CODES,
  create_failed: 'Docker could not create the container; the agent retries with back-off',
  invalid_spec: 'the desired key is malformed, or Docker refused the container spec: fix the deployment',
  start_failed: 'Docker created the container but could not start it (details has the error)',
  oom_killed: 'the container exceeded its memory limit and was killed',
  unhealthy: 'the health check is failing (details has its last output)',
  paused: 'the container is paused (someone ran docker pause)',
  container_removed: "the container was removed behind the agent's back; the scheduler decides whether to restart it",
  restarting: 'a restart command is being executed: the old container stops, a fresh one starts',
  stop_first: 'the old container is being stopped before the new one starts (stop-first replacement)',
  // A replica's secrets and configs (docs/secrets.md): it does not start without every one of its files.
  secret_missing: 'a secret the replica uses has no copy on this node yet (the secrets controller makes it; details name it); nothing starts until it is there',
  config_missing: 'a config the replica uses has no copy on this node yet (the secrets controller makes it); nothing starts until it is there',
  secret_unreadable: "this node's copy of a secret or config cannot be opened with the node's key (sealed to an older key of the node); the secrets controller seals it again",
  secret_delivery_failed: 'the tmpfs holding the replica\'s secrets and configs could not be made or written (details say why); retried with back-off',
  network_failed:
    "the replica's network namespace could not be given its addresses (cluster network: the CNI plugin failed, or the desired record carries no address); the agent retries with back-off (details: the plugin's error)",
} as const;
export type ObservedCode = keyof typeof OBSERVED_CODES;

/** The codes of a failed pull: the agent's catch-all and the ones that name the cause. */
export type PullFailureCode = 'image_pull_failed' | keyof typeof IMAGE_ERROR_CODES;
export function isPullFailure(code: string | undefined): code is PullFailureCode {
  return code === 'image_pull_failed' || (code !== undefined && Object.hasOwn(IMAGE_ERROR_CODES, code));
}

/** Why the agent stops a container: a label of jaco_agent_stops_total and a log field. */
export const STOP_REASONS = {
  orphaned: 'the replica has no desired key on this node: stopped and removed',
  replaced: 'a newer container of the replica is running and ready: the old one is stopped and removed',
  superseded: 'an old container of the replica that no longer runs: removed',
  suspended: 'the desired key is suspended: stopped and kept stopped',
  stop_first: 'replaced stop-first (update.order stop-first, a shared host port, volumes, or the cluster network)',
  restart: 'a restart command: stopped and removed, a fresh container follows',
  node_removed: 'the node was removed from the cluster',
} as const;
export type StopReason = keyof typeof STOP_REASONS;

/** How a start is set off. */
export const START_KINDS = {
  create: 'no container runs the desired revision: create and start one',
  restart: 'a restart command: stop every container of the replica, then create and start a fresh one',
  resume: 'a container of the desired revision exists but is not running (never started, or suspended before): start it',
} as const;
export type StartKind = keyof typeof START_KINDS;

/** How a start ends: a label of jaco_agent_starts_total. */
export const START_RESULTS = {
  started: 'the container is running',
  start_failed: 'Docker could not start the container',
  invalid_spec: 'Docker refused the container spec',
  cancelled: 'a newer desired state superseded the start, or the agent is stopping',
} as const;
export type StartResult = keyof typeof START_RESULTS;

/** Why an in-flight start is cancelled. */
export const CANCEL_REASONS = {
  superseded: 'the desired revision or spec hash changed',
  desired_removed: 'the desired key is gone',
  suspended: 'the desired key is suspended',
  invalid: 'the desired key became malformed',
} as const;
export type CancelReason = keyof typeof CANCEL_REASONS;
