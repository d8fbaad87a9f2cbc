// The node-agent's life against real Docker and real etcd: a restart adopts its containers without
// restarting them, etcd going away stops nothing, Docker unreachable is reported, a node removed
// from the cluster (`jaco node remove`: a removal recorded with the deletion) stops its containers
// and exits (and comes back only with --rejoin), and a node key gone with no removal recorded, or
// holding junk, touches nothing: the agent registers again and heartbeats on.
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { nodeReady } from '../../src/api/nodes.js';
import { API_VERSION, type Heartbeat, type Node, type NodeDrain, type NodeSpecRecord } from '../../src/api/types.js';
import { commitActs } from '../../src/store/writer.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { TcpProxy } from '../support/proxy.js';
import { eventually } from '../support/wait.js';
import { deleteDesired, desired, metric, metricsUrl, observedStatus, putDesired, SLEEPER, waitObserved } from './agent-fixtures.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 2, controllers: false });
});
afterAll(async () => {
  await c?.stop();
});


const heartbeat = async (node: string) => (await c.store.get<Heartbeat>(keys.heartbeat(node)))?.value;
const inspect = (id: string) => c.docker.getContainer(id).inspect();
const running = (node: string, replica: string) => waitObserved(c.store, node, replica, (s) => s.state === 'running', 'running');

describe('agent restarts', () => {
  it('adopts its running containers without restarting them, and removes those whose desired key went meanwhile', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-1', 'demo-keep-1', SLEEPER), desired('node-1', 'demo-drop-1', SLEEPER));
      const keep = await running('node-1', 'demo-keep-1');
      const drop = await running('node-1', 'demo-drop-1');
      const before = await inspect(keep.containerId!);

      await c.agent('node-1')!.kill('SIGTERM');
      // A stopped agent takes its heartbeat (lease) with it, and leaves its containers running.
      await eventually(async () => !(await heartbeat('node-1')), { what: 'the heartbeat of the stopped agent gone' });
      expect((await inspect(keep.containerId!)).State.Running).toBe(true);
      await deleteDesired(c.store, 'node-1', 'demo-drop-1');

      const p = await c.startAgent('node-1');
      await eventually(async () => !(await c.containers('node-1')).some((x) => x.Id === drop.containerId), { what: 'the container without a desired key removed' });
      await eventually(async () => !(await observedStatus(c.store, 'node-1', 'demo-drop-1')), { what: 'its observed key deleted' });
      const after = await inspect(keep.containerId!);
      expect(after.State.Running).toBe(true);
      expect(after.State.StartedAt).toBe(before.State.StartedAt);
      expect(after.RestartCount).toBe(0);
      expect((await c.containers('node-1')).filter((x) => x.Labels[LABELS.replica] === 'demo-keep-1')).toHaveLength(1);
      expect(await observedStatus(c.store, 'node-1', 'demo-keep-1')).toMatchObject({ state: 'running', containerId: keep.containerId });
      expect(readFileSync(p.logFile, 'utf8')).toMatch(/"containers":2,"msg":"containers adopted from Docker"/);
    }));
});

describe('two agents started for one node', () => {
  it('the second stands by (writes nothing, starts nothing) and takes over when the first goes, adopting its containers', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-1', 'demo-twin-1', SLEEPER));
      const first = await running('node-1', 'demo-twin-1');
      const holder = c.agent('node-1')!;
      // Its own log file (and not `c.agent('node-1')`, which later tests use).
      const second = c.spawn('node-1-twin', ['agent', '--node', 'node-1', '--capacity', 'cpu=1,memory=2Gi', '--metrics-addr', '127.0.0.1:0']);
      await eventually(async () => /standing by until it goes/.test(readFileSync(second.logFile, 'utf8')) || (second.exited() ? Promise.reject(new Error(c.tail(second))) : false), {
        what: 'the second agent standing by',
      });
      // A desired change while both run: exactly one container, written by the holder alone.
      await putDesired(c.store, desired('node-1', 'demo-twin-2', SLEEPER));
      await running('node-1', 'demo-twin-2');
      const twins = async () => (await c.containers('node-1')).filter((x) => (x.Labels[LABELS.replica] ?? '').startsWith('demo-twin-'));
      expect((await twins()).map((x) => x.Labels[LABELS.replica]).sort()).toEqual(['demo-twin-1', 'demo-twin-2']);
      expect(readFileSync(second.logFile, 'utf8')).not.toMatch(/node claimed|container started/);

      await holder.kill('SIGKILL'); // no clean exit: its claim goes only with its lease
      await eventually(async () => /node claimed/.test(readFileSync(second.logFile, 'utf8')), { what: 'the second agent claiming node-1', timeoutMs: 30_000 });
      await eventually(async () => nodeReady(await heartbeat('node-1')), { what: 'node-1 Ready again' });
      // It adopts the running containers: the same container, never a second copy.
      expect((await observedStatus(c.store, 'node-1', 'demo-twin-1'))?.containerId).toBe(first.containerId);
      expect((await twins()).filter((x) => x.State === 'running')).toHaveLength(2);
      await deleteDesired(c.store, 'node-1', 'demo-twin-1');
      await deleteDesired(c.store, 'node-1', 'demo-twin-2');
      await eventually(async () => (await twins()).length === 0, { what: 'the new holder acts on node-1: twins removed' });
      // Back to the fixture: one agent of node-1, as the other tests expect.
      await second.kill('SIGTERM');
      await eventually(async () => !(await heartbeat('node-1')), { what: 'the twin gone' });
      await c.startAgent('node-1');
    }));
});

describe('the claim lease', () => {
  it('revoked under a running agent (etcdctl lease revoke, a snapshot restore): a new lease and the node claimed again at once, containers untouched', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-2', 'demo-lease-1', SLEEPER));
      const before = await running('node-2', 'demo-lease-1');
      const startedAt = (await inspect(before.containerId!)).State.StartedAt;
      const kv = (await c.store.ns.get(keys.heartbeat('node-2')).exec()).kvs[0]!;
      await c.store.client.leaseClient.leaseRevoke({ ID: kv.lease });
      // Within a keepalive (a third of the TTL), not at the next failed heartbeat.
      const back = await eventually(async () => {
        const now = (await c.store.ns.get(keys.heartbeat('node-2')).exec()).kvs[0];
        return now && now.lease !== kv.lease ? now : undefined;
      }, { what: 'heartbeats/node-2 back on a new lease', timeoutMs: 15_000 });
      expect(Number(back.create_revision)).toBeGreaterThan(Number(kv.create_revision));
      expect(readFileSync(c.agent('node-2')!.logFile, 'utf8')).toMatch(/the node claim lease was lost; claiming the node again/);
      const after = await inspect(before.containerId!);
      expect([after.State.Running, after.State.StartedAt]).toEqual([true, startedAt]);
      expect((await observedStatus(c.store, 'node-2', 'demo-lease-1'))?.containerId).toBe(before.containerId);
      // The agent acts again under the new claim.
      await deleteDesired(c.store, 'node-2', 'demo-lease-1');
      await eventually(async () => !(await observedStatus(c.store, 'node-2', 'demo-lease-1')), { what: 'the replica removed under the new claim' });
    }));
});

describe('etcd unreachable', () => {
  it('keeps containers running as they are, and resyncs when etcd returns', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-1', 'demo-steady-1', SLEEPER));
      const s = await running('node-1', 'demo-steady-1');
      const started = (await inspect(s.containerId!)).State.StartedAt;
      const stopped = c.etcd.restart(4000);
      // While etcd is away (the restart waits 4 s before starting it again) nothing is stopped.
      await new Promise((r) => setTimeout(r, 2000));
      expect((await inspect(s.containerId!)).State.Running).toBe(true);
      await stopped;
      await eventually(async () => nodeReady(await heartbeat('node-1')), { what: 'node-1 Ready again', timeoutMs: 30_000 });
      // The agent picks up what was written after etcd came back.
      await putDesired(c.store, desired('node-1', 'demo-after-1', SLEEPER));
      await running('node-1', 'demo-after-1');
      const now = await inspect(s.containerId!);
      expect(now.State.StartedAt).toBe(started);
      expect(await observedStatus(c.store, 'node-1', 'demo-steady-1')).toMatchObject({ state: 'running', containerId: s.containerId });
      expect(readFileSync(c.agent('node-1')!.logFile, 'utf8')).toMatch(/could not write the heartbeat; containers keep running/);
    }));
});

describe('Docker unreachable', () => {
  it('says which socket, reports dockerUp false and docker_up 0, and keeps trying', () =>
    c.withLogs(async () => {
      const sock = 'unix:///tmp/jaco-no-docker-here.sock';
      await c.etcd.addNodes?.(['node-x']);
      const p = c.spawn('node-x', ['agent', '--node', 'node-x', '--capacity', 'cpu=1,memory=1Gi', '--metrics-addr', '127.0.0.1:0', '--docker-host', sock]);
      try {
        const hb = await eventually(async () => heartbeat('node-x'), { what: 'a heartbeat of node-x' });
        expect(hb.spec.dockerUp).toBe(false);
        expect(hb.spec.pressure).toBeUndefined();
        expect(nodeReady(hb)).toBe(false);
        const url = await metricsUrl(p);
        expect(await metric(url, 'jaco_agent_docker_up')).toBe(0);
        const health = await fetch(url.replace('/metrics', '/healthz'));
        expect(health.status).toBe(503);
        expect(await health.json()).toMatchObject({ ok: false, docker: { up: false, host: sock } });
        expect(readFileSync(p.logFile, 'utf8')).toContain(`cannot reach Docker at ${sock}`);
        // The node is registered all the same (NotReady), with its declared capacity.
        expect((await c.store.get<Node>(keys.node('node-x')))?.value.status?.capacity).toEqual({ cpuMillis: 1000, memoryBytes: 1024 ** 3, gpus: 0 });
      } finally {
        await p.kill('SIGTERM');
      }
    }));
});

describe('Docker going away', () => {
  it('leaves containers and etcd as they are, decides nothing, and resyncs when Docker is back', () =>
    c.withLogs(async () => {
      // The agent reaches Docker through a proxy the test can cut; the engine stays up for the rest.
      const proxy = new TcpProxy('/var/run/docker.sock');
      const p = await c.startAgent('node-y', ['--docker-host', await proxy.start(join(tmpdir(), `jaco-docker-${process.pid}.sock`))]);
      try {
        await putDesired(c.store, desired('node-y', 'demo-dk-1', SLEEPER));
        const before = await running('node-y', 'demo-dk-1');
        const key = keys.observed('node-y', 'demo-dk-1');
        const rev = (await c.store.get(key))!.modRevision;

        proxy.pause();
        await eventually(async () => (await heartbeat('node-y'))?.spec.dockerUp === false, { what: 'node-y reporting Docker down' });
        expect(nodeReady(await heartbeat('node-y'))).toBe(false);
        // Meanwhile a new replica is desired and the first one's desired key goes: nothing happens.
        await putDesired(c.store, desired('node-y', 'demo-dk-2', SLEEPER));
        await deleteDesired(c.store, 'node-y', 'demo-dk-1');
        await new Promise((r) => setTimeout(r, 1500));
        expect((await c.store.get(key))?.modRevision).toBe(rev);
        expect(await observedStatus(c.store, 'node-y', 'demo-dk-2')).toBeUndefined();
        expect((await inspect(before.containerId!)).State.Running).toBe(true);
        expect(await metric(await metricsUrl(p), 'jaco_agent_docker_up')).toBe(0);

        proxy.resume();
        await eventually(async () => nodeReady(await heartbeat('node-y')), { what: 'node-y Ready again', timeoutMs: 30_000 });
        await running('node-y', 'demo-dk-2');
        await eventually(async () => !(await observedStatus(c.store, 'node-y', 'demo-dk-1')), { what: 'demo-dk-1 removed once Docker is back' });
        expect(readFileSync(p.logFile, 'utf8')).toMatch(/Docker is reachable again/);
      } finally {
        await p.kill('SIGTERM');
        await proxy.close();
      }
    }));
});

/**
 * What the drain controller commits when it removes a node, in one transaction: its drain marked
 * removed (the positive record an agent acts on), the node object and heartbeat deleted.
 */
async function recordRemoval(node: string): Promise<void> {
  const drain: NodeDrain = {
    apiVersion: API_VERSION,
    kind: 'NodeDrain',
    metadata: { name: node },
    spec: { node, timeout: '5m', force: false, remove: true, requestedAt: new Date().toISOString() },
    status: { state: 'removed', replicas: {} },
  };
  await commitActs(c.store, [
    { ops: [{ op: 'put', key: keys.drain(node), value: drain }, { op: 'delete', key: keys.node(node) }, { op: 'delete', key: keys.heartbeat(node) }] },
  ]);
}

describe('a node key gone or unreadable without a removal', () => {
  it('gone with no removal recorded (the store lost it: a restore, a wipe, a hand delete): registered again, no container touched; junk in it: the heartbeat goes on', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-1', 'demo-stays-1', SLEEPER));
      const s = await running('node-1', 'demo-stays-1');
      const before = await inspect(s.containerId!);
      const agent = c.agent('node-1')!;
      const old = (await c.store.get<Node>(keys.node('node-1')))!;

      await commitActs(c.store, [{ ops: [{ op: 'delete', key: keys.node('node-1') }] }]);
      const back = await eventually(
        async () => {
          const n = await c.store.get<Node>(keys.node('node-1'));
          return n && n.createRevision > old.createRevision ? n : undefined;
        },
        { what: 'node-1 registered again', timeoutMs: 15_000 },
      );
      expect(back.value.status?.capacity).toEqual(old.value.status?.capacity);
      expect(readFileSync(agent.logFile, 'utf8')).toMatch(/no removal of this node is recorded: the store lost it/);
      // This process's address: the last one its log (appended to by every agent of node-1) gives.
      const url = [...readFileSync(agent.logFile, 'utf8').matchAll(/"metrics":"([^"]+)","healthz"/g)].at(-1)![1]!;
      expect(await metric(url, 'jaco_agent_node_reregistrations_total')).toBe(1);

      // Junk under nodes/node-1: left as it is, and the node stays Ready (heartbeats go on).
      await c.store.ns.put(keys.node('node-1')).value('not json {').exec();
      const hb = (await c.store.get(keys.heartbeat('node-1')))!.modRevision;
      await eventually(async () => (await c.store.get(keys.heartbeat('node-1')))!.modRevision > hb, { what: 'a heartbeat written beside the junk node value' });
      expect(nodeReady(await heartbeat('node-1'))).toBe(true);
      expect(readFileSync(agent.logFile, 'utf8')).toMatch(/nodes\/<node> holds a value this agent cannot read/);
      expect((await c.store.ns.get(keys.node('node-1')).string())).toBe('not json {');

      // Not one container restarted or replaced through all of it.
      const after = await inspect(s.containerId!);
      expect([after.State.Running, after.State.StartedAt, after.RestartCount]).toEqual([true, before.State.StartedAt, 0]);
      expect((await c.containers('node-1')).filter((x) => x.Labels[LABELS.replica] === 'demo-stays-1')).toHaveLength(1);
      expect(await observedStatus(c.store, 'node-1', 'demo-stays-1')).toMatchObject({ state: 'running', containerId: s.containerId });
      expect(agent.exited()).toBe(false);

      // Back to the fixture: a readable node-1, the replica gone.
      await commitActs(c.store, [{ ops: [{ op: 'put', key: keys.node('node-1'), value: back.value }] }]);
      await deleteDesired(c.store, 'node-1', 'demo-stays-1');
      await eventually(async () => !(await observedStatus(c.store, 'node-1', 'demo-stays-1')), { what: 'demo-stays-1 removed' });
    }));
});

describe('node removal', () => {
  it('jaco node remove: stops and removes its containers, deletes its observed keys and heartbeat, and exits 0', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired('node-2', 'demo-leaving-1', SLEEPER));
      const s = await running('node-2', 'demo-leaving-1');
      const agent = c.agent('node-2')!;
      const exit = agent.done;
      // The desired keys go first (as the drain moves the replicas away), then the real removal.
      await deleteDesired(c.store, 'node-2', 'demo-leaving-1');
      await eventually(async () => !(await observedStatus(c.store, 'node-2', 'demo-leaving-1')), { what: 'demo-leaving-1 gone' });
      const drain = await c.startControllers(['drain']);
      const r = await c.jaco(['node', 'remove', 'node-2', '--wait']);
      expect(r.code, r.stderr).toBe(0);
      await drain.kill('SIGTERM');
      expect(await exit).toBe(0);
      expect(readFileSync(agent.logFile, 'utf8')).toMatch(/node node-2 was removed from the cluster/);
      expect(await c.containers('node-2')).toEqual([]);
      await expect(inspect(s.containerId!)).rejects.toMatchObject({ statusCode: 404 });
      expect(await c.store.countPrefix(keys.observedOf('node-2'))).toBe(0);
      expect(await heartbeat('node-2')).toBeUndefined();
      expect(await c.store.get(keys.node('node-2'))).toBeUndefined();
    }));

  it('a node removed with containers still on it stops them with their grace before exiting', () =>
    c.withLogs(async () => {
      await c.startAgent('node-2', ['--rejoin']);
      await putDesired(c.store, desired('node-2', 'demo-left-1', SLEEPER));
      const s = await running('node-2', 'demo-left-1');
      const agent = c.agent('node-2')!;
      const exit = agent.done;
      await recordRemoval('node-2');
      expect(await exit).toBe(0);
      await expect(inspect(s.containerId!)).rejects.toMatchObject({ statusCode: 404 });
      expect(await c.store.countPrefix(keys.observedOf('node-2'))).toBe(0);
    }));

  it('refuses to start on a removed node without --rejoin, and registers again with it', () =>
    c.withLogs(async () => {
      expect((await c.store.get<NodeDrain>(keys.drain('node-2')))?.value.status?.state).toBe('removed');
      const r = await c.jaco(['agent', '--node', 'node-2', '--capacity', 'cpu=1,memory=2Gi', '--metrics-addr', '127.0.0.1:0']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain('node node-2 was removed from the cluster; start with --rejoin to add it again');
      expect(await c.store.get(keys.node('node-2'))).toBeUndefined();
      await c.startAgent('node-2', ['--rejoin']);
      expect((await c.store.get<Node>(keys.node('node-2')))?.value.status?.agentVersion).toBeDefined();
      // Once it is a member again, a plain restart is fine.
      await c.agent('node-2')!.kill('SIGTERM');
      await c.startAgent('node-2');
    }));
});

describe('registration', () => {
  it('updates status and labels; never sets spec: the node stays cordoned (nodespecs/, the CLI’s)', () =>
    c.withLogs(async () => {
      const cur = (await c.store.get<Node>(keys.node('node-1')))!;
      expect((await c.jaco(['node', 'cordon', 'node-1'])).stdout).toBe('node/node-1 cordoned\n');
      await c.agent('node-1')!.kill('SIGTERM');
      await c.startAgent('node-1', ['--labels', 'zone=b,disk=ssd']);
      const n = (await c.store.get<Node>(keys.node('node-1')))!.value;
      expect(n.spec).toEqual({});
      expect((await c.store.get<NodeSpecRecord>(keys.nodeSpec('node-1')))!.value.spec).toEqual({ unschedulable: true });
      expect(n.metadata.labels).toEqual({ zone: 'b', disk: 'ssd' });
      expect(n.status).toMatchObject({ capacity: { cpuMillis: 1000, memoryBytes: 2 * 1024 ** 3, gpus: 0 }, registeredAt: cur.value.status!.registeredAt });
      const hb = (await heartbeat('node-1'))!;
      expect(hb.spec).toMatchObject({ node: 'node-1', intervalMs: 1000, dockerUp: true });
      expect(await c.store.get(keys.heartbeat('node-1')).then((v) => v?.lease)).toBeDefined();
    }));
});
