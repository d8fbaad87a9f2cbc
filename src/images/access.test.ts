// Where an image goes and with what access, from the cluster's image setting and stored registries.
import { describe, expect, it } from 'vitest';
import type { Registry } from '../api/types.js';
import { qualifyImage, registryAccessFor, registrySecretOf, ShortNameError } from './access.js';
import { formatReference, parseImageReference } from './reference.js';

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
const registry = (host: string, spec: Partial<Registry['spec']> = {}): Registry => ({ apiVersion: 'jaco.dev/v1', kind: 'Registry', metadata: { name: host }, spec: { host, ...spec } });

describe('qualifyImage', () => {
  const q = (image: string, settings?: Parameters<typeof qualifyImage>[1]) => formatReference(qualifyImage(parseImageReference(image), settings));
  it.each([
    // A registry written in the image is where it goes, whatever the setting.
    ['127.0.0.1:5000/app:1', { hub: false }, '127.0.0.1:5000/app:1'],
    ['docker.io/library/redis:7', { hub: false }, 'docker.io/library/redis:7'],
    ['ghcr.io/o/a:1', { defaultRegistry: 'reg.local:5000', hub: true }, 'ghcr.io/o/a:1'],
    // A short name goes to the default registry first…
    ['jaco-demo/busybox:1', { defaultRegistry: '127.0.0.1:5000', hub: true }, '127.0.0.1:5000/jaco-demo/busybox:1'],
    ['redis:7', { defaultRegistry: 'reg.local', hub: false }, 'reg.local/redis:7'],
    // …else to Docker Hub when allowed.
    ['redis:7', { hub: true }, 'docker.io/library/redis:7'],
  ] as const)('%s with %j → %s', (image, settings, want) => expect(q(image, settings)).toBe(want));

  it('refuses a short name when the cluster has no default registry and no Docker Hub (the default)', () => {
    expect(() => q('redis:7')).toThrow(ShortNameError);
    expect(() => q('team/app', { hub: false })).toThrow('image team/app names no registry, and this cluster has no default registry and does not resolve short names at Docker Hub');
  });
});

describe('registryAccessFor', () => {
  const stored = [registry('127.0.0.1:5000', { username: 'ci', passwordSecret: 'registry_127.0.0.1_5000_a1', caPem: CA }), registry('plain.local:5000', { insecure: true }), registry('docker.io', { username: 'hub', passwordSecret: 'registry_docker.io_b2' })];
  // What a node holds: its copies of the passwords' secrets, opened with its own key.
  const copies = new Map([['registry_127.0.0.1_5000_a1', 'pw'], ['registry_docker.io_b2', 'hpw']]);
  const open = (secret: string) => copies.get(secret) ?? '';

  it('gives a node the cluster’s user with the password opened from its copy, the CA and the insecure flag', () => {
    expect(registryAccessFor('127.0.0.1:5000', stored, undefined, open)).toEqual({ registry: '127.0.0.1:5000', credentials: { username: 'ci', password: 'pw' }, caPem: CA });
    expect(registryAccessFor('plain.local:5000', stored, undefined, open)).toEqual({ registry: 'plain.local:5000', insecure: true });
  });

  it('gives the CLI (which cannot open a secret) the CA and flags, and no cluster credentials', () => {
    expect(registryAccessFor('127.0.0.1:5000', stored)).toEqual({ registry: '127.0.0.1:5000', caPem: CA });
  });

  it('prefers the operator’s own credentials, keeping the cluster’s CA, and does not open the secret', () => {
    const opened: string[] = [];
    expect(registryAccessFor('127.0.0.1:5000', stored, { username: 'me', password: 'mine' }, (s) => (opened.push(s), 'pw'))).toEqual({ registry: '127.0.0.1:5000', credentials: { username: 'me', password: 'mine' }, caPem: CA });
    expect(opened).toEqual([]);
  });

  it('passes on why a password cannot be opened (the copy not on the node yet)', () => {
    expect(() => registryAccessFor('127.0.0.1:5000', stored, undefined, () => { throw new Error('no copy yet'); })).toThrow('no copy yet');
  });

  it('matches hosts as stored (lower case; Hub under docker.io), takes a map as the informer holds them, and knows nothing of others', () => {
    expect(registryAccessFor('PLAIN.local:5000', stored).insecure).toBe(true);
    expect(registryAccessFor('index.docker.io', stored, undefined, open)).toEqual({ registry: 'docker.io', credentials: { username: 'hub', password: 'hpw' } });
    expect(registryAccessFor('127.0.0.1:5000', new Map(stored.map((r) => [`registries/${r.spec.host}`, r])), undefined, open).credentials).toEqual({ username: 'ci', password: 'pw' });
    expect(registryAccessFor('other.local', stored, undefined, open)).toEqual({ registry: 'other.local' });
    expect(registryAccessFor('other.local', stored, { identityToken: 't' })).toEqual({ registry: 'other.local', credentials: { identityToken: 't' } });
  });
});

describe('registrySecretOf', () => {
  const stored = [registry('127.0.0.1:5000', { username: 'ci', passwordSecret: 's1' }), registry('plain.local:5000', { insecure: true })];
  it.each([
    ['127.0.0.1:5000/app:1', { hub: false }, { registry: '127.0.0.1:5000', secret: 's1' }],
    ['127.0.0.1:5000/app@sha256:' + 'a'.repeat(64), { hub: false }, { registry: '127.0.0.1:5000', secret: 's1' }],
    // A short name, at the default registry.
    ['team/app:1', { defaultRegistry: '127.0.0.1:5000', hub: false }, { registry: '127.0.0.1:5000', secret: 's1' }],
    // A registry with no stored password, an unknown one, a short name with nowhere to go, junk.
    ['plain.local:5000/app:1', { hub: false }, undefined],
    ['other.local/app:1', { hub: false }, undefined],
    ['team/app:1', { hub: false }, undefined],
    ['UPPER CASE', { hub: false }, undefined],
  ] as const)('%s with %j → %j', (image, settings, want) => expect(registrySecretOf(image, stored, settings)).toEqual(want));
});
