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
  /**
   * How little of the time since the last sample the event loop may have been busy for the process
   * to count as quiet (0–1, Node's event loop utilization). Quiet is judged by work, not by the
   * heap: a process at rest still allocates a little on every timer (its rebalancer's cycles, its
   * beacons), so a heap that "held still" never came under fast timings, and the collection never
   * ran (controller-memory.bench.ts: 148 → 167 MiB in use 35 s after the burst, nothing collected).
   */
  quietUtilization: number;
}

export const DEFAULT_COLLECT_POLICY: CollectPolicy = { growthBytes: 48 << 20, quietUtilization: 0.2 };

/**
 * Whether to collect now: the heap grew by `growthBytes` since the last collection's result
 * (`baseline`) and the event loop was mostly idle since the previous sample (the burst is over).
 */
export function shouldCollect(heapUsed: number, baseline: number, utilization: number, p: CollectPolicy = DEFAULT_COLLECT_POLICY): boolean {
  return heapUsed - baseline >= p.growthBytes && utilization <= p.quietUtilization;
}

/**
 * V8's full collection, asked for at run time (the flag, then a context that sees `gc`), twice: the
 * first frees the garbage, and V8 sizes its heap from what the last collection left, so only the
 * second gives the emptied pages back (controller-memory.bench.ts: committed heap 172 → 91 MiB at
 * the second, no change at a third). Called with no argument: given options (`{ type: 'major',
 * execution: 'sync' }`), Node 20's V8 returned without collecting (88 MiB of garbage stayed 86;
 * plain, 3).
 */
function exposedGc(): () => void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  return () => {
    gc();
    gc();
  };
}

/** The event loop's utilization since the last call (Node's own measure), 0–1. */
function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const now = performance.eventLoopUtilization();
    const u = performance.eventLoopUtilization(now, last).utilization;
    last = now;
    return u;
  };
}

export class IdleCollector {
  private timer?: NodeJS.Timeout;
  private baseline: number;
  /** Samples to skip before trying again after a collection that found the growth still live. */
  private waiting = 0;
  private patience = 1;
  private readonly utilization: () => number;
  collections = 0;

  constructor(
    private readonly opts: {
      everyMs?: number;
      policy?: CollectPolicy;
      heapUsed?: () => number;
      /** The event loop's utilization since the previous call (default: Node's). */
      utilization?: () => number;
      gc?: () => void;
      onCollect?: (before: number, after: number) => void;
    } = {},
  ) {
    this.baseline = this.heapUsed();
    this.utilization = opts.utilization ?? loopUtilization();
  }

  private heapUsed(): number {
    return (this.opts.heapUsed ?? (() => process.memoryUsage().heapUsed))();
  }

  /** One sample: collects when shouldCollect says so. */
  sample(): void {
    const used = this.heapUsed();
    const busy = this.utilization();
    if (this.waiting > 0) {
      this.waiting--;
      return;
    }
    if (shouldCollect(used, this.baseline, busy, this.opts.policy)) {
      (this.opts.gc ??= exposedGc())();
      this.collections++;
      const after = this.heapUsed();
      this.opts.onCollect?.(used, after);
      if (used - after >= (used - this.baseline) / 4) {
        // It gave the garbage back: grow from what is live now.
        this.baseline = after;
        this.patience = 1;
      } else {
        // Most of the growth was still live (a pause inside a burst, its data in flight): the mark
        // stays, and the collection is tried again later, each time later (2, 4 … 16 samples), so
        // a live set that really grew costs a collection every few minutes at most.
        this.patience = Math.min(this.patience * 2, 16);
        this.waiting = this.patience;
      }
      return;
    }
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
