import { describe, expect, it } from 'vitest';
import { PEER_SKIPS } from '../../src/api/reasons/overlay.js';
import type { Node, NodeSubnet } from '../../src/api/types.js';
import { decideOverlay, desiredInterface, isWireGuardKey, overlayNodes, overlaySteps, peersOf, type OverlayNode, type OverlaySettings, type OverlaySnapshot } from './overlay-decide.js';
import { NO_INTERFACE, type InterfaceState, type ObservedPeer } from './overlay-observe.js';

const K1 = 'ySolR2ul2j2a9bGl0ugRZNkIsjVp9fojWb+hMz89Pks=';
const K2 = 'hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=';
const K3 = 'GxQQPOKhqgleb8n1uVEznH4uy6Ku5SBkbxXNUoY4PXY=';
const K4 = 'WDXKS3IK0OaWCEjdvO9dRIk9KcgzrMUTrkEU3b6buWM=';

const S: OverlaySettings = { interface: 'jaco-wg', port: 51820, mtu: 1420, keepaliveSec: 25, keyFile: '/state/overlay.key', publicKey: K1 };
const sub = (i: number) => ({ ipv4: `10.208.${i}.0/24`, ipv6: `fd4a:17c2:9e01:${i.toString(16)}::/64` });
const node = (name: string, key: string | undefined, i: number | undefined, endpoint = `198.18.1.${11 + Number(name.slice(5)) - 1}:51820`): OverlayNode => ({
  name,
  ...(key ? { overlay: { publicKey: key, endpoint } } : {}),
  ...(i !== undefined ? { subnets: sub(i) } : {}),
});
const cluster = (...ns: OverlayNode[]) => new Map(ns.map((n) => [n.name, n]));
const THREE = cluster(node('node-1', K1, 0), node('node-2', K2, 1), node('node-3', K3, 2));
const NOW = 1_800_000_000_000;

/** The interface as it stands once every step for `nodes` has been carried out. */
function converged(nodes = THREE, self = 'node-1'): InterfaceState {
  const { peers } = peersOf(self, S.publicKey, nodes);
  const d = desiredInterface(nodes.get(self), peers);
  return {
    exists: true,
    kind: 'tun',
    wireguard: true,
    up: true,
    mtu: 1420,
    publicKey: S.publicKey,
    listenPort: 51820,
    addresses: d.addresses,
    peers: peers.map((p) => ({ publicKey: p.publicKey, endpoint: p.endpoint, allowedIps: p.allowedIps, latestHandshake: NOW / 1000 - 10, rxBytes: 100, txBytes: 200, keepaliveSec: 25 })),
    routes: d.routes,
  };
}
const steps = (nodes: Map<string, OverlayNode>, iface: InterfaceState) => overlaySteps(S, desiredInterface(nodes.get('node-1'), peersOf('node-1', K1, nodes).peers), peersOf('node-1', K1, nodes).peers, iface).map((s) => (s.op === 'create' ? 'create' : `${s.op} ${s.args.join(' ')}`));

describe('the peers of a node', () => {
  it('are every other node with a key, an endpoint and subnets, by name; never itself', () => {
    expect(peersOf('node-1', K1, THREE)).toEqual({
      peers: [
        { node: 'node-2', publicKey: K2, endpoint: '198.18.1.12:51820', allowedIps: ['10.208.1.0/24', 'fd4a:17c2:9e01:1::/64'] },
        { node: 'node-3', publicKey: K3, endpoint: '198.18.1.13:51820', allowedIps: ['10.208.2.0/24', 'fd4a:17c2:9e01:2::/64'] },
      ],
      skipped: [],
    });
  });

  it.each<[string, OverlayNode, keyof typeof PEER_SKIPS]>([
    ['no published overlay (an agent without --overlay)', node('node-3', undefined, 2), 'no_overlay'],
    ['no subnets yet', node('node-3', K3, undefined), 'no_subnets'],
    ['a key that is not 32 bytes of base64', node('node-3', 'c2hvcnQ=', 2), 'bad_key'],
    ['an endpoint that is a name', node('node-3', K3, 2, 'node-3:51820'), 'bad_endpoint'],
    ['an endpoint without a port', node('node-3', K3, 2, '198.18.1.13'), 'bad_endpoint'],
    ['subnets that are not CIDRs', { ...node('node-3', K3, 2), subnets: { ipv4: '10.208.2.0', ipv6: 'fd4a::/64' } }, 'bad_subnets'],
    ['subnets of the wrong families', { ...node('node-3', K3, 2), subnets: { ipv4: 'fd4a::/64', ipv6: '10.208.2.0/24' } }, 'bad_subnets'],
    ["this node's own key", node('node-3', K1, 2), 'own_key'],
    ["node-2's key (node-2 comes first by name)", node('node-3', K2, 2), 'duplicate_key'],
  ])('a node with %s is no peer', (_, n3, reason) => {
    const r = peersOf('node-1', K1, cluster(node('node-1', K1, 0), node('node-2', K2, 1), n3));
    expect(r.peers.map((p) => p.node)).toEqual(['node-2']);
    expect(r.skipped).toEqual([{ node: 'node-3', reason }]);
  });

  it('are the same whatever the order of the nodes', () => {
    const reversed = new Map([...THREE].reverse());
    expect(peersOf('node-2', K2, reversed)).toEqual(peersOf('node-2', K2, THREE));
    expect(peersOf('node-2', K2, THREE).peers.map((p) => p.node)).toEqual(['node-1', 'node-3']);
  });

  it('come from nodes/ and subnets/: a node with no subnets key has none, a subnets key of no node is nobody', () => {
    const n = (name: string, overlay?: { publicKey: string; endpoint: string }) =>
      ({ apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis: 1, memoryBytes: 1, gpus: 0 }, agentVersion: 'x', registeredAt: 't', ...(overlay ? { overlay } : {}) } }) as Node;
    const s = (nodeName: string, i: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'NodeSubnet', metadata: { name: nodeName }, spec: { node: nodeName, index: i, since: 't', ...sub(i) } }) as NodeSubnet;
    const m = overlayNodes([n('node-1', { publicKey: K1, endpoint: '198.18.1.11:51820' }), n('node-2', { publicKey: K2, endpoint: '198.18.1.12:51820' }), n('node-4')], [s('node-1', 0), s('node-3', 2)]);
    expect([...m.values()]).toEqual([
      { name: 'node-1', overlay: { publicKey: K1, endpoint: '198.18.1.11:51820' }, subnets: sub(0) },
      { name: 'node-2', overlay: { publicKey: K2, endpoint: '198.18.1.12:51820' } },
      { name: 'node-4' },
    ]);
    expect(peersOf('node-1', K1, m).skipped).toEqual([
      { node: 'node-2', reason: 'no_subnets' },
      { node: 'node-4', reason: 'no_overlay' },
    ]);
  });

  it('knows a WireGuard key when it sees one', () => {
    expect([K1, K2, K3, K4].every(isWireGuardKey)).toBe(true);
    // 44 characters, but the last one carries bits past 256.
    expect(isWireGuardKey('ySolR2ul2j2a9bGl0ugRZNkIsjVp9fojWb+hMz89PkB=')).toBe(false);
    expect(isWireGuardKey(`${K1}\n`)).toBe(false);
  });
});

describe('the steps from the interface as it is to the interface as it should be', () => {
  it('from nothing: make it, key and port, MTU, own addresses, up, every peer in one wg set, a route per peer subnet', () => {
    expect(steps(THREE, NO_INTERFACE)).toEqual([
      'create',
      'wg set jaco-wg private-key /state/overlay.key listen-port 51820',
      'ip link set dev jaco-wg mtu 1420',
      'ip addr replace 10.208.0.1/32 dev jaco-wg',
      'ip addr replace fd4a:17c2:9e01::1/128 dev jaco-wg',
      'ip link set dev jaco-wg up',
      `wg set jaco-wg peer ${K2} endpoint 198.18.1.12:51820 allowed-ips 10.208.1.0/24,fd4a:17c2:9e01:1::/64 persistent-keepalive 25 peer ${K3} endpoint 198.18.1.13:51820 allowed-ips 10.208.2.0/24,fd4a:17c2:9e01:2::/64 persistent-keepalive 25`,
      'ip route replace 10.208.1.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:1::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
      'ip route replace 10.208.2.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:2::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
    ]);
  });

  it('nothing, once it is there (idempotent); counters and handshakes change nothing', () => {
    expect(steps(THREE, converged())).toEqual([]);
    const busy = converged();
    busy.peers = busy.peers.map((p) => ({ ...p, rxBytes: 1e9, txBytes: 2e9, latestHandshake: 1 }));
    expect(steps(THREE, busy)).toEqual([]);
  });

  it('an interface left by a crashed agent is adopted: only what differs is done, nothing is made again', () => {
    const left = { ...converged(), peers: converged().peers.slice(0, 1), routes: converged().routes.slice(0, 2) };
    expect(steps(THREE, left)).toEqual([
      `wg set jaco-wg peer ${K3} endpoint 198.18.1.13:51820 allowed-ips 10.208.2.0/24,fd4a:17c2:9e01:2::/64 persistent-keepalive 25`,
      'ip route replace 10.208.2.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:2::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
    ]);
  });

  it("a removed node's peer goes, with its routes", () => {
    const two = cluster(node('node-1', K1, 0), node('node-2', K2, 1));
    expect(steps(two, converged())).toEqual([
      `wg set jaco-wg peer ${K3} remove`,
      'ip route del 10.208.2.0/24 dev jaco-wg proto 106',
      'ip route del fd4a:17c2:9e01:2::/64 dev jaco-wg proto 106',
    ]);
  });

  it('a node that loses its subnets (released, given again elsewhere) stops being routed; new subnets are routed', () => {
    const moved = cluster(node('node-1', K1, 0), node('node-2', K2, 1), node('node-3', K3, 7));
    expect(steps(moved, converged())).toEqual([
      `wg set jaco-wg peer ${K3} endpoint 198.18.1.13:51820 allowed-ips 10.208.7.0/24,fd4a:17c2:9e01:7::/64 persistent-keepalive 25`,
      'ip route replace 10.208.7.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:7::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
      'ip route del 10.208.2.0/24 dev jaco-wg proto 106',
      'ip route del fd4a:17c2:9e01:2::/64 dev jaco-wg proto 106',
    ]);
  });

  it("an endpoint change updates the peer in place", () => {
    const movedHost = cluster(node('node-1', K1, 0), node('node-2', K2, 1, '198.18.1.99:51821'), node('node-3', K3, 2));
    expect(steps(movedHost, converged())).toEqual([`wg set jaco-wg peer ${K2} endpoint 198.18.1.99:51821 allowed-ips 10.208.1.0/24,fd4a:17c2:9e01:1::/64 persistent-keepalive 25`]);
  });

  it('a key change (a node whose state directory was lost) removes the old peer and adds the new in one wg set; the routes stay', () => {
    const rekeyed = cluster(node('node-1', K1, 0), node('node-2', K4, 1), node('node-3', K3, 2));
    expect(steps(rekeyed, converged())).toEqual([`wg set jaco-wg peer ${K2} remove peer ${K4} endpoint 198.18.1.12:51820 allowed-ips 10.208.1.0/24,fd4a:17c2:9e01:1::/64 persistent-keepalive 25`]);
  });

  it('a peer whose keepalive or allowed IPs were changed by hand is set back', () => {
    const edited = converged();
    edited.peers = [{ ...edited.peers[0]!, keepaliveSec: undefined, allowedIps: ['10.208.1.0/24'] } as ObservedPeer, edited.peers[1]!];
    expect(steps(THREE, edited)).toEqual([`wg set jaco-wg peer ${K2} endpoint 198.18.1.12:51820 allowed-ips 10.208.1.0/24,fd4a:17c2:9e01:1::/64 persistent-keepalive 25`]);
  });

  it('an interface without the key (wireguard-go just started), down, at 1500: key and port, MTU, up', () => {
    const bare: InterfaceState = { ...converged(), publicKey: undefined, listenPort: undefined, up: false, mtu: 1500 };
    expect(steps(THREE, bare)).toEqual(['wg set jaco-wg private-key /state/overlay.key listen-port 51820', 'ip link set dev jaco-wg mtu 1420', 'ip link set dev jaco-wg up']);
  });

  it('another listen port is set back', () => {
    expect(steps(THREE, { ...converged(), listenPort: 40000 })).toEqual(['wg set jaco-wg private-key /state/overlay.key listen-port 51820']);
  });

  it('this node without subnets yet: no own address, routes without a source; they get one when its subnets come', () => {
    const noOwn = cluster(node('node-1', K1, undefined), node('node-2', K2, 1), node('node-3', K3, 2));
    const before = converged(noOwn);
    expect(before.addresses).toEqual([]);
    expect(before.routes[0]).toEqual({ dst: '10.208.1.0/24' });
    expect(steps(THREE, before)).toEqual([
      'ip addr replace 10.208.0.1/32 dev jaco-wg',
      'ip addr replace fd4a:17c2:9e01::1/128 dev jaco-wg',
      'ip route replace 10.208.1.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:1::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
      'ip route replace 10.208.2.0/24 dev jaco-wg proto 106 src 10.208.0.1',
      'ip route replace fd4a:17c2:9e01:2::/64 dev jaco-wg proto 106 src fd4a:17c2:9e01::1',
    ]);
  });

  it('an address that is not the node\'s any more is removed', () => {
    expect(steps(THREE, { ...converged(), addresses: [...converged().addresses, '10.208.5.1/32'] })).toEqual(['ip addr del 10.208.5.1/32 dev jaco-wg']);
  });

  it('an interface of that name that is not WireGuard is left alone', () => {
    expect(steps(THREE, { ...NO_INTERFACE, exists: true, kind: 'veth', up: true })).toEqual([]);
  });

  it('a lone node makes its interface and has no peers', () => {
    expect(steps(cluster(node('node-1', K1, 0)), NO_INTERFACE)).toEqual([
      'create',
      'wg set jaco-wg private-key /state/overlay.key listen-port 51820',
      'ip link set dev jaco-wg mtu 1420',
      'ip addr replace 10.208.0.1/32 dev jaco-wg',
      'ip addr replace fd4a:17c2:9e01::1/128 dev jaco-wg',
      'ip link set dev jaco-wg up',
    ]);
  });
});

describe('how the overlay stands (/healthz, metrics)', () => {
  const snap = (iface?: InterfaceState, nodes = THREE): OverlaySnapshot => ({ node: 'node-1', settings: S, nodes, ...(iface ? { iface } : {}) });

  it('up: every peer configured and routed; handshake ages and counters per peer', () => {
    const p = decideOverlay(snap(converged()), NOW);
    expect(p.health).toEqual({ up: true, interface: 'jaco-wg', kind: 'tun', listenPort: 51820, peers: { expected: 2, configured: 2 }, missing: [], noHandshake: [], stale: [], pending: 0 });
    expect(p.stats).toEqual([
      { node: 'node-2', handshakeAgeSec: 10, rxBytes: 100, txBytes: 200 },
      { node: 'node-3', handshakeAgeSec: 10, rxBytes: 100, txBytes: 200 },
    ]);
  });

  it.each<[string, InterfaceState | undefined, object]>([
    ['not looked at yet', undefined, { up: false, reason: 'not_observed', missing: ['node-2', 'node-3'], pending: 0 }],
    ['no interface', NO_INTERFACE, { up: false, reason: 'no_interface', missing: ['node-2', 'node-3'], pending: 11 }],
    ['an interface that is not WireGuard', { ...NO_INTERFACE, exists: true, kind: 'veth' }, { up: false, reason: 'not_wireguard', kind: 'veth', pending: 0 }],
    ['no key set', { ...converged(), publicKey: undefined }, { up: false, reason: 'key_not_set', pending: 1 }],
    ['a peer not configured', { ...converged(), peers: converged().peers.slice(1) }, { up: false, reason: 'peers_missing', missing: ['node-2'], peers: { expected: 2, configured: 1 } }],
    ["a peer's subnet not routed", { ...converged(), routes: converged().routes.slice(1) }, { up: false, reason: 'peers_missing', missing: ['node-2'], pending: 1 }],
  ])('not up: %s', (_, iface, expected) => {
    expect(decideOverlay(snap(iface), NOW).health).toMatchObject(expected);
  });

  it('handshakes: none yet, and none for longer than 180 s, are named (the overlay is still up)', () => {
    const iface = converged();
    iface.peers = [
      { ...iface.peers[0]!, latestHandshake: 0 },
      { ...iface.peers[1]!, latestHandshake: NOW / 1000 - 181 },
    ];
    const p = decideOverlay(snap(iface), NOW);
    expect(p.health).toMatchObject({ up: true, noHandshake: ['node-2'], stale: ['node-3'] });
    expect(p.stats).toEqual([
      { node: 'node-2', rxBytes: 100, txBytes: 200 },
      { node: 'node-3', handshakeAgeSec: 181, rxBytes: 100, txBytes: 200 },
    ]);
  });

  it('decides nothing before the interface has been looked at', () => {
    expect(decideOverlay(snap(undefined), NOW).steps).toEqual([]);
  });

  it('names the nodes it skips and why', () => {
    const p = decideOverlay(snap(converged(), cluster(node('node-1', K1, 0), node('node-2', K2, 1), node('node-3', undefined, 2))), NOW);
    expect(p.skipped).toEqual([{ node: 'node-3', reason: 'no_overlay' }]);
    expect(p.steps.map((s) => (s.op === 'create' ? s.op : s.args.slice(0, 4).join(' ')))).toEqual([`set jaco-wg peer ${K3}`, 'route del 10.208.2.0/24 dev', 'route del fd4a:17c2:9e01:2::/64 dev']);
  });
});
