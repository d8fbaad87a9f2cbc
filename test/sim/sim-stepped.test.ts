// The simulation with passes committed step by step: the scheduler decides service by service
// (runner.ts decideSteps) and each step's acts go out as they are decided, as they do live when a
// pass is large — so the faults between decision and commit (another controller's pass landing
// first, the operator acting, a lost reply, the leadership changing) also fall between two steps
// of one pass, with part of it landed. SIM_STEPPED_SEEDS seeds (default 300) from SIM_FIRST.
// Replay one seed step by step with
//   SIM_SEED=<seed> SIM_TRACE=1 npx vitest run test/sim/sim-stepped.test.ts
import { simulate } from './seeds.js';

simulate('test/sim/sim-stepped.test.ts', 1, 1, { stepped: true, seeds: Number(process.env.SIM_STEPPED_SEEDS ?? 300) });
