import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import dnsPacket, { type Answer, type DecodedPacket, type Packet } from 'dns-packet';
import { compileNameTable, decideQuery, inZone, normalizeName, servfail, truncated, typeLabel, udpPayloadLimit, type NameTableInput, type QueryContext, type Reply } from './dns-table.js';
import { DNS_OUTCOMES, DNS_UPSTREAM_FAILURES } from '../../src/api/reasons/dns.js';
import { PACKAGE_ROOT } from '../../src/paths.js';

const SHOP: NameTableInput = {
  names: {
    'web.shop': { ipv4: ['10.208.0.7'], ipv6: ['fd12:3456:789a:ffff::7'] },
    'DB.Shop.': { ipv4: ['10.208.0.8'], ipv6: [] },
    'v6only.shop': { ipv4: [], ipv6: ['fd12:3456:789a:ffff::9'] },
    'api.blog': { ipv4: ['10.208.1.2', '10.208.1.3'], ipv6: ['fd12::2'] },
  },
  zones: ['shop', 'blog'],
};
const TABLE = compileNameTable(SHOP).table;
const FWD: QueryContext = { ttl: 5, forwarding: true };
const LOCAL: QueryContext = { ttl: 5, forwarding: false };

type Decoded = DecodedPacket & { rcode: string; opcode: string };

/** A query as the server sees it: encoded by the library, then decoded by it. */
function query(p: Partial<Packet> & { questions?: Packet['questions'] }): Decoded {
  return dnsPacket.decode(dnsPacket.encode({ type: 'query', id: 4242, flags: dnsPacket.RECURSION_DESIRED, ...p })) as Decoded;
}
const ask = (name: string, type = 'A', klass = 'IN', extra: Partial<Packet> = {}) => query({ questions: [{ name, type: type as never, class: klass as never }], ...extra });
const EDNS = (udpPayloadSize: number, ednsVersion = 0): Answer => ({ type: 'OPT', name: '.', udpPayloadSize, ednsVersion, extendedRcode: 0, flags: 0, flag_do: false, options: [] });

/** A reply as a client reads it off the wire. */
function wire(r: Reply): Decoded | undefined {
  return r.kind === 'answer' ? (dnsPacket.decode(dnsPacket.encode(r.packet)) as Decoded) : undefined;
}
const records = (p: Decoded | undefined) => (p?.answers ?? []).map((a) => `${a.name} ${a.type} ${(a as { data: unknown }).data} ttl=${(a as { ttl: number }).ttl}`);

describe('the name table', () => {
  it('normalizes names: lower case, without the trailing dot', () => {
    expect(normalizeName('Web.SHOP.')).toBe('web.shop');
    expect(normalizeName('web.shop')).toBe('web.shop');
    expect(normalizeName('.')).toBe('');
    expect([...TABLE.names.keys()]).toEqual(['web.shop', 'db.shop', 'v6only.shop', 'api.blog']);
  });

  it('leaves out entries the wire cannot carry, or with an address of the wrong family, and keeps the rest', () => {
    const { table, rejected } = compileNameTable({
      names: new Map([
        ['ok.shop', { ipv4: ['10.0.0.1'], ipv6: [] }],
        ['bad..shop', { ipv4: ['10.0.0.1'], ipv6: [] }],
        ['-lead.shop', { ipv4: ['10.0.0.1'], ipv6: [] }],
        [`${'x'.repeat(64)}.shop`, { ipv4: ['10.0.0.1'], ipv6: [] }],
        ['sp ace.shop', { ipv4: ['10.0.0.1'], ipv6: [] }],
        ['v4.shop', { ipv4: ['fd12::1'], ipv6: [] }],
        ['v6.shop', { ipv4: [], ipv6: ['10.0.0.1'] }],
        ['my_db.shop', { ipv4: ['10.0.0.2'], ipv6: [] }],
      ]),
      zones: ['shop', 'bad zone', ''],
    });
    expect([...table.names.keys()]).toEqual(['ok.shop', 'my_db.shop']);
    expect([...table.zones]).toEqual(['shop', '']);
    expect(rejected.map((r) => r.name)).toEqual(['bad..shop', '-lead.shop', `${'x'.repeat(64)}.shop`, 'sp ace.shop', 'v4.shop', 'v6.shop', 'bad zone']);
    expect(rejected.find((r) => r.name === 'v4.shop')?.why).toBe('"fd12::1" is not an IPv4 address');
  });

  it('merges names that differ only in case, and duplicate addresses', () => {
    const { table } = compileNameTable({ names: { 'a.shop': { ipv4: ['10.0.0.1', '10.0.0.1'], ipv6: [] }, 'A.shop.': { ipv4: ['10.0.0.2', '10.0.0.1'], ipv6: ['fd12::1'] } }, zones: [] });
    expect(table.names.get('a.shop')).toEqual({ ipv4: ['10.0.0.1', '10.0.0.2'], ipv6: ['fd12::1'] });
  });

  it.each([
    ['nope.shop', ['shop'], true],
    ['a.b.shop', ['shop'], true],
    ['shop', ['shop'], false], // the zone itself is not under it: forwarded (`.shop` is a real TLD too)
    ['xshop', ['shop'], false],
    ['shop.example.com', ['shop'], false],
    ['nope.blog', ['shop'], false],
    ['anything.at.all', [''], true],
    ['', [''], false],
    ['x.shop', [], false],
  ] as const)('%s is in zones %j: %s', (name, zones, want) => expect(inZone(name, new Set(zones))).toBe(want));
});

describe('what a query is answered', () => {
  it.each([
    // [what, query, context, outcome, rcode, authoritative, records]
    ['A of a service', ask('web.shop', 'A'), FWD, 'answered', 'NOERROR', true, ['web.shop A 10.208.0.7 ttl=5']],
    ['AAAA of a service', ask('web.shop', 'AAAA'), FWD, 'answered', 'NOERROR', true, ['web.shop AAAA fd12:3456:789a:ffff::7 ttl=5']],
    ['ANY: both families', ask('web.shop', 'ANY'), FWD, 'answered', 'NOERROR', true, ['web.shop A 10.208.0.7 ttl=5', 'web.shop AAAA fd12:3456:789a:ffff::7 ttl=5']],
    ['several addresses', ask('api.blog', 'A'), FWD, 'answered', 'NOERROR', true, ['api.blog A 10.208.1.2 ttl=5', 'api.blog A 10.208.1.3 ttl=5']],
    ['the case as asked, with a trailing dot', ask('WeB.sHoP.', 'A'), FWD, 'answered', 'NOERROR', true, ['WeB.sHoP A 10.208.0.7 ttl=5']],
    ['a table name entered in upper case', ask('db.shop', 'A'), FWD, 'answered', 'NOERROR', true, ['db.shop A 10.208.0.8 ttl=5']],
    ['the TTL the caller set', ask('web.shop', 'A'), { ttl: 1, forwarding: true }, 'answered', 'NOERROR', true, ['web.shop A 10.208.0.7 ttl=1']],
    ['no answer without upstreams either', ask('web.shop', 'A'), LOCAL, 'answered', 'NOERROR', true, ['web.shop A 10.208.0.7 ttl=5']],
    ['class ANY', ask('web.shop', 'A', 'ANY'), FWD, 'answered', 'NOERROR', true, ['web.shop A 10.208.0.7 ttl=5']],
    // NODATA: the name exists, without an address of that type.
    ['AAAA of an IPv4-only service', ask('db.shop', 'AAAA'), FWD, 'nodata', 'NOERROR', true, []],
    ['A of an IPv6-only service', ask('v6only.shop', 'A'), FWD, 'nodata', 'NOERROR', true, []],
    ['MX of a service', ask('web.shop', 'MX'), FWD, 'nodata', 'NOERROR', true, []],
    ['TXT of a service', ask('web.shop', 'TXT'), FWD, 'nodata', 'NOERROR', true, []],
    // NXDOMAIN: under a zone, not in the table, whatever the type.
    ['a missing service of a known deployment', ask('nope.shop', 'A'), FWD, 'nxdomain', 'NXDOMAIN', true, []],
    ['its AAAA too', ask('nope.shop', 'AAAA'), FWD, 'nxdomain', 'NXDOMAIN', true, []],
    ['under a service', ask('x.web.shop', 'A'), FWD, 'nxdomain', 'NXDOMAIN', true, []],
    ['in upper case', ask('NOPE.BLOG.', 'A'), FWD, 'nxdomain', 'NXDOMAIN', true, []],
    ['without upstreams too', ask('nope.shop', 'A'), LOCAL, 'nxdomain', 'NXDOMAIN', true, []],
    // Outside the table and its zones: forwarded when there is an upstream, else SERVFAIL.
    ['no upstream: SERVFAIL', ask('example.com', 'A'), LOCAL, 'servfail', 'SERVFAIL', false, []],
    ['the zone itself, no upstream', ask('shop', 'A'), LOCAL, 'servfail', 'SERVFAIL', false, []],
    // Refused or rejected.
    ['class CH for a service', ask('web.shop', 'TXT', 'CH'), FWD, 'rejected', 'REFUSED', false, []],
    ['class HS under a zone', ask('nope.shop', 'A', 'HS'), FWD, 'rejected', 'REFUSED', false, []],
    ['two questions (RFC 9619)', query({ questions: [{ name: 'web.shop', type: 'A' }, { name: 'db.shop', type: 'A' }] }), FWD, 'rejected', 'FORMERR', false, []],
    ['no question', query({ questions: [] }), FWD, 'rejected', 'FORMERR', false, []],
    ['opcode STATUS', ask('web.shop', 'A', 'IN', { flags: (2 << 11) | dnsPacket.RECURSION_DESIRED }), FWD, 'rejected', 'NOTIMP', false, []],
    ['opcode UPDATE', ask('web.shop', 'A', 'IN', { flags: (5 << 11) | dnsPacket.RECURSION_DESIRED }), FWD, 'rejected', 'NOTIMP', false, []],
    ['two OPT records', ask('web.shop', 'A', 'IN', { additionals: [EDNS(1232), EDNS(4096)] }), FWD, 'rejected', 'FORMERR', false, []],
  ] as const)('%s', (_, q, ctx, outcome, rcode, aa, want) => {
    const r = decideQuery(q, TABLE, ctx);
    expect(r.kind).toBe('answer');
    expect(r.kind === 'answer' && r.outcome).toBe(outcome);
    const got = wire(r)!;
    expect(got.type).toBe('response');
    expect(got.id).toBe(4242);
    expect(got.rcode).toBe(rcode);
    expect(got.flag_aa).toBe(aa);
    expect(got.flag_rd).toBe(true); // copied from the query, as is the opcode
    expect(got.opcode).toBe(q.opcode);
    expect(got.flag_ra).toBe(ctx.forwarding);
    expect(got.flag_tc).toBe(false);
    expect(records(got)).toEqual(want);
    expect(got.authorities).toEqual([]);
    // The question is echoed, as asked, when there was exactly one.
    expect(got.questions).toEqual(q.questions!.length === 1 ? q.questions : []);
  });

  it.each([
    ['a public name', ask('example.com', 'A')],
    ['a bare name', ask('db', 'A')],
    ['a deployment name itself', ask('shop', 'A')],
    ['a name under an unknown deployment', ask('web.other', 'AAAA')],
    ['a reverse look-up', ask('7.0.208.10.in-addr.arpa', 'PTR')],
    ['class CH outside the cluster (version.bind)', ask('version.bind', 'TXT', 'CH')],
  ] as const)('forwards %s', (_, q) => {
    const r = decideQuery(q, TABLE, FWD);
    expect(r).toEqual({ kind: 'forward', question: q.questions![0] });
  });

  it('drops a response sent to it: never answer an answer', () => {
    const r = decideQuery(dnsPacket.decode(dnsPacket.encode({ type: 'response', id: 1, questions: [{ name: 'web.shop', type: 'A' }] })) as Decoded, TABLE, FWD);
    expect(r).toEqual({ kind: 'drop', why: 'a response, not a query' });
  });

  it('answers an EDNS query with an OPT of its own payload size, and an old one without', () => {
    const withEdns = wire(decideQuery(ask('web.shop', 'A', 'IN', { additionals: [EDNS(4096)] }), TABLE, FWD))!;
    expect(withEdns.additionals).toMatchObject([{ type: 'OPT', udpPayloadSize: 1232, ednsVersion: 0 }]);
    expect(wire(decideQuery(ask('web.shop'), TABLE, FWD))!.additionals).toEqual([]);
  });

  it('answers an EDNS version it does not speak with BADVERS (extended rcode 16) and its own version, 0', () => {
    const r = decideQuery(ask('web.shop', 'A', 'IN', { additionals: [EDNS(1232, 1)] }), TABLE, FWD);
    expect(r.kind === 'answer' && r.outcome).toBe('rejected');
    const got = wire(r)!;
    expect(got.rcode).toBe('NOERROR'); // the lower four bits of 16
    expect(got.additionals).toMatchObject([{ type: 'OPT', extendedRcode: 1, ednsVersion: 0 }]);
    expect(got.answers).toEqual([]);
  });

  it('a table replaced whole answers from the new one only', () => {
    const next = compileNameTable({ names: { 'new.shop': { ipv4: ['10.208.0.99'], ipv6: [] } }, zones: ['shop'] }).table;
    expect(wire(decideQuery(ask('new.shop'), next, FWD))!.answers).toHaveLength(1);
    expect(wire(decideQuery(ask('web.shop'), next, FWD))!.rcode).toBe('NXDOMAIN');
    expect(decideQuery(ask('api.blog'), next, FWD).kind).toBe('forward');
  });

  it('SERVFAIL after a failed forward keeps the id, the question and RD', () => {
    const got = dnsPacket.decode(dnsPacket.encode(servfail(ask('example.com', 'AAAA', 'IN', { additionals: [EDNS(1232)] }), FWD))) as Decoded;
    expect(got).toMatchObject({ id: 4242, rcode: 'SERVFAIL', flag_rd: true, flag_ra: true, flag_aa: false, questions: [{ name: 'example.com', type: 'AAAA' }] });
    expect(got.additionals).toHaveLength(1);
  });
});

describe('UDP size', () => {
  it.each([
    ['no EDNS: 512 bytes', [], 512],
    ['EDNS 4096: this server sends at most 1232', [EDNS(4096)], 1232],
    ['EDNS 1232', [EDNS(1232)], 1232],
    ['EDNS 800', [EDNS(800)], 800],
    ['EDNS under 512 counts as 512 (RFC 6891)', [EDNS(100)], 512],
  ] as const)('%s', (_, additionals, want) => expect(udpPayloadLimit(ask('web.shop', 'A', 'IN', { additionals: [...additionals] }))).toBe(want));

  it('cuts a large answer down to the TC bit, the question and the OPT', () => {
    const many: Record<string, { ipv4: string[]; ipv6: string[] }> = { 'big.shop': { ipv4: Array.from({ length: 100 }, (_, i) => `10.208.2.${i}`), ipv6: [] } };
    const q = ask('big.shop', 'A', 'IN', { additionals: [EDNS(1232)] });
    const r = decideQuery(q, compileNameTable({ names: many, zones: ['shop'] }).table, FWD);
    expect(r.kind === 'answer' && dnsPacket.encode(r.packet).length).toBeGreaterThan(1232);
    const cut = dnsPacket.decode(dnsPacket.encode(truncated((r as { packet: Packet }).packet))) as Decoded;
    expect(cut).toMatchObject({ id: 4242, flag_tc: true, flag_aa: true, rcode: 'NOERROR', questions: q.questions, answers: [], authorities: [] });
    expect(cut.additionals).toMatchObject([{ type: 'OPT' }]);
  });
});

describe('metric labels', () => {
  it.each([
    [ask('web.shop', 'A'), 'A'],
    [ask('web.shop', 'AAAA'), 'AAAA'],
    [ask('_http._tcp.web.shop', 'SRV'), 'SRV'],
    [ask('web.shop', 'NAPTR'), 'other'],
    [query({ questions: [] }), 'none'],
    [undefined, 'none'],
  ] as const)('%#: %s', (q, want) => expect(typeLabel(q)).toBe(want));
});

describe('docs/networking.md', () => {
  const doc = readFileSync(join(PACKAGE_ROOT, 'docs', 'networking.md'), 'utf8');
  it.each(Object.keys(DNS_OUTCOMES))('lists the outcome %s', (o) => expect(doc).toContain(`| \`${o}\` |`));
  it.each(Object.keys(DNS_UPSTREAM_FAILURES))('names the upstream failure %s', (r) => expect(doc).toContain(`\`${r}\``));
});
