// Tiny HTML helpers for the dashboard page: escaped template strings and number formats. No UI
// library: the page is a few tables redrawn from one JSON frame.

const ESC: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

export const esc = (v: unknown): string => String(v ?? '').replace(/[&<>"']/g, (c) => ESC[c]!);

/** A tagged template whose ${values} are escaped unless already wrapped by raw(). */
export class Raw {
  constructor(readonly html: string) {}
}
export const raw = (html: string) => new Raw(html);

export function h(strings: TemplateStringsArray, ...values: unknown[]): Raw {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += (Array.isArray(v) ? v.map((x) => (x instanceof Raw ? x.html : esc(x))).join('') : v instanceof Raw ? v.html : esc(v)) + strings[i + 1]!;
  });
  return raw(out);
}

export const pct = (x: number | null | undefined) => (x === undefined || x === null ? '-' : `${(x * 100).toFixed(0)}%`);
export const cores = (m: number) => `${+(m / 1000).toFixed(2)}`;

export function bytes(n: number): string {
  const units = ['B', 'Ki', 'Mi', 'Gi', 'Ti'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) (n /= 1024), i++;
  return `${+n.toFixed(1)}${units[i]}`;
}

export function duration(ms: number): string {
  if (ms < 1000) return `${ms}ms`;
  if (ms < 120_000) return `${(ms / 1000).toFixed(1)}s`;
  return `${Math.round(ms / 60_000)}m`;
}

/** A 0…1 bar with the trigger and cap drawn as ticks. */
export function meter(x: number | undefined, marks: number[] = []): Raw {
  const w = Math.max(0, Math.min(1, x ?? 0)) * 100;
  const cls = x === undefined ? 'none' : marks[0] !== undefined && x >= marks[0] ? 'hot' : marks[1] !== undefined && x >= marks[1] ? 'warm' : 'ok';
  return h`<span class="meter ${cls}"><span style="width:${w.toFixed(1)}%"></span>${marks.map((m) => h`<i style="left:${(m * 100).toFixed(1)}%"></i>`)}</span>`;
}
