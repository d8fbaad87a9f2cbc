// The agent's own first health check on real Docker (issue 14): a container whose health check
// runs every 30 s is reported healthy — and its start-first predecessor stopped — while Docker's
// own health state is still `starting` (Docker 20.10 waits a whole interval before its first check).
// The assertions are on the order of events, not on wall-clock speed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServiceSpec } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { deleteDesired, desired, IMAGE, IMAGE_2, metric, metricsUrl, putDesired, waitObserved } from './agent-fixtures.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 1, controllers: false });
});
afterAll(async () => {
  await c?.stop();
});

const SLOW_CHECK = (image: string): ServiceSpec => ({
  image,
  command: ['sleep', '3600'],
  stopGracePeriod: '1s',
  // CMD-SHELL: run through the container's /bin/sh, like Docker does.
  healthcheck: { test: ['CMD-SHELL', 'test -d /'], interval: '30s', timeout: '5s', retries: 3, startPeriod: '0s' },
});

describe('early health check', () => {
  it('reports a new replica healthy and stops its predecessor while Docker still says starting', () =>
    c.withLogs(async () => {
      const replica = 'early-web-1';
      await putDesired(c.store, desired('node-1', replica, SLOW_CHECK(IMAGE), { deployment: 'early' }));
      const first = await waitObserved(c.store, 'node-1', replica, (s) => s.state === 'running' && s.health === 'healthy', 'running and healthy');
      const i1 = await c.docker.getContainer(first.containerId!).inspect();
      // Docker has not run a single check of its own yet.
      expect(i1.State.Health?.Status).toBe('starting');
      expect(i1.State.Health?.Log ?? []).toHaveLength(0);

      // A start-first replacement: the old container goes once the new one passed the agent's check.
      await putDesired(c.store, desired('node-1', replica, SLOW_CHECK(IMAGE_2), { deployment: 'early', revision: 2 }));
      const second = await waitObserved(c.store, 'node-1', replica, (s) => s.revision === 2 && s.health === 'healthy' && !s.replacing, 'revision 2 healthy, predecessor gone');
      expect(second.containerId).not.toBe(first.containerId);
      await eventually(async () => !(await c.containers('node-1')).some((x) => x.Id === first.containerId), { what: 'the revision 1 container removed' });
      const i2 = await c.docker.getContainer(second.containerId!).inspect();
      expect(i2.State.Health?.Status).toBe('starting');
      expect(i2.State.Health?.Log ?? []).toHaveLength(0);

      // One passed early check per container is all it took (the loop stops at the first success).
      const url = await metricsUrl(c.agent('node-1')!);
      expect(await metric(url, 'jaco_agent_early_health_checks_total', 'result="passed"')).toBe(2);

      await deleteDesired(c.store, 'node-1', replica);
      await eventually(async () => (await c.containers('node-1')).length === 0, { what: 'containers removed' });
    }));
});
