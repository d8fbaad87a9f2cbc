// Conformance with the Compose Specification's loading rules (merge of several files, the override
// file, extends, include, !reset / !override): each case of test/fixtures/compose-conformance/ is
// read as `docker compose config` reads it, and the merged model compared with expected.yaml —
// written from what the Specification says the model is — or the refusal with
// expected-errors.txt (file:line:column: field: message, in the file that said it).
// case.yaml says what is read: `directory: .` (a directory, as -f DIR: its compose file and the
// override beside it) or `files: [a.yaml, b.yaml]` (-f a.yaml -f b.yaml), and `env`.
// UPDATE_GOLDEN=1 rewrites the goldens (review the diff against the Specification).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatProblem, ManifestError } from '../api/manifest.js';
import { PACKAGE_ROOT } from '../paths.js';
import { composeFilesIn, composeModel, composeSource } from './load.js';

const CASES = join(PACKAGE_ROOT, 'test', 'fixtures', 'compose-conformance');
const cases = readdirSync(CASES).sort();
const update = process.env.UPDATE_GOLDEN === '1';

interface Case {
  directory?: string;
  files?: string[];
  env?: Record<string, string>;
}

function run(name: string): string {
  const dir = join(CASES, name);
  const spec = parse(readFileSync(join(dir, 'case.yaml'), 'utf8')) as Case;
  const files = spec.files ? spec.files.map((f) => join(dir, f)) : composeFilesIn(join(dir, spec.directory ?? '.'));
  // Shown relative to the package root, as a user in the checkout would name them; absolute paths as <case>.
  const portable = (s: string) => s.split(dir).join('<case>');
  try {
    const m = composeModel(
      files.map((f) => composeSource(relative(PACKAGE_ROOT, f), readFileSync(f, 'utf8'))),
      { env: spec.env ?? {} },
    );
    return portable(stringify({ model: m.model, ...(m.warnings.length ? { warnings: m.warnings.map(formatProblem) } : {}) }));
  } catch (e) {
    if (!(e instanceof ManifestError)) throw e;
    return `${e.problems.map((p) => portable(formatProblem(p))).join('\n')}\n`;
  }
}

describe('compose conformance: the merged model', () => {
  it.each(cases)('%s', (name) => {
    const dir = join(CASES, name);
    const got = run(name);
    const golden = join(dir, got.startsWith('model:') ? 'expected.yaml' : 'expected-errors.txt');
    if (update) writeFileSync(golden, got);
    expect(existsSync(golden), `${golden} (run with UPDATE_GOLDEN=1 and review)`).toBe(true);
    expect(got).toBe(readFileSync(golden, 'utf8'));
    expect(existsSync(join(dir, got.startsWith('model:') ? 'expected-errors.txt' : 'expected.yaml')), 'a case is merged or refused, never both').toBe(false);
  });
});
