// The dashboard at scale: 100 nodes and 1,000 replicas in a real etcd, `jaco dashboard` (the
// built CLI) serving them, headless Chromium loading the page. Measures the page load until the
// cluster view shows every node (goal ≤ 1 s), the render times of the views, and, while the
// cluster streams changes (every heartbeat every second with new pressure, 50 replica states
// flipping every half second), how long the page takes to answer and to draw. Run with
//   npm run build && npx tsx test/bench/dashboard.bench.ts
// Nodes, heartbeats and observed states are written directly (no agents); the 1,000 desired keys
// and their placement decisions come from the scheduler, run here for the placing and stopped.
// Screenshots of each view at that scale go to test-results/dashboard-bench/.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type DeploymentSpec, type Heartbeat, type Node, type ReplicaDesired, type ReplicaObserved } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import { setRootLogger } from '../../src/observability/log.js';
import { startController } from '../../src/runtime/manager.js';
import type { Store } from '../../src/store/store.js';
import { commitActs } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { JACO_BIN } from '../support/cli.js';
import { launchChromium, outputDir } from '../support/dashboard.js';
import { startTestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';

const NODES = 100;
const SERVICES = 10;
const PER_SERVICE = 100;
const STREAM_MS = 15_000;
setRootLogger(testLogger());

const nodeName = (i: number) => `node-${String(i).padStart(3, '0')}`;

function heartbeat(name: string, i: number, tick: number): Heartbeat {
  const t = new Date().toISOString();
  // Each node its own level, drifting with the tick: some over the 0.85 trigger, most below.
  const cpu = Math.max(0, Math.min(1.2, 0.2 + 0.7 * ((i * 37 + tick * 3) % 100) / 100));
  return { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: t, intervalMs: 600_000, agentVersion: 'bench', dockerUp: true, pressure: { time: t, cpuUtil: cpu, memoryUtil: cpu / 2, replicas: {} } } };
}

async function put(store: Store, entries: [string, unknown][]): Promise<void> {
  const r = await commitActs(store, entries.map(([key, value]) => ({ label: key, ops: [{ op: 'put' as const, key, value }] })));
  if (r.committed.length !== entries.length) throw new Error(`wrote ${r.committed.length} of ${entries.length}`);
}

function observed(d: ReplicaDesired, state: 'running' | 'starting'): ReplicaObserved {
  const s = d.spec;
  return { apiVersion: API_VERSION, kind: 'ReplicaObserved', metadata: { name: s.replica }, status: { replica: s.replica, node: s.node, deployment: s.deployment, service: s.service, state, revision: s.revision, specHash: s.specHash, startedAt: new Date().toISOString(), observedAt: new Date().toISOString() } };
}

async function populate(store: Store): Promise<ReplicaDesired[]> {
  const entries: [string, unknown][] = [];
  for (let i = 1; i <= NODES; i++) {
    const name = nodeName(i);
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 8000, memoryBytes: 32 * 1024 ** 3, gpus: 0 }, agentVersion: 'bench', registeredAt: new Date().toISOString(), address: `127.0.1.${i}` } };
    entries.push([keys.node(name), node], [keys.heartbeat(name), heartbeat(name, i, 0)]);
  }
  await put(store, entries);
  const spec: DeploymentSpec = { services: Object.fromEntries(Array.from({ length: SERVICES }, (_, i) => [`s${i}`, { image: 'jaco-demo/busybox:1', replicas: PER_SERVICE, resources: { cpus: '0.1', memory: '64Mi' } }])) };
  const h = await startController({ store, timings: FAST, log: testLogger(), identity: 'bench' }, schedulerController(FAST));
  await applyDeployments(store, [{ name: 'big', spec, cause: 'apply' }]);
  const total = SERVICES * PER_SERVICE;
  while ((await store.countPrefix(keys.desiredOf())) < total) await new Promise((r) => setTimeout(r, 50));
  await h.stop();
  const desired = (await store.list<ReplicaDesired>(keys.desiredOf())).items.map((x) => x.value);
  await put(store, desired.map((d) => [keys.observed(d.spec.node, d.spec.replica), observed(d, 'running')]));
  return desired;
}

const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const pctl = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!;

const etcd = await startTestEtcd();
const dash = spawn(process.execPath, [JACO_BIN, '--timings', 'fast', 'dashboard', '--addr', '127.0.0.1:0'], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: '/jaco/', JACO_LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'inherit'] });
const browser = await launchChromium();
try {
  const store = etcd.store('/jaco/');
  const desired = await populate(store);
  let out = '';
  dash.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  while (!/jaco dashboard: (\S+)/.test(out)) await new Promise((r) => setTimeout(r, 50));
  const url = /jaco dashboard: (\S+)/.exec(out)![1]!;

  // Page load → every node drawn, three times on a fresh page each (no cache between them).
  const loads: number[] = [];
  const firstRender: number[] = [];
  const clusterRender: number[] = [];
  for (let r = 0; r < 3; r++) {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.error(`page error: ${e.message}`));
    const t0 = performance.now();
    await page.goto(url);
    await page.locator('#nodes tr[data-node]').nth(NODES - 1).waitFor({ timeout: 30_000 }).catch(async (e: unknown) => {
      throw new Error(`${(e as Error).message}\nprobe ${JSON.stringify(await page.evaluate('window.__dash'))}; page: ${(await page.locator('body').innerText()).slice(0, 500)}`);
    });
    loads.push(performance.now() - t0);
    const probe = (await page.evaluate('window.__dash')) as { firstRenderMs: number; lastRenderMs: number };
    firstRender.push(probe.firstRenderMs);
    clusterRender.push(probe.lastRenderMs);
    await ctx.close();
  }

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(url);
  await page.locator('#nodes tr[data-node]').nth(NODES - 1).waitFor();
  const viewMs: Record<string, number> = {};
  for (const v of ['deployments', 'why', 'pressure', 'cluster']) {
    const t0 = performance.now();
    await page.click(`a[data-view="${v}"]`);
    await page.locator(`[data-section="${v}"]`).waitFor({ state: 'visible' });
    viewMs[v] = performance.now() - t0;
    await page.screenshot({ path: `${outputDir('dashboard-bench')}/${v}.png` });
  }
  const replicasShown = await (async () => {
    await page.click('a[data-view="deployments"]');
    return page.locator('[data-replica]').count();
  })();

  // Streaming: heartbeats every second, 50 replica states flipping every 500 ms, for STREAM_MS.
  await page.evaluate(`{
    window.__lag = [];
    let last = performance.now();
    setInterval(() => { const now = performance.now(); window.__lag.push(now - last - 50); last = now; }, 50);
    window.__dash.maxRenderMs = 0;
  }`);
  const before = (await page.evaluate('window.__dash.frames')) as number;
  let stop = false;
  let writes = 0;
  const writer = (async () => {
    for (let tick = 1; !stop; tick++) {
      const batch: [string, unknown][] = desired.slice((tick * 50) % desired.length, ((tick * 50) % desired.length) + 50).map((d) => [keys.observed(d.spec.node, d.spec.replica), observed(d, tick % 2 ? 'starting' : 'running')]);
      if (tick % 2 === 0) for (let i = 1; i <= NODES; i++) batch.push([keys.heartbeat(nodeName(i)), heartbeat(nodeName(i), i, tick)]);
      await put(store, batch);
      writes += batch.length;
      await new Promise((r) => setTimeout(r, 500));
    }
  })();
  // Responsiveness as an operator feels it: click a tab and wait for it drawn, again and again.
  const clicks: number[] = [];
  const t0 = performance.now();
  for (let i = 0; performance.now() - t0 < STREAM_MS; i++) {
    const v = i % 2 ? 'cluster' : 'deployments';
    const c0 = performance.now();
    await page.click(`a[data-view="${v}"]`);
    await page.locator(`[data-section="${v}"]`).waitFor({ state: 'visible' });
    clicks.push(performance.now() - c0);
    await new Promise((r) => setTimeout(r, 200));
  }
  stop = true;
  await writer;
  await page.click('a[data-view="pressure"]');
  await page.screenshot({ path: `${outputDir('dashboard-bench')}/pressure-streamed.png` });
  const frames = ((await page.evaluate('window.__dash.frames')) as number) - before;
  const maxRender = (await page.evaluate('window.__dash.maxRenderMs')) as number;
  const lag = (await page.evaluate('window.__lag')) as number[];
  const bytes = (await page.evaluate(`performance.getEntriesByType('resource').reduce((a, e) => a + (e.transferSize || 0), 0)`)) as number;

  console.log(`dashboard, ${NODES} nodes / ${desired.length} replicas in a real etcd, headless Chromium (load ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}):`);
  console.log(`  page load → all ${NODES} nodes drawn: median ${med(loads).toFixed(0)} ms (runs ${loads.map((x) => x.toFixed(0)).join(', ')} ms); first render at ${med(firstRender).toFixed(0)} ms after navigation; cluster view render ${med(clusterRender).toFixed(0)} ms`);
  console.log(`  switch view → drawn: ${Object.entries(viewMs).map(([k, v]) => `${k} ${v.toFixed(0)} ms`).join(', ')} (deployments view: ${replicasShown} replica rows)`);
  console.log(`  while streaming ${STREAM_MS / 1000} s (${writes} keys written, ${frames} frames pushed): click → view drawn p50 ${pctl(clicks, 50).toFixed(0)} ms, p95 ${pctl(clicks, 95).toFixed(0)} ms, max ${Math.max(...clicks).toFixed(0)} ms (${clicks.length} clicks); longest render ${maxRender.toFixed(0)} ms; main-thread lag p95 ${pctl(lag, 95).toFixed(0)} ms, max ${Math.max(...lag).toFixed(0)} ms`);
  console.log(`  page weight: ${(bytes / 1024).toFixed(0)} KiB transferred (first frame included)`);
} finally {
  await browser.close();
  dash.kill('SIGTERM');
  await etcd.stop();
}
