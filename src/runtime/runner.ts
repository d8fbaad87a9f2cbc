// The runner: one controller's loop over the shared cache, and the one pass contract every
// controller and the node-agent follow:
//
//     snapshot(input, state, now) → decide(state, snapshot, now) → { acts, notes, wakeAt, next }
//
// The controller supplies those two pure-ish functions; the runner owns everything around them:
//   - triggers: changes of the prefixes it reads (debounced), a safety tick, the wake time the
//     pass asked for, the retry time of held acts, and the cache becoming synced;
//   - no pass while the cache is not synced (a watch down means stale heartbeats, and deciding
//     on them would declare healthy nodes lost);
//   - leadership as an option: an elected controller decides only while it leads and every write
//     carries its fence; a FencedError deposes only the term that wrote;
//   - acts: each lands or fails on its own (writer.commitEach); one that keeps failing is held back
//     with a growing delay, counted (jaco_act_failures_total) and logged once per change; one that
//     writes a key the cache cannot read is refused before it is sent;
//   - after the writes: metrics and audit log lines of the acts that landed, the next state;
//   - requeue rules: a conflict runs again shortly (the cache is catching up); any other error
//     backs off exponentially;
//   - read your writes: the next pass waits (up to CATCH_UP_MAX_MS) until the cache holds the
//     pass's last landed write, so it never decides again from a cache older than its own acts.
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import { AuditLog } from '../store/audit.js';
import { FencedError, isLeaseNotFound } from '../store/errors.js';
import { Leadership } from '../store/leadership.js';
import type { Store } from '../store/store.js';
import { commitEach, type Fence } from '../store/writer.js';
import type { Timings } from '../timings.js';
import { ACT_FAILURES, ActFailures, type Act, type ActFailure } from './acts.js';
import type { Cache } from './cache.js';
import type { Watchable } from './watchable.js';

/**
 * How long a pass waits for the cache to show the previous pass's own writes. Normally a few
 * milliseconds; a watch that lags longer (or is being re-made) does not hold the controller back:
 * it decides anyway, and its acts' preconditions refuse what the cache did not know.
 */
export const CATCH_UP_MAX_MS = 1000;
/** How often a waiting pass looks again. */
const CATCH_UP_POLL_MS = 5;

export interface PassResult<S, M = unknown> {
  acts: Act<M>[];
  /** Why things wait (logged at debug level when they change). */
  notes?: readonly object[];
  /** The earliest time something becomes due without any change (a ready time, a timeout). */
  wakeAt?: number;
  /** The state for the next pass, knowing which acts landed (leader-local memory). */
  next?: (landed: ReadonlySet<string>) => S;
}

/** What a snapshot is built from. */
export interface PassInput {
  cache: Cache;
  /** Acts that keep failing (status reports them where their subject is). */
  failing: readonly ActFailure[];
}

export interface ControllerSpec<S, Snap, M = unknown, R extends PassResult<S, M> = PassResult<S, M>> {
  name: string;
  /** The prefixes its snapshot reads: the cache holds them, and their changes trigger a pass. */
  reads: readonly Watchable[];
  /** Leader-elected with fenced writes (default true). */
  elected?: boolean;
  /** React to changes (default true); a cycle-driven controller (the rebalancer) runs on its tick. */
  eventDriven?: boolean;
  /** Period of the unconditional pass (default: the safety tick). */
  tickMs?: number;
  initialState(): S;
  snapshot(input: PassInput, state: S, now: number): Snap;
  decide(state: S, snapshot: Snap, now: number): R;
  /** Counts one metric event of an act that landed. */
  countMetric?(m: M): void;
  /** Side effects of a decision other than writes (the node-agent's Docker orders), before the writes. */
  perform?(result: R, now: number): void;
  /** The fence of an unelected writer (the node-agent's claim on its node). */
  fence?(): Fence | undefined;
  /** An unelected writer's fence failed (another process holds what it claimed). */
  fenced?(): void;
  /** Whether a pass may run now besides a synced cache (the node-agent: Docker up, node claimed). */
  ready?(): boolean;
  /** Leadership gained or lost (the state is reset either way). */
  leadershipChanged?(leading: boolean): void;
  /** After every pass, with the labels of the acts that landed (gauges, log lines of outcomes). */
  afterPass?(state: S, result: R, landed: ReadonlySet<string>): void;
  /** Wiring beside the loop (an HTTP route of the controller): called at start; the returned function at stop. */
  attach?(runner: Runner<S, Snap, M, R>): () => void;
}

export interface RunnerDeps {
  store: Store;
  cache: Cache;
  timings: Timings;
  log: Logger;
  /** This process, as shown in election keys and logs. */
  identity: string;
  clock?: () => number;
  /** Test seam: runs after decide, before the writes (e.g. to depose the leader mid-pass). */
  beforeCommit?: (acts: readonly Act[]) => Promise<void>;
  /**
   * The deterministic simulation (test/sim): no trigger (change, tick, wake, retry) starts a pass;
   * its driver calls passNow() when its seeded schedule says so.
   */
  manual?: boolean;
}

export interface RunnerHealth {
  synced: boolean;
  leader: boolean;
  failingActs: number;
}

export class Runner<S = unknown, Snap = unknown, M = unknown, R extends PassResult<S, M> = PassResult<S, M>> {
  state: S;
  readonly failures = new ActFailures();
  readonly leadership?: Leadership;
  readonly audit: AuditLog;
  readonly log: Logger;
  passes = 0;
  private readonly clock: () => number;
  private debounceTimer?: NodeJS.Timeout;
  private tickTimer?: NodeJS.Timeout;
  private wakeTimer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;
  private started = false;
  private backoffMs = 0;
  private lastNotes = '';
  private passWaiters: (() => void)[] = [];
  /** The last write of the last pass that the cache holds a watch over, and when it landed (wall time: it waits on I/O, not on the controller's clock). */
  private lastWrite?: { key: string; revision: number; at: number };
  private detach?: () => void;
  private readonly onChanged = (touched: ReadonlySet<string>, routine: ReadonlySet<string>) => {
    if (this.spec.reads.some((r) => touched.has(r) && !routine.has(r))) this.trigger();
  };
  private readonly onSynced = () => this.trigger(0);

  constructor(
    readonly spec: ControllerSpec<S, Snap, M, R>,
    private readonly deps: RunnerDeps,
  ) {
    this.log = deps.log.child({ controller: spec.name });
    this.clock = deps.clock ?? Date.now;
    this.state = spec.initialState();
    this.audit = new AuditLog(deps.store, spec.name, deps.timings.auditRetentionMs);
    if (spec.elected !== false) this.leadership = new Leadership(deps.store, { controller: spec.name, identity: deps.identity, ttlSec: deps.timings.leaderTtlSec, log: this.log });
  }

  get name(): string {
    return this.spec.name;
  }

  get cache(): Cache {
    return this.deps.cache;
  }

  get identity(): string {
    return this.deps.identity;
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    const { cache } = this.deps;
    this.detach = this.spec.attach?.(this);
    if (this.spec.eventDriven !== false) cache.on('changed', this.onChanged);
    cache.on('synced', this.onSynced);
    if (this.leadership) {
      this.leadership.on('elected', () => {
        this.resetState();
        this.spec.leadershipChanged?.(true);
        this.trigger(0);
      });
      this.leadership.on('deposed', () => {
        clearTimeout(this.wakeTimer);
        this.resetState();
        this.spec.leadershipChanged?.(false);
      });
      this.leadership.start();
    } else this.trigger(0);
    this.tickTimer = setInterval(() => this.trigger(0), this.spec.tickMs ?? this.deps.timings.safetyTickMs);
  }

  /** Leader-local memory starts afresh with every term (a new leader never acts on a stale memory). */
  private resetState(): void {
    this.state = this.spec.initialState();
    this.failures.clear();
    this.lastNotes = '';
  }

  isLeader(): boolean {
    return this.leadership ? this.leadership.isLeader() : true;
  }

  /** Schedules a pass after the debounce (or `delayMs`), or after the back-off of a failed one. */
  trigger(delayMs = this.deps.timings.debounceMs): void {
    if (this.stopped || this.deps.manual) return;
    if (this.running) {
      this.again = true;
      return;
    }
    if (this.debounceTimer) return;
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = undefined;
      void this.pass();
    }, Math.max(delayMs, this.backoffMs));
  }

  /** One pass now, whatever the triggers say (the simulation's driver: see RunnerDeps.manual). */
  passNow(): Promise<void> {
    return this.pass();
  }

  private fence(): Fence | undefined | null {
    if (this.leadership) return this.leadership.fence() ?? null;
    return this.spec.fence?.();
  }

  private async pass(): Promise<void> {
    if (this.stopped) return;
    const fence = this.fence();
    // null: elected but not leading; a synced cache is required to decide at all.
    if (fence === null || !this.deps.cache.synced || this.spec.ready?.() === false) return this.finishPass();
    if (this.behindOwnWrite()) return void this.trigger(CATCH_UP_POLL_MS);
    this.running = true;
    const timer = metrics.reconcileDuration.startTimer({ controller: this.spec.name });
    try {
      const now = this.clock();
      const snapshot = this.spec.snapshot({ cache: this.deps.cache, failing: this.failures.persistent() }, this.state, now);
      const result = this.spec.decide(this.state, snapshot, now);
      this.logNotes(result.notes ?? []);
      this.spec.perform?.(result, now);
      await this.deps.beforeCommit?.(result.acts);
      const landed = await this.commit(result, fence, now);
      if (result.next) this.state = result.next(landed);
      this.spec.afterPass?.(this.state, result, landed);
      this.backoffMs = 0;
      this.scheduleWake(result.wakeAt, now);
    } catch (e) {
      const err = e as Error;
      metrics.reconcileErrors.inc({ controller: this.spec.name, error: err.name });
      if (e instanceof FencedError && this.leadership && fence) {
        this.leadership.depose(err.message, fence);
      } else if (e instanceof FencedError && this.spec.fenced) {
        this.log.warn({ err: err.message }, 'write refused by the fence; this process no longer holds its claim');
        this.spec.fenced();
      } else {
        this.backoffMs = Math.min(Math.max(this.backoffMs * 2, this.deps.timings.backoffMinMs), this.deps.timings.backoffMaxMs);
        this.log.error({ err: err.message, stack: err.stack, retryInMs: this.backoffMs }, 'pass failed; retrying with back-off');
        this.again = true;
      }
    } finally {
      timer();
      this.running = false;
      this.finishPass();
    }
  }

  /** Commits what may be tried now; returns the labels that landed. */
  private async commit(result: R, fence: Fence | undefined, now: number): Promise<Set<string>> {
    const { cache, store } = this.deps;
    const landed = new Set<string>();
    this.failures.retain(new Set(result.acts.map((a) => a.label)));
    const tryNow: Act<M>[] = [];
    for (const act of result.acts) {
      if (this.failures.held(act.label, now)) continue;
      const unreadable = act.ops.map((o) => cache.unreadableAt(o.key)).find((u) => u !== undefined);
      if (unreadable) this.failed(act, 'unreadable_key', `${unreadable.key}: ${unreadable.reason}`, now);
      else tryNow.push(act);
    }
    if (!tryNow.length) return landed;
    const withAudit = () => Promise.all(tryNow.map(async (a) => ({ act: a, label: a.label, ops: [...a.ops, ...(await this.audit.ops(a.audit ?? []))] })));
    let acts = await withAudit();
    let res;
    try {
      res = await commitEach(store, acts, fence);
    } catch (e) {
      if (!isLeaseNotFound(e)) throw e;
      // The audit lease is gone (revoked, or etcd restored from a snapshot): records go on a new one.
      const leases = new Set(acts.flatMap((a) => a.ops.flatMap((o) => ('lease' in o && o.lease ? [o.lease] : []))));
      for (const l of leases) this.audit.leaseLost(l);
      this.log.warn({ leases: [...leases] }, 'the audit lease is gone; writing on a new one');
      acts = await withAudit();
      res = await commitEach(store, acts, fence);
    }
    this.noteLastWrite(res.committed, res.landedAt);
    for (const { act } of res.committed) {
      landed.add(act.label);
      this.failures.landed(act.label);
      for (const m of act.metrics ?? []) this.spec.countMetric?.(m);
      for (const a of act.audit ?? []) this.log.info({ deployment: a.deployment, ...a.payload }, a.type);
    }
    for (const { act } of res.conflicted) this.failed(act, 'conflict', 'a precondition no longer held', now);
    for (const r of res.refused) this.failed(r.act.act, r.reason, r.detail, now);
    if (res.conflicted.length) {
      metrics.writeConflicts.inc({ controller: this.spec.name }, res.conflicted.length);
      this.again = true; // the cache is behind: decide again once it has caught up
    }
    return landed;
  }

  /** Remembers the newest write of what landed that this process's cache will see come back. */
  private noteLastWrite<A extends { ops: Act['ops'] }>(committed: readonly A[], landedAt: ReadonlyMap<A, number>): void {
    let last: { key: string; revision: number } | undefined;
    for (const a of committed) {
      const revision = landedAt.get(a) ?? 0;
      if (last && revision <= last.revision) continue;
      const w = a.ops.find((o) => o.op !== 'check' && o.op !== 'checkRange' && !this.deps.cache.hasSeen(o.key, revision));
      if (w) last = { key: w.key, revision };
    }
    if (last) this.lastWrite = { ...last, at: performance.now() };
  }

  /**
   * The cache does not yet hold this runner's last write (and has not kept it waiting for
   * CATCH_UP_MAX_MS). Deciding now would re-plan what already landed — wasted transactions the
   * preconditions refuse, and another pass. The simulation's driver decides when passes run
   * (RunnerDeps.manual), so there a pass never waits: its seeds exercise stale caches on purpose.
   */
  private behindOwnWrite(): boolean {
    const w = this.lastWrite;
    if (!w || this.deps.manual) return false;
    if (this.deps.cache.hasSeen(w.key, w.revision) || performance.now() - w.at > CATCH_UP_MAX_MS) {
      this.lastWrite = undefined;
      return false;
    }
    return true;
  }

  private failed(act: Act<M>, reason: keyof typeof ACT_FAILURES, detail: string, now: number): void {
    const { failure, changed } = this.failures.failed(act, reason, detail, now);
    metrics.actFailures.inc({ controller: this.spec.name, reason });
    if (changed && reason !== 'conflict')
      this.log.warn({ act: act.label, subject: act.subject, reason, detail, retryAt: new Date(failure.retryAt).toISOString() }, `act held back: ${ACT_FAILURES[reason]}`);
    else if (failure.attempts === 4 && reason === 'conflict') this.log.warn({ act: act.label, subject: act.subject }, 'act keeps conflicting; backing off');
  }

  private logNotes(notes: readonly object[]): void {
    const text = JSON.stringify(notes);
    if (text === this.lastNotes) return;
    this.lastNotes = text;
    for (const n of notes) this.log.debug(n, `${this.spec.name} waiting`);
  }

  /** Ready times, timeouts and held acts come due without any change: wake up for them. */
  private scheduleWake(wakeAt: number | undefined, now: number): void {
    clearTimeout(this.wakeTimer);
    const retry = this.failures.nextRetry(now);
    const at = Math.min(wakeAt ?? Infinity, retry ?? Infinity);
    if (Number.isFinite(at)) this.wakeTimer = setTimeout(() => this.trigger(0), Math.max(0, at - now) + 20);
  }

  private finishPass(): void {
    this.passes++;
    const waiters = this.passWaiters;
    this.passWaiters = [];
    waiters.forEach((w) => w());
    if (this.again) {
      this.again = false;
      this.trigger();
    }
  }

  /** Resolves after the next completed (or skipped) pass. */
  waitForPass(): Promise<void> {
    return new Promise((r) => this.passWaiters.push(r));
  }

  health(): RunnerHealth {
    return { synced: this.deps.cache.synced, leader: this.isLeader(), failingActs: this.failures.persistent().length };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.detach?.();
    clearTimeout(this.debounceTimer);
    clearTimeout(this.wakeTimer);
    clearInterval(this.tickTimer);
    this.deps.cache.off('changed', this.onChanged);
    this.deps.cache.off('synced', this.onSynced);
    await this.leadership?.stop();
  }
}
