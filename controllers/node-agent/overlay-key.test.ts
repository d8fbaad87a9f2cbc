import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadOrCreateOverlayKey, newWireGuardKey, overlayKeyFile, wireGuardPublicKey } from './overlay-key.js';

const dirs: string[] = [];
const dir = () => {
  const d = mkdtempSync(join(tmpdir(), 'jaco-overlay-key-'));
  dirs.push(d);
  return d;
};
afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));

describe('the overlay key', () => {
  it.each([
    // RFC 7748 §6.1, Alice: the scalar unclamped as the RFC gives it (X25519 clamps).
    ['RFC 7748 §6.1', 'dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=', 'hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo='],
    // A pair from `wg genkey | tee /dev/stderr | wg pubkey` (wireguard-tools 1.0.20210914).
    ['wg genkey / wg pubkey', 'CL+o4yUmcV9P3EeFhrTHDDeFEOzX+Uj4L+KK4+JIrkA=', 'ySolR2ul2j2a9bGl0ugRZNkIsjVp9fojWb+hMz89Pks='],
  ])('derives the public key as wg pubkey does (%s)', (_, priv, pub) => {
    expect(wireGuardPublicKey(priv)).toBe(pub);
  });

  it('makes clamped keys, each different', () => {
    const a = Buffer.from(newWireGuardKey(), 'base64');
    const b = newWireGuardKey();
    expect(a).toHaveLength(32);
    expect(a[0]! & 7).toBe(0);
    expect(a[31]! & 0xc0).toBe(0x40);
    expect(b).not.toBe(a.toString('base64'));
  });

  it('refuses what is not a key', () => {
    expect(() => wireGuardPublicKey('c2hvcnQ=')).toThrow(/not a WireGuard private key/);
  });

  it('is made once in the state directory, mode 600, and read again on the next start', () => {
    const d = dir();
    const first = loadOrCreateOverlayKey(d);
    expect(first.created).toBe(true);
    expect(first.keyFile).toBe(overlayKeyFile(d));
    expect(statSync(first.keyFile).mode & 0o777).toBe(0o600);
    const text = readFileSync(first.keyFile, 'utf8');
    expect(text).toMatch(/^[A-Za-z0-9+/]{43}=\n$/);
    expect(wireGuardPublicKey(text.trim())).toBe(first.publicKey);
    const again = loadOrCreateOverlayKey(d);
    expect(again).toEqual({ ...first, created: false });
  });

  it('refuses a key file others can read, and one that holds no key, without quoting it', () => {
    const d = dir();
    const { keyFile } = loadOrCreateOverlayKey(d);
    chmodSync(keyFile, 0o644);
    expect(() => loadOrCreateOverlayKey(d)).toThrow(/readable by others \(mode 644\)/);
    writeFileSync(keyFile, 'secret-garbage\n', { mode: 0o600 });
    chmodSync(keyFile, 0o600);
    expect(() => loadOrCreateOverlayKey(d)).toThrow(/is not a WireGuard private key/);
    expect(() => loadOrCreateOverlayKey(d)).not.toThrow(/secret-garbage/);
  });
});
