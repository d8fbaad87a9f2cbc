// Every test cluster's uid is noted in a file as it starts; the e2e project's global setup and
// teardown remove the containers of every noted cluster, so a test run that was killed halfway
// leaves nothing running into the next one.
import { appendFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';

const REGISTRY = join(tmpdir(), 'jaco-test-clusters.txt');

export function noteCluster(uid: string): void {
  appendFileSync(REGISTRY, `${uid}\n`);
}

/** Removes the containers of every noted cluster and forgets them. */
export async function removeNotedClusters(): Promise<number> {
  if (!existsSync(REGISTRY)) return 0;
  const uids = [...new Set(readFileSync(REGISTRY, 'utf8').split('\n').filter(Boolean))];
  const docker = new Docker();
  let removed = 0;
  for (const uid of uids) {
    const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${uid}`] } }).catch(() => []);
    await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    removed += list.length;
  }
  rmSync(REGISTRY, { force: true });
  return removed;
}
