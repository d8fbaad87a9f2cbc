// IPAM end to end through the scheduler's pass (seed 004 §4 step 5): a node gets subnets once a
// cluster-network service exists; each cluster replica an address of its node's subnets, recorded
// in its desired record and claimed (addresses/<node>/<n>) in the placement's own act; an
// exhausted node fails the placement with ipam_exhausted; a claim outlives its desired copy while
// the node still reports the replica's container with it, and is released after; a removed
// node's subnets go once it holds no claim.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { nodeSubnets } from '../../src/api/network.js';
import type { AddressClaim, DeploymentStatus, Endpoints, NetworkConfig, NodeSubnet, ServiceAddress, ServiceSpec } from '../../src/api/types.js';
import { World } from '../../test/support/scheduler-world.js';

const NET: NetworkConfig = { apiVersion: 'jaco.dev/v1', kind: 'NetworkConfig', metadata: { name: 'network' }, spec: { ipv4: '10.208.0.0/12', ipv6: 'fd4a:17c2:9e01::/48' } };
const APP: ServiceSpec = { image: 'jaco-demo/busybox:1', network: 'cluster', replicas: 3 };

function world(nodes: string[], net: NetworkConfig['spec'] = NET.spec): World {
  const w = new World();
  for (const n of nodes) w.node(n, { memory: '64Gi' });
  w.put(keys.networkConfig(), { ...NET, spec: net });
  return w;
}

const claims = (w: World) => w.list<AddressClaim>(keys.addresses()).map((c) => c.value.spec);
const subnets = (w: World) => new Map(w.list<NodeSubnet>(keys.subnets()).map((s) => [s.value.spec.node, s.value.spec]));

describe('IPAM at placement', () => {
  it('gives no subnets while no service is on the cluster network, and host services no address', () => {
    const w = world(['node-1', 'node-2']);
    w.deploy('web', { web: { image: 'x', replicas: 2 } });
    w.converge();
    expect(subnets(w).size).toBe(0);
    expect(w.desired().every((d) => d.spec.address === undefined)).toBe(true);
  });

  it('a cluster service: every node gets subnets (lowest index first, nodes by name), each replica an address of its node, claimed in its placement act', () => {
    const w = world(['node-b', 'node-a', 'node-c']);
    w.deploy('shop', { app: APP });
    w.converge();
    const s = subnets(w);
    expect([...s.entries()].map(([n, x]) => [n, x.index])).toEqual([
      ['node-a', 0],
      ['node-b', 1],
      ['node-c', 2],
    ]);
    for (const [n, x] of s) {
      expect(x).toMatchObject(nodeSubnets(NET.spec, x.index));
      expect(w.get(keys.subnetIndex(x.index))).toMatchObject({ spec: { node: n } });
    }
    const ds = w.desired({ deployment: 'shop' });
    expect(ds).toHaveLength(3);
    for (const d of ds) {
      const sub = s.get(d.spec.node)!;
      expect(d.spec.address!.ipv4.startsWith(sub.ipv4.slice(0, sub.ipv4.lastIndexOf('.') + 1))).toBe(true);
      expect(d.spec.address!.ipv4.endsWith('/24')).toBe(true);
      expect(d.spec.address!.ipv6.startsWith(sub.ipv6.slice(0, sub.ipv6.indexOf('::')))).toBe(true);
      expect(claims(w)).toContainEqual(expect.objectContaining({ node: d.spec.node, replica: d.spec.replica, ipv4: d.spec.address!.ipv4, ipv6: d.spec.address!.ipv6 }));
    }
    expect(claims(w)).toHaveLength(3);
  });

  it('never gives one address twice on a node, and is deterministic', () => {
    const run = () => {
      const w = world(['node-1']);
      w.deploy('shop', { app: { ...APP, replicas: 40 }, api: { ...APP, replicas: 20 } });
      w.converge();
      return w.desired().map((d) => `${d.spec.replica}=${d.spec.address!.ipv4}`).sort();
    };
    const a = run();
    expect(a).toHaveLength(60);
    expect(new Set(a.map((x) => x.split('=')[1])).size).toBe(60);
    expect(run()).toEqual(a);
  });

  it('an exhausted node fails the placement with ipam_exhausted, saying which subnets are full', () => {
    // A /29 per node: host numbers 2–6, five addresses.
    const w = world(['node-1'], { ...NET.spec, subnetBits4: 29 });
    w.deploy('shop', { app: { ...APP, replicas: 7 } });
    w.converge();
    expect(w.desired()).toHaveLength(5);
    const st = w.get<DeploymentStatus>(keys.deploymentStatus('shop'))!.status!.scheduling!.services.app!;
    expect(st.unschedulable).toMatchObject({ reason: 'ipam_exhausted', count: 2 });
    expect(st.unschedulable!.nodes['node-1']).toMatch(/ipam: all 5 addresses of 10\.208\.0\.0\/29 and fd4a:17c2:9e01::\/64 are held/);
  });

  it('a claim outlives its desired copy while the node reports the container with it; then it is released', () => {
    const w = world(['node-1']);
    w.deploy('shop', { app: { ...APP, replicas: 1 } });
    w.converge();
    const d = w.desired()[0]!;
    w.observe(d.spec.replica, 'running', { address: d.spec.address });
    w.undeploy('shop');
    w.converge();
    expect(w.desired()).toHaveLength(0);
    // Its container still runs with the address, as far as the cluster knows: the claim stays.
    expect(claims(w)).toHaveLength(1);
    w.remove(keys.observed('node-1', d.spec.replica));
    w.converge();
    expect(claims(w)).toHaveLength(0);
  });

  it('a replica re-placed off a lost node gets an address of its new node; the lost node keeps its claim until it is removed', () => {
    const w = world(['node-1', 'node-2']);
    w.deploy('shop', { app: { ...APP, replicas: 1 } });
    w.converge();
    const d = w.desired()[0]!;
    const other = d.spec.node === 'node-1' ? 'node-2' : 'node-1';
    w.observe(d.spec.replica, 'running', { address: d.spec.address });
    w.nodeDown(d.spec.node);
    w.pass();
    w.advance(4000);
    w.converge();
    const moved = w.desired()[0]!;
    expect(moved.spec.node).toBe(other);
    expect(moved.spec.address!.ipv4).not.toBe(d.spec.address!.ipv4);
    expect(claims(w).map((c) => c.node).sort()).toEqual(['node-1', 'node-2']);
    // Its key lost by the store (no removal recorded): the node keeps its claim and subnet.
    w.remove(keys.node(d.spec.node));
    w.converge();
    expect(claims(w).map((c) => c.node).sort()).toEqual(['node-1', 'node-2']);
    // The lost node is removed from the cluster: its claim and its subnets go.
    w.removeNode(d.spec.node);
    w.converge();
    expect(claims(w).map((c) => c.node)).toEqual([other]);
    expect([...subnets(w).keys()]).toEqual([other]);
    expect(w.list(keys.subnetIndexes()).map((k) => k.key)).toEqual([keys.subnetIndex(subnets(w).get(other)!.index)]);
  });

  it('every service gets an address of the service range once the cluster network exists, host-network ones too; kept; released with its service', () => {
    const w = world(['node-1']);
    w.deploy('shop', { app: APP, web: { image: 'x', replicas: 1 } });
    w.converge();
    const addrs = () => new Map(w.list<ServiceAddress>(keys.serviceAddresses()).map((v) => [`${v.value.spec.deployment}/${v.value.spec.service}`, v.value.spec]));
    const a = addrs();
    expect([...a.keys()].sort()).toEqual(['shop/app', 'shop/web']);
    for (const x of a.values()) {
      expect(x.ipv4).toMatch(/^10\.207\.\d+\.\d+$/);
      expect(x.ipv6).toMatch(/^fd4a:17c2:9e01:ffff::[0-9a-f]+$/);
      expect(w.get(keys.serviceAddressNumber(x.number))).toMatchObject({ spec: { deployment: x.deployment, service: x.service } });
    }
    expect(new Set([...a.values()].map((x) => x.ipv4)).size).toBe(2);
    // Kept as the service changes.
    w.deploy('shop', { app: { ...APP, replicas: 1 }, web: { image: 'y', replicas: 1 } });
    w.converge();
    expect(addrs()).toEqual(a);
    // A service removed: its address and number go.
    w.deploy('shop', { app: APP });
    w.converge();
    expect([...addrs().keys()]).toEqual(['shop/app']);
    expect(w.get(keys.serviceAddressNumber(a.get('shop/web')!.number))).toBeUndefined();
  });

  it('a service address carries the service’s aliases, and follows them as the spec changes (the address stays)', () => {
    const w = world(['node-1']);
    w.deploy('shop', { 'web-app': { ...APP, replicas: 1, aliases: ['web_app'] } });
    w.converge();
    const spec = () => w.list<ServiceAddress>(keys.serviceAddresses())[0]!.value.spec;
    const first = spec();
    expect(first.aliases).toEqual(['web_app']);
    w.deploy('shop', { 'web-app': { ...APP, replicas: 1, aliases: ['web_app', 'front'] } });
    w.converge();
    expect(spec()).toEqual({ ...first, aliases: ['web_app', 'front'] });
    w.deploy('shop', { 'web-app': { ...APP, replicas: 1 } });
    w.converge();
    expect(spec()).toEqual((({ aliases: _a, ...rest }) => rest)(first));
  });

  it('no cluster network (no config/network): no service addresses', () => {
    const w = new World();
    w.node('node-1');
    w.deploy('shop', { web: { image: 'x' } });
    w.converge();
    expect(w.list(keys.serviceAddresses())).toEqual([]);
  });

  it('cluster replicas take no host ports (two on a node bind one port), and their endpoints are their own addresses and container ports', () => {
    const w = world(['node-1']);
    w.deploy('shop', { app: { ...APP, replicas: 2, ports: [8080, { name: 'admin', containerPort: 9000 }] } });
    w.converge();
    expect(w.desired()).toHaveLength(2);
    w.runAll();
    w.converge();
    const eps = w.get<Endpoints>(keys.endpoints('shop', 'app'))!.spec.addresses;
    expect(eps).toHaveLength(2);
    for (const e of eps) {
      const d = w.desired().find((x) => x.spec.replica === e.replica)!;
      expect(e.address).toBe(d.spec.address!.ipv4.split('/')[0]);
      expect(e.hostPorts).toEqual({ p8080: 8080, admin: 9000 });
      expect(d.spec.hostPorts).toBeUndefined();
    }
  });
});
