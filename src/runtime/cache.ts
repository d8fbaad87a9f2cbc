// The cache: a process's one copy of what it watches, shared by every controller in the process.
// It is fed by one reflector on etcd (or, in the simulation and table tests, by an in-memory
// store through the same SourceState reading code), and it keeps named indexes, each built once
// and kept up to date from the feed's batches. Controllers read it synchronously inside a pass;
// between passes it changes, so a pass never keeps references past its own end.
import { EventEmitter } from 'node:events';
import type { Logger } from '../observability/log.js';
import { Reflector, type Change, type ValueReader, type Feed, type SourceSpec, type SourceState, type StoreReplacements, type Unreadable } from '../store/reflector.js';
import type { KeptReads } from '../store/kept-reads.js';
import type { Store, Versioned } from '../store/store.js';
import { ROUTINE, WATCHABLE, type Watchable } from './watchable.js';

/** A source's values with their versions, keyed by what follows its prefix (a host, `<deployment>/<service>`). */
export function byRest<T>(s: SourceState<T>): Map<string, Versioned<T>> {
  return new Map([...s.items.values()].map((v) => [s.rest(v.key), v]));
}

/** A source's values keyed by what follows its prefix. */
export function valuesByRest<T>(s: SourceState<T>): Map<string, T> {
  return new Map([...s.items.values()].map((v) => [s.rest(v.key), v.value]));
}

/** Keys of a source whose value cannot be read and that have no readable version (present, but frozen), by rest. */
export function frozenKeys(s: SourceState<unknown>): Set<string> {
  return new Set([...s.unreadable.keys()].filter((k) => !s.items.has(k)).map((k) => s.rest(k)));
}

/** A named index: built from the cache once, then kept up to date batch by batch. */
export interface IndexDef<I> {
  name: string;
  /** The sources it reads (the cache must hold them). */
  sources: readonly Watchable[];
  build(cache: Cache): I;
  /** Applies one batch of changes (only batches touching its sources are passed). */
  apply(index: I, changes: readonly Change[], cache: Cache): void;
}

export interface CacheEvents {
  /**
   * A batch was applied: the sources it touched, and those of them whose every change in the
   * batch was routine (Watchable's `routine`: a heartbeat renewed on time) — news to a
   * dashboard, not to a controller. Then the changes themselves, for a reader that follows
   * records rather than state (the dashboard's audit stream).
   */
  changed: [ReadonlySet<string>, ReadonlySet<string>, readonly Change[]];
  synced: [];
  unsynced: [string];
  /** The store was found replaced (restored, wiped): what is held is listed again from scratch. */
  replaced: [string];
}

export interface CacheOptions {
  log: Logger;
  /**
   * Watched prefixes (default: one watch over all of them; see ReflectorOptions.watch). `each`:
   * every source on a watch of its own prefix — a process restricted by etcd RBAC (an agent, an
   * ingress) may read its sources and nothing between them, and its watches follow its reads.
   */
  watch?: string[] | 'each';
  checkEveryMs?: number;
  /** Source specs by name, overriding the catalogue's (e.g. an agent's own desired/<node>/). */
  specs?: Partial<Record<Watchable, SourceSpec>>;
  /** See ReflectorOptions.reader. */
  reader?: ValueReader;
}

export class Cache extends EventEmitter<CacheEvents> {
  private readonly indexes = new Map<string, { def: IndexDef<unknown>; index: unknown }>();

  constructor(readonly feed: Feed) {
    super();
    this.setMaxListeners(100);
    feed.on('batch', (changes) => this.onBatch(changes));
    feed.on('synced', () => this.emit('synced'));
    feed.on('unsynced', (why) => this.emit('unsynced', why));
    feed.on('replaced', (_reason, detail) => this.emit('replaced', detail));
  }

  /** A cache on etcd holding the named prefixes. */
  static onStore(store: Store, names: readonly Watchable[], opts: CacheOptions): Cache {
    // How to hold a source that is not held is a mistake, never a silent no-op (it once left an
    // agent without the registries it was told to watch).
    const stray = Object.keys(opts.specs ?? {}).filter((n) => !names.includes(n as Watchable));
    if (stray.length) throw new Error(`the cache is told how to hold ${stray.join(', ')}, which nothing reads: add it to the controller's reads or the manager's extraSources`);
    const specs = Object.fromEntries(names.map((n) => [n, opts.specs?.[n] ?? WATCHABLE[n]]));
    const watch = opts.watch === 'each' ? Object.values(specs).map((s) => s.prefix) : opts.watch;
    const unheld = (watch ?? []).filter((p) => !Object.values(specs).some((s) => p.startsWith(s.prefix) || s.prefix.startsWith(p)));
    if (unheld.length) throw new Error(`the cache is told to watch ${unheld.join(', ')}, under which it holds nothing`);
    return new Cache(new Reflector(store, specs, { log: opts.log, watch, checkEveryMs: opts.checkEveryMs, reader: opts.reader }));
  }

  /** A cache holding one consistent read of the named prefixes (no watch): for one-shot tools; `kept`: from and into reads kept between runs. */
  static async read(store: Store, names: readonly Watchable[], log: Logger, kept?: KeptReads): Promise<Cache> {
    const specs = Object.fromEntries(names.map((n) => [n, WATCHABLE[n]]));
    const cache = new Cache(new Reflector(store, specs, { log, once: true, ...(kept ? { kept } : {}) }));
    await cache.start();
    return cache;
  }

  get revision(): number {
    return this.feed.revision;
  }

  /**
   * Whether a write of `key` that landed at `revision` is in the cache — or would never be (a key
   * under no watch of the cache). A runner waits for its own last write before deciding again.
   */
  hasSeen(key: string, revision: number): boolean {
    return (this.feed.revisionFor?.(key) ?? this.feed.revision) >= revision;
  }

  get synced(): boolean {
    return this.feed.synced;
  }

  /** The store followed and the times it was found replaced (undefined off etcd). */
  storeHealth(): StoreReplacements | undefined {
    return this.feed.storeHealth?.();
  }

  holds(name: Watchable): boolean {
    return name in this.feed.sources;
  }

  /**
   * Holds the cache still (Feed.hold) until the returned function is called: a pass that decides
   * in steps, letting I/O run between them, reads one unchanging cut of the store throughout.
   */
  hold(): () => void {
    return this.feed.hold?.() ?? (() => undefined);
  }

  /** What is stored under one prefix. */
  kind<T>(name: Watchable): SourceState<T> {
    const s = this.feed.sources[name];
    if (!s) throw new Error(`the cache does not hold ${name} (watched: ${Object.keys(this.feed.sources).join(', ')})`);
    return s as SourceState<T>;
  }

  /** The unreadable value at a key of any held source, if its newest value cannot be read. */
  unreadableAt(key: string): Unreadable | undefined {
    for (const s of Object.values(this.feed.sources)) if (key.startsWith(s.prefix)) return s.unreadable.get(key);
    return undefined;
  }

  /** The named index, built on first use. */
  index<I>(def: IndexDef<I>): I {
    const have = this.indexes.get(def.name);
    if (have) return have.index as I;
    for (const s of def.sources) this.kind(s); // fails loudly when a source is not held
    const index = def.build(this);
    this.indexes.set(def.name, { def: def as IndexDef<unknown>, index });
    return index;
  }

  start(): Promise<void> {
    return this.feed.start();
  }

  stop(): Promise<void> {
    return this.feed.stop();
  }

  private onBatch(changes: Change[]): void {
    const touched = new Set(changes.map((c) => c.source));
    for (const { def, index } of this.indexes.values()) {
      if (!def.sources.some((s) => touched.has(s))) continue;
      def.apply(index, changes.filter((c) => (def.sources as readonly string[]).includes(c.source)), this);
    }
    const eventful = new Set(changes.filter((c) => !ROUTINE[c.source as Watchable]?.(c)).map((c) => c.source));
    this.emit('changed', touched, new Set([...touched].filter((s) => !eventful.has(s))), changes);
  }
}
