// Every test cluster a process starts is noted in a file of that process's own, as it starts; the
// e2e projects' global setup and teardown clean up what the notes of finished processes name, so
// a test run that was killed halfway leaves nothing running into the next one. Per process, so two
// e2e lanes (scripts/test.sh runs two vitest processes at once) never sweep each other's clusters:
// a note is acted on only once the process that wrote it is gone, or by the vitest process whose
// worker wrote it (at its teardown, when its files are done).
import { appendFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import { releaseAllFiles } from '../../src/secrets/tmpfs.js';
import { testLogger } from './log.js';

const NOTES = join(tmpdir(), 'jaco-test-notes');

/** What is noted: a cluster's uid (and its agents' state directory), or a `jaco up` data directory. */
type NoteKind = 'clusters' | 'up-dirs';

/** Appends `line` to this process's notes of `kind` (file `<ppid>-<pid>.<kind>` in `dir`). */
export function note(kind: NoteKind, line: string, dir = NOTES): void {
  mkdirSync(dir, { recursive: true });
  appendFileSync(join(dir, `${process.ppid}-${process.pid}.${kind}`), `${line}\n`);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/**
 * The lines of every note of `kind` this process may act on — written by a process that is gone,
 * or by a worker of this one — and those notes forgotten. Another live process's notes are left.
 */
export function takeNotes(kind: NoteKind, dir = NOTES): string[] {
  if (!existsSync(dir)) return [];
  const lines: string[] = [];
  for (const f of readdirSync(dir)) {
    const m = /^(\d+)-(\d+)\.(.+)$/.exec(f);
    if (!m || m[3] !== kind) continue;
    if (Number(m[1]) !== process.pid && alive(Number(m[2]))) continue;
    lines.push(...readFileSync(join(dir, f), 'utf8').split('\n').filter(Boolean));
    rmSync(join(dir, f), { force: true });
  }
  return [...new Set(lines)];
}

/** Notes a cluster, and the directory holding its agents' state directories (their secrets' tmpfs). */
export function noteCluster(uid: string, stateDirs?: string): void {
  note('clusters', `${uid}${stateDirs ? ` ${stateDirs}` : ''}`);
}

/** Unmounts and removes the secrets' tmpfs under every agent state directory in `dir`. */
export async function releaseStateDirs(dir: string): Promise<void> {
  let nodes: string[] = [];
  try {
    nodes = readdirSync(dir);
  } catch {
    return;
  }
  for (const n of nodes) await releaseAllFiles(join(dir, n), testLogger());
}

/** Removes the containers of every noted cluster this process may act on (takeNotes) and forgets them. */
export async function removeNotedClusters(): Promise<number> {
  const lines = takeNotes('clusters');
  const uids = lines.map((l) => l.split(' ')[0]!);
  const docker = new Docker();
  let removed = 0;
  for (const uid of uids) {
    const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${uid}`] } }).catch(() => []);
    await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    removed += list.length;
  }
  for (const l of lines) if (l.includes(' ')) await releaseStateDirs(l.slice(l.indexOf(' ') + 1));
  return removed;
}
