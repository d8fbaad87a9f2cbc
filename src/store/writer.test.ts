// The compare-and-swap rules stated once (conditionsOf) travel to etcd as compares (compareOf)
// and back (conditionOfCompare, what an in-memory etcd evaluates): the round trip loses nothing.
import { describe, expect, it } from 'vitest';
import { CompareResult, CompareTarget } from 'etcd3';
import { compareOf, conditionOfCompare, conditionsOf, dependencies, type Act, type Op } from './writer.js';

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
  const txn = (...ops: Op[]): Act[] => [{ ops }];
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
