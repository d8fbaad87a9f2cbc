// Tables for clock skew: the measure against the controllers' beacon with the agent's clock offset,
// and how the CLI shows it (with the warning past the threshold).
import { describe, expect, it } from 'vitest';
import { CLOCK_SKEW_WARN_MS, measureSkew, skewDescription, skewText, skewWarns } from './clock-skew.js';
import { API_VERSION, type ClockBeacon, type Heartbeat } from './types.js';

const T0 = Date.parse('2026-11-28T03:00:00Z');
const beacon = (time: string): ClockBeacon => ({ apiVersion: API_VERSION, kind: 'ClockBeacon', metadata: { name: 'clock' }, spec: { time, intervalMs: 30_000, by: 'p1' } });
const hb = (clockSkewMs?: number): Heartbeat => ({
  apiVersion: API_VERSION,
  kind: 'Heartbeat',
  metadata: { name: 'n1' },
  spec: { node: 'n1', time: new Date(T0).toISOString(), intervalMs: 1000, agentVersion: 't', dockerUp: true, ...(clockSkewMs !== undefined ? { clockSkewMs } : {}) },
});

describe('measureSkew: the agent clock at receipt minus the beacon time', () => {
  it.each([
    ['10 min ahead', 600_000, 5, 600_005],
    ['10 min behind', -600_000, 5, -599_995],
    ['in step', 0, 3, 3],
    ['in step, no latency', 0, 0, 0],
  ])('an agent %s (offset %i ms, %i ms delivery) measures %i ms', (_, offset, latency, want) => {
    // The controller writes at T0 on its clock; the agent receives it `latency` later on a clock `offset` off.
    expect(measureSkew(beacon(new Date(T0).toISOString()), T0 + latency + offset)).toBe(want);
  });

  it('a beacon whose time does not parse measures nothing', () => {
    expect(measureSkew(beacon('not a time'), T0)).toBeUndefined();
  });
});

describe('how skew is shown', () => {
  it.each<[number | undefined, string, boolean]>([
    [undefined, '-', false],
    [0, '+0.0s', false],
    [CLOCK_SKEW_WARN_MS, '+2.0s', false],
    [CLOCK_SKEW_WARN_MS + 1, '+2.0s', true],
    [-CLOCK_SKEW_WARN_MS - 1, '-2.0s', true],
    [600_000, '+600.0s', true],
    [-600_000, '-600.0s', true],
  ])('%s ms: %s, warns %s', (ms, text, warns) => {
    expect(skewText(ms)).toBe(text);
    expect(skewWarns(ms)).toBe(warns);
    expect(skewDescription(hb(ms)).includes('WARNING')).toBe(warns);
  });

  it('describe says which way and that it was not measured', () => {
    expect(skewDescription(hb(-600_000))).toMatch(/^-600\.0s \(the agent's clock is 600\.0s behind the controllers'\) — WARNING/);
    expect(skewDescription(hb(1_500))).toBe("+1.5s (the agent's clock is 1.5s ahead of the controllers')");
    expect(skewDescription(undefined)).toMatch(/^not measured/);
  });
});
