// Giving a burst's garbage back. V8 collects the old generation when it needs the room, not when
// the process goes quiet: a controller that placed 10,000 replicas itself sat at ~280 MiB RSS once
// idle, most of it the burst's garbage, against ~180 MiB for a controller started on the same
// state (docs/benchmarks.md, "memory"). A process that has gone quiet after its heap grew asks
// for one full collection, and V8 returns the freed pages.
//
// shouldCollect is the decision (pure: samples in, verdict out); IdleCollector samples the heap on
// a timer and calls the collector V8 exposes on request.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export interface CollectPolicy {
  /** How much the heap must have grown since the last full collection for one to be worth it. */
  growthBytes: number;
  /** How little it may grow between two samples for the process to count as quiet. */
  quietBytes: number;
}

export const DEFAULT_COLLECT_POLICY: CollectPolicy = { growthBytes: 48 << 20, quietBytes: 4 << 20 };

/**
 * Whether to collect now: the heap grew by `growthBytes` since the last collection's result
 * (`baseline`) and barely moved since the previous sample (the burst is over).
 */
export function shouldCollect(heapUsed: number, previous: number, baseline: number, p: CollectPolicy = DEFAULT_COLLECT_POLICY): boolean {
  return heapUsed - baseline >= p.growthBytes && Math.abs(heapUsed - previous) <= p.quietBytes;
}

/** V8's full collection, asked for at run time (the flag, then a context that sees `gc`). */
function exposedGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

export class IdleCollector {
  private timer?: NodeJS.Timeout;
  private previous: number;
  private baseline: number;
  collections = 0;

  constructor(
    private readonly opts: { everyMs?: number; policy?: CollectPolicy; heapUsed?: () => number; gc?: () => void; onCollect?: (before: number, after: number) => void } = {},
  ) {
    this.previous = this.baseline = this.heapUsed();
  }

  private heapUsed(): number {
    return (this.opts.heapUsed ?? (() => process.memoryUsage().heapUsed))();
  }

  /** One sample: collects when shouldCollect says so. */
  sample(): void {
    const used = this.heapUsed();
    if (shouldCollect(used, this.previous, this.baseline, this.opts.policy)) {
      (this.opts.gc ??= exposedGc())();
      this.collections++;
      const after = this.heapUsed();
      this.opts.onCollect?.(used, after);
      this.baseline = after;
      this.previous = after;
      return;
    }
    this.previous = used;
    // A heap that shrank by itself sets a lower mark to grow from.
    this.baseline = Math.min(this.baseline, used);
  }

  start(): this {
    this.timer = setInterval(() => this.sample(), this.opts.everyMs ?? 15_000);
    this.timer.unref();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}
