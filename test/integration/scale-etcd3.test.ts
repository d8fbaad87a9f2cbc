// Scale scenario 7 in its small form (issue 16; the large form is `SCALE_SCENARIOS=7` of
// test/bench/scale.bench.ts): scenario 2 — 50 hollow nodes, 5 deployments, 500 replicas — through
// a real 3-member etcd, with `jaco controller all` and `jaco hollow-nodes` given all three
// endpoints. Raft replication changes when a write is answered, never what lands: every replica
// runs, none is desired or running on two nodes. Correctness only, not speed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { census, hollowManifest, readyNodes, startHollowCluster, type HollowCluster } from '../support/hollow.js';
import { eventually } from '../support/wait.js';

const NODES = 50;
const TOTAL = 500;

let cluster: HollowCluster;
const logLevel = process.env.JACO_LOG_LEVEL;

beforeAll(async () => {
  process.env.JACO_LOG_LEVEL ??= 'info'; // at debug, 500 placements are thousands of lines
  cluster = await startHollowCluster({ etcdMembers: 3 });
  await cluster.startHollow('hollow', { count: NODES });
}, 90_000);

afterAll(async () => {
  await cluster?.stop();
  if (logLevel === undefined) delete process.env.JACO_LOG_LEVEL;
  else process.env.JACO_LOG_LEVEL = logLevel;
});

describe('hollow nodes through a 3-member etcd (50 nodes, 500 replicas)', () => {
  it('registers every node Ready and runs 500 replicas of 5 deployments, each once', async () => {
    await cluster.withLogs(async () => {
      expect(cluster.endpoint.split(',')).toHaveLength(3);
      await eventually(async () => (await readyNodes(cluster.store)).length === NODES || undefined, { what: `${NODES} nodes Ready` });
      await cluster.apply(hollowManifest(5, TOTAL / 5, { minReadyTime: '0s' }));
      const c = await eventually(
        async () => {
          const c = await census(cluster.store);
          return c.replicas === TOTAL && c.running === TOTAL ? c : undefined;
        },
        { what: `${TOTAL} replicas observed running`, timeoutMs: 30_000, intervalMs: 250 },
      );
      expect(c.desiredTwice).toEqual([]);
      expect(c.runningTwice).toEqual([]);
      expect(c.perNode.size).toBe(NODES);
    });
  });
});
