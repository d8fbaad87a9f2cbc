// etcd replaced under a running cluster (issue 29, items 1-3): real `jaco controller all` and
// `jaco hollow-nodes` processes on a real etcd that is restarted empty (a new data directory) and
// later restored from a snapshot taken earlier. Before, the controllers resumed watching from a
// revision in the new store's future and heard nothing while /healthz said ok: nothing applied
// after the wipe was ever placed. Now each process notices, /healthz fails until its cache holds
// the new store, and the cluster works on what the store holds — a lease-less election key that
// a copy left in it included.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { Store } from '../../src/store/store.js';
import type { Proc } from '../support/cluster.js';
import { census, hollowManifest, startHollowCluster, type HollowCluster } from '../support/hollow.js';
import { eventually } from '../support/wait.js';

const NODES = 4;
let cluster: HollowCluster;
let controllers: Proc;
let hollow: Proc;

beforeAll(async () => {
  cluster = await startHollowCluster();
  controllers = cluster.procs.find((p) => p.name.startsWith('controllers'))!;
  hollow = await cluster.startHollow('hollow', { count: NODES });
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

/** The address a process logged for its /healthz (or /metrics), from the line naming it. */
function served(p: Proc, line: string, path: '/healthz' | '/metrics'): string {
  const l = readFileSync(p.logFile, 'utf8').split('\n').findLast((x) => x.includes(line))!;
  return /"metrics":"([^"]+)\/metrics"/.exec(l)![1]! + path;
}

interface Health {
  ok: boolean;
  store?: { count: number; last?: { reason: string } };
  controllers?: Record<string, { leader: boolean; staleElectionKeys?: { key: string; why: string }[] }>;
  containers?: number;
}
const health = async (url: string): Promise<{ status: number; body: Health }> => {
  const r = await fetch(url);
  return { status: r.status, body: (await r.json()) as Health };
};

/** Every /healthz status the controllers answer while `fn` runs (sampled every 50 ms). */
async function healthDuring(url: string, fn: () => Promise<void>): Promise<number[]> {
  const seen: number[] = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      seen.push(await health(url).then((h) => h.status, () => 0));
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    await fn();
  } finally {
    on = false;
    await loop;
  }
  return seen;
}

/** Waits until every replica of the store runs, and says how many there are. */
async function allRunning(what: string, replicas: number): Promise<void> {
  await eventually(
    async () => {
      const c = await census(cluster.store);
      return c.replicas === replicas && c.running === replicas && !c.desiredTwice.length;
    },
    { what, timeoutMs: 30_000, intervalMs: 250 },
  );
}

describe('etcd replaced under a running cluster', () => {
  it('restarted empty, with a lease-less election key copied in: noticed, /healthz fails then recovers, a deployment applied after the wipe is placed', () =>
    cluster.withLogs(async () => {
      await cluster.apply(hollowManifest(1, 6, { prefix: 'before' }));
      await allRunning('the deployment before the wipe running', 6);
      const url = served(controllers, 'controllers running', '/healthz');
      expect((await health(url)).body.store).toMatchObject({ count: 0 });

      const seen = await healthDuring(url, () =>
        cluster.etcd.replace!({
          // As a copy without leases leaves it: the first key of the scheduler's election, bound to nothing.
          seed: async (endpoint) => {
            const s = new Store({ endpoints: endpoint, prefix: cluster.prefix });
            await s.ns.put(`${keys.leaders('scheduler')}0`).value('copied without its lease').exec();
            s.close();
          },
        }),
      );
      const back = await eventually(
        async () => {
          const h = await health(url);
          return h.status === 200 && (h.body.store?.count ?? 0) >= 1 ? h.body : undefined;
        },
        { what: 'the controllers healthy on the new store', timeoutMs: 30_000 },
      );
      expect(seen).toContain(503);
      expect(back.store!.last!.reason).toBe('revision_backwards');

      // Work applied to the new store is done: placed (the scheduler leads past the stale key) and run by the hollow agents.
      await cluster.apply(hollowManifest(1, 4, { prefix: 'after' }));
      await allRunning('the deployment applied after the wipe running', 4);
      const scheduler = (await health(url)).body.controllers!.scheduler!;
      expect(scheduler.leader).toBe(true);
      expect(scheduler.staleElectionKeys).toMatchObject([{ key: `${keys.leaders('scheduler')}0`, why: 'bound to no lease' }]);
      // The agents registered their nodes again (each at its next heartbeat: the replicas may all
      // run before the last one has), and run what the new store holds: nothing of before.
      await eventually(async () => (await cluster.store.list(keys.nodes())).items.length === NODES, { what: `all ${NODES} nodes registered again` });
      const fleet = served(hollow, 'hollow nodes running', '/healthz');
      await eventually(async () => (await health(fleet)).body.containers === 4, { what: 'the hollow nodes running the new store’s 4 replicas only' });
      expect(readFileSync(hollow.logFile, 'utf8')).not.toMatch(/was removed from the cluster/);
    }));

  it('restored from a snapshot taken earlier: every process holds what the snapshot holds', () =>
    cluster.withLogs(async () => {
      await cluster.apply(hollowManifest(1, 2, { prefix: 'kept' }));
      await allRunning('kept running', 6);
      const snapshot = await cluster.etcd.snapshot!();
      // Undone by the restore: a deployment created and one deleted after the snapshot.
      await cluster.apply(hollowManifest(1, 3, { prefix: 'undone' }));
      const del = await cluster.jaco(['delete', 'deployment', 'after-0']);
      expect(del.code, del.stderr).toBe(0);
      await allRunning('undone running, after-0 gone', 5);

      const url = served(controllers, 'controllers running', '/healthz');
      const before = (await health(url)).body.store!.count;
      await cluster.etcd.replace!({ snapshot });
      await eventually(async () => ((await health(url)).body.store?.count ?? 0) > before && (await health(url)).status === 200, {
        what: 'the controllers healthy on the restored store',
        timeoutMs: 30_000,
      });
      // The snapshot's deployments, running; the hollow agents run exactly those.
      await allRunning('the snapshot’s replicas running', 6);
      const fleet = served(hollow, 'hollow nodes running', '/healthz');
      await eventually(async () => (await health(fleet)).body.containers === 6, { what: 'the hollow nodes running the snapshot’s 6 replicas only' });
      // And the controllers act on it: a deployment applied now is placed.
      await cluster.apply(hollowManifest(1, 2, { prefix: 'later' }));
      await allRunning('a deployment applied after the restore running', 8);
    }));
});
