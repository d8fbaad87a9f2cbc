// Tables for the clock beacon: written once per interval on the leader's clock, at once when the
// stored time is missing, unreadable or in this leader's future (another leader's clock ahead).
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClockBeacon } from '../../src/api/types.js';
import { decideClock } from './decide.js';

const T0 = Date.parse('2026-11-28T03:00:00Z');
const I = 30_000;
const stored = (at: number | string, modRevision = 7) => ({
  key: keys.clock(),
  modRevision,
  createRevision: 1,
  version: 3,
  value: { apiVersion: API_VERSION, kind: 'ClockBeacon', metadata: { name: 'clock' }, spec: { time: typeof at === 'string' ? at : new Date(at).toISOString(), intervalMs: I, by: 'p1' } } as ClockBeacon,
});

describe('decideClock', () => {
  it.each<[string, number | string | undefined, number, boolean, number]>([
    ['none yet: written', undefined, T0, true, T0 + I],
    ['written just now: waits', T0, T0 + 1, false, T0 + I],
    ['one interval old: written', T0, T0 + I, true, T0 + 2 * I],
    ['10 min in the future (another leader ahead): written', T0 + 600_000, T0, true, T0 + I],
    ['does not parse: written', 'junk', T0, true, T0 + I],
  ])('%s', (_, at, now, writes, wakeAt) => {
    const plan = decideClock(at === undefined ? {} : { beacon: stored(at) }, now, I, 'p2');
    expect(plan.wakeAt).toBe(wakeAt);
    expect(plan.acts.length).toBe(writes ? 1 : 0);
    if (!writes) return;
    const op = plan.acts[0]!.ops[0]!;
    expect(op).toMatchObject(at === undefined ? { op: 'create', key: 'clock' } : { op: 'update', key: 'clock', modRevision: 7 });
    expect((op as { value: ClockBeacon }).value.spec).toEqual({ time: new Date(now).toISOString(), intervalMs: I, by: 'p2' });
  });
});
