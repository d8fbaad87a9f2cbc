// Reading manifests: files, directories and stdin, multi-document YAML. Every problem is reported
// at once with file:line:column, the document, the field path and the rule; a caller that gets any
// error writes nothing.
import { readdirSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { isNode, LineCounter, parseAllDocuments, type Document } from 'yaml';
import { formatPath, schemas, type Path, type ValidationIssue } from './schema.js';
import { deploymentRuleIssues } from './rules.js';
import type { AnyObject, Deployment } from './types.js';
import { ManifestError, type ManifestProblem } from './manifest-error.js';
import { readCapped, sizeText } from './capped-read.js';

export { formatProblem, ManifestError, type ManifestProblem } from './manifest-error.js';

/** Manifests larger than this are refused before parsing. */
export const MAX_MANIFEST_BYTES = 16 * 1024 * 1024;

export interface ManifestObject {
  file: string;
  document: number;
  object: AnyObject;
}

export interface Source {
  name: string;
  text: string;
}

const LIMIT_TEXT = `manifests are limited to ${MAX_MANIFEST_BYTES / 1048576} MiB`;

/** The text of stdin, read as a file is: at most MAX_MANIFEST_BYTES. */
function readStdin(): string | undefined {
  return readCapped(0, MAX_MANIFEST_BYTES)?.toString('utf8');
}

/**
 * Expands -f arguments: a file, a directory (its *.yaml / *.yml / *.json, sorted), or "-" (stdin).
 * Nothing is read past MAX_MANIFEST_BYTES (stdin returns undefined when it goes on past it).
 */
export function readSources(args: string[], stdin: () => string | undefined = readStdin): Source[] {
  const out: Source[] = [];
  const problems: ManifestProblem[] = [];
  const fileProblem = (file: string, message: string) => problems.push({ file, line: 0, column: 0, document: 0, message });
  for (const arg of args) {
    if (arg === '-') {
      const text = stdin();
      if (text === undefined) fileProblem('<stdin>', `more than ${sizeText(MAX_MANIFEST_BYTES)} read, and it goes on; ${LIMIT_TEXT}`);
      else out.push({ name: '<stdin>', text });
      continue;
    }
    let st;
    try {
      st = statSync(arg);
    } catch {
      fileProblem(arg, 'no such file or directory');
      continue;
    }
    const files = st.isDirectory()
      ? readdirSync(arg)
          .filter((f) => ['.yaml', '.yml', '.json'].includes(extname(f)))
          .sort()
          .map((f) => join(arg, f))
      : [arg];
    if (st.isDirectory() && files.length === 0) fileProblem(arg, 'directory holds no .yaml, .yml or .json files');
    for (const f of files) {
      // A regular file's size is known before reading; a device's or a pipe's only by reading.
      const size = statSync(f).size;
      const bytes = size > MAX_MANIFEST_BYTES ? undefined : readCapped(f, MAX_MANIFEST_BYTES);
      if (!bytes) {
        fileProblem(f, `${size > MAX_MANIFEST_BYTES ? `file is ${(size / 1048576).toFixed(1)} MiB` : `more than ${sizeText(MAX_MANIFEST_BYTES)} read, and it goes on`}; ${LIMIT_TEXT}`);
        continue;
      }
      out.push({ name: f, text: bytes.toString('utf8') });
    }
  }
  if (problems.length) throw new ManifestError(problems);
  return out;
}

/** Where a field path is in a parsed document (the deepest node of it that exists). */
export function positionOf(doc: Document, lc: LineCounter, path: Path): { line: number; column: number } {
  // The deepest node on the path that exists (a missing field points at its parent).
  for (let n = path.length; n >= 0; n--) {
    const node = n === 0 ? doc.contents : doc.getIn(path.slice(0, n), true);
    if (isNode(node) && node.range) {
      const pos = lc.linePos(node.range[0]);
      return { line: pos.line, column: pos.col };
    }
  }
  return { line: 1, column: 1 };
}

function objectLabel(o: unknown): string | undefined {
  const v = o as { kind?: unknown; metadata?: { name?: unknown } } | null;
  if (!v || typeof v !== 'object' || Array.isArray(v) || typeof v.kind !== 'string') return undefined;
  const kind = v.kind;
  return typeof v.metadata?.name === 'string' ? `${kind} "${v.metadata.name}"` : kind;
}

/** Parses and validates every document of every source; throws ManifestError listing all problems. */
export function parseManifests(sources: Source[], opts: { kinds?: string[] } = {}): ManifestObject[] {
  const problems: ManifestProblem[] = [];
  const objects: ManifestObject[] = [];
  for (const src of sources) {
    const lc = new LineCounter();
    const docs = parseAllDocuments(src.text, { lineCounter: lc, prettyErrors: true, uniqueKeys: true });
    const list = Array.isArray(docs) ? docs : [];
    let documentsSeen = 0;
    list.forEach((doc, i) => {
      const number = i + 1;
      if (doc.errors.length) {
        for (const e of doc.errors) {
          const pos = e.linePos?.[0] ?? { line: 1, col: 1 };
          problems.push({ file: src.name, line: pos.line, column: pos.col, document: number, message: e.message.split('\n')[0]!.replace(/ at line \d+, column \d+:?$/, ''), rule: 'yaml' });
        }
        return;
      }
      let value: unknown;
      try {
        value = doc.toJS({ maxAliasCount: 100 });
      } catch (e) {
        problems.push({ file: src.name, line: 1, column: 1, document: number, message: (e as Error).message, rule: 'yaml' });
        return;
      }
      if (value === null || value === undefined) return; // an empty document (e.g. a trailing ---)
      documentsSeen++;
      const report = (issues: ValidationIssue[]) => {
        for (const is of issues) {
          const pos = positionOf(doc, lc, is.path);
          problems.push({ file: src.name, ...pos, document: number, object: objectLabel(value), path: formatPath(is.path) || undefined, message: is.message, rule: is.rule });
        }
      };
      const kind = (value as { kind?: unknown } | null)?.kind;
      if (opts.kinds && typeof kind === 'string' && !opts.kinds.includes(kind)) {
        report([{ path: ['kind'], message: `${kind} objects are managed by jaco itself; manifests may contain ${opts.kinds.join(', ')}`, rule: 'kind' }]);
        return;
      }
      const issues = schemas().validate(value);
      if (issues.length) return report(issues);
      if (kind === 'Deployment') report(deploymentRuleIssues(value as Deployment));
      objects.push({ file: src.name, document: number, object: value as AnyObject });
    });
    if (documentsSeen === 0 && !problems.some((p) => p.file === src.name))
      problems.push({ file: src.name, line: 1, column: 1, document: 0, message: 'contains no objects (the file is empty or holds only comments)' });
  }
  const names = new Map<string, ManifestObject>();
  for (const o of objects) {
    const k = `${o.object.kind}/${o.object.metadata.name}`;
    const first = names.get(k);
    if (first) problems.push({ file: o.file, line: 1, column: 1, document: o.document, object: objectLabel(o.object), message: `${k} is also defined in ${first.file} document ${first.document}` });
    else names.set(k, o);
  }
  if (problems.length) throw new ManifestError(problems);
  return objects;
}
