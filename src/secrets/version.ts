// Content-derived versions of the secrets and configs a compose file makes at apply: the same file
// applied again names the same object (nothing is written, nothing rolls), a changed one a new
// object (its services roll). A config's version is its content's SHA-256: configs are not secret.
//
// A secret's version is visible wherever its name is (specs, `jaco secret ls`, the audit log), so
// it must not let anyone confirm a guess of the value cheaply. It is scrypt (memory-hard: 32 MiB,
// ~0.1 s a guess here) over the value, salted with the deployment and the secret's compose name:
// a random value reveals nothing, and a weak password costs an attacker a password hash's price
// per guess. `jaco secret create` names nothing after the value (docs/secrets.md).
import { createHash, scryptSync } from 'node:crypto';

const VERSION_HEX = 12;
const SCRYPT = { N: 1 << 15, r: 8, p: 1, maxmem: 64 * 1024 * 1024 } as const;

/** sha256:<hex> of a config's content. */
export function configDigest(content: Buffer): string {
  return `sha256:${createHash('sha256').update(content).digest('hex')}`;
}

/** A config's version: the first 12 hex digits of its digest. */
export function configVersion(content: Buffer): string {
  return configDigest(content).slice('sha256:'.length, 'sha256:'.length + VERSION_HEX);
}

/** A secret's version: scrypt of the value, salted by where it is declared (12 hex digits). */
export function secretVersion(value: Buffer, deployment: string, name: string): string {
  const salt = Buffer.from(`jaco secret version v1\0${deployment}\0${name}`);
  return scryptSync(value, salt, VERSION_HEX / 2, SCRYPT).toString('hex');
}

/** The name a compose file's secret or config is stored under: <deployment>_<name>_<version>. */
export function composeObjectName(deployment: string, name: string, version: string): string {
  return `${deployment}_${name}_${version}`;
}
