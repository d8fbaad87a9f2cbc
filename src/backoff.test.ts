import { describe, expect, it } from 'vitest';
import { Backoff, backoffAfter } from './backoff.js';

describe('Backoff: the one exponential back-off of the retry loops', () => {
  it('doubles from its first wait up to its longest, and stays there', () => {
    const b = new Backoff(100, 1_000);
    expect(Array.from({ length: 7 }, () => b.next())).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000]);
  });

  it('peek gives the next wait without taking it', () => {
    const b = new Backoff(50, 5_000);
    expect([b.peek(), b.peek(), b.next(), b.peek()]).toEqual([50, 50, 50, 100]);
  });

  it('starts over after a reset', () => {
    const b = new Backoff(200, 5_000);
    b.next();
    b.next();
    b.reset();
    expect(b.next()).toBe(200);
  });

  it('is the same every run: no jitter', () => {
    const waits = () => {
      const b = new Backoff(100, 30_000);
      return Array.from({ length: 12 }, () => b.next());
    };
    expect(waits()).toEqual(waits());
  });
});

describe('backoffAfter: the wait after n failures in a row', () => {
  it.each([
    [0, 0],
    [1, 100],
    [2, 200],
    [5, 1_600],
    [20, 30_000],
  ])('%i failures: %i ms', (failures, ms) => expect(backoffAfter(failures, 100, 30_000)).toBe(ms));

  it('without a longest wait, doubles for ever (a job\'s back-off)', () => expect(backoffAfter(11, 10, Infinity)).toBe(10_240));

  it('agrees with Backoff, wait by wait', () => {
    const b = new Backoff(100, 30_000);
    for (let n = 1; n <= 12; n++) expect(backoffAfter(n, 100, 30_000)).toBe(b.next());
  });
});
