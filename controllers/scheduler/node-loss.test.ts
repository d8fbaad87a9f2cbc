import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { DeploymentStatus, ServiceSpec } from '../../src/api/types.js';
import { decideOnce, World } from '../../test/support/scheduler-world.js';

const db: ServiceSpec = { image: 'jaco-demo/busybox:1', volumes: [{ type: 'volume', source: 'data', target: '/data' }] };
const nodeLost = (w: World) => w.get<DeploymentStatus>(keys.deploymentStatus('d'))!.status!.scheduling!.services.db!.nodeLost;

/** Two nodes, d/db placed on one of them. */
function dbPlaced(): { w: World; node: string } {
  const w = new World();
  for (const n of ['node-1', 'node-2']) w.node(n);
  w.deploy('d', { db });
  w.converge();
  return { w, node: w.placement('d', 'db')['d-db-0']! };
}

describe('a stateful replica on a lost node', () => {
  it('its first node_lost report compares the heartbeat it judged: a cache that saw a live node age reports nothing (breadth sim seed 265)', () => {
    const { w, node } = dbPlaced();
    // The node's heartbeat as a cache that lags shows it: gone (a lease that lapsed), past the grace once the clock has run.
    w.nodeDown(node);
    w.pass();
    w.advance(4_000);
    const stale = decideOnce(w);
    const act = stale.acts.find((a) => a.label === 'status d')!;
    expect(act.audit).toMatchObject([{ type: 'node_lost', payload: { replica: 'd-db-0', node, stranded: true } }]);
    expect(act.ops).toContainEqual({ op: 'check', key: keys.heartbeat(node), modRevision: 0 });
    // The agent's newer heartbeat is in the store: the report is refused, and the next pass has nothing to report.
    w.heartbeat(node);
    expect(w.apply(stale)).toContain('status d');
    w.converge();
    expect(nodeLost(w)).toBeUndefined();
    expect(w.auditOf('node_lost')).toEqual([]);
  });

  it('a node really lost: reported once, the replica stays where its data is', () => {
    const { w, node } = dbPlaced();
    w.nodeDown(node);
    w.pass();
    w.advance(4_000);
    w.converge();
    expect(nodeLost(w)).toEqual(['d-db-0']);
    expect(w.auditOf('node_lost')).toMatchObject([{ payload: { replica: 'd-db-0', node, stranded: true } }]);
    expect(w.placement('d', 'db')).toEqual({ 'd-db-0': node });
  });
});
