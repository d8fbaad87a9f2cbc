// The node's scratch disk: the filesystem that holds Docker's data root (containers' writable
// layers, images), its size as the node's disk capacity and its fill as the heartbeat's disk
// sample (disk pressure, src/api/eligibility.ts). Whether the storage driver can cap a container's
// writable layer (StorageOpt size) is judged from `docker info` and the mount's options: overlay2
// does only on xfs mounted with project quotas; btrfs and zfs always do.
import { statfs } from 'node:fs/promises';
import { readFile } from 'node:fs/promises';
import type { DiskSample } from '../../src/api/types.js';

/** What the engine's storage is, from `docker info` and /proc/mounts. */
export interface StorageFacts {
  dataRoot: string;
  driver: string;
  backingFs?: string;
  /** StorageOpt size is honoured: a replica's resources.disk is enforced, not only booked. */
  capped: boolean;
}

/** The part of `docker info` this reads. */
export interface DockerInfoStorage {
  DockerRootDir?: string;
  Driver?: string;
  DriverStatus?: [string, string][];
}

/** The options of the mount holding `path` (the longest mount point that is its prefix), from /proc/mounts. */
export function mountOptionsOf(path: string, procMounts: string): string[] {
  let best: { point: string; options: string[] } | undefined;
  for (const line of procMounts.split('\n')) {
    const [, point, , options] = line.split(' ');
    if (!point || !options) continue;
    const p = point.replace(/\\040/g, ' ');
    const under = p === '/' || path === p || path.startsWith(`${p}/`);
    if (under && (!best || p.length >= best.point.length)) best = { point: p, options: options.split(',') };
  }
  return best?.options ?? [];
}

/** Whether the driver caps a writable layer (dockerd refuses StorageOpt size where it cannot). */
export function storageFactsOf(info: DockerInfoStorage, procMounts: string): StorageFacts {
  const dataRoot = info.DockerRootDir ?? '/var/lib/docker';
  const driver = info.Driver ?? 'unknown';
  const backingFs = info.DriverStatus?.find(([k]) => k === 'Backing Filesystem')?.[1];
  const options = mountOptionsOf(dataRoot, procMounts);
  const pquota = options.some((o) => o === 'prjquota' || o === 'pquota' || o === 'pqnoenforce');
  const capped = (driver === 'overlay2' && backingFs === 'xfs' && pquota) || driver === 'btrfs' || driver === 'zfs';
  return { dataRoot, driver, ...(backingFs ? { backingFs } : {}), capped };
}

/** Reads the engine's storage facts (docker info, /proc/mounts). */
export async function readStorageFacts(info: () => Promise<DockerInfoStorage>): Promise<StorageFacts> {
  const [i, mounts] = await Promise.all([info(), readFile('/proc/mounts', 'utf8').catch(() => '')]);
  return storageFactsOf(i, mounts);
}

/** The data root's filesystem now (statfs): its size and what unprivileged writers may still use. */
export async function sampleDisk(f: StorageFacts): Promise<DiskSample> {
  const s = await statfs(f.dataRoot);
  return { path: f.dataRoot, totalBytes: s.blocks * s.bsize, availableBytes: s.bavail * s.bsize, usedBytes: (s.blocks - s.bfree) * s.bsize, capped: f.capped, driver: f.driver, ...(f.backingFs ? { backingFs: f.backingFs } : {}) };
}
