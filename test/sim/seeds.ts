// Runs a range of the simulation's seeds as one test (sim.test.ts and sim-2.test.ts each run half
// of `make test`'s seeds, so vitest runs them on both cores). A failure names its seed and the
// command that replays it step by step.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimClock } from './clock.js';
import { Sim, SimFailure } from './world.js';

export const ALL_SEEDS = Number(process.env.SIM_SEEDS ?? 2000);
/** The first seed (a long run can go on where another stopped: SIM_FIRST=20001 SIM_SEEDS=30000). */
const FIRST = Number(process.env.SIM_FIRST ?? 1);
const ONLY = process.env.SIM_SEED ? Number(process.env.SIM_SEED) : undefined;
const BASE_OPTIONS = { nodes: 4, steps: 550, quietSteps: 300, trace: process.env.SIM_TRACE === '1' };

/** The runtime's timers (reflector back-off and consistency check, runner ticks) on the simulated clock. */
const timers = new SimClock();

/** Every fault kind must fire in a run this long (a fault that never fires proves nothing). */
/** And in the breadth variant, the operator's drain actions it adds. */
const BREADTH_KINDS = ['forced drain', 'drain forced in progress', 'drain cancelled', 'non-JSON value'];
/** And in the stepped variant, a fault between two steps of one pass. */
const STEPPED_KINDS = ['fault between the steps of a pass'];
const KINDS = ['node clock offset', 'stale decision', 'lost reply', 'operator between decision and commit', 'leadership lost', 'controller process restart', 'cache lags', 'watch disconnect', 'watch gap', 'compaction', 'malformed value', 'agent dies', 'secret rotated', 'node re-keyed', 'cluster key rotated'];

/** Runs shard `shard` (1-based) of `shards` of the SIM_SEEDS seeds from SIM_FIRST; SIM_SEED runs that one seed instead. */
export function simulate(file: string, shard: number, shards: number, variant: { canary?: boolean; breadth?: boolean; stepped?: boolean; seeds?: number } = {}): void {
  const SEEDS = variant.seeds ?? ALL_SEEDS;
  const OPTIONS = { ...BASE_OPTIONS, ...(variant.canary ? { canary: true } : {}), ...(variant.breadth ? { breadth: true } : {}), ...(variant.stepped ? { stepped: true } : {}) };
  describe(`deterministic simulation${variant.canary ? ' (canary rollouts)' : ''}${variant.breadth ? ' (global and stateful services, forced drains)' : ''}${variant.stepped ? ' (passes committed step by step)' : ''}`, () => {
    beforeAll(() => timers.install());
    afterAll(() => timers.uninstall());

    const per = Math.ceil(SEEDS / shards);
    const from = FIRST + (shard - 1) * per;
    const to = FIRST - 1 + Math.min(SEEDS, shard * per);
    const seeds = ONLY !== undefined ? [ONLY] : Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);

    it(`${ONLY !== undefined ? `seed ${ONLY}` : `seeds ${from}–${to}`}: invariants hold every step and the cluster converges once faults stop`, async () => {
      expect(seeds.length).toBeGreaterThan(0);
      const t0 = performance.now();
      const failures: string[] = [];
      const injected = new Map<string, number>();
      let slowest = { seed: 0, ms: 0 };
      let longestQuiet = { seed: 0, ms: 0 };
      for (const seed of seeds) {
        const sim = new Sim(seed, OPTIONS, timers);
        const s0 = performance.now();
        try {
          await sim.run();
          const ms = performance.now() - s0;
          if (ms > slowest.ms) slowest = { seed, ms };
          if (sim.quietMs > longestQuiet.ms) longestQuiet = { seed, ms: sim.quietMs };
        } catch (e) {
          if (!(e instanceof SimFailure)) throw new Error(`seed ${seed}: ${(e as Error).stack}\n${sim.trace.slice(-30).join('\n')}`);
          failures.push(`${e.message}\n  last steps:\n    ${sim.trace.slice(-15).join('\n    ')}\n  replay: SIM_SEED=${seed} SIM_TRACE=1 npx vitest run ${file}`);
        }
        for (const [k, n] of sim.injected) injected.set(k, (injected.get(k) ?? 0) + n);
        // Long runs report as they go (a run cut short still says how far it got).
        const done = seed - seeds[0]! + 1;
        if (seeds.length >= 4000 && done % 1000 === 0)
          console.log(`[sim ${shard}/${shards}] ${done} of ${seeds.length} seeds in ${((performance.now() - t0) / 1000).toFixed(0)} s; ${failures.length} failed${failures.length ? `: ${failures.map((f) => f.split('\n')[0]).join(' | ')}` : ''}`);
      }
      const ms = performance.now() - t0;
      console.log(
        `[sim ${shard}/${shards}] ${seeds.length} seeds × ${OPTIONS.steps} steps in ${(ms / 1000).toFixed(1)} s (${((seeds.length * 1000) / ms).toFixed(1)} seeds/s); ${failures.length} failed; ` +
          `slowest seed ${slowest.seed} (${slowest.ms.toFixed(0)} ms); longest convergence after faults: seed ${longestQuiet.seed} (${(longestQuiet.ms / 1000).toFixed(0)} s simulated)\n` +
          `[sim ${shard}/${shards}] faults injected: ${[...injected].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`,
      );
      if (seeds.length >= 200) for (const kind of [...KINDS, ...(variant.breadth ? BREADTH_KINDS : []), ...(variant.stepped ? STEPPED_KINDS : [])]) expect(injected.get(kind) ?? 0, kind).toBeGreaterThan(0);
      if (seeds.length >= 400) expect(injected.get('oversized spec') ?? 0, 'oversized spec').toBeGreaterThan(0);
      expect(failures.slice(0, 3).join('\n\n')).toBe('');
    }, 1_800_000);
  });
}
