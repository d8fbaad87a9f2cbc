// A cluster-network replica's sandbox: which one it needs (its spec and hash), its name, labels and
// `docker create` body; and the facts the agent reads back from one.
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { LABELS } from '../../src/api/labels.js';
import { templateOf } from '../../src/api/serving.js';
import type { ReplicaDesiredSpec, ServiceSpec } from '../../src/api/types.js';
import { factsFromInspect } from './facts.js';
import { sandboxCreateOptions, sandboxName, sandboxSpec } from './sandbox.js';

const owner = { clusterUid: '0123456789abcdef-uid', node: 'node-2' };
const ADDRESS = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' };

/** A desired replica; `address` null: its record carries none. */
function spec(s: Partial<ServiceSpec>, address: ReplicaDesiredSpec['address'] | null = ADDRESS, revision = 3): ReplicaDesiredSpec {
  const t = templateOf(revision, { image: 'jaco-demo/busybox:1', ...s });
  return { replica: 'shop-api-4', deployment: 'shop', service: 'api', node: 'node-2', revision, specHash: t.specHash, template: t.template, placedAt: '2026-01-01T00:00:00Z', ...(address ? { address } : {}) };
}

describe('sandboxSpec: the sandbox a desired replica needs', () => {
  it('none on the host network (the default), whatever the record carries', () => {
    expect(sandboxSpec(spec({}))).toBeUndefined();
    expect(sandboxSpec(spec({ network: 'host' }))).toBeUndefined();
  });

  it('none on the cluster network while the record carries no address', () => expect(sandboxSpec(spec({ network: 'cluster' }, null))).toBeUndefined());

  it('the addresses (canonical) and hosts entries, and their hash', () => {
    const s = sandboxSpec(spec({ network: 'cluster', container: { extraHosts: ['db:10.208.3.9'] } }, { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:0003:0::5/64' }))!;
    expect(s.address).toEqual(ADDRESS);
    expect(s.extraHosts).toEqual(['db:10.208.3.9']);
    expect(s.hash).toMatch(/^[0-9a-f]{16}$/);
  });

  it.each<[string, Partial<ServiceSpec>, ReplicaDesiredSpec['address'], boolean]>([
    ['another revision of the service (a restart or a replacement keeps the sandbox)', { env: { A: '2' } }, ADDRESS, true],
    ['the same address written otherwise', {}, { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3:0:0:0:5/64' }, true],
    ['another IPv4 address', {}, { ...ADDRESS, ipv4: '10.208.3.6/24' }, false],
    ['another IPv6 prefix length', {}, { ...ADDRESS, ipv6: 'fd4a:17c2:9e01:3::5/80' }, false],
    ['a hosts entry', { container: { extraHosts: ['db:10.208.3.9'] } }, ADDRESS, false],
    ['a host name', { container: { hostname: 'db-primary' } }, ADDRESS, false],
    ['a net.* sysctl (the namespace’s)', { container: { sysctls: { 'net.core.somaxconn': '1024' } } }, ADDRESS, false],
    ['an IPC sysctl (the container’s, not the namespace’s)', { container: { sysctls: { 'kernel.shmmax': '1' } } }, ADDRESS, true],
  ])('%s: same sandbox %s', (_n, extra, address, same) => {
    const a = sandboxSpec(spec({ network: 'cluster' }))!;
    const b = sandboxSpec(spec({ network: 'cluster', ...extra }, address, 4))!;
    expect(a.hash === b.hash).toBe(same);
  });

  it('is computed once per record object, and afresh for a changed record', () => {
    const d = spec({ network: 'cluster' });
    const first = sandboxSpec(d);
    expect(sandboxSpec(d)).toBe(first);
    const moved = { ...d, address: { ...ADDRESS, ipv4: '10.208.3.6/24' } };
    expect(sandboxSpec(moved)).not.toBe(first);
    expect(sandboxSpec(moved)!.address.ipv4).toBe('10.208.3.6/24');
    expect(sandboxSpec({ ...d })).toEqual(first);
  });
});

describe('sandboxCreateOptions', () => {
  const d = spec({ network: 'cluster', container: { extraHosts: ['db:10.208.3.9'] } });
  const s = sandboxSpec(d)!;
  const o = sandboxCreateOptions(d, s, owner, '198.18.1.1:5000/jaco/pause:1');

  it('is named per cluster, node, replica and sandbox spec', () => {
    expect(o.name).toBe(`jaco-01234567-node-2-shop-api-4-sandbox-${s.hash.slice(0, 8)}`);
    expect(o.name).toBe(sandboxName(owner, 'shop-api-4', s.hash));
  });

  it("runs the pause image with no network of its own (the agent plumbs it), never restarted by Docker", () => {
    expect(o.Image).toBe('198.18.1.1:5000/jaco/pause:1');
    expect(o.HostConfig).toMatchObject({ NetworkMode: 'none', RestartPolicy: { Name: 'no' }, ExtraHosts: ['db:10.208.3.9'] });
    expect(o.HostConfig?.Sysctls).toEqual({ 'net.ipv6.conf.all.disable_ipv6': '0', 'net.ipv6.conf.all.accept_dad': '0', 'net.ipv6.conf.default.accept_dad': '0' });
    expect(o).toMatchObject({ StopSignal: 'SIGTERM', StopTimeout: 2 });
    expect(o.Entrypoint).toBeUndefined();
    // The service's net.* sysctls are set here, beside jaco's (which win); its IPC ones are not.
    const tuned = spec({ network: 'cluster', container: { sysctls: { 'net.core.somaxconn': '1024', 'net.ipv6.conf.all.disable_ipv6': '1', 'kernel.shmmax': '1' } } });
    expect(sandboxCreateOptions(tuned, sandboxSpec(tuned)!, owner, 'p').HostConfig?.Sysctls).toEqual({
      'net.core.somaxconn': '1024',
      'net.ipv6.conf.all.disable_ipv6': '0',
      'net.ipv6.conf.all.accept_dad': '0',
      'net.ipv6.conf.default.accept_dad': '0',
    });
    expect(o.Env).toBeUndefined();
  });

  it("carries the replica's labels, its role, its spec's hash and its addresses (no spec hash or revision: it outlives them)", () => {
    expect(o.Labels).toEqual({
      [LABELS.cluster]: owner.clusterUid,
      [LABELS.node]: 'node-2',
      [LABELS.deployment]: 'shop',
      [LABELS.service]: 'api',
      [LABELS.replica]: 'shop-api-4',
      [LABELS.role]: 'sandbox',
      [LABELS.sandboxHash]: s.hash,
      [LABELS.ipv4]: '10.208.3.5/24',
      [LABELS.ipv6]: 'fd4a:17c2:9e01:3::5/64',
    });
  });

  it("names its namespace's host after the replica (or the service's hostname), and asks names of the node's resolver at its gateways, searching its deployment", () => {
    expect(o.Hostname).toBe('shop-api-4');
    expect(o.HostConfig).toMatchObject({ Dns: ['10.208.3.1', 'fd4a:17c2:9e01:3::1'], DnsSearch: ['shop'] });
    const named = spec({ network: 'cluster', container: { hostname: 'db-primary' } });
    expect(sandboxCreateOptions(named, sandboxSpec(named)!, owner, 'p').Hostname).toBe('db-primary');
  });

  it('no hosts entries: no ExtraHosts', () => {
    const plain = spec({ network: 'cluster' });
    expect(sandboxCreateOptions(plain, sandboxSpec(plain)!, owner, 'p').HostConfig?.ExtraHosts).toBeUndefined();
  });

  it('reads back as a sandbox with its hash and addresses', () => {
    const inspect = {
      Id: 'sb1',
      Name: `/${o.name}`,
      Created: '2026-01-01T00:00:00Z',
      Config: { Labels: o.Labels, Image: o.Image },
      HostConfig: { NetworkMode: 'none' },
      State: { Status: 'running', Running: true, ExitCode: 0, Pid: 4242, StartedAt: '2026-01-01T00:00:01Z', FinishedAt: '0001-01-01T00:00:00Z' },
    } as unknown as Docker.ContainerInspectInfo;
    expect(factsFromInspect(inspect)).toMatchObject({ id: 'sb1', replica: 'shop-api-4', role: 'sandbox', sandboxHash: s.hash, address: ADDRESS, networkMode: 'none', pid: 4242, state: 'running' });
  });
});
