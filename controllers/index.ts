// The controllers a `jaco controller <name>|all` process can run, in start order: each is a spec
// the runtime's manager runs on the process's one cache.
import type { ControllerSpec } from '../src/runtime/runner.js';
import type { Timings } from '../src/timings.js';
import { drainController } from './drain/index.js';
import { rebalancerController } from './rebalancer/controller.js';
import { rolloutController } from './rollout/index.js';
import { schedulerController } from './scheduler/controller.js';

export const CONTROLLERS: Record<string, (timings: Timings) => ControllerSpec<any, any, any, any>> = {
  scheduler: (t) => schedulerController(t),
  rollout: rolloutController,
  drain: drainController,
  rebalancer: (t) => rebalancerController(t),
};
