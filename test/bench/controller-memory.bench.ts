// The memory of `jaco controller all` holding a big cluster: 1,000 nodes and 10,000 replicas
// (50 deployments × 200, all observed running), through a real etcd. Run with
//   npm run build && npx tsx test/bench/controller-memory.bench.ts
// The controller process is the built CLI, as an operator runs it; nodes and heartbeats are
// written directly (long-lived, no agents), the scheduler places every replica, and the agents'
// observed writes are made here, as 1,000 agents would make them. The figure is the process's
// resident set once the cluster is idle (goal ≤ 200 MiB: the runtime holds one copy of the state,
// shared by every controller of the process), and its peak. The controller runs with the
// allocator `jaco up` gives it (src/supervise/allocator.ts); BENCH_LOG_LEVEL=info shows its log.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type DeploymentSpec, type Heartbeat, type Node, type ReplicaDesired, type ReplicaObserved } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import type { Store } from '../../src/store/store.js';
import { commitActs, type OpGroup } from '../../src/store/writer.js';
import { allocatorEnv, runningAllocator } from '../../src/supervise/allocator.js';
import { freePort } from '../../src/supervise/etcd.js';
import { JACO_BIN } from '../support/cli.js';
import { startTestEtcd } from '../support/etcd.js';

const NODES = 1000;
const DEPLOYMENTS = 50;
const PER_DEPLOYMENT = 200;
const TOTAL = DEPLOYMENTS * PER_DEPLOYMENT;

const iso = () => new Date().toISOString();

/** Acts of `size` ops each (one etcd transaction per act, sent a few at a time). */
async function putAll(store: Store, items: { key: string; value: unknown }[], size = 100): Promise<void> {
  const acts: OpGroup[] = [];
  for (let i = 0; i < items.length; i += size) acts.push({ ops: items.slice(i, i + size).map((x) => ({ op: 'put' as const, ...x })) });
  for (let i = 0; i < acts.length; i += 8) await commitActs(store, acts.slice(i, i + 8));
}

async function until(what: string, cond: () => Promise<boolean>, timeoutMs = 300_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** VmRSS and VmHWM (peak) of a process, and its V8 heap in use (its own metrics), in MiB. */
async function memoryOf(pid: number, metricsPort: number): Promise<string> {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) / 1024;
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const metric = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN) / 1048576;
  return `RSS ${kb('VmRSS').toFixed(0)} MiB (peak ${kb('VmHWM').toFixed(0)}), V8 heap used ${metric('jaco_process_nodejs_heap_size_used_bytes').toFixed(0)} of ${metric('jaco_process_nodejs_heap_size_total_bytes').toFixed(0)} MiB, external ${metric('jaco_process_nodejs_external_memory_bytes').toFixed(0)} MiB, ${runningAllocator(`/proc/${pid}/maps`)}`;
}

/** `jaco controller all` as an operator runs it. */
async function controller(store: Store, endpoint: string): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort();
  const child = spawn(process.execPath, [JACO_BIN, '--timings', 'fast', 'controller', 'all', '--metrics-addr', `127.0.0.1:${port}`], {
    env: { ...process.env, ...allocatorEnv(), JACO_ENDPOINTS: endpoint, JACO_PREFIX: store.prefix, JACO_LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'warn' },
    stdio: ['ignore', process.env.BENCH_LOG_LEVEL ? 'inherit' : 'ignore', 'inherit'],
  });
  return { child, port };
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/**
 * Until no placement or status has been written for 5 s: every controller has seen everything and
 * settled. (Not the store's revision: the controllers' clock beacon writes it every interval.)
 */
async function idle(store: Store): Promise<void> {
  const newest = async (prefix: string) => Math.max(0, ...(await store.list(prefix)).items.map((i) => i.modRevision));
  const revision = async () => Math.max(await newest(keys.desiredOf()), await newest(keys.deploymentStatuses()), await newest(keys.audits()));
  for (let last = -1, now = await revision(); now !== last; last = now, now = await revision()) await new Promise((r) => setTimeout(r, 5_000));
  await new Promise((r) => setTimeout(r, 5_000));
}

const etcd = await startTestEtcd();
const store = etcd.store();
let child: ChildProcess | undefined;
try {
  const t0 = performance.now();
  const cluster: { key: string; value: unknown }[] = [];
  for (let i = 0; i < NODES; i++) {
    const name = `node-${String(i).padStart(4, '0')}`;
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: { zone: `z${i % 3}` } }, spec: {}, status: { capacity: { cpuMillis: 8000, memoryBytes: 32 * 1024 ** 3, gpus: 0 }, agentVersion: 'bench', registeredAt: iso() } };
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(), intervalMs: 3_600_000, agentVersion: 'bench', dockerUp: true } };
    cluster.push({ key: keys.node(name), value: node }, { key: keys.heartbeat(name), value: hb });
  }
  await putAll(store, cluster);

  const first = await controller(store, etcd.endpoint);
  child = first.child;
  const spec = (d: number): DeploymentSpec => ({
    services: {
      web: { image: 'jaco-demo/busybox:1', replicas: PER_DEPLOYMENT / 2, env: { DEPLOYMENT: `d${d}` }, resources: { memory: '64Mi', cpu: '50m' } },
      worker: { image: 'jaco-demo/busybox:1', replicas: PER_DEPLOYMENT / 2, command: ['sleep', '3600'], resources: { memory: '32Mi' } },
    },
  });
  for (let d = 0; d < DEPLOYMENTS; d += 10) await applyDeployments(store, Array.from({ length: 10 }, (_, k) => ({ name: `d${d + k}`, spec: spec(d + k), cause: 'apply' as const })));
  await until('every replica placed', async () => (await store.countPrefix(keys.desiredOf())) >= TOTAL);
  const placedS = (performance.now() - t0) / 1000;

  // The agents report every replica running and healthy.
  const desired = (await store.list<ReplicaDesired>(keys.desiredOf())).items;
  const observed = desired.map(({ value: d }) => {
    const s = d.spec;
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: s.replica },
      status: { replica: s.replica, node: s.node, deployment: s.deployment, service: s.service, state: 'running', revision: s.revision, specHash: s.specHash, health: 'none', startedAt: new Date(Date.now() - 60_000).toISOString(), observedAt: iso(), containerId: `c-${s.replica}` },
    };
    return { key: keys.observed(s.node, s.replica), value: o };
  });
  await putAll(store, observed);
  await idle(store);
  const placing = await memoryOf(child.pid!, first.port);
  // The process's idle collector samples its heap every 15 s and collects once it is quiet after growing (src/runtime/memory.ts).
  await new Promise((r) => setTimeout(r, 35_000));
  const placingLater = await memoryOf(child.pid!, first.port);
  // A controller started on the cluster as it now is (an upgrade, a failover): the steady state.
  await stop(child);
  const second = await controller(store, etcd.endpoint);
  child = second.child;
  await idle(store);
  const restarted = await memoryOf(child.pid!, second.port);
  console.log(`jaco controller all at ${TOTAL} replicas / ${NODES} nodes (real etcd, all observed running; goal RSS ≤ 200 MiB):`);
  console.log(`  after placing them all (${placedS.toFixed(1)} s from the first apply), idle: ${placing}`);
  console.log(`  the same process 35 s later (its idle collector's samples): ${placingLater}`);
  console.log(`  started on that cluster, idle: ${restarted}`);
} finally {
  await stop(child);
  store.close();
  await etcd.stop();
}
