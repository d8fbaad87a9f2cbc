// Reading a Compose file as compose does: YAML with anchors, aliases and merge keys; variables
// interpolated from the environment and the .env beside the file (or --env-file), with positions
// kept for every error; profiles; validation against the Compose Specification's own JSON schema
// (vendored from compose-spec/compose-spec, see schema.ts); then the mapping (map.ts). Every
// problem is reported at once with file:line:column and the field path.
import { statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Document } from 'yaml';
import { ManifestError, MAX_MANIFEST_BYTES, positionOf, readFileCapped, type ManifestProblem } from '../api/manifest.js';
import { deploymentRuleIssues } from '../api/rules.js';
import { formatPath, schemas, type Path } from '../api/schema.js';
import { API_VERSION, type Deployment } from '../api/types.js';
import { interpolate, InterpolationError, parseEnvFile } from './interpolate.js';
import { mapCompose, normaliseName, type ComposeObject } from './map.js';
import { validateCompose } from './schema.js';

/** The names compose looks for in a directory, in its order. */
export const COMPOSE_FILE_NAMES = ['compose.yaml', 'compose.yml', 'docker-compose.yaml', 'docker-compose.yml'];

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

export interface ComposeSource {
  /** The file as the user named it, or <stdin>. */
  name: string;
  text: string;
  /** Relative paths in the file resolve against this directory. */
  dir: string;
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
  return COMPOSE_FILE_NAMES.map((f) => join(dir, f)).find((f) => {
    try {
      return statSync(f).isFile();
    } catch {
      return false;
    }
  });
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

/** Interpolates every string value of the document in place; problems and unset variables are reported where they are. */
function interpolateDocument(doc: Document, lookup: (n: string) => string | undefined, report: (path: Path, message: string, warn: boolean) => void): void {
  const warned = new Set<string>();
  visit(doc, {
    Scalar(key, node, ancestors) {
      if (key === 'key' || typeof node.value !== 'string' || !node.value.includes('$')) return;
      const path: Path = [];
      ancestors.forEach((a, i) => {
        const child = ancestors[i + 1] ?? node;
        if (isSeq(a)) path.push(a.items.indexOf(child as never));
        else if (isPair(a) && isScalar(a.key)) path.push(String(a.key.value));
      });
      try {
        const r = interpolate(node.value, lookup);
        node.value = r.value;
        for (const v of r.unset) {
          if (warned.has(v)) continue;
          warned.add(v);
          report(path, `variable ${v} is not set; an empty string is used`, true);
        }
      } catch (e) {
        if (!(e instanceof InterpolationError)) throw e;
        report(path, e.message, false);
      }
    },
  });
}

/**
 * A secret's or config's `mode: 0440` is octal in compose (Go reads it so); YAML 1.2 reads it as
 * the decimal 440. Every `mode` written with a leading 0 is taken as compose takes it.
 */
function octalModes(doc: Document, text: string): void {
  visit(doc, {
    Pair(_key, pair) {
      if (!isScalar(pair.key) || pair.key.value !== 'mode' || !isScalar(pair.value) || typeof pair.value.value !== 'number' || !pair.value.range) return;
      const written = text.slice(pair.value.range[0], pair.value.range[1]).trim();
      if (/^0[0-7]+$/.test(written)) pair.value.value = parseInt(written, 8);
    },
  });
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

/** Reads one compose file into a Deployment; throws ManifestError listing every problem (and, under --strict, every warning). */
export function loadCompose(src: ComposeSource, opts: ComposeOptions = {}): ComposeApp {
  const problems: ManifestProblem[] = [];
  const warnings: ManifestProblem[] = [];
  const lc = new LineCounter();
  const doc = parseDocument(src.text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true, merge: true });
  const at = (path: Path, message: string, rule?: string): ManifestProblem => ({ file: src.name, ...positionOf(doc, lc, path), document: 0, path: formatPath(path) || undefined, message, ...(rule ? { rule } : {}) });
  if (doc.errors.length) {
    for (const e of doc.errors) {
      const pos = e.linePos?.[0] ?? { line: 1, col: 1 };
      problems.push({ file: src.name, line: pos.line, column: pos.col, document: 0, message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''), rule: 'yaml' });
    }
    throw new ManifestError(problems);
  }
  octalModes(doc, src.text);
  const lookup = variables(src, opts, problems);
  interpolateDocument(doc, lookup, (path, message, warn) => (warn ? warnings : problems).push(at(path, message, 'interpolation')));
  let app: Record<string, unknown>;
  try {
    app = doc.toJS({ maxAliasCount: 100 }) as Record<string, unknown>;
  } catch (e) {
    throw new ManifestError([{ file: src.name, line: 1, column: 1, document: 0, message: (e as Error).message, rule: 'yaml' }]);
  }
  for (const is of validateCompose(withoutGpuCounts(app))) problems.push(at(is.path, is.message, is.rule));
  if (problems.length) throw new ManifestError(problems);

  const raw = opts.name ?? (typeof app.name === 'string' ? app.name : src.name === '<stdin>' ? undefined : basename(resolve(src.dir)));
  if (raw === undefined) problems.push({ file: src.name, line: 1, column: 1, document: 0, message: 'a compose file from stdin needs a name: --name NAME, or a top-level name:' });
  const name = raw === undefined ? '' : normaliseName(raw);
  if (raw !== undefined && !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) problems.push(at(['name'], `cannot make a deployment name of ${JSON.stringify(raw)}: use --name`));

  const profiles = opts.profiles?.length ? opts.profiles : (opts.env ?? process.env).COMPOSE_PROFILES?.split(',').filter(Boolean) ?? [];
  const mapped = mapCompose(app, { dir: src.dir, project: name || 'unnamed', lookup, profiles, allowPrivileged: !!opts.allowPrivileged, readFile: (f) => readFileCapped(f, MAX_MANIFEST_BYTES).toString('utf8'), readBytes: (f) => readFileCapped(f, MAX_MANIFEST_BYTES), home: homedir() });
  for (const is of mapped.issues) (is.severity === 'refuse' || opts.strict ? problems : warnings).push(at(is.path, is.message, is.severity === 'refuse' ? 'compose' : 'ignored'));
  const deployment: Deployment = {
    apiVersion: API_VERSION,
    kind: 'Deployment',
    metadata: { name, annotations: { 'jaco.dev/compose-file': src.name === '<stdin>' ? '<stdin>' : resolve(src.name) } },
    spec: mapped.spec,
  };
  // What jaco itself requires of a Deployment (names, one replica with volumes, …), reported at
  // the compose service the rule is about.
  // Checked even when the mapping refused something, so every problem is reported at once.
  const issues = schemas().validate({ ...deployment, metadata: { ...deployment.metadata, name: name || 'unnamed' } });
  for (const is of issues.length ? issues : deploymentRuleIssues(deployment)) {
    const [, , service, ...rest] = is.path;
    problems.push(at(is.path[0] === 'spec' && service !== undefined ? ['services', service] : [], `${formatPath(['services', ...(service !== undefined ? [service] : []), ...rest])}: ${is.message}`, is.rule));
  }
  if (problems.length) throw new ManifestError(problems);
  return { deployment, warnings, objects: mapped.objects };
}

/** A compose source from a path (a file, or a directory holding one of COMPOSE_FILE_NAMES). */
export function composeSource(name: string, text: string): ComposeSource {
  return { name, text, dir: name === '<stdin>' ? process.cwd() : dirname(resolve(name)) };
}
