// Rolling updates end to end on real containers: three `jaco agent` processes (simulated nodes on
// the local Docker engine), `jaco controller all` (scheduler, rollout, …), a real etcd, fast
// timings. Observed state (etcd) and the containers themselves (Docker) are sampled throughout
// every rollout: never more than one replica of the service may be without a running container.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { specHash } from '../../src/api/spec.js';
import type { Deployment, ReplicaDesired, ServiceSpec } from '../../src/api/types.js';
import { FAST } from '../../src/timings.js';
import { sampler, startCluster, type Proc, type TestCluster } from '../support/cluster.js';
import { busyboxService, rolloutPlan, webManifest } from '../support/rollout-workload.js';
import { eventually } from '../support/wait.js';
import { UNPULLABLE } from '../support/images.js';

// A workload that takes 2 s to stop on SIGTERM (so "completed" before its old containers are gone
// would show).
const web = (image: string, extra: Partial<ServiceSpec> = {}) => busyboxService(image, { stopSeconds: 2, ...extra });

let c: TestCluster;

beforeAll(async () => {
  c = await startCluster({ nodes: 3, controllers: 'all' });
});
afterAll(async () => {
  await c?.stop();
});

const notRunningObserved = () => c.replicasNotRunning('app');

/** Replicas of app/web without a running container, as Docker says. */
async function notRunningContainers(): Promise<string[]> {
  const desired = (await c.store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value).filter((d) => d.spec.deployment === 'app');
  const running = new Set((await c.containers()).filter((x) => x.State === 'running').map((x) => x.Labels[LABELS.replica]));
  return [...new Set(desired.map((d) => d.spec.replica))].filter((id) => !running.has(id));
}

/** Samples both views until stopped; returns the worst moment of each. */
function invariantSampler() {
  const obs = sampler(notRunningObserved, 100);
  const docker = sampler(notRunningContainers, 150);
  return {
    async stop() {
      const [o, d] = await Promise.all([obs.stop(), docker.stop()]);
      const worst = (xs: string[][]) => xs.reduce((a, b) => (b.length > a.length ? b : a), [] as string[]);
      return { observed: worst(o), docker: worst(d), samples: o.length + d.length };
    },
  };
}

const plan = () => rolloutPlan(c.store);

/** Every replica of app/web runs exactly one container, of this image, and it is running. */
async function allRunning(image: string): Promise<boolean> {
  const mine = (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'app');
  return mine.length === 3 && mine.every((x) => x.State === 'running' && x.Image === image) && new Set(mine.map((x) => x.Labels[LABELS.replica])).size === 3;
}

async function rolloutStatus(timeout = '150s') {
  return c.jaco(['rollout', 'status', 'app', '--timeout', timeout]).then((r) => ({ ...r, out: r.stdout + r.stderr }));
}

const fail = (what: string) => `${what}\n${c.logs(40)}`;

describe('rolling updates on real containers', () => {
  it('rolls 3 replicas from jaco-demo/busybox:1 to :2, never more than one replica down', async () => {
    await c.apply(webManifest(web('jaco-demo/busybox:1')));
    const first = await rolloutStatus();
    expect(first.code, fail(first.out)).toBe(0);
    await eventually(() => allRunning('jaco-demo/busybox:1'), { what: '3 containers of busybox:1', timeoutMs: 60_000 });

    const inv = invariantSampler();
    await c.apply(webManifest(web('jaco-demo/busybox:2')));
    const r = await rolloutStatus();
    // Successful means no container of the old revision is left (observed), not only no desired key.
    const old = (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'app' && x.Image !== 'jaco-demo/busybox:2');
    expect(old.map((x) => `${x.Labels[LABELS.replica]} ${x.Image} ${x.State}`)).toEqual([]);
    await eventually(() => allRunning('jaco-demo/busybox:2'), { what: '3 containers of busybox:2, the old ones gone', timeoutMs: 60_000 });
    const worst = await inv.stop();
    expect(r.code, fail(r.out)).toBe(0);
    expect(r.stdout).toMatch(/^web: rolling revision 1 → 2: step [123] of 3 \(app-web-[012] on node-[123]\), [0-3] of 3 updated$/m);
    expect(r.stdout).toContain('deployment "app" successfully rolled out (revision 2)');
    expect(worst.samples).toBeGreaterThan(20);
    expect(worst.observed.length, `not running together (observed): ${worst.observed.join(', ')}`).toBeLessThanOrEqual(1);
    expect(worst.docker.length, `not running together (docker): ${worst.docker.join(', ')}`).toBeLessThanOrEqual(1);
    const p = await plan();
    expect(p).toMatchObject({ state: 'completed', fromRevision: 1, toRevision: 2, totalSteps: 3, currentStep: 3 });
    expect(p.steps.map((s) => s.result)).toEqual(['done', 'done', 'done']);
    const hash = specHash(web('jaco-demo/busybox:2'));
    expect((await c.desired()).filter((d) => d.spec.deployment === 'app').every((d) => d.spec.specHash === hash && d.spec.revision === 2)).toBe(true);
  });

  it('`jaco rollback` restores the previous image', async () => {
    const rb = await c.jaco(['rollback', 'app']);
    expect(rb.stdout).toBe('deployment/app rolled back to revision 1 (now revision 3: web: image jaco-demo/busybox:2 → jaco-demo/busybox:1)\n');
    const inv = invariantSampler();
    const r = await rolloutStatus();
    await eventually(() => allRunning('jaco-demo/busybox:1'), { what: '3 containers of busybox:1 again', timeoutMs: 60_000 });
    const worst = await inv.stop();
    expect(r.code, fail(r.out)).toBe(0);
    expect(worst.observed.length).toBeLessThanOrEqual(1);
    expect(worst.docker.length).toBeLessThanOrEqual(1);
    expect(await plan()).toMatchObject({ state: 'completed', fromRevision: 2, toRevision: 3 });
    const dep = (await c.store.get<Deployment>(keys.deployment('app')))!.value;
    expect(dep.spec.services.web!.image).toBe('jaco-demo/busybox:1');
  });

  it('a rollout to an unpullable image aborts at the step timeout; every replica is back on the old revision and running', async () => {
    const inv = invariantSampler();
    await c.apply(webManifest(web(UNPULLABLE)));
    const r = await rolloutStatus();
    expect(r.code, fail(r.out)).toBe(1);
    expect(r.stdout).toContain('rollout to revision 4 aborted at step 1 of 3 (registry_unreachable');
    expect(r.stdout).toContain('revision 3 keeps serving');
    const old = specHash(web('jaco-demo/busybox:1'));
    await eventually(
      async () => {
        const desired = (await c.desired()).filter((d) => d.spec.deployment === 'app');
        const observed = (await c.observed()).filter((o) => o.status?.deployment === 'app');
        return desired.length === 3 && desired.every((d) => d.spec.specHash === old && d.spec.revision === 3) && observed.length === 3 && observed.every((o) => o.status?.state === 'running' && o.status.specHash === old) && (await allRunning('jaco-demo/busybox:1'));
      },
      { what: 'every replica back on revision 3 and running', timeoutMs: 60_000 },
    );
    const worst = await inv.stop();
    expect(worst.observed.length).toBeLessThanOrEqual(1);
    expect(worst.docker.length).toBeLessThanOrEqual(1);
    const p = await plan();
    expect(p).toMatchObject({ state: 'aborted', failureReason: 'registry_unreachable', fromRevision: 3, toRevision: 4, currentStep: 1 });
    // Aborted at the step timeout (fast timings, the service sets none), not before.
    expect(Date.parse(p.finishedAt!) - Date.parse(p.steps[0]!.startedAt)).toBeGreaterThanOrEqual(FAST.stepTimeoutMs);
    const audit = await c.jaco(['audit', '-d', 'app', '--type', 'rollout_aborted', '-o', 'json']);
    expect(JSON.parse(audit.stdout.trim().split('\n').pop()!).payload).toMatchObject({ deployment: 'app', service: 'web', from_revision: 3, to_revision: 4, replica: 'app-web-0', reason: 'registry_unreachable' });
  });

  it('killing the rollout leader mid-rollout: a second controller process completes it, the invariant intact (stop-first)', async () => {
    await c.startControllers('all');
    const inv = invariantSampler();
    await c.apply(webManifest(web('jaco-demo/busybox:2', { update: { order: 'stop-first' } })));
    await eventually(async () => (await plan()).toRevision === 5 && (await plan()).currentStep >= 1, { what: 'the rollout to revision 5 under way', timeoutMs: 60_000 });
    const { kvs } = await c.store.listRaw(keys.leaders('rollout'));
    const identity = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0]!.value.toString('utf8');
    const leader: Proc | undefined = c.procs.find((p) => p.child.pid === Number(identity.split('/')[1]) && !p.exited());
    expect(leader, `leader ${identity}`).toBeDefined();
    const mid = await plan();
    await leader!.kill('SIGKILL');
    expect(mid).toMatchObject({ state: 'in_progress', toRevision: 5 });
    expect(mid.currentStep).toBeLessThan(3);

    const r = await rolloutStatus();
    await eventually(() => allRunning('jaco-demo/busybox:2'), { what: '3 containers of busybox:2', timeoutMs: 60_000 });
    const worst = await inv.stop();
    expect(r.code, fail(r.out)).toBe(0);
    expect(worst.observed.length, `not running together: ${worst.observed.join(', ')}`).toBeLessThanOrEqual(1);
    expect(worst.docker.length, `not running together: ${worst.docker.join(', ')}`).toBeLessThanOrEqual(1);
    const p = await plan();
    expect(p).toMatchObject({ state: 'completed', fromRevision: 3, toRevision: 5, totalSteps: 3, currentStep: 3 });
    expect(new Set(p.steps.map((s) => s.replica)).size).toBe(3);
  });
});
