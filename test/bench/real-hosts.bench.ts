// Benchmark: a local cluster of separate hosts (`jaco up`: a namespace and a Docker engine per
// node, production timings) — how long `jaco up` takes, and how long 50 replicas take from `jaco
// apply` to all observed running when each node's engine must pull the image from the cluster
// registry first, and when it already has it; beside the same 50 containers started with plain
// `docker run -d` one after another on one engine (what an operator without an orchestrator does).
// Needs the build (npm run build) and the demo images (scripts/build-images.sh).
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/real-hosts.bench.ts [replicas=50] [rounds=3]
import { execFileSync } from 'node:child_process';
import { loadavg } from 'node:os';
import Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import type { ReplicaObserved } from '../../src/api/types.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const N = Number(process.argv[2] ?? 50);
const ROUNDS = Number(process.argv[3] ?? 3);
const load = () => loadavg()[0]!.toFixed(2);
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

function manifest(name: string): string {
  return `apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: ${name}}
spec:
  services:
    w:
      image: jaco-demo/busybox:1
      replicas: ${N}
      command: [sleep, "3600"]
      stopGracePeriod: 0s
`;
}

const c = new UpCluster({ nodes: 3, timings: 'production' });
const t0 = performance.now();
await c.start();
console.log(`jaco up --nodes 3 (separate hosts, ready): ${secs(performance.now() - t0)} (load ${load()})`);
try {
  let t = performance.now();
  const pushed = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1'], undefined, 120_000);
  if (pushed.code) throw new Error(pushed.stderr);
  console.log(`jaco registry push jaco-demo/busybox:1: ${secs(performance.now() - t)}`);

  const running = async (deployment: string) => {
    const { items } = await c.store.list<ReplicaObserved>(keys.observedOf());
    return items.filter((i) => i.value.status.deployment === deployment && i.value.status.state === 'running').length >= N;
  };
  const applyAndWait = async (name: string): Promise<number> => {
    const start = performance.now();
    await c.apply(manifest(name));
    await eventually(() => running(name), { what: `${N} replicas of ${name} running`, timeoutMs: 300_000, intervalMs: 20 });
    return performance.now() - start;
  };
  const gone = async (name: string) => {
    await c.jaco(['delete', 'deployment', name]);
    for (const n of c.net.nodes) await eventually(async () => (await c.engine(n.name).listContainers({ all: true, filters: { label: [`jaco.dev/deployment=${name}`] } })).length === 0, { what: `${name} gone from ${n.name}`, timeoutMs: 120_000 });
  };

  const images = async () => (await Promise.all(c.net.nodes.map(async (n) => (await c.engine(n.name).listImages()).length))).reduce((a, b) => a + b, 0);
  if ((await images()) !== 0) throw new Error('the node engines should start without images');
  const pulled = await applyAndWait('pull');
  console.log(`apply → ${N} replicas running, each node pulling the image first: ${secs(pulled)} (load ${load()})`);
  await gone('pull');
  const present: number[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    present.push(await applyAndWait(`present${r}`));
    console.log(`  round ${r}: apply → ${N} replicas running, image present: ${secs(present.at(-1)!)} (load ${load()})`);
    await gone(`present${r}`);
  }

  // The same containers with plain docker, one after another, on the machine's engine.
  const docker = new Docker();
  const raw: number[] = [];
  for (let r = 1; r <= ROUNDS; r++) {
    const label = `jaco.bench=raw-${process.pid}-${r}`;
    const start = performance.now();
    for (let i = 0; i < N; i++) execFileSync('docker', ['run', '-d', '--network', 'host', '--label', label, 'jaco-demo/busybox:1', 'sleep', '3600'], { stdio: 'ignore' });
    raw.push(performance.now() - start);
    console.log(`  round ${r}: docker run -d ×${N} on one engine: ${secs(raw.at(-1)!)} (load ${load()})`);
    for (const ci of await docker.listContainers({ all: true, filters: { label: [label] } })) await docker.getContainer(ci.Id).remove({ force: true });
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`\nsummary: ${N} replicas on 3 separate hosts — pulled ${secs(pulled)}, present median ${secs(median(present))}; docker run -d ×${N} median ${secs(median(raw))}`);
} finally {
  await c.stop();
}
