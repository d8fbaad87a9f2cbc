// The simulation's secrets: a deterministic stand-in for sealing (same snapshot, same plan, same
// bytes — a seed replays), the cluster key file both controller processes read (a rotation adds a
// key to it, as a file copied to every controller host), and the Secret and Config objects `jaco
// secret create` would write. A stand-in seals by naming the key and the place: it opens only with
// that key held and in that place, as the real one does.
import { API_VERSION, type Config, type Secret } from '../../src/api/types.js';
import { OpenError, SEAL_ALGORITHM, type PublicKeyInfo, type Sealed } from '../../src/secrets/seal.js';
import type { ClusterKeys, SecretsCrypto } from '../../controllers/secrets/decide.js';

const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64');

/** What a stand-in seal holds: the place it belongs and the value (this is a simulation). */
export function simSealedOf(s: Sealed): { aad: string; v: string } {
  return JSON.parse(Buffer.from(s.data, 'base64').toString()) as { aad: string; v: string };
}

export function simSeal(value: Buffer, to: PublicKeyInfo, aad: string): Sealed {
  return { alg: SEAL_ALGORITHM, key: to.id, epk: 'c2lt', iv: 'c2lt', data: enc({ aad, v: value.toString('base64') }) };
}

/** The cluster key file of the simulated controllers, oldest key first. */
export class SimKeyFile implements SecretsCrypto {
  readonly keys: PublicKeyInfo[] = [{ id: 'ck-sim-1', publicKey: 'c2ltMQ==' }];

  clusterKeys(): ClusterKeys {
    const ids = this.keys.map((k) => k.id);
    return { primary: this.keys[this.keys.length - 1]!, has: (id) => ids.includes(id), older: (a, b) => ids.includes(a) && ids.includes(b) && ids.indexOf(a) < ids.indexOf(b) };
  }

  get primary(): PublicKeyInfo {
    return this.keys[this.keys.length - 1]!;
  }

  /** A rotation: a new key seals from now on. */
  rotate(): PublicKeyInfo {
    const k = { id: `ck-sim-${this.keys.length + 1}`, publicKey: Buffer.from(`sim${this.keys.length + 1}`).toString('base64') };
    this.keys.push(k);
    return k;
  }

  open(sealed: Sealed, aad: string): Buffer {
    if (!this.keys.some((k) => k.id === sealed.key)) throw new OpenError('unknown_key', `sealed to key ${sealed.key}, which is not held here`);
    const s = simSealedOf(sealed);
    if (s.aad !== aad) throw new OpenError('tampered', `sealed for ${s.aad}, not ${aad}`);
    return Buffer.from(s.v, 'base64');
  }

  seal(value: Buffer, to: PublicKeyInfo, aad: string): Sealed {
    return simSeal(value, to, aad);
  }
}

/** A secret as `jaco secret create` writes it (a deterministic uid: `uid-<name>`). */
export function simSecret(name: string, value: string, to: PublicKeyInfo): Secret {
  const uid = `uid-${name}`;
  return { apiVersion: API_VERSION, kind: 'Secret', metadata: { name, uid }, spec: { size: value.length, sealed: simSeal(Buffer.from(value), to, `secret/${name}/${uid}`) } };
}

export function simConfig(name: string, content: string): Config {
  return { apiVersion: API_VERSION, kind: 'Config', metadata: { name, uid: `uid-${name}` }, spec: { size: content.length, digest: `sha256:${'0'.repeat(64)}`, data: Buffer.from(content).toString('base64') } };
}
