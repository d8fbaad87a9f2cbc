// The drain controller: the pure core (decide.ts) on the shared runtime. It owns drains/<host>.status,
// the host of replicas on a draining node (through the move mechanism), their spec.suspended, and
// removing a drained node.
import type { NodeDrain } from '../../src/api/types.js';
import type { Cache } from '../../src/runtime/cache.js';
import { nodesOf } from '../../src/runtime/nodes.js';
import type { ControllerSpec } from '../../src/runtime/runner.js';
import { MOVER_READS, moverView } from '../moves/move.js';
import type { Timings } from '../../src/timings.js';
import { decide, type DrainDecision, type DrainMetricEvent, type DrainSnapshot } from './decide.js';
import { countDrainMetric, drainMetrics } from './metrics.js';

const READS = MOVER_READS;

export function drainSnapshot(cache: Cache): DrainSnapshot {
  return {
    ...moverView(cache),
    drains: [...cache.kind<NodeDrain>('drains').items.values()],
    nodes: nodesOf(cache),
  };
}

/** The drain controller as the runtime runs it (`jaco controller drain|all`). */
export function drainController(timings: Timings): ControllerSpec<undefined, DrainSnapshot, DrainMetricEvent, DrainDecision> {
  return {
    name: 'drain',
    reads: READS,
    initialState: () => undefined,
    snapshot: ({ cache }) => drainSnapshot(cache),
    decide: (_state, snap, now) => decide(snap, now, { drainTimeoutMs: timings.drainTimeoutMs }),
    countMetric: countDrainMetric,
    afterPass: (_state, d) => drainMetrics.inProgress.set(d.inProgress),
    leadershipChanged: (leading) => leading || drainMetrics.inProgress.set(0),
  };
}
