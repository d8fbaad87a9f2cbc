// Table tests of the rollout core, driven through its world on the one table-test harness
// (test/support/harness.ts): stored objects, acts applied with their compare-and-swap
// preconditions (as the writer does), and agents simulated by setting observed state. Every plan
// decide returns is recorded, so invariants can be checked on each step it starts.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { servingTemplate } from '../../src/api/serving.js';
import { specHash, withDependencyHashes } from '../../src/api/spec.js';
import {
  API_VERSION,
  type Deployment,
  type DeploymentRevision,
  type DeploymentStatus,
  type DeploymentUpdate,
  type ReplicaCommand,
  type ReplicaDesired,
  type ReplicaObserved,
  type ReplicaObservedStatus,
  type RolloutPlan,
  type ServiceSpec,
} from '../../src/api/types.js';
import { StoreWorld } from '../../test/support/harness.js';
import { Cache } from '../../src/runtime/cache.js';
import { rolloutSnapshot } from './index.js';
import { rolloutProgress } from './progress.js';
import { replicaRunning as observedRunning } from '../../src/api/readiness.js';
import { decide, type MetricEvent, type RolloutConfig, type RolloutDecision, type RolloutSnapshot } from './decide.js';
import { prng } from '../../test/support/random.js';
import { MAX_TXN_OPS } from '../../src/store/store.js';

const T0 = Date.parse('2025-01-01T00:00:00Z');
const CFG: RolloutConfig = { stepTimeoutMs: 60_000 };
const MIN_READY = 5_000; // SERVICE_DEFAULTS.minReadyTime
const HC = { test: ['CMD', 'true'], interval: '1s' };
const svc = (image: string, extra: Partial<ServiceSpec> = {}): ServiceSpec => ({ image, replicas: 3, healthcheck: HC, ...extra });

/** The rollout's world on the one table-test harness (test/support/harness.ts). */
class World extends StoreWorld<MetricEvent> {
  /** Every decision, with which replicas were running when it was made. */
  readonly decisions: { running: Map<string, boolean>; decision: RolloutDecision }[] = [];

  constructor(readonly cfg: RolloutConfig = CFG) {
    super(T0);
  }

  /** What `jaco apply` does: a new generation and its revision record. */
  apply(name: string, services: Record<string, ServiceSpec>, update?: DeploymentUpdate): number {
    return this.putDeployment(name, services, { update }).metadata.generation!;
  }

  heartbeat(node: string, up = true): void {
    this.putHeartbeat(node, this.now, { intervalMs: up ? 1e12 : 1, agentVersion: 't', dockerUp: up });
  }

  /** What the scheduler does: a new replica at the service's serving template. */
  place(dep: string, service: string, index: number | undefined, node: string, extra: Partial<ReplicaDesired['spec']> = {}): string {
    const d = this.get<Deployment>(keys.deployment(dep))!;
    const plan = this.get<RolloutPlan>(keys.rollout(dep, service));
    const t = servingTemplate(d, service, plan, (n) => this.get<DeploymentRevision>(keys.revision(dep, n)))!;
    const id = `${dep}-${service}-${index ?? node}`;
    if (!this.has(keys.heartbeat(node))) this.heartbeat(node);
    this.desire({ replica: id, deployment: dep, service, node, ...(index !== undefined ? { index } : {}), revision: t.revision, specHash: t.specHash, template: t.template, placedAt: new Date(this.now).toISOString(), ...extra });
    return id;
  }

  desiredOf(id: string): ReplicaDesired[] {
    return this.copies(id);
  }

  /** What an agent reports. */
  observe(id: string, status: Partial<ReplicaObservedStatus>, node?: string): void {
    const d = this.desiredOf(id).find((x) => !node || x.spec.node === node)!;
    this.report(d, status.state ?? 'running', { health: d.spec.template.healthcheck ? 'healthy' : 'none', startedAt: new Date(this.now).toISOString(), ...status });
  }

  /** Every replica running and healthy at its desired spec (a converged cluster). */
  converge(): void {
    for (const { value: d } of this.under<ReplicaDesired>('desired/')) {
      const o = this.get<ReplicaObserved>(keys.observed(d.spec.node, d.spec.replica))?.status;
      if (o?.specHash !== d.spec.specHash || o.revision !== d.spec.revision || o.state !== 'running') this.observe(d.spec.replica, {}, d.spec.node);
    }
  }

  snapshot(): RolloutSnapshot {
    return rolloutSnapshot(this.cache);
  }

  /** The snapshot as it is now, kept apart from later writes (a stale leader's view). */
  frozenSnapshot(): RolloutSnapshot {
    return rolloutSnapshot(new Cache(this.clone()));
  }

  /** Replica id → whether any copy is observed running, now. */
  running(): Map<string, boolean> {
    const out = new Map<string, boolean>();
    for (const e of this.snapshot().replicas.byId.values()) out.set(e.id, e.copies.some((c) => observedRunning(c.observed)));
    return out;
  }

  /** One controller pass: decide, then commit each act all-or-nothing on its preconditions. */
  pass(): RolloutDecision {
    const running = this.running();
    const decision = decide(this.snapshot(), this.now, this.cfg);
    this.decisions.push({ running, decision });
    this.commit(decision);
    return decision;
  }

  /** n rounds of agents converging, then a controller pass. */
  rounds(n: number): void {
    for (let i = 0; i < n; i++) {
      this.converge();
      this.pass();
    }
  }

  /** The scheduler's restart_exhausted mark on a replica, for a generation. */
  exhaust(replica: string, node: string, generation: number): void {
    const cmd: ReplicaCommand = {
      apiVersion: API_VERSION,
      kind: 'ReplicaCommand',
      metadata: { name: replica },
      spec: { replica, op: 'restart', seq: 3, issuedAt: new Date(this.now).toISOString(), reason: 'exited' },
      status: { restarts: 3, exhausted: true, generation },
    };
    this.put(keys.command(node, replica), cmd);
  }

  plan(dep = 'app', service = 'web'): RolloutPlan['spec'] | undefined {
    return this.get<RolloutPlan>(keys.rollout(dep, service))?.spec;
  }

  status(dep = 'app'): DeploymentStatus['status'] | undefined {
    return this.get<DeploymentStatus>(keys.deploymentStatus(dep))?.status;
  }

  hashes(dep = 'app', service = 'web'): string[] {
    return this.under<ReplicaDesired>('desired/')
      .map((v) => v.value)
      .filter((d) => d.spec.deployment === dep && d.spec.service === service)
      .sort((a, b) => (a.spec.replica < b.spec.replica ? -1 : 1))
      .map((d) => d.spec.specHash);
  }

  auditTypes(): string[] {
    return this.audit.map((a) => a.type);
  }

  /** Replica ids whose desired spec each pass changed, in order. */
  steppedReplicas(): string[] {
    return this.decisions.flatMap((d) => d.decision.acts.flatMap((a) => a.ops.filter((o) => o.op === 'update' && o.key.startsWith('desired/')).map((o) => o.key.slice(o.key.lastIndexOf('/') + 1))));
  }
}

/** A running 3-replica service at revision 1 on three nodes. */
function running(spec: ServiceSpec = svc('img:1'), n = 3): World {
  const w = new World();
  w.apply('app', { web: spec });
  for (let i = 0; i < n; i++) w.place('app', 'web', i, `node-${(i % 3) + 1}`);
  w.converge();
  w.pass();
  return w;
}

/** Three replicas of img:1 rolled to `spec` (img:2), whose first step never got ready: aborted on the step timeout. */
function timedOut(spec: ServiceSpec = svc('img:2')): World {
  const w = running();
  w.apply('app', { web: spec });
  w.pass();
  w.now += CFG.stepTimeoutMs;
  w.pass();
  return w;
}

/** A running service (img:1) with this update block, and the apply that rolls it to img:2; no pass yet. */
function rollingTo2(update: ServiceSpec['update'], n = 3): World {
  const w = running(svc('img:1', { replicas: n, update }), n);
  w.apply('app', { web: svc('img:2', { replicas: n, update }) });
  return w;
}

/** rollingTo2 after its first pass, the first step's replica ready at img:2 and a second gone by. */
function firstStepReady(update: ServiceSpec['update']): World {
  const w = rollingTo2(update);
  w.pass();
  w.converge();
  w.now += 1000;
  return w;
}

/** Two single-replica services, web (img:1) and db (db:1), running at revision 1. */
function webAndDb(): World {
  const w = new World();
  w.apply('app', { web: svc('img:1', { replicas: 1 }), db: svc('db:1', { replicas: 1 }) });
  w.place('app', 'web', 0, 'node-1');
  w.place('app', 'db', 0, 'node-2');
  w.converge();
  return w;
}

const H1 = specHash(svc('img:1'));
const H2 = specHash(svc('img:2'));
const H3 = specHash(svc('img:3'));

describe('step progression', () => {
  it('needs no rollout while every replica runs the current spec hash', () => {
    const w = running();
    expect(w.plan()).toBeUndefined();
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: {} });
    expect(w.pass().acts).toEqual([]);
  });

  it('rolls one replica per step, waiting for each to be running and healthy at the new revision', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    expect(w.plan()).toMatchObject({ fromRevision: 1, toRevision: 2, fromHash: H1, toHash: H2, totalSteps: 3, currentStep: 1, state: 'in_progress' });
    expect(w.hashes()).toEqual([H2, H1, H1]);
    expect(w.auditTypes()).toEqual(['rollout_started', 'rollout_step']);
    expect(w.audit[1]!.payload).toMatchObject({ deployment: 'app', service: 'web', from_revision: 1, to_revision: 2, replica: 'app-web-0', node: 'node-1', step: 1, total_steps: 3, reason: 'forward' });
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: { web: { state: 'in_progress', fromRevision: 1, toRevision: 2, currentStep: 1, totalSteps: 3 } } });

    // Nothing changes until the replica is observed at the new hash, running and healthy.
    w.now += 1000;
    expect(w.pass().acts).toEqual([]);
    w.observe('app-web-0', { state: 'running', health: 'starting' });
    expect(w.pass().acts).toEqual([]);
    w.observe('app-web-0', { state: 'running', health: 'healthy' });
    w.now += 1000;
    w.pass();
    expect(w.hashes()).toEqual([H2, H2, H1]);
    expect(w.plan()?.steps[0]).toMatchObject({ replica: 'app-web-0', result: 'done', finishedAt: new Date(w.now).toISOString() });
    expect(w.plan()?.currentStep).toBe(2);

    w.rounds(2);
    expect(w.hashes()).toEqual([H2, H2, H2]);
    expect(w.plan()).toMatchObject({ state: 'completed', currentStep: 3, totalSteps: 3 });
    expect(w.plan()?.steps.map((s) => [s.replica, s.result])).toEqual([
      ['app-web-0', 'done'],
      ['app-web-1', 'done'],
      ['app-web-2', 'done'],
    ]);
    expect(w.auditTypes()).toEqual(['rollout_started', 'rollout_step', 'rollout_step', 'rollout_step', 'rollout_completed']);
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 2, services: { web: { state: 'completed', currentStep: 3, totalSteps: 3 } } });
    expect(w.metrics.filter((m) => m.metric === 'rollout')).toEqual([{ metric: 'rollout', result: 'completed' }]);
    expect(w.metrics.filter((m) => m.metric === 'step').map((m) => m.result)).toEqual(['done', 'done', 'done']);
    expect(w.pass().acts).toEqual([]);
  });

  it('rolls a single-replica service in one step', () => {
    const w = running(svc('img:1', { replicas: 1 }), 1);
    w.apply('app', { web: svc('img:2', { replicas: 1 }) });
    w.pass();
    expect(w.plan()).toMatchObject({ totalSteps: 1, currentStep: 1 });
    w.converge();
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'completed', totalSteps: 1 });
  });

  it('without a health check, a replica is ready after running for the minimum ready time', () => {
    const w = running(svc('img:1', { healthcheck: undefined }));
    w.apply('app', { web: svc('img:2', { healthcheck: undefined }) });
    w.pass();
    w.observe('app-web-0', { health: 'none' });
    const d = w.pass();
    expect(d.acts).toEqual([]);
    expect(d.wakeAt).toBe(w.now + MIN_READY);
    w.now += MIN_READY - 1;
    expect(w.pass().acts).toEqual([]);
    w.now += 1;
    w.pass();
    expect(w.plan()?.currentStep).toBe(2);
  });

  it('update.minReadyTime of the service overrides the default', () => {
    const w = running(svc('img:1', { healthcheck: undefined }));
    w.apply('app', { web: svc('img:2', { healthcheck: undefined, update: { minReadyTime: '30s' } }) });
    w.pass();
    w.observe('app-web-0', { health: 'none' });
    w.now += MIN_READY;
    expect(w.pass().acts).toEqual([]);
    w.now += 25_000;
    w.pass();
    expect(w.plan()?.currentStep).toBe(2);
  });

  it('is deterministic: the same snapshot and clock give the same plan', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    const s = w.snapshot();
    expect(decide(s, w.now, CFG)).toEqual(decide(w.frozenSnapshot(), w.now, CFG));
  });

  it('rolls a global service node by node', () => {
    const w = new World();
    const g = (image: string): ServiceSpec => ({ image, placement: { mode: 'global' }, healthcheck: HC });
    w.apply('app', { agent: g('img:1') });
    for (const n of ['node-c', 'node-a', 'node-b']) w.place('app', 'agent', undefined, n);
    w.converge();
    w.apply('app', { agent: g('img:2') });
    for (let i = 0; i < 4; i++) {
      w.pass();
      w.converge();
    }
    expect(w.steppedReplicas()).toEqual(['app-agent-node-a', 'app-agent-node-b', 'app-agent-node-c']);
    expect(w.plan('app', 'agent')).toMatchObject({ state: 'completed', totalSteps: 3 });
  });

  it('leaves the other services of the deployment alone', () => {
    const w = webAndDb();
    w.apply('app', { web: svc('img:2', { replicas: 1 }), db: svc('db:1', { replicas: 1 }) });
    w.pass();
    expect(w.plan('app', 'db')).toBeUndefined();
    expect(w.plan('app', 'web')?.state).toBe('in_progress');
    w.converge();
    w.pass();
    expect(w.status()?.rollout?.appliedRevision).toBe(2);
  });

  it.each<[string, boolean]>([
    ['restart: true — web rolls, after db is recreated', true],
    ['no restart — web is left alone', false],
  ])('dependsOn db %s', (_what, restart) => {
    const app = (dbImage: string) => withDependencyHashes({ services: { web: svc('img:1', { replicas: 1, dependsOn: { db: { condition: 'service_started', ...(restart ? { restart } : {}) } } }), db: svc(dbImage, { replicas: 1 }) } }).services;
    const w = new World();
    w.apply('app', app('db:1'));
    w.place('app', 'web', 0, 'node-1');
    w.place('app', 'db', 0, 'node-2');
    w.converge();
    w.pass();
    w.apply('app', app('db:2'));
    const first = w.pass();
    expect(w.plan('app', 'db')?.state).toBe('in_progress');
    if (!restart) {
      expect(w.plan('app', 'web')).toBeUndefined();
      return;
    }
    // web's rollout waits while db's replica is not yet ready at db:2: no step of web.
    expect(w.plan('app', 'web')?.state).toBe('in_progress');
    expect(w.steppedReplicas()).toEqual(['app-db-0']);
    expect(JSON.stringify(first.notes)).toContain('waits for db to be recreated first (dependsOn db restart: true)');
    w.converge();
    w.pass();
    expect(w.steppedReplicas()).toEqual(['app-db-0', 'app-web-0']);
    w.rounds(2);
    expect(w.plan('app', 'web')?.state).toBe('completed');
  });

  it('a scale-up during a rollout creates replicas at the target, and totalSteps follows', () => {
    const w = running();
    w.apply('app', { web: svc('img:2', { replicas: 4 }) });
    w.pass();
    w.place('app', 'web', 3, 'node-1');
    expect(w.hashes()[3]).toBe(H2);
    w.rounds(3);
    expect(w.plan()).toMatchObject({ state: 'completed', totalSteps: 3, currentStep: 3 });
  });
});

describe('step timeout, abort and revert', () => {
  it('a stop-first step counts its step timeout after the old container has had its deregistration delay and stop grace (a 60 s grace under a 60 s step timeout can finish)', () => {
    const update = { maxSurge: 0 };
    const old = { replicas: 3, update, stopGracePeriod: '60s', deregistrationDelay: '5s' };
    const w = running(svc('img:1', old));
    w.apply('app', { web: svc('img:2', { ...old, stopGracePeriod: '10s' }) });
    const first = w.pass();
    // The old spec's 5 s deregistration delay and its 60 s grace.
    const leaving = 5_000 + 60_000;
    expect(w.plan()?.steps[0]).toMatchObject({ replica: 'app-web-0', leavingMs: leaving });
    expect(first.wakeAt).toBe(T0 + leaving + CFG.stepTimeoutMs);
    w.observe('app-web-0', { state: 'starting', health: 'starting' });
    w.now += CFG.stepTimeoutMs + 1;
    w.pass();
    expect(w.plan()?.state).toBe('in_progress');
    w.now = T0 + leaving + CFG.stepTimeoutMs;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'step_timeout' });
  });

  it('a step the agent must take stop-first (a cluster-network replica: its sandbox holds the address) counts its timeout after the old container leaves, though the surge is not spent', () => {
    const old = { replicas: 3, network: 'cluster' as const, stopGracePeriod: '5s', deregistrationDelay: '2s' };
    const w = running(svc('img:1', old));
    w.apply('app', { web: svc('img:2', old) });
    const first = w.pass();
    expect(w.plan()?.steps[0]).toMatchObject({ replica: 'app-web-0', leavingMs: 7_000 });
    expect(first.wakeAt).toBe(T0 + 7_000 + CFG.stepTimeoutMs);
  });

  it('a start-first step has no leaving time: its old container serves until the new one is ready', () => {
    const w = rollingTo2({});
    w.pass();
    expect(w.plan()?.steps[0]?.leavingMs).toBeUndefined();
  });

  it('aborts at the step timeout and reverts the replica in the same act', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.observe('app-web-0', { state: 'starting', health: 'starting', replacing: { revision: 1, specHash: H1, containerId: 'c', state: 'running' } });
    w.now += CFG.stepTimeoutMs - 1;
    const before = w.pass();
    expect(before.acts).toEqual([]);
    expect(before.wakeAt).toBe(T0 + CFG.stepTimeoutMs);
    w.now += 1;
    const d = w.pass();
    expect(d.acts).toHaveLength(2); // the plan with the revert, and the status
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'step_timeout', currentStep: 1, finishedAt: new Date(w.now).toISOString() });
    expect(w.plan()?.steps.map((s) => [s.replica, s.result])).toEqual([
      ['app-web-0', 'failed'],
      ['app-web-0', undefined],
    ]);
    expect(w.hashes()).toEqual([H1, H1, H1]);
    expect(w.desiredOf('app-web-0')[0]!.spec).toMatchObject({ revision: 1, specHash: H1, template: { image: 'img:1' } });
    expect(w.auditTypes()).toEqual(['rollout_started', 'rollout_step', 'rollout_aborted', 'rollout_step']);
    expect(w.audit[2]!.payload).toMatchObject({ deployment: 'app', service: 'web', from_revision: 1, to_revision: 2, replica: 'app-web-0', reason: 'step_timeout' });
    expect(w.audit[3]!.payload).toMatchObject({ replica: 'app-web-0', revision: 1, reason: 'revert' });
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: { web: { state: 'aborted', failureReason: 'step_timeout' } } });
    expect(w.metrics).toContainEqual({ metric: 'rollout', result: 'aborted' });
    expect(w.metrics).toContainEqual({ metric: 'step', result: 'failed' });

    // The revert finishes when the replica runs the old revision again; the rollout is not retried.
    w.converge();
    w.now += 1000;
    w.pass();
    expect(w.plan()?.steps[1]?.result).toBe('reverted');
    for (let i = 0; i < 3; i++) {
      w.now += CFG.stepTimeoutMs;
      expect(w.pass().acts).toEqual([]);
    }
    expect(w.plan()?.state).toBe('aborted');
  });

  it('a revert does not take a revision record of another spec under the plan\'s fromRevision (a deployment deleted and re-created numbers afresh)', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    // Revision 1's record now holds another spec than the one the replicas left (fromHash).
    const rec = w.get<DeploymentRevision>(keys.revision('app', 1))!;
    w.put(keys.revision('app', 1), { ...rec, spec: { ...rec.spec, template: { services: { web: svc('img:9') } } } });
    w.now += CFG.stepTimeoutMs;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', fromHash: H1 });
    // Reverted to what the replicas ran (a replica still at it), not to the record's img:9.
    expect(w.hashes()).toEqual([H1, H1, H1]);
    expect(w.desiredOf('app-web-0')[0]!.spec.template).toMatchObject({ image: 'img:1' });
  });

  it('a plan of a deleted and re-created deployment\'s previous incarnation never governs the new one (breadth sim seed 26425, seed 11639)', () => {
    const w = timedOut();
    expect(w.plan()).toMatchObject({ state: 'aborted', fromHash: H1, toRevision: 2 });
    w.converge();
    // Deleted and re-created before any rollout pass saw the deletion: the new incarnation numbers
    // its revisions afresh and reaches generation 2 (the old plan's toRevision); the replicas the
    // scheduler had not yet removed still run img:1.
    w.remove(keys.deployment('app'));
    for (const r of [1, 2]) w.remove(keys.revision('app', r));
    w.apply('app', { web: svc('img:3', { replicas: 2 }) });
    w.apply('app', { web: svc('img:3') });
    w.pass();
    // Not reverted to the old incarnation's img:1: a new plan toward img:3, made for this incarnation.
    const created = w.versioned(keys.deployment('app'))!.createRevision;
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromHash: H1, toHash: H3, toRevision: 2, incarnation: created });
    expect(w.hashes()).toContain(H3);
  });

  it('update.stepTimeout of the service overrides the default', () => {
    const w = running();
    w.apply('app', { web: svc('img:2', { update: { stepTimeout: '5s' } }) });
    w.pass();
    w.now += 5000;
    w.pass();
    expect(w.plan()?.state).toBe('aborted');
  });

  it.each<[string, Partial<ReplicaObservedStatus>, boolean, string]>([
    ['image_pull_failed', { state: 'pending', code: 'image_pull_failed', details: 'img:2: connection refused' }, false, 'image_pull_failed'],
    ['a pull the registry refused says so', { state: 'pending', code: 'image_unauthorized', details: 'img:2: pull access denied' }, false, 'image_unauthorized'],
    ['an image the registry lacks says so', { state: 'pending', code: 'image_not_found', details: 'img:2: manifest unknown' }, false, 'image_not_found'],
    ['a registry out of reach says so', { state: 'pending', code: 'registry_unreachable', details: 'img:2: connection refused' }, false, 'registry_unreachable'],
    ['degraded', { state: 'degraded', health: 'unhealthy' }, false, 'health_check_failed'],
    ['starting for ever', { state: 'starting', health: 'starting' }, false, 'step_timeout'],
    ['restart exhausted at this generation', { state: 'exited', exitCode: 1 }, true, 'restart_exhausted'],
  ])('failure reason: %s', (_n, status, exhausted, reason) => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.observe('app-web-0', status);
    if (exhausted) {
      w.exhaust('app-web-0', 'node-1', 2);
      // restart_exhausted is terminal: no need to wait for the timeout.
      w.now += 1000;
    } else w.now += CFG.stepTimeoutMs;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: reason });
    expect(w.audit.find((a) => a.type === 'rollout_aborted')?.payload.reason).toBe(reason);
  });

  it('ignores a restart_exhausted flag left from an older generation', () => {
    const w = running();
    w.exhaust('app-web-0', 'node-1', 1);
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.now += 1000;
    w.pass();
    expect(w.plan()?.state).toBe('in_progress');
  });

  it('after an abort at step 3, reverts every moved replica one at a time, the failed one first', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.rounds(2);
    expect(w.hashes()).toEqual([H2, H2, H2]);
    w.observe('app-web-2', { state: 'degraded', health: 'unhealthy' });
    w.now += CFG.stepTimeoutMs;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'health_check_failed' });
    expect(w.hashes()).toEqual([H2, H2, H1]);
    // One revert at a time: the next waits until the previous one is ready.
    w.now += 1000;
    expect(w.pass().acts).toEqual([]);
    w.converge();
    w.pass();
    expect(w.hashes()).toEqual([H1, H2, H1]);
    w.converge();
    w.pass();
    expect(w.hashes()).toEqual([H1, H1, H1]);
    w.converge();
    w.pass();
    expect(w.plan()?.steps.map((s) => [s.replica, s.result])).toEqual([
      ['app-web-0', 'done'],
      ['app-web-1', 'done'],
      ['app-web-2', 'failed'],
      ['app-web-2', 'reverted'],
      ['app-web-0', 'reverted'],
      ['app-web-1', 'reverted'],
    ]);
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: { web: { state: 'aborted', currentStep: 3 } } });
  });

  it('the scheduler places new replicas at the old revision after an abort (servingTemplate)', () => {
    const w = timedOut(svc('img:2', { replicas: 4 }));
    w.place('app', 'web', 3, 'node-1');
    expect(w.hashes()[3]).toBe(H1);
    w.converge();
    w.pass();
    expect(w.plan()?.state).toBe('aborted');
  });

  it('a revert that never becomes ready does not hold the others back for ever', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.converge();
    w.pass();
    w.now += CFG.stepTimeoutMs;
    w.pass(); // abort at step 2: app-web-1 goes back first
    expect(w.hashes()).toEqual([H2, H1, H1]);
    w.observe('app-web-1', { state: 'exited' });
    w.now += CFG.stepTimeoutMs;
    w.pass();
    // app-web-1 is not running, so app-web-0 (running) may not go down too.
    expect(w.hashes()).toEqual([H2, H1, H1]);
    w.observe('app-web-1', { state: 'running' });
    w.pass();
    expect(w.hashes()).toEqual([H1, H1, H1]);
  });

  it('a new apply after an abort starts a new rollout from the revision that kept serving', () => {
    const w = timedOut();
    w.converge();
    w.pass();
    w.apply('app', { web: svc('img:3') });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 3, fromHash: H1, toHash: H3 });
  });
});

describe('supersede by a newer apply', () => {
  it('restarts the plan toward the newest revision, keeping the last fully rolled revision as from', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.converge();
    w.pass(); // step 2 in flight on app-web-1
    expect(w.hashes()).toEqual([H2, H2, H1]);
    w.observe('app-web-1', { state: 'starting', health: 'starting', replacing: { revision: 1, specHash: H1, containerId: 'c', state: 'running' } });
    w.apply('app', { web: svc('img:3') });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 3, fromHash: H1, toHash: H3, currentStep: 1, totalSteps: 3 });
    // The replica caught mid-step goes first: it is not ready anyway.
    expect(w.hashes()).toEqual([H2, H3, H1]);
    expect(w.audit.filter((a) => a.type === 'rollout_started').map((a) => a.payload.reason)).toEqual(['new_revision', 'superseded']);
    expect(w.audit.filter((a) => a.type === 'rollout_started')[1]!.payload).toMatchObject({ superseded_revision: 2, from_revision: 1, to_revision: 3 });
    expect(w.metrics).toContainEqual({ metric: 'rollout', result: 'superseded' });
    w.rounds(3);
    expect(w.hashes()).toEqual([H3, H3, H3]);
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 3 });
    expect(w.status()?.rollout?.appliedRevision).toBe(3);
  });

  it('an apply that does not change the service keeps its rollout going toward the new revision number', () => {
    const w = new World();
    w.apply('app', { web: svc('img:1'), db: svc('db:1', { replicas: 1 }) });
    for (let i = 0; i < 3; i++) w.place('app', 'web', i, `node-${i + 1}`);
    w.place('app', 'db', 0, 'node-1');
    w.converge();
    w.apply('app', { web: svc('img:2'), db: svc('db:1', { replicas: 1 }) });
    w.pass();
    w.converge();
    w.pass();
    w.apply('app', { web: svc('img:2'), db: svc('db:1', { replicas: 2 }) }); // generation 3, web unchanged
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 3, currentStep: 2 });
    expect(w.audit.filter((a) => a.type === 'rollout_started')).toHaveLength(1);
    w.rounds(2);
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 3 });
    expect(w.status()?.rollout?.appliedRevision).toBe(3);
  });

  it('an apply back to the running spec in the middle of a rollout reverts the moved replicas as a new rollout', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.converge();
    w.pass();
    w.apply('app', { web: svc('img:1') }); // revision 3 = revision 1's spec (what jaco rollback does)
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 3, toHash: H1 });
    w.rounds(3);
    expect(w.hashes()).toEqual([H1, H1, H1]);
    expect(w.plan()).toMatchObject({ state: 'completed' });
    expect(w.status()?.rollout?.appliedRevision).toBe(3);
  });

  it('an apply back to the running spec before any step landed completes at once', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.remove(keys.heartbeat('node-1'));
    w.remove(keys.heartbeat('node-2'));
    w.remove(keys.heartbeat('node-3'));
    w.pass(); // every node NotReady: the plan waits with no step
    expect(w.plan()).toMatchObject({ state: 'in_progress', currentStep: 0 });
    w.apply('app', { web: svc('img:1') });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 3, totalSteps: 0 });
  });
});

describe('the invariant and what the rollout leaves alone', () => {
  it('does not step a running replica while another replica is not running; steps the broken one first', () => {
    const w = running();
    w.observe('app-web-2', { state: 'exited', exitCode: 1 });
    w.apply('app', { web: svc('img:2') });
    w.pass();
    expect(w.hashes()).toEqual([H1, H1, H2]);
    w.observe('app-web-1', { state: 'exited', exitCode: 1 });
    w.observe('app-web-2', { state: 'running' });
    w.pass();
    expect(w.hashes()).toEqual([H1, H2, H2]);
    // app-web-1 is still starting at the new revision: app-web-0 waits.
    w.observe('app-web-1', { state: 'starting', health: 'starting' });
    w.now += 1000;
    w.pass();
    expect(w.hashes()).toEqual([H1, H2, H2]);
  });

  it('a move in flight holds the service\'s disruption budget: no step until it completes, then every replica steps', () => {
    const w = running();
    w.place('app', 'web', 1, 'node-3', { move: { id: 'm1', from: 'node-2', by: 'drain', startedAt: new Date(w.now).toISOString(), deadline: new Date(w.now + 60_000).toISOString() } });
    w.converge();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    w.rounds(2);
    // maxUnavailable 1, spent by the move: the rollout waits (moves and steps share one budget).
    expect(w.steppedReplicas()).toEqual([]);
    expect(w.decisions.at(-1)!.decision.notes.map((n) => n.note).join('; ')).toContain('app-web-1: a move of it is in flight');
    // The move completes: the source goes, the destination's marker is cleared.
    w.remove(keys.desired('node-2', 'app-web-1'));
    w.remove(keys.observed('node-2', 'app-web-1'));
    const dst = w.under<ReplicaDesired>('desired/node-3/').find((d) => d.value.spec.replica === 'app-web-1')!;
    const { move: _m, ...spec } = dst.value.spec;
    w.put(dst.key, { ...dst.value, spec });
    w.rounds(4);
    expect(w.steppedReplicas().sort()).toEqual(['app-web-0', 'app-web-1', 'app-web-2']);
    expect(w.desiredOf('app-web-1').map((d) => [d.spec.node, d.spec.specHash])).toEqual([['node-3', H2]]);
    w.converge();
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'completed', totalSteps: 3 });
  });

  it('completes only once no agent reports an old container: status says so meanwhile', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.rounds(8);
    expect(w.hashes()).toEqual([H2, H2, H2]);
    // The last replica's agent still runs its old container beside the new one.
    const d = w.desiredOf('app-web-2')[0]!;
    w.observe('app-web-2', { replacing: { revision: 1, specHash: H1, containerId: 'old', state: 'running' } });
    const plan = w.get<RolloutPlan>(keys.rollout('app', 'web'))!;
    w.put(keys.rollout('app', 'web'), { ...plan, spec: { ...plan.spec, state: 'in_progress', finishedAt: undefined } });
    w.pass();
    expect(w.plan()!.state).toBe('in_progress');
    expect(w.decisions.at(-1)!.decision.notes.map((n) => n.note).join('; ')).toContain('waiting for the old container(s) of app-web-2 to stop');
    w.observe('app-web-2', {}, d.spec.node);
    w.pass();
    expect(w.plan()!.state).toBe('completed');
  });

  it('leaves suspended replicas and replicas on NotReady nodes alone', () => {
    const w = running();
    const d = w.under<ReplicaDesired>('desired/node-2/')[0]!;
    w.put(d.key, { ...d.value, spec: { ...d.value.spec, suspended: { reason: 'drain --force', at: new Date(w.now).toISOString() } } });
    w.heartbeat('node-3', false);
    w.apply('app', { web: svc('img:2') });
    for (let i = 0; i < 3; i++) {
      w.pass();
      w.converge();
    }
    // app-web-2's node is down: it is not running, so it holds the others back until the scheduler replaces it.
    expect(w.steppedReplicas()).toEqual([]);
    w.remove(keys.desired('node-3', 'app-web-2'));
    w.place('app', 'web', 3, 'node-1');
    w.rounds(2);
    expect(w.steppedReplicas()).toEqual(['app-web-0']);
    // The suspended replica stays at the old hash; it rolls when it is resumed.
    expect(w.plan()).toMatchObject({ state: 'completed', totalSteps: 1 });
    expect(w.desiredOf('app-web-1')[0]!.spec.specHash).toBe(H1);
    const s = w.get<ReplicaDesired>(keys.desired('node-2', 'app-web-1'))!;
    w.put(keys.desired('node-2', 'app-web-1'), { ...s, spec: { ...s.spec, suspended: undefined } });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 2, totalSteps: 1 });
    expect(w.desiredOf('app-web-1')[0]!.spec.specHash).toBe(H2);
  });

  it('does nothing to a service scaled to zero', () => {
    const w = new World();
    w.apply('app', { web: svc('img:1', { replicas: 0 }) });
    w.apply('app', { web: svc('img:2', { replicas: 0 }) });
    w.pass();
    expect(w.plan()).toBeUndefined();
    expect(w.status()?.rollout?.appliedRevision).toBe(2);
  });
});

describe('deleted deployments and services, and the status record', () => {
  it('deletes the plan of a deleted service and of a deleted deployment, and its status field', () => {
    const w = webAndDb();
    w.apply('app', { web: svc('img:2', { replicas: 1 }), db: svc('db:2', { replicas: 1 }) });
    w.pass();
    expect(w.plan('app', 'db')).toBeDefined();
    w.apply('app', { web: svc('img:2', { replicas: 1 }) });
    w.pass();
    expect(w.plan('app', 'db')).toBeUndefined();
    expect(Object.keys(w.status()?.rollout?.services ?? {})).toEqual(['web']);
    w.remove(keys.deployment('app'));
    w.pass();
    expect(w.plan('app', 'web')).toBeUndefined();
    expect(w.status()).toBeUndefined();
  });

  it("keeps the scheduler's field of the status: creates, updates and trims only its own", () => {
    const w = running();
    const st = w.get<DeploymentStatus>(keys.deploymentStatus('app'))!;
    const scheduling = { observedGeneration: 1, updatedAt: new Date(w.now).toISOString(), services: { web: { desired: 3, placed: 3 } } };
    w.put(keys.deploymentStatus('app'), { ...st, status: { ...st.status, scheduling } });
    w.apply('app', { web: svc('img:2') });
    w.pass();
    expect(w.status()).toMatchObject({ scheduling, rollout: { appliedRevision: 1, services: { web: { state: 'in_progress' } } } });
    w.remove(keys.deployment('app'));
    w.pass();
    expect(w.status()).toEqual({ scheduling });
  });

  it('writes the status only when it changed', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    const rev = w.versioned(keys.deploymentStatus('app'))!.modRevision;
    w.now += 1000;
    w.pass();
    expect(w.versioned(keys.deploymentStatus('app'))!.modRevision).toBe(rev);
  });

  it('acts decided from a stale snapshot (a deposed leader, a lagging informer) never land', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    const stale = w.frozenSnapshot();
    w.pass();
    w.converge();
    w.pass();
    const hashes = w.hashes();
    const conflicts = w.conflicts;
    w.commit(decide(stale, w.now, CFG));
    expect(w.conflicts).toBeGreaterThan(conflicts);
    expect(w.hashes()).toEqual(hashes);
    expect(w.plan()?.currentStep).toBe(2);
  });

  /** Rolls app/web to img:2 until a pass would complete it; returns that pass's snapshot, kept apart from later writes. */
  function aboutToComplete(w: World): RolloutSnapshot {
    for (let i = 0; i < 20; i++) {
      w.converge();
      w.now += 1000;
      const snap = w.frozenSnapshot();
      if (decide(snap, w.now, CFG).acts.some((a) => a.audit.some((r) => r.type === 'rollout_completed'))) return snap;
      w.pass();
    }
    throw new Error('the rollout never came to complete');
  }

  /** The completion decided from `stale` compares the counter as judged (absent), is refused, and the next pass steps `unseen`. */
  function refusedByCounter(w: World, stale: RolloutSnapshot, unseen: string): void {
    const conflicts = w.conflicts;
    const d = decide(stale, w.now, CFG);
    expect(d.acts.find((a) => a.label === 'rollout app/web')!.ops).toContainEqual({ op: 'check', key: keys.counter('app', 'web'), modRevision: 0 });
    w.commit(d);
    expect(w.conflicts).toBeGreaterThan(conflicts);
    expect(w.plan()!.state).toBe('in_progress');
    w.pass();
    expect(w.steppedReplicas().at(-1)).toBe(unseen);
  }

  it('a completion compares the counter it judged: a replica placed unseen at the old spec refuses it (sim seeds 66901, 69100)', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    const stale = aboutToComplete(w);
    // The scheduler placed one more replica at the old spec; the snapshot never received it (a lost event).
    w.place('app', 'web', 3, 'node-1', { specHash: H1, revision: 1 });
    w.put(keys.counter('app', 'web'), { apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name: 'app-web' }, spec: { next: 4 } });
    refusedByCounter(w, stale, 'app-web-3');
  });

  it('a global service too: a global replica placed unseen at the old spec refuses the completion (its placement writes the counter)', () => {
    const g = (image: string): ServiceSpec => ({ image, healthcheck: HC, placement: { mode: 'global' } });
    const w = new World();
    w.apply('app', { web: g('img:1') });
    for (const n of ['node-1', 'node-2', 'node-3']) w.place('app', 'web', undefined, n);
    w.converge();
    w.pass();
    w.apply('app', { web: g('img:2') });
    const stale = aboutToComplete(w);
    // node-4 joined; the scheduler placed its replica at the old spec (the serving template) with the
    // counter in the same transaction (controllers/scheduler/membership.ts globalMarker); the snapshot missed both.
    w.place('app', 'web', undefined, 'node-4', { specHash: specHash(g('img:1')), revision: 1 });
    w.put(keys.counter('app', 'web'), { apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name: 'app-web' }, spec: { next: 0 } });
    refusedByCounter(w, stale, 'app-web-node-4');
  });

  it('a completion compares the disruption ledger it judged: a move started meanwhile refuses it (breadth sim seed 30302)', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    const stale = aboutToComplete(w);
    const ledger = w.versioned(keys.disruptions('app', 'web'));
    const d = decide(stale, w.now, CFG);
    expect(d.acts.find((a) => a.label === 'rollout app/web')!.ops).toContainEqual({ op: 'check', key: keys.disruptions('app', 'web'), modRevision: ledger?.modRevision ?? 0 });
    // A drain's move start, decided from the same state, lands first: it records itself in the ledger.
    w.put(keys.disruptions('app', 'web'), { apiVersion: API_VERSION, kind: 'DisruptionLedger', metadata: { name: 'app-web' }, spec: { deployment: 'app', service: 'web', sequence: 99, last: { replica: 'app-web-1', by: 'drain', kind: 'move', at: new Date(w.now).toISOString() } } });
    const conflicts = w.conflicts;
    w.commit(d);
    expect(w.conflicts).toBeGreaterThan(conflicts);
    expect(w.plan()!.state).toBe('in_progress');
  });

  it('a completion compares the heartbeat of every node it excused as NotReady: an agent alive after all refuses it', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    aboutToComplete(w);
    // node-1's heartbeat as a lagging cache shows it (gone with a lease: NotReady), its agent still reporting the old container of the first step's replica.
    w.remove(keys.heartbeat('node-1'));
    w.observe('app-web-0', { specHash: H1, revision: 1 });
    const stale = w.frozenSnapshot();
    const d = decide(stale, w.now, CFG);
    expect(d.acts.find((a) => a.label === 'rollout app/web')!.ops).toContainEqual({ op: 'check', key: keys.heartbeat('node-1'), modRevision: 0 });
    // The store has the agent's newer heartbeat: the completion is refused, and a pass on it waits for the old container.
    w.heartbeat('node-1');
    const conflicts = w.conflicts;
    w.commit(d);
    expect(w.conflicts).toBeGreaterThan(conflicts);
    expect(w.plan()!.state).toBe('in_progress');
    w.pass();
    expect(w.plan()!.state).toBe('in_progress');
    expect(w.decisions.at(-1)!.decision.notes.map((n) => n.note).join('; ')).toContain('waiting for the old container(s) of app-web-0 to stop');
  });
});

// ---------------------------------------------------------------- generated observed-state sequences


interface SimOptions {
  order: 'start-first' | 'stop-first';
  replicas: number;
  /** Per tick, the chance that a running replica crashes for a while. */
  crash: number;
  /** The new image cannot be pulled. */
  badImage: boolean;
  /** A newer apply lands mid-rollout at this tick. */
  supersedeAt?: number;
  /** More of the update block (parallelism, maxSurge, maxUnavailable, failureAction, …). */
  update?: ServiceSpec['update'];
}

/**
 * Agents that take a random number of ticks to start a container, with start-first or stop-first
 * replacement, random crashes, and an unpullable image. Returns the world and, per tick, how many
 * replicas of the service were not running.
 */
function simulate(seed: number, o: SimOptions): { w: World; notRunning: number[]; surge: number[]; inFlight: number[] } {
  const rnd = prng(seed);
  const w = new World({ stepTimeoutMs: 20_000 });
  const spec = (image: string): ServiceSpec => ({ image, replicas: o.replicas, healthcheck: HC, update: { order: o.order, ...o.update } });
  w.apply('app', { web: spec('img:1') });
  for (let i = 0; i < o.replicas; i++) w.place('app', 'web', i, `node-${(i % 3) + 1}`);
  w.converge();
  w.apply('app', { web: spec(o.badImage ? 'bad:1' : 'img:2') });
  const bad = specHash(spec('bad:1'));
  const starting = new Map<string, number>();
  const downFor = new Map<string, number>();
  const notRunning: number[] = [];
  const surge: number[] = [];
  const inFlight: number[] = [];
  let quiet = 0;
  for (let tick = 0; tick < 400 && quiet < 3; tick++) {
    if (tick === o.supersedeAt) w.apply('app', { web: spec('img:3') });
    w.pass();
    w.now += 1000;
    for (const { value: d } of w.under<ReplicaDesired>('desired/')) {
      const id = d.spec.replica;
      const hash = d.spec.specHash;
      const cur = w.get<ReplicaObserved>(keys.observed(d.spec.node, id))?.status;
      const down = downFor.get(id) ?? 0;
      if (down > 0) {
        // A crashed container comes back as it was (the scheduler restarts it).
        downFor.set(id, down - 1);
        if (down === 1) w.observe(id, { specHash: cur?.specHash, revision: cur?.revision });
        continue;
      }
      const key = `${id}@${d.spec.revision}/${hash}`;
      if (cur?.specHash !== hash || cur.revision !== d.spec.revision || starting.has(key)) {
        const oldServes = !!cur && (cur.state === 'running' || cur.replacing?.state === 'running');
        // The order the rollout wrote into this replica's template (stop-first once the surge is spent).
        const replacing = d.spec.template.update?.order !== 'stop-first' && oldServes ? { replacing: cur.replacing ?? { revision: cur.revision ?? 0, specHash: cur.specHash ?? '', containerId: 'old', state: 'running' as const } } : {};
        if (hash === bad) {
          w.observe(id, { state: 'pending', code: 'image_pull_failed', health: 'none', ...replacing });
          continue;
        }
        if (!starting.has(key)) starting.set(key, 1 + Math.floor(rnd() * 6));
        const left = starting.get(key)!;
        if (left > 0) {
          starting.set(key, left - 1);
          w.observe(id, { state: 'starting', health: 'starting', ...replacing });
          continue;
        }
        starting.delete(key);
        w.observe(id, {});
      } else if (cur.state === 'running' && rnd() < o.crash) {
        downFor.set(id, 1 + Math.floor(rnd() * 4));
        w.observe(id, { state: 'exited', exitCode: 1, specHash: cur.specHash, revision: cur.revision });
      }
    }
    const obs = w.under<ReplicaObserved>('observed/').map((v) => v.value);
    notRunning.push(obs.filter((x) => !observedRunning(x)).length);
    surge.push(obs.filter((x) => x.status.replacing?.state === 'running').length);
    inFlight.push(w.plan()?.steps.filter((s) => !s.finishedAt).length ?? 0);
    const plan = w.plan();
    const terminal = plan && plan.state !== 'in_progress' && !plan.steps.some((s) => !s.finishedAt);
    const converged = !starting.size && ![...downFor.values()].some((v) => v > 0) && obs.every((x) => x.status?.state === 'running' || x.status?.code === 'image_pull_failed');
    quiet = terminal && converged && tick > (o.supersedeAt ?? 0) ? quiet + 1 : 0;
  }
  return { w, notRunning, surge, inFlight };
}

/** The invariant on every step decide started: the stepped replica was not running, or all others were. */
function checkStepsKeepInvariant(w: World): void {
  for (const { running, decision } of w.decisions) {
    for (const act of decision.acts)
      for (const op of act.ops) {
        if (op.op !== 'update' || !op.key.startsWith('desired/')) continue;
        const id = op.key.slice(op.key.lastIndexOf('/') + 1);
        const others = [...running].filter(([k]) => k !== id);
        if (running.get(id)) expect(others.filter(([, r]) => !r).map(([k]) => k), `a step of running ${id} while others are down`).toEqual([]);
      }
  }
}

describe('the invariant over generated observed-state sequences', () => {
  const seeds = Array.from({ length: 40 }, (_, i) => i + 1);

  it.each(seeds)('seed %i: start-first and stop-first, no crashes: never more than one replica down, and it completes', (seed) => {
    for (const order of ['start-first', 'stop-first'] as const) {
      const { w, notRunning } = simulate(seed, { order, replicas: 2 + (seed % 5), crash: 0, badImage: false });
      checkStepsKeepInvariant(w);
      expect(Math.max(...notRunning)).toBeLessThanOrEqual(1);
      expect(w.plan()?.state).toBe('completed');
      expect(new Set(w.hashes())).toEqual(new Set([specHash({ image: 'img:2', replicas: 2 + (seed % 5), healthcheck: HC, update: { order } })]));
    }
  });

  it.each(seeds)('seed %i: with random crashes, a step never takes a running replica down while another is down', (seed) => {
    const { w } = simulate(seed, { order: seed % 2 ? 'start-first' : 'stop-first', replicas: 3 + (seed % 4), crash: 0.05, badImage: false });
    checkStepsKeepInvariant(w);
    expect(w.plan()?.state).toMatch(/completed|aborted/);
  });

  it.each(seeds.slice(0, 15))('seed %i: an unpullable image aborts and every replica ends back on the old revision', (seed) => {
    const order = seed % 2 ? 'start-first' : 'stop-first';
    const { w, notRunning } = simulate(seed, { order, replicas: 2 + (seed % 4), crash: 0, badImage: true });
    checkStepsKeepInvariant(w);
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed', currentStep: 1 });
    const h1 = specHash({ image: 'img:1', replicas: 2 + (seed % 4), healthcheck: HC, update: { order } });
    expect(new Set(w.hashes())).toEqual(new Set([h1]));
    expect(notRunning[notRunning.length - 1]).toBe(0);
    expect(Math.max(...notRunning)).toBeLessThanOrEqual(1);
  });

  it.each(seeds.slice(0, 15))('seed %i: a newer apply mid-rollout ends with every replica on the newest revision', (seed) => {
    const order = seed % 2 ? 'start-first' : 'stop-first';
    const { w, notRunning } = simulate(seed, { order, replicas: 3 + (seed % 3), crash: 0, badImage: false, supersedeAt: 3 + (seed % 10) });
    checkStepsKeepInvariant(w);
    expect(Math.max(...notRunning)).toBeLessThanOrEqual(1);
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 3 });
    expect(new Set(w.hashes())).toEqual(new Set([specHash({ image: 'img:3', replicas: 3 + (seed % 3), healthcheck: HC, update: { order } })]));
  });
});

// ---------------------------------------------------------------- the update block's controls

/** What `jaco rollout pause|resume|abort` writes: a request on the plan, compare-and-swap. */
function request(w: World, action: 'pause' | 'resume' | 'abort' | 'promote', dep = 'app', service = 'web'): void {
  const cur = w.get<RolloutPlan>(keys.rollout(dep, service))!;
  w.put(keys.rollout(dep, service), { ...cur, spec: { ...cur.spec, request: { action, requestedAt: new Date(w.now).toISOString() } } });
}

/** Replica ids stepped by the last pass, with the update.order each was written with. */
function lastSteps(w: World): [string, string | undefined][] {
  return w.decisions.at(-1)!.decision.acts.flatMap((a) =>
    a.ops.filter((o) => o.op === 'update' && o.key.startsWith('desired/')).map((o) => [o.key.slice(o.key.lastIndexOf('/') + 1), (o as { value: ReplicaDesired }).value.spec.template.update?.order] as [string, string | undefined]),
  );
}

const notes = (d: RolloutDecision) => d.notes.map((n) => n.note).join('; ');

describe('parallelism, maxSurge and maxUnavailable', () => {
  it.each<[string, ServiceSpec['update'], number, [string, string][]]>([
    ['defaults: one at a time (seed 001)', {}, 4, [['app-web-0', 'start-first']]],
    ['parallelism 2, maxUnavailable 2', { parallelism: 2, maxUnavailable: 2 }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'start-first']]],
    ['parallelism 3: the budget defaults to it (Swarm\'s --update-parallelism 3)', { parallelism: 3 }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'start-first'], ['app-web-2', 'start-first']]],
    ['parallelism 3 held to an explicit budget of 1', { parallelism: 3, maxUnavailable: 1 }, 4, [['app-web-0', 'start-first']]],
    ['maxUnavailable 50% of 4 = 2', { parallelism: 4, maxUnavailable: '50%' }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'start-first']]],
    ['maxUnavailable 30% of 4 rounds down to 1', { parallelism: 4, maxUnavailable: '30%' }, 4, [['app-web-0', 'start-first']]],
    ['maxSurge 1: the second and third steps go stop-first', { parallelism: 3, maxUnavailable: 3, maxSurge: 1 }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'stop-first'], ['app-web-2', 'stop-first']]],
    ['maxSurge 0: every step stop-first', { maxSurge: 0 }, 4, [['app-web-0', 'stop-first']]],
    ['maxSurge 25% of 4 rounds up to 1', { parallelism: 2, maxUnavailable: 2, maxSurge: '25%' }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'stop-first']]],
    ['parallelism 0: as many as maxUnavailable allows', { parallelism: 0, maxUnavailable: 3 }, 4, [['app-web-0', 'start-first'], ['app-web-1', 'start-first'], ['app-web-2', 'start-first']]],
  ])('%s', (_name, update, n, want) => {
    const w = rollingTo2(update, n);
    w.pass();
    expect(lastSteps(w)).toEqual(want);
    expect(w.plan()).toMatchObject({ currentStep: want.length, totalSteps: n });
  });

  it('parallelism 100: the steps start over consecutive passes, each act within etcd\'s 128 writes (found by the scale bench)', () => {
    const w = rollingTo2({ parallelism: 100, maxUnavailable: 100, maxSurge: 100 }, 100);
    const first = w.pass();
    const size = (d: typeof first) => Math.max(...d.acts.map((a) => a.ops.length + a.audit.length));
    expect(size(first)).toBeLessThanOrEqual(MAX_TXN_OPS - 1); // and the leader's fence
    const started = w.plan()!.currentStep;
    expect(started).toBeGreaterThan(50);
    expect(started).toBeLessThan(100);
    expect(notes(first)).toContain('more step(s) start on the next pass');
    const second = w.pass();
    expect(size(second)).toBeLessThanOrEqual(MAX_TXN_OPS - 1);
    expect(w.plan()!.currentStep).toBe(100);
    expect(w.plan()!.steps.filter((x) => !x.finishedAt)).toHaveLength(100);
  });

  it('parallel steps are audited each with its own step number', () => {
    const update = { parallelism: 3, maxUnavailable: 3 };
    const w = rollingTo2(update);
    w.pass();
    expect(w.audit.filter((a) => a.type === 'rollout_step').map((a) => [a.payload.replica, a.payload.step, a.payload.total_steps])).toEqual([
      ['app-web-0', 1, 3],
      ['app-web-1', 2, 3],
      ['app-web-2', 3, 3],
    ]);
    expect(w.decisions.at(-1)!.decision.inProgress).toBe(1);
  });

  it('a slot frees when a step finishes: the next replica goes in the same pass', () => {
    const update = { parallelism: 2, maxUnavailable: 2 };
    const w = rollingTo2(update, 4);
    w.pass();
    w.observe('app-web-1', {}); // app-web-1 is ready at the new revision; app-web-0 still starting
    w.observe('app-web-0', { state: 'starting', health: 'starting', replacing: { revision: 1, specHash: H1, containerId: 'c', state: 'running' } });
    w.pass();
    expect(lastSteps(w)).toEqual([['app-web-2', 'start-first']]);
    expect(w.plan()?.steps.map((s) => [s.replica, s.result])).toEqual([
      ['app-web-0', undefined],
      ['app-web-1', 'done'],
      ['app-web-2', undefined],
    ]);
  });

  it('a replica down elsewhere spends the budget: with maxUnavailable 2, one step at a time', () => {
    const update = { parallelism: 3, maxUnavailable: 2 };
    const w = running(svc('img:1', { replicas: 4, update }), 4);
    w.observe('app-web-3', { state: 'exited', exitCode: 1 });
    w.apply('app', { web: svc('img:2', { replicas: 4, update }) });
    w.pass();
    // The broken replica goes first (it costs nothing), then one running replica fits beside it.
    expect(lastSteps(w).map(([id]) => id)).toEqual(['app-web-3', 'app-web-0']);
  });

  const controls = [
    { parallelism: 2, maxUnavailable: 2 },
    { parallelism: 3, maxUnavailable: 3, maxSurge: 1 },
    { parallelism: 0, maxUnavailable: '50%', maxSurge: 0 },
    { parallelism: 2, maxUnavailable: 1 },
    { parallelism: 4, maxUnavailable: 4, maxSurge: 2 },
  ] satisfies ServiceSpec['update'][];
  const cases = Array.from({ length: 30 }, (_, i) => ({ seed: i + 1, update: controls[i % controls.length]! }));

  it.each(cases)('seed $seed, $update: in flight ≤ parallelism, surge ≤ maxSurge, not running ≤ maxUnavailable, and it completes', ({ seed, update }) => {
    const replicas = 3 + (seed % 5);
    const { w, notRunning, surge, inFlight } = simulate(seed, { order: 'start-first', replicas, crash: 0, badImage: false, update });
    const ctl = { parallelism: update.parallelism === 0 ? Infinity : update.parallelism, maxUnavailable: update.maxUnavailable, maxSurge: update.maxSurge };
    const maxUnavailable = typeof ctl.maxUnavailable === 'string' ? Math.max(1, Math.floor((parseFloat(ctl.maxUnavailable) * replicas) / 100)) : ctl.maxUnavailable;
    const maxSurge = ctl.maxSurge ?? ctl.parallelism;
    expect(Math.max(...inFlight)).toBeLessThanOrEqual(ctl.parallelism);
    expect(Math.max(...inFlight)).toBeLessThanOrEqual(maxUnavailable);
    expect(Math.max(...surge)).toBeLessThanOrEqual(maxSurge);
    expect(Math.max(...notRunning)).toBeLessThanOrEqual(maxUnavailable);
    expect(w.plan()?.state).toBe('completed');
    expect(new Set(w.hashes())).toEqual(new Set([specHash({ image: 'img:2', replicas, healthcheck: HC, update: { order: 'start-first', ...update } })]));
    // Parallel steps really ran in parallel where the bounds allowed it.
    if (Math.min(ctl.parallelism, maxUnavailable) > 1) expect(Math.max(...inFlight)).toBeGreaterThan(1);
  });

  it.each(cases.slice(0, 10))('seed $seed, $update: an unpullable image aborts and every replica ends back on the old revision, running', ({ seed, update }) => {
    const replicas = 3 + (seed % 5);
    const { w, notRunning } = simulate(seed, { order: 'start-first', replicas, crash: 0, badImage: true, update });
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    expect(new Set(w.hashes())).toEqual(new Set([specHash({ image: 'img:1', replicas, healthcheck: HC, update: { order: 'start-first', ...update } })]));
    expect(notRunning.at(-1)).toBe(0);
  });
});

describe('delay, monitor and the progress deadline', () => {
  it('delay: the next step starts that long after the last one finished', () => {
    const update = { delay: '10s' };
    const w = firstStepReady(update);
    const d = w.pass();
    expect(w.plan()?.currentStep).toBe(1);
    expect(d.wakeAt).toBe(w.now + 10_000);
    expect(notes(d)).toContain('delay: the next step starts at');
    w.now += 9_999;
    w.pass();
    expect(w.plan()?.currentStep).toBe(1);
    w.now += 1;
    w.pass();
    expect(w.plan()?.currentStep).toBe(2);
  });

  it('monitor: a ready replica counts only after staying ready that long', () => {
    const update = { monitor: '20s' };
    const w = firstStepReady(update);
    const d = w.pass();
    expect(w.plan()?.steps[0]).toMatchObject({ replica: 'app-web-0', readyAt: new Date(w.now).toISOString() });
    expect(w.plan()?.steps[0]?.finishedAt).toBeUndefined();
    expect(d.wakeAt).toBe(w.now + 20_000);
    w.now += 19_999;
    w.pass();
    expect(w.plan()?.currentStep).toBe(1);
    w.now += 1;
    w.pass();
    expect(w.plan()?.steps[0]?.result).toBe('done');
    expect(w.plan()?.currentStep).toBe(2);
  });

  it('monitor: a replica that stops being ready within it fails its step (monitor_failed, or the health reason)', () => {
    const update = { monitor: '20s' };
    const w = firstStepReady(update);
    w.pass();
    w.now += 5000;
    w.observe('app-web-0', { state: 'exited', exitCode: 137 });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'monitor_failed' });
    expect(w.hashes()).toEqual([H1, H1, H1]);
  });

  it('progressDeadline: no step done within it aborts (rollback) even with no step in flight', () => {
    const update = { progressDeadline: '30s' };
    const w = running(svc('img:1', { update }));
    // A replica down holds the budget, so the rollout cannot step a running one: it makes no progress.
    w.observe('app-web-2', { state: 'exited', exitCode: 1 });
    w.apply('app', { web: svc('img:2', { update }) });
    w.pass(); // steps app-web-2 (not running) first
    w.observe('app-web-2', { state: 'starting', health: 'starting' });
    w.now += 29_999;
    const d = w.pass();
    expect(w.plan()?.state).toBe('in_progress');
    expect(d.wakeAt).toBe(T0 + 30_000);
    w.now += 1;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'progress_deadline' });
    expect(w.audit.find((a) => a.type === 'rollout_aborted')?.payload).toMatchObject({ reason: 'progress_deadline' });
    expect(w.audit.find((a) => a.type === 'rollout_aborted')?.payload).not.toHaveProperty('replica');
  });

  it('progressDeadline counts from the last finished step, not from the start', () => {
    const update = { progressDeadline: '30s' };
    const w = rollingTo2(update);
    w.pass();
    w.now += 20_000;
    w.converge();
    w.pass(); // step 1 done at 20 s, step 2 starts
    w.now += 25_000; // 45 s after the start, 25 s after progress
    w.pass();
    expect(w.plan()?.state).toBe('in_progress');
    w.now += 5_000;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'progress_deadline' });
  });
});

describe('failure actions and maxFailureRatio', () => {
  /** A 3-replica rollout whose replica `fail` never pulls; everything else starts. */
  function failing(update: ServiceSpec['update'], fail: string[]): World {
    const w = rollingTo2(update);
    for (let i = 0; i < 12; i++) {
      w.pass();
      for (const { value: d } of w.under<ReplicaDesired>('desired/'))
        if (d.spec.specHash === specHash(svc('img:2')) && fail.includes(d.spec.replica)) w.observe(d.spec.replica, { state: 'pending', code: 'image_pull_failed', health: 'none' });
        else w.observe(d.spec.replica, {});
      w.now += 20_000;
    }
    return w;
  }

  it('rollback (default): the first failure aborts and reverts to the previous revision', () => {
    const w = failing({ stepTimeout: '10s' }, ['app-web-1']);
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    expect(w.hashes()).toEqual([H1, H1, H1]);
  });

  // A tolerated failure leaves its replica down, which keeps counting against maxUnavailable (the
  // one budget): these rollouts allow 2, so one broken replica does not hold the rest back.
  it('maxFailureRatio: failures up to the ratio of the steps are tolerated; the next one applies the failure action', () => {
    const tolerant = failing({ stepTimeout: '10s', maxFailureRatio: 0.34, maxUnavailable: 2 }, ['app-web-1']);
    expect(tolerant.plan()).toMatchObject({ state: 'completed' });
    expect(tolerant.plan()?.steps.map((s) => s.result)).toEqual(['done', 'failed', 'done']);
    expect(tolerant.auditTypes()).toContain('rollout_step_failed');
    expect(tolerant.audit.find((a) => a.type === 'rollout_step_failed')?.payload).toMatchObject({ replica: 'app-web-1', reason: 'image_pull_failed', failed_steps: 1 });
    expect(tolerant.hashes()).toEqual([H2, H2, H2]);

    const two = failing({ stepTimeout: '10s', maxFailureRatio: 0.34, maxUnavailable: 2 }, ['app-web-1', 'app-web-2']);
    expect(two.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    expect(two.hashes()).toEqual([H1, H1, H1]);
  });

  it('a tolerated failure still holds its unit of the budget: with maxUnavailable 1 the rollout waits', () => {
    const w = failing({ stepTimeout: '10s', failureAction: 'continue' }, ['app-web-1']);
    expect(w.plan()).toMatchObject({ state: 'in_progress', currentStep: 2 });
    expect(notes(w.decisions.at(-1)!.decision)).toContain('app-web-1: not running');
  });

  it('update.rollback sets the revert\'s pace: parallelism and order', () => {
    const update = { stepTimeout: '10s', maxUnavailable: 3, rollback: { parallelism: 3, order: 'stop-first' as const } };
    const w = rollingTo2(update);
    w.rounds(3); // steps 0 and 1 done, 2 in flight
    expect(w.hashes()).toEqual([H2, H2, H2]);
    w.observe('app-web-2', { state: 'pending', code: 'image_pull_failed', health: 'none' });
    w.now += 10_000;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    // Every replica goes back in the one pass, stop-first (app-web-2 runs no old container to stop).
    expect(lastSteps(w).sort()).toEqual([
      ['app-web-0', 'stop-first'],
      ['app-web-1', 'stop-first'],
      ['app-web-2', 'start-first'],
    ]);
  });

  it('continue: every failure is tolerated and the rollout completes', () => {
    const w = failing({ stepTimeout: '10s', failureAction: 'continue', maxUnavailable: 2 }, ['app-web-0', 'app-web-2']);
    expect(w.plan()?.steps.map((s) => s.result)).toEqual(['failed', 'done', 'failed']);
    expect(w.hashes()).toEqual([H2, H2, H2]);
    expect(w.plan()?.state).toBe('completed');
  });

  it('pause: the plan stops at the failure for the operator; resume goes on, abort reverts', () => {
    const w = failing({ stepTimeout: '10s', failureAction: 'pause' }, ['app-web-1']);
    expect(w.plan()).toMatchObject({ state: 'paused', failureReason: 'image_pull_failed', currentStep: 2 });
    expect(w.hashes()).toEqual([H2, H2, H1]);
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: { web: { state: 'paused', failureReason: 'image_pull_failed' } } });
    expect(w.audit.find((a) => a.type === 'rollout_paused')?.payload).toMatchObject({ reason: 'image_pull_failed', replica: 'app-web-1' });
    w.now += 600_000;
    expect(w.pass().acts).toEqual([]);

    const resumed = failing({ stepTimeout: '10s', failureAction: 'pause' }, ['app-web-1']);
    request(resumed, 'resume');
    resumed.rounds(3);
    expect(resumed.plan()).toMatchObject({ state: 'completed' });
    expect(resumed.plan()?.failureReason).toBeUndefined();
    expect(resumed.auditTypes()).toContain('rollout_resumed');

    request(w, 'abort');
    w.rounds(4);
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'operator_abort' });
    expect(w.hashes()).toEqual([H1, H1, H1]);
    expect(w.plan()?.request).toBeUndefined();
  });
});

describe('operator requests: pause, resume, abort', () => {
  it('pause stops new steps (the one in flight finishes); resume goes on; each request is cleared and audited', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    request(w, 'pause');
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'paused', currentStep: 1, pausedAt: new Date(w.now).toISOString() });
    expect(w.plan()?.request).toBeUndefined();
    w.converge();
    w.now += 1000;
    const d = w.pass();
    expect(w.plan()?.steps[0]?.result).toBe('done');
    expect(w.hashes()).toEqual([H2, H1, H1]);
    expect(notes(d)).toContain('paused: jaco rollout resume');
    expect(d.inProgress).toBe(0); // jaco_rollout_in_progress counts rollouts that step, not paused ones
    expect(w.status()?.rollout?.services.web?.state).toBe('paused');
    w.now += 600_000;
    w.pass();
    expect(w.hashes()).toEqual([H2, H1, H1]);
    request(w, 'resume');
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', currentStep: 2, resumedAt: new Date(w.now).toISOString() });
    w.rounds(3);
    expect(w.plan()?.state).toBe('completed');
    expect(w.auditTypes()).toEqual(['rollout_started', 'rollout_step', 'rollout_paused', 'rollout_resumed', 'rollout_step', 'rollout_step', 'rollout_completed']);
  });

  it('abort reverts every replica already moved, at once', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.rounds(2);
    expect(w.hashes()).toEqual([H2, H2, H1]);
    request(w, 'abort');
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'operator_abort' });
    w.rounds(4);
    expect(w.hashes()).toEqual([H1, H1, H1]);
    expect(w.status()?.rollout).toMatchObject({ appliedRevision: 1, services: { web: { state: 'aborted', failureReason: 'operator_abort' } } });
  });

  it('a request that does not apply is cleared with a note, changing nothing else', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.rounds(5);
    expect(w.plan()?.state).toBe('completed');
    request(w, 'pause');
    const d = w.pass();
    expect(notes(d)).toContain('ignored pause: the rollout is completed');
    expect(w.plan()).toMatchObject({ state: 'completed' });
    expect(w.plan()?.request).toBeUndefined();
  });

  it('a new apply while paused starts a new rollout toward it', () => {
    const w = running();
    w.apply('app', { web: svc('img:2') });
    w.pass();
    request(w, 'pause');
    w.pass();
    w.apply('app', { web: svc('img:3') });
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 3, toHash: H3 });
    w.rounds(4);
    expect(w.hashes()).toEqual([H3, H3, H3]);
  });
});

describe('restart (jaco rollout restart): every replica again at the same spec', () => {
  /** What `jaco rollout restart` writes: a new revision, the same spec, the restarted services named. */
  function restart(w: World, services: string[], dep = 'app'): number {
    const cur = w.get<Deployment>(keys.deployment(dep))!;
    const generation = w.apply(dep, cur.spec.services);
    const rec = w.get<DeploymentRevision>(keys.revision(dep, generation))!;
    w.put(keys.revision(dep, generation), { ...rec, spec: { ...rec.spec, cause: `restart ${services.join(', ')}`, restarted: services } });
    return generation;
  }
  const revisions = (w: World, service = 'web') =>
    w
      .under<ReplicaDesired>('desired/')
      .map((v) => v.value)
      .filter((d) => d.spec.service === service)
      .sort((a, b) => (a.spec.replica < b.spec.replica ? -1 : 1))
      .map((d) => d.spec.revision);

  it('a service restarted with its dependency (dependsOn restart: true) restarts after it', () => {
    const w = new World();
    w.apply('app', withDependencyHashes({ services: { web: svc('img:1', { replicas: 1, dependsOn: { db: { condition: 'service_started', restart: true } } }), db: svc('db:1', { replicas: 1 }) } }).services);
    w.place('app', 'web', 0, 'node-1');
    w.place('app', 'db', 0, 'node-2');
    w.converge();
    w.pass();
    restart(w, ['db', 'web']);
    w.pass();
    expect(w.steppedReplicas()).toEqual(['app-db-0']);
    w.converge();
    w.pass();
    expect(w.steppedReplicas()).toEqual(['app-db-0', 'app-web-0']);
    w.rounds(2);
    expect([revisions(w, 'db'), revisions(w, 'web')]).toEqual([[2], [2]]);
  });

  it('rolls every replica of the service onto the restart revision, one step at a time, hash unchanged', () => {
    const w = running();
    restart(w, ['web']);
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', fromRevision: 1, toRevision: 2, fromHash: H1, toHash: H1, totalSteps: 3, currentStep: 1 });
    expect(revisions(w)).toEqual([2, 1, 1]);
    w.rounds(4);
    expect(w.plan()).toMatchObject({ state: 'completed', totalSteps: 3 });
    expect(revisions(w)).toEqual([2, 2, 2]);
    expect(w.hashes()).toEqual([H1, H1, H1]);
    // A later apply that leaves the service alone restarts nothing again.
    w.apply('app', w.get<Deployment>(keys.deployment('app'))!.spec.services);
    w.rounds(2);
    expect(revisions(w)).toEqual([2, 2, 2]);
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 2 });
  });

  it('restarts only the services named', () => {
    const w = webAndDb();
    w.pass();
    restart(w, ['db']);
    w.rounds(3);
    expect(w.plan('app', 'db')).toMatchObject({ state: 'completed', toRevision: 2 });
    expect(w.plan('app', 'web')).toBeUndefined();
    expect(revisions(w, 'web')).toEqual([1]);
    expect(revisions(w, 'db')).toEqual([2]);
  });

  it('a restart that fails aborts and goes back to the previous revision', () => {
    const w = running();
    restart(w, ['web']);
    w.pass();
    w.observe('app-web-0', { state: 'exited', exitCode: 1 });
    w.exhaust('app-web-0', 'node-1', 2);
    w.now += 1000;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'restart_exhausted' });
    w.rounds(3);
    expect(revisions(w)).toEqual([1, 1, 1]);
    expect(w.plan()?.state).toBe('aborted');
  });
});

describe('deployment-atomic rollouts (spec.update.atomic)', () => {
  const ATOMIC = { atomic: true };
  const two = (web: string, db: string) => ({ web: svc(web, { replicas: 1 }), db: svc(db, { replicas: 1 }) });
  const progress = (w: World) =>
    rolloutProgress({
      deployment: w.get<Deployment>(keys.deployment('app')),
      status: w.get<DeploymentStatus>(keys.deploymentStatus('app')),
      plans: w.under<RolloutPlan>('rollouts/').map((v) => v.value),
      replicas: w.under<ReplicaDesired>('desired/').map((v) => ({ desired: v.value, observed: w.get<ReplicaObserved>(keys.observed(v.value.spec.node, v.value.spec.replica)) })),
      now: w.now,
    });
  const hashOf = (w: World, service: string) => w.hashes('app', service)[0];

  /** web and db at revision 1, then an apply of both; db's new image cannot be pulled. */
  function dbFailsToPull(update?: DeploymentUpdate): World {
    const w = webAndDb();
    w.apply('app', two('img:1', 'db:1'), update);
    w.pass();
    w.converge();
    w.apply('app', two('img:2', 'db:2'), update);
    w.pass();
    w.observe('app-web-0', {});
    w.observe('app-db-0', { state: 'pending', code: 'image_pull_failed', health: 'none' });
    w.now += CFG.stepTimeoutMs;
    w.pass();
    return w;
  }

  it('one service fails: every service that rolled toward the revision goes back, audited with the service that failed', () => {
    const w = dbFailsToPull(ATOMIC);
    expect(w.plan('app', 'db')).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    // Revision 2 only added atomic (no container changed): revision 1 is what goes on serving.
    expect(w.plan('app', 'web')).toMatchObject({ state: 'aborted', failureReason: 'atomic_rollback', toRevision: 3, fromRevision: 1 });
    expect(w.audit.filter((a) => a.type === 'rollout_aborted').map((a) => a.payload)).toEqual([
      expect.objectContaining({ service: 'db', reason: 'image_pull_failed' }),
      expect.objectContaining({ service: 'web', reason: 'atomic_rollback', failed_service: 'db', failed_reason: 'image_pull_failed' }),
    ]);
    w.rounds(4);
    expect([hashOf(w, 'web'), hashOf(w, 'db')]).toEqual([specHash(svc('img:1', { replicas: 1 })), specHash(svc('db:1', { replicas: 1 }))]);
    const p = progress(w);
    expect(p.phase).toBe('aborted');
    expect(p.unit).toEqual({ service: 'db', reason: 'image_pull_failed', fromRevision: 1 });
    // The unit stays back until the next apply: no pass starts either service forward again.
    w.rounds(3);
    expect([w.plan('app', 'web')?.state, w.plan('app', 'db')?.state]).toEqual(['aborted', 'aborted']);
  });

  it('without atomic, the service that rolled out keeps its new revision', () => {
    const w = dbFailsToPull();
    w.rounds(3);
    expect(w.plan('app', 'web')?.state).toBe('completed');
    expect(hashOf(w, 'web')).toBe(specHash(svc('img:2', { replicas: 1 })));
    expect(progress(w).unit).toBeUndefined();
  });

  it('a service that completed before the failure (decided earlier) follows on the next pass and reverts', () => {
    const w = new World();
    const svcs = (api: string, web: string) => ({ api: svc(api, { replicas: 1 }), web: svc(web, { replicas: 1 }) });
    w.apply('app', svcs('api:1', 'img:1'), ATOMIC);
    w.place('app', 'api', 0, 'node-1');
    w.place('app', 'web', 0, 'node-2');
    w.converge();
    w.pass();
    w.apply('app', svcs('api:2', 'img:2'), ATOMIC);
    w.pass();
    w.observe('app-api-0', {});
    w.observe('app-web-0', { state: 'degraded', health: 'unhealthy' });
    w.now += 1000;
    w.pass();
    expect(w.plan('app', 'api')?.state).toBe('completed');
    w.now += CFG.stepTimeoutMs;
    w.pass();
    // web failed in this pass, after api was decided: api goes back on the next one.
    expect(w.plan('app', 'web')).toMatchObject({ state: 'aborted', failureReason: 'health_check_failed' });
    expect(w.plan('app', 'api')?.state).toBe('completed');
    w.pass();
    expect(w.plan('app', 'api')).toMatchObject({ state: 'aborted', failureReason: 'atomic_rollback' });
    w.rounds(4);
    expect(w.hashes('app', 'api')).toEqual([specHash(svc('api:1', { replicas: 1 }))]);
  });

  it("an operator's abort of one service aborts the unit", () => {
    const w = webAndDb();
    w.apply('app', two('img:1', 'db:1'), ATOMIC);
    w.pass();
    w.converge();
    w.apply('app', { web: svc('img:2', { replicas: 2 }), db: svc('db:2', { replicas: 1 }) }, ATOMIC);
    w.place('app', 'web', 1, 'node-3');
    w.pass();
    request(w, 'abort');
    w.pass();
    expect(w.plan('app', 'web')).toMatchObject({ state: 'aborted', failureReason: 'operator_abort' });
    // db was decided before web in that pass: it follows on the next.
    w.pass();
    expect(w.plan('app', 'db')).toMatchObject({ state: 'aborted', failureReason: 'atomic_rollback' });
    expect(w.audit.find((a) => a.type === 'rollout_aborted' && a.payload.service === 'db')?.payload).toMatchObject({ failed_service: 'web', failed_reason: 'operator_abort' });
  });
});

describe('canary (update.canary) and promote', () => {
  /** 3 replicas at img:1 rolling to img:2 with this canary block; the first pass made the plan, the scheduler placed `n` canaries. */
  function withCanaries(update: ServiceSpec['update'], n = 1): World {
    const w = rollingTo2(update);
    w.pass();
    for (let i = 0; i < n; i++) w.place('app', 'web', 3 + i, `node-${i + 1}`, { canary: { revision: 2 } });
    return w;
  }
  const canaryIds = (w: World) => w.under<ReplicaDesired>('desired/').map((v) => v.value.spec).filter((d) => d.canary).map((d) => d.replica);
  const oldHashes = (w: World) => w.under<ReplicaDesired>('desired/').map((v) => v.value.spec).filter((d) => !d.canary).map((d) => d.specHash);

  it('starts no step of an old replica: the plan waits for the canary, watches it as a step, then for promote', () => {
    const w = rollingTo2({ canary: 1 });
    w.pass();
    const plan = w.plan()!;
    expect(plan).toMatchObject({ state: 'in_progress', currentStep: 0, totalSteps: 3, canary: { replicas: 1 } });
    expect(oldHashes(w).every((h) => h === plan.fromHash)).toBe(true);
    expect(w.audit[0]).toMatchObject({ type: 'rollout_started', payload: { canary: 1 } });
    expect(w.status()?.rollout?.services.web?.canary).toEqual({ replicas: 1, ready: 0, promoted: false });
    // The scheduler places the canary at the target; the rollout watches it as a canary step.
    w.place('app', 'web', 3, 'node-1', { canary: { revision: 2 } });
    w.pass();
    expect(w.plan()!.steps).toEqual([{ replica: 'app-web-3', node: 'node-1', startedAt: new Date(w.now).toISOString(), canary: true }]);
    w.converge();
    w.now += 1000;
    w.pass();
    w.now += 1000;
    const d = w.pass();
    expect(w.plan()!).toMatchObject({ currentStep: 0, canary: { replicas: 1, readySince: expect.any(String) } });
    expect(w.plan()!.steps[0]).toMatchObject({ result: 'done', canary: true });
    expect(notes(d)).toContain('waiting for jaco rollout promote app/web');
    expect(w.status()?.rollout?.services.web?.canary).toEqual({ replicas: 1, ready: 1, promoted: false });
    // Hours later, nothing else has moved.
    w.now += 3_600_000;
    w.rounds(3);
    expect(oldHashes(w).every((h) => h === plan.fromHash)).toBe(true);
    // Promote: the rolling update of the three old replicas goes on; the canary stays until it ends.
    request(w, 'promote');
    w.pass();
    expect(w.plan()!).toMatchObject({ currentStep: 1, canary: { promotedBy: 'operator', promotedAt: new Date(w.now).toISOString() } });
    expect(w.auditTypes().filter((t) => t === 'rollout_promoted')).toHaveLength(1);
    expect(w.audit.find((a) => a.type === 'rollout_promoted')!.payload).toMatchObject({ by: 'operator', canaries: 1 });
    w.rounds(4);
    expect(w.plan()).toMatchObject({ state: 'completed', currentStep: 3, totalSteps: 3 });
    expect(oldHashes(w).every((h) => h === plan.toHash)).toBe(true);
    expect(canaryIds(w)).toEqual(['app-web-3']); // the scheduler scales it away (its own test)
    expect(w.status()?.rollout?.services.web?.canary).toBeUndefined();
  });

  it('autoPromote: promotes once every canary has stayed ready that long; a canary that stops being ready starts the clock again', () => {
    const w = withCanaries({ canary: 2, autoPromote: '30s' }, 2);
    w.rounds(2);
    expect(w.plan()!.canary!.readySince).toBeDefined();
    w.now += 20_000;
    w.pass();
    expect(w.plan()!.canary!.promotedAt).toBeUndefined();
    w.observe('app-web-4', { state: 'running', health: 'unhealthy' }, 'node-2');
    w.pass();
    expect(w.plan()!.canary!.readySince).toBeUndefined();
    w.observe('app-web-4', { state: 'running', health: 'healthy' }, 'node-2');
    w.pass();
    const since = Date.parse(w.plan()!.canary!.readySince!);
    w.now = since + 29_000;
    const d = w.pass();
    expect(w.plan()!.canary!.promotedAt).toBeUndefined();
    expect(d.wakeAt).toBe(since + 30_000);
    w.now = since + 30_000;
    w.pass();
    expect(w.plan()!).toMatchObject({ currentStep: 1, canary: { promotedBy: 'auto' } });
  });

  it('a failing canary fails the rollout (failureAction rollback): no old replica was touched, the canary is left for the scheduler to scale away', () => {
    const w = withCanaries({ canary: 1 });
    w.observe('app-web-3', { state: 'failed', code: 'image_pull_failed' }, 'node-1');
    w.pass();
    // Like any step: the reason shows at the step timeout (an image pull may still succeed before it).
    w.now += CFG.stepTimeoutMs;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'image_pull_failed' });
    w.rounds(3);
    expect(w.steppedReplicas()).toEqual([]);
    expect(canaryIds(w)).toEqual(['app-web-3']);
  });

  it('abort in the canary phase reverts nothing (no old replica moved); promote without canaries is refused with a note', () => {
    const w = withCanaries({ canary: 1 });
    w.rounds(2);
    request(w, 'abort');
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'aborted', failureReason: 'operator_abort' });
    w.rounds(2);
    expect(w.steppedReplicas()).toEqual([]);

    const v = rollingTo2({});
    v.pass();
    request(v, 'promote');
    expect(notes(v.pass())).toContain('ignored promote: the rollout has no canary');
    expect(v.plan()!.canary).toBeUndefined();
  });

  it('the progress deadline does not run out while ready canaries wait for the operator', () => {
    const w = withCanaries({ canary: 1, progressDeadline: '1m' });
    w.rounds(2);
    w.now += 600_000;
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress' });
  });

  it('a newer apply during the canary phase steps the canaries (not the old replicas) to the newest spec', () => {
    const w = withCanaries({ canary: 1 });
    w.rounds(2);
    w.apply('app', { web: svc('img:3', { update: { canary: 1 } }) });
    w.pass();
    const plan = w.plan()!;
    expect(plan).toMatchObject({ toRevision: 3, canary: { replicas: 1 } });
    expect(w.steppedReplicas()).toEqual(['app-web-3']);
    expect(plan.steps).toEqual([expect.objectContaining({ replica: 'app-web-3', canary: true })]);
    expect(plan.currentStep).toBe(0);
  });

  it('a plan with no old replica to step has no canary phase (a service re-created mid-rollout: canary simulation seed 490)', () => {
    const w = running(svc('img:1', { update: { canary: 1 } }));
    // A live plan of the deployment's previous incarnation, toward another spec.
    const stale: RolloutPlan = { apiVersion: API_VERSION, kind: 'RolloutPlan', metadata: { name: 'app-web' }, spec: { deployment: 'app', service: 'web', fromRevision: 3, toRevision: 4, fromHash: 'x', toHash: 'y', totalSteps: 3, currentStep: 1, state: 'in_progress', startedAt: new Date(w.now).toISOString(), steps: [] } };
    w.put(keys.rollout('app', 'web'), stale);
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 1 });
    expect(w.plan()!.canary).toBeUndefined();
  });

  it("a rollout does not complete while a canary of an earlier rollout still runs another spec (canary simulation, seed 3019)", () => {
    const w = withCanaries({ canary: 1 });
    w.rounds(2);
    // Back to img:1 before any old replica stepped: nothing to step, but the canary runs img:2.
    w.apply('app', { web: svc('img:1', { update: { canary: 1 } }) });
    const d = w.pass();
    expect(w.plan()).toMatchObject({ state: 'in_progress', toRevision: 3 });
    expect(notes(d)).toContain('waiting for the canaries app-web-3 of an earlier rollout to be scaled away');
    // The scheduler scales it away (its plan wants no canary): then complete.
    w.remove(keys.desired('node-1', 'app-web-3'));
    w.remove(keys.observed('node-1', 'app-web-3'));
    w.pass();
    expect(w.plan()).toMatchObject({ state: 'completed', toRevision: 3 });
  });
});
