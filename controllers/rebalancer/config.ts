// The rebalancer's Config: seed 000's thresholds, baked in (no operator knobs), plus the
// intervals from src/timings.ts. Production builds it once with defaultConfig(); tests inject one.
// Beside it, how every part of the cycle compares against a threshold, breaks a tie and prints a figure.
import { PRODUCTION, type Timings } from '../../src/timings.js';

export interface Config {
  /** One cycle (seed: 30 s); also the controller's tick. */
  cycleMs: number;
  /** Time constant of the continuous-time EWMA (seed: 5 min). */
  ewmaWindowMs: number;
  /** A replica placed or moved this recently is not moved (seed: 10 min). */
  cooldownReplicaMs: number;
  /** A node that received a move this recently receives no other (seed: 2 min). */
  cooldownNodeMs: number;
  /** A sample older than this many heartbeat intervals is ignored (seed 001: 3). */
  freshnessIntervals: number;
  /** max(pressure) must reach this… */
  trigger: number;
  /** …for this many consecutive cycles. */
  consecutiveCycles: number;
  /** max − min pressure must be at least this. */
  imbalanceGap: number;
  /** pre_src − post_src must be at least this. */
  reliefFloor: number;
  /** post_dst must stay below this. */
  dstCap: number;
  /** post CPU and post memory of dst must each stay at or below this. */
  dstFit: number;
  /** A fixed restart penalty: score = relief − moveCost. */
  moveCost: number;
  /** Relief of a replica with neither a measured nor a declared footprint. */
  defaultRelief: { cpu: number; memory: number };
  /** A move not healthy on dst within this is abandoned (the service's update.stepTimeout wins). */
  moveTimeoutMs: number;
  /** Up to this many destinations, `jaco rebalance plan` lists every destination's verdict. */
  explainDsts: number;
}

/** The thresholds of seed 000, for every timing table. */
export const THRESHOLDS = {
  freshnessIntervals: 3,
  trigger: 0.85,
  consecutiveCycles: 2,
  imbalanceGap: 0.25,
  reliefFloor: 0.1,
  dstCap: 0.75,
  dstFit: 1.0,
  moveCost: 0.01,
  defaultRelief: { cpu: 0.12, memory: 0.06 },
  explainDsts: 16,
} as const;

export function defaultConfig(t: Timings = PRODUCTION): Config {
  return {
    ...THRESHOLDS,
    defaultRelief: { ...THRESHOLDS.defaultRelief },
    cycleMs: t.rebalanceCycleMs,
    ewmaWindowMs: t.ewmaWindowMs,
    cooldownReplicaMs: t.cooldownReplicaMs,
    cooldownNodeMs: t.cooldownNodeMs,
    moveTimeoutMs: t.stepTimeoutMs,
  };
}

/**
 * Threshold comparisons tolerate float noise: 0.95 − 0.85 is 0.0999…98 in binary floating point
 * and must still clear a 0.10 relief floor.
 */
export const EPSILON = 1e-9;
export const atLeast = (x: number, min: number) => x >= min - EPSILON;
export const below = (x: number, max: number) => x < max - EPSILON;
export const atMost = (x: number, max: number) => x <= max + EPSILON;

/** Ties are broken by name (node, then replica id): the same snapshot and clock give the same plan. */
export const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** A pressure or threshold as the plan's details print it. */
export const f2 = (x: number) => x.toFixed(2);
