// The registry's generated configuration and htpasswd (the process itself runs in
// test/integration/registry.test.ts).
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { htpasswdLine, registryBinary, registryConfig, registryHost, RegistryNotInstalledError, writeRegistryConfig } from './registry.js';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jaco-registry-config-'));
  dirs.push(d);
  return d;
};

describe('registryConfig', () => {
  const files = { dataDir: '/r/data', secret: 's3cret' };
  it('serves plain HTTP on loopback by default, storage on the filesystem, no auth', () => {
    expect(parse(registryConfig({ dir: '/r', port: 5000 }, files))).toEqual({
      version: 0.1,
      log: { level: 'info', formatter: 'text', accesslog: { disabled: true } },
      storage: { filesystem: { rootdirectory: '/r/data' }, cache: { blobdescriptor: 'inmemory' } },
      http: { addr: '127.0.0.1:5000', secret: 's3cret', headers: { 'X-Content-Type-Options': ['nosniff'] } },
      health: { storagedriver: { enabled: true, interval: '10s', threshold: 3 } },
    });
  });

  it('adds TLS and htpasswd when asked, and brackets an IPv6 listen address', () => {
    const c = parse(registryConfig({ dir: '/r', address: 'fd00::2', port: 5443, tls: { certFile: '/pki/r.pem', keyFile: '/pki/r.key' } }, { ...files, htpasswd: '/r/htpasswd' }));
    expect(c.http.addr).toBe('[fd00::2]:5443');
    expect(c.http.tls).toEqual({ certificate: '/pki/r.pem', key: '/pki/r.key', minimumtls: 'tls1.2' });
    expect(c.auth).toEqual({ htpasswd: { realm: 'jaco', path: '/r/htpasswd' } });
  });

  it.each([
    ['127.0.0.1', 5000, '127.0.0.1:5000'],
    ['::1', 5000, '[::1]:5000'],
    ['registry.local', 443, 'registry.local:443'],
  ])('registryHost(%s, %d) is %s', (a, p, want) => expect(registryHost(a, p)).toBe(want));
});

describe('writeRegistryConfig', () => {
  it('writes config, htpasswd (bcrypt) and a secret kept across rewrites, all private', () => {
    const dir = join(tmp(), 'reg');
    const spec = { dir, port: 5000, users: { alice: 'wonder land', bob: 'b' } };
    const file = writeRegistryConfig(spec);
    const config = parse(readFileSync(file, 'utf8'));
    expect(config.storage.filesystem.rootdirectory).toBe(join(dir, 'data'));
    expect(config.auth.htpasswd.path).toBe(join(dir, 'htpasswd'));
    const lines = readFileSync(join(dir, 'htpasswd'), 'utf8').trim().split('\n');
    expect(lines.map((l) => l.split(':')[0])).toEqual(['alice', 'bob']);
    expect(bcrypt.compareSync('wonder land', lines[0]!.slice('alice:'.length))).toBe(true);
    expect(bcrypt.compareSync('b', lines[0]!.slice('alice:'.length))).toBe(false);
    for (const f of ['config.yml', 'htpasswd', 'http-secret']) expect(statSync(join(dir, f)).mode & 0o077, f).toBe(0);
    const secret = config.http.secret;
    expect(secret).toMatch(/^[0-9a-f]{48}$/);
    expect(parse(readFileSync(writeRegistryConfig(spec), 'utf8')).http.secret).toBe(secret);
  });

  it('hashes with bcrypt ($2b$, htpasswd -B\'s cost 5), the only hash distribution takes, and refuses a user name with ":"', () => {
    expect(htpasswdLine('u', 'pw')).toMatch(/^u:\$2[aby]\$05\$.{53}$/);
    expect(htpasswdLine('u', 'pw', 10)).toMatch(/^u:\$2[aby]\$10\$.{53}$/);
    expect(() => htpasswdLine('a:b', 'pw')).toThrow(/without ":"/);
  });
});

describe('registryBinary', () => {
  it('names the package to install when the binary is missing', () => {
    const saved = process.env.JACO_REGISTRY_BIN;
    process.env.JACO_REGISTRY_BIN = join(tmpdir(), 'no-such-registry-binary');
    try {
      expect(() => registryBinary()).toThrow(RegistryNotInstalledError);
      expect(() => registryBinary()).toThrow(/apt-get install -y docker-registry/);
    } finally {
      if (saved === undefined) delete process.env.JACO_REGISTRY_BIN;
      else process.env.JACO_REGISTRY_BIN = saved;
    }
  });
});
