// The node's DNS server (controllers/node-agent/dns.ts) on real sockets: 127.0.53.x and ::1, UDP and
// TCP, asked by the wire library itself, by Node's resolver (c-ares) and by glibc's (getent, with
// a search list). Every upstream is another instance of the server, or a socket the test holds:
// nothing is ever sent to a real resolver (docs/networking.md; the network rule).
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import dnsPacket, { type Answer, type DecodedPacket, type Packet } from 'dns-packet';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DnsBindError, DnsServer, type DnsServerOptions, type ListenAddress, type NameTableInput } from '../../controllers/node-agent/dns.js';
import { dnsMetrics } from '../../controllers/node-agent/metrics.js';

type Decoded = DecodedPacket & { rcode: string };

const SHOP: NameTableInput = {
  names: {
    'web.shop': { ipv4: ['10.208.0.7'], ipv6: ['fd12:3456:789a:ffff::7'] },
    'db.shop': { ipv4: ['10.208.0.8'], ipv6: [] },
    'web.blog': { ipv4: ['10.208.1.7'], ipv6: ['fd12:3456:789a:fffe::7'] },
    'big.shop': { ipv4: Array.from({ length: 100 }, (_, i) => `10.208.2.${i}`), ipv6: [] },
  },
  zones: ['shop', 'blog'],
};

/** Somewhere else's names, served by a second instance acting as the upstream. */
const ELSEWHERE: NameTableInput = {
  names: {
    'example.org': { ipv4: ['192.0.2.10'], ipv6: ['2001:db8::10'] },
    elsewhere: { ipv4: ['192.0.2.11'], ipv6: [] },
    'huge.example.org': { ipv4: Array.from({ length: 100 }, (_, i) => `192.0.2.${i}`), ipv6: [] },
  },
  zones: ['example.org'],
};

const servers: DnsServer[] = [];
async function serve(opts: DnsServerOptions, names?: NameTableInput): Promise<DnsServer> {
  const s = new DnsServer(opts);
  await s.start();
  servers.push(s);
  if (names) s.setNames(names);
  return s;
}
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

const upstreamOf = (s: DnsServer) => s.addresses.map((a) => ({ address: a.address, port: a.port }));
let nextId = 1;
const query = (name: string, type = 'A', extra: Partial<Packet> = {}): Packet => ({ type: 'query', id: nextId++, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: type as never }], ...extra });
const EDNS: Answer = { type: 'OPT', name: '.', udpPayloadSize: 1232, ednsVersion: 0, extendedRcode: 0, flags: 0, flag_do: false, options: [] };

/** One datagram to the server and its answer, or undefined when none comes within `ms`. */
function udp(to: ListenAddress, msg: Packet | Buffer, ms = 2000): Promise<Decoded | undefined> {
  return new Promise((resolve, reject) => {
    const socket = dgram.createSocket(net.isIPv6(to.address) ? 'udp6' : 'udp4');
    const timer = setTimeout(() => finish(undefined), ms);
    const finish = (p: Decoded | undefined, e?: Error) => {
      clearTimeout(timer);
      socket.close();
      if (e) reject(e);
      else resolve(p);
    };
    socket.on('message', (m) => {
      try {
        finish(dnsPacket.decode(m) as Decoded);
      } catch (e) {
        finish(undefined, e as Error);
      }
    });
    socket.send(Buffer.isBuffer(msg) ? msg : dnsPacket.encode(msg), to.port, to.address);
  });
}

/** Messages over one TCP connection (Packets framed; Buffers sent as they are); the answers in the order they come, once enough came. */
function tcp(to: ListenAddress, msgs: (Packet | Buffer)[], enough: number | ((got: Decoded[]) => boolean) = msgs.length, ms = 2000): Promise<Decoded[]> {
  const done = typeof enough === 'number' ? (got: Decoded[]) => got.length >= enough : enough;
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: to.address, port: to.port });
    const got: Decoded[] = [];
    let pending = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`${got.length} answers over TCP in ${ms} ms, not enough`));
    }, ms);
    socket.on('error', reject);
    socket.on('connect', () => socket.write(Buffer.concat(msgs.map((m) => (Buffer.isBuffer(m) ? m : dnsPacket.streamEncode(m))))));
    socket.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        got.push(dnsPacket.decode(pending.subarray(2, 2 + pending.readUInt16BE(0))) as Decoded);
        pending = pending.subarray(2 + pending.readUInt16BE(0));
      }
      if (done(got)) {
        clearTimeout(timer);
        socket.destroy();
        resolve(got);
      }
    });
  });
}

const data = (p: Decoded | undefined) => (p?.answers ?? []).map((a) => (a as { data: string }).data);
const resolver = (s: DnsServer, i = 0) => {
  const r = new Resolver({ timeout: 1000, tries: 1 });
  const a = s.addresses[i]!;
  r.setServers([net.isIPv6(a.address) ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`]);
  return r;
};
const errorCode = (p: Promise<unknown>) => p.then(
  () => 'resolved',
  (e: NodeJS.ErrnoException) => e.code,
);

async function counted(outcome: string, transport?: string): Promise<number> {
  const { values } = await dnsMetrics.queries.get();
  return values.filter((v) => v.labels.outcome === outcome && (!transport || v.labels.transport === transport)).reduce((n, v) => n + v.value, 0);
}

/** Upstream failures counted so far, by reason (timeout, error, bad_answer, declined). */
const failures = async (reason: string) => (await dnsMetrics.upstreamFailures.get()).values.find((v) => v.labels.reason === reason)?.value ?? 0;

/** Whether a promise has settled yet (checked after the event loop ran what was ready). */
function settledFlag(p: Promise<unknown>): () => boolean {
  let done = false;
  void p.finally(() => (done = true));
  return () => done;
}

// No assert here measures how fast something was: each says by what mechanism an answer came (a
// counter, which of two queries settled first, a timeout set far beyond the test's own), so a slow
// machine cannot fail them and a regression that waits for a timeout cannot pass them.

describe('answers from the table', () => {
  let s: DnsServer;
  beforeAll(async () => {
    s = await serve({ listen: [{ address: '127.0.53.1', port: 0 }, { address: '::1', port: 0 }] }, SHOP);
  });

  it('binds UDP and TCP on each address, one port for both', () => {
    expect(s.addresses).toHaveLength(2);
    expect(s.addresses.map((a) => a.address)).toEqual(['127.0.53.1', '::1']);
    expect(s.addresses.every((a) => a.port > 0)).toBe(true);
  });

  it.each([
    ['IPv4', 0],
    ['IPv6', 1],
  ])('A and AAAA over UDP and TCP, on %s, authoritative, TTL 5 s', async (_, i) => {
    const at = s.addresses[i]!;
    for (const [type, want] of [
      ['A', ['10.208.0.7']],
      ['AAAA', ['fd12:3456:789a:ffff::7']],
    ] as const) {
      const overUdp = await udp(at, query('web.shop', type));
      const [overTcp] = await tcp(at, [query('Web.Shop.', type)]);
      for (const p of [overUdp!, overTcp!]) {
        expect(p).toMatchObject({ type: 'response', rcode: 'NOERROR', flag_aa: true, flag_tc: false });
        expect(data(p)).toEqual(want);
        expect(p.answers!.every((a) => (a as { ttl: number }).ttl === 5)).toBe(true);
      }
      expect(overTcp!.answers![0]!.name).toBe('Web.Shop'); // the name as asked
    }
  });

  it('NODATA for a name without the type asked, NXDOMAIN under a deployment it knows, at once', async () => {
    const at = s.addresses[0]!;
    const nodata = await udp(at, query('db.shop', 'AAAA'));
    expect(nodata).toMatchObject({ rcode: 'NOERROR', flag_aa: true, answers: [] });
    const forwarded = await counted('forwarded');
    for (const name of ['nope.shop', 'x.web.shop', 'NOPE.BLOG']) {
      const nx = await udp(at, query(name, 'A'), 1000);
      expect(nx, name).toMatchObject({ rcode: 'NXDOMAIN', flag_aa: true, answers: [] });
    }
    // Answered from the table: nothing was forwarded.
    expect(await counted('forwarded')).toBe(forwarded);
  });

  it('SERVFAIL at once for any other name when no upstream is configured: nothing leaves the machine', async () => {
    const before = await counted('servfail');
    const p = await udp(s.addresses[0]!, query('example.com'), 1000);
    expect(p).toMatchObject({ rcode: 'SERVFAIL', flag_ra: false });
    expect(await counted('servfail')).toBe(before + 1);
  });

  it("Node's own resolver (c-ares) resolves through it, over IPv4 and IPv6", async () => {
    for (const i of [0, 1]) {
      const r = resolver(s, i);
      expect(await r.resolve4('web.shop')).toEqual(['10.208.0.7']);
      expect(await r.resolve6('web.blog')).toEqual(['fd12:3456:789a:fffe::7']);
      expect(await r.resolve4('web.shop', { ttl: true })).toEqual([{ address: '10.208.0.7', ttl: 5 }]);
      expect(await errorCode(r.resolve4('nope.shop'))).toBe('ENOTFOUND');
      expect(await errorCode(r.resolve6('db.shop'))).toBe('ENODATA');
    }
  });

  it('a table replaced with setNames answers from the next query on', async () => {
    const at = s.addresses[0]!;
    const other = await serve({ listen: [{ address: '127.0.53.3', port: 0 }] }, SHOP);
    const at2 = other.addresses[0]!;
    expect(data(await udp(at2, query('web.shop')))).toEqual(['10.208.0.7']);
    other.setNames({ names: { 'web.shop': { ipv4: ['10.208.0.70', '10.208.0.71'], ipv6: [] }, 'new.shop': { ipv4: ['10.208.0.9'], ipv6: [] } }, zones: ['shop'] });
    expect(data(await udp(at2, query('web.shop')))).toEqual(['10.208.0.70', '10.208.0.71']);
    expect(data(await udp(at2, query('new.shop')))).toEqual(['10.208.0.9']);
    expect((await udp(at2, query('db.shop')))!.rcode).toBe('NXDOMAIN');
    // A zone dropped from the table is no longer answered for.
    other.setNames({ names: {}, zones: [] });
    expect((await udp(at2, query('new.shop')))!.rcode).toBe('SERVFAIL');
    // The first server's table is its own.
    expect(data(await udp(at, query('web.shop')))).toEqual(['10.208.0.7']);
  });

  it('reports names it left out of the table, and answers the rest', async () => {
    const other = await serve({ listen: [{ address: '127.0.53.4', port: 0 }] });
    const rejected = other.setNames({ names: { 'ok.shop': { ipv4: ['10.208.0.1'], ipv6: [] }, 'bad..shop': { ipv4: ['10.208.0.2'], ipv6: [] } }, zones: ['shop'] });
    expect(rejected.map((r) => r.name)).toEqual(['bad..shop']);
    expect(data(await udp(other.addresses[0]!, query('ok.shop')))).toEqual(['10.208.0.1']);
  });

  it('answers several queries pipelined on one TCP connection', async () => {
    const answers = await tcp(s.addresses[0]!, [query('web.shop'), query('db.shop'), query('nope.shop')]);
    expect(answers.map((a) => a.rcode).sort()).toEqual(['NOERROR', 'NOERROR', 'NXDOMAIN']);
  });
});

describe('large answers: TC over UDP, then TCP', () => {
  let s: DnsServer;
  let front: DnsServer;
  beforeAll(async () => {
    s = await serve({ listen: [{ address: '127.0.53.5', port: 0 }] }, { names: { ...SHOP.names, ...ELSEWHERE.names }, zones: ['shop', 'example.org'] });
    front = await serve({ listen: [{ address: '127.0.53.6', port: 0 }], upstreams: upstreamOf(s) }, SHOP);
  });

  it('sets the TC bit with no records when the answer exceeds 512 bytes (no EDNS) or 1232 (EDNS); TCP carries it whole', async () => {
    const at = s.addresses[0]!;
    const before = (await dnsMetrics.truncated.get()).values[0]?.value ?? 0;
    for (const extra of [{}, { additionals: [EDNS] }]) {
      const cut = await udp(at, query('big.shop', 'A', extra));
      expect(cut).toMatchObject({ rcode: 'NOERROR', flag_tc: true, answers: [] });
    }
    expect((await dnsMetrics.truncated.get()).values[0]!.value).toBe(before + 2);
    // A small answer to an EDNS query is not cut, and carries an OPT.
    const small = await udp(at, query('web.shop', 'A', { additionals: [EDNS] }));
    expect(small).toMatchObject({ flag_tc: false, additionals: [{ type: 'OPT', udpPayloadSize: 1232 }] });
    const [whole] = await tcp(at, [query('big.shop')]);
    expect(whole).toMatchObject({ flag_tc: false });
    expect(data(whole).sort()).toEqual([...(SHOP.names as unknown as Record<string, { ipv4: string[] }>)['big.shop']!.ipv4].sort());
  });

  it("Node's resolver gets all 100 addresses: it retries over TCP after the TC bit", async () => {
    expect(await resolver(s).resolve4('big.shop')).toHaveLength(100);
  });

  it('a forwarded large answer: the forwarder retries its upstream over TCP, and cuts it for a UDP client', async () => {
    // Both instances count in one registry: the upstream's answers are `answered`, the front's `forwarded`.
    const upstreamOverTcp = await counted('answered', 'tcp');
    const cut = await udp(front.addresses[0]!, query('huge.example.org'));
    expect(cut).toMatchObject({ rcode: 'NOERROR', flag_tc: true, answers: [] });
    expect(await counted('answered', 'tcp')).toBe(upstreamOverTcp + 1); // the front asked again over TCP
    const [whole] = await tcp(front.addresses[0]!, [query('huge.example.org')]);
    expect(data(whole)).toHaveLength(100);
    expect(await resolver(front).resolve4('huge.example.org')).toHaveLength(100);
  });
});

describe('forwarding', () => {
  let upstream: DnsServer;
  let front: DnsServer;
  beforeAll(async () => {
    // The upstream: a second instance on another loopback address, answering for example.org.
    upstream = await serve({ listen: [{ address: '127.0.53.7', port: 0 }, { address: '::1', port: 0 }] }, ELSEWHERE);
    front = await serve({ listen: [{ address: '127.0.53.8', port: 0 }], upstreams: upstreamOf(upstream).slice(0, 1), forwardTimeoutMs: 300 }, SHOP);
  });

  it("relays the upstream's answer with the client's id, over UDP and TCP, and counts it", async () => {
    const at = front.addresses[0]!;
    const before = await counted('forwarded');
    const durations = (await dnsMetrics.forwardDuration.get()).values.find((v) => v.metricName?.endsWith('_count') && v.labels.outcome === 'forwarded')?.value ?? 0;
    const q = query('example.org', 'AAAA');
    const overUdp = await udp(at, q);
    expect(overUdp).toMatchObject({ id: q.id, rcode: 'NOERROR', flag_aa: true, questions: [{ name: 'example.org', type: 'AAAA' }] });
    expect(data(overUdp)).toEqual(['2001:db8::10']);
    const [overTcp] = await tcp(at, [query('example.org')]);
    expect(data(overTcp)).toEqual(['192.0.2.10']);
    // The upstream's own NXDOMAIN comes back as it is.
    expect((await udp(at, query('nope.example.org')))!.rcode).toBe('NXDOMAIN');
    // Table names are still answered by the front, never asked upstream.
    expect(data(await udp(at, query('web.shop')))).toEqual(['10.208.0.7']);
    expect(await counted('forwarded')).toBe(before + 3);
    expect((await dnsMetrics.forwardDuration.get()).values.find((v) => v.metricName?.endsWith('_count') && v.labels.outcome === 'forwarded')!.value).toBe(durations + 3);
    expect(await resolver(front).resolve4('example.org')).toEqual(['192.0.2.10']);
  });

  it('to an IPv6 upstream too', async () => {
    const v6 = await serve({ listen: [{ address: '127.0.53.9', port: 0 }], upstreams: upstreamOf(upstream).slice(1) }, SHOP);
    expect(v6.upstreams[0]!.address).toBe('::1');
    expect(data(await udp(v6.addresses[0]!, query('example.org')))).toEqual(['192.0.2.10']);
  });

  it('SERVFAIL when the upstream refuses (a closed port), at once', async () => {
    const closed = await freeUdpPort('127.0.53.10');
    // A forward timeout far beyond the client's: only a refusal seen at once can answer in time.
    const s = await serve({ listen: [{ address: '127.0.53.11', port: 0 }], upstreams: [{ address: '127.0.53.10', port: closed }], forwardTimeoutMs: 120_000 }, SHOP);
    const [timeouts, errors] = [await failures('timeout'), await failures('error')];
    expect(await udp(s.addresses[0]!, query('example.org'), 10_000)).toMatchObject({ rcode: 'SERVFAIL', flag_ra: true });
    expect(await failures('error')).toBe(errors + 1);
    expect(await failures('timeout')).toBe(timeouts);
  });

  it('SERVFAIL when the upstream cannot be connected to at all (the broadcast address: EACCES, nothing sent), and the server answers on', async () => {
    const s = await serve({ listen: [{ address: '127.0.53.14', port: 0 }], upstreams: [{ address: '255.255.255.255', port: 53 }], forwardTimeoutMs: 5000 }, SHOP);
    expect(await udp(s.addresses[0]!, query('example.org'))).toMatchObject({ rcode: 'SERVFAIL' });
    expect(data(await udp(s.addresses[0]!, query('web.shop')))).toEqual(['10.208.0.7']);
  });

  it('SERVFAIL when the upstream never answers, after the timeout; table answers meanwhile are not held up', async () => {
    const hole = await blackhole('127.0.53.12');
    const s = await serve({ listen: [{ address: '127.0.53.13', port: 0 }], upstreams: [hole], forwardTimeoutMs: 1500 }, SHOP);
    const at = s.addresses[0]!;
    const timeouts = await failures('timeout');
    const slow = udp(at, query('example.org'), 4000);
    const slowDone = settledFlag(slow);
    await until(() => hole.received() === 1);
    const quick = await udp(at, query('web.shop'));
    expect(data(quick)).toEqual(['10.208.0.7']);
    expect(slowDone()).toBe(false); // the table answered while the forward was still waiting
    expect(await slow).toMatchObject({ rcode: 'SERVFAIL' });
    expect(await failures('timeout')).toBe(timeouts + 1);
    expect(hole.received()).toBe(1);
  });

  it('tries each upstream in turn: a silent one, a refusing one, then one that answers', async () => {
    const hole = await blackhole('127.0.53.14');
    const closed = { address: '127.0.53.15', port: await freeUdpPort('127.0.53.15') };
    const s = await serve({ listen: [{ address: '127.0.53.16', port: 0 }], upstreams: [hole, closed, upstreamOf(upstream)[0]!], forwardTimeoutMs: 300 }, SHOP);
    const [timeouts, errors] = [await failures('timeout'), await failures('error')];
    expect(data(await udp(s.addresses[0]!, query('example.org')))).toEqual(['192.0.2.10']);
    expect(await failures('timeout')).toBe(timeouts + 1);
    expect(await failures('error')).toBe(errors + 1);
  });

  it('asks the next upstream when one answers SERVFAIL, and relays that SERVFAIL when none does better', async () => {
    // An instance with no upstream of its own answers SERVFAIL for names it does not hold.
    const lost = await serve({ listen: [{ address: '127.0.53.17', port: 0 }] });
    const declined = async () => (await dnsMetrics.upstreamFailures.get()).values.find((v) => v.labels.reason === 'declined')?.value ?? 0;
    const before = await declined();
    const s = await serve({ listen: [{ address: '127.0.53.18', port: 0 }], upstreams: [...upstreamOf(lost), upstreamOf(upstream)[0]!] }, SHOP);
    expect(data(await udp(s.addresses[0]!, query('example.org')))).toEqual(['192.0.2.10']);
    expect(await declined()).toBe(before + 1);
    const only = await serve({ listen: [{ address: '127.0.53.19', port: 0 }], upstreams: upstreamOf(lost) }, SHOP);
    const forwarded = await counted('forwarded');
    // The upstream's own SERVFAIL, as it came: RA clear, as that instance has no upstream.
    expect(await udp(only.addresses[0]!, query('example.org'))).toMatchObject({ rcode: 'SERVFAIL', flag_ra: false });
    expect(await counted('forwarded')).toBe(forwarded + 1);
  });

  it('SERVFAIL at once past maxForwards in flight', async () => {
    const hole = await blackhole('127.0.53.20');
    const s = await serve({ listen: [{ address: '127.0.53.21', port: 0 }], upstreams: [hole], forwardTimeoutMs: 2000, maxForwards: 1 }, SHOP);
    const at = s.addresses[0]!;
    const first = udp(at, query('one.example.org'), 4000);
    await until(() => hole.received() === 1);
    const firstDone = settledFlag(first);
    expect(await udp(at, query('two.example.org'))).toMatchObject({ rcode: 'SERVFAIL' });
    // Refused without being forwarded, while the first still waits on its upstream.
    expect(firstDone()).toBe(false);
    expect(hole.received()).toBe(1);
    expect(await first).toMatchObject({ rcode: 'SERVFAIL' });
  });

  it('takes its upstreams from a resolv.conf, leaving itself out, and follows the file when it changes', async () => {
    // nameserver lines mean port 53: the upstreams listen there, on loopback addresses of their own.
    await serve({ listen: [{ address: '127.0.53.22', port: 53 }] }, { names: { 'moving.example.org': { ipv4: ['192.0.2.22'], ipv6: [] } }, zones: [] });
    await serve({ listen: [{ address: '127.0.53.23', port: 53 }] }, { names: { 'moving.example.org': { ipv4: ['192.0.2.23'], ipv6: [] } }, zones: [] });
    const dir = mkdtempSync(join(tmpdir(), 'jaco-dns-'));
    try {
      const file = join(dir, 'resolv.conf');
      writeFileSync(file, '# the host\nnameserver 127.0.53.24\nnameserver 127.0.53.22\nsearch example.org\n');
      const s = await serve({ listen: [{ address: '127.0.53.24', port: 53 }], resolvConf: file, resolvConfRefreshMs: 100 }, SHOP);
      expect(s.upstreams).toEqual([{ address: '127.0.53.22', port: 53 }]);
      expect(data(await udp(s.addresses[0]!, query('moving.example.org')))).toEqual(['192.0.2.22']);
      writeFileSync(file, 'nameserver 127.0.53.23\n');
      await until(async () => data(await udp(s.addresses[0]!, query('moving.example.org')))[0] === '192.0.2.23');
      expect(s.upstreams).toEqual([{ address: '127.0.53.23', port: 53 }]);
      // A file that goes away is a host without resolvers: SERVFAIL, nothing sent anywhere.
      rmSync(file);
      await until(async () => (await udp(s.addresses[0]!, query('moving.example.org')))?.rcode === 'SERVFAIL');
      expect(s.upstreams).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('robustness', () => {
  let s: DnsServer;
  const lines: { msg: string; dropped?: number }[] = [];
  beforeAll(async () => {
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    s = await serve({ listen: [{ address: '127.0.53.25', port: 0 }], tcpIdleMs: 300, log }, SHOP);
  });

  it('drops malformed packets over UDP and TCP, counts each, and keeps answering (the same TCP connection too)', async () => {
    const at = s.addresses[0]!;
    const before = await counted('malformed');
    const good = dnsPacket.encode(query('web.shop'));
    const lying = Buffer.from(good);
    lying.writeUInt16BE(5, 4); // claims five questions
    const bad = [
      Buffer.from([1, 2, 3]), // shorter than a header
      Buffer.alloc(12, 0xff), // a header whose counts run past the end
      lying,
      good.subarray(0, good.length - 3), // cut in the middle of the question
      Buffer.concat([good.subarray(0, 12), Buffer.from([0xc0, 0x0c, 0, 1, 0, 1])]), // a name that points at itself
      dnsPacket.encode({ type: 'response', id: 9, questions: [{ name: 'web.shop', type: 'A' }] }), // an answer, not a question
    ];
    for (const b of bad) expect(await udp(at, b, 200)).toBeUndefined();
    expect(data(await udp(at, query('web.shop')))).toEqual(['10.208.0.7']);
    // Over TCP: garbage framed like a message, then a real query on the same connection.
    const framedGarbage = Buffer.concat([Buffer.from([0, 3]), Buffer.from([9, 9, 9])]);
    const [answer] = await tcp(at, [framedGarbage, query('db.shop')], 1);
    expect(data(answer)).toEqual(['10.208.0.8']);
    expect(await counted('malformed')).toBe(before + bad.length + 1);
    // Logged once in a while, not once a packet: the first one now, the rest counted for later.
    expect(lines.filter((l) => l.msg === 'malformed DNS messages dropped')).toMatchObject([{ dropped: 1 }]);
  });

  it('survives 2,000 mutated queries (seeded), over UDP and TCP, and still answers', async () => {
    const at = s.addresses[0]!;
    let seed = 26;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed % n;
    };
    const base = [query('web.shop'), query('nope.shop', 'AAAA', { additionals: [EDNS] }), query('example.org', 'MX')].map((q) => dnsPacket.encode(q));
    const mutants = Array.from({ length: 2000 }, () => {
      const m = Buffer.from(base[rand(base.length)]!);
      for (let k = 1 + rand(4); k > 0; k--) m[rand(m.length)] = rand(256);
      return rand(10) === 0 ? m.subarray(0, rand(m.length)) : m;
    });
    const sender = dgram.createSocket('udp4');
    for (let i = 0; i < mutants.length; i += 50) {
      await Promise.all(mutants.slice(i, i + 50).map((m) => new Promise((r) => sender.send(m, at.port, at.address, r))));
      await new Promise((r) => setTimeout(r, 2));
    }
    sender.close();
    expect(data(await udp(at, query('web.shop')))).toEqual(['10.208.0.7']);
    // Over TCP, 300 of them framed on one connection, then a real query: every message gets its
    // answer or none, and the real one's comes back on that same connection.
    const real = query('db.shop');
    const frame = (m: Buffer) => Buffer.concat([Buffer.from([m.length >> 8, m.length & 0xff]), m]);
    const sent = [...mutants.slice(0, 300).map(frame), dnsPacket.streamEncode(real)];
    const got = await tcp(at, sent, (answers) => answers.some((a) => a.id === real.id));
    expect(data(got.find((a) => a.id === real.id))).toEqual(['10.208.0.8']);
  });

  it('a query split across TCP segments is answered whole', async () => {
    const at = s.addresses[0]!;
    const msg = dnsPacket.streamEncode(query('web.shop'));
    const answer = await new Promise<Decoded>((resolve, reject) => {
      const c = net.connect({ host: at.address, port: at.port, noDelay: true });
      c.on('error', reject);
      c.on('connect', async () => {
        for (const part of [msg.subarray(0, 1), msg.subarray(1, 7), msg.subarray(7)]) {
          c.write(part);
          await new Promise((r) => setTimeout(r, 20));
        }
      });
      c.on('data', (d) => {
        c.destroy();
        resolve(dnsPacket.decode(d.subarray(2)) as Decoded);
      });
    });
    expect(data(answer)).toEqual(['10.208.0.7']);
  });

  it('closes an idle TCP connection', async () => {
    const at = s.addresses[0]!;
    const t0 = performance.now();
    await new Promise<void>((resolve, reject) => {
      const c = net.connect({ host: at.address, port: at.port });
      c.on('error', reject);
      c.on('close', () => resolve());
    });
    // Closed by the idle timer (never before it), not by anything else.
    expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
  });

  it('rejects what it does not serve: several questions (FORMERR), another opcode (NOTIMP), another class (REFUSED)', async () => {
    const at = s.addresses[0]!;
    const two = await udp(at, { type: 'query', id: 77, questions: [{ name: 'web.shop', type: 'A' }, { name: 'db.shop', type: 'A' }] });
    expect(two).toMatchObject({ id: 77, rcode: 'FORMERR', questions: [] });
    expect(await udp(at, query('web.shop', 'A', { flags: 4 << 11 }))).toMatchObject({ rcode: 'NOTIMP' });
    expect(await udp(at, { type: 'query', id: 78, questions: [{ name: 'web.shop', type: 'TXT', class: 'CH' }] })).toMatchObject({ rcode: 'REFUSED' });
  });
});

describe('start and stop', () => {
  it('names the address when it cannot bind, and holds nothing after a failed start', async () => {
    const taken = await serve({ listen: [{ address: '127.0.53.26', port: 0 }] });
    const port = taken.addresses[0]!.port;
    const s = new DnsServer({ listen: [{ address: '127.0.53.27', port }, { address: '127.0.53.26', port }] });
    const e = await s.start().then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e).toBeInstanceOf(DnsBindError);
    expect((e as DnsBindError).message).toMatch(new RegExp(`^DNS server cannot listen on tcp 127\\.0\\.53\\.26:${port}: .*EADDRINUSE`));
    expect(s.addresses).toEqual([]);
    // The first address was let go: another server binds it.
    await serve({ listen: [{ address: '127.0.53.27', port }] });
    // An address that is not this host's (nothing is sent: bind fails locally).
    const foreign = new DnsServer({ listen: [{ address: '192.0.2.1', port: 0 }] });
    await expect(foreign.start()).rejects.toThrow(/^DNS server cannot listen on tcp 192\.0\.2\.1:0: .*EADDRNOTAVAIL/);
    const v6 = new DnsServer({ listen: [{ address: '2001:db8::1', port: 0 }] });
    await expect(v6.start()).rejects.toThrow(/^DNS server cannot listen on tcp \[2001:db8::1\]:0: .*EADDRNOTAVAIL/);
  });

  it('stop ends forwards in flight and lets the ports go; start again serves on them', async () => {
    const hole = await blackhole('127.0.53.28');
    // A forward timeout beyond the test's own: a stop that waited for it would fail the test.
    const s = new DnsServer({ listen: [{ address: '127.0.53.29', port: 0 }], upstreams: [hole], forwardTimeoutMs: 600_000 });
    await s.start();
    const at = { ...s.addresses[0]! };
    const pending = udp(at, query('example.org'), 500);
    await until(() => hole.received() === 1);
    await s.stop();
    expect(await pending).toBeUndefined();
    const again = await serve({ listen: [at] }, SHOP);
    expect(data(await udp(again.addresses[0]!, query('web.shop')))).toEqual(['10.208.0.7']);
  });
});

describe("glibc's resolver with a search list (getent in a mount namespace with its own resolv.conf)", () => {
  // Containers get `search DEPLOYMENT`: a bare SERVICE becomes SERVICE.DEPLOYMENT; a bare name
  // that is not a service gets NXDOMAIN under the deployment at once and is then asked as it is.
  // glibc asks port 53 only, so the server listens on 127.0.53.30:53; the resolv.conf is bind-
  // mounted over /etc/resolv.conf in a private mount namespace (unshare), for getent alone.
  const exec = promisify(execFile);
  let dir: string;
  beforeAll(async () => {
    const upstream = await serve({ listen: [{ address: '127.0.53.31', port: 0 }] }, ELSEWHERE);
    await serve({ listen: [{ address: '127.0.53.30', port: 53 }], upstreams: upstreamOf(upstream) }, SHOP);
    dir = mkdtempSync(join(tmpdir(), 'jaco-dns-glibc-'));
    // glibc's timeout far beyond getent's own (10 s): a query left unanswered fails the test.
    writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.53.30\nsearch shop\noptions timeout:30 attempts:1\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function getent(db: string, name: string): Promise<{ code: number; out: string }> {
    const script = `mount --bind "$1" /etc/resolv.conf && exec getent "$2" "$3"`;
    try {
      const { stdout } = await exec('unshare', ['--mount', 'sh', '-c', script, 'sh', join(dir, 'resolv.conf'), db, name], { timeout: 10_000 });
      return { code: 0, out: stdout };
    } catch (e) {
      const x = e as { code?: number; stdout?: string; stderr?: string };
      if (typeof x.code !== 'number') throw e;
      if (x.stderr) throw new Error(`getent ${db} ${name}: ${x.stderr}`);
      return { code: x.code, out: x.stdout ?? '' };
    }
  }
  const addressesOf = (out: string) => [...new Set(out.trim().split('\n').filter(Boolean).map((l) => l.split(/\s+/)[0]))].sort();

  it('a bare service name resolves in its deployment: db → db.shop', async () => {
    const db = await getent('ahostsv4', 'db');
    expect(db.code).toBe(0);
    expect(addressesOf(db.out)).toEqual(['10.208.0.8']);
    const web = await getent('ahosts', 'web');
    expect(addressesOf(web.out)).toEqual(['10.208.0.7', 'fd12:3456:789a:ffff::7']);
  });

  it('SERVICE.DEPLOYMENT resolves from anywhere', async () => {
    expect(addressesOf((await getent('ahostsv4', 'web.blog')).out)).toEqual(['10.208.1.7']);
  });

  it('a bare name that is no service gets NXDOMAIN under the deployment at once, and is then forwarded as it is', async () => {
    const nx = await counted('nxdomain');
    const servfails = await counted('servfail');
    const r = await getent('ahostsv4', 'elsewhere');
    expect(r.code).toBe(0);
    expect(addressesOf(r.out)).toEqual(['192.0.2.11']);
    expect(await counted('nxdomain')).toBeGreaterThan(nx); // elsewhere.shop, answered by the front itself
    expect(await counted('servfail')).toBe(servfails);
  });

  it('a name found nowhere fails (every query answered: no resolver timeout on the way)', async () => {
    const r = await getent('ahostsv4', 'missing');
    expect(r.code).toBe(2); // getent: key not found
  });
});

/** A free UDP port on `address` (bound, then let go): a datagram sent there is refused. */
async function freeUdpPort(address: string): Promise<number> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, address, () => r()));
  const { port } = s.address();
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** An upstream that takes queries over UDP and TCP and never answers. */
async function blackhole(address: string): Promise<{ address: string; port: number; received: () => number }> {
  const socket = dgram.createSocket('udp4');
  let received = 0;
  socket.on('message', () => received++);
  await new Promise<void>((r) => socket.bind(0, address, () => r()));
  const { port } = socket.address();
  const server = net.createServer((c) => {
    received++;
    c.on('error', () => undefined);
    held.push(c);
  });
  await new Promise<void>((r) => server.listen(port, address, () => r()));
  holes.push(socket, server);
  return { address, port, received: () => received };
}
const holes: (dgram.Socket | net.Server)[] = [];
const held: net.Socket[] = [];
afterAll(() => {
  for (const c of held) c.destroy();
  for (const h of holes) h.close();
});

async function until(ok: () => boolean | Promise<boolean>, ms = 3000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) throw new Error(`not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
