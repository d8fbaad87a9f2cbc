import { describe, expect, it } from 'vitest';
import { IdleCollector, shouldCollect } from './memory.js';

const MiB = 1 << 20;

describe('shouldCollect: once the heap grew and the burst is over', () => {
  it.each<[string, number, number, number, boolean]>([
    ['grew 100 MiB, the loop idle since the last sample', 200 * MiB, 100 * MiB, 0.02, true],
    ['grew 100 MiB, the loop busy (a burst under way)', 200 * MiB, 100 * MiB, 0.9, false],
    ['grew 100 MiB, at rest but for its timers (a heap that still creeps up counts as quiet)', 200 * MiB, 100 * MiB, 0.05, true],
    ['grew 20 MiB only', 120 * MiB, 100 * MiB, 0, false],
    ['exactly the growth, exactly the quiet bound', 148 * MiB, 100 * MiB, 0.2, true],
    ['just busier than the bound', 148 * MiB, 100 * MiB, 0.21, false],
  ])('%s', (_n, used, base, utilization, want) => expect(shouldCollect(used, base, utilization)).toBe(want));
});

describe('IdleCollector', () => {
  it('collects once after a burst settles, then not again until the heap grows anew', () => {
    // The heap is what is live plus garbage; a collection leaves what is live.
    let live = 60 * MiB;
    let garbage = 0;
    let busy = 0;
    const c = new IdleCollector({ heapUsed: () => live + garbage, utilization: () => busy, gc: () => (garbage = 0) });
    const at = (g: number, u: number, l = live) => {
      garbage = g * MiB;
      busy = u;
      live = l;
      c.sample();
      return c.collections;
    };
    // A burst: 40 MiB of garbage per sample with the loop busy, then quiet (its timers still allocate a little).
    expect([at(40, 0.9), at(80, 0.8), at(120, 0.7), at(126, 0.05)]).toEqual([0, 0, 0, 1]);
    // Quiet afterwards: nothing more to do.
    expect([at(1, 0.05), at(8, 0.05), at(15, 0.05)]).toEqual([1, 1, 1]);
    // What stays live is no garbage: a grown live set alone is collected once, then left.
    expect([at(2, 0.05, 130 * MiB), at(2, 0.05), at(3, 0.05)]).toEqual([2, 2, 2]);
    // A second burst: collected once more when it settles.
    expect([at(60, 0.9), at(100, 0.9), at(101, 0.1)]).toEqual([2, 2, 3]);
  });

  it('asks V8 itself for a full collection when none is given', () => {
    let used = 10 * MiB;
    const c = new IdleCollector({ heapUsed: () => used, utilization: () => 0, policy: { growthBytes: 1, quietUtilization: 1 } });
    used = 20 * MiB;
    expect(() => c.sample()).not.toThrow();
    expect(c.collections).toBe(1);
  });
});

describe('IdleCollector after a collection that found the growth still live', () => {
  it('keeps its mark and tries again later, each time later, until the garbage is given back', () => {
    // 120 MiB above a 60 MiB mark; the first collection comes while a burst's data is still in flight.
    let live = 170 * MiB;
    let garbage = 10 * MiB;
    const c = new IdleCollector({ heapUsed: () => live + garbage, utilization: () => 0.05, gc: () => (garbage = 0) });
    // Sets the mark at 60 MiB: a heap that shrank by itself.
    live = 60 * MiB;
    garbage = 0;
    c.sample();
    const after = (l: number, g: number) => {
      live = l * MiB;
      garbage = g * MiB;
      c.sample();
      return c.collections;
    };
    // Collected at 180, 170 still live: tried again after 2 samples, then after 4.
    expect(after(170, 10)).toBe(1);
    expect([after(170, 5), after(170, 5), after(170, 5)]).toEqual([1, 1, 2]);
    expect([after(170, 5), after(170, 5), after(170, 5), after(170, 5), after(170, 5)]).toEqual([2, 2, 2, 2, 3]);
    // The in-flight data let go: the next try (after 8 samples more) gives it back, and the mark follows.
    for (let i = 0; i < 8; i++) after(65, 50);
    expect(c.collections).toBe(3);
    expect(after(65, 50)).toBe(4);
    expect([after(70, 0), after(75, 0)]).toEqual([4, 4]);
  });
});
