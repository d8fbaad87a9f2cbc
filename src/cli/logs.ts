// The pure parts of `jaco logs`: what a target names, --since and --tail, which replica copies to
// read, and how lines from several replicas are cut, ordered and prefixed. Docker gives every line
// its RFC 3339 timestamp (the agent always asks for them), so replicas are merged in time order;
// --timestamps only decides whether they are shown.
import { durationMs, UnitError } from '../api/units.js';
import type { ReplicaDesired, ReplicaObserved } from '../api/types.js';
import { CliError } from './common.js';

export type LogTarget = { kind: 'deployment'; deployment: string; service?: string } | { kind: 'replica'; replica: string };

/** DEPLOYMENT/SERVICE, a deployment's name, else a replica id. */
export function parseLogTarget(arg: string, deployments: ReadonlySet<string>): LogTarget {
  if (arg.includes('/')) {
    const [deployment, service, extra] = arg.split('/');
    if (!deployment || !service || extra !== undefined) throw new CliError(`${JSON.stringify(arg)}: name DEPLOYMENT, DEPLOYMENT/SERVICE or a REPLICA`);
    return { kind: 'deployment', deployment, service };
  }
  return deployments.has(arg) ? { kind: 'deployment', deployment: arg } : { kind: 'replica', replica: arg };
}

/**
 * --since as a Unix time in seconds: a duration back from now ("10m", "1h30m") or an RFC 3339
 * time ("2026-11-27T10:00:00Z").
 */
export function parseSince(v: string, now: number): number {
  if (/^\d{4}-\d\d-\d\dT/.test(v)) {
    const t = Date.parse(v);
    if (!Number.isFinite(t)) throw new CliError(`--since: "${v}" is not an RFC 3339 time`);
    return t / 1000;
  }
  try {
    const ms = durationMs(v);
    if (ms <= 0) throw new UnitError('zero');
    return (now - ms) / 1000;
  } catch (e) {
    if (!(e instanceof UnitError)) throw e;
    throw new CliError(`--since: "${v}" is neither a duration (10m, 1h30m, 45s) nor an RFC 3339 time`);
  }
}

/** --tail: lines from the end of each replica's log ("all": every line). */
export function parseTail(v: string | undefined): number | undefined {
  if (v === undefined || v === 'all') return undefined;
  if (!/^\d+$/.test(v)) throw new CliError(`--tail: "${v}" is not a number of lines (or all)`);
  return Number(v);
}

/** One copy of a replica to read: a replica in a move has two, on two nodes. */
export interface LogSource {
  replica: string;
  node: string;
  /** The container its node reports (absent: not started yet). */
  container?: string;
}

/** The copies a target names, ordered by replica then node. */
export function logSources(target: LogTarget, desired: Iterable<ReplicaDesired>, observed: ReadonlyMap<string, ReplicaObserved>): LogSource[] {
  const out: LogSource[] = [];
  for (const d of desired) {
    const s = d.spec;
    const match = target.kind === 'replica' ? s.replica === target.replica : s.deployment === target.deployment && (!target.service || s.service === target.service);
    if (!match) continue;
    const container = observed.get(`${s.node}/${s.replica}`)?.status?.containerId;
    out.push({ replica: s.replica, node: s.node, ...(container ? { container } : {}) });
  }
  return out.sort((a, b) => (a.replica < b.replica ? -1 : a.replica > b.replica ? 1 : a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}

/** Cuts a byte stream into lines; a partial last line waits for the rest (or for end()). */
export class LineSplitter {
  private rest = '';

  push(chunk: Buffer | string): string[] {
    const text = this.rest + chunk.toString();
    const lines = text.split('\n');
    this.rest = lines.pop()!;
    return lines;
  }

  end(): string[] {
    const last = this.rest;
    this.rest = '';
    return last ? [last] : [];
  }
}

export interface LogLine {
  /** Docker's RFC 3339 timestamp ('' when the line has none). */
  time: string;
  text: string;
  stream: 'stdout' | 'stderr';
}

/** Docker's `<RFC 3339 nano> <text>` split in two. */
export function splitTimestamp(line: string, stream: LogLine['stream'] = 'stdout'): LogLine {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) ?(.*)$/s.exec(line);
  return m ? { time: m[1]!, text: m[2]!.replace(/\r$/, ''), stream } : { time: '', text: line.replace(/\r$/, ''), stream };
}

/**
 * A sortable key of a Docker timestamp: Docker trims trailing zeros from the fraction
 * (".1Z" is later than ".09Z"), so the fraction is padded to nine digits before comparing.
 */
export function timeKey(time: string): string {
  const m = /^(.{19})(?:\.(\d+))?Z$/.exec(time);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}` : time;
}

/**
 * Lines of several replicas in time order: each replica's own order is kept as its log gave it,
 * lines of different replicas are interleaved by time (ties: the order the replicas are given in).
 */
export function mergeByTime<T extends { lines: LogLine[] }>(sources: T[]): { source: T; line: LogLine }[] {
  const all = sources.flatMap((source, s) => source.lines.map((line, i) => ({ source, line, s, i, key: timeKey(line.time) })));
  // Per source the keys are already ordered; a stable sort by key keeps each source's own order.
  return all.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.s - b.s || a.i - b.i)).map(({ source, line }) => ({ source, line }));
}

/**
 * --since and --tail applied to lines already read (the agent keeps a replaced container's last
 * lines whole, so --previous trims here, as Docker would have): time order, stdout and stderr
 * counted together.
 */
export function trimLines(lines: LogLine[], since: number | undefined, tail: number | undefined): LogLine[] {
  const sorted = [...lines].map((l, i) => ({ l, i, k: timeKey(l.time) })).sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : a.i - b.i)).map((x) => x.l);
  const after = since === undefined ? sorted : sorted.filter((l) => !l.time || Date.parse(l.time) / 1000 >= since);
  return tail === undefined ? after : tail === 0 ? [] : after.slice(-tail);
}

/** `<replica>@<node> | text`, the prefix padded to `width`; with timestamps the time first. */
export function formatLine(line: LogLine, opts: { prefix?: string; width?: number; timestamps?: boolean }): string {
  const p = opts.prefix !== undefined ? `${opts.prefix.padEnd(opts.width ?? 0)} | ` : '';
  return `${p}${opts.timestamps && line.time ? `${line.time} ` : ''}${line.text}\n`;
}

export const sourcePrefix = (s: Pick<LogSource, 'replica' | 'node'>) => `${s.replica}@${s.node}`;
