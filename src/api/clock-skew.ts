// A node's clock skew: how far its agent's wall clock is from the controllers'. etcd has no time
// of its own to compare against, so the controllers publish theirs: the clock controller writes
// `clock` every interval with its wall time, and each agent, receiving the write on its watch,
// compares that time with its own clock at receipt (the measured skew is high by the delivery
// latency, milliseconds). The agent reports the figure in its heartbeat; `get nodes -o wide` and
// `describe node` show it, with a warning past CLOCK_SKEW_WARN_MS.
//
// Nothing decides on it: liveness is the agent's lease and readiness is judged on one clock
// (api/nodes.ts, api/readiness.ts), so a skewed node works; the skew is shown because what people
// read across nodes (log lines, audit times, startedAt) is off by as much.
import type { ClockBeacon, Heartbeat } from './types.js';

/** Past this much skew either way, the agent logs a warning and the CLI shows one. */
export const CLOCK_SKEW_WARN_MS = 2_000;

/**
 * The agent's skew against a beacon it received at `receivedAt` on its own clock: positive when
 * the agent is ahead. Undefined for a beacon whose time does not parse.
 */
export function measureSkew(beacon: ClockBeacon, receivedAt: number): number | undefined {
  const t = Date.parse(beacon.spec.time);
  return Number.isFinite(t) && Number.isFinite(receivedAt) ? receivedAt - t : undefined;
}

/** Whether a skew is past the warning threshold. */
export function skewWarns(skewMs: number | undefined): boolean {
  return skewMs !== undefined && Math.abs(skewMs) > CLOCK_SKEW_WARN_MS;
}

/** "+600.0s", "-0.3s", "-" (not measured): the SKEW column of `get nodes -o wide`. */
export function skewText(skewMs: number | undefined): string {
  if (skewMs === undefined || !Number.isFinite(skewMs)) return '-';
  return `${skewMs >= 0 ? '+' : '-'}${(Math.abs(skewMs) / 1000).toFixed(1)}s`;
}

/** A node's skew as `describe node` says it, with the warning when it is past the threshold. */
export function skewDescription(hb: Heartbeat | undefined): string {
  const ms = hb?.spec.clockSkewMs;
  if (ms === undefined) return 'not measured (no heartbeat, an agent before the measure, or no clock controller running)';
  const way = ms >= 0 ? 'ahead of' : 'behind';
  const base = `${skewText(ms)} (the agent's clock is ${(Math.abs(ms) / 1000).toFixed(1)}s ${way} the controllers')`;
  return skewWarns(ms) ? `${base} — WARNING: past ${CLOCK_SKEW_WARN_MS / 1000}s; run NTP (chrony, systemd-timesyncd) on this host: its log and event times read off` : base;
}
