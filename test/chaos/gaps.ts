// Streaks of failed samples in a chaos run. A sample is one read of `docker ps` and etcd; while
// etcd has no quorum (a member killed, a leader removed) a few fail, and that is expected. A long
// streak is not: once, a run took no sample for 60 s while every jaco process worked, and nothing
// said why. The checker notes every failed sample here with its reason (which read failed or hung)
// and what a probe of each etcd member, Docker and the checker's own etcd client found meanwhile;
// the run's report gives the longest gap between two samples and its causes.

export interface Gap {
  /** From the last sample before the streak (or the tracker's start) … */
  fromMs: number;
  /** … until the next sample (or now, while the streak lasts). */
  toMs: number;
  ms: number;
  /** Failed samples in between. */
  failed: number;
  /** Why they failed, each distinct reason with its count, most frequent first. */
  reasons: [string, number][];
  /** What the probes found while the streak lasted (at most MAX_PROBES, the first ones). */
  probes: string[];
  /** The streak had not ended when this was taken. */
  open: boolean;
}

const MAX_PROBES = 4;

/**
 * A reason without what varies between two tries of the same failure: gRPC's timestamps
 * ("Last error: … (2026-11-25T13:32:01.761Z)"), revisions and durations, so one cause counts once.
 */
export function reasonKey(message: string): string {
  return message
    .split('\n')[0]!
    .replace(/\(\d{4}-\d\d-\d\dT[\d:.]+Z\)/g, '(…)')
    .replace(/\b(rev(?:ision)?) \d+/g, '$1 N')
    .replace(/\bafter \d+ ms\b/g, 'after N ms')
    .slice(0, 200);
}

export class SampleGaps {
  private lastOk: number;
  private streak?: { failed: number; reasons: Map<string, number>; probes: string[] };
  private closed?: Gap;

  constructor(start: number) {
    this.lastOk = start;
  }

  /** A sample was taken at `at`: the streak before it (if any) ends; returns it. */
  ok(at: number): Gap | undefined {
    const s = this.streak;
    const gap = s ? this.gap(at, false) : undefined;
    if (gap && (!this.closed || gap.ms > this.closed.ms)) this.closed = gap;
    this.streak = undefined;
    this.lastOk = at;
    return gap;
  }

  /** A sample failed for `reason`; true when it starts a streak. */
  failed(reason: string): boolean {
    const first = !this.streak;
    this.streak ??= { failed: 0, reasons: new Map(), probes: [] };
    this.streak.failed++;
    const k = reasonKey(reason);
    this.streak.reasons.set(k, (this.streak.reasons.get(k) ?? 0) + 1);
    return first;
  }

  /** What a probe found during the current streak (ignored once it has ended). */
  probe(found: string): void {
    if (this.streak && this.streak.probes.length < MAX_PROBES) this.streak.probes.push(found);
  }

  /** How long the current streak has lasted (0 without one). */
  streakMs(at: number): number {
    return this.streak ? at - this.lastOk : 0;
  }

  /** The longest gap so far, the current streak included (counted up to `at`). */
  longest(at: number): Gap | undefined {
    const open = this.streak ? this.gap(at, true) : undefined;
    if (open && (!this.closed || open.ms > this.closed.ms)) return open;
    return this.closed;
  }

  private gap(at: number, open: boolean): Gap {
    const s = this.streak!;
    return { fromMs: this.lastOk, toMs: at, ms: at - this.lastOk, failed: s.failed, reasons: [...s.reasons].sort((a, b) => b[1] - a[1]), probes: [...s.probes], open };
  }
}

/** One line for a report: times relative to the run's start `t0`. */
export function formatGap(g: Gap | undefined, t0: number): string {
  if (!g) return 'none (every sample succeeded)';
  const t = (ms: number) => `t+${((ms - t0) / 1000).toFixed(1)}s`;
  const why = g.reasons.map(([r, n]) => `${n}× ${r}`).join('; ');
  const probes = g.probes.length ? `; probes: ${g.probes.join(' / ')}` : '';
  return `${(g.ms / 1000).toFixed(1)} s (${t(g.fromMs)}–${t(g.toMs)}${g.open ? ', still failing' : ''}), ${g.failed} failed: ${why}${probes}`;
}
