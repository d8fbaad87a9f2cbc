import { describe, expect, it } from 'vitest';
import { defaultRouteInterface, interfaceAddress, onlyAddress } from './address.js';
import { simulatedAddress } from '../../src/supervise/local-cluster.js';

const ROUTES = `Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth1\t0002000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
`;

describe('node address', () => {
  it('the default route interface, and its IPv4 address', () => {
    expect(defaultRouteInterface(ROUTES)).toBe('eth0');
    expect(defaultRouteInterface(ROUTES.split('\n').slice(0, 2).join('\n'))).toBeUndefined();
    const ifaces = { eth0: [{ address: 'fe80::1', family: 'IPv6' }, { address: '192.0.2.7', family: 'IPv4' }] } as never;
    expect(interfaceAddress('eth0', ifaces)).toBe('192.0.2.7');
    expect(interfaceAddress('eth9', ifaces)).toBeUndefined();
  });

  it.each<[string, Record<string, { address: string; family: string; internal: boolean }[]>, string | undefined]>([
    ['its one address', { lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }], eth0: [{ address: '198.18.1.11', family: 'IPv4', internal: false }] }, '198.18.1.11'],
    [
      'the first by interface name, never an interface jaco made (the overlay, a replica veth)',
      { 'jaco-wg': [{ address: '10.209.0.1', family: 'IPv4', internal: false }], veth9: [{ address: '10.208.0.1', family: 'IPv4', internal: false }], ens5: [{ address: '192.0.2.9', family: 'IPv4', internal: false }], eth1: [{ address: '192.0.2.10', family: 'IPv4', internal: false }] },
      '192.0.2.9',
    ],
    ['IPv6 only, or loopback only: none', { lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }], eth0: [{ address: 'fd00::1', family: 'IPv6', internal: false }] }, undefined],
  ])('no default route: %s', (_n, ifaces, want) => {
    expect(onlyAddress(ifaces as never, (i) => i === 'jaco-wg' || i.startsWith('veth'))).toBe(want);
  });

  it.each([
    [1, '127.0.1.1'],
    [3, '127.0.1.3'],
    [254, '127.0.1.254'],
    [255, '127.0.2.1'],
  ])('simulated node %i is at %s', (i, a) => expect(simulatedAddress(i)).toBe(a));
});
