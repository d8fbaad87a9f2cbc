// The node's WireGuard key: an X25519 key pair made with node:crypto on the agent's first start,
// the private half in `<state dir>/overlay.key` (mode 600, base64 as `wg genkey` writes it, so `wg
// set … private-key FILE` reads it there and it is never on a command line), the public half
// published on the Node. Kept apart from the node key (secrets): each key has one use.
import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { isWireGuardKey } from './overlay-decide.js';

export class OverlayKeyError extends Error {
  override name = 'OverlayKeyError';
  readonly recoverable = false;
}

/** Where an agent keeps its WireGuard private key. */
export const overlayKeyFile = (stateDir: string) => join(stateDir, 'overlay.key');

// PKCS#8 of an X25519 private key is this fixed header and the 32 raw bytes (RFC 8410).
const PKCS8_X25519 = Buffer.from('302e020100300506032b656e04220420', 'hex');

/** Curve25519 clamping, as `wg genkey` does (X25519 clamps anyway; the stored key then matches wg's). */
function clamp(k: Buffer): Buffer {
  const c = Buffer.from(k);
  c[0]! &= 248;
  c[31]! &= 127;
  c[31]! |= 64;
  return c;
}

/** The public key (base64) of a WireGuard private key (base64): what `wg pubkey` prints. */
export function wireGuardPublicKey(privateKey: string): string {
  const raw = Buffer.from(privateKey, 'base64');
  if (!isWireGuardKey(privateKey) || raw.length !== 32) throw new OverlayKeyError('not a WireGuard private key (32 bytes, base64)');
  const key = createPrivateKey({ key: Buffer.concat([PKCS8_X25519, raw]), format: 'der', type: 'pkcs8' });
  const x = createPublicKey(key).export({ format: 'jwk' }).x!;
  return Buffer.from(x, 'base64url').toString('base64');
}

/** A new private key (base64, clamped): what `wg genkey` prints. */
export function newWireGuardKey(): string {
  return clamp(randomBytes(32)).toString('base64');
}

/** The node's key pair: read from its state directory, or made there on the first start. */
export function loadOrCreateOverlayKey(stateDir: string): { keyFile: string; publicKey: string; created: boolean } {
  const keyFile = overlayKeyFile(stateDir);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  let created = false;
  if (!existsSync(keyFile)) {
    // Written whole under another name, then renamed: a reader never sees half a key.
    const tmp = `${keyFile}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, `${newWireGuardKey()}\n`);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    chmodSync(tmp, 0o600);
    renameSync(tmp, keyFile);
    created = true;
  }
  const mode = statSync(keyFile).mode & 0o777;
  if (mode & 0o077) throw new OverlayKeyError(`the overlay key ${keyFile} is readable by others (mode ${mode.toString(8)}): chmod 600 it`);
  // The text is never quoted in an error: it is a private key.
  const text = readFileSync(keyFile, 'utf8').trim();
  if (!isWireGuardKey(text)) throw new OverlayKeyError(`${keyFile} is not a WireGuard private key (32 bytes, base64, as wg genkey writes it)`);
  return { keyFile, publicKey: wireGuardPublicKey(text), created };
}
