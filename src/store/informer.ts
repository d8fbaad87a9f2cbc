// An informer: a reflector (reflector.ts) over one key prefix, for code that watches a single
// prefix (CLI `--watch`/`--wait` commands, tests). Long-running processes share one reflector per
// process through the runtime's cache instead (src/runtime/cache.ts).
import { EventEmitter } from 'node:events';
import type { Logger } from '../observability/log.js';
import { Reflector, type SourceState, type Unreadable } from './reflector.js';
import type { Store, Versioned } from './store.js';

export interface InformerChange<T> {
  type: 'put' | 'delete' | 'unreadable';
  key: string;
  value?: Versioned<T>;
  prev?: Versioned<T>;
}

export interface InformerEvents<T> {
  change: [InformerChange<T>];
  synced: [];
  relisted: [];
  /** A key whose newest value cannot be read: the key and why. */
  malformed: [string, string];
  /** The watch was created on the server (again after a cut), resuming after this revision. */
  watching: [number];
  unsynced: [string];
}

export interface InformerOptions {
  /** The kind every value under the prefix must have. Values are validated against their CRD either way. */
  kind?: string;
  /** Skip schema validation (JSON decoding still applies). */
  validate?: boolean;
  log: Logger;
  /** Period of the reflector's consistency check (default: none). */
  checkEveryMs?: number;
}

export class Informer<T> extends EventEmitter<InformerEvents<T>> {
  private readonly reflector: Reflector;
  private readonly state: SourceState<T>;

  constructor(
    store: Store,
    readonly prefix: string,
    opts: InformerOptions,
  ) {
    super();
    this.setMaxListeners(100);
    this.reflector = new Reflector(store, { items: { prefix, kind: opts.kind, validate: opts.validate } }, { log: opts.log, watch: [prefix], checkEveryMs: opts.checkEveryMs });
    this.state = this.reflector.source<T>('items');
    this.reflector.on('batch', (changes) => {
      for (const c of changes) {
        if (c.type === 'unreadable') this.emit('malformed', c.key, this.state.unreadable.get(c.key)?.reason ?? 'unreadable');
        this.emit('change', c as InformerChange<T>);
      }
    });
    this.reflector.on('relisted', () => this.emit('relisted'));
    this.reflector.on('synced', () => this.emit('synced'));
    this.reflector.on('unsynced', (why) => this.emit('unsynced', why));
    this.reflector.on('watching', (_p, rev) => this.emit('watching', rev));
  }

  /** Readable values by key; while a key is unreadable, its last readable version. */
  get items(): Map<string, Versioned<T>> {
    return this.state.items;
  }

  /** Keys whose newest value cannot be read. */
  get unreadable(): ReadonlyMap<string, Unreadable> {
    return this.state.unreadable;
  }

  /** Keys whose newest value cannot be read, with the reason. */
  get malformed(): Map<string, string> {
    return new Map([...this.state.unreadable].map(([k, u]) => [k, u.reason]));
  }

  get synced(): boolean {
    return this.reflector.synced;
  }

  get revision(): number {
    return this.reflector.revision;
  }

  /** Lists and starts watching; resolves once the first list is in `items`. */
  start(): Promise<void> {
    return this.reflector.start();
  }

  /** Lists again at once (e.g. after an outage the caller noticed first). */
  relist(): Promise<void> {
    return this.reflector.relist('asked');
  }

  /** Runs the consistency check now (tests). */
  check(): Promise<boolean> {
    return this.reflector.check();
  }

  values(): T[] {
    return [...this.items.values()].map((v) => v.value);
  }

  /** Values keyed by what follows the prefix (a host, `<node>/<replica>`, `<deployment>/<service>`). */
  valuesByRest(): Map<string, T> {
    return new Map([...this.items].map(([k, v]) => [k.slice(this.prefix.length), v.value]));
  }

  /** The same, keeping each value's versions (for compare-and-swap writes). */
  versionedByRest(): Map<string, Versioned<T>> {
    return new Map([...this.items].map(([k, v]) => [k.slice(this.prefix.length), v]));
  }

  stop(): Promise<void> {
    return this.reflector.stop();
  }
}
