import { describe, expect, it } from 'vitest';
import { cpuMillis, durationMs, formatBytes, formatDuration, memoryBytes, UnitError } from './units.js';

describe('cpuMillis', () => {
  it.each([
    ['500m', 500],
    ['0.5', 500],
    ['2', 2000],
    [2, 2000],
    ['1.25', 1250],
    ['100m', 100],
    [undefined, 0],
  ] as const)('%s → %i millicores', (q, want) => expect(cpuMillis(q)).toBe(want));
  it('rejects garbage', () => expect(() => cpuMillis('lots')).toThrow());
});

describe('memoryBytes', () => {
  it.each([
    ['128Mi', 128 * 1024 ** 2],
    ['1Gi', 1024 ** 3],
    ['512M', 512e6],
    ['1k', 1000],
    ['1048576', 1048576],
    [4096, 4096],
    [undefined, 0],
  ] as const)('%s → %i bytes', (q, want) => expect(memoryBytes(q)).toBe(want));
  it('rejects an unknown suffix', () => expect(() => memoryBytes('12Qi')).toThrow());
});

describe('durationMs', () => {
  it.each([
    ['30s', 30_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['1h', 3_600_000],
    ['1.5s', 1500],
    ['2m', 120_000],
  ])('%s → %i ms', (d, want) => expect(durationMs(d)).toBe(want));
  it('uses the fallback when absent', () => expect(durationMs(undefined, 7)).toBe(7));
  it.each(['30', 's', '1x', '-1s', '1 m'])('rejects %j', (d) => expect(() => durationMs(d)).toThrow(UnitError));
});

describe('formatting', () => {
  it.each([
    [500, '500ms'],
    [30_000, '30s'],
    [90_000, '1m30s'],
    [3_600_000, '1h'],
    [0, '0ms'],
  ])('formatDuration(%i) = %s', (ms, s) => expect(formatDuration(ms)).toBe(s));
  it.each([
    [128 * 1024 ** 2, '128Mi'],
    [1536, '1.5Ki'],
    [2 * 1024 ** 3, '2Gi'],
  ])('formatBytes(%i) = %s', (b, s) => expect(formatBytes(b)).toBe(s));
});
