// Sealing: how every secret value is encrypted, at rest and on its way to a node. One construction
// for both — an ECIES over X25519: a fresh ephemeral key pair per seal, ECDH with the recipient's
// public key, HKDF-SHA256 to a 256-bit key, AES-256-GCM over the value (node:crypto throughout).
// The recipient is the cluster key (values at rest in secrets/) or a node's own key (its copies in
// copies/<node>/). Sealing needs only a public key, so whoever writes a secret (the CLI) never
// holds a key that opens one; opening needs the private key, which only the controllers (the
// cluster key file) or the one node (its state directory) hold.
//
// The additional data (`aad`) names where a sealed value belongs (`secret/NAME/UID`,
// `copy/NODE/secret/NAME/UID`): a ciphertext moved to another key, name or node does not open.
import { createCipheriv, createDecipheriv, createHash, createPrivateKey, createPublicKey, diffieHellman, generateKeyPairSync, hkdfSync, randomBytes, type KeyObject } from 'node:crypto';

export const SEAL_ALGORITHM = 'X25519-HKDF-SHA256-A256GCM';
const INFO = Buffer.from('jaco sealed value v1');
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** A sealed value as it is stored (every binary field base64). */
export interface Sealed {
  alg: typeof SEAL_ALGORITHM;
  /** The id of the recipient's key (a cluster key id, or a node key id). */
  key: string;
  /** The ephemeral X25519 public key (32 bytes). */
  epk: string;
  /** The AES-GCM nonce (12 bytes). */
  iv: string;
  /** The ciphertext with its 16-byte tag appended. */
  data: string;
}

/** Why a sealed value did not open: no key of that id here, or it was altered, or sealed for another place. */
export type OpenFailure = 'unknown_key' | 'tampered';

export class OpenError extends Error {
  override name = 'OpenError';
  readonly recoverable = false;
  constructor(readonly reason: OpenFailure, message: string) {
    super(message);
  }
}

/** A key pair's public half, as stored and published: its id and its raw 32 bytes, base64. */
export interface PublicKeyInfo {
  id: string;
  publicKey: string;
}

/** An X25519 key pair with an id (a cluster key, or a node key). */
export interface KeyPair extends PublicKeyInfo {
  /** When it was made (RFC 3339): the newest cluster key seals. */
  created: string;
  privateKey: KeyObject;
}

const b64url = (b: Buffer) => b.toString('base64url');

/** The raw 32 bytes of an X25519 public key. */
export function rawPublic(key: KeyObject): Buffer {
  return Buffer.from(key.export({ format: 'jwk' }).x!, 'base64url');
}

function rawPrivate(key: KeyObject): Buffer {
  return Buffer.from(key.export({ format: 'jwk' }).d!, 'base64url');
}

/** An X25519 public key from its raw bytes (base64). Throws on anything but 32 bytes. */
export function publicKeyOf(raw: string): KeyObject {
  const bytes = Buffer.from(raw, 'base64');
  if (bytes.length !== 32) throw new Error(`an X25519 public key is 32 bytes, got ${bytes.length}`);
  return createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url(bytes) }, format: 'jwk' });
}

function privateKeyOf(rawPriv: string, rawPub: string): KeyObject {
  return createPrivateKey({ key: { kty: 'OKP', crv: 'X25519', x: b64url(Buffer.from(rawPub, 'base64')), d: b64url(Buffer.from(rawPriv, 'base64')) }, format: 'jwk' });
}

/** A short, stable name of a public key: the first 8 bytes of its SHA-256, hex. */
export function keyFingerprint(rawPublicKey: string): string {
  return createHash('sha256').update(Buffer.from(rawPublicKey, 'base64')).digest('hex').slice(0, 16);
}

/** A new X25519 key pair; its id is `<prefix>-<fingerprint>`. */
export function generateKeyPair(prefix: string, now = new Date()): KeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('x25519');
  const pub = rawPublic(publicKey).toString('base64');
  return { id: `${prefix}-${keyFingerprint(pub)}`, created: now.toISOString(), publicKey: pub, privateKey };
}

/** A key pair as written to its file (the private key's raw bytes, base64). */
export interface StoredKeyPair extends PublicKeyInfo {
  created: string;
  privateKey: string;
}

export function storeKeyPair(k: KeyPair): StoredKeyPair {
  return { id: k.id, created: k.created, publicKey: k.publicKey, privateKey: rawPrivate(k.privateKey).toString('base64') };
}

/** A key pair read back from its file; throws when its halves do not belong together. */
export function loadKeyPair(s: StoredKeyPair): KeyPair {
  const privateKey = privateKeyOf(s.privateKey, s.publicKey);
  if (rawPublic(createPublicKey(privateKey)).toString('base64') !== s.publicKey) throw new Error(`key ${s.id}: its private key does not match its public key`);
  return { id: s.id, created: s.created, publicKey: s.publicKey, privateKey };
}

function contentKey(shared: Buffer, epk: Buffer, recipient: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([epk, recipient]), INFO, 32));
}

/** Seals `value` to a recipient's public key; `aad` names where the sealed value belongs. */
export function seal(value: Buffer, to: PublicKeyInfo, aad: string): Sealed {
  const recipient = Buffer.from(to.publicKey, 'base64');
  const eph = generateKeyPairSync('x25519');
  const epk = rawPublic(eph.publicKey);
  const shared = diffieHellman({ privateKey: eph.privateKey, publicKey: publicKeyOf(to.publicKey) });
  const key = contentKey(shared, epk, recipient);
  const iv = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(aad));
  const data = Buffer.concat([cipher.update(value), cipher.final(), cipher.getAuthTag()]);
  key.fill(0);
  shared.fill(0);
  return { alg: SEAL_ALGORITHM, key: to.id, epk: epk.toString('base64'), iv: iv.toString('base64'), data: data.toString('base64') };
}

/**
 * Opens a sealed value with whichever of `keys` it was sealed to. Throws OpenError: unknown_key
 * when none of them is its key, tampered when the ciphertext, nonce, ephemeral key or `aad` is not
 * what was sealed (AES-GCM's tag fails). The message never holds any part of the value.
 */
export function open(sealed: Sealed, keys: ReadonlyMap<string, KeyPair> | KeyPair, aad: string): Buffer {
  const k = 'privateKey' in keys ? (keys.id === sealed.key ? (keys as KeyPair) : undefined) : (keys as ReadonlyMap<string, KeyPair>).get(sealed.key);
  if (!k) throw new OpenError('unknown_key', `sealed to key ${sealed.key}, which is not held here`);
  if (sealed.alg !== SEAL_ALGORITHM) throw new OpenError('tampered', `unknown algorithm ${JSON.stringify(sealed.alg)}`);
  const epk = Buffer.from(sealed.epk, 'base64');
  const iv = Buffer.from(sealed.iv, 'base64');
  const data = Buffer.from(sealed.data, 'base64');
  if (epk.length !== 32 || iv.length !== NONCE_BYTES || data.length < TAG_BYTES) throw new OpenError('tampered', 'the sealed value is malformed');
  let shared: Buffer;
  try {
    shared = diffieHellman({ privateKey: k.privateKey, publicKey: publicKeyOf(sealed.epk) });
  } catch {
    throw new OpenError('tampered', 'the ephemeral key is not a valid X25519 key');
  }
  const key = contentKey(shared, epk, Buffer.from(k.publicKey, 'base64'));
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
    return Buffer.concat([decipher.update(data.subarray(0, data.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new OpenError('tampered', `the sealed value does not open (altered, or sealed for another place than ${aad})`);
  } finally {
    key.fill(0);
    shared.fill(0);
  }
}

/** Where a secret's value at rest belongs (its additional data). */
export const secretAad = (name: string, uid: string) => `secret/${name}/${uid}`;
/** Where a node's copy belongs. */
export const copyAad = (node: string, kind: string, name: string, uid: string) => `copy/${node}/${kind}/${name}/${uid}`;
