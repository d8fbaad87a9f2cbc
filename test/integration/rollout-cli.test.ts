// `jaco rollout pause|resume|abort|restart` as an operator runs them (./bin/jaco) against a real
// etcd, with the rollout controller running in this process. No Docker: the test writes what the
// scheduler (desired keys) and the node-agents (observed state, heartbeats) would — a replica
// becomes ready 300 ms after its desired spec changes, except images named "…/slow:…", which never
// do (and are given a step timeout longer than any case) — so every path of the requests is
// checked exactly, whatever the machine's speed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rolloutController } from '../../controllers/rollout/index.js';
import { keys } from '../../src/api/keys.js';
import { specHash } from '../../src/api/spec.js';
import {
  API_VERSION,
  type AuditEvent,
  type Deployment,
  type DeploymentRevision,
  type ReplicaDesired,
  type RolloutPlan,
  type ServiceSpec,
} from '../../src/api/types.js';
import { startController } from '../../src/runtime/manager.js';
import type { Store } from '../../src/store/store.js';
import { FAST } from '../../src/timings.js';
import { jaco } from '../support/cli.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { testLogger } from '../support/log.js';
import { placeReplicas, putHeartbeats, standInAgents } from '../support/rollout-stand-ins.js';
import { eventually } from '../support/wait.js';

const etcd = useTestEtcd();
const NODES = ['node-1', 'node-2', 'node-3'];
const HC = { test: ['CMD', 'true'], interval: '1s' };
// A "slow" image never becomes ready: its step must not time out while a case is still asking
// things of its rollout, however long the loaded machine takes to run the CLI (a step timeout is
// not what these cases test).
const web = (image: string): ServiceSpec => ({ image, replicas: 3, healthcheck: HC, ...(image.includes('/slow:') ? { update: { stepTimeout: '30m' } } : {}) });
const manifest = (services: Record<string, ServiceSpec>) => JSON.stringify({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name: 'app' }, spec: { services } });

let store: Store;
let prefix: string;
let controller: { stop(): Promise<void> } | undefined;
let agents: ReturnType<typeof standInAgents>;

const cli = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, input });
const plan = async (service = 'web') => (await store.get<RolloutPlan>(keys.rollout('app', service)))?.value.spec;

async function desired(service = 'web'): Promise<ReplicaDesired[]> {
  return (await store.list<ReplicaDesired>(keys.desiredOf())).items
    .map((i) => i.value)
    .filter((d) => d.spec.service === service)
    .sort((a, b) => (a.spec.replica < b.spec.replica ? -1 : 1));
}

async function auditTypes(): Promise<string[]> {
  return (await store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec.type);
}

beforeAll(async () => {
  prefix = uniquePrefix();
  store = etcd.store(prefix);
  await putHeartbeats(store, NODES, 600_000);
  agents = standInAgents(store, { startMs: 300 });
  await agents.start();
  controller = await startController({ store, timings: FAST, log: testLogger(), identity: 'rollout-cli-test' }, rolloutController(FAST));
  const r = await cli(['apply', '-f', '-'], manifest({ web: web('jaco-demo/busybox:1') }));
  expect(r.code, r.stderr).toBe(0);
  await placeReplicas(store, NODES);
  await eventually(async () => (await cli(['rollout', 'status', 'app', '--timeout', '10s'])).code === 0, { what: 'app at revision 1' });
});

afterAll(async () => {
  await controller?.stop();
  await agents?.stop();
});

describe('jaco rollout pause | resume | abort', () => {
  it('pause holds the rollout at its step, resume lets it go on, abort reverts every replica', async () => {
    const h1 = specHash(web('jaco-demo/busybox:1'));
    expect((await cli(['apply', '-f', '-'], manifest({ web: web('jaco-demo/slow:2') }))).code).toBe(0);
    await eventually(async () => (await plan())?.currentStep === 1, { what: 'step 1 started' });

    let r = await cli(['rollout', 'pause', 'app/web']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe('app/web: pause requested\napp/web: paused (rollout to revision 2 paused, step 1 of 3)\n');
    expect(r.code).toBe(0);
    expect(await plan()).toMatchObject({ state: 'paused', currentStep: 1 });
    expect((await plan())?.request).toBeUndefined();
    expect(await auditTypes()).toContain('rollout_paused');

    // Nothing to pause any more: exit 1, and `rollout status` says it is paused by the operator.
    r = await cli(['rollout', 'pause', 'app']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('deployment "app" has no rollout to pause (none is in progress)');
    r = await cli(['rollout', 'status', 'app', '--timeout', '1s']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('web: rollout to revision 2 paused at step 1 of 3 by the operator; jaco rollout resume to go on');

    r = await cli(['rollout', 'resume', 'app']);
    expect(r.stdout).toBe('app/web: resume requested\napp/web: resumed (rollout to revision 2 in_progress, step 1 of 3)\n');
    expect(r.code).toBe(0);
    expect((await plan())?.resumedAt).toBeDefined();

    r = await cli(['rollout', 'abort', 'app/web']);
    expect(r.stdout).toMatch(/^app\/web: abort requested\napp\/web: aborted \(rollout to revision 2 aborted: operator_abort, step 1 of 3\)\n$/);
    expect(r.code).toBe(0);
    await eventually(async () => (await desired()).every((d) => d.spec.specHash === h1) && !(await plan())?.steps.some((s) => !s.finishedAt), { what: 'reverted to revision 1' });
    const types = await auditTypes();
    expect(types.filter((t) => t.startsWith('rollout_'))).toEqual(expect.arrayContaining(['rollout_paused', 'rollout_resumed', 'rollout_aborted']));
    r = await cli(['rollout', 'status', 'app', '--timeout', '5s']);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain('operator_abort: the operator aborted the rollout (jaco rollout abort)');

    // Back to a good image for the next test.
    expect((await cli(['apply', '-f', '-'], manifest({ web: web('jaco-demo/busybox:1') }))).code).toBe(0);
    expect((await cli(['rollout', 'status', 'app', '--timeout', '20s'])).code).toBe(0);
  });

  it('refuses bad targets with exit 1 and writes nothing', async () => {
    const before = (await store.listRaw('')).revision;
    for (const [args, msg] of [
      [['rollout', 'pause', 'app/web/x'], 'invalid target "app/web/x": use DEPLOYMENT or DEPLOYMENT/SERVICE'],
      [['rollout', 'resume', 'app/db'], 'deployment "app" has no service "db"'],
      [['rollout', 'abort', 'nope'], 'deployment "nope" not found'],
      [['rollout', 'restart', 'nope/web'], 'deployment "nope" not found'],
      [['rollout', 'pause', 'app', '--wait', 'soon'], 'invalid --wait "soon"'],
    ] as const) {
      const r = await cli([...args]);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toContain(msg);
    }
    // The stand-in agents' writes are the only ones allowed meanwhile: no deployment, revision or plan changed.
    const { kvs } = await store.listRaw('');
    const changed = kvs.filter((kv) => Number(kv.mod_revision) > before).map((kv) => kv.key.toString().slice(prefix.length));
    expect(changed.filter((k) => !k.startsWith('observed/') && !k.startsWith('heartbeats/'))).toEqual([]);
  });

  it('--help says what each command does, with exit codes and examples', async () => {
    for (const verb of ['pause', 'resume', 'abort', 'restart']) {
      const r = await cli(['rollout', verb, '--help']);
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`jaco rollout ${verb} [options] <target>`);
      expect(r.stdout).toContain('DEPLOYMENT or DEPLOYMENT/SERVICE');
      expect(r.stdout).toContain(`Examples:\n  jaco rollout ${verb} app`);
    }
    expect((await cli(['rollout', 'restart', '--help'])).stdout).toContain('Like kubectl rollout restart');
  });
});

describe('jaco rollout restart', () => {
  it('rolls every replica onto a new revision with the same spec; a later apply of the same manifest changes nothing', async () => {
    const h1 = specHash(web('jaco-demo/busybox:1'));
    const before = (await store.get<Deployment>(keys.deployment('app')))!.value.metadata.generation!;
    // The replicas' revision: the last one that changed their spec (a later apply that did not change web leaves them).
    const running = (await desired())[0]!.spec.revision;
    // kubectl's deployment/NAME, as jaco prints it, is taken wherever a deployment is named.
    const r = await cli(['rollout', 'restart', 'deployment/app/web']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`deployment/app restarted (revision ${before + 1}: restart web); follow it with: jaco rollout status app\n`);
    const status = await cli(['rollout', 'status', 'app', '--timeout', '20s']);
    expect(status.stdout).toContain(`deployment "app" successfully rolled out (revision ${before + 1})`);
    expect(status.code).toBe(0);
    const reps = await desired();
    expect(reps.map((d) => [d.spec.revision, d.spec.specHash])).toEqual([
      [before + 1, h1],
      [before + 1, h1],
      [before + 1, h1],
    ]);
    expect(await plan()).toMatchObject({ state: 'completed', fromRevision: running, toRevision: before + 1, fromHash: h1, toHash: h1, totalSteps: 3 });
    const rec = (await store.get<DeploymentRevision>(keys.revision('app', before + 1)))!.value.spec;
    expect(rec).toMatchObject({ cause: 'restart web', summary: 'restart web', restarted: ['web'] });
    expect((await cli(['apply', '-f', '-'], manifest({ web: web('jaco-demo/busybox:1') }))).stdout).toBe('deployment/app unchanged\n');
    expect((await cli(['rollout', 'history', 'deployment/app'])).stdout).toMatch(new RegExp(`^${before + 1} \\(current\\) .* restart web +restart web$`, 'm'));
    const described = await cli(['describe', 'deployment/app']);
    expect(described.code).toBe(0);
    expect(described.stdout).toMatch(/^Name: +app\n/);
    expect((await cli(['get', 'deployment/app'])).stdout).toMatch(/^app +1 +/m);
    expect((await cli(['status', 'deployment/app'])).code).toBe(0);
  });

  it('without a rollout controller the request stays on the plan and the command exits 3', async () => {
    expect((await cli(['apply', '-f', '-'], manifest({ web: web('jaco-demo/slow:3') }))).code).toBe(0);
    await eventually(async () => (await plan())?.state === 'in_progress' && (await plan())?.toRevision !== undefined && (await plan())!.currentStep >= 1, { what: 'rollout to slow:3 started' });
    await controller!.stop();
    controller = undefined;
    // Not waiting (--wait 0, as the dashboard asks): requested, and nothing claimed about the controller.
    const asked = await cli(['rollout', 'pause', 'app', '--wait', '0']);
    expect(asked.stdout).toBe('app/web: pause requested\n');
    expect(asked.code).toBe(0);
    const r = await cli(['rollout', 'pause', 'app', '--wait', '1s']);
    expect(r.code).toBe(3);
    expect(r.stdout).toContain('no rollout controller took the request for web within 1s; it stays on the plan');
    expect((await plan())?.request).toMatchObject({ action: 'pause' });
    // A controller that starts later carries it out.
    controller = await startController({ store, timings: FAST, log: testLogger(), identity: 'rollout-cli-test-2' }, rolloutController(FAST));
    await eventually(async () => (await plan())?.state === 'paused' && !(await plan())?.request, { what: 'paused by the new controller' });
  });
});
