// The simulation with canary rollouts: every service rolls out with update.canary 1 (autoPromote
// 5s) and the operator sometimes promotes by hand, under the same faults, with one more invariant
// (no replica but a canary steps before promotion). SIM_CANARY_SEEDS seeds (default 300) from
// SIM_FIRST. Replay one seed step by step with
//   SIM_SEED=<seed> SIM_TRACE=1 npx vitest run test/sim/sim-canary.test.ts
import { simulate } from './seeds.js';

simulate('test/sim/sim-canary.test.ts', 1, 1, { canary: true, seeds: Number(process.env.SIM_CANARY_SEEDS ?? 300) });
