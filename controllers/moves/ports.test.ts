// A move's destination copy gets dynamic host ports of its own node, never the source's: two
// replicas of one node must not share a port, and the source keeps its own until it stops.
import { describe, expect, it } from 'vitest';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { ReplicaDesired, ServiceSpec } from '../../src/api/types.js';
import { ReplicaIndex } from '../../src/runtime/replicas.js';
import { MoveBook, startMove } from './move.js';

const T0 = Date.parse('2026-11-21T10:00:00Z');
const web: ServiceSpec = withDefaults({ image: 'x', replicas: 2, ports: [{ name: 'http', containerPort: 80, published: 18080 }] });

function put(idx: ReplicaIndex, id: string, node: string, port: number): void {
  const value: ReplicaDesired = {
    apiVersion: 'jaco.dev/v1',
    kind: 'ReplicaDesired',
    metadata: { name: id },
    spec: { replica: id, deployment: 'd', service: 'web', node, revision: 1, specHash: specHash(web), template: web, placedAt: new Date(T0).toISOString(), hostPorts: { http: port } },
  };
  idx.putDesired({ key: `desired/${node}/${id}`, modRevision: 10, createRevision: 10, version: 1, value });
  idx.putObserved(node, id, {
    key: `observed/${node}/${id}`,
    modRevision: 10,
    createRevision: 10,
    version: 1,
    value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: id }, status: { replica: id, node, deployment: 'd', service: 'web', state: 'running', revision: 1, specHash: specHash(web), health: 'none', startedAt: new Date(T0 - 60_000).toISOString(), observedAt: new Date(T0).toISOString() } },
  });
}

describe('moves and dynamic host ports', () => {
  it("the destination copy gets a free port of the destination's range, not the source's", () => {
    const idx = new ReplicaIndex();
    put(idx, 'd-web-0', 'a', 30000);
    put(idx, 'd-web-1', 'b', 30000);
    const book = new MoveBook({ replicas: idx, ledgers: new Map(), eligibility: new Map(), portRanges: new Map([['b', { min: 30000, max: 30001 }]]) });
    const r = startMove(book, { replica: 'd-web-0', src: 'a', dst: 'b', by: 'drain', id: 'm1', now: T0, timeoutMs: 60_000 });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.dst.spec.hostPorts).toEqual({ http: 30001 });
    // The source keeps its own port while it serves.
    expect(r.src.spec.hostPorts).toEqual({ http: 30000 });
  });
});
