// A reflector keeps an in-memory copy of one or more key prefixes ("sources"), consistent at one
// store revision: it lists every source at a single revision R, then follows watches from R+1.
// With one watch over all sources (a controller process), every batch it applies is one etcd
// response, so what it holds is always a consistent cut of the store: no controller ever sees a
// replica without the counter that numbered it, or a node without the drain that cordoned it.
//
// What it guarantees, and how:
//   - No event is lost. The revision it resumes from is its own — the highest event revision it
//     has applied, or a progress notification's — never the client library's (etcd3 advances its
//     resume point from the watch's creation reply, before older events arrive). A watch that
//     drops is cancelled and created again from that revision; one that was compacted relists.
//   - `synced` is false while any watch is down, so /healthz and callers can tell.
//   - A periodic consistency check compares the count and newest mod revision of each source at
//     the reflector's revision with what it holds; a difference relists (and is counted).
//   - A store replaced under it (etcd restored from a snapshot, or restarted empty) is noticed — the
//     cluster id changed, the store's revision is behind what is held, a read at the held revision
//     is refused as a future one — and everything is listed again from scratch (nothing held is
//     trusted, not even a key at the same mod revision); `synced` is false until that list is in.
//     Resuming instead would wait for revisions the new store reaches only by chance (STORE_REPLACED).
//   - Unreadable is not deleted. A value that does not decode or validate is kept as unreadable
//     beside the last readable version, which stays in effect; with no readable version the key
//     is present only as unreadable ("frozen": nothing should act on it). Unknown fields are
//     pruned, not refused (schema.ts, validateForRead).
import { EventEmitter } from 'node:events';
import type { IKeyValue, IResponseHeader, IWatchResponse, Watcher } from 'etcd3';
import { Backoff, sleep } from '../backoff.js';
import { STORE_REPLACED, type StoreReplacedReason } from '../api/reasons/store.js';
import { formatPath, schemas } from '../api/schema.js';
import type { Logger } from '../observability/log.js';
import { readerMetrics as metrics } from '../observability/reader-metrics.js';
import { Interner, shareAt } from './interner.js';
import { KeptReads, storeHistory } from './kept-reads.js';
import type { SourceSpec, Unreadable } from './source-spec.js';
import { storeReplaced } from './store-identity.js';
import { stampVersion, withTimeout, type RangeFacts, type Store, type Versioned } from './store.js';

export type { SourceSpec, Unreadable } from './source-spec.js';

/** What a stored value decodes to: its value, why it cannot be read, or nothing (keys only). */
type Decoded = { value: unknown } | { reason: string; raw?: unknown } | undefined;

/** A listed key before it is applied: its metadata and, unless already held, its decoded value. */
interface Staged {
  key: string;
  meta: KeyMeta;
  held: boolean;
  read: Decoded;
}

function metaOf(kv: IKeyValue): KeyMeta {
  return { modRevision: Number(kv.mod_revision), createRevision: Number(kv.create_revision), version: Number(kv.version), lease: kv.lease === '0' ? undefined : kv.lease };
}

export interface Change<T = unknown> {
  source: string;
  /** unreadable: the key's newest value could not be read (`value` stays what was in effect). */
  type: 'put' | 'delete' | 'unreadable';
  key: string;
  /** The value in effect after the change (put, unreadable with a readable version). */
  value?: Versioned<T>;
  /** The value in effect before. */
  prev?: Versioned<T>;
}

/** Where a stored value came from: its key's revisions (the value is read separately). */
export interface KeyMeta {
  modRevision: number;
  createRevision: number;
  version: number;
  lease?: string;
}

/** What a feed holds of one source, and the one place a stored value is read. Keys are relative to the store prefix. */
export class SourceState<T = unknown> {
  /** Readable values; while a key is unreadable, its last readable version. */
  readonly items = new Map<string, Versioned<T>>();
  readonly unreadable = new Map<string, Unreadable>();

  constructor(
    readonly name: string,
    readonly spec: SourceSpec,
    private readonly reader: ValueReader,
  ) {}

  get prefix(): string {
    return this.spec.prefix;
  }

  /** The part of a key after the source's prefix (a host, `<node>/<replica>`, …). */
  rest(key: string): string {
    return key.slice(this.spec.prefix.length);
  }

  get(rest: string): Versioned<T> | undefined {
    return this.items.get(this.spec.prefix + rest);
  }

  /** Keys present in the store (readable or not). */
  get size(): number {
    let n = this.items.size;
    for (const k of this.unreadable.keys()) if (!this.items.has(k)) n++;
    return n;
  }

  /** Whether the key's current value is the one held (nothing to read again). */
  holds(key: string, modRevision: number): boolean {
    const u = this.unreadable.get(key);
    return u ? u.modRevision === modRevision : this.items.get(key)?.modRevision === modRevision;
  }

  /** Reads a stored value (its JSON text) into the source: readable, or unreadable beside what stays in effect. */
  put(key: string, meta: KeyMeta, text: string | undefined): Change<T> {
    return this.apply(key, meta, this.decode(key, text));
  }

  /** Decodes a stored value without applying it (a list decodes page by page, applies at the end). */
  decode(key: string, text: string | undefined): Decoded {
    return this.spec.keysOnly || text === undefined ? undefined : this.reader.read(this, key, text);
  }

  /** Applies a decoded value: readable, or unreadable beside what stays in effect. */
  apply(key: string, meta: KeyMeta, read: Decoded): Change<T> {
    const prev = this.items.get(key);
    if (!read) {
      const value = { key, ...meta, value: undefined as T };
      this.items.set(key, value);
      this.trim();
      return { source: this.name, type: 'put', key, value, prev };
    }
    if ('reason' in read) {
      const first = !this.unreadable.has(key);
      this.unreadable.set(key, { key, modRevision: meta.modRevision, reason: read.reason, ...(read.raw !== undefined ? { raw: read.raw } : {}) });
      this.reader.unreadable(this, key, read.reason, prev, first);
      this.trim();
      return { source: this.name, type: 'unreadable', key, value: prev, prev };
    }
    stampVersion(read.value, meta.modRevision);
    if (this.unreadable.delete(key)) this.reader.readableAgain(this, key);
    const value: Versioned<T> = { key, ...meta, value: read.value as T };
    this.items.set(key, value);
    this.trim();
    return { source: this.name, type: 'put', key, value, prev };
  }

  /** Drops the keys that sort first while more than `newest` are held (readable or not). */
  private trim(): void {
    const bound = this.spec.newest;
    if (bound === undefined) return;
    while (this.size > bound) {
      let first: string | undefined;
      for (const k of this.items.keys()) if (first === undefined || k < first) first = k;
      for (const k of this.unreadable.keys()) if (first === undefined || k < first) first = k;
      this.items.delete(first!);
      if (this.unreadable.delete(first!)) this.reader.readableAgain(this, first!, true);
    }
  }

  remove(key: string): Change<T> | undefined {
    const prev = this.items.get(key);
    const wasUnreadable = this.unreadable.delete(key);
    if (wasUnreadable) this.reader.readableAgain(this, key, true);
    if (prev) this.items.delete(key);
    return prev || wasUnreadable ? { source: this.name, type: 'delete', key, prev } : undefined;
  }
}

/**
 * Decodes and checks stored values for every source of a feed: JSON, the expected kind, the CRD
 * (pruning unknown fields, logged once per field), and counts and logs what it cannot read.
 */
export class ValueReader {
  private readonly prunedLogged = new Set<string>();
  private readonly interner = new Interner();

  constructor(private readonly log: Logger) {}

  read(src: SourceState, key: string, text: string): { value: unknown } | { reason: string; raw?: unknown } {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      return { reason: `not JSON: ${(e as Error).message}` };
    }
    if (src.spec.validate === false) {
      const kind = (raw as { kind?: unknown } | null)?.kind;
      return src.spec.kind && kind !== src.spec.kind ? { reason: `kind ${JSON.stringify(kind)} where ${src.spec.kind} was expected`, raw } : { value: raw };
    }
    const { issues, pruned } = schemas().validateForRead(raw, src.spec.kind);
    if (issues.length) return { reason: issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; '), raw };
    for (const field of pruned) {
      metrics.prunedFields.inc({ prefix: src.prefix });
      const k = `${src.prefix}|${field.replace(/\[\d+\]/g, '[]')}`;
      if (this.prunedLogged.has(k)) continue;
      this.prunedLogged.add(k);
      this.log.warn({ key, field }, 'unknown field ignored on read (written by a newer jaco, or by hand)');
    }
    for (const path of src.spec.share ?? []) shareAt(this.interner, raw, path);
    return { value: raw };
  }

  unreadable(src: SourceState, key: string, reason: string, inEffect: Versioned<unknown> | undefined, first: boolean): void {
    metrics.malformedKeys.inc({ prefix: src.prefix });
    metrics.unreadableKeys.set({ prefix: src.prefix }, src.unreadable.size);
    this.log.error(
      { key, reason, inEffect: inEffect ? `the last readable version (revision ${inEffect.modRevision})` : 'nothing: the key is frozen until it is fixed' },
      first ? 'unreadable value in the store; it is not treated as deleted' : 'value still unreadable',
    );
  }

  readableAgain(src: SourceState, key: string, deleted = false): void {
    metrics.unreadableKeys.set({ prefix: src.prefix }, src.unreadable.size);
    if (!deleted) this.log.info({ key }, 'value readable again');
  }
}

/**
 * Reads listed key-values as a reflector does (JSON, the kind, the CRD) into a source of their
 * own, at once: for one-shot readers outside a cache (the audit log, one key). `log` gets what
 * the reader logs (the CLI passes a silent one and reports `unreadable` itself).
 */
export function readListed<T>(name: string, spec: SourceSpec, kvs: readonly IKeyValue[], storePrefixLength: number, log: Logger): SourceState<T> {
  const src = new SourceState<T>(name, spec, new ValueReader(log));
  for (const kv of kvs) src.put(kv.key.toString('utf8').slice(storePrefixLength), metaOf(kv), spec.keysOnly ? undefined : kv.value.toString('utf8'));
  return src;
}

/**
 * What the runtime's cache is fed from: a reflector on etcd, or an in-memory store in the
 * simulation and table tests. Either way, every value is read by SourceState.put.
 */
export interface Feed {
  readonly sources: Record<string, SourceState>;
  /** Every change up to this revision has been applied. */
  readonly revision: number;
  /** Every change of `key` up to this revision has been applied (its watch's revision; default: revision). */
  revisionFor?(key: string): number;
  readonly synced: boolean;
  /**
   * Holds what the feed shows still until the returned function is called: changes that arrive
   * meanwhile wait, in order (a pass that decides in steps reads one unchanging cut between them).
   */
  hold?(): () => void;
  /** The store followed and the times it was found replaced (a feed on etcd). */
  storeHealth?(): StoreReplacements;
  on<E extends keyof ReflectorEvents>(event: E, fn: (...args: ReflectorEvents[E]) => void): unknown;
  off<E extends keyof ReflectorEvents>(event: E, fn: (...args: ReflectorEvents[E]) => void): unknown;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export { storeReplaced, type StoreIdentity } from './store-identity.js';

/** For /healthz: the store a feed follows, and the last time it was found replaced. */
export interface StoreReplacements {
  clusterId?: string;
  /** Times the store was found replaced since the process started. */
  count: number;
  last?: { at: string; reason: StoreReplacedReason; detail: string };
}

export interface ReflectorEvents {
  /** One applied etcd response (or relist): every change in it, at the reflector's new revision. */
  batch: [Change[]];
  synced: [];
  unsynced: [string];
  relisted: [];
  /** The store was found replaced (restored or wiped): what is held is being listed again from scratch. */
  replaced: [StoreReplacedReason, string];
  /** A watch was created (or created again) on the server, from this revision + 1. */
  watching: [string, number];
}

export interface ReflectorOptions {
  log: Logger;
  /**
   * The prefixes watched, one watch each; every source must lie under one of them. Default: the
   * sources' longest common prefix (one watch, one consistent stream). An agent restricted by
   * etcd RBAC to its own keys passes each source's prefix.
   */
  watch?: string[];
  /** Period of the consistency check (0: never). */
  checkEveryMs?: number;
  /** List once and do not watch (a one-shot consistent read, e.g. for the CLI). */
  once?: boolean;
  /** With once: start from the sources as kept by the last such read, list what changed since, keep the result (src/store/kept-reads.ts). */
  kept?: KeptReads;
  /** Reads stored values (default: one of its own; the simulation shares one between its processes). */
  reader?: ValueReader;
}

interface Stream {
  prefix: string;
  /** Every event of this stream up to here has been applied. */
  revision: number;
  watcher?: Watcher;
  up: boolean;
  /** Waits before reopening a watch that dropped, reset once it is up. */
  retry: Backoff;
  timer?: NodeJS.Timeout;
}

const MIN_BACKOFF_MS = 100;
/** The longest wait before a failed list or watch is retried (chaos bounds stray containers with it). */
export const MAX_BACKOFF_MS = 5_000;

export class Reflector extends EventEmitter<ReflectorEvents> implements Feed {
  readonly sources: Record<string, SourceState>;
  private readonly ordered: SourceState[];
  private readonly streams: Stream[];
  synced = false;
  private stopped = false;
  private relisting?: Promise<void>;
  private checkTimer?: NodeJS.Timeout;
  /** Per source, the revision up to which the consistency check (or a list) found it right. */
  private readonly checkedAt = new Map<SourceState, number>();
  /** The cluster id of the store followed (from the first reply), and what was found replaced so far. */
  private clusterId?: string;
  private readonly replacements: StoreReplacements = { count: 0 };
  /** The next list trusts nothing held (a replaced store reuses revisions for other values). */
  private fromScratch = false;
  /** Bumped at each replacement: a list that began before one is listed again. */
  private replacedGen = 0;
  /** Holds in force (hold()), and what waits for them to end, in arrival order. */
  private holds = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(
    private readonly store: Store,
    specs: Record<string, SourceSpec>,
    private readonly opts: ReflectorOptions,
  ) {
    super();
    this.setMaxListeners(100);
    const reader = opts.reader ?? new ValueReader(opts.log);
    this.sources = Object.fromEntries(Object.entries(specs).map(([n, s]) => [n, new SourceState(n, s, reader)]));
    this.ordered = Object.values(this.sources).sort((a, b) => b.prefix.length - a.prefix.length);
    for (const a of this.ordered)
      for (const b of this.ordered) if (a !== b && a.prefix.startsWith(b.prefix)) throw new Error(`sources ${b.name} and ${a.name} overlap (${b.prefix}, ${a.prefix})`);
    const watch = opts.watch ?? [commonPrefix(this.ordered.map((s) => s.prefix))];
    for (const s of this.ordered)
      if (!watch.some((w) => s.prefix.startsWith(w))) throw new Error(`source ${s.name} (${s.prefix}) is under none of the watched prefixes ${watch.join(', ')}`);
    this.streams = watch.map((prefix) => ({ prefix, revision: 0, up: false, retry: new Backoff(MIN_BACKOFF_MS, MAX_BACKOFF_MS) }));
  }

  source<T>(name: string): SourceState<T> {
    const s = this.sources[name];
    if (!s) throw new Error(`no source named ${name}`);
    return s as SourceState<T>;
  }

  /** Every event up to this revision has been applied (the lowest of the watches). */
  get revision(): number {
    return Math.min(...this.streams.map((s) => s.revision));
  }

  /** The revision of the watch `key` is under (a key under none: Infinity, nothing to wait for). */
  revisionFor(key: string): number {
    return this.streams.find((s) => key.startsWith(s.prefix))?.revision ?? Infinity;
  }

  /** Lists and starts watching; resolves once the first list is held. */
  async start(): Promise<void> {
    await this.relist('start');
    const every = this.opts.checkEveryMs ?? 0;
    if (every > 0) this.checkTimer = setInterval(() => void this.check(), every);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.checkTimer);
    await Promise.all(this.streams.map((s) => this.closeStream(s)));
  }

  /**
   * Nothing changes what the sources hold until the returned release is called: watch responses,
   * progress notifications and a relist's result wait, then apply in the order they came. The
   * watches keep reading meanwhile, so etcd never finds this client a slow watcher.
   */
  hold(): () => void {
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds > 0) return;
      while (this.waiting.length && !this.holds) this.waiting.shift()!();
    };
  }

  /** Runs `fn` now, or once no hold is in force. */
  private whenFree(fn: () => void): void {
    if (this.holds) this.waiting.push(fn);
    else fn();
  }

  // ------------------------------------------------------------------ list

  /** Lists every source at one revision and (re)opens the watches from it; retries while etcd is away (a one-shot read fails instead). */
  relist(why: string): Promise<void> {
    if (this.relisting) return this.relisting;
    this.relisting = (async () => {
      const retry = new Backoff(200, MAX_BACKOFF_MS);
      while (!this.stopped) {
        try {
          await this.listAndWatch();
          if (why !== 'start') {
            metrics.informerRelists.inc({ prefix: this.label() });
            this.emit('relisted');
          }
          return;
        } catch (e) {
          // A one-shot read (the CLI's) says why it failed rather than waiting: denied, unreachable.
          if (this.opts.once) throw e;
          this.opts.log.warn({ sources: this.label(), err: (e as Error).message }, 'reflector: list failed; retrying');
          await sleep(retry.next());
        }
      }
    })().finally(() => (this.relisting = undefined));
    return this.relisting;
  }

  /** The prefixes watched, one stream each. */
  get watched(): string[] {
    return this.streams.map((s) => s.prefix);
  }

  private label(): string {
    return this.watched.map((p) => p || '/').join(',');
  }

  /** The store followed and its replacements so far (for /healthz). */
  storeHealth(): StoreReplacements {
    return { ...this.replacements, ...(this.clusterId ? { clusterId: this.clusterId } : {}) };
  }

  /** The store was replaced under the reflector: count and log it, and list everything again from scratch. */
  private replaced(reason: StoreReplacedReason, detail: string, clusterId?: string): void {
    // Already listing again from scratch (another watch of the same reflector saw it first).
    if (this.stopped || this.fromScratch) return;
    this.replacedGen++;
    this.fromScratch = true;
    this.clusterId = clusterId ?? this.clusterId;
    this.countReplaced(reason, detail);
    this.setSynced(false, `store replaced: ${detail}`);
    for (const s of this.streams) void this.closeStream(s);
    void this.relist('store replaced');
  }

  private countReplaced(reason: StoreReplacedReason, detail: string): void {
    this.replacements.count++;
    this.replacements.last = { at: new Date().toISOString(), reason, detail };
    metrics.storeReplaced.inc({ reason });
    this.opts.log.error(
      { sources: this.label(), reason, detail, heldRevision: this.revision },
      `reflector: etcd was replaced under this process (${STORE_REPLACED[reason]}: restored from a snapshot, or restarted empty); listing everything again from scratch`,
    );
    this.emit('replaced', reason, detail);
  }

  /**
   * Checks a reply's header against the store followed. A cluster id that changed is conclusive;
   * a revision behind the held one, seen from one member's watch, is confirmed by a linearizable
   * read first (a member may lag the leader by a few revisions). Resolves true when replaced.
   */
  private async confirmReplaced(header: IResponseHeader, held: number, linearizable: boolean): Promise<boolean> {
    let found = storeReplaced({ clusterId: this.clusterId, revision: held }, header);
    if (found?.reason === 'revision_backwards' && !linearizable) {
      try {
        found = storeReplaced({ clusterId: this.clusterId, revision: held }, await this.store.header());
      } catch {
        return false; // unreachable: the next reply tells
      }
    }
    if (!found) {
      this.clusterId ??= header.cluster_id || undefined;
      return false;
    }
    this.replaced(found.reason, found.detail, header.cluster_id || undefined);
    return true;
  }

  private async listAndWatch(): Promise<void> {
    this.setSynced(false, 'relisting');
    await Promise.all(this.streams.map((s) => this.closeStream(s)));
    const gen = this.replacedGen;
    // A list that finds the store replaced trusts nothing held; one already known to be lists so.
    let scratch = this.fromScratch;
    let firstHeader: IResponseHeader | undefined;
    let revision = 0;
    // Kept reads (a one-shot read only) start from a linearizable read's revision and history.
    const kept = this.opts.once ? this.opts.kept : undefined;
    const history = kept ? await storeHistory(this.store).catch(() => undefined) : undefined;
    if (history) revision = history.revision;
    // Each page is decoded as it arrives (the raw page is dropped at once, shared subtrees are
    // shared already), and applied only once every source is listed: the cache never shows half a list.
    const listOne = async (src: SourceState): Promise<{ staged: Staged[]; stays?: Set<string> }> => {
      const from = history && KeptReads.keeps(src.spec) ? kept!.load(src.name, src.spec, history) : undefined;
      if (from) for (const v of from.items) src.items.set(v.key, v);
      if (from) for (const u of from.unreadable) src.unreadable.set(u.key, u);
      const staged: Staged[] = [];
      const r = await this.store.listRaw(src.prefix, revision || undefined, {
        keysOnly: src.spec.keysOnly,
        ...(from ? { changedAfter: from.revision } : {}),
        onHeader: (h) => {
          if (firstHeader) return;
          firstHeader = h;
          const found = storeReplaced({ clusterId: this.clusterId, revision: this.revision }, h);
          if (!found) return;
          if (!scratch) this.countReplaced(found.reason, found.detail);
          scratch = true;
        },
        onPage: (kvs) => {
          for (const kv of kvs) {
            const key = this.keyOf(kv);
            const meta = metaOf(kv);
            const held = !scratch && src.holds(key, meta.modRevision);
            staged.push({ key, meta, held, read: held ? undefined : src.decode(key, kv.value.toString('utf8')) });
          }
          // A bounded source keeps what it would hold (keys come sorted): a long log is never held whole.
          const bound = src.spec.newest;
          if (bound !== undefined && staged.length > bound) staged.splice(0, staged.length - bound);
        },
      });
      revision ||= r.revision;
      const stays = from ? await this.unchangedSince(src, staged, r.count, revision) : undefined;
      // A changed key is read as a whole read reads it: no last readable version kept beside a value that cannot be read.
      if (from) for (const { key } of staged) src.items.delete(key), src.unreadable.delete(key);
      return { staged, ...(stays ? { stays } : {}) };
    };
    const listed = new Map<SourceState, { staged: Staged[]; stays?: Set<string> }>();
    const rest = [...this.ordered];
    if (!revision) listed.set(rest[0]!, await listOne(rest.shift()!));
    // Every other source at that revision, all at once: one wait on etcd, not one per source.
    const others = await Promise.all(rest.map(listOne));
    rest.forEach((src, i) => listed.set(src, others[i]!));
    if (this.holds) await new Promise<void>((r) => this.waiting.push(r));
    if (this.stopped) return;
    if (this.replacedGen !== gen) throw new Error('the store was found replaced during the list; listing again');
    if (firstHeader?.cluster_id) this.clusterId = firstHeader.cluster_id;
    this.fromScratch = false;
    const changes: Change[] = [];
    for (const [src, { staged, stays }] of listed) {
      const seen = new Set<string>();
      for (const { key, meta, held, read } of staged) {
        seen.add(key);
        if (!held) changes.push(src.apply(key, meta, read));
      }
      for (const key of [...src.items.keys(), ...src.unreadable.keys()]) {
        if (seen.has(key) || stays?.has(key)) continue;
        const c = src.remove(key);
        if (c) changes.push(c);
      }
    }
    for (const s of this.streams) s.revision = revision;
    for (const src of this.ordered) this.checkedAt.set(src, revision);
    this.emitBatch(changes);
    if (this.opts.once) {
      // A source read whole, or one that changed since it was kept, is kept as it is now.
      if (history) for (const [src, { stays }] of listed) if (KeptReads.keeps(src.spec) && (!stays || changes.some((c) => c.source === src.name))) kept!.save(src, history, revision);
      this.synced = true;
      return;
    }
    for (const s of this.streams) this.openStream(s);
    // Synced once every watch is up; the list alone is already a consistent picture at `revision`.
    this.setSynced(true);
  }

  /**
   * The held keys (kept from an earlier read) that are still in the store unchanged, given the keys
   * listed as changed since and the prefix's count: all of them unless the count says some went,
   * and then those a list of keys (no values) finds.
   */
  private async unchangedSince(src: SourceState, changed: readonly Staged[], count: number, revision: number): Promise<Set<string>> {
    const listed = new Set(changed.map((c) => c.key));
    const held = new Set([...src.items.keys(), ...src.unreadable.keys()].filter((k) => !listed.has(k)));
    if (held.size + listed.size === count) return held;
    const { kvs } = await this.store.listRaw(src.prefix, revision, { keysOnly: true });
    const present = new Set(kvs.map((kv) => this.keyOf(kv)));
    return new Set([...held].filter((k) => present.has(k)));
  }

  // ------------------------------------------------------------------ watch

  private openStream(s: Stream): void {
    if (this.stopped) return;
    clearTimeout(s.timer);
    const w = this.store.client
      .watch()
      .prefix(this.store.prefix + s.prefix)
      .startRevision(String(s.revision + 1))
      .watcher();
    s.watcher = w;
    w.on('connected', (res: IWatchResponse) => {
      if (s.watcher !== w) return;
      // A watch from a revision the store has not reached is accepted and silent for ever: a
      // store behind what is held was replaced (restored, wiped) and is listed again instead.
      if (res?.header && storeReplaced({ clusterId: this.clusterId, revision: s.revision }, res.header)) {
        void this.confirmReplaced(res.header, s.revision, false).then((replaced) => !replaced && s.watcher === w && this.watchUp(s));
        return;
      }
      this.watchUp(s);
    });
    w.on('data', (res: IWatchResponse) => {
      // A response of a watch replaced while it waited is dropped: the new one resumes before it.
      this.whenFree(() => s.watcher === w && this.onResponse(s, res));
    });
    w.on('disconnected', (e: Error) => {
      if (s.watcher !== w) return;
      // etcd3 would resume this watch by itself, from a revision that can skip events: make a
      // new one from ours instead, after a back-off (the client retries the stream meanwhile).
      s.up = false;
      this.setSynced(false, `watch of ${s.prefix || '/'} disconnected: ${e?.message ?? e}`);
      void this.closeStream(s);
      s.timer = setTimeout(() => this.openStream(s), s.retry.next());
    });
    w.on('error', (e: Error) => {
      if (s.watcher !== w || this.stopped) return;
      // Cancelled by etcd (compacted past our revision, or failed): relist everything.
      s.watcher = undefined;
      s.up = false;
      this.opts.log.warn({ prefix: s.prefix, err: e.message }, 'reflector: watch ended (compacted or failed); relisting');
      void this.relist('watch ended');
    });
  }

  private watchUp(s: Stream): void {
    s.up = true;
    s.retry.reset();
    this.emit('watching', s.prefix, s.revision);
    this.setSynced(this.streams.every((x) => x.up));
  }

  private async closeStream(s: Stream): Promise<void> {
    clearTimeout(s.timer);
    const w = s.watcher;
    s.watcher = undefined;
    s.up = false;
    if (w) await withTimeout(w.cancel(), 2000, 'cancel timed out').catch(() => undefined);
  }

  private onResponse(s: Stream, res: IWatchResponse): void {
    if (!res.events.length) {
      // A progress notification: etcd sends it only once every event up to its revision was sent.
      const r = Number(res.header.revision);
      if (r > s.revision) s.revision = r;
      else if (r < s.revision) void this.confirmReplaced(res.header, s.revision, false);
      return;
    }
    const changes: Change[] = [];
    for (const ev of res.events) {
      const kv = ev.kv;
      const rev = Number(kv.mod_revision);
      // The header revision of a catch-up batch can be ahead of its events: only events count.
      if (rev > s.revision) s.revision = rev;
      const key = this.keyOf(kv);
      const src = this.sourceOf(key);
      if (!src) continue; // under the watch but no source's (audit/, leaders/ in a whole-store watch)
      const c = ev.type === 'Delete' ? src.remove(key) : this.put(src, key, kv);
      if (c) changes.push(c);
    }
    this.emitBatch(changes);
  }

  // ------------------------------------------------------------------ applying values

  private keyOf(kv: IKeyValue): string {
    return kv.key.toString('utf8').slice(this.store.prefix.length);
  }

  private sourceOf(key: string): SourceState | undefined {
    for (const s of this.ordered) if (key.startsWith(s.prefix)) return s;
    return undefined;
  }

  private put(src: SourceState, key: string, kv: IKeyValue): Change {
    return src.put(key, metaOf(kv), src.spec.keysOnly ? undefined : kv.value.toString('utf8'));
  }

  private emitBatch(changes: Change[]): void {
    if (changes.length) this.emit('batch', changes);
  }

  private setSynced(synced: boolean, why = ''): void {
    if (synced === this.synced) return;
    if (synced && !this.streams.every((s) => s.watcher)) return;
    this.synced = synced;
    if (synced) this.emit('synced');
    else this.emit('unsynced', why);
  }

  // ------------------------------------------------------------------ consistency check

  /**
   * Compares, at each watch's revision, the number of keys and the newest mod revision of every
   * source with what is held, and every key changed since the last check with the version held
   * (a lost update of a key that is not the newest changes neither count nor newest: the
   * deterministic simulation found a cache that stayed stale that way). Cheap (counts and keys
   * only, no values, the changes of one period), and it catches any event lost for whatever
   * reason. A compacted revision skips the check.
   */
  async check(): Promise<boolean> {
    if (!this.synced || this.relisting || this.stopped) return true;
    for (const src of this.ordered) {
      if (src.spec.newest !== undefined) continue; // holds a part of its prefix by design
      const stream = this.streams.find((s) => src.prefix.startsWith(s.prefix))!;
      const at = stream.revision;
      const since = this.checkedAt.get(src) ?? 0;
      let found: RangeFacts;
      try {
        found = await this.store.rangeFacts(src.prefix, at, Math.min(since, at));
      } catch (e) {
        // A revision in the store's future: the store behind it was replaced (restored, wiped).
        if (isFutureRevision(e) && this.synced && stream.revision === at) {
          this.replaced('future_revision', `a read at revision ${at} was refused: ${(e as Error).message}`);
          return false;
        }
        return true; // compacted or unreachable: nothing to conclude
      }
      if (!this.synced || stream.revision !== at) return true; // moved on meanwhile: next time
      const held = this.heldFacts(src);
      const missed = missedSince(src, found.changed ?? [], Math.min(since, at));
      if (held.count === found.count && held.newest === found.newest && !missed.length) {
        this.checkedAt.set(src, at);
        continue;
      }
      metrics.informerInconsistencies.inc({ prefix: src.prefix });
      this.opts.log.error({ prefix: src.prefix, revision: at, held, store: { count: found.count, newest: found.newest }, missed: missed.slice(0, 10) }, 'reflector: held state differs from the store; relisting');
      await this.relist('consistency check');
      return false;
    }
    return true;
  }

  private heldFacts(src: SourceState): { count: number; newest: number } {
    let newest = 0;
    for (const v of src.items.values()) if (v.modRevision > newest) newest = v.modRevision;
    for (const u of src.unreadable.values()) if (u.modRevision > newest) newest = u.modRevision;
    return { count: src.size, newest };
  }
}

/**
 * Keys whose held version disagrees with the store's among those changed after `since`: each key
 * the store lists as changed (with its mod revision) must be held at that revision, and every key
 * held at a revision after `since` must be listed. Empty when nothing was missed.
 */
export function missedSince(src: SourceState, changed: readonly { key: string; modRevision: number }[], since: number): string[] {
  const held = (key: string) => src.unreadable.get(key)?.modRevision ?? src.items.get(key)?.modRevision;
  const listed = new Set<string>();
  const missed: string[] = [];
  for (const c of changed) {
    listed.add(c.key);
    if (held(c.key) !== c.modRevision) missed.push(c.key);
  }
  for (const key of new Set([...src.items.keys(), ...src.unreadable.keys()])) if (!listed.has(key) && (held(key) ?? 0) > since) missed.push(key);
  return missed.sort();
}

/** etcd refused a read at a revision it has not reached ("required revision is a future revision"). */
export function isFutureRevision(e: unknown): boolean {
  return /future revision/i.test((e as { message?: string } | undefined)?.message ?? '');
}

/** The longest common prefix of the given keys, cut back to a whole path segment. */
export function commonPrefix(prefixes: string[]): string {
  if (!prefixes.length) return '';
  let p = prefixes[0]!;
  for (const x of prefixes) while (!x.startsWith(p)) p = p.slice(0, -1);
  return p.slice(0, p.lastIndexOf('/') + 1);
}
