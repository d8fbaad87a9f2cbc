// The sample-gap tracker of the chaos report (test/chaos/gaps.ts): the longest time between two
// samples, its reasons counted once per cause, and an open streak counted up to now.
import { describe, expect, it } from 'vitest';
import { formatGap, reasonKey, SampleGaps } from './gaps.js';

describe('SampleGaps', () => {
  it('gives the longest gap between two samples with its reasons and probes', () => {
    const g = new SampleGaps(0);
    g.ok(1_000);
    expect(g.failed('etcd range desired/: 14 UNAVAILABLE: No connection established. Last error: read ECONNRESET (2026-11-25T13:32:01.761Z)')).toBe(true);
    expect(g.failed('etcd range desired/: 14 UNAVAILABLE: No connection established. Last error: read ECONNRESET (2026-11-25T13:32:02.100Z)')).toBe(false);
    g.probe('m0 ok, m1 down');
    expect(g.ok(4_000)).toMatchObject({ fromMs: 1_000, toMs: 4_000, ms: 3_000, failed: 2, open: false });
    g.failed('snapshot: no answer within 10 s from docker ps');
    g.probe('late'); // a probe of the next streak belongs to it
    g.ok(5_000);
    const longest = g.longest(6_000)!;
    expect(longest.ms).toBe(3_000);
    expect(longest.reasons).toEqual([['etcd range desired/: 14 UNAVAILABLE: No connection established. Last error: read ECONNRESET (…)', 2]]);
    expect(longest.probes).toEqual(['m0 ok, m1 down']);
    expect(formatGap(longest, 0)).toBe('3.0 s (t+1.0s–t+4.0s), 2 failed: 2× etcd range desired/: 14 UNAVAILABLE: No connection established. Last error: read ECONNRESET (…); probes: m0 ok, m1 down');
  });

  it('counts a streak that has not ended up to now', () => {
    const g = new SampleGaps(0);
    g.ok(1_000);
    g.failed('snapshot: no answer within 10 s from etcd range observed/ at the revision');
    expect(g.streakMs(61_000)).toBe(60_000);
    expect(g.longest(61_000)).toMatchObject({ ms: 60_000, open: true, failed: 1 });
    expect(formatGap(g.longest(61_000), 0)).toContain('still failing');
    expect(formatGap(undefined, 0)).toBe('none (every sample succeeded)');
  });

  it('keys a reason without its timestamps and revisions', () => {
    expect(reasonKey('a (2026-11-25T13:32:01.761Z)\nstack')).toBe('a (…)');
    expect(reasonKey('etcd range nodes/ at revision 812')).toBe('etcd range nodes/ at revision N');
  });
});
