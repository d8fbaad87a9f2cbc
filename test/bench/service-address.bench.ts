// Benchmark: what a service's own address costs against reaching its replicas directly. On
// separate hosts (`jaco up --nodes 2`: a namespace and an engine per node, the WireGuard overlay
// between them), a cluster-network service of two web-server replicas, one per node. From
// node-1's namespace, Debian's wrk (keep-alive connections, bounded in time; the namespaces' own
// addresses only) against:
//   service — its service address (node-1's ingress, TCP or HTTP mode, balancing over both replicas);
//   direct  — each replica's own address (one local, one across the overlay).
// Latency (p50, p99) and throughput, interleaved rounds so that load drifts hit every path.
// Needs the build (npm run build) and the images (scripts/build-images.sh).
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/service-address.bench.ts [seconds=5] [rounds=3] [connections=4] [server=nginx] [mode=tcp]
// server: nginx (Debian's, keeps connections alive as most servers do) or busybox (httpd closes
// each connection: every request is a new connection on both paths); mode: the port's mode at the
// ingress — tcp (jaco's default) or http (the port named http).
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { keys } from '../../src/api/keys.js';
import type { ReplicaObserved, ServiceAddress } from '../../src/api/types.js';
import { runtimeCommand } from '../../controllers/ingress/haproxy.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const run = promisify(execFile);
const SECONDS = Number(process.argv[2] ?? 5);
const ROUNDS = Number(process.argv[3] ?? 3);
const CONNECTIONS = Number(process.argv[4] ?? 4);
const SERVER = process.argv[5] ?? 'nginx';
const MODE = process.argv[6] ?? 'tcp';
const SERVERS: Record<string, { image: string; command: string }> = {
  nginx: { image: 'jaco-demo/nginx:1', command: "echo ok > /usr/share/nginx/html/index.html && sed -i 's/listen  *80;/listen 8080; access_log off;/' /etc/nginx/conf.d/default.conf && exec nginx -g 'daemon off;'" },
  busybox: { image: 'jaco-demo/busybox:1', command: 'mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w' },
};
const server = SERVERS[SERVER];
if (!server || !['tcp', 'http'].includes(MODE)) throw new Error(`server is one of ${Object.keys(SERVERS).join(', ')}; mode tcp or http`);
const load = () => loadavg()[0]!.toFixed(2);

/** wrk's latency line (`50%  1.23ms`) in ms. */
function wrkMs(out: string, pct: string): number {
  const m = new RegExp(`^\\s*${pct}%\\s+([0-9.]+)(us|ms|s)\\s*$`, 'm').exec(out);
  if (!m) throw new Error(`no ${pct}% line in wrk's output:\n${out}`);
  return Number(m[1]) * ({ us: 0.001, ms: 1, s: 1000 } as Record<string, number>)[m[2]!]!;
}

const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

const c = new UpCluster({ nodes: 2, timings: 'production' });
await c.start();
try {
  const pushed = await c.jaco(['registry', 'push', server.image, 'jaco/pause:1'], undefined, 300_000);
  if (pushed.code) throw new Error(pushed.stderr);
  await c.apply(`apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: bench }
spec:
  services:
    web:
      image: ${server.image}
      network: cluster
      replicas: 2
      placement: { mode: spread }
      command: ["sh", "-c", ${JSON.stringify(server.command)}]
      ports: [{ name: ${MODE === 'http' ? 'http' : 'web'}, containerPort: 8080 }]
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
  const inNode = (...cmd: string[]) => run('nsenter', [`--net=/run/netns/${netns}`, '--', ...cmd], { encoding: 'utf8', timeout: 120_000 });
  // Until every path answers (routing settles a moment after running).
  for (const url of [...direct, ...viaService]) await eventually(async () => (await inNode(process.execPath, '-e', 'fetch(process.argv[1], { signal: AbortSignal.timeout(2000) }).then(async (r) => process.stdout.write(await r.text()), () => process.exit(1))', url).catch(() => ({ stdout: '' }))).stdout.trim() === 'ok', { what: `${url} answering`, timeoutMs: 60_000 });
  /** wrk for SECONDS with CONNECTIONS keep-alive connections: p50, p99 and requests per second. */
  const wrk = async (url: string) => {
    const { stdout } = await inNode('wrk', '-t', '1', '-c', String(CONNECTIONS), '-d', `${SECONDS}s`, '--latency', url);
    const rps = Number(/Requests\/sec:\s+([0-9.]+)/.exec(stdout)?.[1]);
    const errors = /Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)/.exec(stdout)?.[0];
    return { p50: wrkMs(stdout, '50'), p99: wrkMs(stdout, '99'), rps, errors };
  };
  const socket = (await run('find', [c.dataDir, '-name', 'haproxy.sock', '-path', '*node-1*'], { encoding: 'utf8' })).stdout.trim().split('\n')[0];
  if (!socket) throw new Error("node-1's HAProxy runtime socket not found");
  // The service's backend and its two servers in node-1's HAProxy (the replica on node-1 first).
  const stat = async () => {
    const csv = (await runtimeCommand(socket, 'show stat')).split('\n');
    const head = csv[0]!.replace(/^# /, '').split(',');
    return csv.slice(1).filter((l) => l.includes('bench_web')).map((l) => Object.fromEntries(l.split(',').map((v, i) => [head[i]!, v])));
  };
  const servers = (await stat()).filter((f) => f.svname !== 'BACKEND' && f.svname !== 'FRONTEND' && f.svname!.endsWith('_8080'));
  const local = servers.find((f) => f.svname!.includes('node-1'));
  const remote = servers.find((f) => f.svname!.includes('node-2'));
  if (!local || !remote) throw new Error(`the service's servers in node-1's HAProxy: ${servers.map((f) => `${f.pxname}/${f.svname}`).join(', ')}`);
  /** The service address with only one replica in rotation (the other in maintenance, by HAProxy's runtime API). */
  const only = async (keep: Record<string, string> | undefined) => {
    for (const f of [local, remote]) await runtimeCommand(socket, `set server ${f.pxname}/${f.svname} state ${!keep || keep === f ? 'ready' : 'maint'}`);
  };
  // Each service path beside the direct path it is compared with: the same replica, one hop more.
  const paths: [string, string, Record<string, string> | undefined][] = [
    ['direct, local replica', direct[0]!, undefined],
    ['service address → local replica only', viaService[0]!, local],
    ['direct, replica across the overlay', direct[1]!, undefined],
    ['service address → remote replica only', viaService[0]!, remote],
    ['service address (balanced over both)', viaService[0]!, undefined],
  ];
  const got: Record<string, { p50: number[]; p99: number[]; rps: number[]; errors: string[] }> = {};
  const loads: string[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, url, keep] of paths) {
      await only(keep);
      loads.push(load());
      const m = await wrk(url);
      const g = (got[name] ??= { p50: [], p99: [], rps: [], errors: [] });
      g.p50.push(m.p50);
      g.p99.push(m.p99);
      g.rps.push(m.rps);
      if (m.errors) g.errors.push(m.errors);
    }
  }
  await only(undefined);
  const med = (xs: number[]) => q(xs, 0.5);
  console.log(`service address vs direct (${SERVER}, ingress ${MODE} mode; wrk, 1 thread, ${CONNECTIONS} connections, ${SECONDS} s × ${ROUNDS} rounds interleaved; medians of the rounds; load ${loads.join(' ')})`);
  for (const [name, g] of Object.entries(got)) console.log(`${name.padEnd(38)} p50 ${med(g.p50).toFixed(3)} ms  p99 ${med(g.p99).toFixed(3)} ms  ${Math.round(med(g.rps))} req/s${g.errors.length ? `  errors: ${g.errors.join('; ')}` : ''}`);
  // node-1's HAProxy's own view of the service's backend: retries, redispatches, and its average
  // queue, connect, response and total times (ms) over the last requests — where a slow path's time goes.
  for (const f of await stat()) if (f.svname !== 'FRONTEND') console.log(`haproxy ${f.pxname}/${f.svname}: ${['stot', 'econ', 'eresp', 'wretr', 'wredis', 'qtime', 'ctime', 'rtime', 'ttime', 'mode'].map((k) => `${k} ${f[k]}`).join(', ')}`);
  const p50 = (name: string) => med(got[name]!.p50);
  const ratio = (service: string, directName: string) => `${(p50(service) / p50(directName)).toFixed(2)} (${(p50(service) - p50(directName)).toFixed(3)} ms more)`;
  console.log(`service address / direct at p50, the same replica: local ${ratio('service address → local replica only', 'direct, local replica')}, across the overlay ${ratio('service address → remote replica only', 'direct, replica across the overlay')} (goal ≤ 1.10)`);
  console.log(`balanced service p50 / mean of the direct p50s = ${(p50('service address (balanced over both)') / ((p50('direct, local replica') + p50('direct, replica across the overlay')) / 2)).toFixed(2)}`);
} finally {
  await c.stop();
}
