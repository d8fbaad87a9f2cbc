// The clock controller (`jaco controller clock|all`): leader-elected and fenced like the others,
// it writes the controllers' time to `clock` once per node status interval (decide.ts). Agents
// measure their clock's skew against it and report it; no decision depends on it (api/clock-skew.ts).
//
// A controller of its own rather than a write of the scheduler's: the beacon needs no snapshot of
// the cluster, and a scheduler pass per interval at scale would cost what the beacon does not.
import { hostname } from 'node:os';
import type { ClockBeacon } from '../../src/api/types.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { decideClock, type ClockSnapshot } from './decide.js';

export function clockController(timings: Timings, identity = hostname()): ControllerSpec<undefined, ClockSnapshot, unknown, PassResult<undefined>> {
  const intervalMs = timings.nodeStatusIntervalMs;
  return {
    name: 'clock',
    reads: ['clock'],
    // Woken by its own wake time, not by its own writes.
    eventDriven: false,
    tickMs: intervalMs,
    initialState: () => undefined,
    snapshot: ({ cache }) => {
      const beacon = [...cache.kind<ClockBeacon>('clock').items.values()][0];
      return beacon ? { beacon } : {};
    },
    decide: (_state, snap, now) => decideClock(snap, now, intervalMs, identity),
  };
}
