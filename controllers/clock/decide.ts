// The clock controller's pure core: when to write the controllers' time to `clock` (the beacon
// each agent measures its skew against, api/clock-skew.ts). Once per interval on this leader's
// clock; at once when the stored time is not one this leader could have written lately (none, a
// time that does not parse, one in its future: another leader's clock ahead of this one's).
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClockBeacon } from '../../src/api/types.js';
import type { Act } from '../../src/runtime/acts.js';
import type { Versioned } from '../../src/store/store.js';

export interface ClockSnapshot {
  beacon?: Versioned<ClockBeacon>;
}

export interface ClockPlan {
  acts: Act[];
  wakeAt: number;
}

/** Writes the beacon when it is due; wakes when the next one is. */
export function decideClock(snap: ClockSnapshot, now: number, intervalMs: number, by: string): ClockPlan {
  const b = snap.beacon;
  const last = b ? Date.parse(b.value.spec.time) : NaN;
  if (Number.isFinite(last) && last <= now && now - last < intervalMs) return { acts: [], wakeAt: last + intervalMs };
  const value: ClockBeacon = { apiVersion: API_VERSION, kind: 'ClockBeacon', metadata: { name: 'clock' }, spec: { time: new Date(now).toISOString(), intervalMs, by } };
  const op = b ? { op: 'update' as const, key: keys.clock(), value, modRevision: b.modRevision } : { op: 'create' as const, key: keys.clock(), value };
  return { acts: [{ label: 'clock beacon', ops: [op] }], wakeAt: now + intervalMs };
}
