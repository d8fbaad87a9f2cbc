// The scheduler on real containers: three `jaco agent` processes (fast timings) share the local
// Docker engine, one `jaco controller all` process runs the controllers. In order, on one cluster:
//   1. a deployment with a spread, a pack and a global service converges to all replicas running
//      (the time from apply is printed: seed 001's bar is 15 s; test/bench measures it);
//   2. a container that keeps crashing is restarted 3 times, re-placed once on another node
//      (crash-loop escalation), restarted 3 times there, then shows failed/restart_exhausted and
//      is left alone;
//   3. an agent killed with SIGKILL: after the grace period its stateless replicas run elsewhere,
//      under the same ids, while its global replica stays where it was.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { replicaReady } from '../../src/api/readiness.js';
import type { AuditEvent, ReplicaCommand, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import type { DeploymentStatusRow } from '../../src/app/status.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually, sleep } from '../support/wait.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 3, controllers: 'all' });
});
afterAll(async () => {
  await c?.stop();
});

const SHOP = `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: shop}
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      command: [sleep, "3600"]
      stopGracePeriod: 1s
      replicas: 3
      update: {minReadyTime: 1s}
    worker:
      image: jaco-demo/busybox:1
      command: [sleep, "3600"]
      stopGracePeriod: 1s
      replicas: 2
      placement: {mode: pack}
      update: {minReadyTime: 1s}
    agent:
      image: jaco-demo/busybox:1
      command: [sleep, "3600"]
      stopGracePeriod: 1s
      placement: {mode: global}
      update: {minReadyTime: 1s}
`;

const CRASH = `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: crash}
spec:
  services:
    crasher:
      image: jaco-demo/busybox:1
      command: [sh, -c, "sleep 1; exit 3"]
      stopGracePeriod: 1s
`;

/** Desired copies of a deployment with what their node observes. */
async function replicas(dep: string): Promise<{ d: ReplicaDesired; o?: ReplicaObserved }[]> {
  const [desired, observed] = await Promise.all([c.desired(), c.observed()]);
  const obs = new Map(observed.map((o) => [`${o.status.node}/${o.status.replica}`, o]));
  return desired.filter((d) => d.spec.deployment === dep).map((d) => ({ d, o: obs.get(`${d.spec.node}/${d.spec.replica}`) }));
}

async function status(dep: string): Promise<DeploymentStatusRow> {
  const r = await c.jaco(['status', dep, '-o', 'json']);
  if (r.code !== 0) throw new Error(`jaco status exited ${r.code}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { deployments: DeploymentStatusRow[] }).deployments[0]!;
}

describe('scheduler end to end', () => {
  it('a spread, a pack and a global service all run after apply', () =>
    c.withLogs(async () => {
      const t0 = Date.now();
      await c.apply(SHOP);
      const all = await eventually(
        async () => {
          const rs = await replicas('shop');
          return rs.length === 8 && rs.every(({ d, o }) => o?.status.state === 'running' && o.status.revision === d.spec.revision) ? rs : undefined;
        },
        { what: 'all 8 replicas of shop running', timeoutMs: 90_000, intervalMs: 50 },
      );
      console.log(`[scheduler e2e] apply → 8 replicas (spread 3, pack 2, global 3) running on 3 nodes: ${Date.now() - t0} ms (seed 001's bar: 15000 ms)`);
      const nodesOf = (svc: string) => all.filter(({ d }) => d.spec.service === svc).map(({ d }) => d.spec.node).sort();
      expect(nodesOf('web')).toEqual(['node-1', 'node-2', 'node-3']);
      expect(nodesOf('worker')).toEqual(['node-1', 'node-2']);
      expect(nodesOf('agent')).toEqual(['node-1', 'node-2', 'node-3']);
      expect(await c.containers()).toHaveLength(8);

      const st = await eventually(async () => {
        const s = await status('shop');
        return s.services.every((x) => x.running === x.desired) ? s : undefined;
      });
      expect(st.services.map((s) => [s.name, s.mode, s.desired, s.running])).toEqual([
        ['agent', 'global', 3, 3],
        ['web', 'spread', 3, 3],
        ['worker', 'pack', 2, 2],
      ]);
      const explain = await c.jaco(['explain', 'shop-web-0']);
      expect(explain.code).toBe(0);
      expect(explain.stdout).toContain(`Chosen:      ${all.find(({ d }) => d.spec.replica === 'shop-web-0')!.d.spec.node}`);
      expect(explain.stdout).toMatch(/node-1 +(chosen|scored)/);
    }));

  it('a crashing container is restarted 3 times, re-placed once on another node (crash-loop escalation), restarted 3 times there, then shows restart_exhausted and is left alone', () =>
    c.withLogs(async () => {
      await c.apply(CRASH);
      const first = await eventually(async () => (await c.desired()).find((d) => d.spec.replica === 'crash-crasher-0')?.spec.node, { what: 'crash-crasher-0 placed', timeoutMs: 30_000 });
      // Waited for in the store, then shown by `jaco status`: a CLI process is ~1 s of CPU, and
      // polling it took 14 of them (13 s of CPU) while the container crashed its way there.
      const audit = async () => (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((a) => a.payload.replica === 'crash-crasher-0');
      await eventually(async () => (await audit()).some((x) => x.type === 'restart_exhausted'), { what: 'crash-crasher-0 audited restart_exhausted', timeoutMs: 150_000, intervalMs: 250 });
      const row = await eventually(
        async () => {
          const r = (await status('crash')).services[0]!.replicas[0];
          return r?.state === 'failed' && r.code === 'restart_exhausted' ? r : undefined;
        },
        { what: '`jaco status crash` showing crash-crasher-0 failed/restart_exhausted', timeoutMs: 30_000 },
      );
      expect(row.restarts).toBe(3);
      expect(row.node).not.toBe(first);
      const a = await audit();
      // Three restarts where it was placed, one relocation, three restarts on its new node, then final.
      expect(a.filter((x) => x.type === 'replica_restarted').map((x) => x.payload.restarts)).toEqual([1, 2, 3, 1, 2, 3]);
      expect(a.filter((x) => x.type === 'replica_relocated').map((x) => x.payload)).toEqual([expect.objectContaining({ from: first, to: row.node, cause: 'exited', restarts: 3 })]);
      expect(a.filter((x) => x.type === 'restart_exhausted')).toHaveLength(1);
      // Left alone: no further restart however long it stays exited, and no second relocation.
      await sleep(4000);
      const cmds = (await c.store.list<ReplicaCommand>(keys.commandsOf())).items.filter((x) => x.value.spec.replica === 'crash-crasher-0');
      expect(cmds).toHaveLength(1); // the first node's bookkeeping went with its copy
      expect(cmds[0]!.value.spec.seq).toBe(3);
      expect(cmds[0]!.value.status).toMatchObject({ restarts: 3, exhausted: true });
      expect((await audit()).filter((x) => x.type === 'replica_restarted')).toHaveLength(6);
      expect((await c.desired()).filter((d) => d.spec.replica === 'crash-crasher-0').map((d) => d.spec.node)).toEqual([row.node]);
      const st = await status('crash');
      expect(st.services[0]!.restartExhausted).toEqual(['crash-crasher-0']);
      // The replica is never listed as an endpoint.
      expect((await c.store.get<{ spec: { addresses: unknown[] } }>(keys.endpoints('crash', 'crasher')))!.value.spec.addresses).toEqual([]);
    }));

  it('an agent paused for less than its liveness lease allows (SIGSTOP, SIGCONT) replaces nothing', () =>
    c.withLogs(async () => {
      const before = (await replicas('shop')).map(({ d }) => `${d.spec.replica}@${d.spec.node}`).sort();
      const agent = c.agent('node-2')!.child;
      agent.kill('SIGSTOP');
      await sleep(500); // the lease (3 s, kept alive every 1 s) outlives it by far
      agent.kill('SIGCONT');
      await sleep(6_000); // longer than TTL + grace: a lapse would have re-placed by now
      expect((await replicas('shop')).map(({ d }) => `${d.spec.replica}@${d.spec.node}`).sort()).toEqual(before);
      expect((await c.store.list<AuditEvent>(keys.audits())).items.filter((a) => a.value.spec.type === 'node_lost')).toEqual([]);
    }));

  it('an agent killed: after the grace its replicas run elsewhere, same ids; its global replica stays', () =>
    c.withLogs(async () => {
      const before = await replicas('shop');
      const victims = before.filter(({ d }) => d.spec.node === 'node-2' && d.spec.service !== 'agent').map(({ d }) => d.spec.replica);
      expect(victims.length).toBeGreaterThan(0);
      await c.agent('node-2')!.kill('SIGKILL');
      const t0 = Date.now();
      await eventually(
        async () => {
          const now = Date.now();
          const rs = await replicas('shop');
          return victims.every((id) => {
            const copies = rs.filter(({ d }) => d.spec.replica === id);
            return copies.length === 1 && copies[0]!.d.spec.node !== 'node-2' && replicaReady(copies[0]!.d, copies[0]!.o, now);
          });
        },
        { what: `${victims.join(', ')} running on other nodes`, timeoutMs: 90_000, intervalMs: 200 },
      );
      console.log(`[scheduler e2e] agent SIGKILL → ${victims.length} replica(s) re-placed and ready elsewhere: ${Date.now() - t0} ms (heartbeat TTL 3 s + grace 3 s, fast timings)`);
      const after = await replicas('shop');
      expect(after.find(({ d }) => d.spec.replica === 'shop-agent-node-2')?.d.spec.node).toBe('node-2');
      expect(after.filter(({ d }) => d.spec.service === 'web')).toHaveLength(3);
      // shop's own: the crash test's exhausted replica may be on node-2 too (re-placed as well).
      const lost = (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((a) => a.type === 'node_lost' && a.deployment === 'shop');
      expect(lost.map((a) => a.payload.replica).sort()).toEqual([...victims].sort());
      const st = await status('shop');
      expect(st.services.find((s) => s.name === 'agent')!.replicas.find((r) => r.node === 'node-2')!.code).toBe('node_not_ready');
    }));
});
