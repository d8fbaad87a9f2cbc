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
import { loadavg } from 'node:os';
import { keys } from '../../src/api/keys.js';
import type { Endpoints } from '../../src/api/types.js';
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

/** Another published service, deleted and applied again in (e). */
const OTHER = httpdManifest({ deployment: 'bench-other', image: 'jaco-demo/busybox:1', published: 18282, replicas: 1 });

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
      await until('bench-other routed again', async () => (await fetch(`http://127.0.1.1:18282/`)).status === 200, 120_000);
    });
    console.log(`load average after: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
    await ingress.kill();
  } finally {
    await c.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
