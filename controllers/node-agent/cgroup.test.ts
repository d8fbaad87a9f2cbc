// cgroup v1 and v2 parsing against fixture text as the kernel writes it, where a container's
// cgroup lives under each layout, and CgroupReader against fixture trees on disk.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { candidateDirs, CgroupParseError, CgroupReader, detectCgroupVersion, memoryV1, memoryV2, parseCpuacctUsage, parseCpuStat, statValue } from './cgroup.js';

const ID = 'a'.repeat(64);

// As /sys/fs/cgroup/memory/docker/<id>/memory.stat reads on a cgroup v1 host (trimmed).
const V1_MEMORY_STAT = `cache 1974272
rss 57344
rss_huge 0
inactive_anon 45056
active_anon 4096
inactive_file 1900000
active_file 74272
hierarchical_memory_limit 9223372036854771712
total_cache 1974272
total_rss 57344
total_inactive_anon 45056
total_inactive_file 1974272
total_active_file 0
`;

// As /sys/fs/cgroup/system.slice/docker-<id>.scope/memory.stat reads on a cgroup v2 host (trimmed).
const V2_MEMORY_STAT = `anon 1327104
file 8192000
kernel_stack 16384
sock 0
shmem 0
file_mapped 0
active_anon 1310720
inactive_anon 0
active_file 4096000
inactive_file 4096000
unevictable 0
`;

const V2_CPU_STAT = `usage_usec 2033433
user_usec 2000100
system_usec 33333
nr_periods 0
nr_throttled 0
throttled_usec 0
`;

const V1_PROC_CGROUP = `12:hugetlb:/docker/${ID}
9:name=systemd:/docker/${ID}
4:memory:/docker/${ID}
2:cpu,cpuacct:/docker/${ID}
0::/docker/${ID}
`;

const V2_PROC_CGROUP = `0::/system.slice/docker-${ID}.scope\n`;

describe('parsers', () => {
  it('v1 cpuacct.usage is nanoseconds', () => {
    expect(parseCpuacctUsage('2033433043\n')).toBe(2_033_433_043);
  });

  it('v2 cpu.stat usage_usec becomes nanoseconds', () => {
    expect(parseCpuStat(V2_CPU_STAT)).toBe(2_033_433_000);
    expect(() => parseCpuStat('user_usec 1\n')).toThrow(CgroupParseError);
  });

  it('v1 memory: usage_in_bytes less total_inactive_file (inactive_file without totals)', () => {
    expect(memoryV1('2469888\n', V1_MEMORY_STAT)).toBe(2_469_888 - 1_974_272);
    expect(memoryV1('2469888\n', 'inactive_file 469888\n')).toBe(2_000_000);
    expect(memoryV1('100\n', 'total_inactive_file 500\n')).toBe(0);
  });

  it('v2 memory: memory.current less inactive_file', () => {
    expect(memoryV2('9519104\n', V2_MEMORY_STAT)).toBe(9_519_104 - 4_096_000);
  });

  it('statValue finds a key exactly (total_inactive_file is not inactive_file)', () => {
    expect(statValue(V1_MEMORY_STAT, 'inactive_file')).toBe(1_900_000);
    expect(statValue(V1_MEMORY_STAT, 'total_inactive_file')).toBe(1_974_272);
    expect(statValue(V1_MEMORY_STAT, 'nope')).toBeUndefined();
  });

  it('rejects what is not a number', () => {
    expect(() => parseCpuacctUsage('max\n')).toThrow(CgroupParseError);
    expect(() => memoryV2('', '')).toThrow(CgroupParseError);
  });
});

describe('where a container’s cgroup is', () => {
  it('v1: from /proc/<pid>/cgroup first, then cgroupfs and systemd layouts', () => {
    expect(candidateDirs(1, '/sys/fs/cgroup', ID, V1_PROC_CGROUP)).toEqual([
      { cpu: `/sys/fs/cgroup/cpuacct/docker/${ID}`, memory: `/sys/fs/cgroup/memory/docker/${ID}` },
      { cpu: `/sys/fs/cgroup/cpuacct/docker/${ID}`, memory: `/sys/fs/cgroup/memory/docker/${ID}` },
      { cpu: `/sys/fs/cgroup/cpuacct/system.slice/docker-${ID}.scope`, memory: `/sys/fs/cgroup/memory/system.slice/docker-${ID}.scope` },
    ]);
  });

  it('v2: the unified path from /proc, then the systemd and cgroupfs layouts', () => {
    expect(candidateDirs(2, '/sys/fs/cgroup', ID, V2_PROC_CGROUP).map((d) => d.cpu)).toEqual([`/sys/fs/cgroup/system.slice/docker-${ID}.scope`, `/sys/fs/cgroup/docker/${ID}`]);
    expect(candidateDirs(2, '/cg', ID).map((d) => d.memory)).toEqual([`/cg/system.slice/docker-${ID}.scope`, `/cg/docker/${ID}`]);
  });
});

describe('CgroupReader on fixture trees', () => {
  const roots: string[] = [];
  afterAll(() => roots.forEach((r) => rmSync(r, { recursive: true, force: true })));
  const tree = (files: Record<string, string>) => {
    const root = mkdtempSync(join(tmpdir(), 'jaco-cgroup-'));
    roots.push(root);
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(join(root, rel, '..'), { recursive: true });
      writeFileSync(join(root, rel), text);
    }
    return root;
  };

  it('detects v1 and reads cgroupfs paths', () => {
    const root = tree({
      [`cpuacct/docker/${ID}/cpuacct.usage`]: '5000000000\n',
      [`memory/docker/${ID}/memory.usage_in_bytes`]: '3000000\n',
      [`memory/docker/${ID}/memory.stat`]: 'total_inactive_file 1000000\n',
    });
    expect(detectCgroupVersion(root)).toBe(1);
    const r = new CgroupReader(root, join(root, 'no-proc'));
    expect(r.read(ID, 0)).toEqual({ cpuUsageNs: 5e9, memoryBytes: 2e6 });
    writeFileSync(join(root, `cpuacct/docker/${ID}/cpuacct.usage`), '6000000000\n');
    expect(r.read(ID, 0)?.cpuUsageNs).toBe(6e9);
  });

  it('detects v2 and reads the systemd scope', () => {
    const scope = `system.slice/docker-${ID}.scope`;
    const root = tree({
      'cgroup.controllers': 'cpu memory\n',
      [`${scope}/cpu.stat`]: V2_CPU_STAT,
      [`${scope}/memory.current`]: '9519104\n',
      [`${scope}/memory.stat`]: V2_MEMORY_STAT,
    });
    expect(detectCgroupVersion(root)).toBe(2);
    expect(new CgroupReader(root, join(root, 'no-proc')).read(ID, 0)).toEqual({ cpuUsageNs: 2_033_433_000, memoryBytes: 9_519_104 - 4_096_000 });
  });

  it('follows /proc/<pid>/cgroup to an unusual place', () => {
    const root = tree({
      [`cpuacct/custom/ctr/cpuacct.usage`]: '7\n',
      [`memory/custom/ctr/memory.usage_in_bytes`]: '10\n',
      [`memory/custom/ctr/memory.stat`]: 'total_inactive_file 4\n',
      ['proc/77/cgroup']: '4:memory:/custom/ctr\n2:cpu,cpuacct:/custom/ctr\n',
    });
    expect(new CgroupReader(root, join(root, 'proc')).read(ID, 77)).toEqual({ cpuUsageNs: 7, memoryBytes: 6 });
  });

  it('returns undefined when nothing is readable (the caller falls back to Docker stats)', () => {
    const root = tree({ 'cpuacct/.keep': '' });
    expect(new CgroupReader(root, root).read(ID, 0)).toBeUndefined();
    expect(new CgroupReader(join(root, 'missing')).read(ID, 0)).toBeUndefined();
  });
});
