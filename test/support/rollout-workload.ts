// What the rollout e2e tests on real containers roll (test/e2e/rollout-containers,
// test/e2e/rollout-control): a busybox service, its manifest, and the rollout plan they read back.
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type RolloutPlan, type RolloutPlanSpec, type ServiceSpec } from '../../src/api/types.js';
import type { Store } from '../../src/store/store.js';

/**
 * A busybox service that runs until stopped, taking `stopSeconds` to exit on SIGTERM (so a rollout
 * "completed" before its old containers are gone would show), with an exec health check (no
 * network needed). Three replicas unless `extra` says otherwise.
 */
export function busyboxService(image: string, extra: Partial<ServiceSpec> & { stopSeconds?: number } = {}): ServiceSpec {
  const { stopSeconds = 0, ...rest } = extra;
  const onTerm = stopSeconds ? `sleep ${stopSeconds}; exit 0` : 'exit 0';
  return {
    image,
    replicas: 3,
    command: ['sh', '-c', `trap "${onTerm}" TERM; sleep 3600 & wait`],
    // Generous timeout and retries: a loaded machine must not fail the check and restart replicas.
    // Every 5 s: each of Docker's exec checks costs ~0.1 s of CPU (4 containers checked every
    // second kept a quarter of this machine's two cores busy), and a new replica is ready at its
    // first check anyway (the agent runs it itself: early health).
    healthcheck: { test: ['CMD', 'true'], interval: '5s', timeout: '5s', retries: 3 },
    stopGracePeriod: '5s',
    ...rest,
  };
}

/** A Deployment manifest (JSON, which `jaco apply` reads as YAML) of one service, web. */
export const webManifest = (web: ServiceSpec, name = 'app') => JSON.stringify({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name }, spec: { services: { web } } });

/** The rollout plan of dep/service; it must exist. */
export async function rolloutPlan(store: Store, dep = 'app', service = 'web'): Promise<RolloutPlanSpec> {
  return (await store.get<RolloutPlan>(keys.rollout(dep, service)))!.value.spec;
}
