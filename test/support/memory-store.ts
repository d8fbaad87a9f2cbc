// An in-memory key space with etcd's revision bookkeeping, for the table tests of pure controller
// cores and for the simulation. It follows the writer's compare-and-swap rules (conditionsOf /
// conditionsHold in src/store/writer.ts: one statement of them), and it is a Feed: the runtime's
// cache reads it through the same SourceState code as it reads etcd, so a controller's snapshot
// is built here exactly as in production. It never stands in for etcd in a test that claims to
// test etcd (those use test/support/etcd.ts).
import { EventEmitter } from 'node:events';
import { WATCHABLE } from '../../src/runtime/watchable.js';
import { SourceState, ValueReader, type Change, type Feed, type ReflectorEvents, type SourceSpec } from '../../src/store/reflector.js';
import { encodeJson, type Versioned } from '../../src/store/store.js';
import { conditionsHold, conditionsOf, type Fence, type Op } from '../../src/store/writer.js';
import { testLogger } from './log.js';

/** One stored change as etcd's watch reports it: a put (with the text and revisions) or a delete. */
export interface RawChange {
  rev: number;
  key: string;
  /** Undefined for a delete. */
  text?: string;
  createRevision?: number;
  version?: number;
  lease?: string;
  /** The key's mod revision before the change (0: absent). */
  prevModRevision: number;
}

/** A stored key: its raw text and etcd's revisions of it. */
export interface Stored {
  key: string;
  text: string;
  modRevision: number;
  createRevision: number;
  version: number;
  lease?: string;
}

export class MemoryStore extends EventEmitter<ReflectorEvents> implements Feed {
  rev = 1;
  private readonly data = new Map<string, Stored>();
  /** Keys by their first path segment (`desired/`, `observed/`, …): prefix reads touch one segment. */
  private readonly byTop = new Map<string, Set<string>>();
  readonly sources: Record<string, SourceState>;
  private readonly ordered: SourceState[];
  synced = true;
  /** Acts refused because a precondition no longer held. */
  conflicts = 0;
  private pending: Change[] = [];
  /** Every change, as etcd would report it (the simulation's history and watch streams). */
  onRaw?: (c: RawChange) => void;

  constructor(specs: Record<string, SourceSpec> = WATCHABLE) {
    super();
    this.setMaxListeners(100);
    const reader = new ValueReader(testLogger());
    this.sources = Object.fromEntries(Object.entries(specs).map(([n, s]) => [n, new SourceState(n, s, reader)]));
    this.ordered = Object.values(this.sources);
  }

  get revision(): number {
    return this.rev;
  }

  async start(): Promise<void> {}
  async stop(): Promise<void> {}

  // ------------------------------------------------------------------ reads

  /** The stored value (decoded afresh: callers may change it freely); a value that is not JSON, as its text. */
  get<T>(key: string): T | undefined {
    const s = this.data.get(key);
    return s ? decode<T>(s.text) : undefined;
  }

  versioned<T>(key: string): Versioned<T> | undefined {
    const s = this.data.get(key);
    return s ? { key, value: decode<T>(s.text), modRevision: s.modRevision, createRevision: s.createRevision, version: s.version, lease: s.lease } : undefined;
  }

  has(key: string): boolean {
    return this.data.has(key);
  }

  /** The stored text and revisions of a key (read-only: not a copy). */
  stored(key: string): Readonly<Stored> | undefined {
    return this.data.get(key);
  }

  /** Values under a prefix, in key order. */
  under<T>(prefix: string): Versioned<T>[] {
    return this.keys(prefix).map((k) => this.versioned<T>(k)!);
  }

  keys(prefix = ''): string[] {
    const top = topOf(prefix);
    const set = top ? this.byTop.get(top) : this.data.keys();
    return [...(set ?? [])].filter((k) => k.startsWith(prefix)).sort();
  }

  /** Another store holding the same keys at the same revisions (a snapshot that later writes do not touch). */
  clone(): MemoryStore {
    const c = new MemoryStore(Object.fromEntries(Object.entries(this.sources).map(([n, src]) => [n, src.spec])));
    c.rev = this.rev;
    for (const s of [...this.data.values()].sort((a, b) => a.modRevision - b.modRevision)) c.write(s.key, s.text, s.modRevision, s.lease, s);
    c.pending = [];
    return c;
  }

  /**
   * Every key and the revision become a snapshot's (etcd restored from it): nothing is reported,
   * as a restore reports nothing. Only for a bare key space (the simulation's etcd): a store with
   * sources is a Feed whose held state this would leave behind.
   */
  restore(snap: MemoryStore): void {
    if (this.ordered.length) throw new Error('restore: only a key space without sources');
    this.data.clear();
    this.byTop.clear();
    this.rev = snap.rev;
    for (const st of snap.data.values()) {
      this.data.set(st.key, { ...st });
      const top = topOf(st.key);
      let set = this.byTop.get(top);
      if (!set) this.byTop.set(top, (set = new Set()));
      set.add(st.key);
    }
  }

  // ------------------------------------------------------------------ writes

  /** An unconditional put, as its own revision. */
  put(key: string, value: unknown): Versioned<unknown> {
    this.commitOps([{ op: 'put', key, value }]);
    return this.versioned(key)!;
  }

  /** A raw value (not JSON, or not valid), as a hand edit with etcdctl would leave it. */
  putRaw(key: string, text: string): void {
    this.rev++;
    this.write(key, text, this.rev);
    this.flush();
  }

  /** Writes raw values (JSON text as sent; undefined deletes) as one revision: a transaction whose compares held. */
  applyRaw(writes: readonly { key: string; text?: string; lease?: string }[]): void {
    if (!writes.length) return;
    this.rev++;
    for (const w of writes) {
      if (w.text !== undefined) this.write(w.key, w.text, this.rev, w.lease);
      else this.drop(w.key);
    }
    this.flush();
  }

  remove(key: string): void {
    this.commitOps([{ op: 'delete', key }]);
  }

  /** Applies one act's ops if every precondition (and the fence) holds; true when it landed. */
  applyAct(ops: Op[], fence?: Fence): boolean {
    if (!conditionsHold(conditionsOf(ops, fence), { get: (k) => this.data.get(k), under: (p) => this.keys(p).map((k) => this.data.get(k)!) })) {
      this.conflicts++;
      return false;
    }
    this.commitOps(ops);
    return true;
  }

  /** Writes ops as one revision (one transaction), and feeds the sources one batch. */
  private commitOps(ops: Op[]): void {
    const writes = ops.filter((o) => o.op !== 'check' && o.op !== 'checkRange');
    if (!writes.length) return;
    this.rev++;
    for (const o of writes) {
      if (o.op === 'delete') this.drop(o.key);
      else {
        const w = o as Extract<Op, { value: unknown }>;
        this.write(o.key, encodeJson(w.value), this.rev, w.lease);
      }
    }
    this.flush();
  }

  /** Writes a key at `rev`; `as` keeps a copied key's create revision and version (clone). */
  private write(key: string, text: string, rev: number, lease?: string, as?: Pick<Stored, 'createRevision' | 'version'>): void {
    const prev = this.data.get(key);
    const s: Stored = { key, text, modRevision: rev, createRevision: as?.createRevision ?? prev?.createRevision ?? rev, version: as?.version ?? (prev?.version ?? 0) + 1, ...(lease ? { lease } : {}) };
    this.data.set(key, s);
    const top = topOf(key);
    let set = this.byTop.get(top);
    if (!set) this.byTop.set(top, (set = new Set()));
    set.add(key);
    this.onRaw?.({ rev, key, text, createRevision: s.createRevision, version: s.version, lease, prevModRevision: prev?.modRevision ?? 0 });
    const src = this.sourceOf(key);
    if (src) this.pending.push(src.put(key, { modRevision: s.modRevision, createRevision: s.createRevision, version: s.version, lease }, text));
  }

  /** Deletes a key at the current revision (nothing when absent). */
  private drop(key: string): void {
    const gone = this.data.get(key);
    if (!gone) return;
    this.data.delete(key);
    this.byTop.get(topOf(key))?.delete(key);
    this.onRaw?.({ rev: this.rev, key, prevModRevision: gone.modRevision });
    const c = this.sourceOf(key)?.remove(key);
    if (c) this.pending.push(c);
  }

  private flush(): void {
    const batch = this.pending;
    this.pending = [];
    if (batch.length) this.emit('batch', batch);
  }

  private sourceOf(key: string): SourceState | undefined {
    return this.ordered.find((s) => key.startsWith(s.prefix));
  }
}

const topOf = (key: string) => key.slice(0, key.indexOf('/') + 1);

function decode<T>(text: string): T {
  try {
    return JSON.parse(text) as T;
  } catch {
    return text as T;
  }
}
