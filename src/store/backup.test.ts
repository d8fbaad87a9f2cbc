import { describe, expect, it } from 'vitest';
import { backupName, backupsToPrune } from './backup.js';

describe('a directory of backups', () => {
  it('names a backup by its UTC time, so names sort by age', () => {
    expect(backupName(new Date('2026-11-28T03:04:05.678Z'))).toBe('jaco-20261128T030405.678Z.db');
    expect(backupName(new Date('2026-01-02T00:00:00Z')) < backupName(new Date('2026-11-28T00:00:00Z'))).toBe(true);
  });

  it.each<[string, string[], number, string[]]>([
    ['fewer than kept: nothing goes', ['jaco-20261127T000000.000Z.db', 'jaco-20261127T000000.000Z.db.json'], 3, []],
    [
      'the oldest beyond the newest N, whatever order they are listed in',
      ['jaco-20261128T000000.000Z.db', 'jaco-20261126T000000.000Z.db', 'jaco-20261127T000000.000Z.db', 'jaco-20261125T000000.000Z.db'],
      2,
      ['jaco-20261125T000000.000Z.db', 'jaco-20261126T000000.000Z.db'],
    ],
    ['never a file it did not name: sidecars, parts, hand-made copies stay', ['jaco-20261125T000000.000Z.db.json', 'x.db', 'jaco-20261125T000000.000Z.db.ab12cd34.part', 'jaco-before-upgrade.db', 'jaco-20261126T000000.000Z.db'], 0, ['jaco-20261126T000000.000Z.db']],
  ])('prunes: %s', (_n, names, keep, want) => {
    expect(backupsToPrune(names, keep)).toEqual(want);
  });
});
