// The scheduler on real containers, side by side with Docker Swarm on the same machine, run with
//   npx tsx test/bench/scheduler-cluster.bench.ts
// (build first: npm run build; the cluster spawns ./bin/jaco).
// 1. `jaco apply` of a 3-service deployment (spread 3, pack 2, global on 3 nodes) until all 8
//    replicas are observed running (seed 001's bar: 15 s);
// 2. `jaco apply` of 50 replicas until all 50 are observed running;
// 3. the physical limit (issue 30): fifty `docker run -d --network host` of the same image issued
//    at once on the same engine (dockerode create + start, all in flight together), timed until
//    the last start returns — in the same run, alternating with jaco's runs;
// 4. the same 50 replicas with Swarm (skipped with BENCH_SWARM=0): `docker service create --replicas 50 --detach=false
//    --network host --no-resolve-image jaco-demo/busybox:1 sleep …`, timed as a whole and until
//    50 tasks report Running. Every Swarm run holds /tmp/jaco-swarm.lock (another benchmark uses
//    Swarm too) and always ends with `docker swarm leave --force`.
import { spawnSync } from 'node:child_process';
import { keys } from '../../src/api/keys.js';
import type { ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const SLEEPER = 'image: jaco-demo/busybox:1, command: [sleep, "3600"], stopGracePeriod: 1s';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function runningCount(c: TestCluster, dep: string): Promise<number> {
  const [d, o] = await Promise.all([c.store.list<ReplicaDesired>(keys.desiredOf()), c.store.list<ReplicaObserved>(keys.observedOf())]);
  const want = new Set(d.items.filter((x) => x.value.spec.deployment === dep).map((x) => `${x.value.spec.node}/${x.value.spec.replica}`));
  return o.items.filter((x) => want.has(`${x.value.status.node}/${x.value.status.replica}`) && x.value.status.state === 'running').length;
}

/** Fifty containers of the image, created and started all at once, as fast as the engine takes them; then removed. */
async function dockerRun(c: TestCluster, n: number, tag: string): Promise<number> {
  const t0 = performance.now();
  const ids = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const ctr = await c.docker.createContainer({ name: `jaco-bench-${tag}-${i}`, Image: 'jaco-demo/busybox:1', Cmd: ['sleep', '3600'], HostConfig: { NetworkMode: 'host' }, StopTimeout: 1 });
      await ctr.start();
      return ctr.id;
    }),
  );
  const ms = performance.now() - t0;
  await Promise.all(ids.map((id) => c.docker.getContainer(id).remove({ force: true })));
  return ms;
}

/** Where the time of an apply went, in ms from its start: each stage's first and last. */
async function breakdown(c: TestCluster, dep: string, t0: number, applied: number): Promise<string> {
  const since = (iso: string | undefined) => (iso ? Date.parse(iso) - t0 : NaN);
  const span = (xs: number[]) => (xs.length ? `${Math.min(...xs).toFixed(0)}–${Math.max(...xs).toFixed(0)}` : '-');
  const desired = (await c.store.list<ReplicaDesired>(keys.desiredOf())).items.filter((x) => x.value.spec.deployment === dep).map((x) => since(x.value.spec.placedAt));
  const ctrs = await Promise.all((await c.containers()).filter((x) => x.Labels['jaco.dev/deployment'] === dep).map((x) => c.docker.getContainer(x.Id).inspect()));
  const observed = (await c.store.list<ReplicaObserved>(keys.observedOf())).items.filter((x) => x.value.status.deployment === dep && x.value.status.state === 'running').map((x) => since(x.value.status.observedAt));
  return `apply returned ${applied.toFixed(0)}; placed ${span(desired)}; created ${span(ctrs.map((x) => since(x.Created)))}; started ${span(ctrs.map((x) => since(x.State.StartedAt)))}; reported running ${span(observed)}`;
}

/** apply → n replicas running; then delete and wait until its containers are gone. */
async function timeApply(c: TestCluster, dep: string, yaml: string, n: number): Promise<number> {
  const t0 = performance.now();
  const wall0 = Date.now();
  await c.apply(yaml);
  const applied = performance.now() - t0;
  for (;;) {
    if ((await runningCount(c, dep)) >= n) break;
    if (performance.now() - t0 > 180_000) throw new Error(`${dep}: not running after 180 s`);
    await new Promise((r) => setTimeout(r, 25));
  }
  const ms = performance.now() - t0;
  if (process.env.BENCH_BREAKDOWN) console.log(`  ${dep} (${ms.toFixed(0)} ms): ${await breakdown(c, dep, wall0, applied)}`);
  const r = await c.jaco(['delete', 'deployment', dep]);
  if (r.code !== 0) throw new Error(r.stderr);
  for (let i = 0; i < 600 && (await c.containers()).length; i++) await new Promise((res) => setTimeout(res, 200));
  return ms;
}

function swarmRun(n: number): { commandMs: number; runningMs: number } | { error: string } {
  // One shell under the lock: init, create (timed), poll until n tasks run, remove, always leave.
  const script = `
set -u
trap 'docker service rm jaco-sched-bench >/dev/null 2>&1; docker swarm leave --force >/dev/null 2>&1; docker network rm docker_gwbridge >/dev/null 2>&1' EXIT
docker swarm init --advertise-addr 127.0.0.1 >/dev/null 2>&1 || { echo "ERR swarm init: $(docker swarm init --advertise-addr 127.0.0.1 2>&1)"; exit 0; }
t0=$(date +%s%N)
( timeout 300 docker service create --name jaco-sched-bench --replicas ${n} --detach=false --network host --no-resolve-image jaco-demo/busybox:1 sleep 3600 >/tmp/jaco-sched-bench.out 2>&1; echo "CMD $(( ($(date +%s%N) - t0) / 1000000 )) $?" ) &
while :; do
  r=$(docker service ps jaco-sched-bench --filter desired-state=running --format '{{.CurrentState}}' 2>/dev/null | grep -c '^Running' || true)
  if [ "$r" -ge ${n} ]; then echo "RUNNING $(( ($(date +%s%N) - t0) / 1000000 ))"; break; fi
  if [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 300000 ]; then echo "ERR not running after 300 s"; break; fi
  sleep 0.05
done
wait
`;
  const r = spawnSync('flock', ['/tmp/jaco-swarm.lock', 'bash', '-c', script], { encoding: 'utf8', timeout: 700_000 });
  const out = `${r.stdout}${r.stderr}`;
  const err = /ERR (.*)/.exec(out)?.[1];
  if (err) return { error: err };
  const cmd = /CMD (\d+) (\d+)/.exec(out);
  const run = /RUNNING (\d+)/.exec(out);
  if (!cmd || !run) return { error: `unexpected output: ${out.trim()}` };
  if (cmd[2] !== '0') return { error: `docker service create exited ${cmd[2]}` };
  return { commandMs: Number(cmd[1]), runningMs: Number(run[1]) };
}

const c = await startCluster({ nodes: 3, controllers: 'all' });
try {
  const three: number[] = [];
  for (let i = 0; i < RUNS; i++)
    three.push(
      await timeApply(
        c,
        `shop${i}`,
        `apiVersion: jaco.dev/v1\nkind: Deployment\nmetadata: {name: shop${i}}\nspec:\n  services:\n    web: {${SLEEPER}, replicas: 3}\n    worker: {${SLEEPER}, replicas: 2, placement: {mode: pack}}\n    agent: {${SLEEPER}, placement: {mode: global}}\n`,
        8,
      ),
    );
  console.log(`jaco: apply → 3-service deployment (spread 3, pack 2, global 3; 3 nodes) all running: median ${median(three).toFixed(0)} ms (runs ${three.map((x) => x.toFixed(0)).join(', ')}; seed 001's bar 15000 ms)`);

  const fifty: number[] = [];
  const raw: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    raw.push(await dockerRun(c, 50, `r${i}`));
    fifty.push(await timeApply(c, `fifty${i}`, `apiVersion: jaco.dev/v1\nkind: Deployment\nmetadata: {name: fifty${i}}\nspec:\n  services:\n    web: {${SLEEPER}, replicas: 50}\n`, 50));
  }
  console.log(`jaco: apply → 50 replicas running (3 simulated nodes, one Docker engine): median ${median(fifty).toFixed(0)} ms (runs ${fifty.map((x) => x.toFixed(0)).join(', ')})`);
  console.log(`docker: 50 × create + start at once, same image, same engine: median ${median(raw).toFixed(0)} ms (runs ${raw.map((x) => x.toFixed(0)).join(', ')}); jaco / docker ${(median(fifty) / median(raw)).toFixed(2)} (goal ≤ 1.1)`);
} finally {
  await c.stop();
}

const swarm: { commandMs: number; runningMs: number }[] = [];
let swarmError: string | undefined;
for (let i = 0; i < (process.env.BENCH_SWARM === '0' ? 0 : Math.min(RUNS, 2)) && !swarmError; i++) {
  const r = swarmRun(50);
  if ('error' in r) swarmError = r.error;
  else swarm.push(r);
}
if (process.env.BENCH_SWARM === '0') console.log('swarm: skipped (BENCH_SWARM=0)');
else if (swarmError) console.log(`swarm: could not run here: ${swarmError}`);
else {
  console.log(
    `swarm: docker service create --replicas 50 --detach=false (host network): median ${median(swarm.map((s) => s.commandMs)).toFixed(0)} ms for the command; 50 tasks Running after median ${median(swarm.map((s) => s.runningMs)).toFixed(0)} ms (runs ${swarm.map((s) => `${s.commandMs}/${s.runningMs}`).join(', ')})`,
  );
}
