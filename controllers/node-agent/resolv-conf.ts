// The upstream resolvers of the node's DNS server: the `nameserver` lines of a resolv.conf (the
// host's), less the server's own addresses, so that it never forwards a query to itself.
import { BlockList, isIP } from 'node:net';

export interface Upstream {
  address: string;
  port: number;
}

export interface ListenAddress {
  address: string;
  port: number;
}

/** glibc reads at most this many nameserver lines (MAXNS); the host's own resolver uses no more. */
export const MAX_NAMESERVERS = 3;

export interface ResolvConfUpstreams {
  upstreams: Upstream[];
  /** Lines left out, and why (not an address, one of our own, past the third). */
  ignored: { line: string; why: string }[];
}

/**
 * The upstreams named by a resolv.conf's text. glibc's rules: `#` or `;` starts a comment, the
 * first three nameservers count, the port is always 53. A nameserver that is one of `listening`
 * (or any loopback address when the server listens on a wildcard address) is left out: forwarding
 * to it would loop.
 */
export function upstreamsFromResolvConf(text: string, listening: readonly ListenAddress[]): ResolvConfUpstreams {
  const own = ownAddresses(listening.filter((l) => l.port === 53));
  const upstreams: Upstream[] = [];
  const ignored: ResolvConfUpstreams['ignored'] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    const [keyword, address] = line.split(/\s+/);
    if (keyword !== 'nameserver') continue;
    const family = address ? isIP(address.replace(/%.*$/, '')) : 0;
    if (!address || family === 0) ignored.push({ line: raw.trim(), why: 'not an IP address' });
    else if (own.check(address.replace(/%.*$/, ''), family === 4 ? 'ipv4' : 'ipv6')) ignored.push({ line: raw.trim(), why: 'this server itself' });
    else if (upstreams.length >= MAX_NAMESERVERS) ignored.push({ line: raw.trim(), why: `past the first ${MAX_NAMESERVERS} nameservers` });
    else upstreams.push({ address, port: 53 });
  }
  return { upstreams, ignored };
}

function ownAddresses(listening: readonly ListenAddress[]): BlockList {
  const own = new BlockList();
  for (const { address } of listening) {
    const family = isIP(address) === 6 ? 'ipv6' : 'ipv4';
    if (address === '0.0.0.0' || address === '::') {
      // A wildcard listener answers on every local address; loopback ones are the ones a
      // resolv.conf names (systemd-resolved's 127.0.0.53, dnsmasq's 127.0.0.1).
      own.addSubnet('127.0.0.0', 8, 'ipv4');
      own.addAddress('::1', 'ipv6');
      own.addAddress(address, family);
    } else {
      own.addAddress(address, family);
    }
  }
  return own;
}
