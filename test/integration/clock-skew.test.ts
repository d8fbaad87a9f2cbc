// Clock skew on a real etcd (issue 29, item 4): two hollow agents (the real node-agent, in-memory
// containers) whose clocks run 10 minutes ahead and 10 minutes behind the controllers', and every
// controller (`jaco controller all`'s set) in one process. Before, the node behind showed NotReady
// forever while heartbeating (freshness compared its clock with the reader's) and a rollout onto
// the node ahead aborted at its first step (readiness judged from its startedAt on the
// controller's clock). Now both are Ready, a deployment and its rolling update complete on both,
// and each agent measures its skew against the controllers' clock beacon.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONTROLLERS } from '../../controllers/index.js';
import { HollowFleet } from '../../controllers/hollow/fleet.js';
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { DeploymentSpec, Heartbeat, RolloutPlan } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import { Manager } from '../../src/runtime/manager.js';
import type { Store } from '../../src/store/store.js';
import { FAST } from '../../src/timings.js';
import { jaco } from '../support/cli.js';
import { census } from '../support/hollow.js';
import { startTestEtcd, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

const TEN_MIN = 600_000;
let etcd: TestEtcd;
/** One store (one prefix) for every process of the test. */
let store: Store;
let controllers: Manager;
const fleets: HollowFleet[] = [];

function fleet(namePrefix: string, clockOffsetMs: number): HollowFleet {
  const f = new HollowFleet({
    store,
    timings: FAST,
    statusIntervalMs: FAST.nodeStatusIntervalMs,
    capacity: { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3, gpus: 0 },
    labels: {},
    runtime: { startLatencyMs: 50, failRate: 0, seed: 1 },
    log: testLogger(),
    namePrefix,
    first: 1,
    count: 1,
    clockOffsetMs,
  });
  fleets.push(f);
  return f;
}

beforeAll(async () => {
  etcd = await startTestEtcd();
  store = etcd.store();
  const log = testLogger();
  controllers = new Manager({ store, timings: FAST, log, identity: 'skew-test' }, Object.values(CONTROLLERS).map((c) => c(FAST)));
  await controllers.start();
  await Promise.all([fleet('ahead-', TEN_MIN).start(), fleet('behind-', -TEN_MIN).start()]);
}, 60_000);

afterAll(async () => {
  for (const f of fleets) await f.stop();
  await controllers?.stop();
  await etcd?.stop();
});

const heartbeats = async () => new Map((await store.list<Heartbeat>(keys.heartbeats())).items.map((h) => [h.value.spec.node, h.value]));
const spec = (image: string): DeploymentSpec => ({ services: { web: { image, replicas: 2, update: { minReadyTime: '1s', maxUnavailable: 1 } } } });

describe('nodes whose clocks are 10 minutes off', () => {
  it('are Ready, and each measures its skew against the controllers\' clock beacon', async () => {
    await eventually(
      async () => {
        const hbs = await heartbeats();
        const [a, b] = [hbs.get('ahead-0001'), hbs.get('behind-0001')];
        if (!nodeReady(a) || !nodeReady(b)) return false;
        // Measured within a second (delivery latency and the measure's own rounding).
        return Math.abs(a!.spec.clockSkewMs! - TEN_MIN) < 1000 && Math.abs(b!.spec.clockSkewMs! + TEN_MIN) < 1000;
      },
      { what: 'both nodes Ready with their skew measured', timeoutMs: 15_000, intervalMs: 100 },
    );
  });

  it('a deployment runs on both, and its rolling update completes (no step judged on the other clock)', async () => {
    await applyDeployments(store, [{ name: 'web', spec: spec('jaco-demo/busybox:1'), cause: 'apply' }]);
    await eventually(async () => {
      const c = await census(store);
      return c.replicas === 2 && c.running === 2 && c.perNode.size === 2;
    }, { what: 'two replicas running, one on each node', timeoutMs: 15_000, intervalMs: 100 });
    await applyDeployments(store, [{ name: 'web', spec: spec('jaco-demo/busybox:2'), cause: 'apply' }]);
    // Ended either way: an aborted rollout ends too, and says which.
    const ended = await eventually(
      async () => {
        const st = (await store.get<RolloutPlan>(keys.rollout('web', 'web')))?.value.spec.state;
        return st === 'completed' || st === 'aborted' ? st : false;
      },
      { what: 'the rollout to end', timeoutMs: 25_000, intervalMs: 100 },
    );
    expect(ended).toBe('completed');
    const c = await census(store);
    expect([c.replicas, c.running]).toEqual([2, 2]);
  }, 45_000);

  it('the CLI shows each node\'s skew, with a warning past the threshold (get nodes -o wide, describe node)', async () => {
    const at = { endpoint: etcd.endpoint, prefix: store.prefix };
    const wide = await jaco(['get', 'nodes', '-o', 'wide'], at);
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toMatch(/^NAME\s.*\sSKEW\s+LABELS$/m);
    expect(wide.stdout).toMatch(/^ahead-0001\s+Ready\s.*\s\+600\.\ds!\s/m);
    expect(wide.stdout).toMatch(/^behind-0001\s+Ready\s.*\s-(599|600)\.\ds!\s/m);
    const d = await jaco(['describe', 'node', 'behind-0001'], at);
    expect(d.stdout).toMatch(/^Clock skew: +-(599|600)\.\ds \(the agent's clock is (599|600)\.\ds behind the controllers'\) — WARNING/m);
  });
});
