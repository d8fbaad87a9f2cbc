import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../paths.js';
import { BAD_CORPUS } from '../../test/fixtures/manifests/bad-corpus.js';
import { formatProblem, ManifestError, parseManifests, readSources } from './manifest.js';

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
