// The drain controller's shell: informers in, the pure core (decide.ts) in the middle, fenced CAS
// writes out (src/runtime/decide-controller.ts). It owns drains/<host>.status, the host of replicas
// on a draining node (through the move mechanism), their spec.suspended, and removing a drained node.
import { keys } from '../../src/api/keys.js';
import type { Heartbeat, Node, NodeDrain, ReplicaDesired, ReplicaObserved, VolumeHome } from '../../src/api/types.js';
import type { Controller, ControllerContext } from '../../src/runtime/controller.js';
import { startDecideController } from '../../src/runtime/decide-controller.js';
import type { Versioned } from '../../src/store/store.js';
import type { ControllerHandle } from '../index.js';
import { decide, type DrainMetricEvent, type DrainSnapshot } from './decide.js';
import { countDrainMetric, drainMetrics } from './metrics.js';

const INFORMERS = {
  drains: { prefix: keys.drains(), kind: 'NodeDrain' },
  nodes: { prefix: keys.nodes(), kind: 'Node' },
  heartbeats: { prefix: keys.heartbeats(), kind: 'Heartbeat' },
  desired: { prefix: keys.desiredOf(), kind: 'ReplicaDesired' },
  observed: { prefix: keys.observedOf(), kind: 'ReplicaObserved' },
  volumes: { prefix: keys.volumeHomes(), kind: 'VolumeHome' },
} as const;

export function drainSnapshot(c: Controller): DrainSnapshot {
  const all = <T>(name: keyof typeof INFORMERS) => [...c.informer<T>(name).items.values()];
  // Keyed by what follows the prefix: a host, or `<node>/<replica>`.
  const rest = (name: keyof typeof INFORMERS, v: Versioned<unknown>) => v.key.slice(INFORMERS[name].prefix.length);
  return {
    drains: all<NodeDrain>('drains'),
    nodes: new Map(all<Node>('nodes').map((n) => [rest('nodes', n), n])),
    heartbeats: new Map(all<Heartbeat>('heartbeats').map((h) => [rest('heartbeats', h), h.value])),
    desired: all<ReplicaDesired>('desired'),
    observed: new Map(all<ReplicaObserved>('observed').map((o) => [rest('observed', o), o.value])),
    volumeHomes: all<VolumeHome>('volumes').map((v) => v.value),
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
