// The simulation's fake timers: setTimeout/setInterval and their clears, replaced on the global
// object while a simulation runs, and moved on only by the simulated clock. The runtime keeps ~10
// timers (runner safety ticks and wakes, the reflector's consistency check and watch back-off);
// vitest's fake timers (@sinonjs/fake-timers) cost ~8 % of a seed for them, this ~0.5 %. It keeps
// their order exactly — by due time, then creation; a timer set to 0 while timers run is due 1 ms
// later; an interval is due again `interval` after it was due — so a seed's trace is the same
// under either.
import type { SimTimers } from './world.js';

interface Timer {
  id: number;
  callAt: number;
  interval?: number;
  fn: (...args: unknown[]) => void;
  args: unknown[];
}

/** What setTimeout returns in Node: an object that clearTimeout takes back (ref/unref are no-ops here). */
class Handle {
  constructor(readonly id: number) {}
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  hasRef(): boolean {
    return true;
  }
  [Symbol.toPrimitive](): number {
    return this.id;
  }
}

const MAX_DELAY = 2 ** 31 - 1;

type Globals = Pick<typeof globalThis, 'setTimeout' | 'clearTimeout' | 'setInterval' | 'clearInterval'>;

export class SimClock implements SimTimers {
  private now = 0;
  private nextId = 1;
  private running = false;
  private readonly timers = new Map<number, Timer>();
  private saved?: Globals;

  /** Puts the fake timers in place of the global ones (until uninstall). */
  install(): void {
    if (this.saved) return;
    const g = globalThis as unknown as Globals;
    this.saved = { setTimeout: g.setTimeout, clearTimeout: g.clearTimeout, setInterval: g.setInterval, clearInterval: g.clearInterval };
    const add = (fn: unknown, delay: unknown, args: unknown[], interval: boolean) => {
      if (typeof fn !== 'function') throw new TypeError('Callback must be a function');
      let ms = Number(delay);
      if (!Number.isFinite(ms)) ms = 0;
      ms = Math.max(0, ms > MAX_DELAY ? 1 : Math.floor(ms));
      const id = this.nextId++;
      this.timers.set(id, { id, callAt: this.now + (ms || (this.running ? 1 : 0)), ...(interval ? { interval: ms } : {}), fn: fn as Timer['fn'], args });
      return new Handle(id);
    };
    const clear = (h: unknown) => {
      if (h !== undefined && h !== null) this.timers.delete(Number(h));
    };
    Object.assign(globalThis, {
      setTimeout: (fn: unknown, delay?: unknown, ...args: unknown[]) => add(fn, delay, args, false),
      setInterval: (fn: unknown, delay?: unknown, ...args: unknown[]) => add(fn, delay, args, true),
      clearTimeout: clear,
      clearInterval: clear,
    });
  }

  uninstall(): void {
    if (!this.saved) return;
    Object.assign(globalThis, this.saved);
    this.saved = undefined;
    this.timers.clear();
  }

  reset(ms: number): void {
    this.timers.clear();
    this.now = ms;
  }

  get pending(): number {
    return this.timers.size;
  }

  advance(ms: number): void {
    const to = this.now + Math.floor(ms);
    this.running = true;
    let thrown: { e: unknown } | undefined;
    try {
      for (;;) {
        let next: Timer | undefined;
        for (const t of this.timers.values()) if (t.callAt <= to && (!next || t.callAt < next.callAt || (t.callAt === next.callAt && t.id < next.id))) next = t;
        if (!next) break;
        this.now = next.callAt;
        if (next.interval !== undefined) next.callAt += next.interval;
        else this.timers.delete(next.id);
        try {
          next.fn(...next.args);
        } catch (e) {
          thrown ??= { e }; // as vitest's: the other timers due still run, the first error is thrown after
        }
      }
    } finally {
      this.running = false;
    }
    this.now = to;
    if (thrown) throw thrown.e;
  }
}
