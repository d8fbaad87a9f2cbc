// Benchmark: a rolling update of 10 replicas, jaco vs Docker Swarm on this machine, side by side in
// one run: one at a time start-first, one at a time stop-first, and five at a time start-first.
// Same image (jaco-demo/busybox:1 → :2, one image ID with two tags), same workload (exits at once
// on SIGTERM), same exec health check (`true` every 1 s, 5 s timeout, 3 retries), same stop signal and grace
// (SIGTERM, 10 s), host networking, one node each unless --nodes says otherwise for jaco.
//
//   npx tsx test/bench/rollout-update.bench.ts [--runs 3] [--variant sf1,pf1,sf5] [--nodes 1] [--timings production|fast] [--no-swarm]
//
// jaco: a real etcd, `jaco agent` process(es) and `jaco controller all` (test/support/cluster.ts).
// Time = from the apply until every replica is observed running and healthy at the new spec and
// the rollout plan is completed. Variants: start-first ×1 (jaco's default), stop-first ×1 (Swarm's
// default), start-first ×5 (`update: {parallelism: 5}` vs `--update-parallelism 5`).
//
// Swarm: `docker swarm init --advertise-addr 127.0.0.1`, a host-network service created with the
// variant's `--update-order`, then `docker service update --update-parallelism N --update-delay 0s
// --image jaco-demo/busybox:2 --no-resolve-image`. Time = from the
// update until every task runs the new image with its container healthy, and until Swarm marks
// the update completed (after its monitoring period). The Swarm part runs under
// `flock /tmp/jaco-swarm.lock` (another benchmark uses Swarm too) and always leaves the swarm.
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import { replicaReady } from '../../src/api/readiness.js';
import { specHash } from '../../src/api/spec.js';
import type { ReplicaDesired, ReplicaObserved, RolloutPlan, ServiceSpec } from '../../src/api/types.js';
import { applyDeployments, deleteDeployments } from '../../src/app/apply.js';
import { TestCluster } from '../support/cluster.js';

const REPLICAS = 10;
const WORKLOAD = ['sh', '-c', 'trap "exit 0" TERM; sleep 3600 & wait'];
const LOCK = '/tmp/jaco-swarm.lock';
const SWARM_SERVICE = 'jaco-bench-rollout';

type Order = 'start-first' | 'stop-first';

/** One way to roll, the same on both sides. */
interface Variant {
  /** For --variant. */
  id: string;
  name: string;
  order: Order;
  parallelism: number;
}
const ALL_VARIANTS: Variant[] = [
  { id: 'sf1', name: 'start-first ×1', order: 'start-first', parallelism: 1 },
  { id: 'pf1', name: 'stop-first ×1', order: 'stop-first', parallelism: 1 },
  { id: 'sf5', name: 'start-first ×5', order: 'start-first', parallelism: 5 },
];

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const runs = Number(arg('runs', '3'));
const only = arg('variant', '').split(',').filter(Boolean);
const VARIANTS = ALL_VARIANTS.filter((v) => !only.length || only.includes(v.id));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

async function until(what: string, fn: () => Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await fn())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

// ---------------------------------------------------------------- jaco

function jacoService(image: string, v: Variant): ServiceSpec {
  return {
    image,
    replicas: REPLICAS,
    command: WORKLOAD,
    healthcheck: { test: ['CMD', 'true'], interval: '1s', timeout: '5s', retries: 3, startPeriod: '0s' },
    stopSignal: 'SIGTERM',
    stopGracePeriod: '10s',
    // Swarm's --update-parallelism N updates N tasks at once; jaco's parallelism N alone does the
    // same (the disruption budget, maxUnavailable, defaults to parallelism).
    update: { order: v.order, parallelism: v.parallelism },
  };
}

async function jacoRun(c: TestCluster, name: string, v: Variant): Promise<{ totalMs: number; planMs: number }> {
  const store = c.store;
  const converged = async (hash: string): Promise<boolean> => {
    const [desired, observed] = await Promise.all([store.list<ReplicaDesired>(keys.desiredOf()), store.list<ReplicaObserved>(keys.observedOf())]);
    const obs = new Map(observed.items.map((o) => [o.key.slice('observed/'.length), o.value]));
    const mine = desired.items.map((d) => d.value).filter((d) => d.spec.deployment === name);
    const now = Date.now();
    return mine.length === REPLICAS && mine.every((d) => d.spec.specHash === hash && replicaReady(d, obs.get(`${d.spec.node}/${d.spec.replica}`), now));
  };
  const v1 = jacoService('jaco-demo/busybox:1', v);
  const v2 = jacoService('jaco-demo/busybox:2', v);
  await applyDeployments(store, [{ name, spec: { services: { web: v1 } }, cause: 'apply' }]);
  await until(`${name}: 10 replicas of :1 ready`, () => converged(specHash(v1)), 120_000);
  const t0 = Date.now();
  await applyDeployments(store, [{ name, spec: { services: { web: v2 } }, cause: 'apply' }]);
  const h2 = specHash(v2);
  await until(
    `${name}: rollout to :2`,
    async () => (await store.get<RolloutPlan>(keys.rollout(name, 'web')))?.value.spec.state === 'completed' && (await converged(h2)),
    300_000,
  );
  const totalMs = Date.now() - t0;
  const plan = (await store.get<RolloutPlan>(keys.rollout(name, 'web')))!.value.spec;
  if (plan.totalSteps !== REPLICAS / v.parallelism && plan.totalSteps !== REPLICAS) throw new Error(`${name}: expected ${REPLICAS} steps, plan has ${plan.totalSteps}`);
  await deleteDeployments(store, [name]);
  await until(`${name}: containers gone`, async () => (await c.containers()).every((x) => x.Labels['jaco.dev/deployment'] !== name), 120_000, 200);
  return { totalMs, planMs: Date.parse(plan.finishedAt!) - Date.parse(plan.startedAt) };
}

async function benchJaco(nodes: number, timings: 'production' | 'fast'): Promise<Record<string, { totalMs: number; planMs: number }[]>> {
  // Info-level logs, as in production (the test clusters default to debug).
  process.env.JACO_LOG_LEVEL = 'info';
  const c = new TestCluster({ nodes, controllers: 'all', timings, capacity: 'cpu=2,memory=4Gi' });
  await c.start();
  const out: Record<string, { totalMs: number; planMs: number }[]> = Object.fromEntries(VARIANTS.map((v) => [v.name, []]));
  try {
    for (let r = 0; r < runs; r++)
      for (const v of VARIANTS) {
        const res = await jacoRun(c, `bench-${v.order === 'start-first' ? 'sf' : 'pf'}${v.parallelism}-${r}`, v);
        out[v.name]!.push(res);
        console.log(`  jaco ${v.name} run ${r + 1}: ${fmt(res.totalMs)} (plan ${fmt(res.planMs)})`);
      }
  } catch (e) {
    console.error(c.logs(20));
    throw e;
  } finally {
    await c.stop();
  }
  return out;
}

// ---------------------------------------------------------------- Docker Swarm (run under the lock)

interface SwarmRun {
  convergedMs: number;
  completedMs: number;
}

function docker(args: string[], allowFail = false): string {
  const r = spawnSync('docker', args, { encoding: 'utf8' });
  if (r.status !== 0 && !allowFail) throw new Error(`docker ${args.join(' ')}: ${r.stderr.trim() || r.stdout.trim()}`);
  return r.stdout;
}

async function swarmRun(d: Docker, v: Variant): Promise<SwarmRun> {
  docker([
    'service', 'create', '--detach', '--name', SWARM_SERVICE, '--network', 'host', '--replicas', String(REPLICAS), '--no-resolve-image',
    '--health-cmd', 'true', '--health-interval', '1s', '--health-timeout', '5s', '--health-retries', '3', '--health-start-period', '0s',
    '--stop-signal', 'SIGTERM', '--stop-grace-period', '10s', '--update-order', v.order,
    'jaco-demo/busybox:1', ...WORKLOAD,
  ]);
  // Converged: every task wanted running runs the image, and its container reports healthy.
  const running = async (image: string) => {
    const tasks = (await d.listTasks({ filters: { service: [SWARM_SERVICE], 'desired-state': ['running'] } })) as {
      Spec: { ContainerSpec: { Image: string } };
      Status: { State: string; ContainerStatus?: { ContainerID?: string } };
    }[];
    if (tasks.length !== REPLICAS || !tasks.every((t) => t.Spec.ContainerSpec.Image === image && t.Status.State === 'running')) return false;
    const healthy = new Set((await d.listContainers({ filters: { label: [`com.docker.swarm.service.name=${SWARM_SERVICE}`], health: ['healthy'] } })).map((x) => x.Id));
    return tasks.every((t) => healthy.has(t.Status.ContainerStatus?.ContainerID ?? ''));
  };
  try {
    await until('swarm: 10 tasks of :1 running', () => running('jaco-demo/busybox:1'), 180_000, 100);
    const t0 = Date.now();
    docker(['service', 'update', '--detach', '--update-parallelism', String(v.parallelism), '--update-delay', '0s', '--image', 'jaco-demo/busybox:2', '--no-resolve-image', SWARM_SERVICE]);
    await until('swarm: 10 tasks of :2 running', () => running('jaco-demo/busybox:2'), 600_000, 100);
    const convergedMs = Date.now() - t0;
    await until(
      'swarm: update completed',
      async () => ((await d.getService(SWARM_SERVICE).inspect()) as { UpdateStatus?: { State?: string } }).UpdateStatus?.State === 'completed',
      120_000,
      100,
    );
    return { convergedMs, completedMs: Date.now() - t0 };
  } finally {
    docker(['service', 'rm', SWARM_SERVICE], true);
    await until('swarm: containers gone', async () => (await d.listContainers({ all: true, filters: { label: [`com.docker.swarm.service.name=${SWARM_SERVICE}`] } })).length === 0, 120_000, 250).catch(
      () => undefined,
    );
  }
}

/** Runs inside `flock`: init, measure, and leave the swarm whatever happens. */
async function swarmChild(): Promise<void> {
  const d = new Docker();
  const out: Record<string, SwarmRun[]> = Object.fromEntries(VARIANTS.map((v) => [v.name, []]));
  // A swarm still active here is left over from a crashed run of ours (we hold the lock).
  if (/Swarm: active/.test(docker(['info'], true))) docker(['swarm', 'leave', '--force'], true);
  const init = spawnSync('docker', ['swarm', 'init', '--advertise-addr', '127.0.0.1'], { encoding: 'utf8' });
  if (init.status !== 0) {
    process.stdout.write(JSON.stringify({ error: `docker swarm init --advertise-addr 127.0.0.1 failed: ${init.stderr.trim()}` }) + '\n');
    return;
  }
  try {
    for (let r = 0; r < runs; r++)
      for (const v of VARIANTS) {
        const res = await swarmRun(d, v);
        out[v.name]!.push(res);
        process.stderr.write(`  swarm ${v.name} run ${r + 1}: tasks converged ${fmt(res.convergedMs)}, update completed ${fmt(res.completedMs)}\n`);
      }
    process.stdout.write(JSON.stringify(out) + '\n');
  } finally {
    docker(['service', 'rm', SWARM_SERVICE], true);
    docker(['swarm', 'leave', '--force'], true);
  }
}

function benchSwarm(): Record<string, SwarmRun[]> | { error: string } {
  const self = fileURLToPath(import.meta.url);
  // The shell runs `swarm leave` even when the measuring process dies, still holding the lock, and
  // removes the bridge network swarm init creates (docker_gwbridge): no bridge outlives the run.
  const inner = `"${process.execPath}" --import tsx "${self}" --swarm-child --runs ${runs}${only.length ? ` --variant ${only.join(',')}` : ''}; rc=$?; docker swarm leave --force >/dev/null 2>&1; docker network rm docker_gwbridge >/dev/null 2>&1; exit $rc`;
  const r = spawnSync('flock', [LOCK, 'sh', '-c', inner], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const last = r.stdout.trim().split('\n').pop() ?? '';
  if (r.status !== 0 || !last.startsWith('{')) return { error: `swarm benchmark failed (exit ${r.status}): ${r.stdout.trim()}` };
  return JSON.parse(last) as Record<string, SwarmRun[]> | { error: string };
}

// ---------------------------------------------------------------- main

if (process.argv.includes('--swarm-child')) {
  await swarmChild();
} else {
  const nodes = Number(arg('nodes', '1'));
  const timings = arg('timings', 'production') as 'production' | 'fast';
  console.log(`rolling update of ${REPLICAS} replicas, busybox:1 → :2, health check every 1 s; ${runs} run(s) of each variant; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  console.log(`jaco (${nodes} node(s), ${timings} timings):`);
  const j = await benchJaco(nodes, timings);
  let s: ReturnType<typeof benchSwarm> | undefined;
  if (!process.argv.includes('--no-swarm')) {
    console.log('Docker Swarm (1 node):');
    s = benchSwarm();
  }
  console.log(`\nmedians (load average at the end ${loadavg().map((x) => x.toFixed(2)).join(' ')}):`);
  for (const v of VARIANTS) {
    const jm = median(j[v.name]!.map((x) => x.totalMs));
    let line = `  ${v.name.padEnd(15)} jaco ${fmt(jm)} (plan ${fmt(median(j[v.name]!.map((x) => x.planMs)))}; runs ${j[v.name]!.map((x) => fmt(x.totalMs)).join(' / ')})`;
    if (s && !('error' in s)) {
      const sm = median(s[v.name]!.map((x) => x.convergedMs));
      line += ` | swarm ${fmt(sm)} to every task running :2 healthy, ${fmt(median(s[v.name]!.map((x) => x.completedMs)))} to update completed (runs ${s[v.name]!.map((x) => fmt(x.convergedMs)).join(' / ')}) | jaco/swarm ${(jm / sm).toFixed(2)}×`;
    }
    console.log(line);
  }
  if (s && 'error' in s) console.log(`  swarm: could not run: ${s.error}`);
}
