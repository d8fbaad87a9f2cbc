// The simulation with the workload's breadth: beside app and side, a deployment `infra` with a
// global service (one replica per eligible node) and a stateful one (a named volume: one replica,
// never moved or re-placed, node_lost when its node is lost); drains are sometimes forced (stateful
// replicas stopped where they are, resumed once the node is uncordoned) and a blocked drain is
// forced or cancelled — under the same faults, with the invariants of BREADTH_*_INVARIANTS and
// BREADTH_LIVENESS (test/sim/invariants.ts). SIM_BREADTH_SEEDS seeds (default 300) from SIM_FIRST.
// Replay one seed step by step with
//   SIM_SEED=<seed> SIM_TRACE=1 npx vitest run test/sim/sim-breadth.test.ts
import { simulate } from './seeds.js';

simulate('test/sim/sim-breadth.test.ts', 1, 1, { breadth: true, seeds: Number(process.env.SIM_BREADTH_SEEDS ?? 300) });
