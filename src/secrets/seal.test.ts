import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { addClusterKey, ClusterKeySource, ensureClusterKeyFile, KeyFileError, loadOrCreateNodeKey, nodeKeyFile, readClusterKeys, removeClusterKeys } from './keyfile.js';
import { copyAad, generateKeyPair, open, OpenError, seal, secretAad, type Sealed } from './seal.js';
import { composeObjectName, configDigest, configVersion, secretVersion } from './version.js';

const value = Buffer.from('correct horse battery staple\n');
const aad = secretAad('db_password', 'uid-1');

/** Flips one bit of a base64 field. */
function flip(b64: string, byte = 0): string {
  const b = Buffer.from(b64, 'base64');
  b[byte] = b[byte]! ^ 1;
  return b.toString('base64');
}

const failure = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return e instanceof OpenError ? e.reason : `not an OpenError: ${(e as Error).message}`;
  }
  return 'opened';
};

describe('seal and open (X25519 + HKDF-SHA256 + AES-256-GCM)', () => {
  const k = generateKeyPair('ck');
  const other = generateKeyPair('ck');

  it('round trip: what is sealed to a key opens with it, in the same place', () => {
    const s = seal(value, k, aad);
    expect(s).toMatchObject({ alg: 'X25519-HKDF-SHA256-A256GCM', key: k.id });
    expect(open(s, k, aad).equals(value)).toBe(true);
    expect(open(s, new Map([[k.id, k]]), aad).equals(value)).toBe(true);
    // Empty values and large ones too.
    expect(open(seal(Buffer.alloc(0), k, aad), k, aad).length).toBe(0);
    const big = Buffer.alloc(500 * 1024, 7);
    expect(open(seal(big, k, aad), k, aad).equals(big)).toBe(true);
  });

  it('every seal is fresh: the same value sealed twice shares no bytes of ciphertext, nonce or ephemeral key', () => {
    const [a, b] = [seal(value, k, aad), seal(value, k, aad)];
    expect(a.data).not.toBe(b.data);
    expect(a.iv).not.toBe(b.iv);
    expect(a.epk).not.toBe(b.epk);
  });

  it('the sealed form holds no part of the value', () => {
    const s = seal(value, k, aad);
    const text = JSON.stringify(s);
    expect(text).not.toContain('horse');
    expect(Buffer.from(s.data, 'base64').includes(Buffer.from('horse'))).toBe(false);
  });

  const cases: [string, (s: Sealed) => Sealed, string, string?][] = [
    ['the wrong key (another key of the same id space)', (s) => s, 'unknown_key'],
    ['a flipped ciphertext bit', (s) => ({ ...s, data: flip(s.data, 3) }), 'tampered'],
    ['a flipped tag bit', (s) => ({ ...s, data: flip(s.data, Buffer.from(s.data, 'base64').length - 1) }), 'tampered'],
    ['a flipped nonce bit', (s) => ({ ...s, iv: flip(s.iv) }), 'tampered'],
    ['another ephemeral key', (s) => ({ ...s, epk: generateKeyPair('x').publicKey }), 'tampered'],
    ['a truncated ciphertext', (s) => ({ ...s, data: Buffer.from(s.data, 'base64').subarray(0, 10).toString('base64') }), 'tampered'],
    ['another place (aad): a secret renamed by hand', (s) => s, 'tampered', secretAad('other', 'uid-1')],
    ['another place (aad): a copy moved to another node', (s) => s, 'tampered', copyAad('node-2', 'secret', 'db_password', 'uid-1')],
  ];
  it.each(cases)('refuses %s', (what, change, reason, otherAad) => {
    const s = change(seal(value, k, aad));
    const keys = what.startsWith('the wrong key') ? other : k;
    expect(failure(() => open(s, keys, otherAad ?? aad))).toBe(reason);
  });

  it('an error never carries the value', () => {
    const s = seal(value, k, aad);
    const errors = [() => open({ ...s, data: flip(s.data) }, k, aad), () => open(s, other, aad), () => open(s, k, 'elsewhere')].map((fn) => {
      try {
        fn();
      } catch (e) {
        return e as Error;
      }
      return undefined;
    });
    for (const e of errors) {
      expect(e).toBeInstanceOf(OpenError);
      expect(e!.message).not.toContain('horse');
    }
  });
});

describe('the cluster key file and rotation', () => {
  const dirs: string[] = [];
  const tmp = () => {
    const d = mkdtempSync(join(tmpdir(), 'jaco-keys-'));
    dirs.push(d);
    return d;
  };
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('is made once, private (mode 600), holding one key; made again it is kept', () => {
    const f = join(tmp(), 'sub', 'secrets.key');
    const a = ensureClusterKeyFile(f);
    expect(statSync(f).mode & 0o777).toBe(0o600);
    expect(a.keys).toHaveLength(1);
    expect(ensureClusterKeyFile(f).primary.id).toBe(a.primary.id);
  });

  it('rotation: the newest key seals, every key opens; pruning keeps the primary', () => {
    const f = join(tmp(), 'secrets.key');
    const first = ensureClusterKeyFile(f, new Date('2026-01-01T00:00:00Z')).primary;
    const old = seal(value, first, aad);
    const second = addClusterKey(f, new Date('2026-01-01T00:00:00Z'));
    const ring = readClusterKeys(f);
    expect(ring.keys.map((k) => k.id)).toEqual([first.id, second.id]);
    expect(ring.primary.id).toBe(second.id);
    expect(ring.older(first.id, second.id)).toBe(true);
    // Sealed under the old key: still opens with the ring; re-sealed under the new one.
    const reopened = open(old, ring.byId, aad);
    const resealed = seal(reopened, ring.primary, aad);
    expect(resealed.key).toBe(second.id);
    // The old key pruned: the re-sealed value opens, the old one no longer does.
    expect(removeClusterKeys(f, new Set([first.id, second.id]))).toEqual([first.id]);
    const pruned = readClusterKeys(f);
    expect(open(resealed, pruned.byId, aad).equals(value)).toBe(true);
    expect(failure(() => open(old, pruned.byId, aad))).toBe('unknown_key');
  });

  it('refuses a file others can read, or one that is not a key file — without quoting it', () => {
    const d = tmp();
    const f = join(d, 'secrets.key');
    ensureClusterKeyFile(f);
    chmodSync(f, 0o644);
    expect(() => readClusterKeys(f)).toThrow(/readable by others.*chmod 600/);
    writeFileSync(f, 'not json, maybe a private key', { mode: 0o600 });
    chmodSync(f, 0o600);
    expect(() => readClusterKeys(f)).toThrow(KeyFileError);
    try {
      readClusterKeys(f);
    } catch (e) {
      expect((e as Error).message).not.toContain('private key');
    }
  });

  it('a running controller sees a key added to its file without a restart, and keeps its keys when the file goes away', () => {
    const f = join(tmp(), 'secrets.key');
    ensureClusterKeyFile(f, new Date('2026-01-01T00:00:00Z'));
    const warnings: string[] = [];
    const src = new ClusterKeySource(f, (m) => warnings.push(m));
    const before = src.current()!.primary.id;
    const added = addClusterKey(f, new Date('2026-02-01T00:00:00Z'));
    expect(src.current()!.primary.id).toBe(added.id);
    expect(src.current()!.has(before)).toBe(true);
    rmSync(f);
    expect(src.current()!.primary.id).toBe(added.id);
    src.current();
    expect(warnings).toHaveLength(1);
  });
});

describe("a node's own key", () => {
  it('is made in the state directory on the first start (mode 600, directory 700) and read back after', () => {
    const d = join(mkdtempSync(join(tmpdir(), 'jaco-node-')), 'state');
    try {
      const a = loadOrCreateNodeKey(d);
      expect(a.created).toBe(true);
      expect(statSync(nodeKeyFile(d)).mode & 0o777).toBe(0o600);
      expect(statSync(d).mode & 0o777).toBe(0o700);
      const b = loadOrCreateNodeKey(d);
      expect(b.created).toBe(false);
      expect(b.key.id).toBe(a.key.id);
      const s = seal(value, a.key, copyAad('n1', 'secret', 's', 'u'));
      expect(open(s, b.key, copyAad('n1', 'secret', 's', 'u')).equals(value)).toBe(true);
      expect(readFileSync(nodeKeyFile(d), 'utf8')).toContain(a.key.publicKey);
    } finally {
      rmSync(join(d, '..'), { recursive: true, force: true });
    }
  });
});

describe('content-derived versions', () => {
  it('a config is named by its content; the same content, the same name', () => {
    const c = Buffer.from('listen 80;\n');
    expect(configDigest(c)).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(configVersion(c)).toBe(configDigest(c).slice(7, 19));
    expect(configVersion(Buffer.from('listen 81;\n'))).not.toBe(configVersion(c));
  });

  it("a secret's version is stable, changes with the value, and is salted by where it is declared", () => {
    const v = secretVersion(value, 'shop', 'db_password');
    expect(v).toMatch(/^[0-9a-f]{12}$/);
    expect(secretVersion(value, 'shop', 'db_password')).toBe(v);
    expect(secretVersion(Buffer.from('other'), 'shop', 'db_password')).not.toBe(v);
    expect(secretVersion(value, 'blog', 'db_password')).not.toBe(v);
    expect(secretVersion(value, 'shop', 'api_key')).not.toBe(v);
    // Not a plain hash of the value: a lookup table of SHA-256 digests finds nothing.
    expect(configVersion(value)).not.toBe(v);
    expect(composeObjectName('shop', 'db_password', v)).toBe(`shop_db_password_${v}`);
  });
});
