// Where an image goes and with what access, from the cluster's image setting and stored registries.
import { describe, expect, it } from 'vitest';
import type { Registry } from '../api/types.js';
import { qualifyImage, redactRegistry, registryAccessFor, ShortNameError } from './access.js';
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
  const stored = [registry('127.0.0.1:5000', { username: 'ci', password: 'pw', caPem: CA }), registry('plain.local:5000', { insecure: true }), registry('docker.io', { username: 'hub', password: 'hpw' })];

  it('gives the cluster’s credentials, CA and insecure flag for a stored host', () => {
    expect(registryAccessFor('127.0.0.1:5000', stored)).toEqual({ registry: '127.0.0.1:5000', credentials: { username: 'ci', password: 'pw' }, caPem: CA });
    expect(registryAccessFor('plain.local:5000', stored)).toEqual({ registry: 'plain.local:5000', insecure: true });
  });

  it('prefers the operator’s own credentials, keeping the cluster’s CA', () => {
    expect(registryAccessFor('127.0.0.1:5000', stored, { username: 'me', password: 'mine' })).toEqual({ registry: '127.0.0.1:5000', credentials: { username: 'me', password: 'mine' }, caPem: CA });
  });

  it('matches hosts as stored (lower case; Hub under docker.io), takes a map as the informer holds them, and knows nothing of others', () => {
    expect(registryAccessFor('PLAIN.local:5000', stored).insecure).toBe(true);
    expect(registryAccessFor('index.docker.io', stored)).toEqual({ registry: 'docker.io', credentials: { username: 'hub', password: 'hpw' } });
    expect(registryAccessFor('127.0.0.1:5000', new Map(stored.map((r) => [`registries/${r.spec.host}`, r]))).credentials).toEqual({ username: 'ci', password: 'pw' });
    expect(registryAccessFor('other.local', stored)).toEqual({ registry: 'other.local' });
    expect(registryAccessFor('other.local', stored, { identityToken: 't' })).toEqual({ registry: 'other.local', credentials: { identityToken: 't' } });
  });
});

describe('redactRegistry', () => {
  it('drops the password and keeps the rest', () => {
    const r = registry('127.0.0.1:5000', { username: 'ci', password: 'pw', caPem: CA, insecure: false });
    expect(redactRegistry(r)).toEqual({ ...r, spec: { host: '127.0.0.1:5000', username: 'ci', caPem: CA, insecure: false } });
    expect(JSON.stringify(redactRegistry(r))).not.toContain('pw');
    expect(r.spec.password).toBe('pw');
  });
});
