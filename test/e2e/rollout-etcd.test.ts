// The rollout controller as a real `jaco controller rollout` process against a real etcd, driven
// through the real CLI (apply, rollout status|history, rollback, audit). Containers are not part
// of this file: the test writes what the scheduler (desired keys) and the node-agents (observed
// state, heartbeats) would, so every rollout path — steps, abort and revert, timeouts, leader
// failover — is checked quickly and exactly. rollout-containers.test.ts runs the same on Docker.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { specHash } from '../../src/api/spec.js';
import { UNPULLABLE } from '../support/images.js';
import {
  API_VERSION,
  type AuditEvent,
  type Deployment,
  type DeploymentStatus,
  type ReplicaDesired,
  type ReplicaObserved,
  type RolloutPlan,
  type ServiceSpec,
} from '../../src/api/types.js';
import type { Store } from '../../src/store/store.js';
import { sampler, startCluster, type Proc, type TestCluster } from '../support/cluster.js';
import { placeReplicas, putHeartbeats, standInAgents } from '../support/rollout-stand-ins.js';
import { eventually } from '../support/wait.js';

const NODES = ['node-1', 'node-2', 'node-3'];
// Every 5 s: Docker's exec checks cost CPU, and early health makes a new replica ready at its first.
const HC = { test: ['CMD', 'true'], interval: '5s' };
const web = (image: string, extra: Partial<ServiceSpec> = {}): ServiceSpec => ({ image, replicas: 3, healthcheck: HC, ...extra });
const manifest = (services: Record<string, ServiceSpec>, name = 'app') => JSON.stringify({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name }, spec: { services } });

let cluster: TestCluster;
let store: Store;
let agents: ReturnType<typeof standInAgents>;
const agentTiming = { startMs: 800 };
let hbTimer: NodeJS.Timeout;

const heartbeats = () => putHeartbeats(store, NODES, 1000);

async function desiredHashes(dep = 'app'): Promise<string[]> {
  return (await store.list<ReplicaDesired>(keys.desiredOf())).items
    .map((i) => i.value)
    .filter((d) => d.spec.deployment === dep)
    .sort((a, b) => (a.spec.replica < b.spec.replica ? -1 : 1))
    .map((d) => d.spec.specHash);
}

async function notRunning(): Promise<number> {
  const obs = (await store.list<ReplicaObserved>(keys.observedOf())).items.map((i) => i.value.status!);
  return obs.filter((s) => !(s.state === 'running' || s.replacing?.state === 'running')).length;
}

const rolloutStatus = (name: string, timeout = '90s') => cluster.jaco(['rollout', 'status', name, '--timeout', timeout]);

function metricsUrl(p: Proc): string {
  for (const line of readFileSync(p.logFile, 'utf8').split('\n')) {
    if (!line.includes('controllers running')) continue;
    return (JSON.parse(line) as { metrics: string }).metrics;
  }
  throw new Error(`no metrics address in ${p.logFile}`);
}

function metricValue(text: string, series: string): number {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line ? Number(line.slice(series.length + 1)) : NaN;
}

/** The process holding the rollout election: the candidate key with the lowest create revision. */
async function leaderProc(): Promise<Proc> {
  const { kvs } = await store.listRaw(keys.leaders('rollout'));
  const first = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0];
  const identity = first?.value.toString('utf8') ?? '';
  const pid = Number(identity.split('/')[1]);
  const p = cluster.procs.find((x) => x.child.pid === pid && !x.exited());
  if (!p) throw new Error(`no live process for leader ${identity}`);
  return p;
}

beforeAll(async () => {
  cluster = await startCluster({ nodes: 0, controllers: ['rollout'] });
  store = cluster.store;
  await heartbeats();
  hbTimer = setInterval(() => void heartbeats().catch(() => undefined), 500);
  agents = standInAgents(store, agentTiming);
  await agents.start();
});

afterAll(async () => {
  clearInterval(hbTimer);
  await agents?.stop();
  await cluster?.stop();
});

describe('rollout controller process on a real etcd', () => {
  it('rolls 3 replicas one step at a time: plan, status, audit, metrics, and `jaco rollout status` exit 0', async () => {
    await cluster.apply(manifest({ web: web('jaco-demo/busybox:1') }));
    await placeReplicas(store, NODES);
    const first = await rolloutStatus('app');
    expect(first.stdout).toContain('deployment "app" successfully rolled out (revision 1)');
    expect(first.code).toBe(0);

    const samples = sampler(notRunning, 50);
    await cluster.apply(manifest({ web: web('jaco-demo/busybox:2') }));
    const r = await rolloutStatus('app');
    const counts = await samples.stop();
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^web: rolling revision 1 → 2: step [123] of 3 \(app-web-[012] on node-[123]\), [0-3] of 3 updated$/m);
    expect(r.stdout).toContain('deployment "app" successfully rolled out (revision 2)');
    expect(r.code).toBe(0);
    expect(Math.max(...counts)).toBeLessThanOrEqual(1);

    const h2 = specHash(web('jaco-demo/busybox:2'));
    expect(await desiredHashes()).toEqual([h2, h2, h2]);
    const plan = (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec;
    expect(plan).toMatchObject({ state: 'completed', fromRevision: 1, toRevision: 2, currentStep: 3, totalSteps: 3 });
    expect(plan.steps.map((s) => [s.replica, s.node, s.result])).toEqual([
      ['app-web-0', 'node-1', 'done'],
      ['app-web-1', 'node-2', 'done'],
      ['app-web-2', 'node-3', 'done'],
    ]);
    // Each step started only after the previous one was ready.
    for (let i = 1; i < 3; i++) expect(Date.parse(plan.steps[i]!.startedAt)).toBeGreaterThanOrEqual(Date.parse(plan.steps[i - 1]!.finishedAt!));
    const st = (await store.get<DeploymentStatus>(keys.deploymentStatus('app')))!.value.status!;
    expect(st.rollout).toMatchObject({ appliedRevision: 2, services: { web: { state: 'completed', fromRevision: 1, toRevision: 2, currentStep: 3, totalSteps: 3 } } });

    const audit = await cluster.jaco(['audit', '-d', 'app', '--type', 'rollout_started,rollout_step,rollout_completed', '-o', 'json']);
    const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l) as AuditEvent['spec']);
    expect(events.map((e) => e.type)).toEqual(['rollout_started', 'rollout_step', 'rollout_step', 'rollout_step', 'rollout_completed']);
    expect(events[1]!.payload).toMatchObject({ deployment: 'app', service: 'web', from_revision: 1, to_revision: 2, replica: 'app-web-0', reason: 'forward' });
    expect(events.every((e) => e.actor === 'rollout')).toBe(true);

    const text = await (await fetch(metricsUrl(cluster.procs.find((p) => p.name.startsWith('controllers'))!))).text();
    expect(metricValue(text, 'jaco_rollouts_total{result="completed"}')).toBe(1);
    expect(metricValue(text, 'jaco_rollout_steps_total{result="done"}')).toBe(3);
    expect(metricValue(text, 'jaco_rollout_step_duration_seconds_count')).toBe(3);
    expect(metricValue(text, 'jaco_rollout_in_progress')).toBe(0);
  });

  it('aborts a rollout to an unpullable image at the step timeout, reverts, exits 1; rollback re-applies the previous spec', async () => {
    const h2 = specHash(web('jaco-demo/busybox:2'));
    await cluster.apply(manifest({ web: web(UNPULLABLE, { update: { stepTimeout: '3s' } }) }));
    const r = await rolloutStatus('app');
    expect(r.stdout).toContain('rollout to revision 3 aborted at step 1 of 3 (registry_unreachable');
    expect(r.stdout).toContain('revision 2 keeps serving');
    expect(r.code).toBe(1);
    await eventually(async () => (await desiredHashes()).every((h) => h === h2), { what: 'every replica back on revision 2', timeoutMs: 30_000 });
    const plan = (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec;
    expect(plan).toMatchObject({ state: 'aborted', failureReason: 'registry_unreachable', fromRevision: 2, toRevision: 3, currentStep: 1 });
    await eventually(async () => {
      const p = (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec;
      return JSON.stringify(p.steps.map((s) => [s.replica, s.result])) === JSON.stringify([['app-web-0', 'failed'], ['app-web-0', 'reverted']]);
    }, { what: 'the failed step reverted' });

    // Not retried: the same generation keeps serving revision 2.
    await new Promise((res) => setTimeout(res, 2500));
    expect((await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec.state).toBe('aborted');

    const rb = await cluster.jaco(['rollback', 'app']);
    expect(rb.stdout).toBe(`deployment/app rolled back to revision 2 (now revision 4: web: image ${UNPULLABLE} → jaco-demo/busybox:2, update changed)\n`);
    expect(rb.code).toBe(0);
    const after = await rolloutStatus('app');
    expect(after.stdout).toContain('successfully rolled out (revision 4)');
    expect(after.code).toBe(0);
    const dep = (await store.get<Deployment>(keys.deployment('app')))!.value;
    expect(dep.spec.services.web!.image).toBe('jaco-demo/busybox:2');

    const hist = await cluster.jaco(['rollout', 'history', 'app']);
    expect(hist.code).toBe(0);
    expect(hist.stdout).toMatch(/^REVISION\s+APPLIED\s+AGE\s+CAUSE\s+SUMMARY/);
    expect(hist.stdout).toMatch(new RegExp(`\\n4 \\(current\\)\\s+\\S+\\s+\\S+\\s+rollback to revision 2\\s+web: image ${UNPULLABLE.replace(/[.]/g, '\\.')} → jaco-demo/busybox:2`));
    const one = await cluster.jaco(['rollout', 'history', 'app', '--revision', '3']);
    expect(one.stdout).toContain('deployment/app revision 3\n');
    expect(one.stdout).toContain('--- deployment/app (revision 2)');
    expect(one.stdout).toContain('+++ deployment/app (revision 3)');
    expect(one.stdout).toContain('\n-    image: jaco-demo/busybox:2\n');
    expect(one.stdout).toContain(`\n+    image: ${UNPULLABLE}\n`);
    expect((await cluster.jaco(['rollout', 'history', 'app', '--revision', '99'])).code).toBe(1);
    const skip = await cluster.jaco(['rollback', 'app', '--to-revision', '2']);
    expect(skip.stdout).toContain('skipped rollback');
  });

  it('`jaco rollout status` exits 3 on timeout and 1 for an unknown deployment', async () => {
    await cluster.apply(manifest({ web: web('jaco-demo/slow:1') }));
    const r = await rolloutStatus('app', '2s');
    expect(r.stdout).toContain('timed out after 2s waiting for deployment "app" to roll out');
    expect(r.code).toBe(3);
    const missing = await rolloutStatus('nope', '2s');
    expect(missing.stderr).toContain('deployment "nope" not found');
    expect(missing.code).toBe(1);
    await cluster.jaco(['rollback', 'app']);
    expect((await rolloutStatus('app')).code).toBe(0);
  });

  it('a standby controller takes over a rollout when the leader is killed; the invariant holds', async () => {
    await cluster.startControllers(['rollout']);
    agentTiming.startMs = 2000; // slow steps, so the leader dies mid-rollout
    const samples = sampler(notRunning, 50);
    await cluster.apply(manifest({ web: web('jaco-demo/busybox:3') }));
    await eventually(async () => ((await store.get<RolloutPlan>(keys.rollout('app', 'web')))?.value.spec.currentStep ?? 0) >= 1 && (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec.state === 'in_progress', {
      what: 'the rollout under way',
    });
    const leader = await leaderProc();
    const mid = (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec;
    await leader.kill('SIGKILL');
    expect(mid).toMatchObject({ state: 'in_progress', toRevision: 7 });
    expect(mid.currentStep).toBeLessThan(3);
    const r = await rolloutStatus('app');
    const counts = await samples.stop();
    expect(r.code).toBe(0);
    expect(Math.max(...counts)).toBeLessThanOrEqual(1);
    const plan = (await store.get<RolloutPlan>(keys.rollout('app', 'web')))!.value.spec;
    expect(plan).toMatchObject({ state: 'completed', totalSteps: 3, currentStep: 3 });
    expect(plan.steps.map((s) => s.replica)).toEqual(['app-web-0', 'app-web-1', 'app-web-2']);
    const h3 = specHash(web('jaco-demo/busybox:3'));
    expect(await desiredHashes()).toEqual([h3, h3, h3]);
  });

  it('deleting the deployment deletes its plans and its status', async () => {
    expect(await store.get(keys.rollout('app', 'web'))).toBeDefined();
    const del = await cluster.jaco(['delete', 'deployment', 'app']);
    expect(del.code).toBe(0);
    await eventually(async () => !(await store.get(keys.rollout('app', 'web'))) && !(await store.get(keys.deploymentStatus('app'))), { what: 'plan and status gone' });
  });
});
