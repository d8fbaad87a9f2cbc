// The compare-and-swap rules stated once (conditionsOf) travel to etcd as compares (compareOf)
// and back (conditionOfCompare, what an in-memory etcd evaluates): the round trip loses nothing.
import { describe, expect, it } from 'vitest';
import { CompareResult, CompareTarget } from 'etcd3';
import { chainedWrite, compareOf, conditionOfCompare, conditionsOf, dependencies, packActs, txnCounts, unfit, type OpGroup, type Op } from './writer.js';

describe('compareOf / conditionOfCompare', () => {
  const ops: Op[] = [
    { op: 'create', key: 'desired/n1/a', value: {} },
    { op: 'update', key: 'nodes/n1', value: {}, modRevision: 7 },
    { op: 'delete', key: 'desired/n2/b', modRevision: 9 },
    { op: 'check', key: 'counters/x', version: 3 },
    { op: 'check', key: 'drains/n1', modRevision: 0 },
    { op: 'checkRange', key: 'desired/n3/', unchangedSince: 12 },
  ];
  const conds = conditionsOf(ops, { controller: 'scheduler', key: 'leaders/scheduler/1', createRevision: 4 });

  it.each(['', 'jaco/'])('every condition survives the round trip (prefix %j)', (prefix) => {
    expect(conds).toHaveLength(7);
    for (const c of conds) {
      const cmp = compareOf(c, prefix);
      expect(String(cmp.key)).toBe(prefix + c.key);
      expect(conditionOfCompare(cmp, prefix)).toEqual(c);
    }
  });

  it('states a range as "every key below", a key as "equal"', () => {
    const range = compareOf(conds.find((c) => c.range)!);
    expect(range.result).toBe(CompareResult.Less);
    expect(String(range.range_end)).toBe('desired/n30');
    expect(compareOf(conds[0]!).result).toBe(CompareResult.Equal);
    expect(compareOf(conds[0]!).target).toBe(CompareTarget.Create);
  });

  it('refuses a compare it does not make (a rule read back wrong would be a second copy of the rules)', () => {
    expect(() => conditionOfCompare({ key: Buffer.from('a'), target: CompareTarget.Mod, result: CompareResult.Greater, mod_revision: 3 })).toThrow(/does not make/);
    expect(() => conditionOfCompare({ key: Buffer.from('a'), range_end: Buffer.from('b'), target: CompareTarget.Mod, result: CompareResult.Equal, mod_revision: 3 })).toThrow(/does not make/);
  });
});

describe('dependencies (which transactions of one commit must wait for which)', () => {
  const txn = (...ops: Op[]): OpGroup[] => [{ ops }];
  it('independent transactions wait for none; a chain on a key waits for its link; a write waits for earlier compares of its key', () => {
    const deps = dependencies([
      txn({ op: 'create', key: 'desired/n1/a', value: {} }, { op: 'update', key: 'counters/x', value: {}, modRevision: 3 }),
      txn({ op: 'create', key: 'desired/n2/b', value: {} }, { op: 'check', key: 'nodes/n2', modRevision: 5 }),
      txn({ op: 'check', key: 'counters/x', version: 2 }, { op: 'put', key: 'counters/x', value: {} }),
      txn({ op: 'check', key: 'nodes/n2', modRevision: 5 }),
      txn({ op: 'update', key: 'nodes/n2', value: {}, modRevision: 5 }),
      txn({ op: 'checkRange', key: 'desired/n1/', unchangedSince: 9 }),
      txn({ op: 'create', key: 'desired/n1/c', value: {} }),
    ]);
    expect(deps).toEqual([[], [], [0], [], [1, 3], [0], [5]]);
  });
});

describe('txnCounts / packActs (etcd bounds compares and writes of a transaction each on its own)', () => {
  const placement = (i: number): Op[] => [
    { op: 'create', key: `desired/n${i}/r${i}`, value: { i } },
    { op: 'put', key: `decisions/d/r${i}`, value: { i } },
    { op: 'check', key: `nodes/n${i}`, modRevision: 3 },
  ];

  it('counts a create, update and guarded delete as a compare and a write, a check as a compare, a put and a bare delete as a write, the fence as a compare', () => {
    const ops: Op[] = [
      { op: 'create', key: 'a', value: 1 },
      { op: 'update', key: 'b', value: 1, modRevision: 2 },
      { op: 'delete', key: 'c', modRevision: 2 },
      { op: 'delete', key: 'd' },
      { op: 'put', key: 'e', value: 1 },
      { op: 'check', key: 'f', modRevision: 0 },
      { op: 'check', key: 'g', version: 1 },
      { op: 'checkRange', key: 'h/', unchangedSince: 5 },
    ];
    expect(txnCounts(ops, false)).toEqual({ compares: 6, writes: 5 });
    expect(txnCounts(ops, true)).toEqual({ compares: 7, writes: 5 });
  });

  it('fills a transaction up to 128 compares and 128 writes, not 128 of both together', () => {
    // 42 acts of 2 compares and 2 writes: 84 + 84 ops, one transaction (a sum of 128 would take two).
    const acts: OpGroup[] = Array.from({ length: 42 }, (_, i) => ({ ops: placement(i), label: `p${i}` }));
    expect(packActs(acts, 128, true)).toHaveLength(1);
    // 64 acts: 128 compares with the fence is one too many.
    const more: OpGroup[] = Array.from({ length: 64 }, (_, i) => ({ ops: placement(i), label: `p${i}` }));
    expect(packActs(more, 128, true).map((t) => t.length)).toEqual([63, 1]);
    expect(unfit(Array.from({ length: 128 }, (_, i): Op => ({ op: 'put', key: `k${i}`, value: 1 })), true)).toBeUndefined();
    expect(unfit(Array.from({ length: 128 }, (_, i): Op => ({ op: 'check', key: `k${i}`, modRevision: 1 })), true)?.reason).toBe('too_many_ops');
  });

  it('refuses an act that writes one key twice, as etcd refuses such a transaction (whatever its compares)', () => {
    const twice: Op[] = [
      { op: 'create', key: 'disruptions/d/s', value: { n: 1 } },
      { op: 'update', key: 'disruptions/d/s', value: { n: 2 }, modRevision: 1 },
    ];
    expect(unfit(twice, false)).toEqual({ reason: 'duplicate_key', detail: 'disruptions/d/s is written twice' });
    expect(unfit([{ op: 'put', key: 'a', value: 1 }, { op: 'delete', key: 'a' }], true)?.reason).toBe('duplicate_key');
    // A key compared and written once is one write.
    expect(unfit([{ op: 'check', key: 'a', modRevision: 3 }, { op: 'put', key: 'a', value: 1 }], true)).toBeUndefined();
  });

  it('never puts an act in the transaction of an earlier act that writes a key it compares (compares are evaluated before any write)', () => {
    const acts: OpGroup[] = [
      { label: 'first', ops: [{ op: 'update', key: 'counters/d/s', value: { next: 10 }, modRevision: 4 }] },
      { label: 'next', ops: [{ op: 'check', key: 'counters/d/s', version: 2 }, { op: 'create', key: 'desired/n1/x', value: 1 }] },
      { label: 'range', ops: [{ op: 'checkRange', key: 'desired/', unchangedSince: 9 }] },
      { label: 'other', ops: [{ op: 'put', key: 'status/d', value: 1 }] },
    ];
    expect(packActs(acts, 128, true).map((t) => t.map((a) => a.label))).toEqual([['first'], ['next'], ['range', 'other']]);
  });
});

describe('chainedWrite (several writes of one key in one pass)', () => {
  it('the first compares the key as read (or its absence), each next one the version the write before leaves', () => {
    const read = { modRevision: 40, version: 3 };
    expect(chainedWrite('counters/d/s', read, 0, 'v0')).toEqual([{ op: 'update', key: 'counters/d/s', value: 'v0', modRevision: 40 }]);
    expect(chainedWrite('counters/d/s', read, 2, 'v2')).toEqual([
      { op: 'check', key: 'counters/d/s', version: 5 },
      { op: 'put', key: 'counters/d/s', value: 'v2' },
    ]);
    expect(chainedWrite('counters/d/s', undefined, 0, 'v0')).toEqual([{ op: 'create', key: 'counters/d/s', value: 'v0' }]);
    expect(chainedWrite('counters/d/s', undefined, 1, 'v1')[0]).toEqual({ op: 'check', key: 'counters/d/s', version: 1 });
  });
});
