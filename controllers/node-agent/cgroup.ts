// Per-container CPU and memory from the kernel's cgroup files, for cgroup v1 (cpuacct + memory
// controllers, e.g. /sys/fs/cgroup/cpuacct/docker/<id>/) and v2 (one unified tree, e.g.
// /sys/fs/cgroup/system.slice/docker-<id>.scope/). The parsers are pure; CgroupReader finds each
// container's directory once (from /proc/<pid>/cgroup, else the usual driver layouts) and reads it.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export type CgroupVersion = 1 | 2;

export interface CgroupUsage {
  /** Cumulative CPU time, nanoseconds. */
  cpuUsageNs: number;
  /** Memory in use less the inactive file cache (what the kernel would not reclaim first). */
  memoryBytes: number;
}

export class CgroupParseError extends Error {
  override name = 'CgroupParseError';
}

function int(text: string, what: string): number {
  const t = text.trim();
  const v = t === '' ? NaN : Number(t);
  if (!Number.isFinite(v) || v < 0) throw new CgroupParseError(`${what}: not a number: ${JSON.stringify(text.trim().slice(0, 40))}`);
  return v;
}

/** A "key value" line file (memory.stat, cpu.stat) → the value of `key`, or undefined. */
export function statValue(text: string, key: string): number | undefined {
  for (const line of text.split('\n')) {
    const sp = line.indexOf(' ');
    if (sp > 0 && line.slice(0, sp) === key) return int(line.slice(sp + 1), key);
  }
  return undefined;
}

/** v1 cpuacct.usage: nanoseconds. */
export function parseCpuacctUsage(text: string): number {
  return int(text, 'cpuacct.usage');
}

/** v2 cpu.stat: usage_usec → nanoseconds. */
export function parseCpuStat(text: string): number {
  const us = statValue(text, 'usage_usec');
  if (us === undefined) throw new CgroupParseError('cpu.stat: no usage_usec line');
  return us * 1000;
}

/** v1: memory.usage_in_bytes less total_inactive_file (inactive_file without hierarchy totals). */
export function memoryV1(usageText: string, statText: string): number {
  const usage = int(usageText, 'memory.usage_in_bytes');
  const inactive = statValue(statText, 'total_inactive_file') ?? statValue(statText, 'inactive_file') ?? 0;
  return Math.max(0, usage - inactive);
}

/** v2: memory.current less inactive_file. */
export function memoryV2(currentText: string, statText: string): number {
  const current = int(currentText, 'memory.current');
  return Math.max(0, current - (statValue(statText, 'inactive_file') ?? 0));
}

/** v2 when the unified hierarchy is mounted at the root; v1 when the cpuacct controller is; else none. */
export function detectCgroupVersion(root = '/sys/fs/cgroup'): CgroupVersion | undefined {
  if (existsSync(join(root, 'cgroup.controllers'))) return 2;
  if (existsSync(join(root, 'cpuacct')) || existsSync(join(root, 'cpu,cpuacct'))) return 1;
  return undefined;
}

export interface CgroupDirs {
  /** Directory holding the CPU counter (v1 cpuacct.usage, v2 cpu.stat). */
  cpu: string;
  /** Directory holding the memory files. */
  memory: string;
}

/**
 * Candidate directories of a container, most likely first: where /proc/<pid>/cgroup says it is
 * (when the agent can see the container's process), then the cgroupfs and systemd driver layouts.
 */
export function candidateDirs(version: CgroupVersion, root: string, id: string, procCgroup?: string): CgroupDirs[] {
  // Lines are "hierarchy-id:controllers:path"; v2's single line has no controllers ("0::/path").
  const procPath = (match: (controllers: string[]) => boolean) => {
    for (const line of procCgroup?.split('\n') ?? []) {
      const m = /^\d+:([^:]*):(.+)$/.exec(line.trim());
      if (m && match(m[1] ? m[1].split(',') : [])) return m[2]!;
    }
    return undefined;
  };
  if (version === 2) {
    const p = procPath((c) => c.length === 0);
    const rel = [...(p && p !== '/' ? [p] : []), `/system.slice/docker-${id}.scope`, `/docker/${id}`];
    return [...new Set(rel)].map((r) => ({ cpu: join(root, r), memory: join(root, r) }));
  }
  const cpuPath = procPath((c) => c.includes('cpuacct'));
  const memPath = procPath((c) => c.includes('memory'));
  const out: CgroupDirs[] = [];
  if (cpuPath && memPath) out.push({ cpu: join(root, 'cpuacct', cpuPath), memory: join(root, 'memory', memPath) });
  for (const r of [`/docker/${id}`, `/system.slice/docker-${id}.scope`]) out.push({ cpu: join(root, 'cpuacct', r), memory: join(root, 'memory', r) });
  return out;
}

/** Reads one directory pair; throws when a file is missing or unreadable. */
export function readDirs(version: CgroupVersion, dirs: CgroupDirs): CgroupUsage {
  const read = (dir: string, f: string) => readFileSync(join(dir, f), 'utf8');
  if (version === 2) {
    return { cpuUsageNs: parseCpuStat(read(dirs.cpu, 'cpu.stat')), memoryBytes: memoryV2(read(dirs.memory, 'memory.current'), read(dirs.memory, 'memory.stat')) };
  }
  return {
    cpuUsageNs: parseCpuacctUsage(read(dirs.cpu, 'cpuacct.usage')),
    memoryBytes: memoryV1(read(dirs.memory, 'memory.usage_in_bytes'), read(dirs.memory, 'memory.stat')),
  };
}

/** Finds and reads containers' cgroups; remembers each container's directory. */
export class CgroupReader {
  readonly version: CgroupVersion | undefined;
  private readonly dirs = new Map<string, CgroupDirs>();

  constructor(readonly root = '/sys/fs/cgroup', private readonly procRoot = '/proc') {
    this.version = detectCgroupVersion(root);
  }

  /** The container's usage, or undefined when its cgroup files cannot be read (use Docker's stats). */
  read(id: string, pid: number): CgroupUsage | undefined {
    if (!this.version) return undefined;
    const known = this.dirs.get(id);
    if (known) {
      try {
        return readDirs(this.version, known);
      } catch {
        this.dirs.delete(id);
      }
    }
    let proc: string | undefined;
    try {
      proc = pid > 0 ? readFileSync(join(this.procRoot, String(pid), 'cgroup'), 'utf8') : undefined;
    } catch {
      proc = undefined; // the agent cannot see the container's process (e.g. runs in a container)
    }
    for (const d of candidateDirs(this.version, this.root, id, proc)) {
      try {
        const u = readDirs(this.version, d);
        this.dirs.set(id, d);
        return u;
      } catch {
        // next candidate
      }
    }
    return undefined;
  }

  /** Drops what is remembered of containers that are gone. */
  retain(ids: Set<string>): void {
    for (const id of this.dirs.keys()) if (!ids.has(id)) this.dirs.delete(id);
  }
}
