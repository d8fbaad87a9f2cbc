// Node pressure arithmetic: CPU as a delta of cumulative CPU time over the interval, memory as is,
// per replica and over the node's capacity.
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import type { CgroupReader } from './cgroup.js';
import type { ContainerFacts } from './facts.js';
import { cpuMillisSince, PressureSampler, pressureSample, usageFromDockerStats, type UsageReading } from './pressure.js';

const T0 = Date.parse('2026-03-01T12:00:00Z');
const CAP = { cpuMillis: 2000, memoryBytes: 4 * 1024 ** 3, gpus: 0 };
const reading = (id: string, replica: string, cpuUsageNs: number, memoryBytes: number, at: number, startedAt?: number): UsageReading => ({
  id,
  replica,
  usage: { cpuUsageNs, memoryBytes },
  at,
  ...(startedAt !== undefined ? { startedAt } : {}),
});

describe('cpuMillisSince', () => {
  it('a busy core for 10 s is 1000 millicores', () => {
    expect(cpuMillisSince(reading('a', 'r', 15e9, 0, T0 + 10_000), { cpuUsageNs: 5e9, at: T0 })).toBe(1000);
  });
  it('the first reading averages over the container’s life, once that life is long enough', () => {
    expect(cpuMillisSince(reading('a', 'r', 5e9, 0, T0 + 10_000, T0), undefined)).toBe(500);
    // Just started: 12 ms of start-up CPU over 20 ms is no 600-millicore load.
    expect(cpuMillisSince(reading('a', 'r', 12e6, 0, T0 + 20, T0), undefined)).toBe(0);
    expect(cpuMillisSince(reading('a', 'r', 2e9, 0, T0), undefined)).toBe(0);
  });
  it('a counter that went backwards (container restarted in place) starts over from its start', () => {
    expect(cpuMillisSince(reading('a', 'r', 5e9, 0, T0 + 10_000, T0), { cpuUsageNs: 9e9, at: T0 + 9000 })).toBe(500);
  });
});

describe('pressureSample', () => {
  it('sums containers per replica and over capacity; keeps marks for the next delta', () => {
    const prev = new Map([
      ['a', { cpuUsageNs: 0, at: T0 }],
      ['b', { cpuUsageNs: 0, at: T0 }],
      ['c', { cpuUsageNs: 0, at: T0 }],
    ]);
    const now = T0 + 10_000;
    const { sample, marks } = pressureSample(
      [reading('a', 'web-1', 10e9, 1024 ** 3, now), reading('b', 'web-1', 5e9, 0, now), reading('c', 'db-1', 0, 1024 ** 3, now)],
      prev,
      CAP,
      now,
    );
    expect(sample).toEqual({
      time: new Date(now).toISOString(),
      cpuUtil: 0.75,
      memoryUtil: 0.5,
      replicas: { 'web-1': { cpuMillis: 1500, memoryBytes: 1024 ** 3 }, 'db-1': { cpuMillis: 0, memoryBytes: 1024 ** 3 } },
    });
    expect(marks.get('a')).toEqual({ cpuUsageNs: 10e9, at: now });
  });

  it('an idle node is 0; a zero capacity never divides by zero', () => {
    expect(pressureSample([], new Map(), CAP, T0).sample).toMatchObject({ cpuUtil: 0, memoryUtil: 0, replicas: {} });
    expect(pressureSample([reading('a', 'r', 1e9, 1, T0 + 10_000, T0)], new Map(), { cpuMillis: 0, memoryBytes: 0, gpus: 0 }, T0).sample).toMatchObject({ cpuUtil: 0, memoryUtil: 0 });
  });

  it('may exceed 1 on an overcommitted node', () => {
    const s = pressureSample([reading('a', 'r', 2e9, 0, T0 + 1000)], new Map([['a', { cpuUsageNs: 0, at: T0 }]]), { ...CAP, cpuMillis: 1000 }, T0 + 1000);
    expect(s.sample.cpuUtil).toBe(2);
  });
});

describe('usageFromDockerStats', () => {
  it('takes the cumulative CPU and memory less inactive file cache (v1 and v2 names)', () => {
    const v1 = { cpu_stats: { cpu_usage: { total_usage: 123 } }, memory_stats: { usage: 1000, stats: { total_inactive_file: 400 } } };
    const v2 = { cpu_stats: { cpu_usage: { total_usage: 5 } }, memory_stats: { usage: 1000, stats: { inactive_file: 100 } } };
    expect(usageFromDockerStats(v1 as unknown as Docker.ContainerStats)).toEqual({ cpuUsageNs: 123, memoryBytes: 600 });
    expect(usageFromDockerStats(v2 as unknown as Docker.ContainerStats)).toEqual({ cpuUsageNs: 5, memoryBytes: 900 });
    expect(usageFromDockerStats({ cpu_stats: {}, memory_stats: {} } as unknown as Docker.ContainerStats)).toBeUndefined();
  });
});

describe('PressureSampler', () => {
  const facts = (id: string, state: ContainerFacts['state'] = 'running'): ContainerFacts =>
    ({ id, name: id, replica: `r-${id}`, deployment: 'd', service: 's', revision: 1, specHash: 'h', image: 'i', state, health: 'none', exitCode: 0, oomKilled: false, createdAt: new Date(T0).toISOString(), startedAt: new Date(T0).toISOString(), ports: [], pid: 1 }) as ContainerFacts;

  it('reads cgroups, falls back to Docker stats for the rest, skips containers not running', async () => {
    let now = T0 + 10_000;
    const cpu: Record<string, number> = { a: 10e9 };
    const reader = { read: (id: string) => (id in cpu ? { cpuUsageNs: cpu[id]!, memoryBytes: 10 } : undefined), retain: () => undefined } as unknown as CgroupReader;
    const statsCalls: string[] = [];
    const sampler = new PressureSampler(reader, async (id) => (statsCalls.push(id), id === 'b' ? { cpuUsageNs: 0, memoryBytes: 20 } : undefined), CAP, { clock: () => now });
    const first = await sampler.sample([facts('a'), facts('b'), facts('c'), facts('d', 'exited')]);
    expect(statsCalls.sort()).toEqual(['b', 'c']);
    expect(first).toMatchObject({ fallbacks: 1, unreadable: 1 });
    expect(first.sample.replicas).toEqual({ 'r-a': { cpuMillis: 1000, memoryBytes: 10 }, 'r-b': { cpuMillis: 0, memoryBytes: 20 } });
    now += 1000;
    cpu.a = 10.5e9;
    const second = await sampler.sample([facts('a')]);
    expect(second.sample.replicas['r-a']?.cpuMillis).toBe(500);
  });
});
