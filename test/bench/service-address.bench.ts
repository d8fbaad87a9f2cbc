// Benchmark: what a service's own address costs against reaching its replicas directly. On
// separate hosts (`jaco up --nodes 2`: a namespace and an engine per node, the WireGuard overlay
// between them), a cluster-network service of two busybox httpd replicas, one per node. From
// node-1's namespace, a closed loop of HTTP GETs (a new connection each, as a client without
// keep-alive makes them; loopback and the namespaces' own addresses only; bounded in count):
//   service — its service address (node-1's ingress, HTTP mode, balancing over both replicas);
//   direct  — the replicas' own addresses in turn (one local, one across the overlay).
// Latency per request (p50, p99) and throughput, interleaved rounds so that load drifts hit both.
// Needs the build (npx tsc -p tsconfig.build.json) and the images (scripts/build-images.sh).
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/service-address.bench.ts [requests=2000] [rounds=3] [concurrency=4]
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { keys } from '../../src/api/keys.js';
import type { ReplicaObserved, ServiceAddress } from '../../src/api/types.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const run = promisify(execFile);
const REQUESTS = Number(process.argv[2] ?? 2000);
const ROUNDS = Number(process.argv[3] ?? 3);
const CONCURRENCY = Number(process.argv[4] ?? 4);
const load = () => loadavg()[0]!.toFixed(2);

/** The load generator, run by node in node-1's namespace: prints {ms: [...], wallMs}. */
const LOADER = `
const http = require('node:http');
const [targets, n, conc] = [JSON.parse(process.argv[1]), Number(process.argv[2]), Number(process.argv[3])];
const ms = []; let next = 0; let failed = 0;
const one = (url) => new Promise((resolve) => {
  const t0 = process.hrtime.bigint();
  const req = http.get(url, { agent: false, timeout: 3000 }, (res) => { res.resume(); res.on('end', () => { if (res.statusCode !== 200) failed++; ms.push(Number(process.hrtime.bigint() - t0) / 1e6); resolve(); }); });
  req.on('error', () => { failed++; resolve(); });
  req.on('timeout', () => req.destroy());
});
const loop = async () => { while (next < n) { const i = next++; await one(targets[i % targets.length]); } };
const start = Date.now();
Promise.all(Array.from({ length: conc }, loop)).then(() => console.log(JSON.stringify({ ms, failed, wallMs: Date.now() - start })));
`;

const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

const c = new UpCluster({ nodes: 2, timings: 'production' });
await c.start();
try {
  const pushed = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1', 'jaco/pause:1'], undefined, 120_000);
  if (pushed.code) throw new Error(pushed.stderr);
  await c.apply(`apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: bench }
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      network: cluster
      replicas: 2
      placement: { mode: spread }
      command: ["sh", "-c", "mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w"]
      ports: [{ name: http, containerPort: 8080 }]
`);
  const replicas = await eventually(
    async () => {
      const obs = (await c.store.list<ReplicaObserved>('observed/')).items.map((o) => o.value.status).filter((s) => s.deployment === 'bench' && s.state === 'running' && s.address);
      return obs.length === 2 && new Set(obs.map((o) => o.node)).size === 2 ? obs : undefined;
    },
    { what: 'two replicas running, one per node', timeoutMs: 120_000 },
  );
  const service = (await c.store.get<ServiceAddress>(keys.serviceAddress('bench', 'web')))!.value.spec;
  const direct = replicas.map((r) => `http://${r.address!.ipv4.split('/')[0]}:8080/`);
  const viaService = [`http://${service.ipv4}:8080/`];
  const netns = c.node('node-1').netns;
  const measure = async (targets: string[]) => {
    const { stdout } = await run('nsenter', [`--net=/run/netns/${netns}`, '--', process.execPath, '-e', LOADER, JSON.stringify(targets), String(REQUESTS), String(CONCURRENCY)], { encoding: 'utf8', timeout: 120_000 });
    return JSON.parse(stdout) as { ms: number[]; failed: number; wallMs: number };
  };
  // Until both answer through every path (routing settles a moment after running).
  await eventually(async () => (await measure([...direct, ...viaService]).catch(() => undefined))?.failed === 0, { what: 'every path answering', timeoutMs: 60_000 });
  const all: Record<'service' | 'direct', { ms: number[]; failed: number; rps: number[] }> = { service: { ms: [], failed: 0, rps: [] }, direct: { ms: [], failed: 0, rps: [] } };
  const loads: string[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, targets] of [['direct', direct], ['service', viaService]] as const) {
      loads.push(load());
      const m = await measure(targets);
      all[name].ms.push(...m.ms);
      all[name].failed += m.failed;
      all[name].rps.push((m.ms.length / m.wallMs) * 1000);
    }
  }
  console.log(`service address vs direct: ${ROUNDS} rounds × ${REQUESTS} requests, ${CONCURRENCY} at a time, a new connection each; load ${loads.join(' ')}`);
  for (const [name, m] of Object.entries(all)) {
    console.log(`${name.padEnd(8)} p50 ${q(m.ms, 0.5).toFixed(3)} ms  p99 ${q(m.ms, 0.99).toFixed(3)} ms  ${Math.round(m.rps.reduce((a, b) => a + b, 0) / m.rps.length)} req/s  failed ${m.failed}`);
  }
  const ratio = q(all.service.ms, 0.5) / q(all.direct.ms, 0.5);
  console.log(`service p50 / direct p50 = ${ratio.toFixed(2)} (goal ≤ 1.10)`);
} finally {
  await c.stop();
}
