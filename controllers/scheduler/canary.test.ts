// The scheduler's half of canary rollouts (canary.ts): canaries placed beside the replicas while
// the rollout lasts, marked and audited as such, and scaled away first when it ends.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { DeploymentStatus, PlacementDecision, RolloutPlan, RolloutState, ServiceSpec } from '../../src/api/types.js';
import { iso, T0, World } from '../../test/support/scheduler-world.js';

const web = (image: string): ServiceSpec => ({ image, replicas: 3, update: { canary: 1 } });

function rollout(w: World, state: RolloutState, canary = 1): void {
  const plan: RolloutPlan = {
    apiVersion: 'jaco.dev/v1',
    kind: 'RolloutPlan',
    metadata: { name: 'd-web' },
    spec: { deployment: 'd', service: 'web', fromRevision: 1, toRevision: 2, fromHash: 'a', toHash: 'b', totalSteps: 3, currentStep: 0, state, startedAt: iso(T0), steps: [], canary: { replicas: canary } },
  };
  w.put(keys.rollout('d', 'web'), plan);
}

/** Three nodes; d/web's 3 replicas running at busybox:1; then busybox:2 applied (no plan yet). */
function runningThenApplied(): World {
  const w = new World();
  for (const n of ['node-1', 'node-2', 'node-3']) w.node(n);
  w.deploy('d', { web: web('jaco-demo/busybox:1') });
  w.converge();
  for (const d of w.desired()) w.observe(d.spec.replica, 'running');
  w.deploy('d', { web: web('jaco-demo/busybox:2') });
  return w;
}

describe('canary replicas (update.canary)', () => {
  it('places the canaries beside the replicas at the target while the rollout lasts, and scales them all away when it ends', () => {
    const w = runningThenApplied();
    rollout(w, 'in_progress', 2);
    const plan = w.pass();
    expect(plan.place.map((p) => [p.replica, p.trigger])).toEqual([
      ['d-web-3', 'canary'],
      ['d-web-4', 'canary'],
    ]);
    const canaries = w.desired().filter((d) => d.spec.canary).sort((a, b) => a.spec.index! - b.spec.index!);
    expect(canaries.map((d) => [d.spec.replica, d.spec.canary, d.spec.revision, d.spec.template.image])).toEqual([
      ['d-web-3', { revision: 2 }, 2, 'jaco-demo/busybox:2'],
      ['d-web-4', { revision: 2 }, 2, 'jaco-demo/busybox:2'],
    ]);
    expect(w.get<PlacementDecision>(keys.decision('d', 'd-web-3'))!.spec.trigger).toBe('canary');
    expect(w.auditOf('replica_placed').filter((a) => a.payload.trigger === 'canary')).toHaveLength(2);
    expect(w.get<DeploymentStatus>(keys.deploymentStatus('d'))!.status!.scheduling!.services.web).toMatchObject({ desired: 3, placed: 3, canaries: 2 });
    // Paused: still wanted. Nothing more placed.
    rollout(w, 'paused', 2);
    expect(w.pass().place).toEqual([]);
    // Completed: the canaries go, even though a regular replica is not running (canaries first).
    w.observe('d-web-1', 'exited');
    rollout(w, 'completed', 2);
    const after = w.pass();
    expect(after.stop.map((s) => [s.replica, s.reason]).sort()).toEqual([
      ['d-web-3', 'scale_down'],
      ['d-web-4', 'scale_down'],
    ]);
    expect(w.desired().map((d) => d.spec.replica).sort()).toEqual(['d-web-0', 'd-web-1', 'd-web-2']);
    expect(w.get<DeploymentStatus>(keys.deploymentStatus('d'))!.status!.scheduling!.services.web).toEqual({ desired: 3, placed: 3 });
  });

  it('a missing replica is placed as a replica, not as a canary; an aborted rollout wants no canary', () => {
    const w = new World();
    for (const n of ['node-1', 'node-2', 'node-3']) w.node(n);
    w.deploy('d', { web: { ...web('jaco-demo/busybox:1'), replicas: 2 } });
    w.converge();
    w.deploy('d', { web: web('jaco-demo/busybox:1') });
    rollout(w, 'in_progress');
    const plan = w.pass();
    expect(plan.place.map((p) => [p.replica, p.trigger])).toEqual([
      ['d-web-2', 'scale_up'],
      ['d-web-3', 'canary'],
    ]);
    rollout(w, 'aborted');
    expect(w.pass().stop.map((s) => s.replica)).toEqual(['d-web-3']);
  });

  it('replicas and canaries are counted apart: a scale during the canary phase scales the replicas; the canary stays until the rollout ends', () => {
    const w = runningThenApplied();
    rollout(w, 'in_progress');
    expect(w.pass().place.map((p) => [p.replica, p.trigger])).toEqual([['d-web-3', 'canary']]);
    w.observe('d-web-3', 'running');
    // Scale up: one more replica, not a canary.
    w.deploy('d', { web: { ...web('jaco-demo/busybox:2'), replicas: 4 } });
    rollout(w, 'in_progress');
    expect(w.pass().place.map((p) => [p.replica, p.trigger])).toEqual([['d-web-4', 'scale_up']]);
    w.observe('d-web-4', 'running');
    // Scale down to 2: two replicas go, the canary stays.
    w.deploy('d', { web: { ...web('jaco-demo/busybox:2'), replicas: 2 } });
    rollout(w, 'in_progress');
    expect(w.pass().stop.map((s) => s.replica).sort()).toEqual(['d-web-2', 'd-web-4']);
    expect(w.desired().filter((d) => d.spec.canary).map((d) => d.spec.replica)).toEqual(['d-web-3']);
    // The rollout ends with a replica short (one lost): the canary still goes, a replica is placed.
    w.remove(keys.desired(w.placement('d')['d-web-1']!, 'd-web-1'));
    rollout(w, 'completed');
    const end = w.pass();
    expect(end.stop.map((s) => s.replica)).toEqual(['d-web-3']);
    expect(end.place.map((p) => p.trigger)).toEqual(['scale_up']);
    expect(w.desired().filter((d) => d.spec.canary)).toEqual([]);
  });
});
