// What the node's resolver answers and where (names.ts): decided from the node's desired replicas
// and the cluster's service addresses alone.
import { describe, expect, it } from 'vitest';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaAddress, type ReplicaDesired, type ServiceAddress, type ServiceSpec } from '../../src/api/types.js';
import { listenSet, namesOf } from './names.js';

function des(replica: string, spec: Partial<ServiceSpec>, address?: ReplicaAddress): ReplicaDesired {
  const t = templateOf(1, { image: 'x', ...spec });
  return { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: replica }, spec: { replica, deployment: 'shop', service: 'web', node: 'n1', revision: 1, specHash: t.specHash, template: t.template, placedAt: '2026-01-01T00:00:00Z', ...(address ? { address } : {}) } };
}
const svc = (deployment: string, service: string, n: number, aliases?: string[]): ServiceAddress => ({
  apiVersion: API_VERSION,
  kind: 'ServiceAddress',
  metadata: { name: `${deployment}-${service}` },
  spec: { deployment, service, number: n, ipv4: `10.207.0.${n}`, ipv6: `fd4a:17c2:9e01:ffff::${n}`, since: '2026-01-01T00:00:00Z', ...(aliases ? { aliases } : {}) },
});
const A3 = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' };

describe('namesOf: where the node answers names, and which', () => {
  it.each<[string, ReplicaDesired[], string[]]>([
    ['no replica on the cluster network: nowhere (no resolver)', [des('r1', {}), des('r2', { network: 'host' }, A3)], []],
    ['a cluster replica without its address yet: nowhere yet', [des('r1', { network: 'cluster' })], []],
    ['the gateways of its prefixes, both families, once for many replicas', [des('r1', { network: 'cluster' }, A3), des('r2', { network: 'cluster' }, { ipv4: '10.208.3.9/24', ipv6: 'fd4a:17c2:9e01:3::9/64' })], ['10.208.3.1', 'fd4a:17c2:9e01:3::1']],
  ])('%s', (_what, desired, listen) => expect(namesOf(desired, []).listen).toEqual(listen));

  it('SERVICE.DEPLOYMENT for every service address, each deployment a zone', () => {
    const { table } = namesOf([], [svc('shop', 'db', 4), svc('shop', 'web', 5), svc('blog', 'web', 6)]);
    expect(Object.fromEntries(table.names)).toEqual({
      'db.shop': { ipv4: ['10.207.0.4'], ipv6: ['fd4a:17c2:9e01:ffff::4'] },
      'web.shop': { ipv4: ['10.207.0.5'], ipv6: ['fd4a:17c2:9e01:ffff::5'] },
      'web.blog': { ipv4: ['10.207.0.6'], ipv6: ['fd4a:17c2:9e01:ffff::6'] },
    });
    expect(table.zones).toEqual(['blog', 'shop']);
  });

  const at = (n: number) => ({ ipv4: [`10.207.0.${n}`], ipv6: [`fd4a:17c2:9e01:ffff::${n}`] });
  it.each<[string, ServiceAddress[], Record<string, ReturnType<typeof at>>]>([
    ['a compose name beside the jaco one: both answer', [svc('shop', 'web-app', 5, ['web_app'])], { 'web-app.shop': at(5), 'web_app.shop': at(5) }],
    ['network aliases, a dotted one under its deployment too', [svc('shop', 'web-app', 5, ['Web.App', 'front'])], { 'web-app.shop': at(5), 'web.app.shop': at(5), 'front.shop': at(5) }],
    ['an alias never takes a service’s own name (any case)', [svc('shop', 'web', 5, ['DB']), svc('shop', 'db', 4)], { 'web.shop': at(5), 'db.shop': at(4) }],
    ['two services with one alias: the first keeps it', [svc('shop', 'a', 1, ['x']), svc('shop', 'b', 2, ['x'])], { 'a.shop': at(1), 'b.shop': at(2), 'x.shop': at(1) }],
    ['an alias is its deployment’s: the same alias elsewhere is another name', [svc('shop', 'a', 1, ['x']), svc('blog', 'a', 2, ['x'])], { 'a.shop': at(1), 'x.shop': at(1), 'a.blog': at(2), 'x.blog': at(2) }],
  ])('aliases: %s', (_what, services, want) => expect(Object.fromEntries(namesOf([], services).table.names)).toEqual(want));
});

describe('listenSet: the resolver never leaves an address it answered on', () => {
  it.each<[string, string, string[], string[]]>([
    ['the first cluster replica: its gateways', '', ['10.208.3.1', 'fd4a:17c2:9e01:3::1'], ['10.208.3.1', 'fd4a:17c2:9e01:3::1']],
    ['its last replica drained away (its container may still run and ask): still there', '10.208.3.1 fd4a:17c2:9e01:3::1', [], ['10.208.3.1', 'fd4a:17c2:9e01:3::1']],
    ['a new prefix beside: both', '10.208.3.1', ['10.208.4.1'], ['10.208.3.1', '10.208.4.1']],
  ])('%s', (_what, listening, planned, want) => expect(listenSet(listening, planned)).toEqual(want));
});
