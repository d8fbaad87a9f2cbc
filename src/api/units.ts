// Quantities and durations as operators write them in manifests ("500m", "128Mi", "1m30s").
// Quantity parsing is @kubernetes/client-node's; the CRD schemas restrict inputs to the forms it
// parses exactly, so everything that passed validation converts without surprises.
import { quantityToScalar } from '@kubernetes/client-node/dist/util.js';

export class UnitError extends Error {
  override name = 'UnitError';
}

/** CPU quantity ("500m", "0.5", "2") → millicores. */
export function cpuMillis(q: string | number | undefined): number {
  if (q === undefined) return 0;
  const v = Number(quantityToScalar(String(q)));
  if (!Number.isFinite(v) || v < 0) throw new UnitError(`invalid CPU quantity ${JSON.stringify(q)}`);
  return Math.round(v * 1000);
}

/** Memory quantity ("128Mi", "1Gi", "512M", "1048576") → bytes. */
export function memoryBytes(q: string | number | undefined): number {
  if (q === undefined) return 0;
  const v = Number(quantityToScalar(String(q)));
  if (!Number.isFinite(v) || v < 0) throw new UnitError(`invalid memory quantity ${JSON.stringify(q)}`);
  return Math.round(v);
}

const DURATION_UNITS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
/** The duration syntax the schemas accept: Go-style, e.g. "30s", "1m30s", "500ms", "1h". */
export const DURATION_PATTERN = '^([0-9]+(\\.[0-9]+)?(h|m|s|ms))+$';

/** Duration ("30s", "1m30s", "500ms") → milliseconds. */
export function durationMs(d: string | undefined, fallbackMs = 0): number {
  if (d === undefined) return fallbackMs;
  let ms = parsedDurations.get(d);
  if (ms === undefined) {
    if (!DURATION.test(d)) throw new UnitError(`invalid duration ${JSON.stringify(d)}`);
    let total = 0;
    for (const m of d.matchAll(/([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)/g)) total += Number(m[1]) * DURATION_UNITS[m[2]!]!;
    ms = Math.round(total);
    if (parsedDurations.size >= 1024) parsedDurations.clear();
    parsedDurations.set(d, ms);
  }
  return ms;
}

/** A spec's few duration strings are read on every pass of every replica (an agent's minReadyTime, grace, …): each is parsed once. */
const parsedDurations = new Map<string, number>();
const DURATION = new RegExp(DURATION_PATTERN);

/** Milliseconds → the shortest Go-style duration ("1m30s"); used for display. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  let s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  return `${h ? `${h}h` : ''}${m ? `${m}m` : ''}${s || (!h && !m) ? `${s}s` : ''}`;
}

/** Bytes → "128Mi"-style for display. */
export function formatBytes(b: number): string {
  const units = ['', 'Ki', 'Mi', 'Gi', 'Ti'];
  let i = 0;
  let v = b;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${Number.isInteger(v) ? v : v.toFixed(1)}${units[i]}`;
}
