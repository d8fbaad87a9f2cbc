// Node pressure (seed 000's signal): each running container's CPU (a delta of its cumulative CPU
// time over the interval) and memory, summed per replica (the rebalancer's relief estimates) and,
// in `containers` mode, over the node's capacity. In `node` mode (a real host, seed 001) the node's
// figures are the whole host's instead (node-usage.ts). The arithmetic is pure (pressureSample);
// PressureSampler reads cgroups and falls back to Docker's one-shot stats for a container whose
// cgroup files it cannot read.
import type Docker from 'dockerode';
import type { Capacity, PressureSample, ReplicaFootprint } from '../../src/api/types.js';
import type { CgroupUsage } from './cgroup.js';
import type { ContainerFacts } from './facts.js';
import { nodeCpuUtil, nodeMemoryUtil, type NodeUsage, type PressureMode } from './node-usage.js';
import type { UsageReader } from './engine.js';

export interface UsageReading {
  id: string;
  replica: string;
  usage: CgroupUsage;
  /** When it was read (ms). */
  at: number;
  /** Container start (ms): the first reading of a container averages over its life so far. */
  startedAt?: number;
}

/** The previous CPU counter of a container, for the next delta. */
export interface CpuMark {
  cpuUsageNs: number;
  at: number;
}

const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

/**
 * A first reading averages over the container's life only when that life is this long: right
 * after a start, the start-up work over a few milliseconds would read as a burst of whole cores.
 */
export const MIN_LIFE_FOR_AVERAGE_MS = 5000;

/** CPU of one container in millicores since its previous mark (or, first seen, since it started). */
export function cpuMillisSince(r: UsageReading, prev: CpuMark | undefined): number {
  const sinceStart = r.startedAt !== undefined && r.at - r.startedAt >= MIN_LIFE_FOR_AVERAGE_MS ? { cpuUsageNs: 0, at: r.startedAt } : undefined;
  const from = prev && prev.cpuUsageNs <= r.usage.cpuUsageNs ? prev : sinceStart;
  if (!from || r.at <= from.at) return 0;
  return ((r.usage.cpuUsageNs - from.cpuUsageNs) / ((r.at - from.at) * 1e6)) * 1000;
}

/** One node sample from container readings, and the marks for the next one. */
export function pressureSample(readings: UsageReading[], prev: ReadonlyMap<string, CpuMark>, capacity: Capacity, now: number): { sample: PressureSample; marks: Map<string, CpuMark> } {
  const replicas: Record<string, ReplicaFootprint> = {};
  const marks = new Map<string, CpuMark>();
  let cpu = 0;
  let mem = 0;
  for (const r of [...readings].sort((a, b) => (a.id < b.id ? -1 : 1))) {
    const c = cpuMillisSince(r, prev.get(r.id));
    marks.set(r.id, { cpuUsageNs: r.usage.cpuUsageNs, at: r.at });
    cpu += c;
    mem += r.usage.memoryBytes;
    const f = (replicas[r.replica] ??= { cpuMillis: 0, memoryBytes: 0 });
    f.cpuMillis = round(f.cpuMillis + c, 1);
    f.memoryBytes += r.usage.memoryBytes;
  }
  return {
    sample: {
      time: new Date(now).toISOString(),
      cpuUtil: capacity.cpuMillis > 0 ? round(cpu / capacity.cpuMillis, 4) : 0,
      memoryUtil: capacity.memoryBytes > 0 ? round(mem / capacity.memoryBytes, 4) : 0,
      replicas,
    },
    marks,
  };
}

/** Docker's stats API (the fallback): cumulative CPU and memory less inactive file cache. */
export function usageFromDockerStats(s: Docker.ContainerStats): CgroupUsage | undefined {
  const cpu = s.cpu_stats?.cpu_usage?.total_usage;
  const usage = s.memory_stats?.usage;
  if (typeof cpu !== 'number' || typeof usage !== 'number') return undefined;
  const st = (s.memory_stats.stats ?? {}) as unknown as Record<string, number | undefined>;
  const inactive = st.total_inactive_file ?? st.inactive_file ?? 0;
  return { cpuUsageNs: cpu, memoryBytes: Math.max(0, usage - inactive) };
}

export interface SampleResult {
  sample: PressureSample;
  /** Containers read through Docker's stats API because their cgroup files were not readable. */
  fallbacks: number;
  /** Running containers that could not be read at all. */
  unreadable: number;
}

/** Samples this agent's running containers; keeps the CPU marks between samples. */
/** The node's figures from a whole-host reading (node mode), replacing the containers' sum. */
export function withNodeUsage(sample: PressureSample, prev: NodeUsage | undefined, cur: NodeUsage): PressureSample {
  return { ...sample, cpuUtil: nodeCpuUtil(prev, cur), memoryUtil: nodeMemoryUtil(cur.memory), mode: 'node' };
}

export interface SamplerOptions {
  /** Default containers. */
  mode?: PressureMode;
  /** Node mode: reads the whole host (NodeUsageReader). */
  node?: { read(): NodeUsage };
  clock?: () => number;
}

/** Samples this agent's running containers (and, in node mode, the host); keeps the CPU marks between samples. */
export class PressureSampler {
  private marks = new Map<string, CpuMark>();
  private lastNode?: NodeUsage;
  private readonly clock: () => number;

  constructor(
    private readonly reader: UsageReader,
    private readonly dockerStats: (id: string) => Promise<CgroupUsage | undefined>,
    private readonly capacity: Capacity,
    private readonly opts: SamplerOptions = {},
  ) {
    this.clock = opts.clock ?? Date.now;
  }

  async sample(containers: readonly ContainerFacts[]): Promise<SampleResult> {
    const running = containers.filter((c) => c.state === 'running');
    const readings: UsageReading[] = [];
    const missing: ContainerFacts[] = [];
    const reading = (c: ContainerFacts, usage: CgroupUsage): UsageReading => ({
      id: c.id,
      replica: c.replica,
      usage,
      at: this.clock(),
      ...(c.startedAt ? { startedAt: Date.parse(c.startedAt) } : {}),
    });
    for (const c of running) {
      const u = this.reader.read(c.id, c.pid);
      if (u) readings.push(reading(c, u));
      else missing.push(c);
    }
    let unreadable = 0;
    await Promise.all(
      missing.map(async (c) => {
        const u = await this.dockerStats(c.id).catch(() => undefined);
        if (u) readings.push(reading(c, u));
        else unreadable++;
      }),
    );
    this.reader.retain(new Set(running.map((c) => c.id)));
    const { sample, marks } = pressureSample(readings, this.marks, this.capacity, this.clock());
    this.marks = marks;
    return { sample: this.nodeWide(sample), fallbacks: missing.length - unreadable, unreadable };
  }

  /** Node mode: the host's figures; when /proc cannot be read, the containers' sum, said so by its mode. */
  private nodeWide(sample: PressureSample): PressureSample {
    if (this.opts.mode !== 'node' || !this.opts.node) return { ...sample, mode: 'containers' };
    let cur: NodeUsage;
    try {
      cur = this.opts.node.read();
    } catch {
      return { ...sample, mode: 'containers' };
    }
    const out = withNodeUsage(sample, this.lastNode, cur);
    this.lastNode = cur;
    return out;
  }
}
