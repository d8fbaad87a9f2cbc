// Dynamic host ports, end to end through the scheduler's pass: assigned at placement from the
// node's range, recorded in the desired record, never two replicas of a node on one port, kept
// across passes (they are recorded), fresh on a lost node's replacement; endpoints carry
// address:port per replica.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Endpoints, Node, ServiceSpec } from '../../src/api/types.js';
import { World } from '../../test/support/scheduler-world.js';
import { Placer } from '../placement/placer.js';

const WEB: ServiceSpec = { image: 'jaco-demo/busybox:1', ports: [{ name: 'http', containerPort: 80, published: 18080 }, { name: 'admin', containerPort: 9000 }] };

function world(nodes: string[], range?: { min: number; max: number }): World {
  const w = new World();
  nodes.forEach((n, i) => {
    w.node(n, { memory: '64Gi' });
    const node = w.get<Node>(keys.node(n))!;
    w.put(keys.node(n), { ...node, status: { ...node.status!, address: `127.0.1.${i + 1}`, ...(range ? { portRange: range } : {}) } });
  });
  return w;
}

const portsOn = (w: World, node: string) => w.desired().filter((d) => d.spec.node === node).flatMap((d) => Object.values(d.spec.hostPorts ?? {}));

describe('dynamic host ports', () => {
  it('each replica gets a free port per dynamic port from its node range; none shared on a node', () => {
    const w = world(['node-1'], { min: 30000, max: 30009 });
    w.deploy('app', { web: { ...WEB, replicas: 5 } });
    w.pass();
    const ds = w.desired();
    expect(ds).toHaveLength(5);
    for (const d of ds) expect(Object.keys(d.spec.hostPorts!)).toEqual(['http', 'admin']);
    const ports = portsOn(w, 'node-1');
    expect(new Set(ports).size).toBe(10);
    for (const p of ports) expect(p).toBeGreaterThanOrEqual(30000), expect(p).toBeLessThanOrEqual(30009);
  });

  it('is deterministic: the same cluster gives the same ports, and recorded ports survive later passes', () => {
    const run = () => {
      const w = world(['node-1', 'node-2']);
      w.deploy('app', { web: { ...WEB, replicas: 4 } });
      w.pass();
      return w;
    };
    const a = run();
    const b = run();
    const ports = (w: World) => Object.fromEntries(w.desired().map((d) => [d.spec.replica, d.spec.hostPorts]));
    expect(ports(a)).toEqual(ports(b));
    // A scale-up later keeps the first ports and gives the new replicas others.
    a.deploy('app', { web: { ...WEB, replicas: 6 } });
    a.pass();
    const after = ports(a);
    for (const [id, p] of Object.entries(ports(b))) expect(after[id]).toEqual(p);
    for (const n of ['node-1', 'node-2']) expect(new Set(portsOn(a, n)).size).toBe(portsOn(a, n).length);
  });

  it('a fixed host port stays a per-node resource; only the others are assigned', () => {
    const w = world(['node-1', 'node-2']);
    w.deploy('app', { web: { image: 'x', replicas: 2, ports: [8080, { name: 'http', containerPort: 80, hostPort: 8081 }, { name: 'dyn', containerPort: 90 }] } });
    w.pass();
    const ds = w.desired();
    expect(new Set(ds.map((d) => d.spec.node)).size).toBe(2);
    for (const d of ds) expect(Object.keys(d.spec.hostPorts!)).toEqual(['dyn']);
  });

  it("endpoints list address:port per ready replica", () => {
    const w = world(['node-1', 'node-2']);
    w.deploy('app', { web: { ...WEB, replicas: 2 } });
    w.pass();
    w.runAll();
    w.pass();
    const eps = w.get<Endpoints>(keys.endpoints('app', 'web'))!.spec.addresses;
    expect(eps).toHaveLength(2);
    for (const e of eps) {
      const d = w.desired().find((x) => x.spec.replica === e.replica)!;
      expect(e).toEqual({ replica: d.spec.replica, node: d.spec.node, address: d.spec.node === 'node-1' ? '127.0.1.1' : '127.0.1.2', ports: Object.values(d.spec.hostPorts!), hostPorts: d.spec.hostPorts });
    }
  });

  it("a lost node's replacement gets ports of its new node, not the old node's", () => {
    const w = world(['node-1', 'node-2'], { min: 30000, max: 30001 });
    w.deploy('app', { web: { image: 'x', replicas: 2, ports: [{ name: 'http', containerPort: 80 }] } });
    w.pass();
    w.runAll();
    const lost = w.desired().find((d) => d.spec.node === 'node-1')!;
    w.nodeDown('node-1');
    w.pass();
    w.advance(60_000);
    w.heartbeat('node-2');
    w.converge();
    const moved = w.desired().find((d) => d.spec.replica === lost.spec.replica)!;
    expect(moved.spec.node).toBe('node-2');
    expect(new Set(portsOn(w, 'node-2'))).toEqual(new Set([30000, 30001]));
  });
});

describe('a full port range', () => {
  it('is a placement rejection (ports), not a failed pass: the node takes what fits, the rest waits', () => {
    const w = world(['node-1'], { min: 30000, max: 30002 });
    w.deploy('app', { web: { image: 'x', replicas: 3, placement: { mode: 'pack' }, ports: [{ name: 'http', containerPort: 80 }, { name: 'admin', containerPort: 81 }] } });
    const plan = w.pass();
    // Three free ports fit one replica's two; the others are unschedulable for ports.
    expect(w.desired()).toHaveLength(1);
    expect(new Set(portsOn(w, 'node-1')).size).toBe(2);
    expect(plan.unschedulable).toEqual({ port_conflict: 2 });
  });

  it("the placer's rejection says how many ports the node's range has free", () => {
    const capacity = { cpuMillis: 4000, memoryBytes: 8 * 2 ** 30, gpus: 0 };
    const held = { id: 'app-web-0', deployment: 'app', service: 'web', node: 'node-1', cpuMillis: 0, memoryBytes: 0, gpus: 0, ports: [30000, 30001] };
    const placer = new Placer({ nodes: [{ name: 'node-1', capacity, labels: {}, portRange: { min: 30000, max: 30002 } }], placed: [held], volumeHomes: {} });
    const d = placer.decide({ replica: 'app-web-1', deployment: 'app', service: 'web', spec: { image: 'x', ports: [{ name: 'http', containerPort: 80 }, { name: 'admin', containerPort: 81 }] } });
    expect(d.chosen).toBeUndefined();
    expect(d.verdicts[0]!.rejected).toEqual({ filter: 'ports', reason: 'port_conflict', detail: 'needs 2 dynamic host port(s); 1 of 30000-30002 free' });
  });
});
