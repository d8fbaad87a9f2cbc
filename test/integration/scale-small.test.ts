// The scale scenarios in their small form (issue 16; the large form is test/bench/scale.bench.ts):
// 50 hollow nodes in two `jaco hollow-nodes` processes, real etcd, real `jaco controller all`,
// 500 replicas. It asserts correctness — every replica running, none placed or running twice —
// not speed. Fast timings: a lost node is re-placed ~6 s after its agents are killed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { NodeDrain } from '../../src/api/types.js';
import { jaco } from '../support/cli.js';
import type { Proc } from '../support/cluster.js';
import { census, hollowManifest, readyNodes, startHollowCluster, type HollowCluster } from '../support/hollow.js';
import { eventually } from '../support/wait.js';

const NODES = 50;
const LOST = 5;
const DEPLOYMENTS = 5;
const REPLICAS = 100;
const TOTAL = DEPLOYMENTS * REPLICAS;

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
async function allRunning(what: string, live?: ReadonlySet<string>) {
  const c = await eventually(
    async () => {
      const c = await census(cluster.store, live);
      return c.replicas === TOTAL && c.running === TOTAL ? c : undefined;
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
});
