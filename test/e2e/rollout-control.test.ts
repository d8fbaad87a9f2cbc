// The update block's controls on real containers: three `jaco agent` processes (simulated nodes on
// the local Docker engine), `jaco controller all`, a real etcd, fast timings. A service of four
// replicas rolls two at a time (parallelism 2, maxUnavailable 2), and a rollout to an image that
// cannot be pulled (a closed loopback registry) with failureAction rollback ends with the service
// back on the previous revision, every replica running. Observed state is sampled throughout: never
// more than maxUnavailable replicas without a running container. A deployment-atomic rollout
// (spec.update.atomic) of two services, one of whose new image cannot be pulled, ends with both
// services on the previous revision, and `jaco rollout status` reports it as one unit. A canary of
// one beside three old replicas runs until `jaco rollout promote`, never taking an old one out.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../src/api/labels.js';
import { specHash } from '../../src/api/spec.js';
import { sampler, startCluster, type TestCluster } from '../support/cluster.js';
import { API_VERSION } from '../../src/api/types.js';
import { busyboxService, rolloutPlan, webManifest } from '../support/rollout-workload.js';
import { eventually } from '../support/wait.js';
import { UNPULLABLE } from '../support/images.js';

const update = { parallelism: 2, maxUnavailable: 2, failureAction: 'rollback' as const };
const web = (image: string) => busyboxService(image, { replicas: 4, update });
/** An image that can never be pulled fails its step at the step timeout: a short one, as the rollout tests of etcd do (the default's own wait is rollout-containers'). */
const SHORT_STEP = { stepTimeout: '4s' };

let c: TestCluster;

beforeAll(async () => {
  c = await startCluster({ nodes: 3, controllers: 'all' });
});
afterAll(async () => {
  await c?.stop();
});

const notRunning = () => c.replicasNotRunning('app');

const plan = () => rolloutPlan(c.store);

/** Every replica of app/web runs exactly one container, of this image, and it is running. */
async function allRunning(image: string): Promise<boolean> {
  const mine = (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'app');
  return mine.length === 4 && mine.every((x) => x.State === 'running' && x.Image === image) && new Set(mine.map((x) => x.Labels[LABELS.replica])).size === 4;
}

const rolloutStatus = () => c.jaco(['rollout', 'status', 'app', '--timeout', '150s']);
const fail = (r: { stdout: string; stderr: string }) => `${r.stdout}${r.stderr}\n${c.logs()}`;

describe('update block on real containers', () => {
  it('parallelism 2: two replicas step at once, never more than two without a running container', async () => {
    await c.apply(webManifest(web('jaco-demo/busybox:1')));
    let r = await rolloutStatus();
    expect(r.code, fail(r)).toBe(0);

    const samples = sampler(notRunning, 100);
    await c.apply(webManifest(web('jaco-demo/busybox:2')));
    r = await rolloutStatus();
    const down = await samples.stop();
    expect(r.code, fail(r)).toBe(0);
    expect(r.stdout).toContain('deployment "app" successfully rolled out (revision 2)');
    await eventually(() => allRunning('jaco-demo/busybox:2'), { what: '4 containers of busybox:2', timeoutMs: 60_000 });
    expect(Math.max(...down.map((x) => x.length))).toBeLessThanOrEqual(2);

    const p = await plan();
    expect(p).toMatchObject({ state: 'completed', fromRevision: 1, toRevision: 2, totalSteps: 4, currentStep: 4 });
    expect(p.steps.map((s) => s.result)).toEqual(['done', 'done', 'done', 'done']);
    // The first two steps started in the same pass: they were in flight together.
    expect(p.steps[0]!.startedAt).toBe(p.steps[1]!.startedAt);
    expect(Date.parse(p.steps[1]!.startedAt)).toBeLessThan(Date.parse(p.steps[0]!.finishedAt!));
  });

  it('failureAction rollback: an image that cannot be pulled ends on the previous revision, every replica running', async () => {
    const samples = sampler(notRunning, 100);
    await c.apply(webManifest(busyboxService(UNPULLABLE, { replicas: 4, update: { ...update, ...SHORT_STEP } })));
    const r = await rolloutStatus();
    expect(r.code, fail(r)).toBe(1);
    expect(r.stdout).toContain('rollout to revision 3 aborted at step 2 of 4 (registry_unreachable');
    expect(r.stdout).toContain('revision 2 keeps serving');

    const prev = specHash(web('jaco-demo/busybox:2'));
    await eventually(
      async () => {
        const desired = (await c.desired()).filter((d) => d.spec.deployment === 'app');
        const observed = (await c.observed()).filter((o) => o.status?.deployment === 'app');
        return (
          desired.length === 4 &&
          desired.every((d) => d.spec.specHash === prev && d.spec.revision === 2) &&
          observed.length === 4 &&
          observed.every((o) => o.status?.state === 'running' && o.status.specHash === prev && !o.status.replacing) &&
          (await allRunning('jaco-demo/busybox:2'))
        );
      },
      { what: 'every replica back on revision 2 and running', timeoutMs: 90_000 },
    );
    const down = await samples.stop();
    expect(Math.max(...down.map((x) => x.length))).toBeLessThanOrEqual(2);

    // A revert step finishes on the controller's pass after its replica is ready again, which may
    // come after the containers run (and after the plan already says aborted).
    await eventually(async () => (await plan()).steps.slice(2).every((s) => s.result !== undefined), { what: 'both revert steps finished', timeoutMs: 30_000 });
    const p = await plan();
    expect(p).toMatchObject({ state: 'aborted', failureReason: 'registry_unreachable', fromRevision: 2, toRevision: 3, currentStep: 2 });
    // Two forward steps went together and both failed; the revert steps brought both back.
    const forward = p.steps.slice(0, 2);
    expect(forward.map((s) => s.result)).toEqual(['failed', 'failed']);
    expect(forward[0]!.startedAt).toBe(forward[1]!.startedAt);
    expect(p.steps.slice(2).map((s) => s.result)).toEqual(['reverted', 'reverted']);
    expect(new Set(p.steps.slice(2).map((s) => s.replica))).toEqual(new Set(forward.map((s) => s.replica)));
    const audit = await c.jaco(['audit', '-d', 'app', '--type', 'rollout_aborted', '-o', 'json']);
    expect(JSON.parse(audit.stdout.trim().split('\n').pop()!).payload).toMatchObject({ deployment: 'app', service: 'web', from_revision: 2, to_revision: 3, reason: 'registry_unreachable' });
  });

  it('update.atomic: one service fails to pull, so both services of the deployment go back, reported as one unit', async () => {
    const unit = (webImage: string, dbImage: string) =>
      JSON.stringify({
        apiVersion: API_VERSION,
        kind: 'Deployment',
        metadata: { name: 'unit' },
        spec: { update: { atomic: true }, services: { web: busyboxService(webImage, { replicas: 2 }), db: busyboxService(dbImage, { replicas: 1, update: SHORT_STEP }) } },
      });
    await c.apply(unit('jaco-demo/busybox:1', 'jaco-demo/busybox:1'));
    let r = await c.jaco(['rollout', 'status', 'unit', '--timeout', '150s']);
    expect(r.code, fail(r)).toBe(0);
    await c.apply(unit('jaco-demo/busybox:2', UNPULLABLE));
    r = await c.jaco(['rollout', 'status', 'unit', '--timeout', '150s']);
    expect(r.code, fail(r)).toBe(1);
    expect(r.stdout).toContain('deployment "unit" rollout to revision 2 aborted as one unit (spec.update.atomic): db failed (registry_unreachable); every service goes back to revision 1');
    // web rolled (or was rolling) to busybox:2; it goes back to busybox:1 with db.
    await eventually(
      async () => {
        const mine = (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'unit');
        return mine.length === 3 && mine.every((x) => x.State === 'running' && x.Image === 'jaco-demo/busybox:1');
      },
      { what: 'both services of unit back on busybox:1, every replica running', timeoutMs: 90_000 },
    );
    expect(await rolloutPlan(c.store, 'unit', 'db')).toMatchObject({ state: 'aborted', failureReason: 'registry_unreachable', toRevision: 2 });
    expect(await rolloutPlan(c.store, 'unit', 'web')).toMatchObject({ state: 'aborted', failureReason: 'atomic_rollback', toRevision: 2, fromRevision: 1 });
    const audit = await c.jaco(['audit', '-d', 'unit', '--type', 'rollout_aborted', '-o', 'json']);
    const payloads = audit.stdout.trim().split('\n').map((l) => JSON.parse(l).payload);
    expect(payloads).toContainEqual(expect.objectContaining({ service: 'web', reason: 'atomic_rollback', failed_service: 'db', failed_reason: 'registry_unreachable' }));
  });

  it('canary 1 beside 3 old replicas: nothing old moves until promote; then the update goes on and the canary is scaled away', async () => {
    const canary = (image: string) => busyboxService(image, { replicas: 3, update: { canary: 1 } });
    const byImage = async () => {
      const mine = (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'cn' && x.State === 'running');
      const out: Record<string, number> = {};
      for (const x of mine) out[x.Image] = (out[x.Image] ?? 0) + 1;
      return out;
    };
    await c.apply(webManifest(canary('jaco-demo/busybox:1'), 'cn'));
    let r = await c.jaco(['rollout', 'status', 'cn', '--timeout', '150s']);
    expect(r.code, fail(r)).toBe(0);

    const samples = sampler(async () => (await c.replicasNotRunning('cn')).filter((id) => id !== 'cn-web-3'), 100);
    await c.apply(webManifest(canary('jaco-demo/busybox:2'), 'cn'));
    await eventually(async () => !!(await rolloutPlan(c.store, 'cn', 'web')).canary?.readySince, { what: 'the canary ready and waiting for promote', timeoutMs: 90_000 });
    expect(await byImage()).toEqual({ 'jaco-demo/busybox:1': 3, 'jaco-demo/busybox:2': 1 });
    const canaries = (await c.desired()).filter((d) => d.spec.deployment === 'cn' && d.spec.canary);
    expect(canaries.map((d) => d.spec.replica)).toEqual(['cn-web-3']);
    const waiting = await rolloutPlan(c.store, 'cn', 'web');
    expect(waiting).toMatchObject({ state: 'in_progress', currentStep: 0, totalSteps: 3 });
    r = await c.jaco(['rollout', 'status', 'cn', '--timeout', '2s']);
    expect(r.code, fail(r)).toBe(3);
    expect(r.stdout).toContain('canary of revision 2: 1 of 1 ready beside the 3 replicas of revision 1; waiting for jaco rollout promote cn/web');

    // The canary phase took no old replica out.
    expect(Math.max(0, ...(await samples.stop()).map((x) => x.length))).toBe(0);

    const rolling = sampler(async () => (await c.replicasNotRunning('cn')).filter((id) => id !== 'cn-web-3'), 100);
    r = await c.jaco(['rollout', 'promote', 'cn/web']);
    expect(r.code, fail(r)).toBe(0);
    expect(r.stdout).toContain('cn/web: promoted');
    r = await c.jaco(['rollout', 'status', 'cn', '--timeout', '150s']);
    expect(r.code, fail(r)).toBe(0);
    await eventually(async () => JSON.stringify(await byImage()) === JSON.stringify({ 'jaco-demo/busybox:2': 3 }), { what: '3 replicas of busybox:2, the canary gone', timeoutMs: 90_000 });
    // Then one step at a time, within the budget (maxUnavailable 1).
    expect(Math.max(0, ...(await rolling.stop()).map((x) => x.length))).toBeLessThanOrEqual(1);
    expect((await c.desired()).filter((d) => d.spec.deployment === 'cn').map((d) => d.spec.replica).sort()).toEqual(['cn-web-0', 'cn-web-1', 'cn-web-2']);
    const audit = await c.jaco(['audit', '-d', 'cn', '--type', 'rollout_promoted', '-o', 'json']);
    expect(JSON.parse(audit.stdout.trim().split('\n').pop()!).payload).toMatchObject({ service: 'web', by: 'operator', canaries: 1 });
    r = await c.jaco(['rollout', 'promote', 'cn/web']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no rollout has canaries waiting');
  });
});
