// A service's update block resolved to numbers: the rollout controller's step controls and the
// disruption budget that moves and rollout steps share. Counts may be written as percentages of the
// service's replicas ("25%"); maxUnavailable rounds down and maxSurge up (Kubernetes' rule), and
// maxUnavailable is never below 1, so a rollout or a drain can always make progress.
import { defaultMaxUnavailable, SERVICE_DEFAULTS } from './spec.js';
import type { FailureAction, ReplicaCount, ServiceSpec, UpdateOrder } from './types.js';
import { durationMs } from './units.js';

/** The update block's defaults beyond SERVICE_DEFAULTS: seed 001's one replica at a time, no delay, rollback on the first failure. */
export const UPDATE_DEFAULTS = {
  parallelism: 1,
  delay: '0s',
  monitor: '0s',
  failureAction: 'rollback' as FailureAction,
  maxFailureRatio: 0,
} as const;

export const PERCENT_PATTERN = '^[0-9]+(\\.[0-9]+)?%$';

/** A count or a percentage of `total`, rounded as asked. */
export function resolveCount(v: ReplicaCount, total: number, round: 'down' | 'up'): number {
  if (typeof v === 'number') return v;
  const m = /^([0-9]+(?:\.[0-9]+)?)%$/.exec(v.trim());
  if (!m) {
    const n = Number(v);
    if (Number.isFinite(n)) return n;
    throw new Error(`invalid replica count ${JSON.stringify(v)}: a whole number or a percentage such as 25%`);
  }
  const exact = (Number(m[1]) * total) / 100;
  return round === 'down' ? Math.floor(exact) : Math.ceil(exact);
}

/** The disruption budget of a service with `replicas` replicas: update.maxUnavailable resolved (default: parallelism above 1, else 1), at least 1. */
export function maxUnavailableOf(spec: ServiceSpec | undefined, replicas: number): number {
  const v = spec?.update?.maxUnavailable;
  if (v === undefined) return defaultMaxUnavailable(spec?.update);
  try {
    return Math.max(1, resolveCount(v, replicas, 'down'));
  } catch {
    return defaultMaxUnavailable(spec?.update);
  }
}

/**
 * Every control of a rolling update, resolved for a service of `replicas` replicas — but
 * maxUnavailable, which is the disruption budget's (controllers/disruption/budget.ts reads it with
 * maxUnavailableOf, for moves and rollout steps alike).
 */
export interface UpdateControls {
  order: UpdateOrder;
  /** Replicas stepped at once (Infinity for parallelism 0: as many as the other bounds allow). */
  parallelism: number;
  /** Start-first steps in flight: extra containers beside the service's replicas. */
  maxSurge: number;
  stepTimeoutMs: number;
  delayMs: number;
  monitorMs: number;
  /** Undefined: no deadline. */
  progressDeadlineMs?: number;
  failureAction: FailureAction;
  maxFailureRatio: number;
  /** How reverts go (update.rollback; each defaults to the forward setting, delay to 0s). */
  revert: { parallelism: number; delayMs: number; order: UpdateOrder };
  /** Canary replicas a rollout starts first (0: none). */
  canary: number;
  /** Undefined: canaries wait for `jaco rollout promote`. */
  autoPromoteMs?: number;
}

/** A parallelism setting: 0 means no limit of its own, absent means `otherwise`. */
const stepWidth = (n: number | undefined, otherwise: number) => (n === undefined ? otherwise : n === 0 ? Infinity : n);

/** Resolves a service's update block; `stepTimeoutMs` is the default where update.stepTimeout is absent. */
export function updateControls(spec: ServiceSpec | undefined, replicas: number, defaults: { stepTimeoutMs: number }): UpdateControls {
  const u = spec?.update ?? {};
  const parallelism = stepWidth(u.parallelism, UPDATE_DEFAULTS.parallelism);
  const maxSurge = u.maxSurge === undefined ? parallelism : resolveCount(u.maxSurge, replicas, 'up');
  return {
    order: u.order ?? SERVICE_DEFAULTS.updateOrder,
    parallelism,
    maxSurge,
    stepTimeoutMs: durationMs(u.stepTimeout, defaults.stepTimeoutMs),
    delayMs: durationMs(u.delay ?? UPDATE_DEFAULTS.delay),
    monitorMs: durationMs(u.monitor ?? UPDATE_DEFAULTS.monitor),
    ...(u.progressDeadline !== undefined ? { progressDeadlineMs: durationMs(u.progressDeadline) } : {}),
    failureAction: u.failureAction ?? UPDATE_DEFAULTS.failureAction,
    maxFailureRatio: u.maxFailureRatio ?? UPDATE_DEFAULTS.maxFailureRatio,
    revert: {
      parallelism: stepWidth(u.rollback?.parallelism, parallelism),
      delayMs: durationMs(u.rollback?.delay ?? UPDATE_DEFAULTS.delay),
      order: u.rollback?.order ?? u.order ?? SERVICE_DEFAULTS.updateOrder,
    },
    canary: u.canary ?? 0,
    ...(u.autoPromote !== undefined ? { autoPromoteMs: durationMs(u.autoPromote) } : {}),
  };
}
