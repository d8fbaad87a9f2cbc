// Reads kept between the CLI's runs. A one-shot read of a large prefix (`jaco get replicas` over
// 10,000 replicas) spends most of its time receiving and decoding values that did not change
// since the operator's last command. So the CLI keeps what it read, decoded, in a file of its
// own (one per store, reader and source) and next time asks etcd only for what changed since:
// one range filtered by mod revision, whose count (etcd counts before the filter) says whether any
// key went; only then are the keys listed, without values.
//
// The answer is the store's, never an older one: the read is at the revision of a linearizable
// read taken first, and a kept file is used only for the history it was read from —
//   - the same cluster: etcd's cluster id, and jaco's uid key (src/store/cluster.ts) with the same
//     value, created at the same revision (a store wiped and made again gets another uid, or the
//     same uid at another revision);
//   - a revision not behind the kept one (a store's revision never goes back);
//   - the same history: a member's applied raft index less its revision never falls in one
//     history (every revision is at least one applied entry), and falls by about the snapshot's
//     revision when a snapshot is restored (etcdctl snapshot restore starts a new raft log whose
//     revisions go on from the snapshot's, reusing the revisions the lost history had used);
//   - the same reading: jaco's version and build, the source's spec and the schema its values
//     were checked against (a value kept is one this build read, pruned and checked as it would now).
// Anything else (no file, another history, a file that cannot be read) reads the whole prefix, as
// without a kept file, and keeps that. Small sources are not kept: reading them costs less.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { deserialize, serialize } from 'node:v8';
import { keys } from '../api/keys.js';
import { schemas } from '../api/schema.js';
import { buildCommit, VERSION } from '../version.js';
import { deepFreeze } from './interner.js';
import { clusterUidOf } from './cluster.js';
import type { SourceSpec, Unreadable } from './source-spec.js';
import { storeReplaced } from './store-identity.js';
import type { Store, Versioned } from './store.js';

/** What a source holds (reflector.ts's SourceState, which reads through this file). */
export interface KeptHolding {
  readonly name: string;
  readonly spec: SourceSpec;
  readonly items: ReadonlyMap<string, Versioned<unknown>>;
  readonly unreadable: ReadonlyMap<string, Unreadable>;
  readonly size: number;
}

const FORMAT = 'jaco-kept-read/1';
/** Sources with fewer keys are read whole each time (a kept file would cost more than it saves). */
export const KEPT_MIN_KEYS = 256;
/** A part file older than this was left by a writer killed mid-write. */
const HALF_WRITTEN_MS = 10 * 60_000;
/** Stores (endpoints, prefix and reader) whose reads are kept; the least recently used go first. */
const KEPT_STORES = 16;

/** Which history of which store a read came from (see the file's opening comment). */
export interface StoreHistory {
  /** etcd's cluster id (a restore with another token gives another). */
  clusterId: string;
  /** The cluster's uid and the revision its key was created at. */
  uid: string;
  uidCreated: number;
  /** The answering member's applied raft index less its revision. */
  lead: number;
  /** The store's revision (of a linearizable read). */
  revision: number;
}

/** Why reads kept at `kept` are not this store's now, or undefined when they are (pure). */
export function otherHistory(kept: StoreHistory, now: StoreHistory): string | undefined {
  // What tells a reflector its store was replaced (another cluster id, a revision gone back), then what only a kept file needs.
  const replaced = storeReplaced({ clusterId: kept.clusterId, revision: kept.revision }, { cluster_id: now.clusterId, revision: String(now.revision) });
  if (replaced?.reason === 'cluster_changed') return `another etcd cluster (id ${now.clusterId}; kept: ${kept.clusterId})`;
  if (replaced) return `the store's revision went back (${kept.revision} → ${now.revision}): restored or replaced`;
  if (kept.uid !== now.uid || kept.uidCreated !== now.uidCreated) return `another cluster (uid ${now.uid} created at revision ${now.uidCreated}; kept: ${kept.uid} at ${kept.uidCreated})`;
  // Two entries of slack: the applied index and the revision are read a moment apart by etcd.
  if (now.lead < kept.lead - 2) return `another history (raft index less revision fell ${kept.lead} → ${now.lead}): a snapshot was restored`;
  return undefined;
}

/** The store's history now, from one linearizable read and the member's status; undefined when no cluster uid is stored yet. */
export async function storeHistory(store: Store): Promise<StoreHistory | undefined> {
  const key = Buffer.from(store.prefix + keys.cluster());
  const [range, status] = await Promise.all([store.client.kv.range({ key }), store.client.maintenance.status()]);
  const kv = range.kvs[0];
  const uid = kv && clusterUidOf(kv.value.toString('utf8'));
  if (!kv || !uid) return undefined;
  return { clusterId: String(range.header.cluster_id), uid, uidCreated: Number(kv.create_revision), lead: Number(status.raftAppliedIndex) - Number(status.header.revision), revision: Number(range.header.revision) };
}

/** What a kept file holds of one source: its keys as read at `revision`. */
export interface KeptSource {
  revision: number;
  items: Versioned<unknown>[];
  unreadable: Unreadable[];
}

interface KeptFile extends KeptSource {
  format: typeof FORMAT;
  reading: string;
  history: StoreHistory;
}

/** A store's directory under the root: a hash of its endpoints, prefix and reader. */
const STORE_DIR = /^[0-9a-f]{24}$/;
/** The files of a store's directory: kept sources, and one being written. */
const KEPT_FILE = /\.v8(\.\d+\.part)?$/;

/** The reads kept for one store and reader, in a directory of their own under a root shared by every store. */
export class KeptReads {
  readonly dir: string;

  /** `store`: the store's directory name (24 hex digits: the root holds nothing else of jaco's). */
  constructor(
    readonly root: string,
    store: string,
    readonly minKeys = KEPT_MIN_KEYS,
  ) {
    if (!STORE_DIR.test(store)) throw new Error(`a kept-reads store directory is named by 24 hex digits, not ${JSON.stringify(store)}`);
    this.dir = join(root, store);
  }

  /**
   * The kept reads of this store as this reader (its user or certificate): under
   * $JACO_READ_CACHE, else $XDG_CACHE_HOME/jaco/reads, else ~/.cache/jaco/reads. Undefined when
   * JACO_READ_CACHE is `off`. JACO_READ_CACHE_MIN_KEYS sets the smallest source kept.
   */
  static forStore(store: Store, env: NodeJS.ProcessEnv = process.env): KeptReads | undefined {
    if (env.JACO_READ_CACHE === 'off') return undefined;
    const root = env.JACO_READ_CACHE || join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), '.cache'), 'jaco', 'reads');
    const dir = createHash('sha256')
      .update(JSON.stringify([[...store.endpoints].sort(), store.prefix, store.reader]))
      .digest('hex')
      .slice(0, 24);
    const min = Number(env.JACO_READ_CACHE_MIN_KEYS);
    return new KeptReads(root, dir, Number.isInteger(min) && min >= 0 ? min : KEPT_MIN_KEYS);
  }

  /** Whether a source is ever kept (a bounded log, or keys without values, is read whole). */
  static keeps(spec: SourceSpec): boolean {
    return spec.newest === undefined && !spec.keysOnly;
  }

  /** The source as last kept, if it was kept from the store's history now. */
  load(name: string, spec: SourceSpec, now: StoreHistory): KeptSource | undefined {
    let kept: KeptFile;
    try {
      kept = deserialize(readFileSync(this.file(name))) as KeptFile;
    } catch {
      return undefined; // none yet, or unreadable: read whole, kept again
    }
    if (kept?.format !== FORMAT || kept.reading !== reading(spec) || !kept.history || otherHistory(kept.history, now) !== undefined) return undefined;
    // A file of the right format but the wrong shape (damaged, or written by hand) is read whole.
    if (!Number.isInteger(kept.revision) || !Array.isArray(kept.items) || !Array.isArray(kept.unreadable)) return undefined;
    if (!kept.items.every((i) => typeof i?.key === 'string' && Number.isInteger(i.modRevision)) || !kept.unreadable.every((u) => typeof u?.key === 'string' && Number.isInteger(u.modRevision))) return undefined;
    // Held once and frozen, as a reflector holds them (the interner): a deserialized file keeps
    // the sharing, not the freezing.
    for (const path of spec.share ?? []) for (const item of kept.items) deepFreeze(at(item.value, path));
    return { revision: kept.revision, items: kept.items, unreadable: kept.unreadable };
  }

  /** Keeps what a source holds as read at `revision` (a small source: its file goes). */
  save(src: KeptHolding, now: StoreHistory, revision: number): void {
    const file = this.file(src.name);
    if (src.size < this.minKeys) {
      rmSync(file, { force: true });
      return;
    }
    const kept: KeptFile = { format: FORMAT, reading: reading(src.spec), history: now, revision, items: [...src.items.values()], unreadable: [...src.unreadable.values()] };
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Written aside and renamed: a reader never meets half a file, two writers leave one whole.
    const tmp = `${file}.${process.pid}.part`;
    try {
      writeFileSync(tmp, serialize(kept), { mode: 0o600 });
      renameSync(tmp, file);
    } catch {
      rmSync(tmp, { force: true }); // a full disk or a read-only home: the next read is whole
    }
    this.forgetHalfWritten();
    this.forgetOldStores();
  }

  private file(name: string): string {
    return join(this.dir, `${name}.v8`);
  }

  /** Removes what a writer killed mid-write left (a part file older than a writer ever takes). */
  private forgetHalfWritten(): void {
    try {
      for (const f of readdirSync(this.dir))
        if (f.endsWith('.part') && KEPT_FILE.test(f) && statSync(join(this.dir, f)).mtimeMs < Date.now() - HALF_WRITTEN_MS) rmSync(join(this.dir, f), { force: true });
    } catch {
      // removed meanwhile
    }
  }

  /**
   * Keeps the reads of the KEPT_STORES stores used last (a test suite meets a new store per file).
   * Only what jaco wrote goes: directories named as a store's, and in them kept files (a root
   * named by JACO_READ_CACHE may hold other things; a directory holding anything else stays).
   */
  private forgetOldStores(): void {
    try {
      const stores = readdirSync(this.root, { withFileTypes: true })
        .filter((e) => e.isDirectory() && STORE_DIR.test(e.name))
        .map((e) => ({ dir: join(this.root, e.name), at: statSync(join(this.root, e.name)).mtimeMs }));
      if (stores.length <= KEPT_STORES) return;
      stores.sort((a, b) => b.at - a.at);
      for (const { dir } of stores.slice(KEPT_STORES)) {
        if (dir === this.dir) continue;
        try {
          const files = readdirSync(dir);
          if (files.some((f) => !KEPT_FILE.test(f))) continue; // it holds something not jaco's: it stays, whole
          for (const f of files) rmSync(join(dir, f), { force: true });
          rmdirSync(dir);
        } catch {
          // another reader pruned it meanwhile, or wrote to it
        }
      }
    } catch {
      // the root went meanwhile
    }
  }
}

/** What a kept value was read as: this jaco's version and build, the source's spec, its kind's schema. */
function reading(spec: SourceSpec): string {
  let r = readings.get(spec);
  if (r === undefined) readings.set(spec, (r = readingOf(spec)));
  return r;
}
/** Computed once per spec object a process reads with (a load and a save of a source share it). */
const readings = new WeakMap<SourceSpec, string>();

function readingOf(spec: SourceSpec): string {
  const schema = spec.kind && spec.validate !== false ? schemas().schemaOf(spec.kind) : undefined;
  return createHash('sha256')
    .update(JSON.stringify([VERSION, buildCommit(), spec, schema ?? null]))
    .digest('hex');
}

function at(value: unknown, path: readonly string[]): unknown {
  let v = value;
  for (const p of path) v = v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[p] : undefined;
  return v;
}
