// jaco's one parser and printer of addresses (src/api/network.ts): a replica's addresses as the kernel spells them: the gateway of each prefix, canonical CIDRs and
// bare addresses, and what is not an address with its prefix length.
import { describe, expect, it } from 'vitest';
import { bareAddress, canonicalCidr, gatewayOf, joinHostPort, parseAddressPrefix, splitHostPort } from './network.js';

describe('gatewayOf: the first host of the prefix', () => {
  it.each([
    ['10.208.3.5/24', '10.208.3.1'],
    ['10.208.3.1/24', '10.208.3.1'],
    ['10.208.3.200/25', '10.208.3.129'],
    ['10.208.0.77/16', '10.208.0.1'],
    ['192.168.7.9/30', '192.168.7.9'],
    // No host left for a gateway: it lies outside the prefix, and the plugin refuses it.
    ['10.208.3.5/32', '10.208.3.6'],
    ['fd4a:17c2:9e01:3::5/64', 'fd4a:17c2:9e01:3::1'],
    ['fd4a:17c2:9e01:0003:0000::abcd/64', 'fd4a:17c2:9e01:3::1'],
    ['fd4a:17c2:9e01:3:ffff:ffff:ffff:fffe/64', 'fd4a:17c2:9e01:3::1'],
    ['fd4a:17c2:9e01:300::7/56', 'fd4a:17c2:9e01:300::1'],
    ['fd00::9/128', 'fd00::a'],
  ])('%s → %s', (cidr, gw) => expect(gatewayOf(cidr)).toBe(gw));
});

describe('addresses in canonical form (as `ip` prints them)', () => {
  it.each([
    ['10.208.3.5/24', '10.208.3.5/24', '10.208.3.5'],
    ['fd4a:17c2:9e01:0003:0000:0000:0000:0005/64', 'fd4a:17c2:9e01:3::5/64', 'fd4a:17c2:9e01:3::5'],
    ['FD4A:17C2::1:0:0:5/64', 'fd4a:17c2::1:0:0:5/64', 'fd4a:17c2::1:0:0:5'],
    ['fd4a:0:0:1:0:0:0:5/64', 'fd4a:0:0:1::5/64', 'fd4a:0:0:1::5'],
  ])('%s → %s', (cidr, canonical, bare) => {
    expect(canonicalCidr(cidr)).toBe(canonical);
    expect(bareAddress(cidr)).toBe(bare);
  });

  it.each(['10.208.3.5', '10.208.3.5/33', '10.208.3/24', 'fd4a::5/129', 'fd4a::5/', 'fd4a::1::5/64', 'nonsense/8', '10.208.3.5/2x'])('refuses %s', (bad) => expect(() => parseAddressPrefix(bad)).toThrow(/not an address with its prefix length/));
});

describe('host:port, IPv6 in brackets (splitHostPort, joinHostPort)', () => {
  it.each<[string, { host: string; port: number } | undefined]>([
    ['127.0.0.1:8090', { host: '127.0.0.1', port: 8090 }],
    ['localhost:0', { host: 'localhost', port: 0 }],
    ['[fd00::7]:51820', { host: 'fd00::7', port: 51820 }],
    // Unbracketed IPv6 is ambiguous (is the last group the port?): refused.
    ['fd00::7:51820', undefined],
    ['127.0.0.1', undefined],
    ['127.0.0.1:70000', undefined],
    ['[fd00::7]', undefined],
    [':8090', undefined],
  ])('%s', (text, parts) => {
    expect(splitHostPort(text)).toEqual(parts);
    if (parts) expect(splitHostPort(joinHostPort(parts.host, parts.port))).toEqual(parts);
  });
});
