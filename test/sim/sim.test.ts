// The simulation in `make test`: SIM_SEEDS seeds (default 2,000; `make sim SEEDS=100000` for long runs) of every controller and simulated
// agents under faults, then a quiet window in which everything must converge. A failure names its
// seed; replay one step by step with
//   SIM_SEED=<seed> SIM_TRACE=1 npx vitest run --project sim
import { describe, expect, it } from 'vitest';
import { Sim, SimFailure } from './world.js';

const SEEDS = Number(process.env.SIM_SEEDS ?? 2000);
const ONLY = process.env.SIM_SEED ? Number(process.env.SIM_SEED) : undefined;
const OPTIONS = { nodes: 4, steps: 550, quietSteps: 300, trace: process.env.SIM_TRACE === '1' };

describe('deterministic simulation', () => {
  it(`${ONLY !== undefined ? `seed ${ONLY}` : `${SEEDS} seeds`}: invariants hold every step and the cluster converges once faults stop`, () => {
    const seeds = ONLY !== undefined ? [ONLY] : Array.from({ length: SEEDS }, (_, i) => i + 1);
    const t0 = performance.now();
    const failures: string[] = [];
    let slowest = { seed: 0, ms: 0 };
    let longestQuiet = { seed: 0, ms: 0 };
    for (const seed of seeds) {
      const sim = new Sim(seed, OPTIONS);
      const s0 = performance.now();
      try {
        sim.run();
        const ms = performance.now() - s0;
        if (ms > slowest.ms) slowest = { seed, ms };
        if (sim.quietMs > longestQuiet.ms) longestQuiet = { seed, ms: sim.quietMs };
      } catch (e) {
        if (!(e instanceof SimFailure)) throw new Error(`seed ${seed}: ${(e as Error).stack}\n${sim.trace.slice(-30).join('\n')}`);
        failures.push(`${e.message}\n  last steps:\n    ${sim.trace.slice(-15).join('\n    ')}\n  replay: SIM_SEED=${seed} SIM_TRACE=1 npx vitest run --project sim`);
      }
    }
    const ms = performance.now() - t0;
    console.log(
      `[sim] ${seeds.length} seeds × ${OPTIONS.steps} steps in ${(ms / 1000).toFixed(1)} s (${((seeds.length * 1000) / ms).toFixed(1)} seeds/s); ${failures.length} failed; ` +
        `slowest seed ${slowest.seed} (${slowest.ms.toFixed(0)} ms); longest convergence after faults: seed ${longestQuiet.seed} (${(longestQuiet.ms / 1000).toFixed(0)} s simulated)`,
    );
    expect(failures.slice(0, 3).join('\n\n')).toBe('');
  }, 600_000);
});
