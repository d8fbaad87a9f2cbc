// Leader election with fencing, after etcd's client/v3/concurrency: a candidate's key
// leaders/<controller>/<lease id> is bound to its lease; the candidate with the lowest create
// revision leads; a follower waits only for its predecessor's key to go. The leader's writes carry
// Compare(CreateRevision(its key) == its revision) (writer.ts), so a deposed leader's write fails.
// etcd3's Election class does the same dance but hides the create revision the fence needs and
// fixes its own key layout, hence this small module. Its lease is a KeptLease, the keeper the
// node-agent's heartbeat uses: a lease lost (etcd answers it is gone, or a TTL passes unanswered)
// is revoked and replaced alike in both; here the loss ends the term and the next campaign runs
// on the replacement.
//
// It owns four rules that keep a controller from ending up with no leader, or with a healthy
// term deposed: a campaign that fails after its lease was granted gives that lease up, and never
// waits on a key of its own (a commit whose reply was lost still landed); only the current term's
// fence can depose; a follower re-reads its predecessor on a timer, not only through a watch; and
// a predecessor bound to no lease, or to a lease etcd no longer has, is nobody's live campaign —
// nothing would ever remove it (a hand edit, keys copied without their leases as `etcdctl
// make-mirror` copies them) — so it is removed, logged, counted and shown in /healthz.
import { EventEmitter } from 'node:events';
import type { IKeyValue, Watcher } from 'etcd3';
import { Backoff } from '../backoff.js';
import { keys } from '../api/keys.js';
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import { claimKey } from './claim.js';
import { KeptLease } from './kept-lease.js';
import type { Fence } from './writer.js';
import { withTimeout, type Store } from './store.js';

export interface LeadershipOptions {
  controller: string;
  /**
   * Who is campaigning (shown by `jaco get leaders` and in logs). It is also how a candidate
   * recognises its own earlier keys, so it must be unique per candidate of one controller.
   */
  identity: string;
  ttlSec: number;
  log: Logger;
  /** How often a follower re-reads its predecessor besides watching it (default: half the TTL). */
  recheckMs?: number;
}

/** An election key found bound to no live lease and removed (LeadershipHealth). */
export interface StaleElectionKey {
  key: string;
  why: string;
  at: string;
}

/** For /healthz: stale election keys this campaign removed (the last few). */
export interface LeadershipHealth {
  staleKeysRemoved: StaleElectionKey[];
}

export interface LeadershipEvents {
  elected: [Fence];
  deposed: [string];
}

/** A revoke that cannot reach etcd must not hold up a campaign or a stop: the TTL ends the lease anyway. */
const REVOKE_TIMEOUT_MS = 2000;

/**
 * Campaigns until stopped. `fence()` is the current fence while leading and undefined otherwise;
 * leadership is dropped at once when the lease cannot be renewed within its TTL, and the process
 * campaigns again.
 */
export class Leadership extends EventEmitter<LeadershipEvents> {
  /** The campaigns' lease: kept alive, replaced when lost or given up (KeptLease). */
  private readonly lease: KeptLease;
  private current?: Fence;
  private stopped = false;
  private running?: Promise<void>;
  private renewalTimer?: NodeJS.Timeout;
  /** Ends the current term's wait (set just before `elected` is emitted). */
  private endTerm?: (why: string) => void;
  /** Ends whatever the campaign waits for now (a predecessor, a back-off pause), for stop(). */
  private wake?: () => void;
  private readonly recheckMs: number;
  private readonly staleRemoved: StaleElectionKey[] = [];

  constructor(private readonly store: Store, private readonly opts: LeadershipOptions) {
    super();
    this.recheckMs = opts.recheckMs ?? Math.max(250, (opts.ttlSec * 1000) / 2);
    this.lease = new KeptLease(store, { ttlSec: opts.ttlSec, log: opts.log });
  }

  fence(): Fence | undefined {
    // A lease not renewed for a whole TTL may already have expired on the server: stop writing.
    if (this.current && Date.now() - this.lease.confirmed > this.opts.ttlSec * 1000) this.depose('lease not renewed within its TTL', this.current);
    return this.current;
  }

  isLeader(): boolean {
    return this.fence() !== undefined;
  }

  /** Starts campaigning in the background. */
  start(): void {
    if (this.running) return;
    // A standby says so (0): the alert "no process leads the controller" (deploy/prometheus,
    // `max by (controller) (jaco_leader) == 0`) needs the standbys' series to fire when the leader's goes.
    metrics.leader.set({ controller: this.opts.controller }, 0);
    void this.lease.start();
    this.running = this.loop();
  }

  private async loop(): Promise<void> {
    const retry = new Backoff(200, 5000);
    while (!this.stopped) {
      try {
        await this.campaignOnce();
        retry.reset();
      } catch (e) {
        if (this.stopped) return;
        this.opts.log.warn({ err: (e as Error).message }, 'leader election: campaign failed; retrying');
        await this.pause(retry.next());
      }
    }
  }

  private async campaignOnce(): Promise<void> {
    const prefix = keys.leaders(this.opts.controller);
    // The kept lease, or its replacement once a lost or given-up one is replaced (with back-off while etcd is away).
    const leaseId = await this.lease.current();
    let onLost!: (id: string, why: string) => void;
    const lost = new Promise<string>((resolve) => (onLost = (id, why) => id === leaseId && resolve(`lease lost: ${why}`)));
    this.lease.on('lost', onLost);
    const myKey = `${prefix}${leaseId}`;
    try {
      if (this.stopped) return;
      const myRev = await this.createKey(myKey, leaseId);
      if (!(await this.waitForPredecessors(prefix, myRev, lost))) return;
      const fence: Fence = { controller: this.opts.controller, key: myKey, createRevision: myRev };
      // The term's end is in place before anyone hears of it: an `elected` listener may depose.
      const term = new Promise<string>((resolve) => (this.endTerm = resolve));
      this.current = fence;
      metrics.leader.set({ controller: this.opts.controller }, 1);
      this.opts.log.info({ key: myKey, revision: myRev }, 'elected leader');
      this.renewalTimer = setInterval(() => this.fence(), Math.max(250, (this.opts.ttlSec * 1000) / 4));
      this.emit('elected', fence);
      const why = await Promise.race([lost, term]);
      this.depose(why, fence);
    } finally {
      clearInterval(this.renewalTimer);
      this.endTerm = undefined;
      this.lease.off('lost', onLost);
      // Whatever ended the campaign, its lease goes (revoked, and a new one granted for the next):
      // kept alive, its key would hold the lowest create revision for as long as this process
      // lives, and nobody would ever lead. A stop revokes it in stop().
      if (!this.stopped) this.lease.gone(leaseId, 'the campaign ended');
    }
  }

  /**
   * Creates this campaign's key and returns its create revision (the fence). A commit that fails
   * may still have landed (its reply lost), and etcd3 re-sends a commit whose connection dropped,
   * which then finds the key present: either way the key is read back, and if it carries this
   * campaign's lease it is this campaign's key.
   */
  private async createKey(myKey: string, leaseId: string): Promise<number> {
    const claim = await claimKey(this.store, myKey, this.opts.identity, leaseId);
    if (!claim.ours) throw new Error(`election key ${myKey} exists and is not this candidate's`);
    if (claim.adopted) this.opts.log.info({ key: myKey, revision: claim.createRevision }, 'election key found in place after a failed commit; it is ours');
    return claim.createRevision;
  }

  /** Resolves true once no candidate created before `myRev` remains; false if stopped meanwhile. */
  private async waitForPredecessors(prefix: string, myRev: number, lost: Promise<string>): Promise<boolean> {
    for (;;) {
      if (this.stopped) return false;
      const res = await this.store.ns.getAll().prefix(prefix).maxCreateRevision(String(myRev - 1)).sort('Create', 'Descend').limit(1).exec();
      const pred = res.kvs[0];
      if (!pred) return true;
      // Keys read through the namespace are already relative to the store prefix.
      const predKey = pred.key.toString('utf8');
      if (pred.value.toString('utf8') === this.opts.identity) {
        await this.removeOwn(predKey, pred);
        continue;
      }
      const stale = await this.staleReason(pred);
      if (stale) {
        await this.removeStale(predKey, pred, stale);
        continue;
      }
      const outcome = await Promise.race([this.waitForDelete(predKey, Number(res.header.revision)).then(() => 'gone'), lost]);
      if (outcome !== 'gone') throw new Error(outcome);
    }
  }

  /** An earlier key of this candidate (a campaign that could not give its lease up): never wait on it. */
  private async removeOwn(key: string, kv: IKeyValue): Promise<void> {
    this.opts.log.info({ key }, 'removing an election key left by an earlier campaign of this candidate');
    await this.store.ns.if(key, 'Mod', '==', kv.mod_revision).then(this.store.ns.delete().key(key)).commit();
    if (kv.lease !== '0') await withTimeout(this.store.client.leaseClient.leaseRevoke({ ID: kv.lease }), REVOKE_TIMEOUT_MS, 'revoke timed out').catch(() => undefined);
  }

  /** Why a candidate's key is nobody's live campaign (no lease, or one etcd no longer has), if it is not. */
  private async staleReason(kv: IKeyValue): Promise<string | undefined> {
    if (kv.lease === '0' || !kv.lease) return 'bound to no lease';
    const ttl = await this.store.client.leaseClient.leaseTimeToLive({ ID: kv.lease });
    return Number(ttl.TTL) < 0 ? `its lease ${kv.lease} no longer exists` : undefined;
  }

  /** Removes a key no campaign holds (unless it changed since it was read): it would never go by itself. */
  private async removeStale(key: string, kv: IKeyValue, why: string): Promise<void> {
    this.opts.log.warn({ key, why, holder: kv.value.toString('utf8') }, 'election key held by no live lease; removing it so the campaign goes on');
    metrics.staleElectionKeys.inc({ controller: this.opts.controller });
    this.staleRemoved.push({ key, why, at: new Date().toISOString() });
    if (this.staleRemoved.length > 5) this.staleRemoved.shift();
    await this.store.ns.if(key, 'Mod', '==', kv.mod_revision).then(this.store.ns.delete().key(key)).commit();
  }

  health(): LeadershipHealth {
    return { staleKeysRemoved: [...this.staleRemoved] };
  }

  /**
   * Resolves when `key` is gone: by its watch's delete event, or by a re-read, made after every
   * (re)connection of the watch and every `recheckMs`. A watch can miss an event (etcd3 resumes
   * after the revision of its creation reply, not of the last event delivered); the re-read makes
   * that cost one interval instead of the rest of the process's life. A failing watch is no
   * reason to give up our place in line either: the re-reads go on.
   */
  private waitForDelete(key: string, fromRevision: number): Promise<void> {
    return new Promise((resolve) => {
      let done = false;
      const watcher: Watcher = this.store.ns
        .watch()
        .key(key)
        .startRevision(String(fromRevision + 1))
        .watcher();
      const finish = () => {
        if (done) return;
        done = true;
        clearInterval(timer);
        if (this.wake === finish) this.wake = undefined;
        void watcher.cancel().catch(() => undefined);
        resolve();
      };
      // Gone, or held by no live lease (the campaign's loop then removes it): stop waiting.
      const recheck = () => {
        void this.store.ns
          .get(key)
          .exec()
          .then(async (res) => {
            const kv = res.kvs[0];
            if (!kv || (await this.staleReason(kv))) finish();
          })
          .catch(() => undefined); // etcd away: the next re-read, or the watch, tells
      };
      const timer = setInterval(recheck, this.recheckMs);
      this.wake = finish;
      watcher.on('delete', finish);
      // The key may have gone between the read and the watch, or while the watch reconnected.
      watcher.on('connected', recheck);
      watcher.on('error', (e: Error) => this.opts.log.debug({ key, err: e.message }, 'predecessor watch failed; re-reading on a timer'));
    });
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wake = done;
    });
  }

  /**
   * Drops leadership at once; the loop campaigns again. A caller reacting to a refused write
   * passes the fence it wrote under: a fence of an earlier term (a pass that began before a
   * re-election) deposes nothing. Returns whether the current term ended.
   */
  depose(why: string, fence?: Fence): boolean {
    const cur = this.current;
    if (!cur) return false;
    if (fence && (fence.key !== cur.key || fence.createRevision !== cur.createRevision)) {
      this.opts.log.debug({ why, fence: fence.key, current: cur.key }, 'not deposed: the refused write was fenced by an earlier term');
      return false;
    }
    this.current = undefined;
    metrics.leader.set({ controller: this.opts.controller }, 0);
    this.opts.log.warn({ why }, 'lost leadership; stopped writing');
    const end = this.endTerm;
    this.endTerm = undefined;
    this.emit('deposed', why);
    end?.(why);
    return true;
  }

  /** Resigns (revokes the lease) and stops campaigning. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.depose('stopping');
    this.wake?.();
    // Resign at once even if the campaign is stuck in a call to an unreachable etcd (if etcd
    // cannot be reached, the TTL ends the lease)...
    await this.lease.stop({ revoke: true });
    // ...and let the campaign finish its own clean-up, for as long as a revoke may take.
    if (this.running) await withTimeout(this.running, REVOKE_TIMEOUT_MS * 2, 'campaign still running').catch(() => undefined);
  }
}
