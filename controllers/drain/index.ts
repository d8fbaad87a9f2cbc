// The drain controller's shell: informers in, the pure core (decide.ts) in the middle, fenced CAS
// writes out (src/runtime/decide-controller.ts). It owns drains/<host>.status, the host of replicas
// on a draining node (through the move mechanism), their spec.suspended, and removing a drained node.
import { informersFor } from '../../src/runtime/informers.js';
import type { Heartbeat, Node, NodeDrain, ReplicaDesired, ReplicaObserved, VolumeHome } from '../../src/api/types.js';
import type { Controller, ControllerContext } from '../../src/runtime/controller.js';
import { startDecideController } from '../../src/runtime/decide-controller.js';
import type { ControllerHandle } from '../index.js';
import { decide, type DrainMetricEvent, type DrainSnapshot } from './decide.js';
import { countDrainMetric, drainMetrics } from './metrics.js';

const INFORMERS = informersFor('drains', 'nodes', 'heartbeats', 'desired', 'observed', 'volumes');

export function drainSnapshot(c: Controller): DrainSnapshot {
  const all = <T>(name: keyof typeof INFORMERS) => [...c.informer<T>(name).items.values()];
  return {
    drains: all<NodeDrain>('drains'),
    nodes: c.informer<Node>('nodes').versionedByRest(),
    heartbeats: c.informer<Heartbeat>('heartbeats').valuesByRest(),
    desired: all<ReplicaDesired>('desired'),
    observed: c.informer<ReplicaObserved>('observed').valuesByRest(),
    volumeHomes: c.informer<VolumeHome>('volumes').values(),
  };
}

/** The factory `jaco controller drain|all` runs. */
export function startDrainController(ctx: ControllerContext): Promise<ControllerHandle> {
  return startDecideController<DrainMetricEvent>(ctx, {
    name: 'drain',
    informers: INFORMERS,
    decide: (c, now) => decide(drainSnapshot(c), now, { drainTimeoutMs: ctx.timings.drainTimeoutMs }),
    countMetric: countDrainMetric,
    setInProgress: (n) => drainMetrics.inProgress.set(n),
  });
}
