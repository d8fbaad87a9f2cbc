import { describe, expect, it } from 'vitest';
import { assignHostPorts, canonicalPorts, dynamicPortNames, fixedHostPorts, hostPortsOf, normalizePorts, parsePortRange, portEnv, PortsExhaustedError } from './ports.js';
import { specHash } from './spec.js';

describe('ports', () => {
  it.each([
    ['short form: fixed host ports', [8080, 9090], [8080, 9090], []],
    ['long form with hostPort: fixed', [{ containerPort: 80, hostPort: 8081 }], [8081], []],
    ['long form without hostPort: dynamic, named p<containerPort> by default', [{ containerPort: 80 }, { name: 'admin', containerPort: 9000, published: 19000 }], [], ['p80', 'admin']],
  ])('%s', (_n, ports, fixed, dynamic) => {
    expect(fixedHostPorts({ ports })).toEqual(fixed);
    expect(dynamicPortNames({ ports })).toEqual(dynamic);
  });

  it.each([
    ['an empty node: the hash start of the replica', 'a-web-0', [], { min: 100, max: 109 }],
    ['taken ports are skipped, wrapping at the top', 'a-web-0', [100, 101, 102, 103, 104, 105, 106, 107, 108], { min: 100, max: 109 }],
  ])('assignHostPorts: %s', (_n, replica, taken, range) => {
    const t = new Set(taken);
    const got = assignHostPorts(replica, ['http'], t, range);
    expect(got.http).toBeGreaterThanOrEqual(range.min);
    expect(got.http).toBeLessThanOrEqual(range.max);
    expect(taken).not.toContain(got.http);
    expect(t.has(got.http!)).toBe(true); // accounted at once
    expect(assignHostPorts(replica, ['http'], new Set(taken), range)).toEqual(got); // deterministic
  });

  it('never hands one port out twice, and says so when the range runs out', () => {
    const taken = new Set<number>();
    const all = Array.from({ length: 10 }, (_, i) => assignHostPorts(`r-${i}`, ['a'], taken, { min: 1, max: 10 }).a);
    expect(new Set(all).size).toBe(10);
    expect(() => assignHostPorts('r-11', ['a'], taken, { min: 1, max: 10 })).toThrow(PortsExhaustedError);
  });

  it('host ports and env of a replica: fixed from the spec, dynamic from the record', () => {
    const d = { template: { image: 'x', ports: [{ name: 'http', containerPort: 80 }, 7000] }, hostPorts: { http: 20001 } };
    expect(hostPortsOf(d)).toEqual({ http: 20001, p7000: 7000 });
    expect(portEnv(d)).toEqual({ PORT: '20001', JACO_PORT_HTTP: '20001', JACO_PORT_P7000: '7000' });
  });

  it('the short form hashes as before; published does not roll a service', () => {
    expect(canonicalPorts([9090, 8080])).toEqual([8080, 9090]);
    const a = specHash({ image: 'x', ports: [{ name: 'http', containerPort: 80, published: 18080 }] });
    expect(specHash({ image: 'x', ports: [{ name: 'http', containerPort: 80, published: 18081 }] })).toBe(a);
    expect(specHash({ image: 'x', ports: [{ name: 'http', containerPort: 81, published: 18080 }] })).not.toBe(a);
  });

  it.each([['20000-32767', { min: 20000, max: 32767 }], ['1-1', { min: 1, max: 1 }]])('parsePortRange %s', (s, want) => expect(parsePortRange(s)).toEqual(want));
  it.each(['20000', '3-2', '0-10', '1-70000', 'a-b'])('parsePortRange refuses %s', (s) => expect(() => parsePortRange(s)).toThrow());
});

describe('normalizePorts: the ports an image declares', () => {
  const ports = [{ name: 'http', containerPort: 8080, published: 18080 }];
  it.each([
    ['cluster network: the image\'s ports it does not list are added, named p<port>', { network: 'cluster' as const, ports, imagePorts: [8080, 9090] }, ['http:8080', 'p9090:9090']],
    ['cluster network, no ports listed: only the image\'s', { network: 'cluster' as const, imagePorts: [6379] }, ['p6379:6379']],
    ['host network: never (the node\'s ports are a resource the spec books)', { network: 'host' as const, ports, imagePorts: [9090] }, ['http:8080']],
  ])('%s', (_what, spec, want) => expect(normalizePorts(spec).map((p) => `${p.name}:${p.containerPort}`)).toEqual(want));

  it('an image port under a name the spec uses for another port is not added twice', () => {
    expect(normalizePorts({ network: 'cluster', ports: [{ name: 'p9090', containerPort: 7000 }], imagePorts: [9090] }).map((p) => p.containerPort)).toEqual([7000]);
  });
});
