// Node-wide usage on a real host (seed 001: "cgroup v2 + /proc/meminfo utilisation"): the CPU
// time of the root cgroup (v2 cpu.stat usage_usec, v1 cpuacct.usage), else /proc/stat's busy ticks,
// over the host's cores; memory in use as MemTotal − MemAvailable over MemTotal. Everything on the
// host counts — containers of other engines, the agent itself, system daemons — which is what a
// node's pressure is. The parsers and the arithmetic are pure; NodeUsageReader reads the files.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CgroupParseError, detectCgroupVersion, parseCpuacctUsage, parseCpuStat, type CgroupVersion } from './cgroup.js';

/**
 * How an agent measures its node's pressure (the heartbeat's pressure.mode):
 * - `node`: the whole host (a real host: one agent per host);
 * - `containers`: the sum of the agent's own containers (simulated nodes sharing one host — `jaco
 *   up --nodes N`, the tests — and hollow nodes, which have no host of their own).
 * Per-replica footprints (the rebalancer's relief estimates) come from the containers in both.
 */
export type PressureMode = 'node' | 'containers';
export const PRESSURE_MODES: readonly PressureMode[] = ['node', 'containers'];

/** /proc/stat's aggregate "cpu" line: busy and total ticks since boot, and the number of cores. */
export interface ProcStat {
  busyTicks: number;
  totalTicks: number;
  cores: number;
}

/** Parses /proc/stat: busy = user + nice + system + irq + softirq + steal (guest time is inside user); idle and iowait are not busy. */
export function parseProcStat(text: string): ProcStat {
  const lines = text.split('\n');
  const agg = lines.find((l) => /^cpu\s/.test(l));
  if (!agg) throw new CgroupParseError('/proc/stat: no "cpu" line');
  const f = agg.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.some((v) => !Number.isFinite(v) || v < 0)) throw new CgroupParseError(`/proc/stat: malformed cpu line: ${JSON.stringify(agg.slice(0, 80))}`);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  const busyTicks = user + nice + system + irq + softirq + steal;
  const cores = lines.filter((l) => /^cpu\d+\s/.test(l)).length;
  return { busyTicks, totalTicks: busyTicks + idle + iowait, cores: Math.max(1, cores) };
}

export interface MemInfo {
  totalBytes: number;
  availableBytes: number;
}

/** Parses /proc/meminfo (kB); a kernel without MemAvailable (before 3.14): MemFree + Buffers + Cached. */
export function parseMeminfo(text: string): MemInfo {
  const kb = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+):\s+(\d+)\s*kB/.exec(line);
    if (m) kb.set(m[1]!, Number(m[2]));
  }
  const total = kb.get('MemTotal');
  if (total === undefined) throw new CgroupParseError('/proc/meminfo: no MemTotal line');
  const available = kb.get('MemAvailable') ?? (kb.get('MemFree') ?? 0) + (kb.get('Buffers') ?? 0) + (kb.get('Cached') ?? 0);
  return { totalBytes: total * 1024, availableBytes: Math.min(total, available) * 1024 };
}

/** One reading of the node. */
export interface NodeUsage {
  /** When it was read (ms). */
  at: number;
  /** The root cgroup's cumulative CPU time (ns); absent when not readable. */
  cgroupCpuNs?: number;
  proc: ProcStat;
  memory: MemInfo;
}

const round4 = (v: number) => Math.round(v * 1e4) / 1e4;

/**
 * CPU in use over the host's cores between two readings: the root cgroup's CPU time when both
 * have it, else /proc/stat's busy share. The first reading (no previous one) is the average since
 * boot (/proc/stat's counters start there).
 */
export function nodeCpuUtil(prev: NodeUsage | undefined, cur: NodeUsage): number {
  if (prev && prev.cgroupCpuNs !== undefined && cur.cgroupCpuNs !== undefined && cur.at > prev.at && cur.cgroupCpuNs >= prev.cgroupCpuNs) {
    // The whole host cannot be busier than all of its cores: past 1 is the two reads' clocks (the
    // counter read a moment after the time it is divided by), not load.
    return Math.min(1, round4((cur.cgroupCpuNs - prev.cgroupCpuNs) / ((cur.at - prev.at) * 1e6 * cur.proc.cores)));
  }
  const from = prev && cur.proc.totalTicks > prev.proc.totalTicks && cur.proc.busyTicks >= prev.proc.busyTicks ? prev.proc : { busyTicks: 0, totalTicks: 0 };
  const total = cur.proc.totalTicks - from.totalTicks;
  return total > 0 ? round4((cur.proc.busyTicks - from.busyTicks) / total) : 0;
}

/** Memory in use (not available to new work without swapping) over the host's memory. */
export function nodeMemoryUtil(m: MemInfo): number {
  return m.totalBytes > 0 ? round4((m.totalBytes - m.availableBytes) / m.totalBytes) : 0;
}

/** Reads the host's root cgroup CPU counter, /proc/stat and /proc/meminfo. */
export class NodeUsageReader {
  private readonly version: CgroupVersion | undefined;

  constructor(
    private readonly cgroupRoot = '/sys/fs/cgroup',
    private readonly procRoot = '/proc',
    private readonly clock: () => number = Date.now,
  ) {
    this.version = detectCgroupVersion(cgroupRoot);
  }

  /** Throws when /proc cannot be read (the sampler then falls back to the containers' sum). */
  read(): NodeUsage {
    const proc = parseProcStat(readFileSync(join(this.procRoot, 'stat'), 'utf8'));
    const memory = parseMeminfo(readFileSync(join(this.procRoot, 'meminfo'), 'utf8'));
    const cgroupCpuNs = this.rootCpuNs();
    return { at: this.clock(), proc, memory, ...(cgroupCpuNs !== undefined ? { cgroupCpuNs } : {}) };
  }

  private rootCpuNs(): number | undefined {
    try {
      if (this.version === 2) return parseCpuStat(readFileSync(join(this.cgroupRoot, 'cpu.stat'), 'utf8'));
      if (this.version === 1) {
        for (const d of ['cpuacct', 'cpu,cpuacct']) {
          try {
            return parseCpuacctUsage(readFileSync(join(this.cgroupRoot, d, 'cpuacct.usage'), 'utf8'));
          } catch {
            // the other mount name
          }
        }
      }
    } catch {
      // v2 kernels before 5.? have no root cpu.stat: /proc/stat then
    }
    return undefined;
  }
}
