// The node-agent's first pressure sample after a restart, on a real etcd (hollow containers).
// `jaco top replicas` said "not in its node's sample yet" for up to a whole status interval (30 s)
// after an agent restarted: the claim's heartbeat goes before the agent's view of Docker has listed
// the containers it adopts, so it carried no sample, and the next one waited the interval. Now the
// view's first sync sends a heartbeat at once. Docker's list is made slow here (as on a busy engine)
// so the claim always goes first; the interval is a minute, so only that heartbeat can pass.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type Heartbeat, type ReplicaDesired, type ReplicaObserved } from '../../src/api/types.js';
import { commitActs } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { NodeAgent } from '../../controllers/node-agent/agent.js';
import { HollowEngine } from '../../controllers/hollow/engine.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
beforeAll(async () => {
  etcd = await startTestEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

const CAPACITY = { cpuMillis: 1000, memoryBytes: 1024 ** 3, gpus: 0 };
const INTERVAL_MS = 60_000;
const LIST_DELAY_MS = 1500;

/** A runtime whose container list answers late, the way a busy Docker engine does. */
class SlowListRuntime extends HollowEngine {
  listDelayMs = 0;
  override async listOwn(): Promise<string[]> {
    await new Promise((r) => setTimeout(r, this.listDelayMs));
    return super.listOwn();
  }
}

describe('the first pressure sample after an agent restart', () => {
  it('goes in a heartbeat as soon as the adopted containers are listed, not an interval later', async () => {
    const store = etcd.store(uniquePrefix());
    let runtime: SlowListRuntime | undefined;
    const agent = () =>
      new NodeAgent({
        node: 'n1',
        store,
        timings: FAST,
        statusIntervalMs: INTERVAL_MS,
        capacity: CAPACITY,
        labels: {},
        dockerHost: 'hollow://n1',
        rejoin: false,
        log: testLogger(),
        // The same runtime across the restart: its containers outlive the agent, as Docker's do.
        engine: (owner) => (runtime ??= new SlowListRuntime(owner, { startLatencyMs: 20, failRate: 0, seed: 1 })),
      });
    const first = agent();
    await first.start();
    const t = templateOf(1, { image: 'jaco-demo/busybox:1', replicas: 1 });
    const desired: ReplicaDesired = {
      apiVersion: API_VERSION,
      kind: 'ReplicaDesired',
      metadata: { name: 'd-s-0' },
      spec: { replica: 'd-s-0', deployment: 'd', service: 's', node: 'n1', index: 0, revision: t.revision, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString() },
    };
    await commitActs(store, [{ ops: [{ op: 'put', key: keys.desired('n1', 'd-s-0'), value: desired }] }]);
    await eventually(async () => (await store.get<ReplicaObserved>(keys.observed('n1', 'd-s-0')))?.value.status.state === 'running', { what: 'd-s-0 running' });
    await first.stop();
    await store.ns.delete().key(keys.heartbeat('n1')).exec();

    runtime!.listDelayMs = LIST_DELAY_MS;
    const second = agent();
    try {
      await second.start();
      const claimed = (await store.get<Heartbeat>(keys.heartbeat('n1')))!.value;
      // The claim went before the list answered: no sample in it (what made top wait).
      expect(claimed.spec.pressure?.replicas['d-s-0']).toBeUndefined();
      const hb = await eventually(async () => {
        const v = (await store.get<Heartbeat>(keys.heartbeat('n1')))?.value;
        return v?.spec.pressure?.replicas['d-s-0'] && v;
      }, { what: 'a heartbeat with d-s-0 in its sample', timeoutMs: INTERVAL_MS / 4 });
      expect(hb.spec.pressure!.replicas['d-s-0']!.memoryBytes).toBeGreaterThan(0);
      // The same container, adopted.
      expect(runtime!.size).toBe(1);
    } finally {
      await second.stop();
      runtime?.close();
    }
  });
});
