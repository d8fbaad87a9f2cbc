// The rollout controller's shell: informers in, the pure core (decide.ts) in the middle, fenced
// CAS writes out (src/runtime/decide-controller.ts). It owns the revision of existing replicas,
// rollouts/<deployment>/<service>, and deploymentstatus/<name>.status.rollout.
import { keys } from '../../src/api/keys.js';
import type { Deployment, DeploymentRevision, DeploymentStatus, Heartbeat, ReplicaCommand, ReplicaDesired, ReplicaObserved, RolloutPlan } from '../../src/api/types.js';
import type { Controller, ControllerContext } from '../../src/runtime/controller.js';
import { startDecideController } from '../../src/runtime/decide-controller.js';
import type { Versioned } from '../../src/store/store.js';
import type { ControllerHandle } from '../index.js';
import { decide, type MetricEvent, type RolloutSnapshot } from './decide.js';
import { countMetric, rolloutMetrics } from './metrics.js';

const INFORMERS = {
  deployments: { prefix: keys.deployments(), kind: 'Deployment' },
  revisions: { prefix: keys.revisions(), kind: 'DeploymentRevision' },
  desired: { prefix: keys.desiredOf(), kind: 'ReplicaDesired' },
  observed: { prefix: keys.observedOf(), kind: 'ReplicaObserved' },
  commands: { prefix: keys.commandsOf(), kind: 'ReplicaCommand' },
  heartbeats: { prefix: keys.heartbeats(), kind: 'Heartbeat' },
  rollouts: { prefix: keys.rollouts(), kind: 'RolloutPlan' },
  statuses: { prefix: keys.deploymentStatuses(), kind: 'DeploymentStatus' },
} as const;

/** An informer's items keyed by what follows its prefix (a name, `<node>/<replica>`, `<deployment>/<service>`). */
function byRest<T, V>(c: Controller, name: keyof typeof INFORMERS, pick: (v: Versioned<T>) => V): Map<string, V> {
  const prefix = INFORMERS[name].prefix;
  return new Map([...c.informer<T>(name).items].map(([k, v]) => [k.slice(prefix.length), pick(v)]));
}

export function rolloutSnapshot(c: Controller): RolloutSnapshot {
  const versioned = <T>(v: Versioned<T>) => v;
  const value = <T>(v: Versioned<T>) => v.value;
  return {
    deployments: byRest<Deployment, Versioned<Deployment>>(c, 'deployments', versioned),
    revisions: new Map([...c.informer<DeploymentRevision>('revisions').items].map(([k, v]) => [k, v.value])),
    desired: [...c.informer<ReplicaDesired>('desired').items.values()],
    observed: byRest<ReplicaObserved, ReplicaObserved>(c, 'observed', value),
    commands: byRest<ReplicaCommand, ReplicaCommand>(c, 'commands', value),
    heartbeats: byRest<Heartbeat, Heartbeat>(c, 'heartbeats', value),
    plans: byRest<RolloutPlan, Versioned<RolloutPlan>>(c, 'rollouts', versioned),
    statuses: byRest<DeploymentStatus, Versioned<DeploymentStatus>>(c, 'statuses', versioned),
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
