// The one exponential back-off of jaco's retry loops (issue 31): cockatiel's, without jitter — a
// retry's timing stays the same from run to run, as the simulation and the table tests need —
// doubling from its first wait to its longest. A loop asks `next()` for each wait and calls
// `reset()` once it succeeds; a decision that counts failures asks `backoffAfter`.
import { ExponentialBackoff, noJitterGenerator, type IBackoff } from 'cockatiel';

export class Backoff {
  private readonly waits: ExponentialBackoff<number>;
  private step: IBackoff<unknown>;

  constructor(
    readonly firstMs: number,
    readonly maxMs: number,
  ) {
    this.waits = new ExponentialBackoff({ initialDelay: firstMs, maxDelay: maxMs, generator: noJitterGenerator });
    this.step = this.waits.next();
  }

  /** The wait before the next try: the first wait, then twice the one before, up to the longest. */
  next(): number {
    const ms = this.step.duration;
    this.step = this.step.next(undefined);
    return ms;
  }

  /** The wait `next()` will give, without taking it. */
  peek(): number {
    return this.step.duration;
  }

  /** After a success: the next failure waits the first wait again. */
  reset(): void {
    this.step = this.waits.next();
  }
}

/** The wait after `failures` failures in a row (1: the first wait), as a Backoff would give it. */
export function backoffAfter(failures: number, firstMs: number, maxMs: number): number {
  if (failures < 1) return 0;
  return noJitterGenerator(failures - 1, { initialDelay: firstMs, maxDelay: maxMs, exponent: 2, generator: noJitterGenerator })[0];
}

/**
 * The wait between two tries: `ms` on the global timers (a test's fake clock replaces them); an
 * abort ends it early, without an error — the loop's next check says why it stops.
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
