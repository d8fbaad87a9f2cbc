// The bounded chaos run of `make test`: a real 3-member etcd, two `jaco controller all` copies,
// three agents on the local Docker engine, three deployments being rolled out, scaled and drained,
// and ~45 s of seeded faults (test/chaos/chaos.ts). Every invariant holds throughout, and the
// cluster converges within 60 s once the faults stop. CHAOS_SEED=<n> replays a seed's schedule;
// CHAOS_TRACE=1 prints each fault and operator action as it happens.
import { afterAll, describe, expect, it } from 'vitest';
import { FAULT_KINDS, formatReport, runChaos } from './chaos.js';
import { formatGap } from './gaps.js';
import type { ChaosCluster } from './cluster.js';

const seed = Number(process.env.CHAOS_SEED ?? 11);
let cluster: ChaosCluster | undefined;
afterAll(async () => {
  await cluster?.stop({ keepLogs: true }); // after a timeout too: nothing of the run outlives it (a no-op once stopped)
});

describe('chaos on real etcd, controllers, agents and Docker', () => {
  it(`seed ${seed}: 0 invariant violations under faults, converged within 60 s after`, async () => {
    const report = await runChaos({ seed, chaosMs: 45_000, maxFaults: 30, convergeMs: 60_000, log: (l) => process.env.CHAOS_TRACE && console.log(l) }, (c) => (cluster = c));
    console.log(formatReport(report));
    // A failure says what blocked the samples, if any did: the longest gap, its reasons and probes.
    const trace = `longest time without a sample: ${formatGap(report.longestGap, report.t0)}\n${report.trace.join('\n')}`;
    expect(Object.values(report.faults).reduce((a, n) => a + n, 0), trace).toBeGreaterThanOrEqual(10);
    // Every kind of fault was dealt at least once (the deck deals each within one deck's draws).
    expect(FAULT_KINDS.filter(([k]) => !report.faults[k]).map(([k]) => k), trace).toEqual([]);
    expect(report.violations, trace).toEqual([]);
    // The minority member refused what it was asked; a cut node's replicas were re-placed while it was away.
    expect(report.minorityProbes.length).toBeGreaterThan(0);
    expect(report.nodeCuts.filter((c) => c.replacedMs === undefined), trace).toEqual([]);
    // The act-level checks ran on the real run: placements and controller writes were checked.
    expect(report.acts.placements).toBeGreaterThan(0);
    expect(report.acts.removals).toBeGreaterThan(0);
    expect(report.acts.writes).toBeGreaterThan(0);
    expect(report.acts.unverifiable).toBe(0);
    expect(report.convergeMs, `not converged: ${report.lastNotConverged}\n${trace}`).toBeDefined();
    expect(report.convergeMs!).toBeLessThanOrEqual(60_000);
  });
});
