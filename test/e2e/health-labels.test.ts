// Issue 28 on the real thing, one cluster for all (etcd, `jaco controller all`, two `jaco agent`
// processes at 127.0.1.1-2 on the local Docker engine):
//   - an http health check run by the agent takes a replica out of routing (endpoints/) once its
//     endpoint fails, and the scheduler restarts it, as it does for an exec check;
//   - a tcp check passes against a listening port and holds a replica unhealthy on a closed one;
//   - `jaco node label` changes a node's labels at runtime and the rebalancer's conformance moves
//     a replica whose node no longer matches its nodeSelector;
//   - a job (mode: job) gates its dependents (service_completed_successfully); a failing one holds
//     them with its reason until a changed spec succeeds; a finished job's lost key is not re-run.
// Timings are printed, not asserted (no wall-clock speed asserts); the order of events is asserted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { commitActs } from '../../src/store/writer.js';
import type { DeploymentStatus, Endpoints, ReplicaObserved } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { execIn } from '../support/docker-exec.js';
import { nodeAddress } from '../support/ingress.js';
import { eventually } from '../support/wait.js';

const NODES = ['node-1', 'node-2'];

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 0, controllers: 'all' });
  await Promise.all(NODES.map((n) => c.startAgent(n, ['--address', nodeAddress(n), ...(n === 'node-1' ? ['--labels', 'disk=ssd'] : [])])));
}, 60_000);
afterAll(async () => {
  await c?.stop();
});

/** A busybox httpd on its node's address and a dynamic port, serving /tmp/www (ok.html: the health page). */
const HTTPD = `
      image: jaco-demo/busybox:1
      ports: [{ name: http, containerPort: 80 }]
      command: [sh, -c]
      args:
        - >-
          trap "exit 0" TERM;
          mkdir -p /tmp/www; echo ok > /tmp/www/ok.html;
          httpd -f -p "$JACO_NODE_ADDRESS:$PORT" -h /tmp/www & wait
      stopGracePeriod: 1s`;

const manifest = `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: hc }
spec:
  services:
    web:${HTTPD}
      replicas: 2
      healthcheck:
        http: { path: /ok.html, port: http }
        interval: 1s
        timeout: 1s
        retries: 2
    tcp:${HTTPD}
      healthcheck: { tcp: { port: http }, interval: 1s, timeout: 1s, retries: 2 }
    closed:
      image: jaco-demo/busybox:1
      command: [sleep, '3600']
      stopGracePeriod: 1s
      healthcheck: { tcp: { port: 1 }, interval: 1s, timeout: 1s, retries: 2 }
`;

const endpointsOf = async (svc: string) => (await c.store.get<Endpoints>(keys.endpoints('hc', svc)))?.value.spec.addresses ?? [];
const observedOf = async (node: string, replica: string) => (await c.store.get<ReplicaObserved>(keys.observed(node, replica)))?.value.status;

describe('http and tcp health checks run by the agent', () => {
  it('an http check takes a failing replica out of routing, and the scheduler restarts it', () =>
    c.withLogs(async () => {
      await c.apply(manifest);
      const eps = await eventually(async () => ((await endpointsOf('web')).length === 2 ? endpointsOf('web') : undefined), { what: 'two routed replicas of hc/web', timeoutMs: 60_000 });
      const victim = eps[0]!;
      const before = await observedOf(victim.node, victim.replica);
      expect(before).toMatchObject({ state: 'running', health: 'healthy' });
      // Docker runs no check of its own: the container's health is the agent's.
      const ctr = c.docker.getContainer(before!.containerId!);
      expect((await ctr.inspect()).Config.Healthcheck?.Test).toEqual(['NONE']);

      // The endpoint starts failing (404): out of routing, the other replica stays.
      const t0 = Date.now();
      expect((await execIn(ctr, ['rm', '/tmp/www/ok.html'])).code).toBe(0);
      await eventually(async () => !(await endpointsOf('web')).some((e) => e.replica === victim.replica), { what: `${victim.replica} out of endpoints`, intervalMs: 50, timeoutMs: 15_000 });
      const outMs = Date.now() - t0;
      console.log(`http check: ${victim.replica} left routing ${outMs} ms after its endpoint started failing`);
      expect((await endpointsOf('web')).map((e) => e.replica)).toEqual([eps[1]!.replica]);

      // Why, in its observed state; then a restart (a fresh container), healthy and routed again.
      const restarted = await eventually(
        async () => {
          const s = await observedOf(victim.node, victim.replica);
          return s?.containerId !== before!.containerId && s?.health === 'healthy' ? s : undefined;
        },
        { what: `${victim.replica} restarted and healthy`, timeoutMs: 30_000 },
      );
      expect(restarted.state).toBe('running');
      const audit = await c.jaco(['audit', '--type', 'replica_restarted']);
      expect(audit.stdout).toContain(victim.replica);
      await eventually(async () => (await endpointsOf('web')).length === 2, { what: 'both replicas routed again', timeoutMs: 15_000 });
    }), 120_000);

  it('a tcp check passes on a listening port and holds a replica unhealthy on a closed one, with the reason', () =>
    c.withLogs(async () => {
      await eventually(async () => (await endpointsOf('tcp')).length === 1, { what: 'hc/tcp routed', timeoutMs: 30_000 });
      const closed = (await c.desired()).find((d) => d.spec.deployment === 'hc' && d.spec.service === 'closed')!;
      const s = await eventually(
        async () => {
          const o = await observedOf(closed.spec.node, closed.spec.replica);
          return o?.code === 'unhealthy' ? o : undefined;
        },
        { what: 'hc/closed unhealthy', timeoutMs: 30_000 },
      );
      expect(s.state).toBe('degraded');
      expect(s.details).toMatch(/ECONNREFUSED .*:1\)/);
      expect(await endpointsOf('closed')).toEqual([]);
      await c.jaco(['delete', 'deployment', 'hc']);
    }), 60_000);
});

describe('jaco node label', () => {
  const selectorManifest = `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: lb }
spec:
  services:
    ssd:
      image: jaco-demo/busybox:1
      command: [sleep, '3600']
      stopGracePeriod: 1s
      update: { minReadyTime: 1s }
      placement: { nodeSelector: { disk: ssd } }
`;
  const replicaNode = async () => (await c.desired()).filter((d) => d.spec.deployment === 'lb').map((d) => d.spec.node);

  it('a label changed at runtime moves a replica whose node no longer matches; the agent’s own labels stay the agent’s', () =>
    c.withLogs(async () => {
      await c.apply(selectorManifest);
      // Only node-1 carries disk=ssd (its agent's --labels).
      await eventually(async () => ((await c.replicasNotRunning('lb')).length === 0 && (await replicaNode()).join() === 'node-1' ? true : undefined), { what: 'lb/ssd running on node-1', timeoutMs: 30_000 });

      // node-2 gains the label, node-1's own is overridden: the rebalancer's conformance moves it.
      const t0 = Date.now();
      for (const [n, l] of [['node-2', 'disk=ssd'], ['node-1', 'disk=hdd']]) {
        const r = await c.jaco(['node', 'label', n!, l!]);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toBe(`node/${n} labeled (${l})\n`);
      }
      await eventually(async () => ((await replicaNode()).join() === 'node-2' && (await c.replicasNotRunning('lb')).length === 0 ? true : undefined), { what: 'lb/ssd moved to node-2', timeoutMs: 30_000 });
      console.log(`node label: the replica ran on node-2 alone ${Date.now() - t0} ms after the labels changed`);
      const moved = await c.jaco(['audit', '--type', 'rebalance_moved,node_labeled', '-o', 'json']);
      const events = moved.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; payload: Record<string, unknown> });
      expect(events.filter((e) => e.type === 'node_labeled').map((e) => e.payload)).toEqual([
        { node: 'node-2', set: { disk: 'ssd' }, removed: [] },
        { node: 'node-1', set: { disk: 'hdd' }, removed: [] },
      ]);
      expect(events.find((e) => e.type === 'rebalance_moved')?.payload).toMatchObject({ src: 'node-1', dst: 'node-2', trigger: 'placement' });

      // Shown beside the agent's own; the agent's own is not the CLI's to remove.
      const wide = await c.jaco(['get', 'nodes', '-o', 'wide']);
      expect(wide.stdout).toContain('disk=hdd (runtime, agent: ssd)');
      const rev = (await c.store.get(keys.node('node-2')))!.modRevision;
      const refused = await c.jaco(['node', 'label', 'node-2', 'zone-']);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain('node node-2 has no label zone');
      const bad = await c.jaco(['node', 'label', 'node-2', 'zone=a b']);
      expect(bad.stderr).toContain('"zone=a b": "a b" is not a valid label value');
      // Refused: nothing written.
      expect((await c.store.get(keys.node('node-2')))!.modRevision).toBe(rev);
      // Removing the override gives node-1 its agent's label back.
      expect((await c.jaco(['node', 'label', 'node-1', 'disk-'])).stdout).toBe('node/node-1 labeled (disk-)\n');
      expect((await c.jaco(['describe', 'node', 'node-1'])).stdout).toMatch(/Labels: +disk=ssd\n/);
      await c.jaco(['delete', 'deployment', 'lb']);
    }), 60_000);
});


describe('one-off jobs (mode: job)', () => {
  const jobs = (name: string, migrate: string) => `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: ${name} }
spec:
  services:
    migrate:
      image: jaco-demo/busybox:1
      mode: job
      job: { attempts: 2, backoff: 1s }
      command: [sh, -c, '${migrate}']
    app:
      image: jaco-demo/busybox:1
      command: [sleep, '3600']
      stopGracePeriod: 1s
      dependsOn: { migrate: { condition: service_completed_successfully } }
`;
  const statusOf = async (dep: string) => (await c.store.get<DeploymentStatus>(keys.deploymentStatus(dep)))?.value.status?.scheduling?.services;
  const desiredOf = async (dep: string, svc: string) => (await c.desired()).filter((d) => d.spec.deployment === dep && d.spec.service === svc);

  it('a migration gates its dependents; a failing one holds them with its reason until a changed spec succeeds; a finished job never runs again', () =>
    c.withLogs(async () => {
      const t0 = Date.now();
      // One after the other: applies are compare-and-swap on the whole store.
      await c.apply(jobs('jobok', 'sleep 1; exit 0'));
      await c.apply(jobs('jobbad', 'exit 3'));

      // The good one: app is held while migrate runs, placed once it exited 0.
      const held = await eventually(async () => ((await statusOf('jobok'))?.app?.waitingForDependency?.[0] ? (await statusOf('jobok'))!.app!.waitingForDependency! : undefined), { what: 'jobok/app held', timeoutMs: 15_000 });
      expect(held[0]).toMatch(/^migrate \((not run yet|running)/);
      const ok = await eventually(async () => ((await statusOf('jobok'))?.migrate?.job?.state === 'succeeded' ? (await statusOf('jobok'))!.migrate!.job! : undefined), { what: 'jobok/migrate succeeded', timeoutMs: 30_000 });
      expect(ok).toMatchObject({ state: 'succeeded', attempts: 1, exitCode: 0, reason: 'succeeded after 1 attempt' });
      expect(ok.durationMs).toBeGreaterThanOrEqual(900);
      const [app] = await eventually(async () => ((await desiredOf('jobok', 'app')).length ? desiredOf('jobok', 'app') : undefined), { what: 'jobok/app placed', timeoutMs: 15_000 });
      expect(Date.parse(app!.spec.placedAt)).toBeGreaterThanOrEqual(Date.parse(ok.finishedAt!));
      console.log(`jobs: jobok/app placed ${Date.now() - t0} ms after apply (migrate ran ${ok.durationMs} ms)`);
      expect((await c.jaco(['describe', 'service', 'jobok/migrate'])).stdout).toMatch(/\nJob: +succeeded after 1 attempt in \d+m?s \(revision 1\), exit code 0\n/);

      // The failing one: run twice (attempts 2), then failed; app held with the reason.
      const bad = await eventually(async () => ((await statusOf('jobbad'))?.migrate?.job?.state === 'failed' ? statusOf('jobbad') : undefined), { what: 'jobbad/migrate failed', timeoutMs: 30_000 });
      expect(bad!.migrate!.job).toMatchObject({ state: 'failed', attempts: 2, exitCode: 3, reason: 'exit 3 after 2 attempts' });
      await eventually(async () => ((await statusOf('jobbad'))?.app?.waitingForDependency?.[0] === 'migrate (failed: exit 3 after 2 attempts)' ? true : undefined), { what: 'jobbad/app held with the reason', timeoutMs: 15_000 });
      expect(await desiredOf('jobbad', 'app')).toEqual([]);
      const shown = await c.jaco(['status', 'jobbad']);
      expect(shown.stdout).toContain('migrate: job failed: exit 3 after 2 attempts');
      expect(shown.stdout).toContain('waiting_for_dependency: migrate (failed: exit 3 after 2 attempts)');
      const audit = await c.jaco(['audit', '--type', 'job_retried,job_succeeded,job_failed', '-o', 'json']);
      const events = audit.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; deployment: string; payload: Record<string, unknown> });
      expect(events.map((e) => `${e.type} ${e.deployment}`).sort()).toEqual(['job_failed jobbad', 'job_retried jobbad', 'job_succeeded jobok']);

      // A changed spec runs afresh (new replica ids) and releases the dependents.
      const [oldRun] = await desiredOf('jobbad', 'migrate');
      await c.apply(jobs('jobbad', 'exit 0'));
      await eventually(async () => ((await desiredOf('jobbad', 'app')).length === 1 ? true : undefined), { what: 'jobbad/app placed after the fixed job', timeoutMs: 30_000 });
      const runs = await desiredOf('jobbad', 'migrate');
      expect(runs.map((d) => d.spec.replica)).not.toContain(oldRun!.spec.replica);
      expect((await statusOf('jobbad'))!.migrate!.job).toMatchObject({ state: 'succeeded', attempts: 1 });

      // A finished job's lost desired key is not placed again: the scheduler reports it gone, and runs nothing.
      const [done] = await desiredOf('jobok', 'migrate');
      await commitActs(c.store, [{ ops: [{ op: 'delete', key: keys.desired(done!.spec.node, done!.spec.replica) }] }]);
      await eventually(async () => ((await statusOf('jobok'))?.migrate?.placed === 0 ? true : undefined), { what: 'the scheduler saw jobok/migrate gone', timeoutMs: 15_000 });
      expect(await desiredOf('jobok', 'migrate')).toEqual([]);
      expect((await statusOf('jobok'))!.migrate!.job).toMatchObject({ state: 'succeeded', specHash: ok.specHash });
      await Promise.all([c.jaco(['delete', 'deployment', 'jobok']), c.jaco(['delete', 'deployment', 'jobbad'])]);
      console.log(`jobs: case took ${Date.now() - t0} ms`);
    }), 90_000);
});
