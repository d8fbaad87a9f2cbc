// The consistency check's comparison of held keys with the keys the store lists as changed since
// the last check (missedSince): a table of what a watch can lose, and what it reports.
import { describe, expect, it } from 'vitest';
import { testLogger } from '../../test/support/log.js';
import { isFutureRevision, missedSince, SourceState, storeReplaced, ValueReader, type StoreIdentity } from './reflector.js';

const counter = (next: number) => JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: 'c' }, spec: { next } });

/** A source holding keys at the given mod revisions (unreadable: JSON that is not one). */
function held(keys: Record<string, number | { unreadable: number; readable?: number }>): SourceState {
  const src = new SourceState('counters', { prefix: 'counters/', kind: 'ReplicaCounter' }, new ValueReader(testLogger()));
  for (const [key, at] of Object.entries(keys)) {
    const meta = (modRevision: number) => ({ modRevision, createRevision: 1, version: 1 });
    if (typeof at === 'number') src.put(key, meta(at), counter(at));
    else {
      if (at.readable) src.put(key, meta(at.readable), counter(at.readable));
      src.put(key, meta(at.unreadable), '{not json');
    }
  }
  return src;
}

describe('missedSince', () => {
  it.each<[string, Parameters<typeof held>[0], { key: string; modRevision: number }[], number, string[]]>([
    ['nothing changed since the check', { 'counters/a': 3, 'counters/b': 5 }, [], 5, []],
    ['every change held', { 'counters/a': 7, 'counters/b': 9 }, [{ key: 'counters/a', modRevision: 7 }, { key: 'counters/b', modRevision: 9 }], 5, []],
    // The case the simulation found: a's update lost, b's (the newest) delivered — count and newest agree.
    ['a lost update of a key that is not the newest', { 'counters/a': 3, 'counters/b': 9 }, [{ key: 'counters/a', modRevision: 7 }, { key: 'counters/b', modRevision: 9 }], 5, ['counters/a']],
    ['a lost create', { 'counters/b': 9 }, [{ key: 'counters/a', modRevision: 7 }, { key: 'counters/b', modRevision: 9 }], 5, ['counters/a']],
    ['a lost delete of a key changed since the check', { 'counters/a': 7, 'counters/b': 9 }, [{ key: 'counters/b', modRevision: 9 }], 5, ['counters/a']],
    ['a lost delete of an older key (count tells)', { 'counters/a': 3, 'counters/b': 9 }, [{ key: 'counters/b', modRevision: 9 }], 5, []],
    ['an unreadable newest value, held as such', { 'counters/a': { unreadable: 7, readable: 3 } }, [{ key: 'counters/a', modRevision: 7 }], 5, []],
    ['an unreadable value whose fix was lost', { 'counters/a': { unreadable: 7, readable: 3 } }, [{ key: 'counters/a', modRevision: 8 }], 5, ['counters/a']],
  ])('%s', (_name, keys, changed, since, missed) => {
    expect(missedSince(held(keys), changed, since)).toEqual(missed);
  });
});

describe('storeReplaced', () => {
  it.each<[string, StoreIdentity, { cluster_id: string; revision: string }, string | undefined]>([
    ['the same store, moved on', { clusterId: '1', revision: 40 }, { cluster_id: '1', revision: '52' }, undefined],
    ['the same store, nothing new', { clusterId: '1', revision: 40 }, { cluster_id: '1', revision: '40' }, undefined],
    ['nothing held yet (the first list)', { revision: 0 }, { cluster_id: '1', revision: '3' }, undefined],
    ['restarted empty (same id: same name, peer address, token)', { clusterId: '1', revision: 40 }, { cluster_id: '1', revision: '2' }, 'revision_backwards'],
    ['restored from an older snapshot with a new id', { clusterId: '1', revision: 40 }, { cluster_id: '9', revision: '31' }, 'cluster_changed'],
    ['another cluster that has gone further', { clusterId: '1', revision: 40 }, { cluster_id: '9', revision: '4000' }, 'cluster_changed'],
    ['no id known yet, revision behind', { revision: 40 }, { cluster_id: '9', revision: '7' }, 'revision_backwards'],
  ])('%s', (_name, known, header, reason) => {
    expect(storeReplaced(known, header)?.reason).toBe(reason);
  });

  it('knows a read refused at a future revision', () => {
    expect(isFutureRevision(new Error('etcdserver: mvcc: required revision is a future revision'))).toBe(true);
    expect(isFutureRevision(new Error('etcdserver: mvcc: required revision has been compacted'))).toBe(false);
  });
});

describe('a bounded source (SourceSpec.newest)', () => {
  const meta = (modRevision: number) => ({ modRevision, createRevision: modRevision, version: 1 });
  it.each<[string, [string, string][], string[]]>([
    ['under the bound: everything held', [['a', counter(1)], ['b', counter(2)]], ['counters/a', 'counters/b']],
    ['over it: the keys that sort first go', [['a', counter(1)], ['b', counter(2)], ['c', counter(3)], ['d', counter(4)]], ['counters/b', 'counters/c', 'counters/d']],
    ['a late key that sorts first is not held', [['b', counter(1)], ['c', counter(2)], ['d', counter(3)], ['a', counter(4)]], ['counters/b', 'counters/c', 'counters/d']],
    ['an unreadable key counts toward the bound and goes like any other', [['a', '{not json'], ['b', counter(2)], ['c', counter(3)], ['d', counter(4)]], ['counters/b', 'counters/c', 'counters/d']],
  ])('%s', (_name, puts, heldKeys) => {
    const src = new SourceState('counters', { prefix: 'counters/', kind: 'ReplicaCounter', newest: 3 }, new ValueReader(testLogger()));
    puts.forEach(([k, text], i) => src.put(`counters/${k}`, meta(i + 1), text));
    expect([...new Set([...src.items.keys(), ...src.unreadable.keys()])].sort()).toEqual(heldKeys);
    expect(src.size).toBe(heldKeys.length);
  });
});
