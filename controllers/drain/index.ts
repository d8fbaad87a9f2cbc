// The drain controller: the pure core (decide.ts) on the shared runtime. It owns drains/<host>.status,
// the host of replicas on a draining node (through the move mechanism), their spec.suspended, and
// removing a drained node.
import { eligibilityRevisions } from '../placement/input.js';
import type { DisruptionLedger, Heartbeat, Node, NodeDrain, ReplicaCommand, VolumeHome } from '../../src/api/types.js';
import type { Cache } from '../../src/runtime/cache.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import type { ControllerSpec } from '../../src/runtime/runner.js';
import { byRest, valuesByRest } from '../../src/runtime/cache.js';
import type { Timings } from '../../src/timings.js';
import { decide, type DrainDecision, type DrainMetricEvent, type DrainSnapshot } from './decide.js';
import { countDrainMetric, drainMetrics } from './metrics.js';

const READS = ['drains', 'nodes', 'heartbeats', 'desired', 'observed', 'volumes', 'disruptions', 'commands'] as const;

export function drainSnapshot(cache: Cache): DrainSnapshot {
  return {
    drains: [...cache.kind<NodeDrain>('drains').items.values()],
    nodes: byRest(cache.kind<Node>('nodes')),
    heartbeats: valuesByRest(cache.kind<Heartbeat>('heartbeats')),
    replicas: cache.index(REPLICAS),
    ledgers: byRest(cache.kind<DisruptionLedger>('disruptions')),
    commands: cache.kind<ReplicaCommand>('commands').items,
    volumeHomes: [...cache.kind<VolumeHome>('volumes').items.values()].map((v) => v.value),
    eligibility: eligibilityRevisions(cache),
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
