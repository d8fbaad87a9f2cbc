// A lease kept alive for liveness (the node-agent's heartbeat): keepalives every `keepAliveMs`
// (default TTL/3) on one stream. When etcd answers that the lease is gone, or a whole TTL passes
// without an answered keepalive, a new lease is granted at once (with back-off while etcd is
// away) and `renewed` tells the owner to put the keys bound to the lease again. Liveness then
// lapses only for as long as etcd really is out of reach, not until the owner's next failed put.
// A lease given up for silence may still be alive in etcd (keepalives that landed with their
// answers lost; a raft leader change extends every lease by its TTL): it is revoked before the
// new grant, so keys bound to it — the owner's own claim — never outlive it, and `wasOurs` lets
// the owner recognise it if the revoke could not land. Leader election (leadership.ts) keeps its
// campaign's lease with it too: a lost lease ends the term, and the renewed one campaigns again.
import { EventEmitter, once } from 'node:events';
import { Backoff } from '../backoff.js';
import type { Logger } from '../observability/log.js';
import { isLeaseNotFound } from './errors.js';
import { withTimeout, type Store } from './store.js';

export interface KeptLeaseOptions {
  ttlSec: number;
  /** Interval between keepalives (default a third of the TTL, as etcd's own client does). */
  keepAliveMs?: number;
  log: Logger;
}

export interface KeptLeaseEvents {
  /** The lease is gone (`why`); a new one is being granted. */
  lost: [oldId: string, why: string];
  /** A new lease replaced a lost one: put the keys bound to the old one again, on `newId`. */
  renewed: [newId: string, oldId: string];
}

type KeepAliveStream = Awaited<ReturnType<Store['client']['leaseClient']['leaseKeepAlive']>>;

const MIN_BACKOFF_MS = 100;

export class KeptLease extends EventEmitter<KeptLeaseEvents> {
  private leaseId?: string;
  /** The lease that was lost and not yet replaced (for `renewed`). */
  private replacing?: string;
  /** When etcd last confirmed the lease (a grant or an answered keepalive). */
  private confirmedAt = 0;
  private stream?: KeepAliveStream;
  private opening = false;
  private timer?: NodeJS.Timeout;
  private readonly retry: Backoff;
  private stopped = false;
  private granting = false;
  private firstGrant?: { resolve(id: string): void; reject(e: Error): void };
  private starting?: Promise<string>;
  /** The revoke of the last lost lease, awaited (bounded) before the next grant. */
  private revoking?: Promise<void>;
  /** Leases this owner gave up (the last few): a key bound to one is its own, not another owner's. */
  private readonly given: string[] = [];
  private readonly keepAliveMs: number;
  /** Ends a wait for the next lease (current()) when the keeper stops. */
  private readonly stopping = new AbortController();

  constructor(private readonly store: Store, private readonly opts: KeptLeaseOptions) {
    super();
    if (!(opts.ttlSec >= 1)) throw new RangeError(`a lease TTL is at least 1 s, got ${opts.ttlSec}`);
    this.keepAliveMs = opts.keepAliveMs ?? (opts.ttlSec * 1000) / 3;
    // While etcd is away, a new grant is tried at least once per keepalive interval.
    this.retry = new Backoff(MIN_BACKOFF_MS, Math.max(500, this.keepAliveMs));
  }

  /** The current lease, or undefined while a lost one is being replaced. */
  get id(): string | undefined {
    return this.leaseId;
  }

  /** When etcd last confirmed the current lease (a grant or an answered keepalive), epoch ms. */
  get confirmed(): number {
    return this.confirmedAt;
  }

  /** Grants the first lease (retrying while etcd is away) and keeps it alive from then on. */
  start(): Promise<string> {
    this.starting ??= new Promise((resolve, reject) => {
      this.firstGrant = { resolve, reject };
      this.schedule(0);
    });
    // A start nobody awaits must not turn a stop() into an unhandled rejection.
    this.starting.catch(() => undefined);
    return this.starting;
  }

  /** The current lease, waiting while a lost one is being replaced (or the first is granted). */
  async current(): Promise<string> {
    if (this.leaseId) return this.leaseId;
    if (this.stopped) throw new Error('lease stopped');
    if (!this.replacing) return this.start();
    const [id] = (await once(this, 'renewed', { signal: this.stopping.signal })) as [string, string];
    return id;
  }

  /** Whether `id` is a lease this owner held and gave up (so a key bound to it is the owner's own leftover). */
  wasOurs(id: string | undefined): boolean {
    return !!id && this.given.includes(id);
  }

  /** The owner found the lease gone (a write refused: lease not found): replace it now, not at the next keepalive. */
  gone(id: string, why: string): void {
    if (id === this.leaseId) this.lose(why);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.beat(), ms);
  }

  /** One step: grant when there is no lease, give the lease up after a silent TTL, or keep it alive. */
  private async beat(): Promise<void> {
    this.timer = undefined;
    if (this.stopped) return;
    if (!this.leaseId) return this.grant();
    if (Date.now() - this.confirmedAt > this.opts.ttlSec * 1000) return this.lose('no keepalive answered within the TTL');
    // A stream that has not answered for two beats may be stuck on a dead connection: reopen it.
    if (this.stream && Date.now() - this.confirmedAt > 2 * this.keepAliveMs + 1000) this.closeStream();
    this.keepAlive();
    this.schedule(this.keepAliveMs);
  }

  private async grant(): Promise<void> {
    if (this.granting) return;
    this.granting = true;
    try {
      await this.revoking;
      this.revoking = undefined;
      // A grant that hangs on a dead connection must not stop the retries.
      const res = await withTimeout(this.store.client.leaseClient.leaseGrant({ TTL: this.opts.ttlSec, ID: 0 }), Math.max(2000, this.keepAliveMs), 'lease grant timed out');
      if (this.stopped) {
        // Nobody will keep it alive; do not leave it for its TTL either.
        void this.store.revokeLease(res.ID);
        return;
      }
      this.leaseId = res.ID;
      this.confirmedAt = Date.now();
      this.retry.reset();
      const old = this.replacing;
      this.replacing = undefined;
      this.schedule(this.keepAliveMs);
      this.keepAlive();
      if (old) {
        this.opts.log.info({ lease: res.ID, old }, 'lease replaced');
        this.emit('renewed', res.ID, old);
      }
      this.firstGrant?.resolve(res.ID);
      this.firstGrant = undefined;
    } catch (e) {
      const retryInMs = this.retry.next();
      this.opts.log.warn({ err: (e as Error).message, retryInMs }, 'lease grant failed; retrying');
      this.schedule(retryInMs);
    } finally {
      this.granting = false;
    }
  }

  /** The lease is gone: forget it and grant a new one at once. */
  private lose(why: string): void {
    const old = this.leaseId;
    if (!old || this.stopped) return;
    this.leaseId = undefined;
    this.replacing ??= old;
    this.closeStream();
    this.given.push(old);
    if (this.given.length > 8) this.given.shift();
    this.opts.log.warn({ lease: old, why }, 'lease lost; granting a new one');
    this.emit('lost', old, why);
    // Nobody keeps it alive any more; if etcd still has it, end it now rather than at its TTL.
    this.revoking = withTimeout(this.store.revokeLease(old), Math.max(1000, this.keepAliveMs), 'revoke timed out').catch(() => undefined);
    this.schedule(0);
  }

  private keepAlive(): void {
    const id = this.leaseId;
    if (!id) return;
    if (this.stream) {
      this.stream.write({ ID: id });
      return;
    }
    if (this.opening) return;
    this.opening = true;
    this.store.client.leaseClient.leaseKeepAlive().then(
      (stream) => {
        this.opening = false;
        if (this.stopped) return stream.end();
        this.stream = stream;
        stream.on('data', (res) => {
          if (res.ID !== this.leaseId) return; // an answer about a lease already replaced
          if (Number(res.TTL) <= 0) this.lose('etcd no longer has the lease');
          else this.confirmedAt = Date.now();
        });
        const drop = (e?: Error) => {
          if (this.stream !== stream) return;
          this.stream = undefined;
          if (e && isLeaseNotFound(e)) this.lose('etcd no longer has the lease');
          // Otherwise the next beat reopens it; the TTL check decides whether the lease survived.
        };
        stream.on('error', (e) => drop(e));
        stream.on('end', () => drop());
        if (this.leaseId) stream.write({ ID: this.leaseId });
      },
      (e: Error) => {
        this.opening = false;
        this.opts.log.debug({ err: e.message }, 'keepalive stream could not be opened; retrying with the next beat');
      },
    );
  }

  private closeStream(): void {
    const s = this.stream;
    this.stream = undefined;
    // end(), not cancel(): etcd3 counts a cancelled stream as a failure of the host.
    s?.end();
  }

  /** Stops keeping the lease alive; with `revoke`, ends it now (its keys go at once) instead of at its TTL. */
  async stop(opts: { revoke?: boolean } = {}): Promise<void> {
    this.stopped = true;
    this.stopping.abort();
    clearTimeout(this.timer);
    this.timer = undefined;
    this.closeStream();
    this.firstGrant?.reject(new Error('lease stopped before it was granted'));
    this.firstGrant = undefined;
    const id = this.leaseId;
    this.leaseId = undefined;
    if (opts.revoke && id) await withTimeout(this.store.revokeLease(id), 2000, 'revoke timed out').catch(() => undefined);
  }
}
