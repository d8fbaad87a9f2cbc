import { describe, expect, it } from 'vitest';
import { canonicalCidr } from '../../src/api/network.js';
import { canonicalEndpoint, parseIpAddr, parseIpRoutes, parseWgDump } from './overlay-observe.js';

const PRIV = 'CL+o4yUmcV9P3EeFhrTHDDeFEOzX+Uj4L+KK4+JIrkA=';
const PUB = 'ySolR2ul2j2a9bGl0ugRZNkIsjVp9fojWb+hMz89Pks=';
const PEER = 'GxQQPOKhqgleb8n1uVEznH4uy6Ku5SBkbxXNUoY4PXY=';
const PEER2 = 'hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=';

describe('wg show <if> dump', () => {
  it('reads the interface and its peers, and drops the private key', () => {
    const dump = [
      `${PRIV}\t${PUB}\t51820\toff`,
      `${PEER}\t(none)\t198.18.1.12:51820\t10.208.1.0/24,fd4a:17c2:9e01:1::/64\t1795806392\t508\t888\t25`,
      `${PEER2}\t(none)\t[fd00:0:0::7]:51820\t(none)\t0\t0\t0\toff`,
      '',
    ].join('\n');
    const r = parseWgDump(dump);
    expect(r).toEqual({
      publicKey: PUB,
      listenPort: 51820,
      peers: [
        { publicKey: PEER, endpoint: '198.18.1.12:51820', allowedIps: ['10.208.1.0/24', 'fd4a:17c2:9e01:1::/64'], latestHandshake: 1795806392, rxBytes: 508, txBytes: 888, keepaliveSec: 25 },
        { publicKey: PEER2, endpoint: '[fd00::7]:51820', allowedIps: [], latestHandshake: 0, rxBytes: 0, txBytes: 0 },
      ],
    });
    expect(JSON.stringify(r)).not.toContain(PRIV);
  });

  it('reads an interface with no key, no port and no peers (just made)', () => {
    expect(parseWgDump('(none)\t(none)\t0\toff\n')).toEqual({ peers: [] });
  });

  it('reads a peer with no endpoint yet', () => {
    expect(parseWgDump(`(none)\t(none)\t0\toff\n${PEER}\t(none)\t(none)\t10.0.0.0/24\t0\t0\t0\toff`).peers[0]).toEqual({ publicKey: PEER, allowedIps: ['10.0.0.0/24'], latestHandshake: 0, rxBytes: 0, txBytes: 0 });
  });

  it.each([
    ['empty output', ''],
    ['a short interface line', `${PUB}\t51820`],
    ['a short peer line', `(none)\t(none)\t0\toff\n${PEER}\t(none)\t1.2.3.4:5`],
    ['a counter that is not a number', `(none)\t(none)\t0\toff\n${PEER}\t(none)\t1.2.3.4:5\t10.0.0.0/24\tsoon\t0\t0\toff`],
  ])('refuses %s', (_, text) => {
    expect(() => parseWgDump(text)).toThrow(/wg show dump/);
  });
});

describe('ip -j output', () => {
  it('reads a userspace interface: kind, up, MTU, global addresses (not link-local)', () => {
    const json = JSON.stringify([
      {
        ifindex: 4,
        ifname: 'jaco-wg',
        flags: ['POINTOPOINT', 'MULTICAST', 'NOARP', 'UP', 'LOWER_UP'],
        mtu: 1420,
        linkinfo: { info_kind: 'tun' },
        addr_info: [
          { family: 'inet', local: '10.208.0.1', prefixlen: 32, scope: 'global' },
          { family: 'inet6', local: 'fd4a:17c2:9e01:0:0::1', prefixlen: 128, scope: 'global' },
          { family: 'inet6', local: 'fe80::9fa7:bd07:6761:8599', prefixlen: 64, scope: 'link' },
        ],
      },
    ]);
    expect(parseIpAddr(json)).toEqual({ exists: true, kind: 'tun', up: true, mtu: 1420, addresses: ['10.208.0.1/32', 'fd4a:17c2:9e01::1/128'] });
  });

  it('reads a down interface with no address', () => {
    expect(parseIpAddr('[{"ifname":"jaco-wg","flags":["POINTOPOINT","NOARP"],"mtu":1500,"linkinfo":{"info_kind":"wireguard"}}]')).toEqual({ exists: true, kind: 'wireguard', up: false, mtu: 1500, addresses: [] });
  });

  it('reads no interface as none', () => {
    expect(parseIpAddr('[]')).toEqual({ exists: false, up: false, addresses: [] });
    expect(parseIpAddr('')).toEqual({ exists: false, up: false, addresses: [] });
  });

  it('reads routes: host routes get their length, sources are kept, default is not ours', () => {
    const v4 = '[{"dst":"10.208.1.0/24","scope":"link","prefsrc":"10.208.0.1","flags":[]},{"dst":"10.208.9.9","flags":[]},{"dst":"default","flags":[]}]';
    expect(parseIpRoutes(v4)).toEqual([{ dst: '10.208.1.0/24', src: '10.208.0.1' }, { dst: '10.208.9.9/32' }]);
    const v6 = '[{"dst":"fd4a:17c2:9e01:0001::/64","protocol":"106","prefsrc":"fd4a:17c2:9e01::1","metric":1024,"flags":[],"pref":"medium"}]';
    expect(parseIpRoutes(v6)).toEqual([{ dst: 'fd4a:17c2:9e01:1::/64', src: 'fd4a:17c2:9e01::1' }]);
  });
});

describe('canonical spellings', () => {
  it.each([
    ['10.208.1.0/24', '10.208.1.0/24'],
    ['FD4A:17C2:9E01:0001:0000:0000:0000:0000/64', 'fd4a:17c2:9e01:1::/64'],
    ['fd00:0:0:1:0:0:0:1/128', 'fd00:0:0:1::1/128'],
    ['10.0.0.1', '10.0.0.1/32'],
    ['fd00::1', 'fd00::1/128'],
  ])('%s is %s', (a, b) => expect(canonicalCidr(a, { bare: true })).toBe(b));

  it.each([
    ['198.18.1.12:51820', '198.18.1.12:51820'],
    ['[FD00:0::7]:1', '[fd00::7]:1'],
    ['198.18.1.12', undefined],
    ['198.18.1.12:0', undefined],
    ['198.18.1.12:70000', undefined],
    ['fd00::7:51820', undefined],
    ['[198.18.1.12]:51820', undefined],
    ['node-2:51820', undefined],
  ])('endpoint %s is %s', (a, b) => expect(canonicalEndpoint(a)).toBe(b));
});
