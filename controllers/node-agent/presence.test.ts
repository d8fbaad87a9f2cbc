// What a missing node key means to its agent (nodeAbsence): only a removal recorded after the
// agent's registration is one; anything else is the store having lost the node.
import { describe, expect, it } from 'vitest';
import type { NodeDrain } from '../../src/api/types.js';
import { nodeAbsence, type NodeRecord } from './presence.js';

const drain = (state: NonNullable<NodeDrain['status']>['state'], modRevision: number) => ({
  modRevision,
  value: { apiVersion: 'jaco.dev/v1', kind: 'NodeDrain', metadata: { name: 'n1' }, spec: { node: 'n1', timeout: '5m', force: false, remove: true, requestedAt: '' }, status: { state, replicas: {} } } as NodeDrain,
});
const node: NodeRecord = { modRevision: 40, createRevision: 10 };

describe('nodeAbsence', () => {
  it.each<[string, NodeRecord | undefined, ReturnType<typeof drain> | undefined, number | undefined, ReturnType<typeof nodeAbsence>]>([
    ['the node key is there', node, undefined, 10, 'present'],
    ['the node key is there, unreadable (junk): not a removal', { ...node, unreadable: 'not JSON' }, undefined, 10, 'present'],
    ['the node key is there beside an old removal', node, drain('removed', 5), 10, 'present'],
    ['gone with no drain at all (a wipe, a hand delete)', undefined, undefined, 10, 'lost'],
    ['gone with a drain that did not remove (completed)', undefined, drain('completed', 50), 10, 'lost'],
    ['gone with a drain still in progress', undefined, drain('draining', 50), 10, 'lost'],
    ['removed after this registration (jaco node remove)', undefined, drain('removed', 50), 10, 'removed'],
    ['a removal recorded before this registration (the node rejoined since; a restore brought the old record back)', undefined, drain('removed', 5), 10, 'lost'],
    ['a removal, and no registration known (an agent starting)', undefined, drain('removed', 5), undefined, 'removed'],
  ])('%s', (_name, n, d, registeredAt, want) => {
    expect(nodeAbsence(n, d, registeredAt)).toBe(want);
  });
});
