// The controllers a `jaco controller <name>|all` process can run. Each entry starts one
// leader-elected controller and returns a handle to stop it.
import type { ControllerContext } from '../src/runtime/controller.js';
import { startScheduler } from './scheduler/controller.js';
import { startDrainController } from './drain/index.js';
import { startRolloutController } from './rollout/index.js';
import { startRebalancer } from './rebalancer/controller.js';

export interface ControllerHandle {
  name: string;
  stop(): Promise<void>;
  /** For /healthz: informers synced, leading or standing by. */
  health(): { synced: boolean; leader: boolean };
}

export type ControllerFactory = (ctx: ControllerContext) => Promise<ControllerHandle>;

/** Controllers in start order. */
export const CONTROLLERS: Record<string, ControllerFactory> = {
  scheduler: startScheduler,
  rollout: startRolloutController,
  drain: startDrainController,
  rebalancer: startRebalancer,
};
