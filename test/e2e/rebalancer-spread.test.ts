// Spread restored on real containers (issue 17, e2e (a)): three agents share the local Docker
// engine; a spread service runs one replica per node. node-2's agent is stopped (SIGSTOP) until
// its replica is re-placed elsewhere, then resumed: the returned node gets a replica back through
// one rebalancer spread move, make-before-break — the service never runs fewer than its replicas
// while the spread is restored — and the move is in the audit log with trigger "spread". Then a
// placement change (hosts [node-1] → [node-2]) re-places a hosts service the same way: never
// fewer running than wanted, audited with trigger "placement", explained by its decision.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/api/types.js';
import { keys } from '../../src/api/keys.js';
import { sampler, startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 3, capacity: 'cpu=1,memory=2Gi', controllers: ['scheduler', 'rebalancer'] });
});
afterAll(async () => {
  await c?.stop();
});

const MANIFEST = `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: even
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      replicas: 3
      command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
      resources:
        cpu: 10m
        memory: 16Mi
      stopGracePeriod: 2s
`;

/** Replicas of even/web per node, by desired key (a moving replica counts on both nodes). */
const perNode = async () => {
  const out: Record<string, number> = {};
  for (const d of await c.desired()) if (d.spec.deployment === 'even') out[d.spec.node] = (out[d.spec.node] ?? 0) + 1;
  return out;
};
/** Distinct replicas of even/web observed running (on nodes other than `unless`, whose reports may be stale). */
const running = async (unless?: string) =>
  new Set((await c.observed()).filter((o) => o.status.deployment === 'even' && o.status.state === 'running' && o.status.node !== unless).map((o) => o.status.replica)).size;
const spreadMoves = async () => (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((s) => s.type === 'rebalance_moved' && s.payload.trigger === 'spread');

describe('spread restored when a node returns', () => {
  it('node-2 lost and back: its replica was re-placed, then one spread move gives it one again, never below 3 running', () =>
    c.withLogs(async () => {
      await c.apply(MANIFEST);
      await eventually(async () => JSON.stringify(await perNode()) === JSON.stringify({ 'node-1': 1, 'node-2': 1, 'node-3': 1 }) && (await running()) === 3, { what: 'one replica per node', timeoutMs: 60_000 });
      const agent = c.agent('node-2')!.child;
      agent.kill('SIGSTOP');
      try {
        // Lost past its lease and grace: its replica runs on node-1 or node-3.
        await eventually(async () => !(await perNode())['node-2'] && (await running('node-2')) === 3, { what: 'node-2’s replica re-placed and running', timeoutMs: 60_000 });
      } finally {
        agent.kill('SIGCONT');
      }
      const lopsided = await perNode();
      expect(Math.max(...Object.values(lopsided))).toBe(2);
      // From here on the service must never run fewer than its three replicas (make-before-break).
      const samples = sampler(() => running(), 200);
      try {
        await eventually(
          async () => JSON.stringify(await perNode()) === JSON.stringify({ 'node-1': 1, 'node-2': 1, 'node-3': 1 }) && (await running()) === 3,
          { what: 'spread restored to 1/1/1', timeoutMs: 120_000 },
        );
      } finally {
        const seen = await samples.stop();
        expect(seen.length).toBeGreaterThan(10);
        expect(Math.min(...seen)).toBeGreaterThanOrEqual(3);
      }
      const moves = await spreadMoves();
      expect(moves).toHaveLength(1);
      expect(moves[0]!.payload).toMatchObject({ dst: 'node-2', skew_before: 2 });
    }));
});

describe('placement changes re-place', () => {
  const pinned = (host: string) => MANIFEST.replace('name: even', 'name: pinned').replace('replicas: 3', `replicas: 1\n      placement: { mode: hosts, hosts: [${host}] }`);
  const on = async () => (await c.desired()).filter((d) => d.spec.deployment === 'pinned').map((d) => d.spec.node).sort();
  const up = async () => (await c.observed()).filter((o) => o.status.deployment === 'pinned' && o.status.state === 'running').length;

  it('hosts [node-1] → [node-2]: the replica moves make-before-break, never 0 running, audited and explained', () =>
    c.withLogs(async () => {
      await c.apply(pinned('node-1'));
      await eventually(async () => JSON.stringify(await on()) === '["node-1"]' && (await up()) === 1, { what: 'pinned/web running on node-1', timeoutMs: 60_000 });
      const samples = sampler(() => up(), 200);
      try {
        await c.apply(pinned('node-2'));
        await eventually(async () => JSON.stringify(await on()) === '["node-2"]' && (await up()) === 1, { what: 'pinned/web re-placed on node-2', timeoutMs: 90_000 });
      } finally {
        const seen = await samples.stop();
        expect(Math.min(...seen)).toBeGreaterThanOrEqual(1);
      }
      const moved = (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((s) => s.type === 'rebalance_moved' && s.payload.trigger === 'placement');
      expect(moved).toEqual([expect.objectContaining({ payload: expect.objectContaining({ replica_id: 'pinned-web-0', src: 'node-1', dst: 'node-2' }) })]);
      const explain = await c.jaco(['explain', 'pinned-web-0']);
      expect(explain.stdout).toContain('trigger rebalance');
      expect(explain.stdout).toMatch(/Why: +placement changed: node-1 not in placement.hosts \(node-2\)/);
    }));
});
