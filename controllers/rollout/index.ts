// The rollout controller's shell: informers in, the pure core (decide.ts) in the middle, fenced
// CAS writes out (src/runtime/decide-controller.ts). It owns the revision of existing replicas,
// rollouts/<deployment>/<service>, and deploymentstatus/<name>.status.rollout.
import { informersFor } from '../../src/runtime/informers.js';
import type { Deployment, DeploymentRevision, DeploymentStatus, Heartbeat, ReplicaCommand, ReplicaDesired, ReplicaObserved, RolloutPlan } from '../../src/api/types.js';
import type { Controller, ControllerContext } from '../../src/runtime/controller.js';
import { startDecideController } from '../../src/runtime/decide-controller.js';
import type { ControllerHandle } from '../index.js';
import { decide, type MetricEvent, type RolloutSnapshot } from './decide.js';
import { countMetric, rolloutMetrics } from './metrics.js';

const INFORMERS = informersFor('deployments', 'revisions', 'desired', 'observed', 'commands', 'heartbeats', 'rollouts', 'statuses');

export function rolloutSnapshot(c: Controller): RolloutSnapshot {
  return {
    deployments: c.informer<Deployment>('deployments').versionedByRest(),
    revisions: new Map([...c.informer<DeploymentRevision>('revisions').items].map(([k, v]) => [k, v.value])),
    desired: [...c.informer<ReplicaDesired>('desired').items.values()],
    observed: c.informer<ReplicaObserved>('observed').valuesByRest(),
    commands: c.informer<ReplicaCommand>('commands').valuesByRest(),
    heartbeats: c.informer<Heartbeat>('heartbeats').valuesByRest(),
    plans: c.informer<RolloutPlan>('rollouts').versionedByRest(),
    statuses: c.informer<DeploymentStatus>('statuses').versionedByRest(),
  };
}

/** The factory `jaco controller rollout|all` runs. */
export function startRolloutController(ctx: ControllerContext): Promise<ControllerHandle> {
  return startDecideController<MetricEvent>(ctx, {
    name: 'rollout',
    informers: INFORMERS,
    decide: (c, now) => decide(rolloutSnapshot(c), now, { stepTimeoutMs: ctx.timings.stepTimeoutMs }),
    countMetric,
    setInProgress: (n) => rolloutMetrics.inProgress.set(n),
  });
}
