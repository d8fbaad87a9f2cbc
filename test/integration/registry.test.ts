// Resolving tags against a real distribution registry (Debian's docker-registry, started by
// src/supervise/registry.ts): plain HTTP, htpasswd users, TLS from the cluster CA, a closed port.
// Images are uploaded with the distribution API itself (test/support/registry.ts): no Docker here.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureClusterCa } from '../../src/pki/ca.js';
import { checkRegistryLogin, ImageNotFoundError, ImageUnauthorizedError, imagePorts, RegistryUnreachableError, resolveDigest, type ImageAccessError } from '../../src/images/registry.js';
import { freePort } from '../../src/supervise/etcd.js';
import { startRegistry, waitForRegistry } from '../../src/supervise/registry.js';
import { startTestRegistry, type TestRegistry } from '../support/registry.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

async function failure(p: Promise<unknown>): Promise<ImageAccessError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e, 'expected the call to fail').toBeDefined();
  return e as ImageAccessError;
}

describe('a plain-HTTP registry', () => {
  let reg: TestRegistry;
  beforeAll(async () => {
    reg = await startTestRegistry();
  });
  afterAll(() => reg?.stop());

  it('resolves a pushed tag to the digest of its manifest, and follows the tag when it is pushed again', async () => {
    const first = await reg.pushTinyImage('team/app', '1');
    expect(await resolveDigest(`${reg.host}/team/app:1`, { insecure: true })).toBe(first);
    const second = await reg.pushTinyImage('team/app', '1');
    expect(second).not.toBe(first);
    expect(await resolveDigest(`${reg.host}/team/app:1`, { insecure: true })).toBe(second);
    // latest is what a reference without a tag means.
    const latest = await reg.pushTinyImage('team/app', 'latest');
    expect(await resolveDigest(`${reg.host}/team/app`, { insecure: true, registry: reg.host })).toBe(latest);
  });

  it("reads the ports an image declares (EXPOSE) from its config, through a multi-platform index too", async () => {
    await reg.pushTinyImage('team/redis', '7', undefined, { exposedPorts: ['6379/tcp', '53/udp'] });
    expect(await imagePorts(`${reg.host}/team/redis:7`, { insecure: true })).toEqual({ tcp: [6379], udp: [53] });
    const indexed = await reg.pushTinyImage('team/web', '1', undefined, { exposedPorts: ['80/tcp', '443/tcp'], index: true });
    expect(await imagePorts(`${reg.host}/team/web:1@${indexed}`, { insecure: true })).toEqual({ tcp: [80, 443], udp: [] });
    await reg.pushTinyImage('team/quiet', '1');
    expect(await imagePorts(`${reg.host}/team/quiet:1`, { insecure: true })).toEqual({ tcp: [], udp: [] });
    await expect(imagePorts(`${reg.host}/team/none:1`, { insecure: true })).rejects.toThrow(/unknown/);
  });

  it('names an unknown tag or repository image_not_found, with the image and the registry', async () => {
    await reg.pushTinyImage('known', '1');
    for (const [image, name] of [
      [`${reg.host}/known:2`, `${reg.host}/known:2`],
      [`${reg.host}/unknown`, `${reg.host}/unknown:latest`],
    ] as const) {
      const e = await failure(resolveDigest(image, { insecure: true }));
      expect(e).toBeInstanceOf(ImageNotFoundError);
      expect(e.code).toBe('image_not_found');
      expect(e.image).toBe(name);
      expect(e.registry).toBe(reg.host);
      expect(e.message).toBe(`image ${name} not found in registry ${reg.host}: manifest unknown (HTTP 404)`);
    }
  });

  it('is registry_unreachable over HTTPS (it answers plain HTTP), saying so', async () => {
    const e = await failure(resolveDigest(`${reg.host}/known:1`));
    expect(e).toBeInstanceOf(RegistryUnreachableError);
    expect(e.detail).toMatch(/^TLS handshake failed: the registry answers plain HTTP, not HTTPS \(https:\/\/127\.0\.0\.1:\d+\)/);
  });
});

describe('a registry with htpasswd users', () => {
  let reg: TestRegistry;
  const alice = { username: 'alice', password: 'correct horse' };
  beforeAll(async () => {
    reg = await startTestRegistry({ users: { alice: alice.password } });
  });
  afterAll(() => reg?.stop());

  it('refuses without credentials and with a wrong password (image_unauthorized), and resolves with the right ones', async () => {
    const digest = await reg.pushTinyImage('private/app', '1', alice);
    const image = `${reg.host}/private/app:1`;
    const none = await failure(resolveDigest(image, { insecure: true }));
    expect(none).toBeInstanceOf(ImageUnauthorizedError);
    expect(none.message).toBe(`registry ${reg.host} refused access to image ${image}: authentication required (Basic), and no credentials were given`);
    const wrong = await failure(resolveDigest(image, { insecure: true, credentials: { ...alice, password: 'battery staple' } }));
    expect(wrong).toBeInstanceOf(ImageUnauthorizedError);
    expect(wrong.detail).toBe('authentication required (the credentials of alice were refused)');
    expect(await resolveDigest(image, { insecure: true, credentials: alice })).toBe(digest);
  });

  it('checks a login as docker login does', async () => {
    await expect(checkRegistryLogin({ registry: reg.host, insecure: true, credentials: alice })).resolves.toBeUndefined();
    await expect(checkRegistryLogin({ registry: reg.host, insecure: true, credentials: { ...alice, password: 'x' } })).rejects.toBeInstanceOf(ImageUnauthorizedError);
  });
});

describe('a TLS registry with a certificate from the cluster CA', () => {
  let reg: TestRegistry;
  let otherCa: string;
  let dir: string;
  beforeAll(async () => {
    reg = await startTestRegistry({ tls: true, users: { ci: 'pw' } });
    dir = mkdtempSync(join(tmpdir(), 'jaco-other-ca-'));
    otherCa = ensureClusterCa(dir, { commonName: 'another CA' }).certPem;
  });
  afterAll(async () => {
    await reg?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('resolves when the cluster CA is trusted', async () => {
    const digest = await reg.pushTinyImage('app', '1', { username: 'ci', password: 'pw' });
    expect(await resolveDigest(`${reg.host}/app:1`, { caPem: reg.caPem!, credentials: { username: 'ci', password: 'pw' } })).toBe(digest);
    await expect(checkRegistryLogin({ registry: reg.host, caPem: reg.caPem!, credentials: { username: 'ci', password: 'pw' } })).resolves.toBeUndefined();
  });

  it('is registry_unreachable, naming the certificate, without the CA or with another one', async () => {
    for (const access of [{}, { caPem: otherCa }]) {
      const e = await failure(resolveDigest(`${reg.host}/app:1`, { ...access, credentials: { username: 'ci', password: 'pw' } }));
      expect(e).toBeInstanceOf(RegistryUnreachableError);
      expect(e.message).toMatch(new RegExp(`^registry ${reg.host.replace(/\./g, '\\.')} unreachable for image ${reg.host.replace(/\./g, '\\.')}/app:1: TLS: the registry's certificate is not trusted: unable to verify the first certificate`));
    }
  });

  it('is registry_unreachable when asked over plain HTTP (marked insecure by mistake)', async () => {
    const e = await failure(resolveDigest(`${reg.host}/app:1`, { insecure: true }));
    expect(e).toBeInstanceOf(RegistryUnreachableError);
    expect(e.detail).toMatch(/^the registry's answer over plain HTTP is not valid HTTP \(.*\): if it speaks HTTPS, do not mark it insecure$/);
  });
});

describe('no registry', () => {
  it('is registry_unreachable on a closed port: connection refused', async () => {
    const host = `127.0.0.1:${await freePort()}`;
    for (const insecure of [true, false]) {
      const e = await failure(resolveDigest(`${host}/nothing:1`, { insecure }));
      expect(e).toBeInstanceOf(RegistryUnreachableError);
      expect(e.message).toBe(`registry ${host} unreachable for image ${host}/nothing:1: connection refused (${insecure ? 'http' : 'https'}://${host})`);
    }
  });

  it('a registry that cannot start (its port taken) fails the wait with its own log, and stops', async () => {
    const reg = await startTestRegistry();
    const dir = mkdtempSync(join(tmpdir(), 'jaco-registry-clash-'));
    const clash = startRegistry({ dir, port: Number(reg.host.split(':')[1]) });
    try {
      await expect(waitForRegistry(clash, 10_000)).rejects.toThrow(/the registry exited \(code 1\) before answering: .*address already in use/);
    } finally {
      await clash.stop();
      await reg.stop();
      rmSync(dir, { recursive: true, force: true });
    }
    expect(reg.server.process.exitCode !== null || reg.server.process.signalCode !== null).toBe(true);
  });
});
