// Leader election with fencing, after etcd's client/v3/concurrency: a candidate's key
// leaders/<controller>/<lease id> is bound to its lease; the candidate with the lowest create
// revision leads; a follower waits only for its predecessor's key to go. The leader's writes carry
// Compare(CreateRevision(its key) == its revision) (writer.ts), so a deposed leader's write fails.
// etcd3's Election class does the same dance but hides the create revision the fence needs and
// fixes its own key layout, hence this small module on top of etcd3's Lease.
import { EventEmitter } from 'node:events';
import type { Lease } from 'etcd3';
import { keys } from '../api/keys.js';
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import type { Fence } from './writer.js';
import type { Store } from './store.js';

export interface LeadershipOptions {
  controller: string;
  /** Who is campaigning (shown by `jaco get leaders` and in logs). */
  identity: string;
  ttlSec: number;
  log: Logger;
}

export interface LeadershipEvents {
  elected: [Fence];
  deposed: [string];
}

/**
 * Campaigns until stopped. `fence()` is the current fence while leading and undefined otherwise;
 * leadership is dropped at once when the lease cannot be renewed within its TTL, and the process
 * campaigns again.
 */
export class Leadership extends EventEmitter<LeadershipEvents> {
  private lease?: Lease;
  private current?: Fence;
  private stopped = false;
  private lastRenewal = 0;
  private renewalTimer?: NodeJS.Timeout;
  private cancelWait?: () => void;

  constructor(private readonly store: Store, private readonly opts: LeadershipOptions) {
    super();
  }

  fence(): Fence | undefined {
    // A lease not renewed for a whole TTL may already have expired on the server: stop writing.
    if (this.current && Date.now() - this.lastRenewal > this.opts.ttlSec * 1000) this.depose('lease not renewed within its TTL');
    return this.current;
  }

  isLeader(): boolean {
    return this.fence() !== undefined;
  }

  /** Starts campaigning in the background. */
  start(): void {
    void this.loop();
  }

  private async loop(): Promise<void> {
    let backoff = 200;
    while (!this.stopped) {
      try {
        await this.campaignOnce();
        backoff = 200;
      } catch (e) {
        if (this.stopped) return;
        this.opts.log.warn({ err: (e as Error).message }, 'leader election: campaign failed; retrying');
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  private async campaignOnce(): Promise<void> {
    const prefix = keys.leaders(this.opts.controller);
    const lease = this.store.ns.lease(this.opts.ttlSec, { autoKeepAlive: true });
    this.lease = lease;
    const lost = new Promise<string>((resolve) => lease.once('lost', (e) => resolve(`lease lost: ${e.message}`)));
    lease.on('keepaliveSucceeded', () => (this.lastRenewal = Date.now()));
    const leaseId = await lease.grant();
    this.lastRenewal = Date.now();
    const myKey = `${prefix}${leaseId}`;
    const created = await this.store.ns
      .if(myKey, 'Create', '==', 0)
      .then(this.store.ns.put(myKey).value(this.opts.identity).lease(leaseId))
      .commit();
    if (!created.succeeded) throw new Error(`election key ${myKey} already exists`);
    const myRev = Number(created.header.revision);
    try {
      // Wait until no candidate created before us remains.
      for (;;) {
        if (this.stopped) return;
        const res = await this.store.ns.getAll().prefix(prefix).maxCreateRevision(String(myRev - 1)).sort('Create', 'Descend').limit(1).exec();
        const pred = res.kvs[0];
        if (!pred) break;
        const predGone = this.waitForDelete(pred.key.toString('utf8').slice(this.store.prefix.length), Number(res.header.revision));
        const outcome = await Promise.race([predGone.then(() => 'gone'), lost]);
        if (outcome !== 'gone') throw new Error(outcome);
      }
      this.current = { controller: this.opts.controller, key: myKey, createRevision: myRev };
      this.lastRenewal = Date.now();
      metrics.leader.set({ controller: this.opts.controller }, 1);
      this.opts.log.info({ key: myKey, revision: myRev }, 'elected leader');
      this.emit('elected', this.current);
      this.renewalTimer = setInterval(() => this.fence(), Math.max(250, (this.opts.ttlSec * 1000) / 4));
      const why = await Promise.race([lost, this.untilDeposed()]);
      this.depose(why);
    } finally {
      clearInterval(this.renewalTimer);
      this.cancelWait?.();
      await lease.revoke().catch(() => undefined);
      if (this.lease === lease) this.lease = undefined;
    }
  }

  private deposedResolve?: (why: string) => void;
  private untilDeposed(): Promise<string> {
    return new Promise((resolve) => (this.deposedResolve = resolve));
  }

  /** Drops leadership at once (e.g. a write came back FencedError); the loop campaigns again. */
  depose(why: string, fence?: Fence): void {
    if (!this.current) return;
    // Only the term that wrote can be deposed by its failure: a later term is not this write's business.
    if (fence && fence.createRevision !== this.current.createRevision) return;
    this.current = undefined;
    metrics.leader.set({ controller: this.opts.controller }, 0);
    this.opts.log.warn({ why }, 'lost leadership; stopped writing');
    this.emit('deposed', why);
    this.deposedResolve?.(why);
  }

  private waitForDelete(key: string, fromRevision: number): Promise<void> {
    return new Promise((resolve, reject) => {
      let done = false;
      const finish = (f: () => void) => {
        if (done) return;
        done = true;
        f();
      };
      this.store.ns
        .watch()
        .key(key)
        .startRevision(String(fromRevision + 1))
        .create()
        .then((w) => {
          this.cancelWait = () => finish(() => void w.cancel().then(resolve));
          w.on('delete', () => finish(() => void w.cancel().then(resolve, resolve)));
          w.on('error', (e) => finish(() => void w.cancel().finally(() => reject(e))));
          // The key may have gone between the read and the watch.
          void this.store.ns.get(key).exists().then((exists) => {
            if (!exists) finish(() => void w.cancel().then(resolve, resolve));
          });
        }, reject);
    });
  }

  /** Resigns (revokes the lease) and stops campaigning. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.depose('stopping');
    this.cancelWait?.();
    await this.lease?.revoke().catch(() => undefined);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
