// Benchmark: what a replica's own network namespace costs at start. On a separate host (`jaco up`,
// one node, production timings, the controllers paused so that only the agent acts), desired keys
// are written straight into the store and timed to their first `running` report: host-network
// replicas beside cluster-network ones (a pause sandbox, CNI ptp ADD, then the container joining
// it). Images are on the node before the timed rounds (the first cluster round pulls nothing).
// Needs the build (npm run build) and the images (scripts/build-images.sh).
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/cluster-network.bench.ts [replicas=20] [rounds=5]
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { keys } from '../../src/api/keys.js';
import type { ReplicaObserved, ServiceSpec } from '../../src/api/types.js';
import { deleteDesired, desired, putDesired } from '../e2e/agent-fixtures.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const N = Number(process.argv[2] ?? 20);
const ROUNDS = Number(process.argv[3] ?? 5);
const NODE = 'node-1';
const load = () => loadavg()[0]!.toFixed(2);
const ms = (x: number) => `${Math.round(x)} ms`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const c = new UpCluster({ nodes: 1, timings: 'production' });
await c.start();
const controllers = c.state.children.find((x) => x.name === 'controllers')!.pid!;
try {
  const pushed = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1', 'jaco/pause:1'], undefined, 120_000);
  if (pushed.code) throw new Error(pushed.stderr);
  process.kill(controllers, 'SIGSTOP');
  const image = `${c.state.registry!.host}/jaco-demo/busybox:1`;
  const base: ServiceSpec = { image, command: ['sleep', '3600'], stopGracePeriod: '0s' };
  let host = 10;

  const observed = async (prefix: string) => (await c.store.list<ReplicaObserved>(keys.observedOf(NODE))).items.filter((i) => i.value.status.replica.startsWith(prefix));
  /** Puts n desired keys at once; ms until every one is reported running; then removes them and waits until they are gone. */
  const round = async (name: string, n: number, cluster: boolean): Promise<number> => {
    const ds = Array.from({ length: n }, (_, i) => {
      const h = host++;
      return desired(NODE, `${name}-${i}`, { ...base, ...(cluster ? { network: 'cluster' as const } : {}) }, {
        service: name,
        ...(cluster ? { address: { ipv4: `10.208.${Math.floor(h / 250)}.${(h % 250) + 2}/24`, ipv6: `fd4a:17c2:9e01:${Math.floor(h / 250)}::${((h % 250) + 2).toString(16)}/64` } } : {}),
      });
    });
    const t = performance.now();
    await putDesired(c.store, ...ds);
    await eventually(async () => (await observed(`${name}-`)).filter((i) => i.value.status.state === 'running').length === n, { what: `${name} running`, timeoutMs: 120_000, intervalMs: 10 });
    const took = performance.now() - t;
    for (const d of ds) await deleteDesired(c.store, NODE, d.spec.replica);
    await eventually(async () => (await observed(`${name}-`)).length === 0, { what: `${name} gone`, timeoutMs: 120_000 });
    return took;
  };

  // Warm-up: both images on the node.
  await round('warm', 1, true);
  for (const n of [1, N]) {
    const h: number[] = [];
    const cl: number[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      h.push(await round(`h${n}r${r}`, n, false));
      cl.push(await round(`c${n}r${r}`, n, true));
      console.log(`  ${n} replica(s), round ${r}: host ${ms(h.at(-1)!)}, cluster ${ms(cl.at(-1)!)} (load ${load()})`);
    }
    console.log(`${n} replica(s) from desired key to running, median of ${ROUNDS}: host network ${ms(median(h))}, cluster network ${ms(median(cl))} (+${ms(median(cl) - median(h))})`);
  }
  // The plugin's own share: the agent logs each ADD's duration.
  const adds = readFileSync(join(c.dataDir, 'logs', `${NODE}.log`), 'utf8')
    .split('\n')
    .filter((l) => l.includes('"sandbox plumbed"'))
    .map((l) => (JSON.parse(l) as { addMs: number }).addMs);
  console.log(`CNI ptp ADD, as the agent timed it: median ${ms(median(adds))}, max ${ms(Math.max(...adds))} over ${adds.length} sandboxes`);
} finally {
  process.kill(controllers, 'SIGCONT');
  await c.stop();
}
