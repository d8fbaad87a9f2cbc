// The key files: the cluster key file the controllers read (--secrets-key-file; `jaco up` makes
// one under its data directory) and each node-agent's own key in its state directory. Neither is
// ever in etcd; only their public halves are published (clusterkey, Node.status.secretsKey).
//
// A cluster key file holds every cluster key the controllers may need: the newest seals, any of
// them opens. Rotation adds a key to the file (the controllers notice the change), the secrets
// controller re-seals every secret to it, and pruning drops the keys nothing is sealed to any more
// (docs/secrets.md, "Rotating the cluster key").
import { chmodSync, closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { generateKeyPair, loadKeyPair, storeKeyPair, type KeyPair, type StoredKeyPair } from './seal.js';

const CLUSTER_FILE_KIND = 'jaco cluster key file';
const NODE_FILE_KIND = 'jaco node key file';

export class KeyFileError extends Error {
  override name = 'KeyFileError';
  readonly recoverable = false;
}

/** The cluster's keys, oldest first; the newest seals, any opens. */
export class ClusterKeyRing {
  readonly byId: ReadonlyMap<string, KeyPair>;

  constructor(readonly keys: readonly KeyPair[]) {
    if (!keys.length) throw new KeyFileError('a cluster key file holds at least one key');
    this.byId = new Map(keys.map((k) => [k.id, k]));
  }

  /** The key new seals use: the newest. */
  get primary(): KeyPair {
    return this.keys[this.keys.length - 1]!;
  }

  has(id: string): boolean {
    return this.byId.has(id);
  }

  /** Whether key `a` is older than key `b` (both held). */
  older(a: string, b: string): boolean {
    const i = this.keys.findIndex((k) => k.id === a);
    const j = this.keys.findIndex((k) => k.id === b);
    return i >= 0 && j >= 0 && i < j;
  }
}

/** Writes a file readable by its owner only, atomically (a reader never sees half of it). */
function writePrivate(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

function readJson(path: string, what: string): { kind?: string; keys?: StoredKeyPair[]; key?: StoredKeyPair } {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new KeyFileError(`cannot read the ${what} ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const mode = statSync(path).mode & 0o077;
  if (mode) throw new KeyFileError(`the ${what} ${path} is readable by others (mode ${(statSync(path).mode & 0o777).toString(8)}): chmod 600 it`);
  try {
    return JSON.parse(text) as { kind?: string; keys?: StoredKeyPair[] };
  } catch {
    // The text is never quoted: it holds private keys.
    throw new KeyFileError(`the ${what} ${path} is not a jaco key file (not JSON)`);
  }
}

/** Reads a cluster key file (keys sorted oldest first). */
export function readClusterKeys(path: string): ClusterKeyRing {
  const f = readJson(path, 'cluster key file');
  if (f.kind !== CLUSTER_FILE_KIND || !Array.isArray(f.keys)) throw new KeyFileError(`${path} is not a jaco cluster key file`);
  const keys = f.keys.map((k) => {
    try {
      return loadKeyPair(k);
    } catch (e) {
      throw new KeyFileError(`${path}: ${(e as Error).message}`);
    }
  });
  return new ClusterKeyRing([...keys].sort((a, b) => (a.created < b.created ? -1 : a.created > b.created ? 1 : a.id < b.id ? -1 : 1)));
}

function writeClusterKeys(path: string, keys: readonly KeyPair[]): void {
  writePrivate(path, `${JSON.stringify({ kind: CLUSTER_FILE_KIND, keys: keys.map(storeKeyPair) }, null, 2)}\n`);
}

/** Makes a cluster key file with one key, unless it exists; returns its keys. */
export function ensureClusterKeyFile(path: string, now = new Date()): ClusterKeyRing {
  if (!existsSync(path)) writeClusterKeys(path, [generateKeyPair('ck', now)]);
  return readClusterKeys(path);
}

/** Adds a new key to the file (it becomes the primary: it seals from now on); returns it. */
export function addClusterKey(path: string, now = new Date()): KeyPair {
  const ring = existsSync(path) ? readClusterKeys(path).keys : [];
  // A key never predates the one before it: "newest seals" must mean the one just added.
  const last = ring[ring.length - 1];
  const at = last && Date.parse(last.created) >= now.getTime() ? new Date(Date.parse(last.created) + 1) : now;
  const k = generateKeyPair('ck', at);
  writeClusterKeys(path, [...ring, k]);
  return k;
}

/** Removes the keys `drop` names from the file (never the primary); returns the ids removed. */
export function removeClusterKeys(path: string, drop: ReadonlySet<string>): string[] {
  const ring = readClusterKeys(path);
  const removed = ring.keys.filter((k) => drop.has(k.id) && k.id !== ring.primary.id).map((k) => k.id);
  if (removed.length) writeClusterKeys(path, ring.keys.filter((k) => !removed.includes(k.id)));
  return removed;
}

/**
 * The cluster key file as a running controller sees it: read again when it changes on disk (a
 * rotation adds a key without a restart). A file that goes missing or unreadable keeps the keys
 * last read, and says so once.
 */
export class ClusterKeySource {
  private ring?: ClusterKeyRing;
  private stamp = '';
  private lastError?: string;

  constructor(
    readonly path: string,
    private readonly warn: (msg: string) => void = () => undefined,
  ) {}

  /** The keys now (undefined when the file was never readable). */
  current(): ClusterKeyRing | undefined {
    let stamp: string;
    try {
      const s = statSync(this.path);
      stamp = `${s.mtimeMs}:${s.size}:${s.ino}`;
    } catch (e) {
      this.fail(`cannot read the cluster key file ${this.path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      return this.ring;
    }
    if (stamp === this.stamp) return this.ring;
    try {
      this.ring = readClusterKeys(this.path);
      this.stamp = stamp;
      this.lastError = undefined;
    } catch (e) {
      this.fail((e as Error).message);
    }
    return this.ring;
  }

  private fail(msg: string): void {
    if (this.lastError !== msg) this.warn(msg);
    this.lastError = msg;
  }
}

/** A node-agent's own key: `<state dir>/node.key`, made on the first start, mode 600, never sent anywhere. */
export function nodeKeyFile(stateDir: string): string {
  return join(stateDir, 'node.key');
}

/** The node's key pair: read from the state directory, or made there on the first start. */
export function loadOrCreateNodeKey(stateDir: string, now = new Date()): { key: KeyPair; created: boolean } {
  const path = nodeKeyFile(stateDir);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  chmodSync(stateDir, 0o700);
  if (!existsSync(path)) {
    const key = generateKeyPair('nk', now);
    writePrivate(path, `${JSON.stringify({ kind: NODE_FILE_KIND, key: storeKeyPair(key) }, null, 2)}\n`);
    return { key, created: true };
  }
  const f = readJson(path, 'node key file');
  if (f.kind !== NODE_FILE_KIND || !f.key) throw new KeyFileError(`${path} is not a jaco node key file`);
  try {
    return { key: loadKeyPair(f.key), created: false };
  } catch (e) {
    throw new KeyFileError(`${path}: ${(e as Error).message}`);
  }
}
