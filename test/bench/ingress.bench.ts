// Benchmark: failed requests through an ingress while jaco disrupts the replicas behind it, with
// jaco's routing coordination on and off, on real etcd, Docker and HAProxy.
//
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/ingress.bench.ts [--concurrency 4] [--max 20000]
//
// One cluster: `jaco controller all`, three `jaco agent` processes at 127.0.1.1-3, `jaco ingress`
// on node-1. Two deployments of the same busybox httpd service (3 replicas, spread, dynamic port,
// exec health check every 1 s):
//   on  — published on 18280, default deregistration delay (5 s: the replica leaves routing,
//         then its container stops);
//   off — published on 18281, deregistrationDelay 0s: the agent stops containers at once and
//         only HAProxy's own health checks (and its retries/redispatch) stand between a stopped
//         replica and a request.
// Scenarios, each with a bounded request loop (--concurrency loops, loopback only, at most --max
// requests each service) through node-1's ingress on both services at the same time:
//   (a) a rolling update 1 → 2 (both deployments applied together);
//   (b) `jaco node drain node-3 --wait` (a replica of each moves, make-before-break);
//   (e) `jaco delete` and re-apply of another published deployment (the ingress reloads HAProxy
//       twice: its frontend set changes).
// Reported per service: requests, failed requests (non-200 or a network error), and the requests
// HAProxy had to retry or redispatch (its backend's wretr + wredis), with the load average.
// Then, on their own:
//   (c) a drain move of a single-replica service (bench-other): its one replica moves
//       make-before-break; requests to its port only;
//   (d) one replica of bench-on stops answering (its httpd SIGSTOPped: connections are still
//       accepted, so HAProxy's TCP check passes and only jaco's health path can take it out):
//       how long after Docker first reports it unhealthy it is out of routing (goal ≤ 5 s), and
//       whether any request that started after that failed (goal: none).
import { loadavg } from 'node:os';
import { keys } from '../../src/api/keys.js';
import type { Endpoints } from '../../src/api/types.js';
import { runtimeCommand, serverName } from '../../controllers/ingress/haproxy.js';
import { TestCluster } from '../support/cluster.js';
import { backendStat, httpdManifest, ingressSocket, nodeAddress as address, requestLoop, startIngress } from '../support/ingress.js';
import { eventually, sleep } from '../support/wait.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const concurrency = Number(arg('concurrency', '4'));
const max = Number(arg('max', '20000'));
const NODES = ['node-1', 'node-2', 'node-3'];
const SERVICES = { on: 18280, off: 18281 } as const;
type Mode = keyof typeof SERVICES;

const manifest = (mode: Mode, image: string) => httpdManifest({ deployment: `bench-${mode}`, image, published: SERVICES[mode], extra: mode === 'off' ? 'deregistrationDelay: 0s' : '' });
const OTHER_PORT = 18282;

/** Another published service, deleted and applied again in (e). */
const OTHER = httpdManifest({ deployment: 'bench-other', image: 'jaco-demo/busybox:1', published: OTHER_PORT, replicas: 1 });

const until = (what: string, fn: () => Promise<boolean>, timeoutMs: number) => eventually(fn, { what, timeoutMs, intervalMs: 200 });
const load = (url: string) => requestLoop(url, max, concurrency);

async function main(): Promise<void> {
  const c = await new TestCluster({ nodes: 0, controllers: 'all' }).start();
  const stat = (mode: Mode) => backendStat(ingressSocket(c, 'node-1'), `be_bench-${mode}_web_http`);
  try {
    for (const n of NODES) await c.startAgent(n, ['--address', address(n)]);
    const ingress = startIngress(c, 'node-1');
    for (const m of ['on', 'off'] as Mode[]) await c.apply(manifest(m, 'jaco-demo/busybox:1'));
    await c.apply(OTHER);
    for (const m of ['on', 'off'] as Mode[])
      await until(`bench-${m} routed`, async () => ((await c.store.get<Endpoints>(keys.endpoints(`bench-${m}`, 'web')))?.value.spec.addresses.length ?? 0) === 3 && (await fetch(`http://127.0.1.1:${SERVICES[m]}/`)).status === 200, 120_000);
    await sleep(2000);

    const scenario = async (name: string, act: () => Promise<void>) => {
      const before = { on: await stat('on'), off: await stat('off') };
      const loads = { on: load(`http://127.0.1.1:${SERVICES.on}/`), off: load(`http://127.0.1.1:${SERVICES.off}/`) };
      const t0 = Date.now();
      await sleep(1000);
      await act();
      await sleep(2000);
      const res = { on: await loads.on.stop(), off: await loads.off.stop() };
      const after = { on: await stat('on'), off: await stat('off') };
      for (const m of ['on', 'off'] as Mode[]) {
        const r = res[m];
        const kinds = [...new Set(r.failures)].slice(0, 3).join('; ');
        console.log(
          `${name.padEnd(22)} coordination ${m.padEnd(3)}  ${String(r.sent).padStart(6)} requests  ${String(r.failures.length).padStart(4)} failed  ` +
            `${String(after[m].retries - before[m].retries).padStart(4)} retried/redispatched by HAProxy  ${((Date.now() - t0) / 1000).toFixed(0)} s${kinds ? `  (${kinds})` : ''}`,
        );
      }
    };

    console.log(`ingress benchmark: ${concurrency} request loops per service through node-1's ingress; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    await scenario('(a) rolling update 1→2', async () => {
      for (const m of ['on', 'off'] as Mode[]) await c.apply(manifest(m, 'jaco-demo/busybox:2'));
      for (const m of ['on', 'off'] as Mode[]) {
        const r = await c.jaco(['rollout', 'status', `bench-${m}`, '--timeout', '300s']);
        if (r.code !== 0) throw new Error(`rollout of bench-${m}: ${r.stdout}${r.stderr}`);
      }
      await until('every replica routed at r2', async () => {
        for (const m of ['on', 'off'] as Mode[]) if (((await c.store.get<Endpoints>(keys.endpoints(`bench-${m}`, 'web')))?.value.spec.addresses.length ?? 0) !== 3) return false;
        return true;
      }, 120_000);
    });
    await scenario('(b) node drain node-3', async () => {
      const r = await c.jaco(['node', 'drain', 'node-3', '--wait']);
      if (r.code !== 0) throw new Error(`drain: ${r.stdout}${r.stderr}`);
    });
    await scenario('(e) delete+apply other', async () => {
      // Another published service leaves and comes back: two reloads of the ingress's HAProxy.
      const r = await c.jaco(['delete', 'deployment', 'bench-other']);
      if (r.code !== 0) throw new Error(`delete: ${r.stdout}${r.stderr}`);
      await sleep(3000);
      await c.apply(OTHER);
      await until('bench-other routed again', async () => (await fetch(`http://127.0.1.1:${OTHER_PORT}/`)).status === 200, 120_000);
    });
    await singleReplicaMove(c);
    await healthTurns(c);
    console.log(`load average after: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    await ingress.kill();
  } finally {
    await c.stop();
  }
}

/** (c): the one replica of bench-other moves off its node (drain), under load on its port alone. */
async function singleReplicaMove(c: TestCluster): Promise<void> {
  for (const n of NODES) await c.jaco(['node', 'uncordon', n]);
  const at = (await c.store.get<Endpoints>(keys.endpoints('bench-other', 'web')))!.value.spec.addresses[0]!;
  const l = load(`http://127.0.1.1:${OTHER_PORT}/`);
  const t0 = Date.now();
  await sleep(1000);
  const d = await c.jaco(['node', 'drain', at.node, '--wait']);
  if (d.code !== 0) throw new Error(`drain: ${d.stdout}${d.stderr}`);
  await sleep(2000);
  const r = await l.stop();
  const kinds = [...new Set(r.failures)].slice(0, 3).join('; ');
  console.log(`${'(c) 1-replica drain move'.padEnd(22)} coordination on   ${String(r.sent).padStart(6)} requests  ${String(r.failures.length).padStart(4)} failed  ${((Date.now() - t0) / 1000).toFixed(0)} s (from ${at.node})${kinds ? `  (${kinds})` : ''}`);
  await c.jaco(['node', 'uncordon', at.node]);
}

/** (d): one replica of bench-on stops answering; when it leaves routing, and what failed after. */
async function healthTurns(c: TestCluster): Promise<void> {
  const victim = (await c.store.get<Endpoints>(keys.endpoints('bench-on', 'web')))!.value.spec.addresses[0]!;
  const ctr = (await c.containers(victim.node)).find((x) => x.Labels['jaco.dev/replica'] === victim.replica && x.State === 'running');
  if (!ctr) throw new Error(`no running container of ${victim.replica}`);
  const port = victim.hostPorts!.http!;
  const routed = async () =>
    (await runtimeCommand(ingressSocket(c, 'node-1'), 'show servers state be_bench-on_web_http')).split('\n').some((l) => {
      const f = l.split(' ');
      return f[3] === serverName(victim.replica, victim.node, port) && (Number(f[6]) & 0x7f) === 0; // no maint or drain bit
    });
  // Requests with their start times: which failed, and when they started.
  const failedAt: number[] = [];
  let sent = 0;
  let stop = false;
  const loop = async () => {
    while (!stop && sent < max) {
      sent++;
      const start = Date.now();
      try {
        const r = await fetch(`http://127.0.1.1:${SERVICES.on}/`, { signal: AbortSignal.timeout(5000) });
        await r.text();
        if (r.status !== 200) failedAt.push(start);
      } catch {
        failedAt.push(start);
      }
    }
  };
  const loops = Promise.all(Array.from({ length: concurrency }, loop));
  await sleep(1000);
  const exec = await c.docker.getContainer(ctr.Id).exec({ Cmd: ['sh', '-c', 'kill -STOP $(pidof httpd)'] });
  await exec.start({});
  const stoppedAt = Date.now();
  let unhealthyAt: number | undefined;
  let outAt: number | undefined;
  while ((!unhealthyAt || !outAt) && Date.now() < stoppedAt + 60_000) {
    const now = Date.now();
    if (!unhealthyAt && (await c.docker.getContainer(ctr.Id).inspect().catch(() => undefined))?.State.Health?.Status === 'unhealthy') unhealthyAt = now;
    if (!outAt && !(await routed())) outAt = now;
    await sleep(100);
  }
  await sleep(5000);
  stop = true;
  await loops;
  const after = outAt ? failedAt.filter((t) => t >= outAt!).length : NaN;
  console.log(
    `(d) health turns: httpd of ${victim.replica} stopped; Docker unhealthy after ${unhealthyAt ? ((unhealthyAt - stoppedAt) / 1000).toFixed(1) : '?'} s; ` +
      `out of node-1's routing ${unhealthyAt && outAt ? ((outAt - unhealthyAt) / 1000).toFixed(1) : '?'} s after that (goal ≤ 5 s); ` +
      `${sent} requests, ${failedAt.length} failed, ${after} of them started after it left routing (goal 0)`,
  );
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
