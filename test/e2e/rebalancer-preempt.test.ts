// Preemption by priority on real containers (issue 17, e2e (b) and (c)): two agents of 512 MiB
// share the local Docker engine, each full with one 400 MiB replica of batch/worker (priority 0).
// urgent/api (priority 10, 300 MiB) fits nowhere and no move can make room (the other node is
// as full): `jaco apply --dry-run` says which replica would be preempted before anything happens;
// once applied, the rebalancer stops one worker replica (replica_preempted, both priorities in the
// record), the scheduler places urgent/api in the room and it runs; the victim is reported
// unschedulable with reason preempted and is placed again as soon as the room comes back.
// Coalescing in the same cluster (issue 31): two replicas of small/s (150 MiB, one per node) leave
// 330 MiB on each node, 2 MiB short of big/db (300 MiB + 32 MiB overhead) at equal priority: the
// rebalancer moves one small replica beside the other, make-before-break, and the scheduler places
// big/db in the hole it made.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent, DeploymentStatus } from '../../src/api/types.js';
import { keys } from '../../src/api/keys.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { metric, rebalancerMetricsUrl } from './rebalancer-fixtures.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 2, capacity: 'cpu=1,memory=512Mi', controllers: ['scheduler', 'rebalancer'] });
});
afterAll(async () => {
  await c?.stop();
});

const service = (name: string, svc: string, o: { replicas: number; memory: string; priority: number }) => `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  services:
    ${svc}:
      image: jaco-demo/busybox:1
      replicas: ${o.replicas}
      priority: ${o.priority}
      command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
      resources:
        cpu: 10m
        memory: ${o.memory}
      stopGracePeriod: 1s
`;
const BATCH = service('batch', 'worker', { replicas: 2, memory: '400Mi', priority: 0 });
const SMALL = service('small', 's', { replicas: 2, memory: '150Mi', priority: 0 });
const BIG = service('big', 'db', { replicas: 1, memory: '300Mi', priority: 0 });
const URGENT = service('urgent', 'api', { replicas: 1, memory: '300Mi', priority: 10 });

const running = async (dep: string) => (await c.observed()).filter((o) => o.status.deployment === dep && o.status.state === 'running').map((o) => `${o.status.replica}@${o.status.node}`).sort();
const audit = async (type: string) => (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((s) => s.type === type);
const workerStatus = async () => (await c.store.get<DeploymentStatus>(keys.deploymentStatus('batch')))?.value.status?.scheduling?.services.worker;

describe('preemption by priority', () => {
  it('a priority-10 service that fits nowhere runs after a priority-0 replica is preempted; the victim returns when room does', () =>
    c.withLogs(async () => {
      await c.apply(BATCH);
      await eventually(async () => (await running('batch')).length === 2, { what: 'batch/worker running on both nodes', timeoutMs: 30_000 });

      // (c) Before anything happens: the dry run names the replica that would be preempted.
      const dry = await c.jaco(['apply', '--dry-run', '-f', '-'], URGENT);
      expect(dry.code, dry.stderr).toBe(0);
      expect(dry.stdout).toContain('urgent/api: 1 replica(s) would be unschedulable: no_capacity_memory');
      expect(dry.stdout).toMatch(/urgent\/api: urgent\/api \(priority 10\) would preempt on node-[12]: 1 replica of batch\/worker \(priority 0\) preempted \[batch-worker-[01]\]/);

      await c.apply(URGENT);
      await eventually(async () => (await running('urgent')).length === 1, { what: 'urgent/api running', timeoutMs: 40_000 });
      const [pre] = await audit('replica_preempted');
      expect(pre?.payload).toMatchObject({ deployment: 'batch', service: 'worker', priority: 0, for: 'urgent/api', for_priority: 10 });
      const victim = String(pre!.payload.replica_id);
      const node = String(pre!.payload.node);
      expect((await running('urgent'))[0]).toBe(`urgent-api-0@${node}`);
      // Counted by the leader that stopped it.
      expect(await metric(await rebalancerMetricsUrl(c), 'jaco_rebalance_preempted_total')).toBe(1);
      // The victim is stopped, still a member (not replaced), reported preempted.
      expect((await running('batch')).some((r) => r.startsWith(`${victim}@`))).toBe(false);
      await eventually(async () => (await workerStatus())?.unschedulable?.reason === 'preempted', { what: 'batch/worker reported preempted', timeoutMs: 10_000 });
      expect((await c.desired()).filter((d) => d.spec.deployment === 'batch').map((d) => d.spec.replica).sort()).toEqual(['batch-worker-0', 'batch-worker-1']);

      // Room comes back (urgent deleted): the victim is placed again, same id, and runs.
      const del = await c.jaco(['delete', 'deployment', 'urgent']);
      expect(del.code, del.stderr).toBe(0);
      await eventually(async () => (await running('batch')).length === 2, { what: 'the preempted replica running again', timeoutMs: 30_000 });
      const back = (await audit('replica_placed')).filter((a) => a.payload.trigger === 'preempted');
      expect(back.map((a) => a.payload.replica)).toEqual([victim]);
    }));

  it('coalescing on real containers: a small replica moves beside its peer and the pending one runs in the hole it leaves', () =>
    c.withLogs(async () => {
      for (const d of ['batch', 'urgent']) await c.jaco(['delete', 'deployment', d]);
      await eventually(async () => (await c.observed()).every((o) => o.status.deployment !== 'batch' && o.status.deployment !== 'urgent'), { what: 'the preemption case cleared', timeoutMs: 20_000 });
      await c.apply(SMALL);
      await eventually(async () => (await running('small')).length === 2, { what: 'small/s running, one per node', timeoutMs: 20_000 });
      const t0 = Date.now();
      await c.apply(BIG);
      await eventually(async () => (await running('big')).length === 1, { what: 'big/db running in the hole', timeoutMs: 30_000 });
      console.log(`coalescing: apply → big/db running in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      const [moved] = (await audit('rebalance_moved')).filter((a) => a.payload.trigger === 'coalesce');
      expect(moved?.payload).toMatchObject({ deployment: 'small', service: 's', for: 'big/db', pending_reason: 'no_capacity_memory' });
      // The pending replica runs where the move made room; both small replicas still run, side by side.
      expect((await running('big'))[0]).toBe(`big-db-0@${String(moved!.payload.hole_node)}`);
      expect((await running('small')).map((r) => r.split('@')[1])).toEqual([String(moved!.payload.dst), String(moved!.payload.dst)]);
    }));
});
