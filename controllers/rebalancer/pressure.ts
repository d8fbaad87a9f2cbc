// The rebalancer's signal (seed 000, "Signals"): where pressure samples come from (a
// PressureSource), the per-node continuous-time EWMA they are folded into, and composite pressure
// = max(cpu_ewma, memory_ewma). Pure: times are sample times and an injected `now`.
import { sampleFresh } from '../../src/api/nodes.js';
import type { Heartbeat, PressureSample } from '../../src/api/types.js';

export type Dimension = 'cpu' | 'memory';
export const DIMENSIONS: readonly Dimension[] = ['cpu', 'memory'];

/** The latest fresh sample of each node that has one; a node absent from the map is silent. */
export interface PressureSource {
  samples(): ReadonlyMap<string, PressureSample>;
}

/** "No data" for every node: the rebalancer runs, every gate short-circuits, nothing is audited. */
export class NoopSource implements PressureSource {
  samples(): ReadonlyMap<string, PressureSample> {
    return new Map();
  }
}

/**
 * Reads each node's latest sample from its heartbeat (heartbeats/<host>, written by the
 * node-agent). A crashed node's heartbeat goes with its lease; a sample older than
 * `freshnessIntervals` × the heartbeat interval when its heartbeat was written (a sampler that
 * stalled) is ignored. Both times are the agent's clock: a skewed node's samples count (issue 29).
 */
export class StateBackedSource implements PressureSource {
  constructor(
    private readonly heartbeats: () => Iterable<Heartbeat>,
    private readonly freshnessIntervals = 3,
  ) {}

  samples(): ReadonlyMap<string, PressureSample> {
    const out = new Map<string, PressureSample>();
    for (const hb of this.heartbeats()) {
      const p = hb.spec.pressure;
      if (!p || !sampleFresh(p, hb, this.freshnessIntervals)) continue;
      out.set(hb.spec.node, p);
    }
    return out;
  }
}


/** One node's smoothed utilisation: the EWMAs and the sample time they include. */
export interface NodeEwma {
  /** Time of the last folded sample (the agent's clock). */
  t: number;
  cpu: number;
  memory: number;
  /** When (leader clock) a sample was last folded: detects an agent clock stuck in the future. */
  foldedAt: number;
}

export interface Reading {
  t: number;
  cpu: number;
  memory: number;
}

export function readingOf(p: PressureSample): Reading {
  return { t: Date.parse(p.time), cpu: p.cpuUtil, memory: p.memoryUtil };
}

/**
 * Folds a sample into a node's EWMA with a weight from the time elapsed since the last one:
 * alpha = 1 − e^(−Δt/window). Irregular intervals are handled exactly (two folds over Δt1 and Δt2
 * of one value equal one fold over Δt1 + Δt2). The first sample seeds the EWMA (the ADR: a new
 * leader rebuilds within two cycles). A sample no newer than the last is ignored (backwards-clock
 * invariance, and the same sample read twice is folded once) — unless nothing was folded for a
 * whole window of leader time, which means the agent's clock jumped back: then it reseeds rather
 * than freezing the node.
 */
export function fold(prev: NodeEwma | undefined, s: Reading, now: number, windowMs: number): NodeEwma {
  if (!prev || (s.t < prev.t && now - prev.foldedAt > windowMs)) return { t: s.t, cpu: s.cpu, memory: s.memory, foldedAt: now };
  if (s.t <= prev.t) return prev;
  const alpha = 1 - Math.exp(-(s.t - prev.t) / windowMs);
  return { t: s.t, cpu: prev.cpu + alpha * (s.cpu - prev.cpu), memory: prev.memory + alpha * (s.memory - prev.memory), foldedAt: now };
}

/** Composite pressure = max(cpu, memory) and the dimension that sets it (cpu on a tie). */
export function composite(u: { cpu: number; memory: number }): { pressure: number; dominant: Dimension } {
  return u.memory > u.cpu ? { pressure: u.memory, dominant: 'memory' } : { pressure: u.cpu, dominant: 'cpu' };
}
