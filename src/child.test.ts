import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { spawnLogged } from './child.js';

describe('spawnLogged', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-child-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has every line of both streams in the file the moment the child has exited, after what the file held', async () => {
    const log = join(dir, 'out.log');
    writeFileSync(log, 'before\n');
    // Many lines on both streams, the last ones printed just before the exit: through a pipe the
    // last of them were still in flight at 'exit' (the race that failed a CI run).
    const script = "for (let i = 0; i < 2000; i++) { process.stdout.write(`out ${i}\\n`); process.stderr.write(`err ${i}\\n`); }";
    const child = spawnLogged(process.execPath, ['-e', script], log);
    const code = await new Promise<number | null>((r) => child.once('exit', r));
    expect(code).toBe(0);
    const lines = readFileSync(log, 'utf8').split('\n').filter(Boolean);
    expect(lines[0]).toBe('before');
    expect(lines).toHaveLength(4001);
    expect(lines).toContain('out 1999');
    expect(lines).toContain('err 1999');
  });
});
