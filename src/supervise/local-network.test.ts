import { describe, expect, it } from 'vitest';
import { MAX_LOCAL_NODES, networkCommands, overlayInterface, planNetwork } from './local-network.js';
import { engineCommand, engineSpec, mountsUnder } from './node-engine.js';

describe('the local network plan', () => {
  const net = planNetwork(7, ['node-1', 'node-2']);

  it('gives each network a /24 of 198.18/15 and each node an address, namespace and link of its own', () => {
    expect(net).toMatchObject({ tag: 'jaco7', router: 'jaco7-router', hostLink: 'jaco7', hostAddress: '198.18.7.1', gateway: '198.18.7.254', subnet: '198.18.7.0/24' });
    expect(net.nodes).toEqual([
      { name: 'node-1', netns: 'jaco7-node-1', address: '198.18.7.11', link: 'n1' },
      { name: 'node-2', netns: 'jaco7-node-2', address: '198.18.7.12', link: 'n2' },
    ]);
  });

  it.each([0, 255, 1.5])('refuses network index %s', (i) => expect(() => planNetwork(i, [])).toThrow(/network index/));

  it(`refuses more than ${MAX_LOCAL_NODES} nodes`, () => {
    expect(() => planNetwork(1, Array.from({ length: MAX_LOCAL_NODES + 1 }, (_, i) => `n${i}`))).toThrow(/at most/);
  });

  it('names every interface within the kernel limit of 15 characters', () => {
    const big = planNetwork(254, Array.from({ length: MAX_LOCAL_NODES }, (_, i) => `node-${i + 1}`));
    for (const name of [big.hostLink, ...big.nodes.map((n) => n.link), 'eth0', 'host']) expect(name.length).toBeLessThanOrEqual(15);
    const overlays = big.nodes.map((n) => overlayInterface(big, n));
    for (const name of overlays) expect(name.length).toBeLessThanOrEqual(15);
    expect(overlays[199]).toBe('jaco254-wg200');
  });

  it("gives each node's overlay interface a name no other node of the machine has (wireguard-go's sockets share one directory)", () => {
    const other = planNetwork(8, ['node-1', 'node-2']);
    const names = [...net.nodes.map((n) => overlayInterface(net, n)), ...other.nodes.map((n) => overlayInterface(other, n))];
    expect(names).toEqual(['jaco7-wg1', 'jaco7-wg2', 'jaco8-wg1', 'jaco8-wg2']);
  });

  it('routes only the cluster subnet through the router: no default route, no bridge, no NAT', () => {
    const cmds = networkCommands(net).map((c) => `${c.netns ?? 'root'}: ${c.args.join(' ')}`);
    expect(cmds).toContain('root: route replace 198.18.7.0/24 via 198.18.7.254 dev jaco7 onlink');
    expect(cmds).toContain('jaco7-node-1: route replace 198.18.7.0/24 via 198.18.7.254 dev eth0 onlink');
    expect(cmds).toContain('jaco7-router: route replace 198.18.7.12/32 dev n2');
    expect(cmds).toContain('jaco7-router: route replace 198.18.7.1/32 dev host');
    expect(cmds.filter((c) => /default|bridge|masquerade|nat/.test(c))).toEqual([]);
    // Each node's link is made in its namespace, its peer moved to the router.
    expect(cmds).toContain('jaco7-node-2: link add eth0 type veth peer name n2 netns jaco7-router');
  });
});

describe('a node engine', () => {
  const s = engineSpec('jaco7', 'node-1', 'jaco7-node-1', '/data/.jaco');

  it('keeps data under the cluster data dir, run state under /run/jaco, containers under a cgroup of its own', () => {
    expect(s).toEqual({
      node: 'node-1',
      netns: 'jaco7-node-1',
      dataRoot: '/data/.jaco/nodes/node-1/docker',
      execRoot: '/run/jaco/jaco7/node-1/exec',
      socket: '/run/jaco/jaco7/node-1/docker.sock',
      pidFile: '/run/jaco/jaco7/node-1/docker.pid',
      cgroupParent: '/jaco7-node-1',
    });
  });

  it('runs dockerd inside the node namespace with no bridge, iptables, forwarding or masquerading', () => {
    const c = engineCommand(s);
    expect(c.cmd).toBe('nsenter');
    expect(c.args.slice(0, 3)).toEqual(['--net=/run/netns/jaco7-node-1', '--', 'dockerd']);
    for (const flag of ['--bridge=none', '--iptables=false', '--ip-forward=false', '--ip-masq=false']) expect(c.args).toContain(flag);
    expect(c.args.join(' ')).toContain('--host unix:///run/jaco/jaco7/node-1/docker.sock');
  });

  it('finds the mounts a crashed engine left under its roots, deepest first, unescaping mountinfo', () => {
    const info = [
      '22 1 8:1 / / rw - ext4 /dev/vda rw',
      '90 22 0:50 / /data/.jaco/nodes/node-1/docker/overlay2/abc/merged rw - overlay overlay rw',
      '91 22 0:4 net:[4026532] /run/jaco/jaco7/node-1/exec/netns/default rw - nsfs nsfs rw',
      '92 22 0:51 / /data/.jaco/nodes/node-10/docker/x rw - overlay overlay rw',
      '93 22 0:52 / /data/.jaco/nodes/node-1/docker/with\\040space rw - overlay overlay rw',
    ].join('\n');
    expect(mountsUnder(info, [s.execRoot, s.dataRoot])).toEqual([
      '/data/.jaco/nodes/node-1/docker/overlay2/abc/merged',
      '/data/.jaco/nodes/node-1/docker/with space',
      '/run/jaco/jaco7/node-1/exec/netns/default',
    ]);
  });
});
