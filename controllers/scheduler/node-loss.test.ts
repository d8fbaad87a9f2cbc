import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { DeploymentStatus, ServiceSpec } from '../../src/api/types.js';
import { decideOnce, TEST_CONFIG, World } from '../../test/support/scheduler-world.js';

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

describe('a node already NotReady when the term began (a restart of the whole cluster, a failover)', () => {
  const web: ServiceSpec = { image: 'jaco-demo/busybox:1', replicas: 2 };
  /** Two nodes, d/web on both; then every heartbeat lapses and a new leader's term begins. */
  function restarted(): { w: World; late: string; early: string } {
    const w = new World();
    for (const n of ['node-1', 'node-2']) w.node(n);
    w.deploy('d', { web });
    w.converge();
    const early = 'node-1';
    const late = 'node-2';
    w.nodeDown(early);
    w.nodeDown(late);
    w.newTerm();
    w.pass();
    w.heartbeat(early); // the first agent back
    return { w, late, early };
  }
  const onLate = (w: World, late: string) => Object.values(w.placement('d', 'web')).filter((n) => n === late).length;

  it('keeps its replicas past the grace, while its agent may still come back', () => {
    const { w, late } = restarted();
    w.advance(TEST_CONFIG.nodeLostGraceMs + 1_000);
    w.converge();
    expect(onLate(w, late)).toBe(1);
    expect(w.auditOf('node_lost')).toEqual([]);
    // Its agent is back within the failover grace: nothing moved.
    w.heartbeat(late);
    w.advance(TEST_CONFIG.nodeLostFailoverGraceMs);
    w.converge();
    expect(onLate(w, late)).toBe(1);
    expect(w.auditOf('node_lost')).toEqual([]);
  });

  it('is lost after the failover grace', () => {
    const { w, late, early } = restarted();
    w.advance(TEST_CONFIG.nodeLostFailoverGraceMs);
    w.converge();
    expect(onLate(w, late)).toBe(0);
    expect(w.auditOf('node_lost')).toMatchObject([{ payload: { node: late, to: early, notReadyForMs: TEST_CONFIG.nodeLostFailoverGraceMs } }]);
  });

  it('has the usual grace once it was Ready in this term and went away again', () => {
    const { w, late, early } = restarted();
    w.heartbeat(late);
    w.converge();
    w.nodeDown(late);
    w.pass();
    w.advance(TEST_CONFIG.nodeLostGraceMs);
    w.converge();
    expect(onLate(w, late)).toBe(0);
    expect(w.auditOf('node_lost')).toMatchObject([{ payload: { node: late, to: early } }]);
  });
});
