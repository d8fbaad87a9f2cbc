import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../paths.js';
import { BAD_CORPUS } from '../../test/fixtures/manifests/bad-corpus.js';
import { formatProblem, ManifestError, parseManifests, readSources } from './manifest.js';
import { readCapped, readFileCapped } from './capped-read.js';

const BAD = join(PACKAGE_ROOT, 'test/fixtures/manifests/bad');
const GOOD = join(PACKAGE_ROOT, 'test/fixtures/manifests/good');

function problems(file: string): string[] {
  try {
    parseManifests(readSources([join(BAD, file)]), { kinds: ['Deployment'] });
  } catch (e) {
    expect(e).toBeInstanceOf(ManifestError);
    return (e as ManifestError).problems.map((p) => formatProblem({ ...p, file: file }));
  }
  throw new Error(`${file} was accepted`);
}


describe('bad manifests', () => {
  it.each(BAD_CORPUS)('%s', (file, expected) => {
    const got = problems(file);
    for (const want of expected) expect(got.some((g) => g.startsWith(want)), `got:\n${got.join('\n')}\nwanted a line starting:\n${want}`).toBe(true);
  });

  it('the corpus covers every fixture', async () => {
    const { readdirSync } = await import('node:fs');
    expect(readdirSync(BAD).sort()).toEqual(BAD_CORPUS.map(([f]) => f).sort());
  });

  it('reports problems in every file and document at once', () => {
    try {
      parseManifests(readSources([join(BAD, 'wrong-types.yaml'), join(BAD, 'unknown-field.yaml')]));
      throw new Error('accepted');
    } catch (e) {
      const files = new Set((e as ManifestError).problems.map((p) => p.file.split('/').pop()));
      expect(files).toEqual(new Set(['wrong-types.yaml', 'unknown-field.yaml']));
    }
  });

  it('names a missing file', () => expect(() => readSources(['/nonexistent/x.yaml'])).toThrow('/nonexistent/x.yaml:0:0: no such file or directory'));
});

describe('good manifests', () => {
  it('reads a multi-document file, skipping empty documents', () => {
    const objs = parseManifests(readSources([join(GOOD, 'two-deployments.yaml')]));
    expect(objs.map((o) => [o.object.metadata.name, o.document])).toEqual([
      ['alpha', 1],
      ['beta', 2],
    ]);
  });

  it('reads a directory and stdin', () => {
    expect(readSources([GOOD]).map((s) => s.name)).toEqual([join(GOOD, 'two-deployments.yaml')]);
    expect(readSources(['-'], () => 'x: 1').map((s) => s.text)).toEqual(['x: 1']);
  });
});

describe('reading is bounded', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-capped-'));
  const file = (n: number) => {
    const f = join(dir, `f${n}`);
    writeFileSync(f, 'x'.repeat(n));
    return f;
  };
  it.each([
    { what: 'an empty file', from: () => file(0), limit: 8, bytes: 0 },
    { what: 'a file of exactly the limit', from: () => file(8), limit: 8, bytes: 8 },
    { what: 'a file one byte over', from: () => file(9), limit: 8, bytes: undefined },
    { what: 'a file far over, bigger than a read', from: () => file(200_000), limit: 100_000, bytes: undefined },
    { what: '/dev/zero (a size of 0 that never ends)', from: () => '/dev/zero', limit: 100_000, bytes: undefined },
  ])('$what', ({ from, limit, bytes }) => expect(readCapped(from(), limit)?.length).toBe(bytes));

  it('names a device without end as a file is named when too large, and stdin that goes on', () => {
    expect(() => readSources(['/dev/zero'])).toThrow('/dev/zero:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
    expect(() => readSources(['-'], () => undefined)).toThrow('<stdin>:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
  });

  it('fails a capped read with why', () => expect(() => readFileCapped('/dev/zero', 1024)).toThrow('more than 1 KiB read, and it goes on; at most 1 KiB is read'));
});
