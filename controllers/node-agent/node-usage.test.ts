// Tables for node-wide pressure: /proc/stat and /proc/meminfo parsing, CPU from root-cgroup or
// /proc/stat deltas, memory from MemAvailable, and the sampler's mode (node figures with the
// containers' footprints kept for relief estimates; the containers' sum when /proc is unreadable).
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { containerFacts } from '../../test/support/container-facts.js';
import { nodeCpuUtil, nodeMemoryUtil, NodeUsageReader, parseMeminfo, parseProcStat, type NodeUsage } from './node-usage.js';
import { PressureSampler } from './pressure.js';

const STAT = `cpu  1000 10 200 8000 100 0 50 40 0 0
cpu0 500 5 100 4000 50 0 25 20 0 0
cpu1 500 5 100 4000 50 0 25 20 0 0
intr 12345
ctxt 999
`;

describe('parseProcStat', () => {
  it('busy = user + nice + system + irq + softirq + steal; idle and iowait are not; cores from the cpuN lines', () => {
    expect(parseProcStat(STAT)).toEqual({ busyTicks: 1300, totalTicks: 9400, cores: 2 });
  });
  it('an old kernel with four fields', () => {
    expect(parseProcStat('cpu 10 0 10 80\ncpu0 10 0 10 80\n')).toEqual({ busyTicks: 20, totalTicks: 100, cores: 1 });
  });
  it.each([
    ['no cpu line', 'intr 1\n'],
    ['garbage', 'cpu a b c d\n'],
    ['too short', 'cpu 1 2\n'],
  ])('%s: throws', (_w, text) => {
    expect(() => parseProcStat(text)).toThrow(/proc\/stat/);
  });
});

describe('parseMeminfo', () => {
  it('MemTotal and MemAvailable, kB → bytes', () => {
    expect(parseMeminfo('MemTotal:       4000 kB\nMemFree:        1000 kB\nMemAvailable:   3000 kB\nCached: 1500 kB\n')).toEqual({ totalBytes: 4000 * 1024, availableBytes: 3000 * 1024 });
  });
  it('without MemAvailable (kernel < 3.14): MemFree + Buffers + Cached', () => {
    expect(parseMeminfo('MemTotal: 4000 kB\nMemFree: 1000 kB\nBuffers: 200 kB\nCached: 800 kB\n')).toEqual({ totalBytes: 4000 * 1024, availableBytes: 2000 * 1024 });
  });
  it('never more available than total; no MemTotal throws', () => {
    expect(parseMeminfo('MemTotal: 100 kB\nMemAvailable: 200 kB\n').availableBytes).toBe(100 * 1024);
    expect(() => parseMeminfo('MemFree: 1 kB\n')).toThrow(/MemTotal/);
  });
});

const T0 = Date.parse('2026-03-01T12:00:00Z');
const MEM = { totalBytes: 8e9, availableBytes: 6e9 };
const usage = (at: number, busy: number, total: number, cgroupCpuNs?: number): NodeUsage => ({
  at,
  proc: { busyTicks: busy, totalTicks: total, cores: 2 },
  memory: MEM,
  ...(cgroupCpuNs !== undefined ? { cgroupCpuNs } : {}),
});

describe('nodeCpuUtil', () => {
  it.each<[string, NodeUsage | undefined, NodeUsage, number]>([
    ['root cgroup: one busy core of two for 10 s = 0.5', usage(T0, 0, 0, 5e9), usage(T0 + 10_000, 0, 0, 15e9), 0.5],
    ['root cgroup: both cores busy = 1', usage(T0, 0, 0, 0), usage(T0 + 10_000, 0, 0, 20e9), 1],
    ['root cgroup: more than every core over the interval (the counter read after its clock): 1, never past it', usage(T0, 0, 0, 0), usage(T0 + 10_000, 0, 0, 20.8e9), 1],
    ['no cgroup counter: /proc/stat busy share of the delta', usage(T0, 100, 1000), usage(T0 + 10_000, 400, 2000), 0.3],
    ['first reading: the average since boot', undefined, usage(T0, 250, 1000, 7e9), 0.25],
    ['a cgroup counter that went backwards: /proc/stat', usage(T0, 100, 1000, 9e9), usage(T0 + 10_000, 200, 2000, 1e9), 0.1],
    ['no ticks elapsed: 0', usage(T0, 100, 1000), usage(T0, 100, 1000), 0.1],
  ])('%s', (_w, prev, cur, want) => {
    expect(nodeCpuUtil(prev, cur)).toBeCloseTo(want, 4);
  });
});

describe('nodeMemoryUtil', () => {
  it.each([
    [{ totalBytes: 8e9, availableBytes: 6e9 }, 0.25],
    [{ totalBytes: 8e9, availableBytes: 8e9 }, 0],
    [{ totalBytes: 0, availableBytes: 0 }, 0],
  ])('%j → %s', (m, want) => {
    expect(nodeMemoryUtil(m)).toBe(want);
  });
});

describe('NodeUsageReader (fixture files)', () => {
  const fixture = (v: 1 | 2) => {
    const root = mkdtempSync(join(tmpdir(), 'jaco-node-usage-'));
    const cg = join(root, 'cgroup');
    const proc = join(root, 'proc');
    mkdirSync(proc, { recursive: true });
    writeFileSync(join(proc, 'stat'), STAT);
    writeFileSync(join(proc, 'meminfo'), 'MemTotal: 4000 kB\nMemAvailable: 1000 kB\n');
    if (v === 2) {
      mkdirSync(cg, { recursive: true });
      writeFileSync(join(cg, 'cgroup.controllers'), 'cpu memory\n');
      writeFileSync(join(cg, 'cpu.stat'), 'usage_usec 1234\nuser_usec 1000\n');
    } else {
      mkdirSync(join(cg, 'cpuacct'), { recursive: true });
      writeFileSync(join(cg, 'cpuacct', 'cpuacct.usage'), '987654\n');
    }
    return new NodeUsageReader(cg, proc, () => T0);
  };
  it('cgroup v2: root cpu.stat usage_usec', () => {
    expect(fixture(2).read()).toEqual({ at: T0, cgroupCpuNs: 1234e3, proc: { busyTicks: 1300, totalTicks: 9400, cores: 2 }, memory: { totalBytes: 4000 * 1024, availableBytes: 1000 * 1024 } });
  });
  it('cgroup v1: root cpuacct.usage', () => {
    expect(fixture(1).read().cgroupCpuNs).toBe(987654);
  });
});

describe('PressureSampler modes', () => {
  const CAP = { cpuMillis: 1000, memoryBytes: 1e9, gpus: 0 };
  const c = containerFacts(T0, { id: 'a' });
  // The container used 0.1 s of CPU a second for its minute of life, and 100 MB.
  const reader = { read: () => ({ cpuUsageNs: 6e9, memoryBytes: 1e8 }), retain: () => undefined };
  const stats = async () => undefined;

  it('node: the host’s figures, the replicas’ footprints kept (relief estimates)', async () => {
    const s = new PressureSampler(reader, stats, CAP, { mode: 'node', node: { read: () => usage(T0, 500, 1000, 0) }, clock: () => T0 });
    const r = await s.sample([c]);
    expect(r.sample).toMatchObject({ mode: 'node', cpuUtil: 0.5, memoryUtil: 0.25, replicas: { 'web-1': { cpuMillis: 100, memoryBytes: 1e8 } } });
  });
  it('containers: the sum of the agent’s containers over its capacity', async () => {
    const s = new PressureSampler(reader, stats, CAP, { mode: 'containers', node: { read: () => usage(T0, 500, 1000) }, clock: () => T0 });
    expect((await s.sample([c])).sample).toMatchObject({ mode: 'containers', cpuUtil: 0.1, memoryUtil: 0.1 });
  });
  it('node, /proc unreadable: the containers’ sum, and the mode says so', async () => {
    const s = new PressureSampler(reader, stats, CAP, {
      mode: 'node',
      node: {
        read: () => {
          throw new Error('EACCES');
        },
      },
      clock: () => T0,
    });
    expect((await s.sample([c])).sample).toMatchObject({ mode: 'containers', cpuUtil: 0.1 });
  });
  it('node: the second sample is a delta from the first', async () => {
    const readings = [usage(T0, 0, 0, 0), usage(T0 + 10_000, 0, 0, 4e9)];
    let now = T0;
    const s = new PressureSampler(reader, stats, CAP, { mode: 'node', node: { read: () => readings.shift()! }, clock: () => now });
    await s.sample([c]);
    now = T0 + 10_000;
    expect((await s.sample([c])).sample.cpuUtil).toBe(0.2);
  });
});
