// Conservative inaction (seed 000's acceptance), on real processes: under uniform load the
// rebalancer moves nothing (the imbalance gap stops its cycles), and with no pressure data at all
// it produces zero audit events.
//
// Uniform load is memory, not CPU: every node runs one `global` replica holding ~100 MB against a
// declared 100Mi of memory, so every node sits at ~0.9 pressure whatever else the shared test
// machine is doing (CPU shares on a loaded 2-core machine are anything but uniform). The
// rebalancer starts only once the nodes are loaded, so it never sees a transient imbalance while
// the replicas fill their memory.
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Heartbeat } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { cli, metric, rebalancerAudit, rebalancerMetricsUrl } from './rebalancer-fixtures.js';

const clusters: TestCluster[] = [];
afterAll(async () => {
  await Promise.all(clusters.map((c) => c.stop()));
});

const UNIFORM = `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: busy
spec:
  services:
    hog:
      image: jaco-demo/busybox:1
      placement:
        mode: global
      command: [sh, -c, 'x=$(yes | head -c 100000000); while :; do sleep 1; done']
      stopGracePeriod: 1s
    worker:
      image: jaco-demo/busybox:1
      replicas: 3
      command: [sleep, '3600']
      stopGracePeriod: 1s
`;

/** Waits until the rebalancer leader has run at least n cycles; returns its metrics URL. */
async function cycles(c: TestCluster, n: number): Promise<string> {
  const url = await rebalancerMetricsUrl(c);
  await eventually(async () => ((await metric(url, 'jaco_rebalance_cycle_duration_seconds_count')) ?? 0) >= n, { what: `${n} rebalancer cycles`, timeoutMs: 90_000 });
  return url;
}

interface PlanJson {
  source: string;
  plan: { stoppedBy: string; nodes: { node: string; pressure: number; dominant: string }[]; silent: { node: string; why: string }[]; gates: { gate: string; holds: boolean | null }[] };
}

describe('the rebalancer stays quiet', () => {
  it('uniform load on every node: the imbalance gap stops the cycles, nothing moves', async () => {
    const c = await startCluster({ nodes: 3, capacity: 'cpu=1,memory=100Mi', controllers: ['scheduler'] });
    clusters.push(c);
    await c.withLogs(async () => {
      await c.apply(UNIFORM);
      await eventually(
        async () => {
          for (const n of ['node-1', 'node-2', 'node-3']) {
            const p = (await c.store.get<Heartbeat>(keys.heartbeat(n)))?.value.spec.pressure;
            if (!p || p.memoryUtil < 0.85 || !p.replicas[`busy-hog-${n}`] || Object.keys(p.replicas).length !== 2) return false;
          }
          return true;
        },
        { what: 'every node at ≥ 0.85 memory with its hog and one worker', timeoutMs: 90_000 },
      );
      await c.startControllers(['rebalancer']);
      // Six cycles: the consecutive-cycles gate (2) holds from the second, so four chances to move.
      const url = await cycles(c, 6);
      // No move (seed 000: "under uniform load, no moves happen").
      const records = await rebalancerAudit(c);
      expect(records.filter((r) => r.type === 'rebalance_moved'), JSON.stringify(records)).toEqual([]);
      expect(await metric(url, 'jaco_rebalance_gate', 'gate="imbalance_gap"')).toBe(1);
      expect(await metric(url, 'jaco_rebalance_moves_total', 'trigger="pressure"')).toBe(0);
      expect(await metric(url, 'jaco_rebalance_moves_total', 'trigger="spread"')).toBe(0);
      for (const n of ['node-1', 'node-2', 'node-3']) expect(await metric(url, 'jaco_node_pressure', `node="${n}",dimension="memory"`)).toBeGreaterThanOrEqual(0.85);

      const plan = JSON.parse(await cli(c, ['rebalance', 'plan', '-o', 'json'])) as PlanJson;
      expect(plan.source).toBe('leader');
      expect(plan.plan.stoppedBy).toBe('imbalance_gap');
      expect(plan.plan.nodes.map((n) => n.dominant)).toEqual(['memory', 'memory', 'memory']);
      expect(Object.fromEntries(plan.plan.gates.map((g) => [g.gate, g.holds]))).toMatchObject({ trigger_threshold: true, consecutive_cycles: true, imbalance_gap: false });
      // Nothing moved: every replica is where the scheduler put it.
      expect((await c.desired()).filter((d) => d.spec.move)).toEqual([]);
    });
  });

  it('no pressure data anywhere (Docker unreachable on every node): zero audit events', async () => {
    const c = await startCluster({ nodes: 0, controllers: ['rebalancer'] });
    clusters.push(c);
    await c.withLogs(async () => {
      // Real agents whose Docker engine does not answer: they heartbeat without a pressure sample.
      await c.etcd.addNodes?.(['node-1', 'node-2', 'node-3']);
      for (const n of ['node-1', 'node-2', 'node-3'])
        c.spawn(n, ['agent', '--node', n, '--capacity', 'cpu=1,memory=1Gi', '--docker-host', 'unix:///nonexistent/docker.sock', '--metrics-addr', '127.0.0.1:0']);
      await eventually(async () => (await c.store.list<Heartbeat>(keys.heartbeats())).items.length === 3, { what: 'three heartbeats', timeoutMs: 60_000 });
      const hbs = (await c.store.list<Heartbeat>(keys.heartbeats())).items.map((h) => h.value.spec);
      expect(hbs.every((h) => !h.pressure && !h.dockerUp)).toBe(true);
      const url = await cycles(c, 4);
      expect(await rebalancerAudit(c)).toEqual([]);
      expect(await metric(url, 'jaco_rebalance_gate', 'gate="pressure_data"')).toBe(1);
      const plan = JSON.parse(await cli(c, ['rebalance', 'plan', '-o', 'json'])) as PlanJson;
      expect(plan.plan.stoppedBy).toBe('pressure_data');
      expect(plan.plan.silent).toEqual(['node-1', 'node-2', 'node-3'].map((node) => ({ node, why: 'no fresh pressure sample' })));
    });
  });
});
