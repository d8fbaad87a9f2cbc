// `jaco status` and `jaco explain` against a real etcd with the scheduler running in this process
// (no agents, no Docker: replicas stay not_observed), and the scheduler's metrics.
import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type Heartbeat, type Node, type ReplicaDesired } from '../../src/api/types.js';
import type { DeploymentStatusRow } from '../../src/app/status.js';
import { registry } from '../../src/observability/metrics.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { startController } from '../../src/runtime/manager.js';
import { jaco, JACO_BIN } from '../support/cli.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
let store: Store;
let prefix: string;
let sched: { stop(): Promise<void> };

const SHOP = `apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: shop}
spec:
  services:
    web: {image: jaco-demo/busybox:1, replicas: 3, ports: [18080]}
    big: {image: jaco-demo/busybox:1, resources: {memory: 64Gi}}
    pinned: {image: jaco-demo/busybox:1, replicas: 2, placement: {mode: hosts, hosts: [node-1, node-9]}}
`;

const cli = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, input });

beforeAll(async () => {
  etcd = await startTestEtcd();
  prefix = uniquePrefix();
  store = etcd.store(prefix);
  const ops = ['node-1', 'node-2', 'node-3'].flatMap((name) => {
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 2 * 1024 ** 3, gpus: 0 }, agentVersion: 'test', registeredAt: new Date().toISOString() } };
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 120_000, agentVersion: 'test', dockerUp: true } };
    return [{ op: 'put' as const, key: keys.node(name), value: node }, { op: 'put' as const, key: keys.heartbeat(name), value: hb }];
  });
  await commitAtomic(store, [{ ops }]);
  sched = await startController({ store, timings: FAST, log: testLogger(), identity: 'cli-test' }, schedulerController(FAST));
  const r = await cli(['apply', '-f', '-'], SHOP);
  expect(r.code, r.stderr).toBe(0);
  await eventually(async () => (await store.countPrefix(keys.desiredOf())) === 3 && (await store.get(keys.deploymentStatus('shop'))) !== undefined, { what: 'shop placed' });
});
afterAll(async () => {
  await sched?.stop();
  await etcd?.stop();
});

describe('jaco status', () => {
  it('-o json: per service desired/running and unschedulable; per replica node, state, code, restarts', async () => {
    const r = await cli(['status', 'shop', '-o', 'json']);
    expect(r.code, r.stderr).toBe(0);
    const d = (JSON.parse(r.stdout) as { deployments: DeploymentStatusRow[] }).deployments[0]!;
    expect(d).toMatchObject({ name: 'shop', revision: 1, observedGeneration: 1 });
    const svc = Object.fromEntries(d.services.map((s) => [s.name, s]));
    expect(svc.web).toMatchObject({ mode: 'spread', desired: 3, running: 0, placed: 3 });
    expect(svc.web!.replicas.map((x) => [x.replica, x.state, x.code, x.restarts])).toEqual([
      ['shop-web-0', 'pending', 'not_observed', 0],
      ['shop-web-1', 'pending', 'not_observed', 0],
      ['shop-web-2', 'pending', 'not_observed', 0],
    ]);
    expect(svc.big!.unschedulable).toMatchObject({ reason: 'no_capacity_memory', count: 1 });
    expect(svc.pinned!.unschedulable).toMatchObject({ reason: 'cannot_satisfy_host_placement', count: 2, missing: ['node-9'] });
  });

  it('the table names every service, every replica and every unschedulable reason with its nodes', async () => {
    const r = await cli(['status']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^SERVICE +MODE +DESIRED +RUNNING +ROLLOUT +MOVES +UNSCHEDULABLE$/m);
    expect(r.stdout).toMatch(/^web +spread +3 +0 /m);
    expect(r.stdout).toMatch(/^shop-web-1 +web +node-\d +pending +not_observed +0 +1 /m);
    expect(r.stdout).toContain('big: 1 replica(s) unschedulable: no_capacity_memory');
    expect(r.stdout).toMatch(/node-1: memory: needs 64\.0Gi/);
    expect(r.stdout).toContain('missing hosts: node-9');
  });

  it('an unknown deployment is exit 1', async () => {
    const r = await cli(['status', 'nope']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('deployment "nope" not found');
  });

  it('-w -o json prints a line per change and exits 0 on Ctrl-C', async () => {
    const child = spawn(process.execPath, [JACO_BIN, 'status', 'shop', '-w', '-o', 'json'], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: prefix }, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines: DeploymentStatusRow[][] = [];
    let buf = '';
    child.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        lines.push((JSON.parse(buf.slice(0, i)) as { deployments: DeploymentStatusRow[] }).deployments);
        buf = buf.slice(i + 1);
      }
    });
    const exit = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      await eventually(() => lines.length > 0, { what: 'a first status line' });
      expect(lines[0]![0]!.services.find((s) => s.name === 'web')!.desired).toBe(3);
      const r = await cli(['apply', '-f', '-'], SHOP.replace('replicas: 3, ports', 'replicas: 1, ports'));
      expect(r.code, r.stderr).toBe(0);
      await eventually(() => lines.some((l) => l[0]!.services.find((s) => s.name === 'web')!.replicas.length === 1), { what: 'the scale down shown live' });
    } finally {
      child.kill('SIGINT');
    }
    expect(await exit).toBe(0);
    await cli(['apply', '-f', '-'], SHOP);
    await eventually(async () => (await store.countPrefix(keys.desiredOf())) === 3);
  });
});

describe('jaco explain', () => {
  it('REPLICA prints the stored decision: every node with its verdict, the winner and why', async () => {
    const d = (await store.list<ReplicaDesired>(keys.desiredOf())).items.find((x) => x.value.spec.replica === 'shop-web-0')!.value;
    const r = await cli(['explain', 'shop-web-0']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`Chosen:      ${d.spec.node}`);
    expect(r.stdout).toContain('trigger scale_up');
    expect(r.stdout).toMatch(new RegExp(`^${d.spec.node} +chosen +[-0-9.]+ \\(peers 0, cpu [0-9.]+, hash [0-9.]+\\)`, 'm'));
    expect(r.stdout.match(/^node-\d +(chosen|scored|rejected) /gm)).toHaveLength(3);
    const y = await cli(['explain', 'shop-web-0', '-o', 'json']);
    expect(JSON.parse(y.stdout)).toMatchObject({ kind: 'PlacementDecision', spec: { replica: 'shop-web-0', chosen: d.spec.node } });
  });

  it('DEPLOYMENT/SERVICE prints the unschedulable reason with the per-node breakdown', async () => {
    const r = await cli(['explain', 'shop/big']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Unschedulable: 1 replica(s), reason no_capacity_memory');
    expect(r.stdout).toMatch(/^ {2}node-2 +memory: needs 64\.0Gi/m);
    const w = await cli(['explain', 'shop/web']);
    expect(w.stdout).toMatch(/^ {2}shop-web-\d+ +node-\d +\d+s ago +scale_up +node-\d: highest score/m);
  });

  it('unknown targets are exit 1 with a clear message', async () => {
    expect((await cli(['explain', 'shop-nope-0'])).stderr).toContain('replica "shop-nope-0" not found');
    expect((await cli(['explain', 'shop/nope'])).stderr).toContain('has no service "nope"');
    expect((await cli(['explain', 'a/b/c'])).code).toBe(1);
  });
});

describe('metrics', () => {
  it('placements, unschedulable replicas by reason and the pass duration are exported', async () => {
    const text = await registry.metrics();
    const value = (re: RegExp) => Number(re.exec(text)?.[1] ?? NaN);
    expect(value(/^jaco_scheduler_placements_total\{trigger="scale_up"\} (\d+)/m)).toBeGreaterThanOrEqual(3);
    expect(value(/^jaco_scheduler_unschedulable_replicas\{reason="no_capacity_memory"\} (\d+)/m)).toBe(1);
    expect(value(/^jaco_scheduler_unschedulable_replicas\{reason="cannot_satisfy_host_placement"\} (\d+)/m)).toBe(2);
    expect(value(/^jaco_scheduler_reconcile_duration_seconds_count (\d+)/m)).toBeGreaterThan(0);
    expect(text).toMatch(/^# TYPE jaco_replica_restarts_total counter$/m);
  });
});
