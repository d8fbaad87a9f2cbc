// The notes the e2e global setup and teardown clean up after (test/support/leaks.ts): with two
// e2e lanes at once (scripts/test.sh), one lane's sweep must take the notes of finished processes
// and of its own workers, and never those of the other lane's live workers.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { note, takeNotes } from '../support/leaks.js';

describe('leak notes', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-notes-test-'));
  const live = spawn('sleep', ['60'], { stdio: 'ignore' });
  afterAll(() => {
    live.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it("takes a finished process's notes and its own workers', leaves another live process's and other kinds", () => {
    const dead = spawnSync('true').pid;
    const file = (ppid: number, pid: number, kind: string) => join(dir, `${ppid}-${pid}.${kind}`);
    writeFileSync(file(1, dead, 'clusters'), 'finished-uid /state\n');
    // A worker of this process (its parent is the taker), still running: taken.
    writeFileSync(file(process.pid, live.pid!, 'clusters'), 'own-worker-uid\n');
    // The other lane's worker, running: left.
    writeFileSync(file(1, live.pid!, 'clusters'), 'other-lane-uid\n');
    writeFileSync(file(1, dead, 'up-dirs'), '/tmp/some-up-dir\n');
    // This process's own note (its parent is not itself): left, as another lane's would be.
    note('clusters', 'this-process-uid', dir);

    expect(takeNotes('clusters', dir).sort()).toEqual(['finished-uid /state', 'own-worker-uid']);
    expect(existsSync(file(1, dead, 'clusters'))).toBe(false);
    expect(existsSync(file(process.pid, live.pid!, 'clusters'))).toBe(false);
    expect(existsSync(file(1, live.pid!, 'clusters'))).toBe(true);
    expect(existsSync(file(process.ppid, process.pid, 'clusters'))).toBe(true);
    // Taken once: a second sweep finds nothing more; the other kind is its own.
    expect(takeNotes('clusters', dir)).toEqual([]);
    expect(takeNotes('up-dirs', dir)).toEqual(['/tmp/some-up-dir']);
  });
});
