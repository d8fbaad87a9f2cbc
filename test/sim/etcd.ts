// The simulation's etcd: the in-memory key space (test/support/memory-store.ts) with what the
// runtime's own etcd code needs around it — a history for watches from a revision, compaction,
// ranges at a past revision (the reflector's consistency check), and transactions whose compares
// are read back and evaluated by the writer's own code (conditionOfCompare, conditionsHold). The
// runtime's real Reflector, Cache, Runner and commitEach run on it unchanged, each simulated
// process through its own client; the faults are the ones etcd and the network really produce:
// a watch that lags, drops (the reflector makes a new one from its own revision), loses events (a
// client bug: healed by the consistency check), or is cancelled because its next revision was
// compacted; a commit whose reply is lost; the whole store restored from a snapshot taken earlier
// (its revision goes backwards: every connection drops, and comes back to the older store).
import { EventEmitter } from 'node:events';
import type { ICompare, IKeyValue, IRequestOp, IResponseHeader, IWatchResponse } from '../../src/store/wire.js';
import { ValueReader, type SourceState } from '../../src/store/reflector.js';
import { MAX_REQUEST_BYTES, MAX_TXN_OPS, type RangeFacts, type Store } from '../../src/store/store.js';
import { conditionOfCompare, conditionsHold, type Condition, type KeySpace } from '../../src/store/writer.js';
import { MemoryStore, type RawChange, type Stored } from '../support/memory-store.js';

/** A transaction that landed: who sent it, its compares, and its writes (key → text, or undefined for a delete). */
export interface LandedTxn {
  rev: number;
  /** The simulated process whose client sent it. */
  client: string;
  conditions: Condition[];
  writes: Map<string, string | undefined>;
}

/** Keys a whole-store watch carries that no cache holds: sent as progress only (the reflector skips them anyway). */
const UNWATCHED = ['audit/', 'leaders/'];

export class CompactedError extends Error {
  override name = 'CompactedError';
}

/**
 * The runtime's value reader, shared by the simulated processes and remembering the last value it
 * read per key: both caches (and every relist) hold the one decoded object, as the controllers of
 * one process do — decoding is the same code, done once.
 */
export class SharedReader extends ValueReader {
  private readonly memo = new Map<string, { text: string; read: ReturnType<ValueReader['read']> }>();

  override read(src: SourceState, key: string, text: string): ReturnType<ValueReader['read']> {
    const k = `${src.name}\u0000${key}`;
    const m = this.memo.get(k);
    if (m && m.text === text) return m.read;
    const read = super.read(src, key, text);
    this.memo.set(k, { text, read });
    return read;
  }
}

export class SimEtcd implements KeySpace {
  /** The key space now (writes go through it; reads of the truth too). */
  readonly kv = new MemoryStore({});
  /** Every change since the compaction point, in revision order. */
  private history: RawChange[] = [];
  compacted = 0;
  private readonly watchers = new Set<SimWatcher>();
  private leases = 0;
  /** Called with every landed transaction, before anyone reads what it wrote. */
  onTxn?: (t: LandedTxn) => void;
  /** Per first path segment (`desired/`, …), the last revision that changed a key under it. */
  private readonly changed = new Map<string, number>();

  constructor() {
    this.kv.onRaw = (c) => {
      this.changed.set(c.key.slice(0, c.key.indexOf('/') + 1), c.rev);
      this.history.push(c);
      for (const w of this.watchers) w.offer(c);
    };
  }

  get rev(): number {
    return this.kv.rev;
  }

  // KeySpace, for conditionsHold
  get(key: string): Readonly<Stored> | undefined {
    return this.kv.stored(key);
  }

  /**
   * The last revision that changed a key under the prefix's first path segment (0: none yet; a
   * prefix without one: the store's revision): what was read under the prefix at or after it is
   * still what the store holds.
   */
  changedAt(prefix: string): number {
    const slash = prefix.indexOf('/');
    return slash < 0 ? this.rev : (this.changed.get(prefix.slice(0, slash + 1)) ?? 0);
  }

  /** Keys under a prefix, in key order (read-only: shared by every read until a key under the prefix's segment changes). */
  keys(prefix: string): readonly string[] {
    const rev = this.changedAt(prefix);
    const held = this.keysAt.get(prefix);
    if (held?.rev === rev) return held.keys;
    const ks = this.kv.keys(prefix);
    this.keysAt.set(prefix, { rev, keys: ks });
    return ks;
  }

  private readonly keysAt = new Map<string, { rev: number; keys: readonly string[] }>();

  *under(prefix: string): Iterable<Readonly<Stored>> {
    for (const k of this.keys(prefix)) yield this.kv.stored(k)!;
  }

  /** The store as it is now, to restore later (etcdctl snapshot save). */
  snapshot(): SimSnapshot {
    return { kv: this.kv.clone(), history: [...this.history], compacted: this.compacted, changed: new Map(this.changed) };
  }

  /**
   * The store becomes the snapshot (etcdctl snapshot restore, and etcd restarted on it): its keys,
   * revision and history go back, and every watch is cut as a restart cuts it. What was written
   * after the snapshot is gone; the next write takes a revision that was used before.
   */
  restore(snap: SimSnapshot): void {
    this.kv.restore(snap.kv);
    this.history = [...snap.history];
    this.compacted = snap.compacted;
    this.changed.clear();
    for (const [k, v] of snap.changed) this.changed.set(k, v);
    this.keysAt.clear();
    for (const w of [...this.watchers]) w.disconnect();
  }

  /** Forgets history up to `rev`: watches that still need it are cancelled, as etcd cancels them. */
  compact(rev: number): void {
    if (rev <= this.compacted) return;
    this.compacted = rev;
    this.history = this.history.filter((c) => c.rev > rev);
    for (const w of this.watchers) w.compactedAt(rev);
  }

  /** Events after `from` (exclusive) under a prefix. */
  since(from: number, prefix: string): RawChange[] {
    if (from < this.compacted) throw new CompactedError(`required revision ${from + 1} has been compacted (compacted at ${this.compacted})`);
    return this.history.filter((c) => c.rev > from && c.key.startsWith(prefix));
  }

  /** Count and newest mod revision of the keys under a prefix as they were at `rev`, and those changed after `since`. */
  factsAt(prefix: string, rev: number, since?: number): RangeFacts {
    if (rev > this.rev) throw new Error('etcdserver: mvcc: required revision is a future revision');
    if (rev < this.compacted) throw new CompactedError(`revision ${rev} has been compacted`);
    // Keys changed after rev, with their mod revision at rev (undefined: absent then): walking
    // back, the earliest change after rev is the last one set.
    const then = new Map<string, number | undefined>();
    for (let i = this.history.length - 1; i >= 0 && this.history[i]!.rev > rev; i--) {
      const c = this.history[i]!;
      if (c.key.startsWith(prefix)) then.set(c.key, c.prevModRevision || undefined);
    }
    let count = 0;
    let newest = 0;
    const changed: { key: string; modRevision: number }[] = [];
    const at = (key: string, modRevision: number | undefined) => {
      if (modRevision === undefined) return;
      count++;
      if (modRevision > newest) newest = modRevision;
      if (since !== undefined && modRevision > since) changed.push({ key, modRevision });
    };
    for (const k of this.keys(prefix)) if (!then.has(k)) at(k, this.get(k)!.modRevision);
    for (const [k, m] of then) at(k, m);
    return { count, newest, ...(since === undefined ? {} : { changed }) };
  }

  kvOf(key: string, withValue = true): IKeyValue {
    const c = this.get(key)!;
    return {
      key: Buffer.from(key),
      value: withValue ? Buffer.from(c.text) : Buffer.alloc(0),
      mod_revision: String(c.modRevision),
      create_revision: String(c.createRevision),
      version: String(c.version),
      lease: c.lease ?? '0',
    } as IKeyValue;
  }

  /** A process's connection: the Store surface the runtime's reflector, audit log and writer use. */
  client(name: string, faults: ClientFaults): Store {
    const etcd = this;
    const store = {
      prefix: '',
      async listRaw(prefix: string, atRevision?: number, opts: { keysOnly?: boolean; onPage?: (kvs: IKeyValue[]) => void; onHeader?: (h: IResponseHeader) => void } = {}) {
        // Lists run between two simulated steps, so "now" is the revision asked for.
        if (atRevision !== undefined && atRevision !== etcd.rev) throw new Error(`sim etcd: a list at past revision ${atRevision} (now ${etcd.rev})`);
        opts.onHeader?.(etcd.header());
        const kvs = etcd.keys(prefix).map((k) => etcd.kvOf(k, !opts.keysOnly));
        if (opts.onPage) opts.onPage(kvs);
        return { kvs: opts.onPage ? [] : kvs, revision: etcd.rev };
      },
      async header() {
        return etcd.header();
      },
      async rangeFacts(prefix: string, revision: number, changedSince?: number) {
        return etcd.factsAt(prefix, revision, changedSince);
      },
      async grantLease() {
        return String(++etcd.leases);
      },
      client: {
        watch: () => new WatchBuilder(etcd, faults),
        kv: { txn: async (req: { compare: ICompare[]; success: IRequestOp[]; failure: IRequestOp[] }) => etcd.txn(name, req, faults) },
      },
    };
    return store as unknown as Store;
  }

  private txn(client: string, req: { compare: ICompare[]; success: IRequestOp[]; failure: IRequestOp[] }, faults: ClientFaults) {
    const bytes = req.success.reduce((n, o) => n + (o.request_put ? Buffer.byteLength(o.request_put.key as Buffer) + (o.request_put.value as Buffer).length : 64), 0);
    if (bytes > MAX_REQUEST_BYTES) throw new Error('etcdserver: request is too large');
    // etcd's --max-txn-ops bounds compares, success and failure ops each on its own.
    if (Math.max(req.compare.length, req.success.length, req.failure.length) > MAX_TXN_OPS) throw new Error('etcdserver: too many operations in txn request');
    const conditions = req.compare.map((c) => conditionOfCompare(c));
    if (!conditionsHold(conditions, this)) {
      const responses = req.failure.map((o) => {
        const key = (o.request_range!.key as Buffer).toString();
        return { response_range: { kvs: this.get(key) ? [this.kvOf(key)] : [] } };
      });
      return { succeeded: false, responses, header: { revision: String(this.rev) } };
    }
    const writes = new Map<string, string | undefined>();
    const raw = req.success.map((o) => {
      if (o.request_delete_range) {
        const key = (o.request_delete_range.key as Buffer).toString();
        writes.set(key, undefined);
        return { key };
      }
      const p = o.request_put!;
      const key = (p.key as Buffer).toString();
      const text = (p.value as Buffer).toString();
      writes.set(key, text);
      return { key, text, ...(p.lease ? { lease: String(p.lease) } : {}) };
    });
    this.onTxn?.({ rev: this.rev + 1, client, conditions, writes });
    this.kv.applyRaw(raw);
    if (faults.loseNextReply) {
      faults.loseNextReply = false;
      throw new Error('sim etcd: the reply was lost (the commit landed)');
    }
    return { succeeded: true, responses: [], header: { revision: String(this.rev) } };
  }

  /** A reply's header: the revision now (one cluster, one member: the ids stay). */
  header(): IResponseHeader {
    return { cluster_id: 'sim', member_id: 'sim', revision: String(this.rev), raft_term: '2' };
  }

  register(w: SimWatcher): void {
    this.watchers.add(w);
  }

  unregister(w: SimWatcher): void {
    this.watchers.delete(w);
  }
}

/** A change as a watch event (made once, shared by every watch that carries it: read-only). */
const events = new WeakMap<RawChange, object>();
function eventOf(c: RawChange): object {
  let e = events.get(c);
  if (!e) {
    e = {
      type: c.text === undefined ? 'Delete' : 'Put',
      kv: {
        key: Buffer.from(c.key),
        value: Buffer.from(c.text ?? ''),
        mod_revision: String(c.rev),
        create_revision: String(c.createRevision ?? 0),
        version: String(c.version ?? 0),
        lease: c.lease ?? '0',
      },
    };
    events.set(c, e);
  }
  return e;
}

/** The store at one moment (SimEtcd.snapshot), to restore it later. */
export interface SimSnapshot {
  kv: MemoryStore;
  history: RawChange[];
  compacted: number;
  changed: Map<string, number>;
}

/** Faults of one process's connection, set by the simulation. */
export interface ClientFaults {
  /** The next commit lands but its reply is lost. */
  loseNextReply?: boolean;
  /** The process's open watches (the simulation delivers, delays, drops and cuts them). */
  watchers: Set<SimWatcher>;
}

class WatchBuilder {
  private p = '';
  private start = 0;
  constructor(
    private readonly etcd: SimEtcd,
    private readonly faults: ClientFaults,
  ) {}
  prefix(p: string): this {
    this.p = p;
    return this;
  }
  startRevision(r: string): this {
    this.start = Number(r);
    return this;
  }
  watcher(): SimWatcher {
    return new SimWatcher(this.etcd, this.faults, this.p, this.start);
  }
}

/**
 * One watch: created from a start revision (catching up from history), then fed every change.
 * Events wait in a queue until the simulation delivers them (a slow stream is a lagging cache).
 */
export class SimWatcher extends EventEmitter {
  private queue: RawChange[] = [];
  private open = true;

  constructor(
    private readonly etcd: SimEtcd,
    private readonly faults: ClientFaults,
    readonly prefix: string,
    start: number,
  ) {
    super();
    try {
      this.queue = etcd.since(start - 1, prefix);
    } catch (e) {
      this.open = false;
      queueMicrotask(() => this.emit('error', e));
      return;
    }
    etcd.register(this);
    faults.watchers.add(this);
    queueMicrotask(() => this.open && this.emit('connected', { header: etcd.header(), events: [] }));
  }

  offer(c: RawChange): void {
    if (c.key.startsWith(this.prefix)) this.queue.push(c);
  }

  compactedAt(rev: number): void {
    if (this.queue.length && this.queue[0]!.rev <= rev) {
      this.close();
      this.emit('error', new CompactedError(`watch cancelled: its next revision ${this.queue[0]!.rev} was compacted (at ${rev})`));
    }
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Delivers every queued event, one response per revision (a revision is one transaction). */
  deliver(): void {
    while (this.open && this.queue.length) {
      const rev = this.queue[0]!.rev;
      const batch: RawChange[] = [];
      while (this.queue.length && this.queue[0]!.rev === rev) batch.push(this.queue.shift()!);
      if (this.toLose > 0 && batch.some((c) => !UNWATCHED.some((p) => c.key.startsWith(p)))) {
        this.toLose--;
        continue;
      }
      const events = batch.filter((c) => !UNWATCHED.some((p) => c.key.startsWith(p))).map(eventOf);
      // Only unwatched keys in this revision: a progress notification, as etcd sends one.
      this.emit('data', { header: { revision: String(rev) }, events } as unknown as IWatchResponse);
    }
  }

  /** Revisions still to lose: the next ones delivered are dropped instead (a client that resumed past them). */
  private toLose = 0;

  /** Loses the next `revisions` revisions' events, queued or still to come. */
  lose(revisions: number): void {
    this.toLose += revisions;
  }

  /** The connection drops: the reflector makes a new watch from its own revision. */
  disconnect(): void {
    if (!this.open) return;
    this.emit('disconnected', new Error('sim: connection reset'));
  }

  private close(): void {
    this.open = false;
    this.etcd.unregister(this);
    this.faults.watchers.delete(this);
  }

  async cancel(): Promise<void> {
    this.close();
  }
}
