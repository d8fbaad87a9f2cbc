// Reading a Compose file as compose does: YAML with anchors, aliases and merge keys; variables
// interpolated from the environment and the .env beside the file (or --env-file), with positions
// kept for every error; profiles; validation against the Compose Specification's own JSON schema
// (vendored from compose-spec/compose-spec, see schema.ts); then the mapping (map.ts). Every
// problem is reported at once with file:line:column and the field path.
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { ManifestError, MAX_MANIFEST_BYTES, type ManifestProblem } from '../api/manifest.js';
import { readFileCapped } from '../api/capped-read.js';
import { deploymentRuleIssues } from '../api/rules.js';
import { formatPath, schemas, type Path } from '../api/schema.js';
import { API_VERSION, type Deployment } from '../api/types.js';
import { parseEnvFile, type Lookup } from './interpolate.js';
import { mapCompose, normaliseName, type ComposeObject } from './map.js';
import { validateCompose } from './schema.js';
import { composeFilesIn, readProject, type ComposeModel, type ComposeSource } from './project.js';

export { COMPOSE_FILE_NAMES, composeFilesIn, composeFileVariable, OVERRIDE_FILE_NAMES, type ComposeSource } from './project.js';

export interface ComposeOptions {
  /** The deployment's name (--name); else the file's top-level name, else its directory's. */
  name?: string;
  /** --env-file: replaces the .env beside the compose file. */
  envFiles?: string[];
  /** --profile (and COMPOSE_PROFILES). */
  profiles?: string[];
  /** --strict: every warning is an error. */
  strict?: boolean;
  allowPrivileged?: boolean;
  /** The process environment (tests pass their own). */
  env?: Record<string, string | undefined>;
}

export interface ComposeApp {
  deployment: Deployment;
  /** Ignored fields, each said once, with where they are. */
  warnings: ManifestProblem[];
  /** The secrets and configs the file declares with file:, environment: or content:, for apply to create. */
  objects: ComposeObject[];
}

/** A parsed YAML value is a compose file when it has top-level services and no kind. */
export function looksLikeCompose(value: unknown): boolean {
  return value !== null && typeof value === 'object' && !Array.isArray(value) && 'services' in value && !('kind' in value);
}

/** The compose file of a directory, if it holds one (compose's own names and order). */
export function composeFileIn(dir: string): string | undefined {
  return composeFilesIn(dir)[0];
}

/** Whether a source's text is a compose file (a cheap parse of its first document). */
export function isComposeText(text: string): boolean {
  try {
    return looksLikeCompose(parseDocument(text, { merge: true }).toJS({ maxAliasCount: 100 }));
  } catch {
    return false;
  }
}

function variables(src: ComposeSource, opts: ComposeOptions, problems: ManifestProblem[]): (name: string) => string | undefined {
  const env = opts.env ?? process.env;
  const files = opts.envFiles?.length ? opts.envFiles.map((f) => resolve(f)) : [join(src.dir, '.env')];
  const fromFiles = new Map<string, string>();
  for (const f of files) {
    let text: string;
    try {
      text = readFileCapped(f, MAX_MANIFEST_BYTES).toString('utf8');
    } catch (e) {
      if (opts.envFiles?.length) problems.push({ file: f, line: 0, column: 0, document: 0, message: `cannot read the env file: ${(e as Error).message}` });
      continue;
    }
    for (const [k, v] of parseEnvFile(text)) fromFiles.set(k, v);
  }
  // The environment wins over the env file, as in compose.
  return (name) => env[name] ?? fromFiles.get(name);
}

/**
 * Seed 001 writes GPUs as `gpus: N` (docker run's --gpus form) besides the Specification's `all`
 * and device list: a count is checked as `all` would be, then mapped as the count it is.
 */
function withoutGpuCounts(app: Record<string, unknown>): Record<string, unknown> {
  const services = app.services as Record<string, Record<string, unknown> | null> | undefined;
  if (!services || typeof services !== 'object') return app;
  const counted = Object.entries(services).filter(([, s]) => s && (typeof s.gpus === 'number' || /^[0-9]+$/.test(String(s?.gpus ?? ''))));
  if (!counted.length) return app;
  return { ...app, services: { ...services, ...Object.fromEntries(counted.map(([n, s]) => [n, { ...s, gpus: 'all' }])) } };
}

/**
 * The merged compose model of the files given, in order (each file's includes and extends
 * resolved), checked against the Compose Specification: what `jaco convert -o compose` prints, as
 * `docker compose config` does. Throws ManifestError naming the file, line and field of every
 * problem — in the file that said it.
 */
export function composeModel(src: ComposeSource | ComposeSource[], opts: ComposeOptions = {}): ComposeModel & { warnings: ManifestProblem[]; lookup: Lookup } {
  const sources = Array.isArray(src) ? src : [src];
  const problems: ManifestProblem[] = [];
  const warnings: ManifestProblem[] = [];
  const lookup = variables(sources[0]!, opts, problems);
  const project = readProject(sources, { lookup, problems, warnings, env: opts.env ?? process.env });
  if (!problems.length) for (const is of validateCompose(withoutGpuCounts(project.model))) problems.push(located(project, is.path, is.message, is.rule));
  if (problems.length) throw new ManifestError(problems);
  return { ...project, warnings, lookup };
}

/** A problem at a path of the merged model, in the file that said it. */
function located(project: ComposeModel, path: Path, message: string, rule?: string): ManifestProblem {
  return { ...project.locate(path), document: 0, path: formatPath(path) || undefined, message, ...(rule ? { rule } : {}) };
}

/** Reads a compose application (one file, or several merged in order) into a Deployment; throws ManifestError listing every problem (and, under --strict, every warning). */
export function loadCompose(src: ComposeSource | ComposeSource[], opts: ComposeOptions = {}): ComposeApp {
  const sources = Array.isArray(src) ? src : [src];
  const main = sources[0]!;
  const project = composeModel(sources, opts);
  const { model: app, lookup, warnings } = project;
  const problems: ManifestProblem[] = [];
  const at = (path: Path, message: string, rule?: string) => located(project, path, message, rule);

  // As docker compose names a project: -p (--name), COMPOSE_PROJECT_NAME, the top-level name:, the directory.
  const fromVariable = opts.name === undefined ? lookup('COMPOSE_PROJECT_NAME') || undefined : undefined;
  const raw = opts.name ?? fromVariable ?? (typeof app.name === 'string' ? app.name : main.name === '<stdin>' ? undefined : basename(resolve(main.dir)));
  if (raw === undefined) problems.push({ file: main.name, line: 1, column: 1, document: 0, message: 'a compose file from stdin needs a name: --name NAME, COMPOSE_PROJECT_NAME, or a top-level name:' });
  const name = raw === undefined ? '' : normaliseName(raw);
  if (raw !== undefined && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name))
    problems.push(at(['name'], `cannot make a deployment name of ${fromVariable !== undefined ? `COMPOSE_PROJECT_NAME=${JSON.stringify(raw)}` : JSON.stringify(raw)}: use --name`));

  const profiles = opts.profiles?.length ? opts.profiles : (opts.env ?? process.env).COMPOSE_PROFILES?.split(',').filter(Boolean) ?? [];
  const mapped = mapCompose(app, { dir: project.dir, project: name || 'unnamed', lookup, profiles, allowPrivileged: !!opts.allowPrivileged, readFile: (f) => readFileCapped(f, MAX_MANIFEST_BYTES).toString('utf8'), readBytes: (f) => readFileCapped(f, MAX_MANIFEST_BYTES), home: homedir() });
  for (const is of mapped.issues) (is.severity === 'refuse' || opts.strict ? problems : warnings).push(at(is.path, is.message, is.severity === 'refuse' ? 'compose' : 'ignored'));
  const deployment: Deployment = {
    apiVersion: API_VERSION,
    kind: 'Deployment',
    metadata: { name, annotations: { 'jaco.dev/compose-file': sources.map((s) => (s.name === '<stdin>' ? '<stdin>' : resolve(s.name))).join(',') } },
    spec: mapped.spec,
  };
  // What jaco itself requires of a Deployment (names, one replica with volumes, …), reported at
  // the compose service the rule is about.
  // Checked even when the mapping refused something, so every problem is reported at once.
  const issues = schemas().validate({ ...deployment, metadata: { ...deployment.metadata, name: name || 'unnamed' } });
  for (const is of issues.length ? issues : deploymentRuleIssues(deployment)) {
    const [, , jacoName, ...rest] = is.path;
    const service = jacoName === undefined ? undefined : (mapped.composeNames.get(String(jacoName)) ?? jacoName);
    problems.push(at(is.path[0] === 'spec' && service !== undefined ? ['services', service] : [], `${formatPath(['services', ...(service !== undefined ? [service] : []), ...rest])}: ${is.message}`, is.rule));
  }
  if (problems.length) throw new ManifestError(problems);
  return { deployment, warnings, objects: mapped.objects };
}

/** A compose source from a path (a file, or a directory holding one of COMPOSE_FILE_NAMES). */
export function composeSource(name: string, text: string): ComposeSource {
  return { name, text, dir: name === '<stdin>' ? process.cwd() : dirname(resolve(name)) };
}
