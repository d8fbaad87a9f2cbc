// When a replica copy counts as "running and healthy" at its desired spec: the condition a
// make-before-break move waits for before the source stops, and a rolling-update step waits for
// before the next one starts.
import { SERVICE_DEFAULTS } from './spec.js';
import type { ReplicaDesired, ReplicaObserved, ServiceSpec } from './types.js';
import { durationMs } from './units.js';

export type NotReadyBecause = 'not_observed' | 'other_revision' | 'not_running' | 'health_starting' | 'unhealthy' | 'min_ready_time';

/** Undefined when the observed copy runs the desired revision and spec and is healthy; else why not. */
export function notReadyBecause(d: ReplicaDesired, o: ReplicaObserved | undefined, now: number): NotReadyBecause | undefined {
  const s = o?.status;
  if (!s) return 'not_observed';
  if (s.revision !== d.spec.revision || s.specHash !== d.spec.specHash) return 'other_revision';
  if (s.state !== 'running') return s.state === 'degraded' ? 'unhealthy' : 'not_running';
  if (d.spec.template.healthcheck) {
    if (s.health === 'healthy') return undefined;
    return s.health === 'unhealthy' ? 'unhealthy' : 'health_starting';
  }
  // No health check: running for the service's minimum ready time — as its agent judged on its own
  // clock; from startedAt only for an agent that does not say (before minReadyMet existed).
  if (s.minReadyMet !== undefined) return s.minReadyMet ? undefined : 'min_ready_time';
  const at = minReadyAt(d, o);
  return at !== undefined && now >= at ? undefined : 'min_ready_time';
}

/** A service's minimum ready time (update.minReadyTime; the default where absent or unreadable). */
export function minReadyMs(t: ServiceSpec): number {
  const fallback = durationMs(SERVICE_DEFAULTS.minReadyTime);
  try {
    return durationMs(t.update?.minReadyTime, fallback);
  } catch {
    return fallback;
  }
}

/**
 * When a running copy of a service without a health check counts as ready (started + its minimum
 * ready time), for an agent that does not report minReadyMet; undefined when readiness is not a
 * matter of this reader's time (a health check, not running, or the agent judges it and reports).
 */
export function minReadyAt(d: ReplicaDesired, o: ReplicaObserved | undefined): number | undefined {
  const s = o?.status;
  if (d.spec.template.healthcheck || s?.state !== 'running' || !s.startedAt || s.minReadyMet !== undefined) return undefined;
  const started = Date.parse(s.startedAt);
  return Number.isFinite(started) ? started + minReadyMs(d.spec.template) : undefined;
}

export function replicaReady(d: ReplicaDesired, o: ReplicaObserved | undefined, now: number): boolean {
  return notReadyBecause(d, o, now) === undefined;
}

/** Running at all (either the described container or the one it replaces still serves). */
export function replicaRunning(o: ReplicaObserved | undefined): boolean {
  const s = o?.status;
  return !!s && (s.state === 'running' || s.replacing?.state === 'running');
}
