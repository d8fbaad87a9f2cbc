import { describe, expect, it } from 'vitest';
import { IdleCollector, shouldCollect } from './memory.js';

const MiB = 1 << 20;

describe('shouldCollect: once the heap grew and the burst is over', () => {
  it.each<[string, number, number, number, boolean]>([
    ['grew 100 MiB, quiet since the last sample', 200 * MiB, 199 * MiB, 100 * MiB, true],
    ['grew 100 MiB, still growing fast (a burst under way)', 200 * MiB, 150 * MiB, 100 * MiB, false],
    ['grew 20 MiB only', 120 * MiB, 120 * MiB, 100 * MiB, false],
    ['shrinking by itself, still above', 200 * MiB, 210 * MiB, 100 * MiB, false],
    ['exactly the growth, quiet', 148 * MiB, 148 * MiB, 100 * MiB, true],
  ])('%s', (_n, used, prev, base, want) => expect(shouldCollect(used, prev, base)).toBe(want));
});

describe('IdleCollector', () => {
  it('collects once after a burst settles, then not again until the heap grows anew', () => {
    // The heap is what is live plus garbage; a collection leaves what is live.
    let live = 60 * MiB;
    let garbage = 0;
    const c = new IdleCollector({ heapUsed: () => live + garbage, gc: () => (garbage = 0) });
    const at = (g: number, l = live) => {
      garbage = g * MiB;
      live = l;
      c.sample();
      return c.collections;
    };
    // A burst: 40 MiB of garbage per sample, then quiet.
    expect([at(40), at(80), at(120), at(121)]).toEqual([0, 0, 0, 1]);
    // Quiet afterwards: nothing more to do.
    expect([at(1), at(2), at(2)]).toEqual([1, 1, 1]);
    // What stays live is no garbage: a grown live set alone is collected once, then left.
    expect([at(2, 130 * MiB), at(2), at(3)]).toEqual([1, 2, 2]);
    // A second burst: collected once more when it settles.
    expect([at(60), at(100), at(101)]).toEqual([2, 2, 3]);
  });

  it('asks V8 itself for a full collection when none is given', () => {
    let used = 10 * MiB;
    const c = new IdleCollector({ heapUsed: () => used, policy: { growthBytes: 1, quietBytes: 1 << 30 } });
    used = 20 * MiB;
    expect(() => c.sample()).not.toThrow();
    expect(c.collections).toBe(1);
  });
});
