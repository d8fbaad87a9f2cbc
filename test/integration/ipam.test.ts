// IPAM on a real etcd (issue 26): the first apply of a cluster-network service makes the
// cluster network's ranges; the scheduler (in this process) gives the nodes subnets and each
// cluster replica an address of its node, claimed in the placement's own transaction; what the
// CLI shows; a delete releases the claims (no agent reports a container holding them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { checkNetworkConfig } from '../../src/api/network.js';
import { API_VERSION, type AddressClaim, type Heartbeat, type NetworkConfig, type Node, type NodeSubnet, type ReplicaDesired } from '../../src/api/types.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { schedulerController } from '../../controllers/scheduler/controller.js';
import { startController } from '../../src/runtime/manager.js';
import { jaco } from '../support/cli.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

let etcd: TestEtcd;
let store: Store;
let prefix: string;
let sched: { stop(): Promise<void> };
const cli = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, input });

const SHOP = `apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: shop}
spec:
  services:
    app: {image: jaco-demo/busybox:1, replicas: 6, network: cluster}
    web: {image: jaco-demo/busybox:1, replicas: 2}
`;

beforeAll(async () => {
  etcd = await startTestEtcd();
  prefix = uniquePrefix();
  store = etcd.store(prefix);
  const ops = ['node-1', 'node-2'].flatMap((name) => {
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name, labels: {} }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 8 * 1024 ** 3, gpus: 0 }, agentVersion: 'test', registeredAt: new Date().toISOString() } };
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 120_000, agentVersion: 'test', dockerUp: true } };
    return [{ op: 'put' as const, key: keys.node(name), value: node }, { op: 'put' as const, key: keys.heartbeat(name), value: hb }];
  });
  await commitAtomic(store, [{ ops }]);
  sched = await startController({ store, timings: FAST, log: testLogger(), identity: 'ipam-test' }, schedulerController(FAST));
});
afterAll(async () => {
  await sched?.stop();
  await etcd?.stop();
});

describe('IPAM on a real etcd', () => {
  it('the first cluster-network apply makes the ranges; every cluster replica gets a claimed address of its node', async () => {
    const r = await cli(['apply', '-f', '-'], SHOP);
    expect(r.code, r.stderr).toBe(0);
    const cfg = (await store.get<NetworkConfig>(keys.networkConfig()))!.value.spec;
    expect(() => checkNetworkConfig(cfg)).not.toThrow();
    expect(cfg.ipv6).toMatch(/^fd[0-9a-f]{2}:/);
    await eventually(async () => (await store.countPrefix(keys.desiredOf())) === 8, { what: 'shop placed' });
    const subnets = new Map((await store.list<NodeSubnet>(keys.subnets())).items.map((s) => [s.value.spec.node, s.value.spec]));
    expect([...subnets.keys()].sort()).toEqual(['node-1', 'node-2']);
    const desired = (await store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value);
    const claims = (await store.list<AddressClaim>(keys.addresses())).items;
    expect(claims).toHaveLength(6);
    for (const d of desired) {
      if (d.spec.service === 'web') {
        expect(d.spec.address).toBeUndefined();
        continue;
      }
      const a = d.spec.address!;
      const n = Number(a.ipv4.split('/')[0]!.split('.')[3]);
      const claim = claims.find((c) => c.key === keys.address(d.spec.node, n))!;
      expect(claim.value.spec).toMatchObject({ replica: d.spec.replica, ipv4: a.ipv4, ipv6: a.ipv6 });
      // The claim landed in the desired key's own transaction.
      expect(claim.createRevision).toBe((await store.get(keys.desired(d.spec.node, d.spec.replica)))!.createRevision);
      expect(a.ipv4.startsWith(subnets.get(d.spec.node)!.ipv4.replace(/0\/24$/, ''))).toBe(true);
    }
  });

  it('get replicas -o wide and explain show the addresses', async () => {
    const wide = await cli(['get', 'replicas', '-d', 'shop', '-o', 'wide']);
    expect(wide.stdout.split('\n')[0]).toMatch(/\bADDRESS\b/);
    const d = (await store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value).find((x) => x.spec.replica === 'shop-app-0')!;
    const bare = d.spec.address!.ipv4.split('/')[0]!;
    expect(wide.stdout).toContain(bare);
    const node = await cli(['describe', 'node', d.spec.node]);
    expect(node.stdout).toMatch(/Subnets: +10\.208\.\d+\.0\/24, fd[0-9a-f:]+::\/64 \(index \d+; \d+ address\(es\) held\)/);
    const ex = await cli(['explain', 'shop-app-0']);
    expect(ex.stdout).toContain(`Address:     ${d.spec.address!.ipv4}, ${d.spec.address!.ipv6} (on ${d.spec.node})`);
  });

  it('a delete releases every claim (no container of them is reported)', async () => {
    const r = await cli(['delete', 'deployment', 'shop']);
    expect(r.code, r.stderr).toBe(0);
    await eventually(async () => (await store.countPrefix(keys.desiredOf())) === 0 && (await store.countPrefix(keys.addresses())) === 0, { what: 'claims released' });
    // The nodes keep their subnets while they are in the cluster.
    expect(await store.countPrefix(keys.subnets())).toBe(2);
  });
});
