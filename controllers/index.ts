// The controllers a `jaco controller <name>|all` process can run, in start order: each is a spec
// the runtime's manager runs on the process's one cache.
import type { ControllerSpec } from '../src/runtime/runner.js';
import type { Timings } from '../src/timings.js';
import { clockController } from './clock/controller.js';
import { drainController } from './drain/index.js';
import { rebalancerController } from './rebalancer/controller.js';
import { rolloutController } from './rollout/index.js';
import { schedulerController } from './scheduler/controller.js';
import { secretsController, type SecretsOptions } from './secrets/controller.js';

/** What a controller process is given besides its timings (flags of `jaco controller`). */
export interface ControllerOptions {
  secrets?: SecretsOptions;
}

export const CONTROLLERS: Record<string, (timings: Timings, opts?: ControllerOptions) => ControllerSpec<any, any, any, any>> = {
  scheduler: (t) => schedulerController(t),
  rollout: (t) => rolloutController(t),
  drain: (t) => drainController(t),
  rebalancer: (t) => rebalancerController(t),
  secrets: (t, o) => secretsController(t, o?.secrets),
  clock: (t) => clockController(t),
};
