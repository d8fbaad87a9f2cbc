import { describe, expect, it } from 'vitest';
import type { ReplicaDesired } from '../api/types.js';
import type { Versioned } from '../store/store.js';
import { ReplicaIndex } from './replicas.js';

const copy = (node: string, replica: string, ipv4?: string): Versioned<ReplicaDesired> =>
  ({
    key: `desired/${node}/${replica}`,
    modRevision: 1,
    createRevision: 1,
    version: 1,
    value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: replica }, spec: { node, replica, deployment: 'd', service: 's', ...(ipv4 ? { address: { ipv4, ipv6: 'fd00::5/64' } } : {}) } },
  }) as unknown as Versioned<ReplicaDesired>;

describe('ReplicaIndex addresses', () => {
  it('knows which addresses desired copies carry, through re-puts, moves and deletes', () => {
    const idx = new ReplicaIndex();
    idx.putDesired(copy('a', 'r1', '10.208.0.5/24'));
    idx.putDesired(copy('a', 'r2'));
    expect(idx.carriesAddress('a', '10.208.0.5/24')).toBe(true);
    expect(idx.carriesAddress('b', '10.208.0.5/24')).toBe(false);

    // Re-put with another address: the old one is no longer carried.
    idx.putDesired(copy('a', 'r1', '10.208.0.6/24'));
    expect(idx.carriesAddress('a', '10.208.0.5/24')).toBe(false);
    expect(idx.carriesAddress('a', '10.208.0.6/24')).toBe(true);

    // A move: the second copy on node b carries its own address; both are carried.
    idx.putDesired(copy('b', 'r1', '10.208.1.2/24'));
    expect(idx.carriesAddress('a', '10.208.0.6/24')).toBe(true);
    expect(idx.carriesAddress('b', '10.208.1.2/24')).toBe(true);

    idx.deleteDesired(copy('a', 'r1', '10.208.0.6/24'));
    expect(idx.carriesAddress('a', '10.208.0.6/24')).toBe(false);
    expect(idx.carriesAddress('b', '10.208.1.2/24')).toBe(true);
    idx.deleteDesired(copy('b', 'r1', '10.208.1.2/24'));
    expect(idx.carriesAddress('b', '10.208.1.2/24')).toBe(false);
  });
});

describe('ReplicaIndex.onNode', () => {
  it('lists a node’s replicas by id, kept sorted through adds, re-puts, moves away and deletes', () => {
    const idx = new ReplicaIndex();
    const ids = (node: string) => idx.onNode(node).map((e) => e.id);
    for (const r of ['r3', 'r1', 'r2']) idx.putDesired(copy('a', r));
    expect(ids('a')).toEqual(['r1', 'r2', 'r3']);
    idx.putDesired(copy('a', 'r0'));
    idx.putDesired(copy('a', 'r2', '10.208.0.9/24')); // a re-put changes nothing in the list
    expect(ids('a')).toEqual(['r0', 'r1', 'r2', 'r3']);
    // A move: r1 has a copy on b too; deleting its copy on a leaves it on b only.
    idx.putDesired(copy('b', 'r1'));
    idx.deleteDesired(copy('a', 'r1'));
    expect(ids('a')).toEqual(['r0', 'r2', 'r3']);
    expect(ids('b')).toEqual(['r1']);
    // The entries are the index's current ones, even for an id gone and placed again.
    idx.deleteDesired(copy('a', 'r3'));
    idx.putDesired(copy('a', 'r3'));
    expect(idx.onNode('a').at(-1)).toBe(idx.byId.get('r3'));
    for (const r of ['r0', 'r2', 'r3']) idx.deleteDesired(copy('a', r));
    expect(ids('a')).toEqual([]);
    expect(ids('nowhere')).toEqual([]);
  });
});
