// Variable interpolation exactly as Docker Compose does it (compose-spec "Interpolation"):
//   $VAR  ${VAR}                 the value, empty when unset (compose warns)
//   ${VAR:-default} ${VAR-default}  default when unset or empty (:-) / unset (-)
//   ${VAR:?message} ${VAR?message}  error when unset or empty (:?) / unset (?)
//   ${VAR:+replacement} ${VAR+replacement}  replacement when set and non-empty (:+) / set (+)
//   $$                            a literal $
// Defaults, messages and replacements are interpolated themselves (compose allows nesting).

/** What a variable is, looked up: undefined when unset. */
export type Lookup = (name: string) => string | undefined;

export interface Interpolated {
  value: string;
  /** Variables used while unset (no default): compose substitutes "" and warns. */
  unset: string[];
}

export class InterpolationError extends Error {
  override name = 'InterpolationError';
}

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

/** Interpolates one string. Throws InterpolationError for a required variable or a malformed expression. */
export function interpolate(text: string, lookup: Lookup): Interpolated {
  const unset: string[] = [];
  const value = expand(text, lookup, unset);
  return { value, unset: [...new Set(unset)] };
}

function expand(text: string, lookup: Lookup, unset: string[]): string {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c !== '$') {
      out += c;
      i++;
      continue;
    }
    const next = text[i + 1];
    if (next === '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (next === '{') {
      const end = closing(text, i + 2);
      if (end < 0) throw new InterpolationError(`invalid interpolation format for ${JSON.stringify(text)}: "\${" without a closing "}"`);
      out += braced(text.slice(i + 2, end), lookup, unset, text);
      i = end + 1;
      continue;
    }
    const name = NAME.exec(text.slice(i + 1))?.[0];
    if (!name) {
      // A lone $ (followed by nothing a name can start with) stays as it is, as compose leaves it.
      out += '$';
      i++;
      continue;
    }
    out += valueOf(name, lookup, unset);
    i += 1 + name.length;
  }
  return out;
}

/** The index of the "}" closing a "${" whose body starts at `from`, counting nested "${…}". */
function closing(text: string, from: number): number {
  let depth = 1;
  for (let j = from; j < text.length; j++) {
    if (text[j] === '$' && text[j + 1] === '{') {
      depth++;
      j++;
    } else if (text[j] === '}' && --depth === 0) return j;
  }
  return -1;
}

function valueOf(name: string, lookup: Lookup, unset: string[]): string {
  const v = lookup(name);
  if (v === undefined) {
    unset.push(name);
    return '';
  }
  return v;
}

function braced(body: string, lookup: Lookup, unset: string[], whole: string): string {
  const name = NAME.exec(body)?.[0];
  if (!name) throw new InterpolationError(`invalid interpolation format for ${JSON.stringify(whole)}: "\${${body}}" does not start with a variable name`);
  const rest = body.slice(name.length);
  if (!rest) return valueOf(name, lookup, unset);
  const op = /^(:-|-|:\?|\?|:\+|\+)/.exec(rest)?.[0];
  if (!op) throw new InterpolationError(`invalid interpolation format for ${JSON.stringify(whole)}: unexpected ${JSON.stringify(rest)} after \${${name}`);
  const arg = rest.slice(op.length);
  const v = lookup(name);
  const colon = op.startsWith(':');
  const missing = v === undefined || (colon && v === '');
  switch (op) {
    case ':-':
    case '-':
      return missing ? expand(arg, lookup, unset) : v!;
    case ':?':
    case '?':
      if (missing) throw new InterpolationError(`required variable ${name} is ${v === undefined ? 'missing a value' : 'empty'}: ${expand(arg, lookup, unset) || `${name} must be set`}`);
      return v!;
    default:
      return missing ? '' : expand(arg, lookup, unset);
  }
}

/** Parses a .env file as compose reads it: KEY=VALUE lines, # comments, optional `export`, quotes. */
export function parseEnvFile(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*(?:=\s*(.*))?$/.exec(line);
    if (!m) continue;
    let v = m[2] ?? '';
    if (v.length >= 2 && (v[0] === '"' || v[0] === "'") && v.endsWith(v[0]!)) {
      const q = v[0];
      v = v.slice(1, -1);
      if (q === '"') v = v.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    } else v = v.replace(/\s+#.*$/, ''); // an unquoted value ends at an inline comment
    out.set(m[1]!, v);
  }
  return out;
}
