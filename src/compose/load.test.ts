// The compose corpus (test/fixtures/compose/<case>/compose.yaml): each case converts to the
// Deployment in its expected.yaml, with the warnings listed there, or is refused with exactly
// the problems in its expected-errors.txt (file:line:column, field path, message). Paths are
// relative to the case directory so the goldens do not depend on the checkout's location.
// UPDATE_GOLDEN=1 rewrites the goldens (review the diff).
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { formatProblem, ManifestError } from '../api/manifest.js';
import { PACKAGE_ROOT } from '../paths.js';
import { composeFileVariable, composeSource, isComposeText, loadCompose, type ComposeOptions } from './load.js';

const CORPUS = join(PACKAGE_ROOT, 'test', 'fixtures', 'compose');
const cases = readdirSync(CORPUS).sort();
const update = process.env.UPDATE_GOLDEN === '1';

/** Absolute paths of the checkout, shown relative to the corpus (stable goldens). */
const portable = (s: string) => s.split(CORPUS).join('<corpus>');

/** The objects apply would create, as a golden shows them: never a value (its size and a digest of it). */
const objectsOf = (app: ReturnType<typeof loadCompose>) => app.objects.map((o) => ({ kind: o.kind, name: o.name, owner: o.owner, from: portable(o.from), bytes: o.value.length }));

function run(name: string): { ok: true; deployment: unknown; warnings: string[]; objects: unknown[] } | { ok: false; errors: string[] } {
  const dir = join(CORPUS, name);
  const file = join(dir, 'compose.yaml');
  const opts: ComposeOptions = { env: {}, ...(existsSync(join(dir, 'options.json')) ? (JSON.parse(readFileSync(join(dir, 'options.json'), 'utf8')) as ComposeOptions) : {}) };
  const shown = relative(PACKAGE_ROOT, file);
  try {
    const app = loadCompose(composeSource(shown, readFileSync(file, 'utf8')), opts);
    return { ok: true, deployment: JSON.parse(portable(JSON.stringify(app.deployment))), warnings: app.warnings.map(formatProblem), objects: objectsOf(app) };
  } catch (e) {
    if (!(e instanceof ManifestError)) throw e;
    return { ok: false, errors: e.problems.map((p) => portable(formatProblem(p))) };
  }
}

describe('the compose corpus', () => {
  it.each(cases)('%s', (name) => {
    const dir = join(CORPUS, name);
    const got = run(name);
    const golden = join(dir, got.ok ? 'expected.yaml' : 'expected-errors.txt');
    const golden_ = (g: typeof got & { ok: true }) => stringify({ deployment: g.deployment, warnings: g.warnings, ...(g.objects.length ? { objects: g.objects } : {}) });
    const text = got.ok ? golden_(got) : `${got.errors.join('\n')}\n`;
    if (update) writeFileSync(golden, text);
    expect(existsSync(golden), `${golden} (run with UPDATE_GOLDEN=1 and review)`).toBe(true);
    if (got.ok) expect(golden_(got)).toBe(readFileSync(golden, 'utf8'));
    else expect(text).toBe(readFileSync(golden, 'utf8'));
    // A case is either converted or refused, never both.
    expect(existsSync(join(dir, got.ok ? 'expected-errors.txt' : 'expected.yaml'))).toBe(false);
  });

  it('every case is recognised as compose, and a jaco manifest is not', () => {
    for (const name of cases) expect(isComposeText(readFileSync(join(CORPUS, name, 'compose.yaml'), 'utf8'))).toBe(true);
    expect(isComposeText(readFileSync(join(PACKAGE_ROOT, 'examples', 'hello.yaml'), 'utf8'))).toBe(false);
  });

  it('--strict turns every warning into an error', () => {
    const file = join(CORPUS, 'webapp', 'compose.yaml');
    expect(() => loadCompose(composeSource(file, readFileSync(file, 'utf8')), { env: {}, strict: true })).toThrow(/restart is ignored \[compose\]|restart is ignored/);
  });

  it('the name: --name, else the top-level name, else the directory, normalised; stdin needs one', () => {
    const text = 'services:\n  app:\n    image: x\n';
    expect(loadCompose({ name: 'My_App.Dir/compose.yaml', text, dir: '/tmp/My_App.Dir' }, { env: {} }).deployment.metadata.name).toBe('my-appdir');
    expect(loadCompose({ name: 'f.yaml', text: `name: Shop_1\n${text}`, dir: '/x' }, { env: {} }).deployment.metadata.name).toBe('shop-1');
    expect(loadCompose({ name: 'f.yaml', text: `name: shop\n${text}`, dir: '/x' }, { env: {}, name: 'other' }).deployment.metadata.name).toBe('other');
    expect(() => loadCompose({ name: '<stdin>', text, dir: '/x' }, { env: {} })).toThrow(/needs a name: --name NAME/);
  });

  it.each<[string, { name?: string; env: Record<string, string> }, string, string]>([
    ['COMPOSE_PROJECT_NAME before the top-level name', { env: { COMPOSE_PROJECT_NAME: 'From_Env' } }, 'name: shop\n', 'from-env'],
    ['--name before COMPOSE_PROJECT_NAME', { name: 'flag', env: { COMPOSE_PROJECT_NAME: 'from-env' } }, 'name: shop\n', 'flag'],
    ['an empty COMPOSE_PROJECT_NAME is unset', { env: { COMPOSE_PROJECT_NAME: '' } }, 'name: shop\n', 'shop'],
    ['COMPOSE_PROJECT_NAME names stdin', { env: { COMPOSE_PROJECT_NAME: 'piped' } }, '', 'piped'],
  ])('the name: %s', (_what, opts, top, want) => {
    const text = `${top}services:\n  app:\n    image: x\n`;
    expect(loadCompose({ name: top ? 'f.yaml' : '<stdin>', text, dir: '/x' }, opts).deployment.metadata.name).toBe(want);
  });

  it('a COMPOSE_PROJECT_NAME that makes no name is refused naming the variable', () =>
    expect(() => loadCompose({ name: 'f.yaml', text: 'services:\n  app:\n    image: x\n', dir: '/x' }, { env: { COMPOSE_PROJECT_NAME: '__' } })).toThrow('cannot make a deployment name of COMPOSE_PROJECT_NAME="__": use --name'));

  it.each<[string, Record<string, string>, string, string[] | undefined]>([
    ['unset', {}, ':', undefined],
    ['empty', { COMPOSE_FILE: '' }, ':', undefined],
    ['one file', { COMPOSE_FILE: 'compose.yaml' }, ':', ['compose.yaml']],
    ['several, split on the platform separator', { COMPOSE_FILE: 'a.yaml:b/c.yaml' }, ':', ['a.yaml', 'b/c.yaml']],
    ['Windows splits on ;', { COMPOSE_FILE: 'a.yaml;b.yaml' }, ';', ['a.yaml', 'b.yaml']],
    ['COMPOSE_PATH_SEPARATOR wins', { COMPOSE_FILE: 'a.yaml,b.yaml', COMPOSE_PATH_SEPARATOR: ',' }, ':', ['a.yaml', 'b.yaml']],
    ['empty parts are dropped', { COMPOSE_FILE: 'a.yaml::b.yaml:' }, ':', ['a.yaml', 'b.yaml']],
  ])('COMPOSE_FILE %s', (_what, env, separator, want) => expect(composeFileVariable(env, separator)).toEqual(want));

  it('a problem jaco’s rules find in a renamed service is reported at its compose name', () => {
    const text = 'services:\n  db: {image: x}\n  web_app:\n    image: x\n    deploy: {replicas: 2}\n    volumes: ["data:/data"]\nvolumes:\n  data: {}\n';
    expect(() => loadCompose({ name: 'f.yaml', text, dir: '/x' }, { env: {} })).toThrow(/f\.yaml:4:5: services\.web_app: /);
  });

  it('variables come from the environment before the .env file, and --env-file replaces .env', () => {
    const file = join(CORPUS, 'webapp', 'compose.yaml');
    const src = composeSource(file, readFileSync(file, 'utf8'));
    const env = (app: ReturnType<typeof loadCompose>) => app.deployment.spec.services.db!.env;
    expect(env(loadCompose(src, { env: {} }))).toEqual({ POSTGRES_PASSWORD: 'secret' });
    expect(env(loadCompose(src, { env: { DB_PASSWORD: 'from-shell' } }))).toEqual({ POSTGRES_PASSWORD: 'from-shell' });
    expect(() => loadCompose(src, { env: {}, envFiles: ['/dev/null'] })).toThrow(/compose.yaml:39:26: services.db.environment.POSTGRES_PASSWORD: required variable DB_PASSWORD is missing a value/);
  });
});

// The goldens are YAML documents a reader can check by eye; parse them once so a broken one fails here.
describe('goldens', () => {
  it.each(cases.filter((c) => existsSync(join(CORPUS, c, 'expected.yaml'))))('%s parses', (c) => expect(parse(readFileSync(join(CORPUS, c, 'expected.yaml'), 'utf8'))).toHaveProperty('deployment'));
});
