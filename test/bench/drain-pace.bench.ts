// Benchmark (issue 30): a drain at the container's pace. A node holding 20 replicas of 4 services,
// drained with default budgets (maxUnavailable 1 per service) while request loops hit every
// service through another node's ingress; every container ignores SIGTERM, so each stop waits
// its service's full stop grace (the default 10 s).
//
//   npm run build && flock /tmp/jaco-heavy.lock npx tsx test/bench/drain-pace.bench.ts [--concurrency 2] [--runs 1]
//
// Real etcd, `jaco controller all`, three `jaco agent`s at 127.0.1.1-3 on the local Docker engine,
// `jaco ingress` on node-2 driving a real HAProxy (test/support/cluster.ts, its fast timings).
// Printed: from `jaco node drain node-1` to the drain completed (every old container gone), each
// move's duration (replica_moved audit), the requests sent and failed (non-200 or a network
// error) per service, and the load average. To compare with the rule before issue 30 (a moved
// replica counted as disrupted until its old container is gone), run the same file on a tree
// before that change.
import { loadavg } from 'node:os';
import { keys } from '../../src/api/keys.js';
import type { AuditEvent, Endpoints, NodeDrain } from '../../src/api/types.js';
import { jaco } from '../support/cli.js';
import { TestCluster } from '../support/cluster.js';
import { nodeAddress as address, requestLoop, startIngress } from '../support/ingress.js';
import { eventually, sleep } from '../support/wait.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const concurrency = Number(arg('concurrency', '2'));
const runs = Number(arg('runs', '1'));
const SERVICES = ['a', 'b', 'c', 'd'];
const PER_SERVICE = 5;
const port = (i: number) => 18300 + i;
const fmt = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** A busybox httpd whose shell ignores SIGTERM: every stop runs out the default 10 s grace. */
const manifest = (dep: string) => `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: ${dep} }
spec:
  services:
${SERVICES.map(
  (s, i) => `    ${s}:
      image: jaco-demo/busybox:1
      replicas: ${PER_SERVICE}
      ports:
        - { name: http, containerPort: 80, published: ${port(i)} }
      command: [sh, -c]
      args:
        - >-
          trap "" TERM;
          mkdir -p /tmp/www;
          echo "$JACO_REPLICA" > /tmp/www/index.html;
          httpd -f -p "$JACO_NODE_ADDRESS:$PORT" -h /tmp/www & wait; wait
      healthcheck:
        test: [CMD-SHELL, 'wget -q -O /dev/null "http://$JACO_NODE_ADDRESS:$PORT/"']
        interval: 1s
        timeout: 5s
        retries: 3`,
).join('\n')}
`;

async function main(): Promise<void> {
  const c = await new TestCluster({ nodes: 0, controllers: 'all' }).start();
  const until = (what: string, fn: () => Promise<boolean>, timeoutMs = 180_000) => eventually(fn, { what, timeoutMs, intervalMs: 250 });
  try {
    for (const n of ['node-1', 'node-2', 'node-3']) await c.startAgent(n, ['--address', address(n)]);
    const ingress = startIngress(c, 'node-2');
    console.log(`drain of node-1 holding ${SERVICES.length * PER_SERVICE} replicas of ${SERVICES.length} services (SIGTERM ignored, 10 s grace), ${concurrency} request loops per service through node-2's ingress`);
    const totals: number[] = [];
    for (let r = 0; r < runs; r++) {
      const dep = `pace${r}`;
      for (const n of ['node-2', 'node-3']) await c.jaco(['node', 'cordon', n]);
      await c.jaco(['node', 'uncordon', 'node-1']);
      await c.apply(manifest(dep));
      for (const s of SERVICES)
        await until(`${dep}/${s} routed on node-1`, async () => ((await c.store.get<Endpoints>(keys.endpoints(dep, s)))?.value.spec.addresses.length ?? 0) === PER_SERVICE);
      for (const n of ['node-2', 'node-3']) await c.jaco(['node', 'uncordon', n]);
      await until('every service answers through node-2', async () => (await Promise.all(SERVICES.map((_, i) => fetch(`http://${address('node-2')}:${port(i)}/`).then((x) => x.status === 200, () => false)))).every(Boolean), 60_000);
      await sleep(2000);

      const loads = SERVICES.map((_, i) => requestLoop(`http://${address('node-2')}:${port(i)}/`, 1_000_000, concurrency));
      const load0 = loadavg()[0]!;
      await sleep(1000);
      const t0 = Date.now();
      const d = await jaco(['--timings', c.timings, 'node', 'drain', 'node-1', '--wait', '--timeout', '10m'], { endpoint: c.endpoint, prefix: c.prefix, timeoutMs: 660_000, env: c.env() });
      const total = Date.now() - t0;
      if (d.code !== 0) throw new Error(`drain: ${d.stdout}${d.stderr}`);
      await sleep(2000);
      const res = await Promise.all(loads.map((l) => l.stop()));
      totals.push(total);
      const drain = (await c.store.get<NodeDrain>(keys.drain('node-1')))?.value.status;
      const moves = (await c.store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec).filter((e) => e.type === 'replica_moved' && e.deployment === dep).map((e) => Number(e.payload.durationMs));
      console.log(`run ${r + 1}: drain ${fmt(total)} (${drain?.state}); ${moves.length} moves, median ${fmt(median(moves))}, longest ${fmt(Math.max(...moves))}; load average ${load0.toFixed(2)} → ${loadavg()[0]!.toFixed(2)}`);
      for (const [i, s] of SERVICES.entries()) {
        const kinds = [...new Set(res[i]!.failures)].slice(0, 3).join('; ');
        console.log(`  ${dep}/${s}: ${res[i]!.sent} requests, ${res[i]!.failures.length} failed${kinds ? ` (${kinds})` : ''}`);
      }
      const del = await c.jaco(['delete', 'deployment', dep]);
      if (del.code !== 0) throw new Error(`delete: ${del.stderr}`);
      await until('the deployment gone', async () => (await c.desired()).every((x) => x.spec.deployment !== dep), 120_000);
      await c.jaco(['node', 'drain', 'node-1', '--cancel']).catch(() => undefined);
    }
    console.log(`drain total, median of ${runs}: ${fmt(median(totals))} (goal ≤ 30 s)`);
    await ingress.kill();
  } finally {
    await c.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
