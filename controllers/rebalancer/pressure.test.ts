// Seed 000's pressure tests: composite math, EWMA decay, spike damping, backwards-clock invariance,
// irregular intervals; and the StateBackedSource's freshness rule.
import { describe, expect, it } from 'vitest';
import { heartbeat, sample, T0 } from '../../test/support/rebalancer-world.js';
import { composite, fold, NoopSource, StateBackedSource, type NodeEwma, type Reading } from './pressure.js';

const W = 300_000; // the 5-minute window
const at = (t: number, cpu: number, memory = 0): Reading => ({ t, cpu, memory });

function series(readings: Reading[], now = (r: Reading) => r.t): NodeEwma | undefined {
  let e: NodeEwma | undefined;
  for (const r of readings) e = fold(e, r, now(r), W);
  return e;
}

describe('composite pressure', () => {
  it.each([
    [{ cpu: 0.9, memory: 0.2 }, 0.9, 'cpu'],
    [{ cpu: 0.3, memory: 0.8 }, 0.8, 'memory'],
    [{ cpu: 0.5, memory: 0.5 }, 0.5, 'cpu'],
    [{ cpu: 0, memory: 0 }, 0, 'cpu'],
    [{ cpu: 1.4, memory: 0.2 }, 1.4, 'cpu'],
  ] as const)('max(%o) = %d, dominant %s', (u, pressure, dominant) => {
    expect(composite(u)).toEqual({ pressure, dominant });
  });
});

describe('continuous-time EWMA', () => {
  it('the first sample seeds it', () => {
    expect(fold(undefined, at(T0, 0.7, 0.2), T0, W)).toEqual({ t: T0, cpu: 0.7, memory: 0.2, foldedAt: T0 });
  });

  it('decays toward a new level with weight 1 − e^(−Δt/window)', () => {
    const e = series([at(T0, 1), at(T0 + W, 0)])!;
    expect(e.cpu).toBeCloseTo(Math.exp(-1), 12);
    const e2 = series([at(T0, 1), at(T0 + 3 * W, 0)])!;
    expect(e2.cpu).toBeCloseTo(Math.exp(-3), 12);
  });

  it('damps a single spike: one 30 s sample at 1.0 on a 0.3 baseline stays far below the trigger', () => {
    const base = Array.from({ length: 20 }, (_, i) => at(T0 + i * 30_000, 0.3));
    const e = series([...base, at(T0 + 20 * 30_000, 1.0)])!;
    expect(e.cpu).toBeCloseTo(0.3 + 0.7 * (1 - Math.exp(-0.1)), 12);
    expect(e.cpu).toBeLessThan(0.4);
    // …and decays back once the spike is gone.
    const after = fold(e, at(T0 + 21 * 30_000, 0.3), T0 + 21 * 30_000, W);
    expect(after.cpu).toBeLessThan(e.cpu);
  });

  it('sustained pressure converges: 10 minutes at 0.95 from 0.3 crosses 0.85', () => {
    const base = [at(T0, 0.3)];
    const hot = Array.from({ length: 20 }, (_, i) => at(T0 + (i + 1) * 30_000, 0.95));
    expect(series([...base, ...hot])!.cpu).toBeGreaterThan(0.85);
    expect(series([...base, ...hot.slice(0, 4)])!.cpu).toBeLessThan(0.85);
  });

  it('backwards-clock invariance: a sample older than the last is ignored', () => {
    const e = series([at(T0, 0.2), at(T0 + 60_000, 0.4)])!;
    expect(fold(e, at(T0 + 30_000, 1.0), T0 + 90_000, W)).toBe(e);
    // The same sample read twice is folded once.
    expect(fold(e, at(T0 + 60_000, 0.4), T0 + 90_000, W)).toBe(e);
  });

  it('an agent clock stuck in the past for a whole window reseeds instead of freezing the node', () => {
    const e = series([at(T0 + 3_600_000, 0.9)], () => T0)!; // agent clock one hour ahead
    expect(fold(e, at(T0 + 60_000, 0.2), T0 + 60_000, W)).toBe(e); // within a window: ignored
    expect(fold(e, at(T0 + W + 1000, 0.2), T0 + W + 1000, W)).toMatchObject({ t: T0 + W + 1000, cpu: 0.2 });
  });

  it('irregular intervals: folding over Δt1 then Δt2 equals folding over Δt1 + Δt2', () => {
    const split = series([at(T0, 0.1, 0.5), at(T0 + 7_000, 0.9, 0.2), at(T0 + 7_000 + 113_000, 0.9, 0.2)])!;
    const whole = series([at(T0, 0.1, 0.5), at(T0 + 120_000, 0.9, 0.2)])!;
    expect(split.cpu).toBeCloseTo(whole.cpu, 12);
    expect(split.memory).toBeCloseTo(whole.memory, 12);
  });

  it('irregular intervals: a long gap weighs the new sample more than a short one', () => {
    const short = series([at(T0, 0.2), at(T0 + 5_000, 1)])!;
    const long = series([at(T0, 0.2), at(T0 + 200_000, 1)])!;
    expect(short.cpu).toBeCloseTo(0.2 + 0.8 * (1 - Math.exp(-5_000 / W)), 12);
    expect(long.cpu).toBeCloseTo(0.2 + 0.8 * (1 - Math.exp(-200_000 / W)), 12);
    expect(long.cpu).toBeGreaterThan(short.cpu);
  });

  it('folds both dimensions independently', () => {
    const e = series([at(T0, 0.2, 0.9), at(T0 + W, 0.8, 0.1)])!;
    const a = 1 - Math.exp(-1);
    expect(e.cpu).toBeCloseTo(0.2 + a * 0.6, 12);
    expect(e.memory).toBeCloseTo(0.9 - a * 0.8, 12);
  });
});

describe('pressure sources', () => {
  // A heartbeat written at `writtenAt` on its agent's clock, carrying a sample taken `ageMs` before.
  const hb = (node: string, ageMs: number, intervalMs = 30_000, writtenAt = T0) => heartbeat(node, writtenAt, sample(writtenAt - ageMs, { cpu: 0.5 }), intervalMs);

  it('StateBackedSource keeps samples no older than 3 heartbeat intervals when their heartbeat was written', () => {
    const src = new StateBackedSource(() => [hb('a', 90_000), hb('b', 90_001), hb('c', 2_000, 1000), hb('d', 3_001, 1000)]);
    expect([...src.samples().keys()]).toEqual(['a', 'c']);
  });

  it.each([
    ['10 min behind', -600_000],
    ['10 min ahead', 600_000],
    ['in step', 0],
  ])("a node whose clock is %s: its samples count (freshness is judged on the agent's one clock)", (_, offset) => {
    const src = new StateBackedSource(() => [hb('a', 1_000, 30_000, T0 + offset), hb('b', 100_000, 30_000, T0 + offset)]);
    expect([...src.samples().keys()]).toEqual(['a']);
  });

  it('a heartbeat without a sample is silence, not an error', () => {
    const src = new StateBackedSource(() => [heartbeat('a', T0)]);
    expect(src.samples().size).toBe(0);
  });

  it('NoopSource has no data for any node', () => {
    expect(new NoopSource().samples().size).toBe(0);
  });
});
