import { describe, expect, it } from 'vitest';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mountOptionsOf, sampleDisk, storageFactsOf } from './disk.js';

const MOUNTS = [
  '/dev/sda1 / ext4 rw,relatime 0 0',
  '/dev/sdb1 /var/lib/docker xfs rw,relatime,prjquota 0 0',
  '/dev/sdc1 /var/lib/docker2 xfs rw,relatime 0 0',
  'tmpfs /srv/my\\040disk tmpfs rw 0 0',
].join('\n');

describe('storage facts: can the driver cap a writable layer?', () => {
  it.each<[string, string, string, string | undefined, boolean]>([
    ['overlay2 on xfs with project quotas', '/var/lib/docker', 'overlay2', 'xfs', true],
    ['overlay2 on xfs without them', '/var/lib/docker2', 'overlay2', 'xfs', false],
    ['overlay2 on ext4 (the usual host, and this one)', '/srv/docker', 'overlay2', 'extfs', false],
    ['btrfs', '/srv/docker', 'btrfs', 'btrfs', true],
    ['vfs', '/srv/docker', 'vfs', undefined, false],
  ])('%s', (_name, root, driver, backing, capped) => {
    const facts = storageFactsOf({ DockerRootDir: root, Driver: driver, DriverStatus: backing ? [['Backing Filesystem', backing]] : [] }, MOUNTS);
    expect(facts).toEqual({ dataRoot: root, driver, ...(backing ? { backingFs: backing } : {}), capped });
  });

  it('the mount holding a path is the longest prefix, never a sibling with a longer name', () => {
    expect(mountOptionsOf('/var/lib/docker/overlay2', MOUNTS)).toContain('prjquota');
    expect(mountOptionsOf('/var/lib/docker2/x', MOUNTS)).not.toContain('prjquota');
    expect(mountOptionsOf('/var/lib/dockerfoo', MOUNTS)).toEqual(['rw', 'relatime']);
    expect(mountOptionsOf('/srv/my disk/d', MOUNTS)).toEqual(['rw']);
  });

  it('samples the real filesystem of a directory (statfs)', async () => {
    const s = await sampleDisk({ dataRoot: mkdtempSync(join(tmpdir(), 'jaco-disk-')), driver: 'overlay2', capped: false });
    expect(s.totalBytes).toBeGreaterThan(0);
    expect(s.availableBytes).toBeGreaterThan(0);
    expect(s.availableBytes).toBeLessThanOrEqual(s.totalBytes);
  });
});
