// jaco backup FILE: an etcd snapshot with a checksummed sidecar; --check FILE verifies one before a
// restore. The restore itself is etcd's own (etcdctl snapshot restore): docs/operate.md.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { BackupCheckError, checkBackup, sidecarOf, takeBackup } from '../../store/backup.js';
import { action, CliError, withStore } from '../common.js';

const HELP = `
Examples:
  jaco backup /var/backups/jaco/$(date +%F).db          # the snapshot, and .db.json beside it
  jaco backup --check /var/backups/jaco/2026-11-27.db   # size and SHA-256 against the sidecar

The snapshot is etcd's own (the maintenance API's, as \`etcdctl snapshot save\` writes it) of the
member the client reaches, every key in it; the sidecar <FILE>.json holds its SHA-256, size, the
revision it holds, the cluster uid, the etcd and jaco versions. Restore with \`etcdctl snapshot
restore\` into a new data directory (docs/operate.md gives the procedure). The file holds every
Secret of the cluster, sealed (docs/secrets.md), and the registries' credentials: keep it as you
keep the cluster key file.
`;

export function registerBackup(program: Command): void {
  program
    .command('backup')
    .description('Take a snapshot of etcd into FILE, with a sidecar (FILE.json: SHA-256, size, revision, versions); --check verifies one')
    .argument('<file>', 'where the snapshot goes (refused if it exists)')
    .option('--check', 'verify FILE against its sidecar instead of taking a backup (exit 1 when they do not match)')
    .addHelpText('after', HELP)
    .action(
      action(async (file: string, f: { check?: boolean }, cmd: Command) => {
        const path = resolve(file);
        if (f.check) {
          try {
            const s = await checkBackup(path);
            process.stdout.write(`${file}: OK (${s.bytes} bytes, sha256 ${s.sha256}, revision ${s.revision}, cluster ${s.clusterUid}, etcd ${s.etcdVersion}, jaco ${s.jacoVersion}, taken ${s.takenAt})\n`);
            return;
          } catch (e) {
            if (e instanceof BackupCheckError) throw new CliError(e.message);
            throw e;
          }
        }
        for (const p of [path, sidecarOf(path)]) if (existsSync(p)) throw new CliError(`${p} exists; choose another file (a backup never overwrites one)`);
        const s = await withStore(cmd, (store) => takeBackup(store, path));
        process.stdout.write(`backup ${file}: ${s.bytes} bytes at revision ${s.revision}, sha256 ${s.sha256} (sidecar ${sidecarOf(file)})\n`);
      }),
    );
}
