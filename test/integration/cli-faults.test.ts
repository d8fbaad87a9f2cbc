// The CLI against faults of its input and of the store (issue 29, items 5–8), on a real etcd:
// input without end, junk values under every prefix, many applies at once, specs at the size limit.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { JACO_BIN } from '../support/cli.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const etcd = useTestEtcd();
const tmp = mkdtempSync(join(tmpdir(), 'jaco-cli-faults-'));

/** Prints the process's peak resident memory (KiB) to stderr as it exits. */
const MAXRSS = join(tmp, 'maxrss.cjs');
writeFileSync(MAXRSS, "process.on('exit', () => require('node:fs').writeSync(2, `\\nmaxrss_kib=${process.resourceUsage().maxRSS}\\n`));\n");

/**
 * Runs the built CLI with its peak memory reported; `endless` keeps writing to its stdin until it
 * exits (a producer that never stops). A CLI that reads without bound never exits: the timeout fails it.
 */
function jacoMeasured(args: string[], prefix: string, opts: { endless?: boolean } = {}): Promise<{ code: number; stderr: string; maxRssMiB: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', MAXRSS, JACO_BIN, ...args], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: prefix }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.resume();
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`jaco ${args.join(' ')} did not finish in 30 s`));
    }, 30_000);
    child.stdin.on('error', () => undefined); // EPIPE once it stops reading and exits
    if (opts.endless) {
      const chunk = Buffer.from('a: b\n'.repeat(13_000));
      const write = () => {
        while (!child.stdin.destroyed && child.stdin.write(chunk));
      };
      child.stdin.on('drain', write);
      write();
    } else child.stdin.end();
    child.on('close', (code) => {
      clearTimeout(timer);
      const kib = Number(/maxrss_kib=(\d+)/.exec(stderr)?.[1] ?? NaN);
      resolve({ code: code ?? -1, stderr, maxRssMiB: kib / 1024 });
    });
  });
}

describe('unbounded input (item 7)', () => {
  it('jaco apply -f /dev/zero: the size error a large file gets, in bounded memory, nothing written', async () => {
    const prefix = uniquePrefix();
    const r = await jacoMeasured(['apply', '-f', '/dev/zero'], prefix);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('/dev/zero:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
    // Node and the CLI's modules take ~100 MiB; the cap adds at most 16 MiB read (and its text).
    expect(r.maxRssMiB).toBeLessThan(250);
    expect((await etcd.store(prefix).listRaw('')).kvs).toEqual([]);
  });

  it('an endless jaco apply -f -: the same error, in bounded memory', async () => {
    const prefix = uniquePrefix();
    const r = await jacoMeasured(['apply', '-f', '-'], prefix, { endless: true });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('<stdin>:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
    expect(r.maxRssMiB).toBeLessThan(250);
    expect((await etcd.store(prefix).listRaw('')).kvs).toEqual([]);
  });

  it('a secret from /dev/zero or an endless stdin: refused at its own limit', async () => {
    const prefix = uniquePrefix();
    let r = await jacoMeasured(['secret', 'create', 'z', '-f', '/dev/zero'], prefix);
    expect(r.stderr).toContain('/dev/zero holds more than 500 KiB; a secret holds at most 512000 (500 KiB)');
    r = await jacoMeasured(['config', 'create', 'z', '-'], prefix, { endless: true });
    expect(r.stderr).toContain('stdin holds more than 500 KiB; a config holds at most 512000 (500 KiB)');
    expect(r.maxRssMiB).toBeLessThan(250);
  });
});
