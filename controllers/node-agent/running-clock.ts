// How long each of the agent's containers has been running, on its monotonic clock: Docker's start
// stamp is on the host's wall clock, which may step (NTP, a hand `date -s`); a duration taken
// between two wall-clock readings across a step is wrong by the step (issue 29: durations measured
// on one clock). A container is anchored when first seen running — by what the wall clock says it
// has run so far, never less than nothing — and measured on the monotonic clock from then on.
import type { ContainerFacts } from './facts.js';

/** The agent's monotonic clock (ms): every duration it measures is taken on it, never between two wall-clock readings. */
export const monotonicNow = (): number => performance.now();

export class RunningClock {
  /** Per container: the start stamp it was anchored for, and its start on the monotonic clock. */
  private readonly since = new Map<string, { startedAt: string; mono: number }>();

  constructor(private readonly mono: () => number = monotonicNow) {}

  /** The containers, each running one with its runningForMs; `wall` is the agent's wall clock now. */
  stamp(containers: readonly ContainerFacts[], wall: number): ContainerFacts[] {
    const m = this.mono();
    const seen = new Set<string>();
    const out = containers.map((c) => {
      if (c.state !== 'running' || !c.startedAt) return c;
      seen.add(c.id);
      let s = this.since.get(c.id);
      // A new start of the same container (a restart) is a new stamp: anchored afresh.
      if (s?.startedAt !== c.startedAt) this.since.set(c.id, (s = { startedAt: c.startedAt, mono: m - Math.max(0, wall - Date.parse(c.startedAt)) }));
      return { ...c, runningForMs: m - s.mono };
    });
    for (const id of this.since.keys()) if (!seen.has(id)) this.since.delete(id);
    return out;
  }
}
