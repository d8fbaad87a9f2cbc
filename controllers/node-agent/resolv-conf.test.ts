import { describe, expect, it } from 'vitest';
import { upstreamsFromResolvConf, type ListenAddress } from './resolv-conf.js';

const NODE: ListenAddress[] = [
  { address: '10.208.0.1', port: 53 },
  { address: 'fd12:3456:789a:ffff::1', port: 53 },
];

describe('upstreams from a resolv.conf', () => {
  it.each([
    ['one nameserver', 'nameserver 192.0.2.53\n', NODE, ['192.0.2.53']],
    ['none', 'search example.com\noptions ndots:2\n', NODE, []],
    ['an empty file', '', NODE, []],
    ['comments, blank lines, tabs and a trailing comment', '# generated\n; also a comment\n\nnameserver\t192.0.2.1  # the router\n  nameserver 192.0.2.2\n', NODE, ['192.0.2.1', '192.0.2.2']],
    ['a commented-out nameserver', '#nameserver 192.0.2.9\nnameserver 192.0.2.1\n', NODE, ['192.0.2.1']],
    ['IPv6, and a link-local one with its zone', 'nameserver 2001:db8::53\nnameserver fe80::1%eth0\n', NODE, ['2001:db8::53', 'fe80::1%eth0']],
    ['systemd-resolved', 'nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n', NODE, ['127.0.0.53']],
    ['the first three, as glibc', 'nameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\nnameserver 192.0.2.4\n', NODE, ['192.0.2.1', '192.0.2.2', '192.0.2.3']],
    ['not an address', 'nameserver dns.example.com\nnameserver\nnameserver 192.0.2.1\n', NODE, ['192.0.2.1']],
    ['a keyword that only starts like nameserver', 'nameservers 192.0.2.1\n', NODE, []],
    ['CRLF line ends', 'nameserver 192.0.2.1\r\nnameserver 192.0.2.2\r\n', NODE, ['192.0.2.1', '192.0.2.2']],
    // The server's own addresses are left out: forwarding to itself would loop.
    ['its own IPv4 address', 'nameserver 10.208.0.1\nnameserver 192.0.2.1\n', NODE, ['192.0.2.1']],
    ['its own IPv6 address, written another way', 'nameserver fd12:3456:789a:ffff:0:0:0:1\nnameserver 192.0.2.1\n', NODE, ['192.0.2.1']],
    ['its own address but on another port: still an upstream (nameserver lines mean port 53)', 'nameserver 127.0.0.1\n', [{ address: '127.0.0.1', port: 5353 }], ['127.0.0.1']],
    ['a wildcard listener: every loopback address is itself', 'nameserver 127.0.0.53\nnameserver ::1\nnameserver 192.0.2.1\n', [{ address: '0.0.0.0', port: 53 }], ['192.0.2.1']],
    ['an IPv6 wildcard listener too', 'nameserver 127.0.0.1\nnameserver 192.0.2.1\n', [{ address: '::', port: 53 }], ['192.0.2.1']],
    ['its own addresses do not count toward the three', 'nameserver 10.208.0.1\nnameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n', NODE, ['192.0.2.1', '192.0.2.2', '192.0.2.3']],
  ] as const)('%s', (_, text, listening, want) => {
    const got = upstreamsFromResolvConf(text, listening);
    expect(got.upstreams.map((u) => u.address)).toEqual(want);
    expect(got.upstreams.every((u) => u.port === 53)).toBe(true);
  });

  it('says why each nameserver line was left out', () => {
    const text = 'nameserver nope\nnameserver 10.208.0.1\nnameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\nnameserver 192.0.2.4\n';
    expect(upstreamsFromResolvConf(text, NODE).ignored).toEqual([
      { line: 'nameserver nope', why: 'not an IP address' },
      { line: 'nameserver 10.208.0.1', why: 'this server itself' },
      { line: 'nameserver 192.0.2.4', why: 'past the first 3 nameservers' },
    ]);
  });
});
