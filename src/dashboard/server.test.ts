import { describe, expect, it } from 'vitest';
import { hostAllowed } from './server.js';
import { parseAddr } from '../cli/commands/dashboard.js';
import { PressureHistory } from './pressure-history.js';
import { API_VERSION, type Heartbeat } from '../api/types.js';

describe('hostAllowed (DNS rebinding guard)', () => {
  it.each([
    ['127.0.0.1:8090', true],
    ['localhost:8090', true],
    ['[::1]:8090', true],
    ['10.1.2.3', true],
    ['evil.example:8090', false],
    [undefined, false],
  ])('%s → %s', (host, ok) => expect(hostAllowed(host)).toBe(ok));
});

describe('parseAddr', () => {
  it('reads HOST:PORT, IPv6 in brackets, port 0', () => {
    expect(parseAddr('127.0.0.1:8090')).toEqual({ host: '127.0.0.1', port: 8090 });
    expect(parseAddr('[::1]:0')).toEqual({ host: '::1', port: 0 });
  });
  it.each(['8090', ':8090', '127.0.0.1:x', '127.0.0.1:70000'])('refuses %s', (v) => expect(() => parseAddr(v)).toThrow(/invalid --addr/));
});

const hb = (node: string, t: number, cpu: number): Heartbeat => ({
  apiVersion: API_VERSION,
  kind: 'Heartbeat',
  metadata: { name: node },
  spec: { node, time: new Date(t).toISOString(), intervalMs: 1000, agentVersion: 't', dockerUp: true, pressure: { time: new Date(t).toISOString(), cpuUtil: cpu, memoryUtil: cpu / 2, replicas: {} } },
});

describe('PressureHistory', () => {
  it('folds each new sample once with the rebalancer EWMA and keeps an hour', () => {
    const h = new PressureHistory(60_000, 3_600_000);
    expect(h.observe([hb('a', 0, 1)], 0)).toEqual({ a: [[0, 1, 0.5]] });
    expect(h.observe([hb('a', 0, 1)], 10)).toEqual({}); // the same sample again: nothing new
    const next = h.observe([hb('a', 60_000, 0)], 60_000).a![0]!;
    expect(next[1]).toBeCloseTo(Math.exp(-1), 6); // one window later, a step to 0 leaves e^-1
    h.observe([hb('a', 3_700_000, 0)], 3_700_000);
    expect(h.all().a!.map((p) => p[0])).toEqual([3_700_000]);
  });
});
