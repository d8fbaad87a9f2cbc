// The node-agent against real Docker and real etcd, with no controllers: desired keys written
// straight into the store make real containers (every field applied), stops honour the service's
// signal and grace, a failing pull blocks nothing else, health, start-first replacement, restart
// commands, a container removed behind the agent's back, a malformed desired key.
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { commitActs } from '../../src/store/writer.js';
import { sampler, startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { deleteDesired, desired, IMAGE, IMAGE_2, metric, metricsUrl, observedStatus, putCommand, putDesired, SLEEPER, UNPULLABLE, waitObserved } from './agent-fixtures.js';

const NODE = 'node-1';
let c: TestCluster;
let metrics: string;
const outDir = mkdtempSync(join(tmpdir(), 'jaco-agent-out-'));
chmodSync(outDir, 0o777);

beforeAll(async () => {
  c = await startCluster({ nodes: 1, controllers: false });
  metrics = await metricsUrl(c.agent(NODE)!);
});

afterAll(async () => {
  if (c) {
    const vols = await c.docker.listVolumes({ filters: { label: [`${LABELS.cluster}=${c.uid}`] } }).catch(() => ({ Volumes: [] }));
    await c.stop();
    await Promise.all((vols.Volumes ?? []).map((v) => c.docker.getVolume(v.Name).remove().catch(() => undefined)));
  }
  rmSync(outDir, { recursive: true, force: true });
});


const inspect = (id: string) => c.docker.getContainer(id).inspect();
const running = (replica: string) => waitObserved(c.store, NODE, replica, (s) => s.state === 'running', 'running');

describe('running desired replicas', () => {
  it('makes a running container with every field of the template applied', () =>
    c.withLogs(async () => {
      const d = desired(NODE, 'demo-full-1', {
        image: IMAGE,
        command: ['sh', '-c'],
        args: ['echo "$COLOR $JACO_REPLICA" > /data/hello; exec sleep 3600'],
        env: { COLOR: 'blue' },
        resources: { cpu: '250m', memory: '64Mi' },
        ports: [18231],
        healthcheck: { test: ['CMD-SHELL', 'test -f /data/hello'], interval: '1s', timeout: '1s', retries: 2, startPeriod: '0s' },
        stopSignal: 'SIGINT',
        stopGracePeriod: '3s',
        volumes: [
          { type: 'volume', source: 'data', target: '/data' },
          { type: 'bind', source: outDir, target: '/out', readOnly: true },
        ],
      }, { service: 'full' });
      await putDesired(c.store, d);
      const s = await waitObserved(c.store, NODE, 'demo-full-1', (x) => x.state === 'running' && x.health === 'healthy', 'running and healthy');
      expect(s).toMatchObject({ revision: 1, specHash: d.spec.specHash, image: IMAGE, deployment: 'demo', service: 'full' });
      expect(s.lastHealthAt).toBeDefined();
      const i = await inspect(s.containerId!);
      expect(i.Name).toBe(`/jaco-${c.uid.slice(0, 8)}-${NODE}-demo-full-1-r1-${d.spec.specHash.slice(0, 8)}`);
      expect(i.Name.slice(1)).toBe(s.containerName);
      expect(i.Config.Labels).toMatchObject({
        [LABELS.cluster]: c.uid,
        [LABELS.node]: NODE,
        [LABELS.deployment]: 'demo',
        [LABELS.service]: 'full',
        [LABELS.replica]: 'demo-full-1',
        [LABELS.specHash]: d.spec.specHash,
        [LABELS.revision]: '1',
      });
      expect(i.Config.Env).toEqual(expect.arrayContaining(['COLOR=blue', `JACO_NODE=${NODE}`, 'JACO_DEPLOYMENT=demo', 'JACO_SERVICE=full', 'JACO_REPLICA=demo-full-1']));
      expect(i.Config.Entrypoint).toEqual(['sh', '-c']);
      expect(i.Config.Cmd).toEqual(['echo "$COLOR $JACO_REPLICA" > /data/hello; exec sleep 3600']);
      expect(i.Config.ExposedPorts).toEqual({ '18231/tcp': {} });
      expect(i.Config.Healthcheck).toEqual({ Test: ['CMD-SHELL', 'test -f /data/hello'], Interval: 1e9, Timeout: 1e9, Retries: 2 });
      expect((i.Config as { StopSignal?: string }).StopSignal).toBe('SIGINT');
      expect((i.Config as { StopTimeout?: number }).StopTimeout).toBe(3);
      expect(i.HostConfig).toMatchObject({ NetworkMode: 'host', RestartPolicy: { Name: 'no' }, NanoCpus: 250_000_000, Memory: 64 * 1024 * 1024 });
      const mounts = i.Mounts.map((m) => ({ type: m.Type, name: m.Name, source: m.Type === 'bind' ? m.Source : undefined, to: m.Destination, rw: m.RW }));
      expect(mounts).toEqual(
        expect.arrayContaining([
          { type: 'volume', name: `jaco-${c.uid.slice(0, 8)}-${NODE}-demo-data`, source: undefined, to: '/data', rw: true },
          { type: 'bind', name: undefined, source: outDir, to: '/out', rw: false },
        ]),
      );
      // Healthy means the command ran and wrote into the named volume, created with jaco's labels.
      const vol = await c.docker.getVolume(`jaco-${c.uid.slice(0, 8)}-${NODE}-demo-data`).inspect();
      expect(vol.Labels).toMatchObject({ [LABELS.cluster]: c.uid, [LABELS.node]: NODE, [LABELS.deployment]: 'demo' });
    }));

  it('passes GPUs as device requests, and reports Docker’s refusal to start without a GPU runtime', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired(NODE, 'demo-gpu-1', { ...SLEEPER, resources: { gpus: 1 } }, { service: 'gpu' }));
      const s = await waitObserved(c.store, NODE, 'demo-gpu-1', (x) => x.state === 'exited' && x.code === 'start_failed', 'exited/start_failed');
      expect(s.details).toMatch(/device driver|gpu/i);
      const i = await inspect(s.containerId!);
      expect(i.HostConfig.DeviceRequests).toEqual([expect.objectContaining({ Count: 1, Capabilities: [['gpu']] })]);
      await deleteDesired(c.store, NODE, 'demo-gpu-1');
    }));

  it('a pull from a closed registry reports registry_unreachable and does not block another replica', () =>
    c.withLogs(async () => {
      const failuresBefore = (await metric(metrics, 'jaco_agent_image_pulls_total', 'result="failure"')) ?? 0;
      await putDesired(c.store, desired(NODE, 'demo-nopull-1', { image: UNPULLABLE }, { service: 'nopull' }), desired(NODE, 'demo-ok-1', { ...SLEEPER, image: IMAGE_2 }, { service: 'ok' }));
      const bad = await waitObserved(c.store, NODE, 'demo-nopull-1', (x) => x.state === 'pending' && x.code === 'registry_unreachable', 'pending/registry_unreachable');
      expect(bad.details).toContain(`${UNPULLABLE}: `);
      expect(bad.details).toMatch(/connection refused/);
      await running('demo-ok-1');
      // Still retrying, still pending (never "failed": the scheduler decides that).
      await eventually(async () => ((await metric(metrics, 'jaco_agent_image_pulls_total', 'result="failure"')) ?? 0) >= failuresBefore + 2, { what: 'a second pull attempt' });
      expect((await observedStatus(c.store, NODE, 'demo-nopull-1'))?.state).toBe('pending');
      expect(readFileSync(c.agent(NODE)!.logFile, 'utf8')).toMatch(/image pull failed; will retry/);
      await deleteDesired(c.store, NODE, 'demo-nopull-1');
      await eventually(async () => !(await observedStatus(c.store, NODE, 'demo-nopull-1')), { what: 'the observed key of the removed replica gone' });
    }));

  it('a failing health check shows degraded', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired(NODE, 'demo-sick-1', { ...SLEEPER, healthcheck: { test: ['CMD', 'false'], interval: '1s', timeout: '1s', retries: 1 } }, { service: 'sick' }));
      const s = await waitObserved(c.store, NODE, 'demo-sick-1', (x) => x.state === 'degraded', 'degraded');
      expect(s).toMatchObject({ code: 'unhealthy', health: 'unhealthy' });
      expect(s.lastHealthAt).toBeDefined();
      await deleteDesired(c.store, NODE, 'demo-sick-1');
    }));
});

describe('stopping', () => {
  it('a removed replica is stopped with the service’s signal (the container traps it), removed, and forgotten', () =>
    c.withLogs(async () => {
      const script = `trap 'echo got USR1 >> /out/signals; exit 0' USR1; while :; do sleep 0.2; done`;
      await putDesired(c.store, desired(NODE, 'demo-trap-1', { image: IMAGE, command: ['sh', '-c', script], stopSignal: 'SIGUSR1', stopGracePeriod: '20s', volumes: [{ type: 'bind', source: outDir, target: '/out' }] }, { service: 'trap' }));
      const s = await running('demo-trap-1');
      await deleteDesired(c.store, NODE, 'demo-trap-1');
      await eventually(async () => !(await observedStatus(c.store, NODE, 'demo-trap-1')), { what: 'observed key deleted' });
      expect(readFileSync(join(outDir, 'signals'), 'utf8')).toBe('got USR1\n');
      await expect(inspect(s.containerId!)).rejects.toMatchObject({ statusCode: 404 });
    }));

  it('a container trapping SIGTERM (the default stop signal) logs it and exits on its own', () =>
    c.withLogs(async () => {
      const spec = { image: IMAGE, command: ['sh', '-c', `trap 'echo got SIGTERM; exit 0' TERM; echo ready; while :; do sleep 0.2; done`], stopGracePeriod: '20s' };
      await putDesired(c.store, desired(NODE, 'demo-term-1', spec, { service: 'term' }));
      const s = await running('demo-term-1');
      // Suspended: stopped like any stop, and the container is kept, so its log can be read.
      await putDesired(c.store, desired(NODE, 'demo-term-1', spec, { service: 'term', suspended: { reason: 'test', at: new Date().toISOString() } }));
      const i = await eventually(async () => {
        const x = await inspect(s.containerId!);
        return x.State.Running ? undefined : x;
      }, { what: 'the container stopped' });
      expect(i.State.ExitCode).toBe(0);
      const logs = (await c.docker.getContainer(s.containerId!).logs({ stdout: true, stderr: true })).toString('utf8');
      expect(logs).toContain('got SIGTERM');
      await deleteDesired(c.store, NODE, 'demo-term-1');
    }));

  it('a container ignoring the signal is killed after the grace (seen on a suspended replica, which keeps its container)', () =>
    c.withLogs(async () => {
      // Written aside and renamed: a SIGKILL between the redirect's truncation and the write left
      // the file empty once (a clean run), which read as "never alive".
      const script = `trap '' TERM; while :; do date +%s > /out/alive.new && mv /out/alive.new /out/alive; sleep 0.2; done`;
      const spec = { image: IMAGE, command: ['sh', '-c', script], stopGracePeriod: '2s', volumes: [{ type: 'bind' as const, source: outDir, target: '/out' }] };
      await putDesired(c.store, desired(NODE, 'demo-stubborn-1', spec, { service: 'stubborn' }));
      const s = await running('demo-stubborn-1');
      const asked = Date.now();
      await putDesired(c.store, desired(NODE, 'demo-stubborn-1', spec, { service: 'stubborn', suspended: { reason: 'drain_forced', at: new Date().toISOString() } }));
      const stopped = await waitObserved(c.store, NODE, 'demo-stubborn-1', (x) => x.state === 'stopped', 'stopped');
      expect(stopped).toMatchObject({ code: 'drain_forced', containerId: s.containerId });
      const i = await eventually(async () => {
        const x = await inspect(s.containerId!);
        return x.State.Running ? undefined : x;
      }, { what: 'the container stopped' });
      expect(i.State.ExitCode).toBe(137); // SIGKILL
      // It was still alive at least ~the grace after the stop was asked for.
      const lastAlive = Number(readFileSync(join(outDir, 'alive'), 'utf8'));
      expect(lastAlive).toBeGreaterThanOrEqual(Math.floor(asked / 1000 + 1.5));
      // Unsuspended: the same container starts again.
      await putDesired(c.store, desired(NODE, 'demo-stubborn-1', spec, { service: 'stubborn' }));
      const back = await running('demo-stubborn-1');
      expect(back.containerId).toBe(s.containerId);
      await deleteDesired(c.store, NODE, 'demo-stubborn-1');
    }));
});

describe('replacing and restarting', () => {
  it('a spec-hash change replaces the container start-first', () =>
    c.withLogs(async () => {
      const spec = { ...SLEEPER, update: { minReadyTime: '2s' } };
      await putDesired(c.store, desired(NODE, 'demo-roll-1', spec, { service: 'roll' }));
      const v1 = await running('demo-roll-1');
      const watch = sampler(async () => {
        const list = await c.docker.listContainers({ filters: { label: [`${LABELS.cluster}=${c.uid}`, `${LABELS.replica}=demo-roll-1`] } });
        return { running: list.length, observed: await observedStatus(c.store, NODE, 'demo-roll-1') };
      }, 100);
      const d2 = desired(NODE, 'demo-roll-1', { ...spec, env: { VERSION: '2' } }, { service: 'roll', revision: 2 });
      await putDesired(c.store, d2);
      const v2 = await waitObserved(c.store, NODE, 'demo-roll-1', (x) => x.state === 'running' && x.revision === 2 && !x.replacing, 'running revision 2 with the old one gone');
      const samples = await watch.stop();
      expect(v2.specHash).toBe(d2.spec.specHash);
      expect(v2.containerId).not.toBe(v1.containerId);
      // Both ran at once, and while they did the report described the new one and the old one.
      expect(samples.some((x) => x.running === 2)).toBe(true);
      expect(samples.every((x) => x.running >= 1)).toBe(true);
      expect(samples.some((x) => x.observed?.revision === 2 && x.observed.replacing?.containerId === v1.containerId && x.observed.replacing?.state === 'running')).toBe(true);
      await expect(inspect(v1.containerId!)).rejects.toMatchObject({ statusCode: 404 });
    }));

  it('a restart command is executed once and acknowledged', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired(NODE, 'demo-rs-1', SLEEPER, { service: 'rs' }));
      const first = await running('demo-rs-1');
      await putCommand(c.store, NODE, 'demo-rs-1', 1);
      const after = await waitObserved(c.store, NODE, 'demo-rs-1', (x) => x.state === 'running' && x.ackedCommand === 1, 'running with ackedCommand 1');
      expect(after.containerId).not.toBe(first.containerId);
      // The same command again (rewritten, same seq) does nothing; the container stays.
      await putCommand(c.store, NODE, 'demo-rs-1', 1);
      const hb = async () => (await c.store.get<{ spec: { time: string } }>(keys.heartbeat(NODE)))?.value.spec.time;
      const t0 = await hb();
      await eventually(async () => (await hb()) !== t0 && (await hb()), { what: 'two more heartbeats' }).then(async (t1) => eventually(async () => (await hb()) !== t1, { what: 'another heartbeat' }));
      const still = await observedStatus(c.store, NODE, 'demo-rs-1');
      expect(still).toMatchObject({ state: 'running', containerId: after.containerId, ackedCommand: 1 });
      expect((await metric(metrics, 'jaco_agent_commands_total', 'op="restart"')) ?? 0).toBe(1);
    }));

  it('a container removed behind the agent’s back is reported (and not restarted by the agent)', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired(NODE, 'demo-gone-1', SLEEPER, { service: 'gone' }));
      const s = await running('demo-gone-1');
      await c.docker.getContainer(s.containerId!).remove({ force: true });
      const r = await waitObserved(c.store, NODE, 'demo-gone-1', (x) => x.code === 'container_removed', 'exited/container_removed', 20_000);
      expect(r).toMatchObject({ state: 'exited', containerId: s.containerId });
      expect(await c.containers(NODE).then((l) => l.filter((x) => x.Labels[LABELS.replica] === 'demo-gone-1'))).toEqual([]);
      // The scheduler's restart command brings it back.
      await putCommand(c.store, NODE, 'demo-gone-1', 1);
      const back = await waitObserved(c.store, NODE, 'demo-gone-1', (x) => x.state === 'running' && x.ackedCommand === 1, 'running again');
      expect(back.containerId).not.toBe(s.containerId);
    }));
});

describe('bad input', () => {
  it('a malformed desired key is observed failed/invalid_spec, counted, and the others go on', () =>
    c.withLogs(async () => {
      const before = (await metric(metrics, 'jaco_agent_malformed_desired_total')) ?? 0;
      const bad = desired(NODE, 'demo-bad-1', { image: IMAGE }, { service: 'bad' });
      const broken = { ...bad, spec: { ...bad.spec, revision: 'two' } };
      await commitActs(c.store, [{ ops: [{ op: 'put', key: keys.desired(NODE, 'demo-bad-1'), value: broken }] }]);
      await putDesired(c.store, desired(NODE, 'demo-good-1', SLEEPER, { service: 'good' }));
      const s = await waitObserved(c.store, NODE, 'demo-bad-1', (x) => x.state === 'failed', 'failed');
      expect(s).toMatchObject({ code: 'invalid_spec', deployment: 'demo', service: 'bad' });
      expect(s.details).toMatch(/revision/);
      await running('demo-good-1');
      expect(await metric(metrics, 'jaco_agent_malformed_desired_total')).toBeGreaterThan(before);
      expect((await c.containers(NODE)).some((x) => x.Labels[LABELS.replica] === 'demo-bad-1')).toBe(false);
    }));

  it('every container it runs carries its node label and host networking', async () => {
    const all = await c.containers();
    expect(all.length).toBeGreaterThan(0);
    expect(all.every((x) => x.Labels[LABELS.node] === NODE && x.HostConfig.NetworkMode === 'host')).toBe(true);
  });
});
