// Validation of every jaco object against its CRD's openAPIV3Schema, compiled by ajv. The CRDs
// are src/api/crds.ts's, from which crds/*.yaml are rendered (crds.test.ts keeps the files
// equal to them): read in memory, not parsed from YAML at every start of every process (0.1 s of
// a CLI command). Two modes over the same schemas:
//   - write (`validate`): unknown fields are errors, like `kubectl apply --validate=strict`; every
//     object schema with `properties` gets additionalProperties: false at compile time, unless it
//     preserves unknown fields. The CLI refuses what would not pass.
//   - read (`validateForRead`): what controllers and agents read from the store. Unknown fields are
//     pruned, not refused (Kubernetes prunes on read): an object written by a newer jaco during a
//     rolling upgrade, or hand-edited with etcdctl, still reads as what this version understands.
//     Only a value this version cannot understand (a wrong type, a missing required field) is
//     unreadable.
import type { Ajv, ErrorObject, Options, ValidateFunction } from 'ajv';
import type { FormatsPlugin } from 'ajv-formats';
import type ajvStandalone from 'ajv/dist/standalone/index.js';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../paths.js';
import { FILE_OBJECT_NAME_MAX, FILE_OBJECT_NAME_PATTERN } from './crds.js';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { API_VERSION } from './types.js';
import { crdDefinitions, NAME_PATTERN, REGISTRY_HOST_PATTERN } from './crds.js';

export type Path = (string | number)[];

export interface ValidationIssue {
  path: Path;
  message: string;
  /** The schema rule that failed (ajv keyword, or the cross-field rule's name). */
  rule: string;
}

/** "spec.services.web.ports[0]" */
export function formatPath(path: Path): string {
  return path.reduce<string>((acc, p) => (typeof p === 'number' ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

const metadataSchema = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 63, pattern: NAME_PATTERN },
    labels: { type: 'object', additionalProperties: { type: 'string' } },
    annotations: { type: 'object', additionalProperties: { type: 'string' } },
    resourceVersion: { type: 'string' },
    generation: { type: 'integer', minimum: 0 },
    uid: { type: 'string' },
    creationTimestamp: { type: 'string', format: 'date-time' },
  },
};

/**
 * Deployment names are DNS labels (they start replica ids and container names); every other
 * kind's name may carry dots, because node names are host names and global replica ids
 * (<deployment>-<service>-<host>) contain them.
 */
const subdomainMetadataSchema = {
  ...metadataSchema,
  properties: { ...metadataSchema.properties, name: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' } },
};

/** A Registry is named by its host[:port] (registries/<host>), which may carry a port or an IPv6 address. */
const registryMetadataSchema = {
  ...metadataSchema,
  properties: { ...metadataSchema.properties, name: { type: 'string', minLength: 1, maxLength: 253, pattern: REGISTRY_HOST_PATTERN } },
};

/** The kinds named like secrets and configs (a node's copy carries its object's name). */
const FILE_OBJECT_KINDS = new Set(['Secret', 'Config', 'NodeCopy']);
const fileObjectMetadataSchema = {
  ...metadataSchema,
  properties: { ...metadataSchema.properties, name: { type: 'string', minLength: 1, maxLength: FILE_OBJECT_NAME_MAX, pattern: FILE_OBJECT_NAME_PATTERN } },
};

function strictObjects(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(strictObjects);
  if (!schema || typeof schema !== 'object') return schema;
  const s = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, strictObjects(v)])) as Record<string, unknown>;
  if (s.properties && s.additionalProperties === undefined && !s['x-kubernetes-preserve-unknown-fields']) s.additionalProperties = false;
  return s;
}

/** What reading a stored value found: the issues that make it unreadable, and the unknown fields pruned. */
export interface ReadCheck {
  issues: ValidationIssue[];
  pruned: string[];
}

// ajv (a CommonJS package) is loaded only when a schema is compiled at run time: a process that
// finds every validator precompiled (below) never loads its compiler (some 60 modules a CLI
// command would load at its start).
const requireCjs = createRequire(import.meta.url);

export function newAjv(pruning: boolean, extra: Options = {}): Ajv {
  const { Ajv } = requireCjs('ajv') as typeof import('ajv');
  const addFormats = (requireCjs('ajv-formats') as { default: FormatsPlugin }).default;
  // removeAdditional: true drops exactly the properties additionalProperties: false would refuse.
  const ajv = new Ajv({ allErrors: true, strict: true, verbose: true, ...(pruning ? { removeAdditional: true } : {}), ...extra });
  addFormats(ajv);
  ajv.addKeyword('x-kubernetes-int-or-string');
  ajv.addKeyword('x-kubernetes-preserve-unknown-fields');
  return ajv;
}

/**
 * Validators compiled at build time (scripts/build-validators.mjs writes ajv's standalone code,
 * one CommonJS file per kind and mode, under dist/validators/): compiling the CRD schemas costs a
 * process 0.1–0.2 s at its first reads. Each file is named by a hash of the schema it was made
 * from, so a build older than the code is never used: the schema is then compiled at run time.
 */
export const PRECOMPILED_DIR = join(PACKAGE_ROOT, 'dist', 'validators');

/** The file a precompiled validator of this schema has: mode, kind and the schema's hash. */
export function precompiledName(kind: string, reading: boolean, schema: object): string {
  return `${reading ? 'read' : 'write'}-${kind}-${createHash('sha256').update(JSON.stringify(schema)).digest('hex').slice(0, 16)}.cjs`;
}

/** A kind's validator as ajv's standalone code (a CommonJS module), for scripts/build-validators.mjs. */
export function standaloneValidator(schema: object, reading: boolean): string {
  return standaloneCodeOf(newAjv(reading, { code: { source: true } }), schema);
}

/** `schema` compiled by `ajv` (made with `code: { source: true }`) as ajv's standalone code. */
export function standaloneCodeOf(ajv: Ajv, schema: object): string {
  const standaloneCode = (requireCjs('ajv/dist/standalone/index.js') as { default: typeof ajvStandalone.default }).default;
  return standaloneCode(ajv, ajv.compile(schema));
}

/** The validator built for this schema (precompiledName), or undefined when the build has none. */
export function precompiled(kind: string, reading: boolean, schema: object): ValidateFunction | undefined {
  const file = join(PRECOMPILED_DIR, precompiledName(kind, reading, schema));
  if (!existsSync(file)) return undefined;
  return (requireCjs(file) as { default: ValidateFunction }).default;
}

export class SchemaRegistry {
  private ajv?: Ajv;
  private reader?: Ajv;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly readers = new Map<string, ValidateFunction>();
  readonly crds: V1CustomResourceDefinition[];

  constructor(crds: V1CustomResourceDefinition[] = crdDefinitions()) {
    this.crds = crds;
  }

  kinds(): string[] {
    return this.crds.map((c) => c.spec.names.kind);
  }

  crd(kind: string): V1CustomResourceDefinition | undefined {
    return this.crds.find((c) => c.spec.names.kind === kind);
  }

  /** The schema a kind's values are checked against (what is compiled, at build time or at run time). */
  schemaOf(kind: string): object | undefined {
    const crd = this.crd(kind);
    const root = crd?.spec.versions[0]?.schema?.openAPIV3Schema as Record<string, unknown> | undefined;
    if (!root) return undefined;
    const props = { ...(root.properties as Record<string, unknown>) };
    props.apiVersion = { type: 'string', const: API_VERSION };
    props.kind = { type: 'string', const: kind };
    // Secrets and configs are named as Docker names them (db_password, app.conf): their own metadata.
    props.metadata = kind === 'Deployment' ? metadataSchema : kind === 'Registry' ? registryMetadataSchema : FILE_OBJECT_KINDS.has(kind) ? fileObjectMetadataSchema : subdomainMetadataSchema;
    return strictObjects({ ...root, properties: props, required: [...((root.required as string[]) ?? []), 'apiVersion', 'kind', 'metadata'] }) as object;
  }

  private compiled(kind: string, reading: boolean): ValidateFunction | undefined {
    const cache = reading ? this.readers : this.validators;
    let v = cache.get(kind);
    if (v) return v;
    const schema = this.schemaOf(kind);
    if (!schema) return undefined;
    v = precompiled(kind, reading, schema) ?? (reading ? (this.reader ??= newAjv(true)) : (this.ajv ??= newAjv(false))).compile(schema);
    cache.set(kind, v);
    return v;
  }

  private validator(kind: string): ValidateFunction | undefined {
    return this.compiled(kind, false);
  }

  /** Every schema violation of obj (all at once, not the first only). */
  validate(obj: unknown): ValidationIssue[] {
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return [{ path: [], message: 'must be a mapping (an object with apiVersion, kind, metadata, spec)', rule: 'type' }];
    const kind = (obj as { kind?: unknown }).kind;
    if (typeof kind !== 'string') return [{ path: ['kind'], message: `is required; one of ${this.kinds().join(', ')}`, rule: 'required' }];
    const v = this.validator(kind);
    if (!v) return [{ path: ['kind'], message: `unknown kind ${JSON.stringify(kind)}; one of ${this.kinds().join(', ')}`, rule: 'enum' }];
    return v(obj) ? [] : toIssues(v.errors ?? []);
  }

  /**
   * Checks a value read from the store, pruning (in place) the fields this version does not know;
   * `expectKind` is the kind stored under the key's prefix. Issues mean the value is unreadable.
   */
  validateForRead(obj: unknown, expectKind?: string): ReadCheck {
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return { issues: [{ path: [], message: 'must be an object', rule: 'type' }], pruned: [] };
    const kind = (obj as { kind?: unknown }).kind;
    if (expectKind && kind !== expectKind) return { issues: [{ path: ['kind'], message: `kind ${JSON.stringify(kind)} where ${expectKind} was expected`, rule: 'const' }], pruned: [] };
    if (typeof kind !== 'string') return { issues: [{ path: ['kind'], message: 'is required', rule: 'required' }], pruned: [] };
    const strict = this.validator(kind);
    if (!strict) return { issues: [{ path: ['kind'], message: `unknown kind ${JSON.stringify(kind)}`, rule: 'enum' }], pruned: [] };
    if (strict(obj)) return { issues: [], pruned: [] }; // the common case: one pass, nothing to prune
    const pruned = toIssues(strict.errors ?? [])
      .filter((i) => i.rule === 'additionalProperties')
      .map((i) => formatPath(i.path));
    const reader = this.compiled(kind, true)!;
    return { issues: reader(obj) ? [] : toIssues(reader.errors ?? []), pruned };
  }
}

/** ajv's errors as issues with field paths; `anyOf` names what an any-of failure means in that schema. */
export function toIssues(errors: ErrorObject[], anyOf = 'must be a number or a quantity string'): ValidationIssue[] {
  // An anyOf failure (int-or-string) also reports each branch's failure; keep only the anyOf —
  // unless the value has the type of exactly one branch (a port number out of range, a long-form
  // port missing a field, a number beside a string form): then that branch's own errors say what is wrong, and the anyOf goes.
  const branchOf = (a: ErrorObject): number | undefined => {
    const branches = ((a.parentSchema as { anyOf?: { type?: string }[] } | undefined)?.anyOf ?? []).map((b) => b.type);
    const t = typeof a.data === 'number' ? (Number.isInteger(a.data) ? ['integer', 'number'] : ['number']) : a.data !== null && typeof a.data === 'object' && !Array.isArray(a.data) ? ['object'] : [typeof a.data];
    const hits = branches.map((b, i) => (b && t.includes(b) ? i : -1)).filter((i) => i >= 0);
    // A number out of a branch's range (a port 0) is told by that branch too.
    return hits.length === 1 && (branches.includes('object') || typeof a.data === 'number') ? hits[0] : undefined;
  };
  const anyOfs = errors.filter((e) => e.keyword === 'anyOf').map((a) => ({ a, prefix: a.schemaPath.replace(/\/anyOf$/, '/anyOf/'), branch: branchOf(a) }));
  const kept = errors.filter((e) => {
    if (e.keyword === 'anyOf') return anyOfs.find((x) => x.a === e)?.branch === undefined;
    const owner = anyOfs.find((x) => e.instancePath.startsWith(x.a.instancePath) && e.schemaPath.startsWith(x.prefix));
    return !owner || (owner.branch !== undefined && e.schemaPath.startsWith(`${owner.prefix}${owner.branch}/`));
  });
  const issues = kept.map((e): ValidationIssue => {
    const path: Path = e.instancePath
      .split('/')
      .slice(1)
      .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
      .map((p) => (/^[0-9]+$/.test(p) ? Number(p) : p));
    switch (e.keyword) {
      case 'additionalProperties':
        return { path: [...path, String(e.params.additionalProperty)], message: 'unknown field', rule: 'additionalProperties' };
      case 'required':
        return { path: [...path, String(e.params.missingProperty)], message: 'is required', rule: 'required' };
      case 'anyOf': {
        const types = ((e.parentSchema as { anyOf?: { type?: string }[] } | undefined)?.anyOf ?? []).map((b) => b.type);
        // A number-or-object (a port): name the two shapes, not a quantity.
        if (types.includes('object')) return { path, message: `must be ${types.join(' or ')}`, rule: 'anyOf' };
        const desc = (e.parentSchema as { description?: string } | undefined)?.description;
        return { path, message: `${anyOf}${desc ? ` (${desc})` : ''}`, rule: 'anyOf' };
      }
      case 'enum':
        return { path, message: `must be one of ${(e.params.allowedValues as unknown[]).map((x) => JSON.stringify(x)).join(', ')}`, rule: 'enum' };
      case 'pattern': {
        const desc = (e.parentSchema as { description?: string } | undefined)?.description;
        return { path, message: `${JSON.stringify(e.data)} ${e.message}${desc ? ` (${desc})` : ''}`, rule: 'pattern' };
      }
      case 'const':
        return { path, message: `must be ${JSON.stringify(e.params.allowedValue)}`, rule: 'const' };
      default:
        return { path, message: e.message ?? 'is invalid', rule: e.keyword };
    }
  });
  const seen = new Set<string>();
  return issues.filter((i) => {
    const k = `${formatPath(i.path)}|${i.message}`;
    return seen.has(k) ? false : (seen.add(k), true);
  });
}

let shared: SchemaRegistry | undefined;
/** The process-wide registry over crds/ (compiled lazily, per kind). */
export function schemas(): SchemaRegistry {
  shared ??= new SchemaRegistry();
  return shared;
}
