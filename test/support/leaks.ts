// Every test cluster's uid is noted in a file as it starts; the e2e project's global setup and
// teardown remove the containers of every noted cluster, so a test run that was killed halfway
// leaves nothing running into the next one.
import { appendFileSync, existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import { releaseAllFiles } from '../../src/secrets/tmpfs.js';
import { testLogger } from './log.js';

const REGISTRY = join(tmpdir(), 'jaco-test-clusters.txt');

/** Notes a cluster, and the directory holding its agents' state directories (their secrets' tmpfs). */
export function noteCluster(uid: string, stateDirs?: string): void {
  appendFileSync(REGISTRY, `${uid}${stateDirs ? ` ${stateDirs}` : ''}\n`);
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

/** Removes the containers of every noted cluster and forgets them. */
export async function removeNotedClusters(): Promise<number> {
  if (!existsSync(REGISTRY)) return 0;
  const lines = [...new Set(readFileSync(REGISTRY, 'utf8').split('\n').filter(Boolean))];
  const uids = lines.map((l) => l.split(' ')[0]!);
  const docker = new Docker();
  let removed = 0;
  for (const uid of uids) {
    const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${uid}`] } }).catch(() => []);
    await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    removed += list.length;
  }
  for (const l of lines) if (l.includes(' ')) await releaseStateDirs(l.slice(l.indexOf(' ') + 1));
  rmSync(REGISTRY, { force: true });
  return removed;
}
