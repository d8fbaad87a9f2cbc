// An informer keeps an in-memory copy of one key prefix: list at revision R, watch from R+1,
// relist when the watch is compacted or fails. Values are decoded and validated against their
// CRD; a malformed value is logged, counted and kept out of `items` (see `malformed`), and the
// informer carries on. Consumers read `items` and listen for 'change' to know when to look again.
import { EventEmitter } from 'node:events';
import type { IKeyValue, Watcher } from 'etcd3';
import { formatPath, schemas } from '../api/schema.js';
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import { decodeJson, withTimeout, type Store, type Versioned } from './store.js';

export interface InformerChange<T> {
  type: 'put' | 'delete';
  key: string;
  value?: Versioned<T>;
  prev?: Versioned<T>;
}

export interface InformerEvents<T> {
  change: [InformerChange<T>];
  synced: [];
  relisted: [];
  malformed: [string, string];
}

export interface InformerOptions {
  /** The kind every value under the prefix must have (others are malformed). Values are validated against their CRD either way. */
  kind?: string;
  /** Skip schema validation (JSON decoding still applies). */
  validate?: boolean;
  log: Logger;
}

export class Informer<T> extends EventEmitter<InformerEvents<T>> {
  readonly items = new Map<string, Versioned<T>>();
  /** Keys whose value could not be decoded or validated, with the reason. */
  readonly malformed = new Map<string, string>();
  synced = false;
  revision = 0;
  private watcher?: Watcher;
  private stopped = false;
  private relisting?: Promise<void>;

  constructor(private readonly store: Store, readonly prefix: string, private readonly opts: InformerOptions) {
    super();
    this.setMaxListeners(100);
  }

  /** Lists and starts watching; resolves once the first list is in `items`. */
  async start(): Promise<void> {
    await this.relist();
  }

  /** Resolves once synced (lists retry with back-off while etcd is away). */
  private async relist(): Promise<void> {
    if (this.relisting) return this.relisting;
    this.relisting = (async () => {
      let backoff = 200;
      while (!this.stopped) {
        try {
          await this.listAndWatch();
          return;
        } catch (e) {
          this.opts.log.warn({ prefix: this.prefix, err: (e as Error).message }, 'informer: list failed; retrying');
          await new Promise((r) => setTimeout(r, backoff));
          backoff = Math.min(backoff * 2, 5000);
        }
      }
    })().finally(() => (this.relisting = undefined));
    return this.relisting;
  }

  private async listAndWatch(): Promise<void> {
    const old = this.watcher;
    this.watcher = undefined;
    if (old) await withTimeout(old.cancel(), 2000, 'cancel timed out').catch(() => undefined);
    const { kvs, revision } = await this.store.listRaw(this.prefix);
    const seen = new Set<string>();
    const wasSynced = this.synced;
    for (const kv of kvs) {
      const key = kv.key.toString('utf8').slice(this.store.prefix.length);
      seen.add(key);
      const prev = this.items.get(key);
      if (prev && prev.modRevision === Number(kv.mod_revision)) continue;
      this.apply('put', kv, key);
    }
    for (const [key, prev] of [...this.items]) {
      if (!seen.has(key)) {
        this.items.delete(key);
        this.emit('change', { type: 'delete', key, prev });
      }
    }
    for (const key of [...this.malformed.keys()]) if (!seen.has(key)) this.malformed.delete(key);
    this.revision = revision;
    if (this.stopped) return;
    const w = await this.store.client.watch().prefix(this.store.prefix + this.prefix).startRevision(String(revision + 1)).create();
    if (this.stopped) {
      await w.cancel();
      return;
    }
    this.watcher = w;
    w.on('put', (kv) => this.apply('put', kv));
    w.on('delete', (kv) => this.apply('delete', kv));
    w.on('data', (res) => {
      const r = Number(res.header.revision);
      if (r > this.revision) this.revision = r;
    });
    w.on('error', (e) => {
      if (this.stopped || this.watcher !== w) return;
      // etcd already cancelled this watcher; cancelling it again would never resolve.
      this.watcher = undefined;
      metrics.informerRelists.inc({ prefix: this.prefix });
      this.opts.log.warn({ prefix: this.prefix, err: e.message }, 'informer: watch ended (compacted or failed); relisting');
      void this.relist().then(() => this.emit('relisted'));
    });
    if (!wasSynced) {
      this.synced = true;
      this.emit('synced');
    }
  }

  private apply(type: 'put' | 'delete', kv: IKeyValue, knownKey?: string): void {
    const key = knownKey ?? kv.key.toString('utf8').slice(this.store.prefix.length);
    const rev = Number(kv.mod_revision);
    if (rev > this.revision) this.revision = rev;
    const prev = this.items.get(key);
    if (type === 'delete') {
      this.malformed.delete(key);
      if (prev) {
        this.items.delete(key);
        this.emit('change', { type, key, prev });
      }
      return;
    }
    let value: Versioned<T>;
    try {
      value = decodeJson<T>(kv, this.store.prefix.length);
      const kind = (value.value as { kind?: unknown } | null)?.kind;
      if (this.opts.kind && kind !== this.opts.kind) throw new Error(`kind ${JSON.stringify(kind)} where ${this.opts.kind} was expected`);
      if (this.opts.validate !== false) {
        const issues = schemas().validate(value.value);
        if (issues.length) throw new Error(issues.map((i) => `${formatPath(i.path) || '(root)'}: ${i.message}`).join('; '));
      }
    } catch (e) {
      const reason = (e as Error).message;
      this.malformed.set(key, reason);
      metrics.malformedKeys.inc({ prefix: this.prefix });
      this.opts.log.error({ key, reason }, 'malformed value in the store; ignoring it');
      if (prev) {
        this.items.delete(key);
        this.emit('change', { type: 'delete', key, prev });
      }
      this.emit('malformed', key, reason);
      return;
    }
    this.malformed.delete(key);
    this.items.set(key, value);
    this.emit('change', { type, key, value, prev });
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

  async stop(): Promise<void> {
    this.stopped = true;
    const w = this.watcher;
    this.watcher = undefined;
    if (w) await withTimeout(w.cancel(), 2000, 'cancel timed out').catch(() => undefined);
  }
}
