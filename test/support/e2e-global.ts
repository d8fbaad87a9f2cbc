// Global setup of the e2e project: Docker must answer (the run fails loudly otherwise), and no
// container or local cluster of an earlier, interrupted run may linger; the same sweep runs at
// teardown.
import { requireDocker } from './cluster.js';
import { removeNotedClusters } from './leaks.js';
import { purgeNotedUpClusters } from './up-cluster.js';

export async function setup(): Promise<() => Promise<void>> {
  await requireDocker();
  const stale = await removeNotedClusters();
  if (stale) console.warn(`removed ${stale} container(s) left by an interrupted test run`);
  const clusters = await purgeNotedUpClusters();
  if (clusters) console.warn(`purged ${clusters} local cluster(s) left by an interrupted test run`);
  return async () => {
    await removeNotedClusters();
    await purgeNotedUpClusters();
  };
}
