// The simulation in `make test`, first half of its seeds (sim-2.test.ts runs the other half on the
// other core): SIM_SEEDS seeds (default 2,000; `make sim SEEDS=100000` for long runs) of two
// controller processes (the runtime's real Manager, Reflector, Cache and Runners) and simulated
// agents under faults, then a quiet window in which everything must converge. Replay one seed
// step by step with
//   SIM_SEED=<seed> SIM_TRACE=1 npx vitest run test/sim/sim.test.ts
import { simulate } from './seeds.js';

simulate('test/sim/sim.test.ts', 1, 2);
