// Benchmark: draining a node on real containers — how long a make-before-break move takes and how
// the disruption budget paces a drain. A real etcd, three `jaco agent` processes and `jaco
// controller all` (test/support/cluster.ts, fast timings), the local Docker engine.
//
//   npx tsx test/bench/drain-node.bench.ts [--replicas 6] [--runs 2]
//
// One service of N replicas (sleep, exec health check `true` every 1 s) is put on node-1 (the
// other nodes cordoned while it is placed), then `jaco node drain node-1 --wait` runs. Time = from
// the drain request until the drain is completed (every replica running healthy elsewhere and
// its old copy deleted). Measured with update.maxUnavailable 1 (the default: one move at a time)
// and N (every replica at once). Each move's duration comes from its replica_moved audit record.
import { keys } from '../../src/api/keys.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { AuditEvent } from '../../src/api/types.js';
import { deleteDeployments } from '../../src/app/apply.js';
import { jaco } from '../support/cli.js';
import { startCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const N = Number(arg('replicas', '6'));
const runs = Number(arg('runs', '2'));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const c = await startCluster({ nodes: 3, controllers: 'all' });
const cli = async (args: string[]) => {
  const r = await jaco(['--timings', 'fast', ...args], { endpoint: c.endpoint, prefix: c.prefix, timeoutMs: 300_000, env: c.env() });
  if (r.code !== 0) throw new Error(`jaco ${args.join(' ')}: ${r.code} ${r.stderr}${r.stdout}`);
  return r.stdout;
};

async function drainOnce(name: string, maxUnavailable: number): Promise<{ total: number; moves: number[] }> {
  await cli(['node', 'cordon', 'node-2']);
  await cli(['node', 'cordon', 'node-3']);
  await cli(['node', 'uncordon', 'node-1']);
  await c.apply(`apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  services:
    s:
      image: jaco-demo/busybox:1
      command: [sleep, '3600']
      stopGracePeriod: 1s
      replicas: ${N}
      update: {maxUnavailable: ${maxUnavailable}}
      healthcheck: {test: [CMD, 'true'], interval: 1s, timeout: 10s, retries: 3}
`);
  await eventually(async () => {
    const obs = (await c.observed()).filter((o) => o.status.deployment === name && o.status.node === 'node-1' && replicaRunning(o) && o.status.health === 'healthy');
    return obs.length === N;
  }, { what: `${N} replicas healthy on node-1`, timeoutMs: 120_000 });
  await cli(['node', 'uncordon', 'node-2']);
  await cli(['node', 'uncordon', 'node-3']);
  const t0 = Date.now();
  await cli(['node', 'drain', 'node-1', '--wait', '--timeout', '2m']);
  const total = Date.now() - t0;
  const moves = (await c.store.list<AuditEvent>(keys.audits())).items
    .map((i) => i.value.spec)
    .filter((e) => e.type === 'replica_moved' && e.deployment === name)
    .map((e) => Number(e.payload.durationMs));
  // Leave the cluster clean for the next run: the service's replicas go away with their deployment.
  await deleteDeployments(c.store, [name]);
  await eventually(async () => (await c.desired()).every((d) => d.spec.deployment !== name), { what: 'old replicas removed', timeoutMs: 60_000 });
  return { total, moves };
}

try {
  console.log(`drain of node-1 holding ${N} replicas of one service (3 nodes, fast timings), ${runs} run(s) each`);
  console.log('maxUnavailable  drain total (median)  move duration (median of all moves)  runs');
  for (const mu of [1, N]) {
    const totals: number[] = [];
    const moves: number[] = [];
    for (let r = 0; r < runs; r++) {
      const res = await drainOnce(`b${mu}r${r}`, mu);
      totals.push(res.total);
      moves.push(...res.moves);
    }
    console.log(`${String(mu).padStart(14)}  ${fmt(median(totals)).padStart(20)}  ${fmt(median(moves)).padStart(35)}  ${totals.map(fmt).join(', ')}`);
  }
} finally {
  await c.stop();
}
