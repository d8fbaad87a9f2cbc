// The Compose Specification's merge rules (compose-spec merge.md, as compose-go applies them): how
// a later file (`-f a -f b`, compose.override.yaml) or an extending service lays itself over an
// earlier one. Mappings merge key by key; sequences append; command, entrypoint and
// healthcheck.test are replaced; key=value attributes (environment, labels, …) merge by key in
// either form; ports, volumes, secrets, configs, devices and the other unique sequences keep one
// entry per key, the later one winning in place. `!reset` removes what the earlier file said and
// `!override` replaces it whole. Pure: values in, value out.

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Reset) && !(v instanceof Override);

/** A value written `!reset`: whatever the earlier files said here is removed. */
export class Reset {}
/** A value written `!override`: it replaces what the earlier files said here, not merged. */
export class Override {
  constructor(readonly value: unknown) {}
}

/** Attributes whose later value replaces the earlier one whole (merge.md "Shell commands"). */
const REPLACED = new Set(['services.*.command', 'services.*.entrypoint', 'services.*.healthcheck.test']);

/** key=value attributes, written as a list of "K=V" or a mapping: merged by key. */
const KEY_VALUE = new Set([
  'services.*.environment',
  'services.*.labels',
  'services.*.annotations',
  'services.*.sysctls',
  'services.*.extra_hosts',
  'services.*.build.args',
  'services.*.build.labels',
  'services.*.deploy.labels',
  'volumes.*.labels',
  'networks.*.labels',
]);

/** Attributes written as a list of names or a mapping by name: merged by name. */
const BY_NAME: Record<string, unknown> = {
  'services.*.depends_on': { condition: 'service_started' },
  'services.*.networks': null,
};

/** Sequences holding one entry per key (compose-go's uniqueness indexers): the later entry wins, in place. */
const UNIQUE: Record<string, (entry: unknown) => string> = {
  'services.*.ports': portKey,
  'services.*.volumes': volumeKey,
  'services.*.secrets': (e) => mountKey(e, '/run/secrets/'),
  'services.*.configs': (e) => mountKey(e, '/'),
  'services.*.devices': (e) => (isObj(e) ? String(e.target ?? e.source) : String(e).split(':')[1] ?? String(e)),
  'services.*.env_file': (e) => (isObj(e) ? String(e.path) : String(e)),
  'services.*.expose': String,
  'services.*.dns': String,
  'services.*.dns_opt': String,
  'services.*.dns_search': String,
  'services.*.tmpfs': String,
  'services.*.cap_add': String,
  'services.*.cap_drop': String,
  'services.*.links': String,
  'services.*.profiles': String,
  'services.*.security_opt': String,
  'services.*.networks.*.aliases': String,
};

/** The pattern of a path: the names of services and other resources become `*`. */
function pattern(path: readonly string[]): string {
  return path.map((p, i) => (i === 1 && ['services', 'volumes', 'networks', 'secrets', 'configs'].includes(path[0]!) ? '*' : i === 3 && path[2] === 'networks' ? '*' : p)).join('.');
}

/** "[ip:][published:]target[/protocol]" or the long form, as one key. */
function portKey(e: unknown): string {
  if (isObj(e)) return `${String(e.host_ip ?? '')}:${String(e.published ?? '')}:${String(e.target)}/${String(e.protocol ?? 'tcp')}`;
  const s = String(e);
  const protocol = /\/(\w+)$/.exec(s)?.[1] ?? 'tcp';
  const parts = s.replace(/\/\w+$/, '').split(':');
  const target = parts.pop();
  const published = parts.pop() ?? '';
  return `${parts.join(':')}:${published}:${target}/${protocol}`;
}

/** A volume's key is where it is mounted. */
function volumeKey(e: unknown): string {
  if (isObj(e)) return String(e.target);
  const parts = String(e).split(':');
  return parts.length === 1 ? parts[0]! : parts[1]!;
}

/** A secret's or config's key is the file it becomes (its default target when none is said). */
function mountKey(e: unknown, under: string): string {
  const source = isObj(e) ? String(e.source) : String(e);
  const target = isObj(e) && e.target !== undefined ? String(e.target) : source;
  return target.startsWith('/') ? target : `${under}${target}`;
}

/** A key=value list ("K=V", "K") or mapping, as a mapping ("K" alone is K: null, as compose reads it). */
function keyValues(v: unknown, path: string): Obj {
  if (isObj(v)) return v;
  if (!Array.isArray(v)) return {};
  const sep = path.endsWith('extra_hosts') ? /[=:]/ : /=/;
  return Object.fromEntries(
    v.map((e) => {
      const s = String(e);
      const m = sep.exec(s);
      return m ? [s.slice(0, m.index), s.slice(m.index + 1)] : [s, null];
    }),
  );
}

/** A list of names or a mapping by name, as a mapping (each listed name with the default value). */
function byName(v: unknown, dflt: unknown): Obj {
  if (isObj(v)) return v;
  return Array.isArray(v) ? Object.fromEntries(v.map((n) => [String(n), structuredClone(dflt)])) : {};
}

/** The value with every `!reset` removed and every `!override` unwrapped (nothing left to merge into). */
export function settle(v: unknown): unknown {
  if (v instanceof Override) return settle(v.value);
  if (Array.isArray(v)) return v.filter((x) => !(x instanceof Reset)).map(settle);
  if (isObj(v)) return Object.fromEntries(Object.entries(v).filter(([, x]) => !(x instanceof Reset)).map(([k, x]) => [k, settle(x)]));
  return v;
}

/** `over` laid over `base` at `path` (the path decides the rule). Both may hold !reset / !override marks. */
export function mergeAt(path: readonly string[], base: unknown, over: unknown): unknown {
  if (over instanceof Override) return settle(over.value);
  if (over === null || over === undefined) return base; // an empty entry adds nothing
  if (base === null || base === undefined || base instanceof Reset) return over;
  const p = pattern(path);
  if (REPLACED.has(p)) return over;
  if (KEY_VALUE.has(p) && (Array.isArray(base) || isObj(base)) && (Array.isArray(over) || isObj(over))) {
    if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over]; // one entry per key: unique()
    return mergeMaps(path, keyValues(base, p), keyValues(over, p));
  }
  if (p in BY_NAME && (Array.isArray(base) || isObj(base)) && (Array.isArray(over) || isObj(over))) {
    if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over];
    return mergeMaps(path, byName(base, BY_NAME[p]), byName(over, BY_NAME[p]));
  }
  if (p === 'services.*.build' && (typeof base === 'string' || typeof over === 'string')) {
    const asMap = (b: unknown) => (typeof b === 'string' ? { context: b } : b);
    return mergeAt(path, asMap(base), asMap(over));
  }
  if (p === 'services.*.ulimits.*' && !(isObj(base) && isObj(over))) return over;
  if (Array.isArray(base) && Array.isArray(over)) return [...base, ...over];
  if (isObj(base) && isObj(over)) return mergeMaps(path, base, over);
  return over;
}

function mergeMaps(path: readonly string[], base: Obj, over: Obj): Obj {
  const out: Obj = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (v instanceof Reset) delete out[k];
    else out[k] = k in base ? mergeAt([...path, k], base[k], v) : v;
  }
  return out;
}

/**
 * The unique sequences of a merged model, one entry per key (the later entry wins, where the earlier
 * stood), and the key=value lists with one entry per key: what compose-go's EnforceUnicity does.
 */
export function unique(v: unknown, path: readonly string[] = []): unknown {
  if (Array.isArray(v)) {
    const p = pattern(path);
    const keyOf = UNIQUE[p] ?? (KEY_VALUE.has(p) ? (e: unknown) => Object.keys(keyValues([e], p))[0]! : undefined);
    const items = v.map((x, i) => unique(x, [...path, String(i)]));
    if (!keyOf) return items;
    const out: unknown[] = [];
    const at = new Map<string, number>();
    for (const e of items) {
      const k = keyOf(e);
      const i = at.get(k);
      if (i === undefined) at.set(k, out.push(e) - 1);
      else out[i] = e;
    }
    return out;
  }
  if (isObj(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, unique(x, [...path, k])]));
  return v;
}
