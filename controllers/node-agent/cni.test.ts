// The CNI ptp config built from a desired record (gateways, prefix lengths, routes), the plugin's
// environment and answers, the addresses `ip` reports; and the shell against stand-in plugins
// (scripts that answer as ptp does), so the exec path is tested without root or a namespace.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { addressesFromIp, cniConfig, cniEnv, cniFailure, CniNetwork, holdsAddress } from './cni.js';
import { CniError } from './network.js';

describe('cniConfig: a replica’s ptp config from its desired record', () => {
  const address = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:0003::5/64' };

  it('static IPAM with both addresses, each with its prefix length and gateway; default routes of both families; no NAT', () => {
    expect(cniConfig(address)).toEqual({
      cniVersion: '1.0.0',
      name: 'jaco',
      type: 'ptp',
      ipMasq: false,
      ipam: {
        type: 'static',
        addresses: [
          { address: '10.208.3.5/24', gateway: '10.208.3.1' },
          { address: 'fd4a:17c2:9e01:3::5/64', gateway: 'fd4a:17c2:9e01:3::1' },
        ],
        routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }],
      },
    });
  });

  it('keeps each prefix length as allocated', () => {
    const c = cniConfig({ ipv4: '10.209.0.70/16', ipv6: 'fd4a:17c2:9e01:300::70/56' });
    expect(c.ipam.addresses).toEqual([
      { address: '10.209.0.70/16', gateway: '10.209.0.1' },
      { address: 'fd4a:17c2:9e01:300::70/56', gateway: 'fd4a:17c2:9e01:300::1' },
    ]);
  });

  it('refuses an address that is not one', () => expect(() => cniConfig({ ipv4: '10.208.3.5', ipv6: 'fd4a::5/64' })).toThrow(/10\.208\.3\.5/));
});

describe('the CNI environment and answers', () => {
  it('names the command, the sandbox, its namespace, the interface and where the IPAM plugin is', () => {
    expect(cniEnv('ADD', { id: 'abc', pid: 4242 }, '/usr/lib/cni')).toEqual({ CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'abc', CNI_NETNS: '/proc/4242/ns/net', CNI_IFNAME: 'eth0', CNI_PATH: '/usr/lib/cni' });
    // A sandbox that no longer runs has no namespace: DEL is told none.
    expect(cniEnv('DEL', { id: 'abc', pid: 0 }, '/opt/cni/bin').CNI_NETNS).toBe('');
  });

  it.each<[string, string, string, string, number | undefined]>([
    ['the spec’s error object', JSON.stringify({ code: 999, msg: "failed to add route '{0.0.0.0 00000000} via 10.208.3.6 dev eth0': network is unreachable" }), '', "ptp ADD: failed to add route '{0.0.0.0 00000000} via 10.208.3.6 dev eth0': network is unreachable", 999],
    ['with details', JSON.stringify({ code: 7, msg: 'invalid network config', details: 'no ipam' }), '', 'ptp ADD: invalid network config: no ipam', 7],
    ['stderr only', '', 'panic: oops\ngoroutine 1', 'ptp ADD: panic: oops goroutine 1', undefined],
    ['nothing at all', '', '', 'ptp ADD: exited 1', undefined],
  ])('%s', (_n, stdout, stderr, message, code) => {
    const e = cniFailure('ADD', stdout, stderr, 1);
    expect(e).toBeInstanceOf(CniError);
    expect(e.message).toBe(message);
    expect(e.code).toBe(code);
  });

  it('reads the global addresses of `ip -j addr show dev eth0`', () => {
    const json = JSON.stringify([
      {
        ifname: 'eth0',
        addr_info: [
          { family: 'inet', local: '10.208.3.5', prefixlen: 24, scope: 'global' },
          { family: 'inet6', local: 'fd4a:17c2:9e01:3::5', prefixlen: 64, scope: 'global' },
          { family: 'inet6', local: 'fe80::1', prefixlen: 64, scope: 'link' },
        ],
      },
    ]);
    expect(addressesFromIp(json)).toEqual(['10.208.3.5/24', 'fd4a:17c2:9e01:3::5/64']);
    expect(addressesFromIp('[]')).toEqual([]);
  });

  it.each<[string, string[], boolean]>([
    ['both', ['10.208.3.5/24', 'fd4a:17c2:9e01:3::5/64'], true],
    ['both, written otherwise', ['10.208.3.5/24', 'fd4a:17c2:9e01:0003:0:0:0:5/64'], true],
    ['the IPv4 only (half plumbed)', ['10.208.3.5/24'], false],
    ['another prefix length', ['10.208.3.5/25', 'fd4a:17c2:9e01:3::5/64'], false],
    ['none', [], false],
  ])('holds the replica’s address: %s → %s', (_n, have, want) => expect(holdsAddress(have, { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' })).toBe(want));
});

describe('CniNetwork runs the plugin (stand-in plugins)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-cni-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  /** A directory with a `ptp` that runs `body`. */
  const plugin = (name: string, body: string) => {
    const bin = join(dir, name);
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, 'ptp'), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, 'ptp'), 0o755);
    return bin;
  };
  const address = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' };

  it('hands the config on stdin and the CNI variables in the environment', async () => {
    const out = join(dir, 'seen');
    const bin = plugin('ok', `env | grep ^CNI_ | sort > ${out}.env; cat > ${out}.json; echo '{"cniVersion":"1.0.0"}'`);
    await new CniNetwork(bin).add({ id: 'sandbox-1', pid: 77 }, address);
    expect(readFileSync(`${out}.env`, 'utf8').trim().split('\n')).toEqual([`CNI_COMMAND=ADD`, 'CNI_CONTAINERID=sandbox-1', `CNI_IFNAME=eth0`, 'CNI_NETNS=/proc/77/ns/net', `CNI_PATH=${bin}`]);
    expect(JSON.parse(readFileSync(`${out}.json`, 'utf8'))).toEqual(cniConfig(address));
    await new CniNetwork(bin).del({ id: 'sandbox-1', pid: 77 }, address);
    expect(readFileSync(`${out}.env`, 'utf8')).toContain('CNI_COMMAND=DEL');
  });

  it('a plugin that fails: its own error, as a CniError', async () => {
    const bin = plugin('fails', `cat >/dev/null; echo '{"code":11,"msg":"failed to set up IPAM plugin type \\"static\\""}'; exit 1`);
    await expect(new CniNetwork(bin).add({ id: 's', pid: 1 }, address)).rejects.toMatchObject({ name: 'CniError', code: 11, message: 'ptp ADD: failed to set up IPAM plugin type "static"' });
  });

  it('a plugin that is not there (a broken --cni-bin-dir) says where it looked', async () => {
    const e = (await new CniNetwork(join(dir, 'nowhere')).add({ id: 's', pid: 1 }, address).then(() => undefined, (x: unknown) => x)) as Error;
    expect(e).toBeInstanceOf(CniError);
    expect(e.message).toMatch(new RegExp(`cannot run the CNI plugin ${join(dir, 'nowhere', 'ptp')}: spawn .* ENOENT .*containernetworking-plugins`));
  });
});
