// One parser for every command's duration flag (drain --timeout, rollout --wait and --timeout,
// ingress --drain-period and --drain-limit, hollow-nodes --start-latency): one message shape.
import { describe, expect, it } from 'vitest';
import { durationFlag } from './common.js';

describe('durationFlag', () => {
  it.each([
    ['500ms', 500],
    ['30s', 30_000],
    ['1m30s', 90_000],
    ['1h', 3_600_000],
  ])('reads %s', (v, ms) => expect(durationFlag('--timeout', v)).toBe(ms));

  it('takes 0 (a bare 0 as the help writes it, and 0s) only where the flag says what 0 means', () => {
    expect(durationFlag('--wait', '0', { zero: 'not to wait' })).toBe(0);
    expect(durationFlag('--wait', '0s', { zero: 'not to wait' })).toBe(0);
    expect(() => durationFlag('--timeout', '0s')).toThrow('invalid --timeout "0s": must be more than 0');
    expect(() => durationFlag('--timeout', '0')).toThrow('invalid --timeout "0": use a duration such as 500ms, 30s, 5m or 1h');
  });

  it('refuses what is no duration, naming the flag, the value and what it takes', () => {
    expect(() => durationFlag('--wait', 'soon', { zero: 'not to wait' })).toThrow('invalid --wait "soon": use a duration such as 500ms, 30s, 5m or 1h, or 0 not to wait');
    for (const v of ['', '10', '5 m', '-1s', '1d']) expect(() => durationFlag('--drain-limit', v), v).toThrow(/^invalid --drain-limit ".*": use a duration/);
  });
});
