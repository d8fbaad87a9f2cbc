// The scheduler through a real etcd (no Docker): from `apply` of 1,000 replicas until every
// desired key is written (and until the scheduler's status says so), run with
//   npx tsx test/bench/scheduler-etcd.bench.ts
// Nodes are registered with long-lived heartbeats (no agents); the scheduler runs in this process
// with fast timings, exactly as `jaco controller scheduler` runs it.
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type DeploymentSpec, type DeploymentStatus, type Heartbeat, type Node } from '../../src/api/types.js';
import { applyDeployments, deleteDeployments } from '../../src/app/apply.js';
import { setRootLogger } from '../../src/observability/log.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { startController } from '../../src/runtime/manager.js';
import { startTestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';

const NODES = 20;
setRootLogger(testLogger());

async function registerNodes(store: Store): Promise<void> {
  const ops = [];
  for (let i = 1; i <= NODES; i++) {
    const name = `node-${String(i).padStart(2, '0')}`;
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 8000, memoryBytes: 64 * 1024 ** 3, gpus: 0 }, agentVersion: 'bench', registeredAt: new Date().toISOString() } };
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 600_000, agentVersion: 'bench', dockerUp: true } };
    ops.push({ op: 'put' as const, key: keys.node(name), value: node }, { op: 'put' as const, key: keys.heartbeat(name), value: hb });
  }
  await commitAtomic(store, [{ ops }]);
}

async function until(cond: () => Promise<boolean>, timeoutMs = 120_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function run(store: Store, name: string, spec: DeploymentSpec, total: number): Promise<{ keysMs: number; statusMs: number }> {
  const t0 = performance.now();
  await applyDeployments(store, [{ name, spec, cause: 'apply' }]);
  await until(async () => (await store.countPrefix(keys.desiredOf())) >= total);
  const keysMs = performance.now() - t0;
  await until(async () => {
    const st = (await store.get<DeploymentStatus>(keys.deploymentStatus(name)))?.value.status?.scheduling;
    return !!st && Object.values(st.services).reduce((s, x) => s + x.placed, 0) === total;
  });
  const statusMs = performance.now() - t0;
  await deleteDeployments(store, [name]);
  await until(async () => (await store.countPrefix(keys.desiredOf())) === 0 && (await store.countPrefix(keys.decisions())) === 0);
  return { keysMs, statusMs };
}

const etcd = await startTestEtcd();
try {
  const store = etcd.store();
  await registerNodes(store);
  const h = await startController({ store, timings: FAST, log: testLogger(), identity: 'bench' }, schedulerController(FAST));
  while (!h.runner.isLeader()) await new Promise((r) => setTimeout(r, 20));
  const shapes: [string, DeploymentSpec][] = [
    ['1 service × 1000 replicas', { services: { web: { image: 'jaco-demo/busybox:1', replicas: 1000 } } }],
    ['10 services × 100 replicas', { services: Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`s${i}`, { image: 'jaco-demo/busybox:1', replicas: 100 }])) }],
  ];
  for (const [label, spec] of shapes) {
    const runs = [];
    for (let r = 0; r < 3; r++) runs.push(await run(store, `bench${r}`, spec, 1000));
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[1]!;
    console.log(
      `apply → 1000 desired keys written (${label}, ${NODES} nodes, real etcd): median ${med(runs.map((x) => x.keysMs)).toFixed(0)} ms; → status placed 1000: ${med(runs.map((x) => x.statusMs)).toFixed(0)} ms (runs: ${runs.map((x) => x.keysMs.toFixed(0)).join(', ')} ms)`,
    );
  }
  await h.stop();
} finally {
  await etcd.stop();
}
