// The rollout controller: the pure core (decide.ts) on the shared runtime. It owns the revision of
// existing replicas, rollouts/<deployment>/<service>, and deploymentstatus/<name>.status.rollout.
import type { Deployment, DeploymentRevision, DeploymentStatus, DisruptionLedger, Heartbeat, ReplicaCommand, RolloutPlan } from '../../src/api/types.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import { byRest, valuesByRest, type Cache } from '../../src/runtime/cache.js';
import type { SourceState } from '../../src/store/reflector.js';
import type { ControllerSpec } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { decide, type MetricEvent, type RolloutDecision, type RolloutSnapshot } from './decide.js';
import { countMetric, rolloutMetrics } from './metrics.js';

const READS = ['deployments', 'revisions', 'desired', 'observed', 'commands', 'heartbeats', 'counters', 'rollouts', 'statuses', 'disruptions'] as const;

/** Mod revisions of a source's keys, by what follows its prefix (the completion's evidence, evidence.ts). */
function revisionsByRest(s: SourceState<unknown>): Map<string, number> {
  return new Map([...s.items.values()].map((v) => [s.rest(v.key), v.modRevision]));
}

export function rolloutSnapshot(cache: Cache): RolloutSnapshot {
  return {
    deployments: byRest(cache.kind<Deployment>('deployments')),
    revisions: new Map([...cache.kind<DeploymentRevision>('revisions').items].map(([k, v]) => [k, v.value])),
    replicas: cache.index(REPLICAS),
    commands: cache.kind<ReplicaCommand>('commands').items,
    ledgers: byRest(cache.kind<DisruptionLedger>('disruptions')),
    heartbeats: valuesByRest(cache.kind<Heartbeat>('heartbeats')),
    heartbeatRevisions: revisionsByRest(cache.kind('heartbeats')),
    counterRevisions: revisionsByRest(cache.kind('counters')),
    plans: byRest(cache.kind<RolloutPlan>('rollouts')),
    statuses: byRest(cache.kind<DeploymentStatus>('statuses')),
  };
}

/** The rollout controller as the runtime runs it (`jaco controller rollout|all`). */
export function rolloutController(timings: Timings): ControllerSpec<undefined, RolloutSnapshot, MetricEvent, RolloutDecision> {
  return {
    name: 'rollout',
    reads: READS,
    initialState: () => undefined,
    snapshot: ({ cache }) => rolloutSnapshot(cache),
    decide: (_state, snap, now) => decide(snap, now, { stepTimeoutMs: timings.stepTimeoutMs }),
    countMetric,
    afterPass: (_state, d) => rolloutMetrics.inProgress.set(d.inProgress),
    leadershipChanged: (leading) => leading || rolloutMetrics.inProgress.set(0),
  };
}
