// Backups of the store: an etcd snapshot taken through the maintenance API (the same bytes
// `etcdctl snapshot save` writes, etcd's own hash trailer included, so `etcdctl snapshot restore`
// takes it as it is), with a sidecar holding its checksum and what it was taken from. The whole
// etcd keyspace is in it, not only jaco's prefix: a restore gives back the member as it was.
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { VERSION } from '../version.js';
import { keys } from '../api/keys.js';
import { clusterUidOf } from './cluster.js';
import type { ICallable, IResponseStream, ISnapshotResponse } from 'etcd3';
import type { Store } from './store.js';

/** The sidecar of a backup file: `<file>.json`. */
export interface BackupSidecar {
  format: 'jaco-backup/1';
  /** The snapshot's file name (the sidecar sits beside it). */
  file: string;
  bytes: number;
  /** SHA-256 of the whole file (hex), as `sha256sum` prints it. */
  sha256: string;
  jacoVersion: string;
  /** The etcd version of the member the snapshot came from (restore with etcdctl of this minor version). */
  etcdVersion: string;
  /** The store revision the snapshot holds (the first header of etcd's snapshot stream). */
  revision: number;
  /** The cluster uid stored under the prefix ('' when there is none). */
  clusterUid: string;
  prefix: string;
  endpoints: string[];
  takenAt: string;
}

export const sidecarOf = (file: string) => `${file}.json`;

/** A backup that does not match its sidecar (or has none): never restore it. */
export class BackupCheckError extends Error {
  override name = 'BackupCheckError';
}

/**
 * etcd's snapshot stream, carrying the client's auth token. etcd3 1.1's maintenance.snapshot() hands
 * grpc its metadata where the request goes, so the token never reaches etcd, which then takes the
 * TLS client certificate's name as the user ("auth: user not found") or, without one, refuses
 * ("user name is empty"): a backup failed against every etcd with authentication on. This is that
 * call with the arguments in grpc's order, on the same connection pool.
 */
function snapshotStream(store: Store): Promise<IResponseStream<ISnapshotResponse>> {
  const pool = (store.client as unknown as { pool: ICallable<unknown> }).pool;
  return pool.withConnection('Maintenance', ({ resource, client, metadata }) => {
    const stream = (client as unknown as { snapshot(req: object, md: typeof metadata): IResponseStream<ISnapshotResponse> }).snapshot({}, metadata);
    stream.on('error', (err: Error) => pool.markFailed(resource, err));
    return stream;
  });
}

/**
 * Streams a snapshot of the member the client reaches into `file` (written to a temporary name,
 * renamed when whole, then its sidecar): a backup that failed half-way leaves nothing behind.
 */
export async function takeBackup(store: Store, file: string, now = new Date()): Promise<BackupSidecar> {
  // Read, never created: a backup writes nothing.
  const [status, uidJson] = await Promise.all([store.client.maintenance.status(), store.ns.get(keys.cluster()).string()]);
  const clusterUid = (uidJson && clusterUidOf(uidJson)) || '';
  const tmp = `${file}.${randomBytes(4).toString('hex')}.part`;
  const out = createWriteStream(tmp, { mode: 0o600 });
  const hash = createHash('sha256');
  let bytes = 0;
  let revision = 0;
  try {
    const stream = await snapshotStream(store);
    await new Promise<void>((resolve, reject) => {
      stream.on('data', (chunk) => {
        if (!revision && chunk.header?.revision) revision = Number(chunk.header.revision);
        const blob = chunk.blob;
        if (!blob?.length) return;
        hash.update(blob);
        bytes += blob.length;
        out.write(blob);
      });
      stream.on('error', reject);
      stream.on('end', resolve);
    });
    out.end();
    await once(out, 'finish');
    if (!bytes) throw new Error('etcd sent an empty snapshot');
    renameSync(tmp, file);
  } catch (e) {
    out.destroy();
    rmSync(tmp, { force: true });
    throw e;
  }
  const sidecar: BackupSidecar = {
    format: 'jaco-backup/1',
    file: file.slice(file.lastIndexOf('/') + 1),
    bytes,
    sha256: hash.digest('hex'),
    jacoVersion: VERSION,
    etcdVersion: status.version,
    revision: revision || Number(status.header.revision),
    clusterUid,
    prefix: store.prefix,
    endpoints: store.endpoints,
    takenAt: now.toISOString(),
  };
  writeFileSync(sidecarOf(file), `${JSON.stringify(sidecar, null, 2)}\n`, { mode: 0o600 });
  return sidecar;
}

/** SHA-256 (hex) and size of a file, streamed. */
async function digestOf(file: string): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/** Checks a backup against its sidecar; throws BackupCheckError saying what does not match. */
export async function checkBackup(file: string): Promise<BackupSidecar> {
  if (!existsSync(file)) throw new BackupCheckError(`${file}: no such file`);
  const side = sidecarOf(file);
  let sidecar: BackupSidecar;
  try {
    sidecar = JSON.parse(readFileSync(side, 'utf8')) as BackupSidecar;
  } catch (e) {
    throw new BackupCheckError(`${side}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing (the sidecar jaco backup writes beside the snapshot)' : `not readable JSON: ${(e as Error).message}`}`);
  }
  if (sidecar.format !== 'jaco-backup/1' || typeof sidecar.sha256 !== 'string' || typeof sidecar.bytes !== 'number') throw new BackupCheckError(`${side}: not a jaco backup sidecar (format, sha256 and bytes are required)`);
  const size = statSync(file).size;
  if (size !== sidecar.bytes) throw new BackupCheckError(`${file}: ${size} bytes, but its sidecar says ${sidecar.bytes}: truncated or not this backup's file`);
  const { sha256 } = await digestOf(file);
  if (sha256 !== sidecar.sha256) throw new BackupCheckError(`${file}: SHA-256 ${sha256} does not match its sidecar's ${sidecar.sha256}: the file changed since the backup`);
  return sidecar;
}

/** A backup's name in a directory of them (`jaco backup --dir`): its UTC time to the millisecond, so names sort by age. */
export function backupName(now: Date): string {
  return `jaco-${now.toISOString().replace(/[-:]/g, '')}.db`;
}

/**
 * Which backups of a directory go when only the newest `keep` stay: of the file names given,
 * those named as `backupName` makes them, oldest first beyond the newest `keep`. Anything else in
 * the directory is never touched.
 */
export function backupsToPrune(names: readonly string[], keep: number): string[] {
  const ours = names.filter((n) => /^jaco-\d{8}T\d{6}\.\d{3}Z\.db$/.test(n)).sort();
  return ours.slice(0, Math.max(0, ours.length - keep));
}
