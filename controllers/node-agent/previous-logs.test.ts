import { existsSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PreviousLogs } from './previous-logs.js';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jaco-previous-'));
  dirs.push(d);
  return join(d, 'previous');
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const entry = (n: number) => ({ container: `c${n}`, tty: n % 2 === 1, log: Buffer.from([1, 0, 0, 0, 0, 0, 0, 3, 0x61, 0x0a, n]) });

describe('PreviousLogs (jaco logs --previous)', () => {
  it('outlives the agent: a new instance on the same directory serves what the last one kept, bytes as Docker gave them', () => {
    const dir = tmp();
    new PreviousLogs(dir).keep('shop-web-0', entry(1));
    const again = new PreviousLogs(dir);
    expect(again.get('shop-web-0')).toEqual(entry(1));
    expect(again.get('shop-web-1')).toBeUndefined();
    // The newest container of a replica replaces the one before.
    again.keep('shop-web-0', entry(2));
    expect(new PreviousLogs(dir).get('shop-web-0')).toEqual(entry(2));
  });

  it('without a directory: memory only', () => {
    const p = new PreviousLogs();
    p.keep('a-b-0', entry(1));
    expect(p.get('a-b-0')).toEqual(entry(1));
  });

  it('keeps the newest replicas up to its limit, on disk and in memory', () => {
    const dir = tmp();
    const p = new PreviousLogs(dir, 2);
    const now = Date.now() / 1000;
    p.keep('d-s-0', entry(0));
    utimesSync(join(dir, 'd-s-0.log'), now - 20, now - 20);
    p.keep('d-s-1', entry(1));
    utimesSync(join(dir, 'd-s-1.log'), now - 10, now - 10);
    p.keep('d-s-2', entry(2));
    expect(readdirSync(dir).sort()).toEqual(['d-s-1.log', 'd-s-2.log']);
    expect(p.get('d-s-0')).toBeUndefined();
    expect(new PreviousLogs(dir, 2).get('d-s-1')).toEqual(entry(1));
  });

  it.each(['../etc/passwd', 'a/b', '.hidden', 'UPPER'])('never takes %j as a file name', (replica) => {
    const dir = tmp();
    const p = new PreviousLogs(dir);
    p.keep(replica, entry(1));
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
    expect(new PreviousLogs(dir).get(replica)).toBeUndefined();
  });

  it('a file that is not one of its own reads as nothing kept', () => {
    const dir = tmp();
    new PreviousLogs(dir).keep('d-s-0', entry(0));
    writeFileSync(join(dir, 'd-s-0.log'), 'garbage');
    expect(new PreviousLogs(dir).get('d-s-0')).toBeUndefined();
  });
});
