// A compose application's top-level secrets and configs: each one an active service uses is read
// on the operator's machine (file:, environment:, content:) into an object apply creates under a
// content-derived name (src/secrets/version.ts), or taken as external (made with jaco secret
// create). Pure but for the caller's readFile; map.ts maps the services' references to them.
import { isAbsolute, resolve } from 'node:path';
import { FILE_OBJECT_NAME_MAX, FILE_OBJECT_NAME_PATTERN, MAX_FILE_OBJECT_BYTES } from '../api/crds.js';
import type { FileKind, FileOwner } from '../api/types.js';
import { composeObjectName, configVersion, secretVersion } from '../secrets/version.js';
import type { Path } from '../api/schema.js';
import type { Lookup } from './interpolate.js';

/** What reading them needs of map.ts's MapContext (not imported back: map.ts imports this module). */
interface FileContext {
  dir: string;
  project: string;
  lookup: Lookup;
  readFile(path: string): string;
  readBytes?(path: string): Buffer;
  home?: string;
}

/** A problem, as map.ts's ComposeIssue. */
interface Issue {
  path: Path;
  message: string;
  severity: 'refuse' | 'warn';
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * A secret or config the compose file declares with file:, environment: or content:, read on the
 * operator's machine: apply creates it (unless it exists) in the same transaction as the
 * deployment, under a content-derived name (src/secrets/version.ts).
 */
export interface ComposeObject {
  kind: FileKind;
  /** Its name in the cluster: <project>_<name>_<version> (or <name:>_<version>). */
  name: string;
  owner: FileOwner;
  /** Where the value came from, as a reader would say it (a path, an environment variable, inline). */
  from: string;
  value: Buffer;
}

/** A top-level secret or config, resolved: the cluster object a service's reference names (absent: refused). */
export interface Declared {
  source?: string;
}
export interface DeclaredFiles {
  secrets: Map<string, Declared>;
  configs: Map<string, Declared>;
}

/**
 * The top-level secrets and configs: each read once (file:, environment:, content:) into an object
 * apply creates under a content-derived name, or taken as external (made with jaco secret create).
 * Only those some active service uses are read.
 */
export function declaredFiles(app: Obj, ctx: FileContext, used: Set<string>, issues: Issue[], objects: ComposeObject[]): DeclaredFiles {
  const out: DeclaredFiles = { secrets: new Map(), configs: new Map() };
  const base = (p: string) => (p.startsWith('~/') && ctx.home ? resolve(ctx.home, p.slice(2)) : isAbsolute(p) ? p : resolve(ctx.dir, p));
  for (const kind of ['secrets', 'configs'] as const) {
    const one = kind === 'secrets' ? 'secret' : 'config';
    for (const [key, raw] of Object.entries(isObj(app[kind]) ? (app[kind] as Obj) : {})) {
      if (!used.has(`${kind}/${key}`)) continue;
      const d = isObj(raw) ? raw : {};
      const refuse = (message: string, ...at: string[]) => {
        issues.push({ path: [kind, key, ...at], severity: 'refuse', message });
        out[kind].set(key, {});
      };
      for (const k of ['driver', 'driver_opts', 'template_driver']) if (d[k] !== undefined) issues.push({ path: [kind, key, k], severity: 'refuse', message: `${k} is not supported: jaco stores ${kind} itself${one === 'secret' ? ' (sealed to the cluster key)' : ''}, from file:, environment:${one === 'config' ? ', content:' : ''} or external: true` });
      if (d.labels !== undefined) issues.push({ path: [kind, key, 'labels'], severity: 'warn', message: `labels of ${kind} are ignored` });
      const ext = d.external;
      if (ext !== undefined && ext !== false) {
        const name = isObj(ext) && typeof ext.name === 'string' ? ext.name : typeof d.name === 'string' ? d.name : key;
        if (!new RegExp(FILE_OBJECT_NAME_PATTERN).test(name)) refuse(`${JSON.stringify(name)} is not a ${one} name (letters, digits, _ . -)`, 'name');
        else out[kind].set(key, { source: name });
        continue;
      }
      let value: Buffer | undefined;
      let from: string;
      if (typeof d.file === 'string') {
        from = base(d.file);
        try {
          value = ctx.readBytes ? ctx.readBytes(from) : Buffer.from(ctx.readFile(from));
        } catch (e) {
          refuse(`cannot read ${one} file ${d.file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, 'file');
          continue;
        }
      } else if (typeof d.environment === 'string') {
        from = `$${d.environment}`;
        const v = ctx.lookup(d.environment);
        if (v === undefined) {
          refuse(`environment variable ${d.environment} is not set`, 'environment');
          continue;
        }
        value = Buffer.from(v);
      } else if (kind === 'configs' && typeof d.content === 'string') {
        from = 'content';
        value = Buffer.from(d.content);
      } else {
        refuse(`${one} "${key}" needs file:, environment:${one === 'config' ? ', content:' : ''} or external: true`);
        continue;
      }
      if (value.length > MAX_FILE_OBJECT_BYTES) {
        refuse(`${one} "${key}" is ${value.length} bytes; a ${one} holds at most ${MAX_FILE_OBJECT_BYTES} (500 KiB)`);
        continue;
      }
      const version = one === 'secret' ? secretVersion(value, ctx.project, key) : configVersion(value);
      const name = typeof d.name === 'string' ? `${d.name}_${version}` : composeObjectName(ctx.project, key, version);
      if (!new RegExp(FILE_OBJECT_NAME_PATTERN).test(name) || name.length > FILE_OBJECT_NAME_MAX) {
        refuse(`cannot make a ${one} name of ${JSON.stringify(name)} (letters, digits, _ . -, at most ${FILE_OBJECT_NAME_MAX}): shorten it, or give name:`, 'name');
        continue;
      }
      objects.push({ kind: one, name, owner: { deployment: ctx.project, name: key }, from, value });
      out[kind].set(key, { source: name });
    }
  }
  return out;
}

/** The top-level secrets and configs the active services refer to (`secrets/<name>`). */
export function filesReferred(services: [string, Obj][]): Set<string> {
  const used = new Set<string>();
  for (const [, svc] of services)
    for (const kind of ['secrets', 'configs'])
      if (Array.isArray(svc[kind])) for (const e of svc[kind] as unknown[]) used.add(`${kind}/${isObj(e) ? String(e.source) : String(e)}`);
  return used;
}

