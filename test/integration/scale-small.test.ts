// The scale scenarios in their small form (issue 16; the large form is test/bench/scale.bench.ts):
// 50 hollow nodes in two `jaco hollow-nodes` processes, real etcd, real `jaco controller all`,
// 500 replicas — scenarios 1 (register), 2 (place), 3 (idle), 5 (rolling update, drain), 6 (nodes
// lost) and 4 (scheduler failover), in that order on one cluster; 7 (a 3-member etcd) is
// scale-etcd3.test.ts. It asserts correctness — every replica running, none placed or running
// twice, nothing but heartbeats and the clock beacon written while idle — not speed. Fast timings: a lost node is
// re-placed ~6 s after its agents are killed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Endpoints, NodeDrain } from '../../src/api/types.js';
import { jaco } from '../support/cli.js';
import type { Proc } from '../support/cluster.js';
import { census, hollowManifest, readyNodes, startHollowCluster, usage, watchRunning, type HollowCluster } from '../support/hollow.js';
import { eventually } from '../support/wait.js';

const NODES = 50;
const LOST = 5;
const DEPLOYMENTS = 5;
const REPLICAS = 100;
const TOTAL = DEPLOYMENTS * REPLICAS;
/** The idle window of scenario 3 (heartbeats every second with fast timings). */
const IDLE_MS = 4_000;

let cluster: HollowCluster;
let lost: Proc;
const logLevel = process.env.JACO_LOG_LEVEL;

beforeAll(async () => {
  // The controllers log at info: at debug, 500 placements are thousands of lines.
  process.env.JACO_LOG_LEVEL ??= 'info';
  cluster = await startHollowCluster();
  // Two processes: the second one's nodes are the ones lost below (SIGKILL: leases lapse, as a host's would).
  await Promise.all([
    cluster.startHollow('hollow', { count: NODES - LOST }),
    cluster.startHollow('lost', { count: LOST, first: NODES - LOST + 1 }).then((p) => (lost = p)),
  ]);
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
  if (logLevel === undefined) delete process.env.JACO_LOG_LEVEL;
  else process.env.JACO_LOG_LEVEL = logLevel;
});

/** Waits until every one of the replicas runs, then checks that none is desired or running twice. */
async function allRunning(what: string, live?: ReadonlySet<string>, total = TOTAL) {
  const c = await eventually(
    async () => {
      const c = await census(cluster.store, live);
      return c.replicas === total && c.running === total ? c : undefined;
    },
    { what, timeoutMs: 30_000, intervalMs: 250 },
  ).catch(async (e: Error) => {
    const c = await census(cluster.store, live);
    throw new Error(`${e.message}: ${c.replicas} replicas, ${c.running} running; not running: ${c.notRunning.slice(0, 10).join(', ')}`);
  });
  expect(c.desiredTwice).toEqual([]);
  expect(c.runningTwice).toEqual([]);
  return c;
}

/** Keys written (put or deleted) under the cluster prefix during `ms`. */
async function writesDuring(ms: number): Promise<string[]> {
  const written: string[] = [];
  const w = await cluster.store.ns.watch().prefix('').create();
  w.on('data', (res) => {
    for (const e of res.events ?? []) written.push(e.kv.key.toString()); // a namespace's watch gives keys without its prefix
  });
  await new Promise((r) => setTimeout(r, ms));
  await w.cancel();
  return written;
}

/** What an idle cluster still writes every status interval: each agent's heartbeat and the controllers' clock beacon (clock skew, docs/node-agent.md). */
const PERIODIC = (k: string) => k.startsWith(keys.heartbeat('')) || k === keys.clock();
const notPeriodic = (k: string) => !PERIODIC(k);

describe('jaco hollow-nodes', () => {
  it('has --help, and refuses a bad flag with exit 1 before touching etcd', async () => {
    const help = await jaco(['hollow-nodes', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--start-latency');
    const bad = await jaco(['hollow-nodes', '--count', '10', '--fail-rate', '2'], { endpoint: 'http://127.0.0.1:1' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--fail-rate: "2" is not a share from 0 to 1');
  });
});

describe('hollow nodes at small scale (50 nodes, 500 replicas)', () => {
  it('registers every hollow node Ready', async () => {
    const ready = await eventually(async () => ((await readyNodes(cluster.store)).length === NODES ? readyNodes(cluster.store) : undefined), { what: `${NODES} nodes Ready` });
    expect(ready.filter((n) => n.startsWith('hollow-'))).toHaveLength(NODES);
    expect(await cluster.store.countPrefix(keys.nodes())).toBe(NODES);
  });

  it('runs 500 replicas of 5 deployments, each once, spread over the nodes', async () => {
    await cluster.withLogs(async () => {
      await cluster.apply(hollowManifest(DEPLOYMENTS, REPLICAS));
      const c = await allRunning('500 replicas observed running');
      expect(c.perNode.size).toBe(NODES);
    });
  });

  it('idles: nothing but heartbeats and the clock beacon is written, and the controller process stays small (scenario 3)', async () => {
    await cluster.withLogs(async () => {
      // Settled first: every replica ready and routed (its minimum ready time, 1 s, passed), and
      // the last passes after that (statuses) landed.
      await eventually(
        async () => {
          const { items } = await cluster.store.list<Endpoints>(keys.endpointsAll());
          return items.reduce((n, i) => n + i.value.spec.addresses.length, 0) === TOTAL || undefined;
        },
        { what: `${TOTAL} replicas in the endpoints`, timeoutMs: 20_000, intervalMs: 250 },
      );
      let last: string[] = [];
      await eventually(async () => (last = (await writesDuring(1_000)).filter(notPeriodic)).length === 0, { what: 'no write but heartbeats and the clock beacon for 1 s', timeoutMs: 20_000, intervalMs: 0 }).catch((e: Error) => {
        throw new Error(`${e.message}; written in the last second: ${[...new Set(last)].slice(0, 20).join(', ')}`);
      });
      const pid = cluster.procs.find((p) => p.name.startsWith('controllers'))!.child.pid!;
      const a = usage(pid);
      const t0 = Date.now();
      const written = await writesDuring(IDLE_MS);
      const b = usage(pid);
      const seconds = (Date.now() - t0) / 1000;
      console.log(`idle ${seconds.toFixed(1)} s: ${written.length} keys written (heartbeats); controller process ${((100 * (b.cpuS - a.cpuS)) / seconds).toFixed(1)} % of a core, RSS ${(b.rss / 2 ** 20).toFixed(0)} MiB`);
      expect(written.filter(notPeriodic)).toEqual([]);
      // Heartbeats every status interval (1 s here) from each of the 50 nodes and the controllers'
      // one clock beacon, and no more.
      expect(written.length).toBeGreaterThan(0);
      expect(written.length).toBeLessThanOrEqual((NODES + 1) * (Math.ceil(seconds) + 1));
      expect(written.filter((k) => k === keys.clock()).length).toBeLessThanOrEqual(Math.ceil(seconds) + 1);
      // Loose bounds (a shared machine): an idle controller process is nowhere near a core or a GiB.
      expect((b.cpuS - a.cpuS) / seconds).toBeLessThan(0.5);
      expect(b.rss).toBeLessThan(2 ** 30);
    });
  });

  it('rolls a 100-replica deployment 10 at a time: all at the new spec, never fewer than 90 running (scenario 5)', async () => {
    await cluster.withLogs(async () => {
      const running = await watchRunning(cluster, (_n, r, st) => r.startsWith('scale-0-') && st.state === 'running');
      try {
        expect(running.count()).toBe(REPLICAS);
        await cluster.apply(hollowManifest(1, REPLICAS, { minReadyTime: '0s', parallelism: 10 }).replace('hollow/app:1', 'hollow/app:2'));
        await eventually(
          async () => {
            const desired = (await cluster.desired()).filter((d) => d.spec.deployment === 'scale-0');
            return desired.length === REPLICAS && desired.every((d) => d.spec.template.image === 'hollow/app:2') || undefined;
          },
          { what: 'every replica of scale-0 desired at hollow/app:2', timeoutMs: 30_000, intervalMs: 250 },
        );
        await allRunning('500 replicas running, scale-0 at its new spec');
        expect(running.count()).toBe(REPLICAS); // each copy counted once, from the list and the watch alike
        expect(running.min()).toBeGreaterThanOrEqual(REPLICAS - 10);
      } finally {
        await running.stop();
      }
    });
  });

  it('replaces the stateless replicas of 5 lost nodes (agents killed) on the others', async () => {
    await cluster.withLogs(async () => {
      const lostNodes = new Set(Array.from({ length: LOST }, (_, k) => `hollow-${String(NODES - LOST + 1 + k).padStart(4, '0')}`));
      const before = await census(cluster.store);
      expect([...lostNodes].every((n) => (before.perNode.get(n) ?? 0) > 0)).toBe(true);
      await lost.kill('SIGKILL');
      const live = new Set((await readyNodes(cluster.store)).filter((n) => !lostNodes.has(n)));
      await eventually(async () => {
        const c = await census(cluster.store);
        return [...lostNodes].every((n) => !c.perNode.has(n));
      }, { what: 'no replica left on the lost nodes', timeoutMs: 30_000, intervalMs: 250 });
      await allRunning('500 replicas running again on the 45 nodes left', live);
    });
  });

  it('drains one node make-before-break: its replicas move and all keep running', async () => {
    await cluster.withLogs(async () => {
      const node = 'hollow-0001';
      const had = (await census(cluster.store)).perNode.get(node) ?? 0;
      expect(had).toBeGreaterThan(0);
      const r = await cluster.jaco(['node', 'drain', node]);
      expect(r.code, r.stderr).toBe(0);
      const drain = await eventually(async () => {
        const d = (await cluster.store.get<NodeDrain>(keys.drain(node)))?.value;
        return d?.status?.state === 'completed' ? d : undefined;
      }, { what: `drain of ${node} completed`, timeoutMs: 30_000, intervalMs: 250 });
      expect(drain.status?.state).toBe('completed');
      // The killed nodes' observed keys stay as their agents last wrote them: count live nodes only.
      const c = await allRunning('500 replicas running after the drain', new Set(await readyNodes(cluster.store)));
      expect(c.perNode.has(node)).toBe(false);
    });
  });

  it('a standby takes over when the scheduler leader is killed (kill -9), and places what was applied around the kill (scenario 4)', async () => {
    await cluster.withLogs(async () => {
      await cluster.startControllers('all');
      const candidates = await eventually(async () => {
        const { kvs } = await cluster.store.listRaw(keys.leaders('scheduler'));
        return kvs.length === 2 ? kvs : undefined;
      }, { what: 'two scheduler candidates' });
      const leader = [...candidates].sort((x, y) => Number(x.create_revision) - Number(y.create_revision))[0]!;
      const pid = Number(leader.value.toString().split('/')[1]);
      const victim = cluster.procs.find((p) => p.child.pid === pid && !p.exited())!;
      expect(victim, `the leader's process (pid ${pid})`).toBeDefined();
      // One deployment applied and the leader killed at once: whatever it placed before dying,
      // the standby places the rest. A second applied after the kill: the standby places it all.
      await cluster.apply(hollowManifest(1, REPLICAS, { first: DEPLOYMENTS }));
      await victim.kill('SIGKILL');
      await cluster.apply(hollowManifest(1, REPLICAS, { first: DEPLOYMENTS + 1 }));
      // The killed nodes' observed keys stay as their agents last wrote them: count live nodes only.
      await allRunning('700 replicas running after the failover', new Set(await readyNodes(cluster.store)), TOTAL + 2 * REPLICAS);
      const { kvs } = await cluster.store.listRaw(keys.leaders('scheduler'));
      expect(kvs.map((kv) => Number(kv.value.toString().split('/')[1]))).not.toContain(pid);
    });
  });

  it('runs cluster-network replicas: each its own address, in a sandbox, running', async () => {
    await cluster.withLogs(async () => {
      const running = await watchRunning(cluster, (_n, r, st) => r.startsWith('net-0-') && st.state === 'running');
      try {
        await cluster.apply(hollowManifest(1, 20, { prefix: 'net', minReadyTime: '0s', network: 'cluster' }));
        await eventually(async () => running.count() === 20 || undefined, { what: '20 cluster-network replicas running', timeoutMs: 30_000, intervalMs: 250 }).catch(async (e: Error) => {
          const stuck = (await cluster.observed()).filter((o) => o.status.deployment === 'net-0' && o.status.state !== 'running');
          throw new Error(`${e.message}; not running: ${stuck.slice(0, 3).map((o) => `${o.status.replica} ${o.status.state} ${o.status.code ?? ''} ${o.status.details ?? ''}`).join('; ')}`);
        });
        const addresses = (await cluster.desired()).filter((d) => d.spec.deployment === 'net-0').map((d) => d.spec.address?.ipv4);
        expect(addresses).toHaveLength(20);
        expect(new Set(addresses).size).toBe(20);
      } finally {
        await running.stop();
      }
    });
  });
});
