// Node loss with production timings on real containers: 3 agents (simulated nodes on the local
// Docker engine), `jaco controller all`, a real etcd — as `jaco up` runs them, without --timings
// fast. Run with
//   npm run build && scripts/build-images.sh && npx tsx test/bench/node-loss.bench.ts
// It measures, from SIGSTOP of an agent, until every stateless replica of its node is running and
// ready on another node (goal ≤ 15 s), three times; and checks that a 5 s agent pause and a 5 s
// etcd stall replace nothing (exits 1 if they do).
import { keys } from '../../src/api/keys.js';
import { replicaReady } from '../../src/api/readiness.js';
import type { AuditEvent, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually, sleep } from '../support/wait.js';

const app = `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: loss
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      replicas: 6
      command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']
      update: {minReadyTime: 0s}
`;

async function replicasOn(c: TestCluster): Promise<Map<string, { node: string; ready: boolean }>> {
  const [desired, observed] = await Promise.all([c.store.list<ReplicaDesired>(keys.desiredOf()), c.store.list<ReplicaObserved>(keys.observedOf())]);
  const obs = new Map(observed.items.map((o) => [o.key.slice('observed/'.length), o.value]));
  const now = Date.now();
  return new Map(desired.items.map(({ value: d }) => [d.spec.replica, { node: d.spec.node, ready: replicaReady(d, obs.get(`${d.spec.node}/${d.spec.replica}`), now) }]));
}

const nodeLost = async (c: TestCluster) => (await c.store.list<AuditEvent>(keys.audits())).items.filter((a) => a.value.spec.type === 'node_lost').length;

async function allReady(c: TestCluster): Promise<void> {
  await eventually(async () => {
    const rs = await replicasOn(c);
    return rs.size === 6 && [...rs.values()].every((r) => r.ready);
  }, { what: '6 replicas ready', timeoutMs: 120_000, intervalMs: 200 });
}

/** A pause that must change nothing: after it, and a grace's worth of waiting, no replica moved. */
async function harmless(c: TestCluster, what: string, pause: () => Promise<void>): Promise<boolean> {
  const before = await replicasOn(c);
  const lost = await nodeLost(c);
  await pause();
  await sleep(15_000);
  const after = await replicasOn(c);
  const moved = [...before].filter(([id, r]) => after.get(id)?.node !== r.node).map(([id]) => id);
  const ok = moved.length === 0 && (await nodeLost(c)) === lost;
  console.log(`${what}: ${ok ? 'nothing replaced' : `REPLACED ${moved.join(', ')}`}`);
  return ok;
}

const c = await startCluster({ nodes: 3, controllers: 'all', timings: 'production' });
let failed = false;
try {
  await c.apply(app);
  await allReady(c);

  failed ||= !(await harmless(c, 'agent of node-3 paused 5 s (SIGSTOP, SIGCONT)', async () => {
    const p = c.agent('node-3')!.child;
    p.kill('SIGSTOP');
    await sleep(5_000);
    p.kill('SIGCONT');
  }));
  failed ||= !(await harmless(c, 'etcd stalled 5 s (SIGSTOP, SIGCONT)', async () => {
    const p = c.etcd.member.process;
    p.kill('SIGSTOP');
    await sleep(5_000);
    p.kill('SIGCONT');
  }));

  const times: number[] = [];
  for (const node of ['node-1', 'node-2', 'node-3']) {
    await allReady(c);
    const victims = [...(await replicasOn(c))].filter(([, r]) => r.node === node).map(([id]) => id);
    const agent = c.agent(node)!.child;
    agent.kill('SIGSTOP');
    const t0 = Date.now();
    await eventually(async () => {
      const rs = await replicasOn(c);
      return victims.every((id) => rs.get(id)?.node !== node && rs.get(id)?.ready);
    }, { what: `${victims.join(', ')} ready off ${node}`, timeoutMs: 120_000, intervalMs: 100 });
    times.push(Date.now() - t0);
    console.log(`agent of ${node} stopped (SIGSTOP): its ${victims.length} replica(s) ready on other nodes after ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    agent.kill('SIGCONT');
    // It comes back, finds its replicas gone, and stops their stale containers.
    await eventually(async () => (await c.containers(node)).filter((x) => x.State === 'running').length === [...(await replicasOn(c)).values()].filter((r) => r.node === node).length, {
      what: `${node} back, its stale containers stopped`,
      timeoutMs: 120_000,
    });
  }
  const sorted = [...times].sort((a, b) => a - b);
  console.log(`node loss, production timings (liveness lease 8 s, keepalive 2 s, grace 4 s): replicas ready elsewhere after median ${(sorted[1]! / 1000).toFixed(1)} s (runs: ${times.map((t) => (t / 1000).toFixed(1)).join(', ')} s; goal ≤ 15 s)`);
} finally {
  await c.stop();
}
process.exit(failed ? 1 : 0);
