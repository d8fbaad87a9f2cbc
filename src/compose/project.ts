// A compose application read from all its files, as `docker compose config` reads it: the files
// given (`-f a -f b`, or a directory's compose.yaml and its compose.override.yaml) merged in order,
// each file's `include`s and its services' `extends` (same file or another) resolved first, with
// the Specification's merge rules (merge.ts) and its `!reset` / `!override` tags. Every file keeps
// its own lines, so a problem anywhere in the merged model is reported in the file that said it —
// the extended or included one too.
import { statSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { isMap, isNode, isPair, isScalar, isSeq, LineCounter, parseDocument, Scalar, visit, type Document } from 'yaml';
import { MAX_MANIFEST_BYTES, positionOf, type ManifestProblem } from '../api/manifest.js';
import { readFileCapped } from '../api/capped-read.js';
import { formatPath, type Path } from '../api/schema.js';
import { interpolate, InterpolationError, parseEnvFile, type Lookup } from './interpolate.js';
import { mergeAt, Override, Reset, settle, unique } from './merge.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Reset) && !(v instanceof Override);

/** The names compose looks for in a directory, in its order. */
export const COMPOSE_FILE_NAMES = ['compose.yaml', 'compose.yml', 'docker-compose.yaml', 'docker-compose.yml'];
/** The override file compose merges over the one it found in a directory (the first of these there). */
export const OVERRIDE_FILE_NAMES = ['compose.override.yaml', 'compose.override.yml', 'docker-compose.override.yaml', 'docker-compose.override.yml'];

const isFile = (f: string) => {
  try {
    return statSync(f).isFile();
  } catch {
    return false;
  }
};

/** What a directory means to compose: its compose file, then its override file if it has one. */
export function composeFilesIn(dir: string): string[] {
  const main = COMPOSE_FILE_NAMES.map((f) => join(dir, f)).find(isFile);
  if (!main) return [];
  const override = OVERRIDE_FILE_NAMES.map((f) => join(dir, f)).find(isFile);
  return override ? [main, override] : [main];
}

/**
 * The files COMPOSE_FILE names, as docker compose reads it when no -f is given: split on
 * COMPOSE_PATH_SEPARATOR (default the platform's path list separator, `:`; `;` on Windows); a
 * relative one is the working directory's, as a relative -f is. Undefined when it is unset or empty.
 */
export function composeFileVariable(env: Readonly<Record<string, string | undefined>>, separator: string = delimiter): string[] | undefined {
  const files = (env.COMPOSE_FILE ?? '').split(env.COMPOSE_PATH_SEPARATOR || separator).filter(Boolean);
  return files.length ? files : undefined;
}

export interface ComposeSource {
  /** The file as the user named it, or <stdin>. */
  name: string;
  text: string;
  /** Relative paths in the file resolve against this directory. */
  dir: string;
}

/** One file as read: where its lines are. */
interface Layer {
  file: string;
  doc: Document;
  lc: LineCounter;
}

/** Where a part of the merged model was said: a file and the path there (a service extended under another name). */
interface Place {
  layer: Layer;
  prefix: Path;
}

/**
 * Which files said which parts of the merged model: each resource (`services/web`, `volumes/data`)
 * by the places that said it, in merge order (the last one said what won); everything else by the
 * files at the top.
 */
class Origins {
  readonly byResource = new Map<string, Place[]>();
  readonly top: Layer[] = [];

  add(section: string, name: string, place: Place): void {
    const k = `${section}/${name}`;
    this.byResource.set(k, [...(this.byResource.get(k) ?? []), place]);
  }
  merge(o: Origins): void {
    this.top.push(...o.top);
    for (const [k, places] of o.byResource) this.byResource.set(k, [...(this.byResource.get(k) ?? []), ...places]);
  }
  /** The file, line and column of a path of the merged model: the last file that says it, else the last that says its resource. */
  locate(path: Path): { file: string; line: number; column: number } {
    const places = (path.length >= 2 && this.byResource.get(`${path[0]}/${path[1]}`)) || this.top.map((layer) => ({ layer, prefix: [] as Path }));
    const translated = (p: Place) => (p.prefix.length ? [...p.prefix, ...path.slice(2)] : path);
    const said = [...places].reverse().find((p) => p.layer.doc.hasIn(translated(p))) ?? places[places.length - 1];
    if (!said) return { file: '<unknown>', line: 1, column: 1 };
    return { file: said.layer.file, ...positionOf(said.layer.doc, said.layer.lc, translated(said)) };
  }
}

/** What reading a project needs: the variables and where problems go. */
export interface ReadContext {
  lookup: Lookup;
  problems: ManifestProblem[];
  warnings: ManifestProblem[];
  /** A file's text (the file system; tests may pass their own). */
  readFile?(path: string): string;
  /** The process environment: an included project's variables start from it. */
  env: Record<string, string | undefined>;
  /** Files read for extends, by absolute path (each read and reported once). */
  cache?: Map<string, ReturnType<typeof readFile>>;
}

export interface ComposeModel {
  /** The merged application: every extends and include resolved, no !reset/!override left. Relative paths are the project directory's. */
  model: Obj;
  /** The project directory: the first file's. */
  dir: string;
  files: string[];
  /** The file, line and column that said a path of the model. */
  locate(path: Path): { file: string; line: number; column: number };
}

const SECTIONS = ['services', 'volumes', 'networks', 'secrets', 'configs'];

/**
 * The files merged in order into one model (compose's `-f a -f b`); problems go to ctx.problems
 * (each naming its file) and the model is what could be read.
 */
export function readProject(sources: ComposeSource[], ctx: ReadContext): ComposeModel {
  const origins = new Origins();
  let model: Obj = {};
  const dir = sources[0]!.dir;
  for (const src of sources) {
    // Every -f file's relative paths are the project directory's (compose: "relative to the base file").
    const one = readFile(src, dir, ctx, [], false);
    if (!one) continue;
    model = settle(mergeAt([], model, one.value)) as Obj;
    origins.merge(one.origins);
  }
  return { model: unique(model) as Obj, dir, files: sources.map((s) => s.name), locate: (p) => origins.locate(p) };
}

/** A file read, with its includes and extends resolved (paths rebased to `base` when it is not the file's own directory). */
function readFile(src: ComposeSource, base: string, ctx: ReadContext, stack: string[], rebased: boolean): { value: Obj; origins: Origins; layer: Layer } | undefined {
  const layer = parse(src, ctx);
  if (!layer) return undefined;
  const origins = new Origins();
  origins.top.push(layer);
  let value: unknown;
  try {
    value = layer.doc.toJS({ maxAliasCount: 100 });
  } catch (e) {
    ctx.problems.push({ file: src.name, line: 1, column: 1, document: 0, message: (e as Error).message, rule: 'yaml' });
    return undefined;
  }
  if (value === null || value === undefined) value = {};
  if (!isObj(value)) {
    ctx.problems.push({ file: src.name, line: 1, column: 1, document: 0, message: 'a compose file is a mapping (services:, volumes:, …)', rule: 'compose' });
    return undefined;
  }
  const problem = (path: Path, message: string) => ctx.problems.push({ file: src.name, ...positionOf(layer.doc, layer.lc, path), document: 0, path: formatPath(path) || undefined, message, rule: 'compose' });
  for (const section of SECTIONS) if (isObj(value[section])) for (const name of Object.keys(value[section] as Obj)) origins.add(section, name, { layer, prefix: [section, name] });

  const stackHere = [...stack, resolve(src.dir, src.name === '<stdin>' ? '' : src.name)];
  const services = isObj(value.services) ? (value.services as Obj) : undefined;
  if (services) {
    const resolved = new Map<string, Obj | undefined>();
    for (const name of Object.keys(services)) {
      const svc = extended(name, services, src, layer, ctx, stackHere, resolved, origins, problem, []);
      if (svc) services[name] = svc;
    }
  }
  if (rebased && src.dir !== base) rebasePaths(value, src.dir);
  if (value.include !== undefined) included(value, src, layer, ctx, stackHere, origins, problem);
  return { value, origins, layer };
}

/** Parses one file: YAML, compose's octal modes, variables interpolated, !reset and !override marked. */
function parse(src: ComposeSource, ctx: ReadContext): Layer | undefined {
  const lc = new LineCounter();
  const doc = parseDocument(src.text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true, merge: true });
  if (doc.errors.length) {
    for (const e of doc.errors) {
      const pos = e.linePos?.[0] ?? { line: 1, col: 1 };
      ctx.problems.push({ file: src.name, line: pos.line, column: pos.col, document: 0, message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''), rule: 'yaml' });
    }
    return undefined;
  }
  const layer = { file: src.name, doc, lc };
  octalModes(doc, src.text);
  const at = (path: Path) => ({ file: src.name, ...positionOf(doc, lc, path), document: 0, path: formatPath(path) || undefined });
  interpolateDocument(doc, ctx.lookup, (path, message, warn) => (warn ? ctx.warnings : ctx.problems).push({ ...at(path), message, rule: 'interpolation' }));
  markTags(doc);
  return layer;
}

/**
 * A service with its `extends` resolved: the base (this file's, or another file's, itself resolved)
 * with the service laid over it by the merge rules. A base from another file has its relative paths
 * made that file's. A cycle is refused.
 */
function extended(
  name: string,
  services: Obj,
  src: ComposeSource,
  layer: Layer,
  ctx: ReadContext,
  stack: string[],
  resolved: Map<string, Obj | undefined>,
  origins: Origins,
  problem: (path: Path, message: string) => void,
  chain: string[],
): Obj | undefined {
  if (resolved.has(name)) return resolved.get(name);
  const raw = services[name];
  const svc: Obj = isObj(raw) ? raw : {};
  const ext = svc.extends;
  if (ext === undefined) {
    resolved.set(name, svc);
    return svc;
  }
  const at: Path = ['services', name, 'extends'];
  const baseName = typeof ext === 'string' ? ext : isObj(ext) && typeof ext.service === 'string' ? ext.service : undefined;
  const file = isObj(ext) && ext.file !== undefined ? String(ext.file) : undefined;
  if (!baseName) return void problem(at, 'extends names a service: extends: NAME, or extends: {service: NAME, file: FILE}');
  const { extends: _e, ...own } = svc;
  // Unresolvable until said otherwise: a cycle or a missing base is reported once, where found.
  resolved.set(name, undefined);
  let base: Obj | undefined;
  let basePlaces: Place[];
  if (file === undefined) {
    if (chain.includes(baseName) || baseName === name) return void problem(at, `extends makes a cycle: ${[...chain, name, baseName].join(' → ')}`);
    if (!(baseName in services)) return void problem(at, `extends ${baseName}: there is no service ${baseName} in this file`);
    base = extended(baseName, services, src, layer, ctx, stack, resolved, origins, problem, [...chain, name]);
    basePlaces = origins.byResource.get(`services/${baseName}`) ?? [];
  } else {
    const path = isAbsolute(file) ? file : resolve(src.dir, file);
    if (stack.includes(path)) return void problem([...at, 'file'], `extends makes a cycle through ${file} (to extend a service of this file, leave file: out)`);
    const other = readOther(path, src, ctx, stack, (message) => problem([...at, 'file'], `cannot read ${file}: ${message}`));
    if (!other) return undefined;
    const otherServices = isObj(other.value.services) ? (other.value.services as Obj) : {};
    if (!(baseName in otherServices)) return void problem(at, `extends ${baseName}: ${file} has no service ${baseName}`);
    base = otherServices[baseName] as Obj;
    basePlaces = other.origins.byResource.get(`services/${baseName}`) ?? [];
  }
  if (!base) return undefined;
  // What says this service: its base's places (under the base's name), then its own.
  origins.byResource.set(`services/${name}`, [...basePlaces, ...(origins.byResource.get(`services/${name}`) ?? [])]);
  const out = settle(mergeAt(['services', name], settle(base), own)) as Obj;
  resolved.set(name, out);
  return out;
}

/** Another file (an extended base's), read once per project with its paths made its own directory's. */
function readOther(path: string, from: ComposeSource, ctx: ReadContext, stack: string[], cannot: (message: string) => void): ReturnType<typeof readFile> {
  const cache = (ctx.cache ??= new Map());
  if (cache.has(path)) return cache.get(path);
  let text: string;
  try {
    text = (ctx.readFile ?? ((f: string) => readFileCapped(f, MAX_MANIFEST_BYTES).toString('utf8')))(path);
  } catch (e) {
    cannot((e as NodeJS.ErrnoException).code ?? (e as Error).message);
    return undefined;
  }
  const other = readFile({ name: shownName(from, path), text, dir: dirname(path) }, from.dir, ctx, stack, true);
  cache.set(path, other);
  return other;
}

/** A file named from another one, shown as the user would find it (relative to the first file's directory when inside it). */
function shownName(from: ComposeSource, path: string): string {
  if (from.name === '<stdin>') return path;
  const shownDir = dirname(from.name);
  const rel = relative(from.dir, path);
  return rel.startsWith('..') || isAbsolute(rel) ? path : join(shownDir, rel);
}

/**
 * `include`: each entry's files read as a project of their own (their directory, their .env or
 * env_file), their relative paths made theirs, and their resources added to this file's. A
 * resource both define differently is refused, naming both files.
 */
function included(value: Obj, src: ComposeSource, layer: Layer, ctx: ReadContext, stack: string[], origins: Origins, problem: (path: Path, message: string) => void): void {
  const list = Array.isArray(value.include) ? value.include : [];
  delete value.include;
  list.forEach((entry, i) => {
    const at: Path = ['include', i];
    const e: Obj = isObj(entry) ? entry : { path: entry };
    const paths = (Array.isArray(e.path) ? e.path : [e.path]).map(String).map((p) => (isAbsolute(p) ? p : resolve(src.dir, p)));
    if (!paths.length || paths.some((p) => p === 'undefined')) return problem(at, 'include names a file: include: [FILE] or include: [{path: FILE}]');
    const projectDir = e.project_directory !== undefined ? resolve(src.dir, String(e.project_directory)) : dirname(paths[0]!);
    const envFiles = (e.env_file === undefined ? [join(projectDir, '.env')] : (Array.isArray(e.env_file) ? e.env_file : [e.env_file]).map((f) => resolve(src.dir, String(f))));
    const vars = new Map<string, string>();
    for (const f of envFiles) {
      try {
        for (const [k, v] of parseEnvFile((ctx.readFile ?? ((x: string) => readFileCapped(x, MAX_MANIFEST_BYTES).toString('utf8')))(f))) vars.set(k, v);
      } catch (err) {
        if (e.env_file !== undefined) problem([...at, 'env_file'], `cannot read ${f}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
    }
    const sub: ReadContext = { ...ctx, lookup: (n) => ctx.env[n] ?? vars.get(n) };
    let model: Obj = {};
    const subOrigins = new Origins();
    for (const path of paths) {
      if (stack.includes(path)) return problem(at, `include makes a cycle through ${relative(src.dir, path) || path}`);
      let text: string;
      try {
        text = (ctx.readFile ?? ((f: string) => readFileCapped(f, MAX_MANIFEST_BYTES).toString('utf8')))(path);
      } catch (err) {
        return problem([...at, ...(isObj(entry) ? ['path'] : [])], `cannot read ${relative(src.dir, path)}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
      }
      const one = readFile({ name: shownName(src, path), text, dir: projectDir }, projectDir, sub, stack, false);
      if (!one) continue;
      model = settle(mergeAt([], model, one.value)) as Obj;
      subOrigins.merge(one.origins);
    }
    if (projectDir !== src.dir) rebasePaths(model, projectDir);
    for (const section of SECTIONS) {
      const theirs = isObj(model[section]) ? (model[section] as Obj) : {};
      if (!Object.keys(theirs).length) continue;
      const ours = isObj(value[section]) ? (value[section] as Obj) : (value[section] = {});
      for (const [name, def] of Object.entries(theirs)) {
        if (name in (ours as Obj) && JSON.stringify(settle((ours as Obj)[name])) !== JSON.stringify(def)) {
          const there = subOrigins.locate([section, name]);
          problem([section, name], `${section}.${name} is also defined by the included ${there.file}:${there.line}: a resource is defined once (rename one, or extend it)`);
          continue;
        }
        (ours as Obj)[name] = def;
        for (const p of subOrigins.byResource.get(`${section}/${name}`) ?? []) origins.add(section, name, p);
      }
    }
  });
}

/**
 * Relative paths made absolute against `dir` (a file read from elsewhere: an extended base in
 * another file, an included project), so the merged model's relative paths are all the project
 * directory's: build contexts, env files, bind sources, secret and config files.
 */
function rebasePaths(value: Obj, dir: string): void {
  const abs = (p: string) => (isAbsolute(p) || p.startsWith('~') || /^[a-z]+:\/\//.test(p) ? p : resolve(dir, p));
  const services = isObj(value.services) ? (value.services as Obj) : {};
  for (const raw of Object.values(services)) {
    if (!isObj(raw)) continue;
    const s = raw;
    if (typeof s.build === 'string') s.build = abs(s.build);
    else if (isObj(s.build) && typeof s.build.context === 'string') s.build.context = abs(s.build.context);
    else if (isObj(s.build)) s.build.context = dir;
    if (s.env_file !== undefined) {
      const one = (e: unknown) => (isObj(e) ? { ...e, path: abs(String(e.path)) } : abs(String(e)));
      s.env_file = Array.isArray(s.env_file) ? s.env_file.map(one) : one(s.env_file);
    }
    if (Array.isArray(s.volumes))
      s.volumes = s.volumes.map((v) => {
        if (isObj(v)) return v.type === 'bind' && typeof v.source === 'string' ? { ...v, source: abs(v.source) } : v;
        const parts = String(v).split(':');
        if (parts.length >= 2 && /^\.\.?(\/|$)/.test(parts[0]!)) parts[0] = abs(parts[0]!);
        return parts.join(':');
      });
  }
  for (const kind of ['secrets', 'configs'])
    if (isObj(value[kind])) for (const d of Object.values(value[kind] as Obj)) if (isObj(d) && typeof d.file === 'string') d.file = abs(d.file);
}

/** Interpolates every string value of the document in place; problems and unset variables are reported where they are. */
function interpolateDocument(doc: Document, lookup: Lookup, report: (path: Path, message: string, warn: boolean) => void): void {
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
 * `!reset` and `!override` (compose's merge tags) become marks the merge reads: the node is
 * replaced by a scalar holding a Reset, or an Override of its own value. Its place in the file stays.
 */
function markTags(doc: Document): void {
  visit(doc, {
    Node(_key, node) {
      if (!isNode(node) || (node.tag !== '!reset' && node.tag !== '!override')) return;
      const mark = new Scalar(node.tag === '!reset' ? new Reset() : new Override(isMap(node) || isSeq(node) || isScalar(node) ? node.toJS(doc, { maxAliasCount: 100 }) : null));
      mark.range = node.range;
      return mark;
    },
  });
}
