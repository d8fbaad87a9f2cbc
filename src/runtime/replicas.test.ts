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
