import { describe, expect, it } from 'vitest';
import { keys } from '../api/keys.js';
import { templateOf } from '../api/serving.js';
import type { Deployment, DeploymentStatus, Heartbeat, Node, ReplicaCommand, ReplicaDesired, ReplicaObserved, RolloutPlan, ServiceSpec } from '../api/types.js';
import type { Versioned } from '../store/store.js';
import { joinClusterView, type ClusterParts } from './cluster-view.js';
import { attachRescheduler, renderDeployment, renderStatus, statusRows } from './status.js';

const NOW = Date.parse('2026-11-21T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
let rev = 1;
const v = <T>(key: string, value: T): Versioned<T> => ({ key, value, modRevision: ++rev, createRevision: rev, version: 1 });

const web: ServiceSpec = { image: 'jaco-demo/busybox:1', replicas: 3 };
const db: ServiceSpec = { image: 'jaco-demo/busybox:1', volumes: [{ type: 'volume', source: 'data', target: '/data' }] };

function desired(id: string, svc: string, node: string, spec: ServiceSpec, extra: Partial<ReplicaDesired['spec']> = {}): Versioned<ReplicaDesired> {
  const t = templateOf(2, spec);
  return v(keys.desired(node, id), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: id }, spec: { replica: id, deployment: 'shop', service: svc, node, revision: 2, specHash: t.specHash, template: t.template, placedAt: iso(NOW - 300_000), ...extra } });
}
function observed(id: string, node: string, state: ReplicaObserved['status']['state'], extra: Partial<ReplicaObserved['status']> = {}): Versioned<ReplicaObserved> {
  return v(keys.observed(node, id), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: id }, status: { replica: id, node, deployment: 'shop', service: id.split('-')[1]!, state, startedAt: iso(NOW - 90_000), observedAt: iso(NOW), ...extra } });
}
const node = (name: string): Versioned<Node> => v(keys.node(name), { apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 2 ** 31, gpus: 0 }, agentVersion: 't', registeredAt: iso(NOW) } });
const hb = (name: string): Versioned<Heartbeat> => v(keys.heartbeat(name), { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(NOW), intervalMs: 1000, agentVersion: 't', dockerUp: true } });

function parts(): ClusterParts {
  const dep: Deployment = { apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'shop', generation: 2, creationTimestamp: iso(NOW - 600_000) }, spec: { services: { web, db } } };
  const status: DeploymentStatus = {
    apiVersion: 'jaco.dev/v1',
    kind: 'DeploymentStatus',
    metadata: { name: 'shop' },
    status: { scheduling: { observedGeneration: 2, updatedAt: iso(NOW), services: { web: { desired: 4, placed: 3, unschedulable: { reason: 'no_capacity_memory', count: 1, message: 'no node can take it', nodes: { 'node-1': 'memory: full' } }, restartExhausted: ['shop-web-2'] }, db: { desired: 1, placed: 1, nodeLost: ['shop-db-0'] } } } },
  };
  const plan: RolloutPlan = {
    apiVersion: 'jaco.dev/v1',
    kind: 'RolloutPlan',
    metadata: { name: 'shop-web' },
    spec: { deployment: 'shop', service: 'web', fromRevision: 1, toRevision: 2, fromHash: 'a', toHash: 'b', totalSteps: 3, currentStep: 1, state: 'in_progress', startedAt: iso(NOW), steps: [] },
  };
  const cmd: ReplicaCommand = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: 'shop-web-2' }, spec: { replica: 'shop-web-2', op: 'restart', seq: 3, issuedAt: iso(NOW), reason: 'x' }, status: { restarts: 3, exhausted: true, generation: 2 } };
  return {
    revision: 100,
    deployments: [v(keys.deployment('shop'), dep)],
    statuses: [v(keys.deploymentStatus('shop'), status)],
    nodes: ['node-1', 'node-2', 'node-3'].map(node),
    heartbeats: ['node-1', 'node-2'].map(hb), // node-3 is NotReady
    drains: [],
    desired: [
      desired('shop-web-0', 'web', 'node-1', web),
      desired('shop-web-0', 'web', 'node-2', web, { move: { id: 'm', from: 'node-1', by: 'drain', startedAt: iso(NOW), deadline: iso(NOW + 60_000) } }),
      desired('shop-web-1', 'web', 'node-3', web),
      desired('shop-web-2', 'web', 'node-2', web),
      desired('shop-db-0', 'db', 'node-3', db),
    ],
    observed: [observed('shop-web-0', 'node-1', 'running'), observed('shop-web-0', 'node-2', 'starting'), observed('shop-web-1', 'node-3', 'running'), observed('shop-web-2', 'node-2', 'exited'), observed('shop-db-0', 'node-3', 'running')],
    commands: [v(keys.command('node-2', 'shop-web-2'), cmd)],
    rollouts: [v(keys.rollout('shop', 'web'), plan)],
  };
}

describe('jaco status rows', () => {
  const rows = statusRows(joinClusterView(parts()), undefined, NOW);
  const web = rows[0]!.services.find((s) => s.name === 'web')!;
  const dbRow = rows[0]!.services.find((s) => s.name === 'db')!;

  it('counts a moving replica once, and running by replica id', () => {
    expect(web).toMatchObject({ desired: 4, running: 1, placed: 3 });
    expect(web.moves).toEqual([{ replica: 'shop-web-0', from: 'node-1', to: 'node-2', by: 'drain' }]);
  });

  it('shows restart_exhausted, node_not_ready and node_lost where the control plane knows better than the observation', () => {
    const state = (s: typeof web, r: string, n: string) => s.replicas.find((x) => x.replica === r && x.node === n)!;
    expect(state(web, 'shop-web-2', 'node-2')).toMatchObject({ state: 'failed', code: 'restart_exhausted', restarts: 3 });
    expect(state(web, 'shop-web-1', 'node-3')).toMatchObject({ state: 'unknown', code: 'node_not_ready' });
    expect(state(dbRow, 'shop-db-0', 'node-3')).toMatchObject({ state: 'unknown', code: 'node_lost' });
    expect(state(web, 'shop-web-0', 'node-1')).toMatchObject({ state: 'running', age: '90s' });
  });

  it('renders rollout step, moves, unschedulable nodes, exhausted and lost replicas', () => {
    const text = renderStatus(rows, 'table');
    expect(text).toMatch(/^web +spread +4 +1 +in_progress r1→r2 1\/3 +shop-web-0 node-1→node-2 \(drain\) +1 no_capacity_memory$/m);
    expect(text).toMatch(/^shop-web-0 +web +node-2 +starting +- +0 +2 +90s +from node-1 \(drain\)$/m);
    expect(text).toContain('web: 1 replica(s) unschedulable: no_capacity_memory\n  no node can take it\n  node-1: memory: full\n');
    expect(text).toContain('web: restart_exhausted (no more restarts until the next apply): shop-web-2');
    expect(text).toContain('db: node_lost (stateful, kept on their node): shop-db-0');
    expect(JSON.parse(renderStatus(rows, 'json')).deployments[0].services[1].rollout).toEqual({ state: 'in_progress', fromRevision: 1, toRevision: 2, currentStep: 1, totalSteps: 3 });
  });

  it("reads an older status's reason name as today's (no_nodes_ready → no_nodes_active)", () => {
    const old = structuredClone(rows);
    const w = old[0]!.services.find((s) => s.name === 'web')!;
    w.unschedulable = { ...w.unschedulable!, reason: 'no_nodes_ready' as never } // a name only older versions wrote;
    const text = renderStatus(old, 'table');
    expect(text).toContain('web: 1 replica(s) unschedulable: no_nodes_active\n');
    expect(text).not.toContain('no_nodes_ready');
  });

  it("adds the rescheduler's word to an unschedulable service only", () => {
    const r = structuredClone(rows);
    attachRescheduler(r, [
      { deployment: 'shop', service: 'web', reason: 'no_capacity_memory', verdict: 'no_plan', noPlan: 'only_stateful_blockers', detail: 'the replicas in the way are stateful' },
      { deployment: 'shop', service: 'db', reason: 'no_capacity_memory', verdict: 'move', node: 'node-1', detail: 'moving shop-db-0' },
    ]);
    expect(r[0]!.services.find((s) => s.name === 'db')!.rescheduler).toBeUndefined();
    expect(renderStatus(r, 'table')).toContain('  node-1: memory: full\n  rescheduler: no_plan: only_stateful_blockers — the replicas in the way are stateful\n');
  });

  it('shows a rollout waiting for promote and marks its canary replicas', () => {
    const p = parts();
    const plan = p.rollouts[0]!.value.spec;
    plan.currentStep = 0;
    plan.canary = { replicas: 1, readySince: iso(NOW) };
    p.desired.push(desired('shop-web-3', 'web', 'node-1', p.deployments[0]!.value.spec.services.web!, { canary: { revision: 2 } }));
    p.observed.push(observed('shop-web-3', 'node-1', 'running'));
    const text = renderStatus(statusRows(joinClusterView(p), undefined, NOW), 'table');
    expect(text).toMatch(/in_progress r1→r2 0\/3 canary×1 waiting for promote/);
    expect(text).toMatch(/^shop-web-3 +web +node-1 +running +- +0 +2 \(canary\) +90s +-$/m);
  });
});

describe('a job in jaco status', () => {
  const row = (job: NonNullable<Parameters<typeof renderDeployment>[0]['services'][number]['job']>, waiting?: string[]) =>
    renderDeployment({
      name: 'shop',
      revision: 3,
      age: '1m',
      services: [
        { name: 'migrate', mode: 'spread', desired: 1, running: 0, moves: [], replicas: [], job },
        { name: 'web', mode: 'spread', desired: 1, running: 0, moves: [], replicas: [], ...(waiting ? { waitingForDependency: waiting } : {}) },
      ],
    });

  it('prints its result with attempts and duration, and what it holds', () => {
    expect(row({ specHash: 'h', revision: 3, incarnation: 1, state: 'succeeded', attempts: 1, exitCode: 0, durationMs: 2100, reason: 'succeeded after 1 attempt' })).toContain('\nmigrate: job succeeded after 1 attempt in 2s (revision 3)\n');
    const failed = row({ specHash: 'h', revision: 3, incarnation: 1, state: 'failed', attempts: 3, exitCode: 3, reason: 'exit 3 after 3 attempts' }, ['migrate (failed: exit 3 after 3 attempts)']);
    expect(failed).toContain('migrate: job failed: exit 3 after 3 attempts (revision 3); its dependents stay held until a changed spec is applied');
    expect(failed).toContain('waiting_for_dependency: migrate (failed: exit 3 after 3 attempts)');
  });
});
