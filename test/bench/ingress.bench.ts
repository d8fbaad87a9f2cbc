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
import { join } from 'node:path';
import { parseStat, runtimeCommand } from '../../controllers/ingress/haproxy.js';
import { keys } from '../../src/api/keys.js';
import type { Endpoints } from '../../src/api/types.js';
import { TestCluster } from '../support/cluster.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const concurrency = Number(arg('concurrency', '4'));
const max = Number(arg('max', '20000'));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const NODES = ['node-1', 'node-2', 'node-3'];
const address = (node: string) => `127.0.1.${node.split('-')[1]}`;
const SERVICES = { on: 18280, off: 18281 } as const;
type Mode = keyof typeof SERVICES;

const manifest = (mode: Mode, image: string) => `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: bench-${mode} }
spec:
  services:
    web:
      image: ${image}
      replicas: 3
      placement: { mode: spread }
      ports:
        - { name: http, containerPort: 80, published: ${SERVICES[mode]} }
      ${mode === 'off' ? 'deregistrationDelay: 0s' : ''}
      command: [sh, -c]
      args:
        - >-
          trap "exit 0" TERM;
          mkdir -p /tmp/www;
          echo "$JACO_REPLICA r$JACO_REVISION" > /tmp/www/index.html;
          httpd -f -p "$JACO_NODE_ADDRESS:$PORT" -h /tmp/www & wait
      healthcheck:
        test: [CMD-SHELL, 'wget -q -O /dev/null "http://$JACO_NODE_ADDRESS:$PORT/"']
        interval: 1s
        timeout: 5s
        retries: 3
      stopGracePeriod: 5s
`;

/** Another published service, deleted and applied again in (e). */
const OTHER = manifest('on', 'jaco-demo/busybox:1').replace('bench-on', 'bench-other').replace('18280', '18282').replace('replicas: 3', 'replicas: 1');

async function until(what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await fn().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

function load(url: string) {
  let stop = false;
  let sent = 0;
  const failures: string[] = [];
  const loop = async () => {
    while (!stop && sent < max) {
      sent++;
      try {
        const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
        await r.text();
        if (r.status !== 200) failures.push(`HTTP ${r.status}`);
      } catch (e) {
        failures.push((e as Error).message);
      }
    }
  };
  const done = Promise.all(Array.from({ length: concurrency }, loop));
  return {
    async stop() {
      stop = true;
      await done;
      return { sent, failures };
    },
  };
}

async function main(): Promise<void> {
  const c = await new TestCluster({ nodes: 0, controllers: 'all' }).start();
  const socket = join(c.logDir, 'ingress', 'node-1', 'haproxy.sock');
  const stat = async (mode: Mode) => parseStat(await runtimeCommand(socket, 'show stat')).find((s) => s.server === 'BACKEND' && s.backend === `be_bench-${mode}_web_http`)!;
  try {
    for (const n of NODES) await c.startAgent(n, ['--address', address(n)]);
    const ingress = c.spawn('ingress-node-1', ['ingress', '--node', 'node-1', '--data-dir', join(c.logDir, 'ingress'), '--metrics-addr', '127.0.0.1:0']);
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
