// jaco backup FILE: an etcd snapshot with a checksummed sidecar; --check FILE verifies one before a
// restore. The restore itself is etcd's own (etcdctl snapshot restore): docs/operate.md.
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { BackupCheckError, backupName, backupsToPrune, checkBackup, sidecarOf, takeBackup } from '../../store/backup.js';
import { action, CliError, withStore } from '../common.js';

const HELP = `
Examples:
  jaco backup /var/backups/jaco/$(date +%F).db          # the snapshot, and .db.json beside it
  jaco backup --check /var/backups/jaco/2026-11-27.db   # size and SHA-256 against the sidecar
  jaco backup --dir /var/backups/jaco --keep 14         # jaco-<UTC time>.db, checked; the 14 newest kept

--dir is what a timer runs (deploy/systemd/jaco-backup.timer): the file is named by its UTC time,
checked against its sidecar once written, and with --keep N only the N newest backups that --dir
named stay (other files in the directory are never touched).

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
    .argument('[file]', 'where the snapshot goes (refused if it exists); or --dir')
    .option('--check', 'verify FILE against its sidecar instead of taking a backup (exit 1 when they do not match)')
    .option('--dir <dir>', 'take the backup into DIR as jaco-<UTC time>.db (made if missing), then check it')
    .option('--keep <n>', 'with --dir: keep only the N newest backups --dir made, deleting older ones')
    .addHelpText('after', HELP)
    .action(
      action(async (file: string | undefined, f: { check?: boolean; dir?: string; keep?: string }, cmd: Command) => {
        if (f.dir !== undefined && (file !== undefined || f.check)) throw new CliError('--dir names the file itself: give either FILE or --dir, and --check a FILE');
        if (f.keep !== undefined && f.dir === undefined) throw new CliError('--keep prunes the directory of --dir: give --dir too');
        const keep = f.keep === undefined ? undefined : Number(f.keep);
        if (keep !== undefined && !(Number.isInteger(keep) && keep >= 1)) throw new CliError(`--keep: "${f.keep}" is not a whole number of backups, 1 or more`);
        if (file === undefined && f.dir === undefined) throw new CliError('backup: give a FILE, or --dir DIR');
        if (f.dir !== undefined) mkdirSync(f.dir, { recursive: true, mode: 0o700 });
        file ??= join(f.dir!, backupName(new Date()));
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
        if (f.dir === undefined) return;
        // What a timer leaves unattended is read back once: a backup that does not match is an error now, not at the restore.
        try {
          await checkBackup(path);
        } catch (e) {
          if (e instanceof BackupCheckError) throw new CliError(`${file} does not read back as written: ${e.message}`);
          throw e;
        }
        for (const old of keep === undefined ? [] : backupsToPrune(readdirSync(f.dir), keep)) {
          for (const p of [join(f.dir, old), sidecarOf(join(f.dir, old))]) rmSync(p, { force: true });
          process.stdout.write(`pruned ${join(f.dir, old)} (--keep ${keep})\n`);
        }
      }),
    );
}
