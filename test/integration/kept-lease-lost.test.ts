// Found by the chaos run (test/chaos): an agent whose keepalive answers stopped arriving gave its
// lease up and granted a new one, but etcd still had the old lease (its keepalives had landed; a
// raft leader change extends every lease by its TTL), so the agent's own heartbeat, bound to the
// old lease, held its node: it stood by "until another agent goes" for ~10 s, doing nothing while
// a container without a desired replica kept running. A kept lease now revokes a lease it gives
// up before granting the next one, and says which leases were its own. Real etcd: the answers are
// dropped by an HTTP/2-aware proxy while the requests still reach etcd.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeptLease } from '../../src/store/kept-lease.js';
import { Store } from '../../src/store/store.js';
import { commitActs } from '../../src/store/writer.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { TcpProxy } from '../support/proxy.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
beforeAll(async () => {
  etcd = await startTestEtcd();
});
afterAll(async () => {
  await etcd?.stop();
});

describe('a kept lease given up while etcd still has it', () => {
  it('is revoked before the new grant: nothing stays bound to it, and the owner knows it was its own', async () => {
    const prefix = uniquePrefix();
    const proxy = new TcpProxy(etcd.member.spec.clientPort, { http2: true });
    const viaProxy = new Store({ endpoints: await proxy.start(), prefix });
    const direct = etcd.store(prefix);
    // A TTL far longer than a keepalive: when the owner gives up, etcd's copy has most of it left.
    const kept = new KeptLease(viaProxy, { ttlSec: 5, keepAliveMs: 300, log: testLogger() });
    const first = await kept.start();
    await commitActs(viaProxy, [{ ops: [{ op: 'put', key: 'heartbeats/n1', value: { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name: 'n1' }, spec: {} }, lease: first }] }]);

    // Every answer lost, every request delivered: etcd keeps the lease alive, its owner hears nothing.
    const restore = proxy.dropFrames(() => true);
    const lost = new Promise<string>((resolve) =>
      kept.once('lost', (id) => {
        restore(); // answers flow again from here: the revoke and the new grant are answered
        resolve(id);
      }),
    );
    expect(await lost).toBe(first);
    const renewed = await new Promise<string>((resolve) => kept.once('renewed', (id) => resolve(id)));
    // By the time the new lease exists, the old one is gone in etcd, and the key bound to it too
    // (without the revoke it would live on for most of its 5 s TTL).
    expect(Number((await direct.client.leaseClient.leaseTimeToLive({ ID: first })).TTL)).toBeLessThanOrEqual(0);
    expect(await direct.get('heartbeats/n1')).toBeUndefined();
    expect(renewed).not.toBe(first);
    expect(kept.wasOurs(first)).toBe(true);
    expect(kept.wasOurs(renewed)).toBe(false);
    await eventually(async () => Number((await direct.client.leaseClient.leaseTimeToLive({ ID: renewed })).TTL) > 0, { what: 'the new lease alive' });
    await kept.stop({ revoke: true });
    viaProxy.close();
    await proxy.close();
  });
});
