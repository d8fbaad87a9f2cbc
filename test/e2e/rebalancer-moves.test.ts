// The rebalancer on real containers (seed 000's acceptance): three `jaco agent` processes share
// the local Docker engine, the scheduler and the rebalancer run as `jaco controller` processes
// with fast timings (2 s cycles, a 6 s EWMA window). A CPU burner pinned to node-1 (placement
// hosts) runs next to a movable stateless replica that also burns CPU; node-1 goes over the
// trigger, and within a bounded number of cycles the movable replica — and only it — moves to a
// cooler node, visible in the audit log, in the metrics and in `jaco rebalance plan`.
//
// Capacity is declared as cpu=100m per node and both burners carry CPU limits (300m and 50m). The
// test machine is small and shared (2 cores, often a load of 10 or more), so the margins are wide:
// the burner alone makes node-1 hot as soon as it gets 85m of CPU, the test never takes more than
// 0.35 of a core, and the worker's measured relief (up to 0.5) clears the relief floor while its
// destination stays under the 0.75 dst cap.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { AuditEvent } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { cli, metric, rebalancerAudit, rebalancerMetricsUrl } from './rebalancer-fixtures.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 3, capacity: 'cpu=100m,memory=2Gi', controllers: ['scheduler', 'rebalancer'] });
});
afterAll(async () => {
  await c?.stop();
});

const MANIFEST = `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: hot
spec:
  services:
    burner:
      image: jaco-demo/busybox:1
      placement:
        mode: hosts
        hosts: [node-1]
      command: [sh, -c, 'while :; do :; done']
      resources:
        cpu: 300m
      stopGracePeriod: 1s
    worker:
      image: jaco-demo/busybox:1
      replicas: 1
      command: [sh, -c, 'while :; do :; done']
      resources:
        cpu: 50m
      stopGracePeriod: 1s
`;

const where = async (replica: string) =>
  (await c.desired())
    .filter((d) => d.spec.replica === replica)
    .map((d) => d.spec.node)
    .sort();

const moves = async () => (await rebalancerAudit(c)).filter((e) => e.type === 'rebalance_moved');

describe('rebalancer on real containers', () => {
  it('moves the movable replica off the hot node, once, and leaves the pinned burner', () =>
    c.withLogs(async () => {
      // Only node-1 takes placements while the deployment is applied.
      await cli(c, ['node', 'cordon', 'node-2']);
      await cli(c, ['node', 'cordon', 'node-3']);
      await c.apply(MANIFEST);
      await eventually(async () => {
        const running = (await c.observed()).filter((o) => o.status.node === 'node-1' && o.status.state === 'running').map((o) => o.status.replica);
        return running.includes('hot-burner-0') && running.includes('hot-worker-0');
      }, { what: 'burner and worker running on node-1', timeoutMs: 60_000 });

      // node-1 is hot but no other node may take a move: the worker is skipped, nothing moves.
      const skipped = await eventually(
        async () => (await rebalancerAudit(c)).find((e) => e.type === 'rebalance_skipped' && e.payload.replica_id === 'hot-worker-0' && e.payload.reason === 'no_eligible_dst'),
        { what: 'the worker skipped with no_eligible_dst', timeoutMs: 60_000 },
      );
      expect(skipped.payload).toMatchObject({ src: 'node-1', dominant: 'cpu', deployment: 'hot', service: 'worker' });
      expect(Number(skipped.payload.src_pressure_before)).toBeGreaterThanOrEqual(0.85);
      expect(await moves()).toEqual([]);

      await cli(c, ['node', 'uncordon', 'node-2']);
      await cli(c, ['node', 'uncordon', 'node-3']);
      const moved = await eventually(async () => (await moves())[0], { what: 'a rebalance_moved record', timeoutMs: 60_000 });
      const p = moved.payload;
      expect(p).toMatchObject({ replica_id: 'hot-worker-0', deployment: 'hot', service: 'worker', src: 'node-1', dominant: 'cpu', move_cost: 0.01, relief_source: 'measured' });
      expect(['node-2', 'node-3']).toContain(p.dst);
      expect(Number(p.src_pressure_before)).toBeGreaterThanOrEqual(0.85);
      expect(Number(p.relief)).toBeGreaterThanOrEqual(0.1);
      expect(Number(p.dst_pressure_after)).toBeLessThan(0.75);
      for (const k of ['score', 'dst_pressure_before', 'src_pressure_after']) expect(typeof p[k]).toBe('number');

      // Make-before-break: the copy on dst runs, then the one on node-1 goes.
      await eventually(async () => (await rebalancerAudit(c)).some((e) => e.type === 'rebalance_completed' && e.payload.replica_id === 'hot-worker-0'), {
        what: 'the move completed',
        timeoutMs: 60_000,
      });
      expect(await where('hot-worker-0')).toEqual([p.dst]);
      const obs = (await c.observed()).find((o) => o.status.replica === 'hot-worker-0' && o.status.node === p.dst);
      expect(obs?.status.state).toBe('running');
      await eventually(async () => !(await c.containers('node-1')).some((x) => x.Labels[LABELS.replica] === 'hot-worker-0'), {
        what: "node-1's agent removing the worker's old container",
        timeoutMs: 30_000,
      });

      // node-1 stays hot (the burner), but the burner is pinned: it is skipped, never moved.
      const pinned = await eventually(
        async () => (await rebalancerAudit(c)).find((e) => e.type === 'rebalance_skipped' && e.payload.replica_id === 'hot-burner-0' && e.payload.reason === 'anti_affinity'),
        { what: 'the pinned burner skipped with anti_affinity', timeoutMs: 60_000 },
      );
      expect(pinned.payload.src).toBe('node-1');
      expect(await where('hot-burner-0')).toEqual(['node-1']);
      expect((await moves()).map((m) => m.payload.replica_id)).toEqual(['hot-worker-0']);

      // The audit CLI shows the move.
      const out = await cli(c, ['audit', '--type', 'rebalance_moved']);
      expect(out).toContain('replica_id=hot-worker-0');
      expect(out).toContain('src=node-1');

      // Metrics of the leader.
      const url = await rebalancerMetricsUrl(c);
      expect(await metric(url, 'jaco_rebalance_moves_total', 'trigger="pressure"')).toBe(1);
      expect(await metric(url, 'jaco_rebalance_move_outcomes_total', 'outcome="completed"')).toBe(1);
      expect(await metric(url, 'jaco_rebalance_skips_total', 'reason="no_eligible_dst"')).toBeGreaterThanOrEqual(1);
      expect(await metric(url, 'jaco_node_pressure', 'node="node-1",dimension="cpu"')).toBeGreaterThan(0.5); // the burner alone
      expect(await metric(url, 'jaco_rebalance_cycle_duration_seconds_count')).toBeGreaterThan(5);
      const gates = await Promise.all(['trigger_threshold', 'consecutive_cycles', 'imbalance_gap', 'move_in_flight', 'candidates', 'none', 'pressure_data'].map((g) => metric(url, 'jaco_rebalance_gate', `gate="${g}"`)));
      expect(gates.reduce((a, b) => (a ?? 0) + (b ?? 0), 0)).toBe(1);
    }));

  it('jaco rebalance plan explains the leader’s current state, and recomputes without it', () =>
    c.withLogs(async () => {
      const fromLeader = JSON.parse(await cli(c, ['rebalance', 'plan', '-o', 'json'])) as { source: string; identity: string; plan: { nodes: { node: string; pressure: number; dominant: string }[]; gates: { gate: string }[]; src?: string } };
      expect(fromLeader.source).toBe('leader');
      expect(fromLeader.identity).toMatch(/metrics=http/);
      expect(fromLeader.plan.nodes.map((n) => n.node)).toEqual(['node-1', 'node-2', 'node-3']);
      expect(fromLeader.plan.src).toBe('node-1');
      expect(fromLeader.plan.nodes[0]!.dominant).toBe('cpu');
      expect(fromLeader.plan.gates.map((g) => g.gate)).toEqual(['pressure_data', 'trigger_threshold', 'consecutive_cycles', 'imbalance_gap', 'move_in_flight', 'candidates']);

      const text = await cli(c, ['rebalance', 'plan']);
      expect(text).toContain('Plan of the rebalancer leader');
      expect(text).toMatch(/GATE\s+HOLDS\s+DETAIL/);
      expect(text).toMatch(/node-1\s+\d\.\d\d/);

      const fromStore = JSON.parse(await cli(c, ['rebalance', 'plan', '--from-store', '-o', 'json'])) as { source: string; reason: string; plan: { nodes: unknown[]; assumptions: string[] } };
      expect(fromStore.source).toBe('store');
      expect(fromStore.plan.nodes).toHaveLength(3);
      expect(fromStore.plan.assumptions.length).toBeGreaterThan(0);

      // Explaining moves nothing.
      const auditBefore = (await c.store.list<AuditEvent>(keys.audits())).items.filter((i) => i.value.spec.type === 'rebalance_moved').length;
      await cli(c, ['rebalance', 'plan']);
      expect((await c.store.list<AuditEvent>(keys.audits())).items.filter((i) => i.value.spec.type === 'rebalance_moved').length).toBe(auditBefore);
    }));
});
