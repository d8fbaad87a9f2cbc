// Printing: kubectl-style tables, ages, and -o yaml|json (lists as a kubectl-style List).
import { createRequire } from 'node:module';
import { formatDuration } from '../api/units.js';

// yaml (CommonJS too) is loaded when -o yaml asks for it: a table or JSON does not pay its 70 files.
const requireCjs = createRequire(import.meta.url);

/** Indents every line that has text (a trailing newline stays a newline, not an indented empty line). */
export function indent(text: string, spaces: number): string {
  return text.replace(/^(?=.)/gm, ' '.repeat(spaces));
}

export function table(headers: string[], rows: (string | number | undefined)[][]): string {
  const cells = [headers, ...rows.map((r) => r.map((c) => (c === undefined || c === '' ? '<none>' : String(c))))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  return cells.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]! + 3))).join('').trimEnd()).join('\n') + '\n';
}

/** Prints a table, or kubectl's "No resources found." (on stderr) when there are no rows. */
export function printTable(headers: string[], rows: (string | number | undefined)[][]): void {
  if (!rows.length) process.stderr.write('No resources found.\n');
  else process.stdout.write(table(headers, rows));
}

/** "5s", "3m", "2h", "4d" since an RFC 3339 time. */
export function age(since: string | undefined, now = Date.now()): string {
  if (!since) return '<unknown>';
  const ms = now - Date.parse(since);
  if (!Number.isFinite(ms)) return '<unknown>';
  if (ms < 0) return '0s';
  if (ms < 120_000) return `${Math.floor(ms / 1000)}s`;
  if (ms < 7_200_000) return `${Math.floor(ms / 60_000)}m`;
  if (ms < 172_800_000) return `${Math.floor(ms / 3_600_000)}h`;
  return `${Math.floor(ms / 86_400_000)}d`;
}

export function toYaml(v: unknown): string {
  const { stringify } = requireCjs('yaml') as typeof import('yaml');
  return stringify(v, { lineWidth: 0 });
}

export function toJson(v: unknown): string {
  return JSON.stringify(v, null, 2) + '\n';
}

export function asList(items: unknown[], resourceVersion?: number): Record<string, unknown> {
  return { apiVersion: 'v1', kind: 'List', metadata: { resourceVersion: resourceVersion === undefined ? '' : String(resourceVersion) }, items };
}

/** Prints objects as -o yaml / json (one object alone, several as a List). */
export function printObjects(format: string, items: unknown[], single: boolean, resourceVersion?: number): void {
  const v = single ? items[0] : asList(items, resourceVersion);
  process.stdout.write(format === 'json' ? toJson(v) : toYaml(v));
}

export { formatDuration };
