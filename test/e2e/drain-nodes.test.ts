// Drains on real containers: three `jaco agent` processes (fast timings) share the local Docker
// engine, two `jaco controller all` processes run the scheduler, rollout and drain controllers (one
// leads, one stands by). The tests run in order on one cluster, as an operator would:
//   1. drain node-2 with a spread, a pack, a 1-replica and a global service — every movable replica
//      ends up running elsewhere, the global one is gone, no service ever drops below replicas − 1
//      running (the 1-replica one never to 0), and the drain leader is killed mid-drain;
//   2. a drain whose replacement never becomes healthy aborts with drain_timeout and the old
//      replica keeps running on the still-cordoned node; one whose replacement exits tries each
//      other node once (dst_failed at once, not at the deadline), then aborts saying so;
//   3. a stateful replica blocks a drain, --force stops it (node_drained), and `node remove`
//      leaves no container of the node and makes its agent exit.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { AuditEvent, Node, NodeDrain, NodeSpecRecord, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { jaco, type CliResult } from '../support/cli.js';
import { sampler, startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 3, controllers: 'all' });
  // A standby: whichever process leads the drain controller can be killed mid-drain.
  await c.startControllers('all');
  await eventually(async () => (await c.store.countPrefix(keys.leaders('drain'))) === 2, { what: 'two drain candidates', timeoutMs: 30_000 });
});
afterAll(async () => {
  if (!c) return;
  await c.stop();
  const vols = await c.docker.listVolumes({ filters: { label: [`${LABELS.cluster}=${c.uid}`] } }).catch(() => ({ Volumes: [] }));
  await Promise.all((vols.Volumes ?? []).map((v) => c.docker.getVolume(v.Name).remove().catch(() => undefined)));
});

/** The CLI with a deadline long enough for a whole drain. */
const cli = (args: string[], timeoutMs = 150_000): Promise<CliResult> => jaco(['--timings', 'fast', ...args], { endpoint: c.endpoint, prefix: c.prefix, timeoutMs, env: c.env() });

async function ok(args: string[]): Promise<string> {
  const r = await cli(args);
  if (r.code !== 0) throw new Error(`jaco ${args.join(' ')} exited ${r.code}: ${r.stderr}${r.stdout}`);
  return r.stdout;
}

/** Replicas of each service with a running copy (a replica being moved counts once). */
async function runningByService(): Promise<Record<string, number>> {
  const ids = new Map<string, Set<string>>();
  for (const o of await c.observed()) {
    if (!replicaRunning(o)) continue;
    const set = ids.get(o.status.service) ?? new Set();
    set.add(o.status.replica);
    ids.set(o.status.service, set);
  }
  return Object.fromEntries([...ids].map(([s, v]) => [s, v.size]));
}

async function desiredOf(service: string): Promise<ReplicaDesired[]> {
  return (await c.desired()).filter((d) => d.spec.service === service);
}

async function drainOf(host: string): Promise<NodeDrain | undefined> {
  return (await c.store.get<NodeDrain>(keys.drain(host)))?.value;
}

async function observedOf(node: string, replica: string): Promise<ReplicaObserved['status'] | undefined> {
  return (await c.store.get<ReplicaObserved>(keys.observed(node, replica)))?.value.status;
}

async function audit(type: string): Promise<AuditEvent['spec'][]> {
  return (await c.store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec).filter((e) => e.type === type);
}

// sleep ignores SIGTERM: each container takes its whole stopGracePeriod to stop.
const sleeper = (extra: string, grace = '1s') => `      image: jaco-demo/busybox:1
      command: [sleep, '3600']
      stopGracePeriod: ${grace}
${extra}`;

/** Applies a deployment while only `onto` takes placements: the way to put replicas on a chosen node. */
async function applyOnto(onto: string, yaml: string): Promise<void> {
  const others = ['node-1', 'node-2', 'node-3'].filter((n) => n !== onto);
  const cordoned: string[] = [];
  for (const n of others) {
    const node = (await c.store.get<Node>(keys.node(n)))?.value;
    if (node && !node.spec?.unschedulable) {
      await ok(['node', 'cordon', n]);
      cordoned.push(n);
    }
  }
  await c.apply(yaml);
  const name = /^metadata:\n {2}name: (\S+)$/m.exec(yaml)![1];
  await eventually(
    async () => {
      const ds = (await c.desired()).filter((d) => d.spec.deployment === name);
      if (!ds.length || ds.some((d) => d.spec.node !== onto)) return false;
      const obs = await Promise.all(ds.map((d) => c.store.get<ReplicaObserved>(keys.observed(onto, d.spec.replica))));
      // Running, and healthy where the service has a health check (the test compares against it).
      return obs.every((o) => replicaRunning(o?.value) && ['none', 'healthy'].includes(o?.value.status.health ?? ''));
    },
    { what: `the replicas of ${name} running (and healthy) on ${onto}`, timeoutMs: 60_000 },
  );
  for (const n of cordoned) await ok(['node', 'uncordon', n]);
}

/** After an aborted drain of node-2: the old replica never stopped (the same container), its replacements are gone, the node stays cordoned. */
async function keptOnNode2(service: string, replica: string, before: ReplicaObserved['status']): Promise<void> {
  expect((await desiredOf(service)).map((d) => d.spec.node)).toEqual(['node-2']);
  expect(await observedOf('node-2', replica)).toMatchObject({ state: 'running', containerId: before.containerId, startedAt: before.startedAt });
  await eventually(async () => (await c.containers()).filter((x) => x.Labels[LABELS.replica] === replica).length === 1, { what: `only the old ${replica} container left` });
  expect((await c.store.get<NodeSpecRecord>(keys.nodeSpec('node-2')))!.value.spec.unschedulable).toBe(true);
}

/** The pid of the process leading the drain controller (election keys hold "host/pid/nonce"). */
async function drainLeaderPid(): Promise<number> {
  const { kvs } = await c.store.listRaw(keys.leaders('drain'));
  const first = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0]!;
  return Number(first.value.toString().split('/')[1]);
}

describe('jaco node drain on real containers', () => {
  it('moves every movable replica off node-2 make-before-break (even across a leader failover); drops the global one', () =>
    c.withLogs(async () => {
      await c.apply(`apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: app
spec:
  services:
    web:
      replicas: 3
      healthcheck: {test: [CMD, 'true'], interval: 5s, timeout: 10s, retries: 3}
${sleeper('')}    agent:
      placement: {mode: global}
${sleeper('')}`);
      await eventually(async () => {
        const r = await runningByService();
        return r.web === 3 && r.agent === 3;
      }, { what: 'app running: web ×3, agent ×3', timeoutMs: 60_000 });
      // The pack service and the single replica start on node-2, so the drain has to move them.
      await applyOnto(
        'node-2',
        `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: side
spec:
  services:
    pack:
      replicas: 2
      placement: {mode: pack}
      update: {minReadyTime: 1s}
${sleeper('')}    solo:
      replicas: 1
      update: {minReadyTime: 1s}
${sleeper('', '4s')}`,
      );
      const onNode2 = (await c.desired()).filter((d) => d.spec.node === 'node-2').map((d) => d.spec.replica).sort();
      expect(onNode2).toEqual(expect.arrayContaining(['app-agent-node-2', 'side-pack-0', 'side-pack-1', 'side-solo-0']));
      expect(onNode2.filter((r) => r.startsWith('app-web-'))).toHaveLength(1);

      const samples = sampler(runningByService, 100);
      const waiting = cli(['node', 'drain', 'node-2', '--wait', '--timeout', '60s']);
      // Kill the drain's leader once a move is in flight: the standby resumes from drains/node-2
      // and the move markers.
      await eventually(async () => Object.values((await drainOf('node-2'))?.status?.replicas ?? {}).some((r) => r.state === 'moving'), { what: 'a move in flight', timeoutMs: 60_000 });
      const pid = await drainLeaderPid();
      const leader = c.procs.find((p) => p.child.pid === pid);
      expect(leader, `the drain leader (pid ${pid}) is one of the test's processes`).toBeDefined();
      await leader!.kill('SIGKILL');
      const r = await waiting;
      const seen = await samples.stop();
      expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/drain\/node-2 completed in \S+: 4 moved, 1 dropped, 0 stopped/);
      // "Completed" means the node's containers are gone, not only their desired keys: solo's old
      // container takes 4 s to stop, and the operator may power the host off the moment --wait exits.
      expect((await c.containers('node-2')).map((x) => `${x.Labels[LABELS.replica]} ${x.State}`)).toEqual([]);
      expect(await drainLeaderPid()).not.toBe(pid);

      // Everything movable runs elsewhere; node-2 holds no desired replica; the global one is gone.
      expect((await c.desired()).filter((d) => d.spec.node === 'node-2')).toEqual([]);
      await eventually(async () => {
        const run = await runningByService();
        return run.web === 3 && run.pack === 2 && run.solo === 1 && run.agent === 2;
      }, { what: 'web ×3, pack ×2, solo ×1 running elsewhere, agent on node-1 and node-3' });
      for (const s of ['web', 'pack', 'solo']) for (const d of await desiredOf(s)) expect(d.spec.move).toBeUndefined();
      await eventually(async () => (await c.containers('node-2')).length === 0, { what: 'no container left on node-2' });
      // Make-before-break under the budget: never below replicas − 1, the single replica never at 0.
      expect(seen.length).toBeGreaterThan(20);
      const min = (s: string) => Math.min(...seen.map((x) => x[s] ?? 0));
      const low = seen.map((x, i) => [i, x] as const).filter(([, x]) => (x.web ?? 0) < 2 || (x.pack ?? 0) < 1 || (x.solo ?? 0) < 1);
      expect(low, `samples below the floor (of ${seen.length}): ${JSON.stringify(low.slice(0, 10))}`).toEqual([]);
      expect(min('web')).toBeGreaterThanOrEqual(2);
      expect(min('pack')).toBeGreaterThanOrEqual(1);
      expect(min('solo')).toBe(1);

      const moved = await audit('replica_moved');
      expect(moved.map((m) => m.payload.replica).sort()).toEqual(expect.arrayContaining(['side-pack-0', 'side-pack-1', 'side-solo-0']));
      for (const m of moved) expect(m.payload).toMatchObject({ src: 'node-2', dst: expect.stringMatching(/^node-[13]$/), duration: expect.any(String) });
      expect(await audit('drain_started')).toHaveLength(1);
      expect(await audit('drain_completed')).toMatchObject([{ payload: { node: 'node-2', moved: 4, dropped: 1, stopped: 0 } }]);
      // Cordoned until the operator says otherwise.
      expect((await c.store.get<NodeSpecRecord>(keys.nodeSpec('node-2')))!.value.spec.unschedulable).toBe(true);
    }));

  it('aborts with drain_timeout when the replacement never becomes healthy; the old replica keeps running', () =>
    c.withLogs(async () => {
      await ok(['node', 'uncordon', 'node-2']);
      await applyOnto(
        'node-2',
        `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: picky
spec:
  services:
    picky:
      replicas: 1
      healthcheck: {test: [CMD-SHELL, 'test "$JACO_NODE" = node-2'], interval: 1s, timeout: 10s, retries: 3}
${sleeper('')}`,
      );
      const before = await observedOf('node-2', 'picky-picky-0');
      expect(before).toMatchObject({ state: 'running', health: 'healthy' });

      const r = await cli(['node', 'drain', 'node-2', '--wait', '--timeout', '6s']);
      expect(r.code, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toMatch(/drain\/node-2 aborted: drain_timeout \(picky-picky-0: move_timeout\)/);
      expect(r.stdout).toMatch(/picky-picky-0 {2}moving → node-[13]\n/);
      const drain = await drainOf('node-2');
      expect(drain?.status).toMatchObject({ state: 'aborted', reason: 'drain_timeout', replicas: { 'picky-picky-0': { state: 'blocked', reason: 'move_timeout' } } });

      await keptOnNode2('picky', 'picky-picky-0', before!);
      expect(await audit('drain_aborted')).toMatchObject([{ payload: { node: 'node-2', reason: 'drain_timeout', replica: 'picky-picky-0', cause: 'move_timeout' } }]);
    }));

  it('a replacement that exits is abandoned at once (dst_failed) and each other node tried once; the drain aborts at its deadline saying so', () =>
    c.withLogs(async () => {
      // The last case's replica stays out of this drain.
      await ok(['delete', 'deployment', 'picky']);
      await eventually(async () => !(await c.containers()).some((x) => x.Labels[LABELS.replica] === 'picky-picky-0'), { what: 'the picky container gone' });
      await ok(['node', 'uncordon', 'node-2']);
      // Runs on node-2 only: anywhere else its container exits at once (a clash or a crash on that host).
      await applyOnto(
        'node-2',
        `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: homebody
spec:
  services:
    homebody:
      replicas: 1
      image: jaco-demo/busybox:1
      command: [sh, -c, 'test "$JACO_NODE" = node-2 || exit 3; exec sleep 3600']
      stopGracePeriod: 1s
`,
      );
      const before = await observedOf('node-2', 'homebody-homebody-0');
      expect(before).toMatchObject({ state: 'running' });

      // Before dst_failed covered an exited copy, each attempt waited out the whole timeout (move_timeout).
      const r = await cli(['node', 'drain', 'node-2', '--wait', '--timeout', '25s']);
      expect(r.code, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toMatch(/drain\/node-2 aborted: drain_timeout \(homebody-homebody-0: dst_failed\)/);
      const drain = await drainOf('node-2');
      expect(drain?.status).toMatchObject({ state: 'aborted', reason: 'drain_timeout', replicas: { 'homebody-homebody-0': { state: 'blocked', reason: 'dst_failed', failedOn: ['node-1', 'node-3'] } } });
      const abandoned = (await audit('drain_move_abandoned')).filter((a) => a.payload.replica === 'homebody-homebody-0');
      expect(abandoned.map((a) => [a.payload.dst, a.payload.reason]).sort()).toEqual([
        ['node-1', 'dst_failed'],
        ['node-3', 'dst_failed'],
      ]);
      // Each abandoned in seconds, not at the deadline.
      for (const a of abandoned) expect(a.payload.durationMs as number).toBeLessThan(20_000);

      await keptOnNode2('homebody', 'homebody-homebody-0', before!);
      await ok(['delete', 'deployment', 'homebody']);
    }));

  it('a stateful replica blocks the drain until --force stops it on the node; node remove then leaves nothing and the agent exits', () =>
    c.withLogs(async () => {
      await applyOnto(
        'node-3',
        `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: store
spec:
  services:
    db:
      replicas: 1
      volumes: [{type: volume, source: data, target: /data}]
${sleeper('')}`,
      );
      await ok(['node', 'drain', 'node-3', '--timeout', '60s']);
      await eventually(async () => {
        const st = (await drainOf('node-3'))?.status;
        const others = Object.entries(st?.replicas ?? {}).filter(([id]) => id !== 'store-db-0');
        return st?.replicas['store-db-0']?.state === 'blocked' && others.length > 0 && others.every(([, r]) => r.state === 'done' || r.state === 'dropped') ? st : false;
      }, { what: 'everything but the stateful replica moved off node-3', timeoutMs: 90_000 });
      const st = (await drainOf('node-3'))!.status!;
      expect(st).toMatchObject({ state: 'draining', replicas: { 'store-db-0': { state: 'blocked', reason: 'stateful_replica' } } });
      expect((await observedOf('node-3', 'store-db-0'))?.state).toBe('running');
      const status = await cli(['node', 'drain-status', 'node-3']);
      expect(status.stdout).toMatch(/store-db-0 +blocked +stateful_replica/);

      // --force on the drain in progress: the replica stops where it is, its data stays there.
      const forced = await cli(['node', 'drain', 'node-3', '--force', '--wait']);
      expect(forced.code, forced.stdout + forced.stderr).toBe(0);
      expect(forced.stdout).toMatch(/^drain\/node-3 already in progress: now with --force/);
      expect(forced.stdout).toMatch(/store-db-0 {2}stopped \(node_drained\)/);
      const db = (await desiredOf('db'))[0]!;
      expect(db.spec).toMatchObject({ node: 'node-3', suspended: { reason: 'node_drained' } });
      await eventually(async () => (await observedOf('node-3', 'store-db-0'))?.state === 'stopped', { what: 'db observed stopped' });
      expect(await observedOf('node-3', 'store-db-0')).toMatchObject({ state: 'stopped', code: 'node_drained' });
      // The container stays (stopped, not removed) with the data beside it. (The agent reports
      // stopped as the stop begins; wait for Docker to finish it before removing the node.)
      await eventually(async () => {
        const mine = (await c.containers('node-3')).filter((x) => x.Labels[LABELS.replica] === 'store-db-0');
        return mine.length === 1 && mine[0]!.State !== 'running';
      }, { what: 'the db container stopped, not removed' });
      const vols = await c.docker.listVolumes({ filters: { label: [`${LABELS.cluster}=${c.uid}`, `${LABELS.node}=node-3`] } });
      expect(vols.Volumes?.length).toBe(1);
      // Never placed elsewhere.
      expect((await desiredOf('db')).map((d) => d.spec.node)).toEqual(['node-3']);

      // Remove: a new drain with remove (the last one completed), then the node and heartbeat go.
      const agent = c.agent('node-3')!;
      const exited = agent.done;
      const removed = await cli(['node', 'remove', 'node-3', '--wait']);
      expect(removed.code, removed.stdout + removed.stderr).toBe(0);
      expect(removed.stdout).toMatch(/node\/node-3 removed from the cluster/);
      expect(await exited).toBe(0);
      await eventually(async () => (await c.containers('node-3')).length === 0, { what: 'no container of node-3 left' }).catch(async (e: Error) => {
        const left = (await c.containers('node-3')).map((x) => `${x.Names.join(',')} ${x.State} ${x.Status}`);
        throw new Error(`${e.message}: ${left.join('; ')}`);
      });
      expect(await c.store.get(keys.node('node-3'))).toBeUndefined();
      expect(await c.store.get(keys.heartbeat('node-3'))).toBeUndefined();
      expect(await audit('node_removed')).toMatchObject([{ payload: { node: 'node-3' } }]);
      const again = await cli(['node', 'drain', 'node-3']);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/node "node-3" not found \(it was removed from the cluster\)/);
    }));
});
