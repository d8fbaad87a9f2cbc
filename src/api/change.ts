// What changed between two deployment specs, as a one-line summary ("web: image a → b; +worker")
// for revision history and audit records, and as a unified YAML diff for `jaco diff`.
import { createTwoFilesPatch } from 'diff';
import { stringify } from 'yaml';
import { canonicalJson, shortDigest } from './spec.js';
import type { DeploymentSpec, ServiceSpec } from './types.js';

const SHOWN_FIELDS: (keyof ServiceSpec)[] = ['image', 'replicas'];

function fieldChanges(a: ServiceSpec, b: ServiceSpec): string[] {
  const out: string[] = [];
  const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort() as (keyof ServiceSpec)[];
  for (const k of keys) {
    const av = a[k];
    const bv = b[k];
    if (canonicalJson(av) === canonicalJson(bv)) continue;
    // A new pin of a changed image goes without saying; a new digest of the same tag is the news.
    if (k === 'pinnedImage') {
      if (a.image === b.image) out.push(`digest ${shortDigest(a.pinnedImage)} → ${shortDigest(b.pinnedImage)}`);
      continue;
    }
    if (SHOWN_FIELDS.includes(k)) out.push(`${k} ${av ?? '<unset>'} → ${bv ?? '<unset>'}`);
    else out.push(`${k} changed`);
  }
  return out;
}

/** "web: image x:1 → x:2; +worker; -old" — empty string when nothing changed. */
export function summarizeChange(prev: DeploymentSpec | undefined, next: DeploymentSpec): string {
  if (!prev) return `created with ${Object.keys(next.services).sort().join(', ')}`;
  const parts: string[] = [];
  const names = [...new Set([...Object.keys(prev.services), ...Object.keys(next.services)])].sort();
  for (const n of names) {
    const a = prev.services[n];
    const b = next.services[n];
    if (!a) parts.push(`+${n}`);
    else if (!b) parts.push(`-${n}`);
    else {
      const c = fieldChanges(a, b);
      if (c.length) parts.push(`${n}: ${c.join(', ')}`);
    }
  }
  return parts.join('; ');
}

/** A unified diff of two objects rendered as YAML; `labels` name the two sides (default live / manifest). */
export function yamlDiff(name: string, before: unknown, after: unknown, labels: { from: string; to: string } = { from: 'live', to: 'manifest' }): string {
  const a = before === undefined ? '' : stringify(before, { lineWidth: 0, sortMapEntries: true });
  const b = after === undefined ? '' : stringify(after, { lineWidth: 0, sortMapEntries: true });
  if (a === b) return '';
  const patch = createTwoFilesPatch(`${name} (${labels.from})`, `${name} (${labels.to})`, a, b, undefined, undefined, { context: 3 });
  return patch.replace(/^=+\n/, '');
}
