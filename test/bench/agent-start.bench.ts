// Benchmark: time from 20 desired keys written (one transaction) to all 20 observed running, with
// a real etcd, one real `jaco agent` process (fast timings) and the local Docker engine. Three
// rounds; each ends by deleting the keys and waiting until the containers are gone.
// Needs the build (npm run build).
//   npx tsx test/bench/agent-start.bench.ts [replicas=20] [rounds=3]
import { keys } from '../../src/api/keys.js';
import type { ReplicaObserved } from '../../src/api/types.js';
import { commitActs } from '../../src/store/writer.js';
import { desired, SLEEPER } from '../e2e/agent-fixtures.js';
import { startCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

const N = Number(process.argv[2] ?? 20);
const ROUNDS = Number(process.argv[3] ?? 3);
const NODE = 'node-1';

const c = await startCluster({ nodes: 1, controllers: false });
const results: number[] = [];
try {
  for (let round = 1; round <= ROUNDS; round++) {
    const ds = Array.from({ length: N }, (_, i) => desired(NODE, `bench-r${round}-${i}`, { ...SLEEPER, stopGracePeriod: '0s' }, { service: `r${round}` }));
    const firstRunning = new Map<string, number>();
    const t0 = performance.now();
    await commitActs(c.store, ds.map((d) => ({ ops: [{ op: 'put', key: keys.desired(NODE, d.spec.replica), value: d }] })));
    await eventually(
      async () => {
        const { items } = await c.store.list<ReplicaObserved>(keys.observedOf(NODE));
        const now = performance.now();
        for (const i of items) if (i.value.status?.state === 'running' && !firstRunning.has(i.value.status.replica)) firstRunning.set(i.value.status.replica, now - t0);
        return firstRunning.size >= N;
      },
      { what: `${N} replicas running`, timeoutMs: 120_000, intervalMs: 20 },
    );
    const all = performance.now() - t0;
    const each = [...firstRunning.values()].sort((a, b) => a - b);
    results.push(all);
    console.log(`round ${round}: ${N} replicas written → all observed running in ${(all / 1000).toFixed(2)} s (first ${(each[0]! / 1000).toFixed(2)} s, median ${(each[Math.floor(N / 2)]! / 1000).toFixed(2)} s)`);
    await commitActs(c.store, ds.map((d) => ({ ops: [{ op: 'delete', key: keys.desired(NODE, d.spec.replica) }] })));
    await eventually(async () => (await c.containers(NODE)).length === 0 && (await c.store.countPrefix(keys.observedOf(NODE))) === 0, { what: 'containers removed', timeoutMs: 120_000 });
  }
  const sorted = [...results].sort((a, b) => a - b);
  console.log(`median of ${ROUNDS} rounds: ${(sorted[Math.floor(ROUNDS / 2)]! / 1000).toFixed(2)} s for ${N} replicas`);
} finally {
  await c.stop();
}
