// Which files apply, diff and convert read when no -f is given: what docker compose reads with
// none — COMPOSE_FILE (from the environment, else the working directory's .env), else the
// working directory when it holds a compose file; otherwise a clear error.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inputFiles } from './apply.js';

const dir = (files: Record<string, string>) => {
  const d = mkdtempSync(join(tmpdir(), 'jaco-inputs-'));
  for (const [f, text] of Object.entries(files)) writeFileSync(join(d, f), text);
  return d;
};

describe('the files read without -f', () => {
  it.each<[string, string[] | undefined, Record<string, string>, Record<string, string>, (cwd: string) => string[]]>([
    ['-f wins over everything', ['x.yaml'], { COMPOSE_FILE: 'a.yaml' }, { 'compose.yaml': '' }, () => ['x.yaml']],
    ['COMPOSE_FILE from the environment', undefined, { COMPOSE_FILE: 'a.yaml:b.yaml' }, { 'compose.yaml': '' }, () => ['a.yaml', 'b.yaml']],
    ['COMPOSE_FILE from the working directory’s .env', undefined, {}, { '.env': 'COMPOSE_FILE=base.yaml,prod.yaml\nCOMPOSE_PATH_SEPARATOR=,\n', 'compose.yaml': '' }, () => ['base.yaml', 'prod.yaml']],
    ['the environment’s COMPOSE_FILE over the .env’s', undefined, { COMPOSE_FILE: 'env.yaml' }, { '.env': 'COMPOSE_FILE=dot.yaml\n' }, () => ['env.yaml']],
    ['else the working directory, when it holds a compose file', undefined, {}, { 'docker-compose.yml': '' }, (cwd) => [cwd]],
  ])('%s', (_what, given, env, files, want) => {
    const cwd = dir(files);
    expect(inputFiles(given, env, cwd)).toEqual(want(cwd));
  });

  it('nothing to read is an error that says what to give', () =>
    expect(() => inputFiles(undefined, {}, dir({ 'notes.txt': '' }))).toThrow('no manifest given: use -f FILE, -f DIR or -f - (stdin), set COMPOSE_FILE, or run it in a directory holding compose.yaml'));
});
