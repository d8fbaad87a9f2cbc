// What a suspended replica occupies on its node, as the placer counts it (input.ts placedReplicaOf).
import { describe, expect, it } from 'vitest';
import type { ServiceSpec } from '../../src/api/types.js';
import { iso, T0, World } from '../../test/support/scheduler-world.js';
import { placedReplicaOf } from './input.js';

const IMG = 'jaco-demo/busybox:1';
const db: ServiceSpec = { image: IMG, ports: [5432], volumes: [{ type: 'volume', source: 'data', target: '/data' }] };

function drainedDbOnNode2(): World {
  const w = new World();
  for (const n of ['node-1', 'node-2', 'node-3']) w.node(n);
  w.deploy('d', { db });
  w.replica('d', 'db', 0, 'node-2', { suspended: { reason: 'node_drained', at: iso(T0) } });
  w.observe('d-db-0', 'stopped', { code: 'node_drained' });
  return w;
}

describe('a suspended replica on an uncordoned node', () => {
  it('stopped by a forced drain: it keeps what it will take back when resumed (its fixed port), so nothing else is placed into it', () => {
    const w = drainedDbOnNode2();
    // The node is schedulable again; the drain controller has not resumed d-db-0 yet.
    w.deploy('e', { proxy: { image: IMG, replicas: 3, ports: [5432] } });
    w.converge();
    expect(Object.values(w.placement('e')).sort()).toEqual(['node-1', 'node-3']);
  });

  it('stopped by preemption: it occupies nothing (that is what preemption frees); stopped by a drain: its whole footprint', () => {
    const w = drainedDbOnNode2();
    const drained = w.desired()[0]!;
    expect(placedReplicaOf(drained)).toMatchObject({ id: 'd-db-0', node: 'node-2', ports: [5432], volumes: [{ source: 'data', readOnly: false }] });
    const preempted = { ...drained, spec: { ...drained.spec, suspended: { reason: 'preempted', at: iso(T0) } } };
    expect(placedReplicaOf(preempted)).toBeUndefined();
  });
});
