import { describe, expect, it } from 'vitest';
import { specHash, withDefaults } from '../../src/api/spec.js';
import { API_VERSION, type Deployment, type DeploymentStatus, type ReplicaDesired, type ReplicaObserved, type RolloutPlan, type ServiceSpec } from '../../src/api/types.js';
import { rolloutProgress, type ProgressInput } from './progress.js';

const spec: ServiceSpec = { image: 'img:2', replicas: 2, healthcheck: { test: ['CMD', 'true'] } };
const H = specHash(spec);
const dep = (generation: number): Deployment => ({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name: 'app', generation }, spec: { services: { web: spec } } });
const status = (appliedRevision: number, scheduling?: NonNullable<DeploymentStatus['status']>['scheduling']): DeploymentStatus => ({
  apiVersion: API_VERSION,
  kind: 'DeploymentStatus',
  metadata: { name: 'app' },
  status: { rollout: { appliedRevision, updatedAt: '2025-01-01T00:00:00Z', services: {} }, ...(scheduling ? { scheduling } : {}) },
});
function replica(i: number, obs: Partial<NonNullable<ReplicaObserved['status']>> | undefined, hash = H): ProgressInput['replicas'][number] {
  const id = `app-web-${i}`;
  const desired: ReplicaDesired = {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: id },
    spec: { replica: id, deployment: 'app', service: 'web', node: 'n1', index: i, revision: 2, specHash: hash, template: withDefaults(spec), placedAt: '2025-01-01T00:00:00Z' },
  };
  const observed: ReplicaObserved | undefined = obs && {
    apiVersion: API_VERSION,
    kind: 'ReplicaObserved',
    metadata: { name: id },
    status: { replica: id, node: 'n1', deployment: 'app', service: 'web', state: 'running', revision: 2, specHash: hash, health: 'healthy', observedAt: '2025-01-01T00:00:00Z', ...obs },
  };
  return { desired, observed };
}
const plan = (p: Partial<RolloutPlan['spec']>): RolloutPlan => ({
  apiVersion: API_VERSION,
  kind: 'RolloutPlan',
  metadata: { name: 'app-web' },
  spec: { deployment: 'app', service: 'web', fromRevision: 1, toRevision: 2, fromHash: 'h1', toHash: H, totalSteps: 2, currentStep: 1, state: 'in_progress', startedAt: '2025-01-01T00:00:00Z', steps: [], ...p },
});
const healthy = [replica(0, {}), replica(1, {})];

describe('rolloutProgress', () => {
  it.each<[string, Omit<ProgressInput, 'now'>, string, string]>([
    ['no deployment', { plans: [], replicas: [] }, 'missing', ''],
    ['the controller has not applied the revision yet', { deployment: dep(2), status: status(1), plans: [], replicas: healthy }, 'progressing', '2 of 2 replicas ready'],
    ['applied and every replica ready', { deployment: dep(2), status: status(2), plans: [], replicas: healthy }, 'complete', '2 of 2 replicas ready'],
    ['applied, one replica still starting', { deployment: dep(2), status: status(2), plans: [], replicas: [replica(0, {}), replica(1, { state: 'starting', health: 'starting' })] }, 'progressing', '1 of 2 replicas ready'],
    ['applied, one replica observed at another spec', { deployment: dep(2), status: status(2), plans: [], replicas: [replica(0, {}), replica(1, { specHash: 'h1' })] }, 'progressing', '1 of 2 replicas ready'],
    [
      'a step in flight',
      { deployment: dep(2), status: status(1), plans: [plan({ steps: [{ replica: 'app-web-0', node: 'n1', startedAt: '2025-01-01T00:00:00Z' }] })], replicas: healthy },
      'progressing',
      'rolling revision 1 → 2: step 1 of 2 (app-web-0 on n1), 2 of 2 updated',
    ],
    [
      'aborted at this revision',
      { deployment: dep(2), status: status(1), plans: [plan({ state: 'aborted', failureReason: 'image_pull_failed' })], replicas: [replica(0, {}, 'h1'), replica(1, {})] },
      'aborted',
      'rollout to revision 2 aborted at step 1 of 2 (image_pull_failed: the new image could not be pulled (the node-agent reported image_pull_failed)); revision 1 keeps serving, 1 replica(s) going back; 2 of 2 replicas ready',
    ],
    [
      'two steps in flight (parallelism 2)',
      {
        deployment: dep(2),
        status: status(1),
        plans: [plan({ currentStep: 2, steps: [{ replica: 'app-web-0', node: 'n1', startedAt: '2025-01-01T00:00:00Z' }, { replica: 'app-web-1', node: 'n2', startedAt: '2025-01-01T00:00:00Z' }] })],
        replicas: healthy,
      },
      'progressing',
      'rolling revision 1 → 2: step 2 of 2 (app-web-0 on n1, app-web-1 on n2), 2 of 2 updated',
    ],
    [
      'paused by the operator: still progressing',
      { deployment: dep(2), status: status(1), plans: [plan({ state: 'paused', pausedAt: '2025-01-01T00:00:00Z' })], replicas: healthy },
      'progressing',
      'rollout to revision 2 paused at step 1 of 2 by the operator; jaco rollout resume to go on; 2 of 2 replicas ready',
    ],
    [
      'paused after a failure (failureAction pause)',
      { deployment: dep(2), status: status(1), plans: [plan({ state: 'paused', pausedAt: '2025-01-01T00:00:00Z', failureReason: 'step_timeout' })], replicas: healthy },
      'paused',
      'rollout to revision 2 paused at step 1 of 2 after step_timeout: the replica of the current step was not running and healthy at the new revision within the step timeout; jaco rollout resume|abort, or apply a fix; 2 of 2 replicas ready',
    ],
    ['aborted at an older revision, current one applied', { deployment: dep(3), status: status(3), plans: [plan({ state: 'aborted', failureReason: 'step_timeout' })], replicas: healthy }, 'complete', '2 of 2 replicas ready'],
    ['completed', { deployment: dep(2), status: status(2), plans: [plan({ state: 'completed', currentStep: 2 })], replicas: healthy }, 'complete', 'rolled out revision 2 in 2 step(s); 2 of 2 replicas ready'],
    [
      'the scheduler wants more than are placed',
      { deployment: dep(2), status: status(2, { observedGeneration: 2, updatedAt: '2025-01-01T00:00:00Z', services: { web: { desired: 3, placed: 2, unschedulable: { reason: 'no_capacity_memory', count: 1, message: 'no node has 1Gi free', nodes: {} } } } }), plans: [], replicas: healthy },
      'progressing',
      '2 of 3 replicas ready; 1 unschedulable (no_capacity_memory): no node has 1Gi free',
    ],
  ])('%s', (_n, input, phase, line) => {
    const p = rolloutProgress({ ...input, now: Date.parse('2025-01-01T00:01:00Z') });
    expect(p.phase).toBe(phase);
    expect(p.lines.map((l) => l.text).join('\n')).toBe(line);
  });
});
