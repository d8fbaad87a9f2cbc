import { describe, expect, it } from 'vitest';
import { bareAddress, checkNetworkConfig, gatewayOf, hostNumbers, nodeSubnets, parseCidr, replicaAddress, serviceAddress, serviceAddressCount, subnetCount, ulaFromRandom, type NetworkConfigSpec } from './network.js';

const cfg: NetworkConfigSpec = { ipv4: '10.208.0.0/12', ipv6: 'fd4a:17c2:9e01::/48' };

describe('the cluster network plan', () => {
  it('a ULA /48 from 40 random bits', () => {
    expect(ulaFromRandom(Uint8Array.from([0x4a, 0x17, 0xc2, 0x9e, 0x01]))).toBe('fd4a:17c2:9e01::/48');
    expect(ulaFromRandom(Uint8Array.from([0, 0, 1, 0, 0]))).toBe('fd00:1::/48');
  });

  it.each<[number, string, string]>([
    [0, '10.208.0.0/24', 'fd4a:17c2:9e01::/64'],
    [1, '10.208.1.0/24', 'fd4a:17c2:9e01:1::/64'],
    [255, '10.208.255.0/24', 'fd4a:17c2:9e01:ff::/64'],
    [4095, '10.223.255.0/24', 'fd4a:17c2:9e01:fff::/64'],
  ])('node subnet %i is %s and %s', (i, v4, v6) => expect(nodeSubnets(cfg, i)).toEqual({ ipv4: v4, ipv6: v6 }));

  it('4096 node subnets in a /12 of /24s; a /26 per node makes more', () => {
    expect(subnetCount(cfg)).toBe(4096);
    expect(subnetCount({ ...cfg, subnetBits4: 26 })).toBe(16384);
    expect(() => nodeSubnets(cfg, 4096)).toThrow(/outside the cluster's 4096 subnets/);
  });

  it('a replica address: the same host number in both families; the gateway is the first host', () => {
    const s = nodeSubnets(cfg, 3);
    expect(replicaAddress(s, 5)).toEqual({ ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' });
    expect(replicaAddress(s, 254)).toEqual({ ipv4: '10.208.3.254/24', ipv6: 'fd4a:17c2:9e01:3::fe/64' });
    expect(hostNumbers(s.ipv4)).toEqual({ first: 2, last: 254 });
    expect(() => replicaAddress(s, 1)).toThrow(/outside 2–254/);
    expect(() => replicaAddress(s, 255)).toThrow(/outside 2–254/);
    expect(gatewayOf('10.208.3.5/24')).toBe('10.208.3.1');
    expect(gatewayOf('fd4a:17c2:9e01:3::5/64')).toBe('fd4a:17c2:9e01:3::1');
    expect(bareAddress('10.208.3.5/24')).toBe('10.208.3.5');
  });

  it('service addresses: services4 (default 10.207.0.0/16, apart from the node subnets) and the ULA :ffff::/64', () => {
    expect(serviceAddress(cfg, 1)).toEqual({ ipv4: '10.207.0.1', ipv6: 'fd4a:17c2:9e01:ffff::1' });
    expect(serviceAddress(cfg, 300)).toEqual({ ipv4: '10.207.1.44', ipv6: 'fd4a:17c2:9e01:ffff::12c' });
    expect(serviceAddressCount(cfg)).toBe(65534);
    expect(() => serviceAddress(cfg, 0)).toThrow(/outside 1–65534/);
    expect(() => checkNetworkConfig({ ...cfg, services4: '10.210.0.0/16' })).toThrow(/overlaps the node subnets' range/);
  });

  it('refuses ranges that are not what they claim', () => {
    expect(() => parseCidr('10.208.0.1/12')).toThrow(/host bits are set \(the network is 10\.208\.0\.0\/12\)/);
    expect(() => parseCidr('10.208.0.0')).toThrow(/not an address with its prefix length/);
    expect(() => checkNetworkConfig({ ...cfg, ipv6: '2001:db8::/48' })).toThrow(/not an IPv6 unique local range/);
    expect(() => checkNetworkConfig({ ...cfg, subnetBits4: 31 })).toThrow(/subnetBits4 31/);
    expect(() => checkNetworkConfig(cfg)).not.toThrow();
  });
});
