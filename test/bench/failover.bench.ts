// Leader failover with production timings: two `jaco controller all` copies (one leads the
// scheduler, one stands by), 3 agents, a real etcd — as `jaco up` runs them, without --timings
// fast. Run with
//   npm run build && scripts/build-images.sh && npx tsx test/bench/failover.bench.ts
// 20 times: kill -9 the scheduler's leader, then scale a deployment (the apply is acknowledged by
// etcd, so only a scheduler can act on it); measure from the kill until the standby commits its
// first write (the new replica's desired key, seen through a watch). Goal: ≤ leader lease TTL + 2 s
// (10 + 2 s). The killed copy is started again as the next standby. Exits 1 above the goal.
import { loadavg } from 'node:os';
import { keys } from '../../src/api/keys.js';
import { PRODUCTION } from '../../src/timings.js';
import { startCluster, type Proc } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

const KILLS = Number(process.env.FAILOVER_KILLS ?? 20);
const GOAL_MS = (PRODUCTION.leaderTtlSec + 2) * 1000;

const app = (replicas: number) => `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: fo
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      replicas: ${replicas}
      command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']
      update: {minReadyTime: 0s}
`;

const c = await startCluster({ nodes: 3, controllers: 'all', timings: 'production' });
let failed = false;
try {
  await c.startControllers('all');
  const candidates = () => c.store.countPrefix(keys.leaders('scheduler'));
  const leader = async (): Promise<Proc> => {
    const { kvs } = await c.store.listRaw(keys.leaders('scheduler'));
    const first = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0]!;
    const pid = Number(first.value.toString().split('/')[1]);
    const p = c.procs.find((x) => x.child.pid === pid && !x.exited());
    if (!p) throw new Error(`the scheduler leader (pid ${pid}) is not one of the bench's processes`);
    return p;
  };
  let replicas = 1;
  await c.apply(app(replicas));
  const desiredCount = async () => (await c.desired()).filter((d) => d.spec.deployment === 'fo').length;
  await eventually(async () => (await desiredCount()) === replicas, { what: 'fo placed', timeoutMs: 60_000 });

  const times: number[] = [];
  const loads: number[] = [];
  for (let i = 0; i < KILLS; i++) {
    await eventually(async () => (await candidates()) === 2, { what: 'two scheduler candidates', timeoutMs: 60_000 });
    const victim = await leader();
    // The standby's first write: any desired key of fo created or deleted from now on.
    const watcher = await c.store.ns.watch().prefix(keys.desiredOf()).create();
    let wrote: number | undefined;
    const firstWrite = new Promise<void>((resolve) => {
      const hit = (kv: { key: Buffer }) => {
        if (wrote === undefined && kv.key.toString().includes('/fo-web-')) {
          wrote = Date.now();
          resolve();
        }
      };
      watcher.on('put', hit).on('delete', hit);
    });
    loads.push(loadavg()[0]!);
    const t0 = Date.now();
    await victim.kill('SIGKILL');
    replicas = replicas === 1 ? 2 : 1;
    await c.apply(app(replicas)); // acknowledged: only the next leader can act on it
    await Promise.race([firstWrite, new Promise((r) => setTimeout(r, 60_000))]);
    await watcher.cancel();
    if (wrote === undefined) throw new Error(`kill ${i + 1}: no write by the standby within 60 s`);
    times.push(wrote - t0);
    console.log(`kill ${String(i + 1).padStart(2)}: standby's first write ${((wrote - t0) / 1000).toFixed(2)} s after kill -9 of pid ${victim.child.pid}`);
    await eventually(async () => (await desiredCount()) === replicas, { what: `fo at ${replicas}`, timeoutMs: 60_000 });
    await c.startControllers('all'); // the next standby
  }
  const sorted = [...times].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  const s = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
  console.log(
    `leader failover, production timings (leader lease ${PRODUCTION.leaderTtlSec} s), ${times.length} kills: kill -9 → standby's first write median ${s(at(0.5))}, p95 ${s(at(0.95))}, max ${s(sorted[sorted.length - 1]!)} (goal ≤ ${s(GOAL_MS)}); load ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`,
  );
  failed = sorted[sorted.length - 1]! > GOAL_MS;
} finally {
  await c.stop();
}
process.exit(failed ? 1 : 0);
