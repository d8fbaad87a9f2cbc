// The simulation in `make test`, second half of its seeds: see sim.test.ts.
import { simulate } from './seeds.js';

simulate('test/sim/sim-2.test.ts', 2, 2);
