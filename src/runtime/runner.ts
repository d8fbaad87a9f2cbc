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
//     pass's last landed write, so it never decides again from a cache older than its own acts;
//   - a controller that decides in steps (decideSteps: the scheduler, service by service) has each
//     step's acts sent while it decides the next, the cache held still meanwhile: a pass that
//     places thousands of replicas writes from its first service on instead of after its last.
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import { AuditLog } from '../store/audit.js';
import { FencedError, isLeaseNotFound } from '../store/errors.js';
import { Leadership, type StaleElectionKey } from '../store/leadership.js';
import type { Store } from '../store/store.js';
import { commitEach, Committer, type CommitResult, type Fence, type Op } from '../store/writer.js';
import type { Timings } from '../timings.js';
import { Backoff } from '../backoff.js';
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
/**
 * How long a pass that decides in steps runs before the acts decided so far go out and I/O gets
 * its turn (sends, answers, watch responses read and queued). A pass shorter than this sends its
 * acts at the end, packed as one plan: only large passes are split.
 */
export const STEP_SLICE_MS = 20;
/** A pass longer than this is logged with its timings. */
const SLOW_PASS_MS = 1000;

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
  /**
   * decide, in steps (optional): yields the acts of each step as it is decided and returns the
   * whole result, whose acts begin with every act yielded, in order — the same result as decide.
   * The runner sends a step's acts while it decides the next (holding the cache still between
   * steps), so a large pass overlaps its deciding with its writing. Not with `perform`, whose
   * side effects go before any write.
   */
  decideSteps?(state: S, snapshot: Snap, now: number): Generator<readonly Act<M>[], R, void>;
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
   * its driver calls passNow() when its seeded schedule says so. A pass that decides in steps
   * decides them all before any write (beforeCommit sees the whole plan once)...
   */
  manual?: boolean;
  /** ...unless this is set: then each step's acts are sent as it is decided, beforeCommit once per step. */
  stepCommits?: boolean;
}

export interface RunnerHealth {
  synced: boolean;
  leader: boolean;
  failingActs: number;
  /** Election keys held by no live lease that this controller's campaign removed (leadership.ts). */
  staleElectionKeys?: StaleElectionKey[];
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
  /** The wait before the next pass after a failed one (0 while passes succeed). */
  private backoffMs = 0;
  private readonly retry: Backoff;
  private lastNotes = '';
  private passWaiters: (() => void)[] = [];
  /** The last write of the last pass that the cache holds a watch over, and when it landed (wall time: it waits on I/O, not on the controller's clock). */
  private lastWrite?: { key: string; revision: number; at: number };
  private detach?: () => void;
  private readonly onChanged = (touched: ReadonlySet<string>, routine: ReadonlySet<string>) => {
    if (this.spec.reads.some((r) => touched.has(r) && !routine.has(r))) this.trigger();
  };
  private readonly onSynced = () => this.trigger(0);
  /** The store was replaced (restored, wiped): what this runner remembers of the old one is void. */
  private readonly onReplaced = () => {
    this.lastWrite = undefined;
    this.resetState();
  };

  constructor(
    readonly spec: ControllerSpec<S, Snap, M, R>,
    private readonly deps: RunnerDeps,
  ) {
    if (spec.decideSteps && spec.perform) throw new Error(`controller ${spec.name}: decideSteps and perform do not go together (perform's effects precede every write)`);
    this.log = deps.log.child({ controller: spec.name });
    this.clock = deps.clock ?? Date.now;
    this.state = spec.initialState();
    this.retry = new Backoff(deps.timings.backoffMinMs, deps.timings.backoffMaxMs);
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
    cache.on('replaced', this.onReplaced);
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

  /** The controller's memory starts afresh (its owner reloaded what it is built from), and a pass follows. */
  reset(): void {
    this.resetState();
    this.trigger(0);
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
    const t0 = performance.now();
    const writes = new PassWrites<M>({ store: this.deps.store, fence, audit: this.audit, log: this.log, tryable: (a, now) => this.tryable(a, now) });
    try {
      const now = this.clock();
      const snapshot = this.spec.snapshot({ cache: this.deps.cache, failing: this.failures.persistent() }, this.state, now);
      const result = this.spec.decideSteps ? await this.decideInSteps(snapshot, now, writes) : this.spec.decide(this.state, snapshot, now);
      const decided = performance.now();
      this.logNotes(result.notes ?? []);
      this.spec.perform?.(result, now);
      await this.send(writes, result.acts.slice(writes.handed), now);
      const landed = await this.landed(writes, result, now);
      if (result.next) this.state = result.next(landed);
      this.spec.afterPass?.(this.state, result, landed);
      this.backoffMs = 0;
      this.retry.reset();
      this.scheduleWake(result.wakeAt, now);
      const ms = performance.now() - t0;
      if (ms > SLOW_PASS_MS) this.log.info({ ms: Math.round(ms), decideMs: Math.round(decided - t0), acts: result.acts.length, landed: landed.size, transactions: writes.transactions }, 'slow pass');
    } catch (e) {
      writes.abandon();
      const err = e as Error;
      metrics.reconcileErrors.inc({ controller: this.spec.name, error: err.name });
      if (e instanceof FencedError && this.leadership && fence) {
        this.leadership.depose(err.message, fence);
      } else if (e instanceof FencedError && this.spec.fenced) {
        this.log.warn({ err: err.message }, 'write refused by the fence; this process no longer holds its claim');
        this.spec.fenced();
      } else {
        this.backoffMs = this.retry.next();
        this.log.error({ err: err.message, stack: err.stack, retryInMs: this.backoffMs }, 'pass failed; retrying with back-off');
        this.again = true;
      }
    } finally {
      timer();
      this.running = false;
      this.finishPass();
    }
  }

  /**
   * Runs decideSteps to its end. Live, the cache is held still throughout, and every
   * STEP_SLICE_MS the acts decided so far are sent and I/O gets its turn. In the simulation
   * (manual) nothing is sent before the end, or, with stepCommits, each step's acts at once.
   */
  private async decideInSteps(snapshot: Snap, now: number, writes: PassWrites<M>): Promise<R> {
    const { manual, stepCommits } = this.deps;
    const steps = this.spec.decideSteps!(this.state, snapshot, now);
    const release = manual ? undefined : this.deps.cache.hold();
    try {
      let pending: Act<M>[] = [];
      let slice = performance.now();
      for (;;) {
        const step = steps.next();
        if (step.done) return step.value;
        if (manual && !stepCommits) continue;
        pending.push(...step.value);
        if (!pending.length || (!manual && performance.now() - slice < STEP_SLICE_MS)) continue;
        await this.send(writes, pending, now);
        pending = [];
        if (!manual) await new Promise((r) => setImmediate(r));
        slice = performance.now();
      }
    } finally {
      release?.();
    }
  }

  /** Hands acts to the pass's writes (after the test seam, which sees every act before it is sent). */
  private async send(writes: PassWrites<M>, acts: readonly Act<M>[], now: number): Promise<void> {
    if (!acts.length) return;
    await this.deps.beforeCommit?.(acts);
    writes.send(acts, now);
  }

  /** Waits for the pass's writes; books what landed, conflicted or was refused; returns the labels that landed. */
  private async landed(writes: PassWrites<M>, result: R, now: number): Promise<Set<string>> {
    const landed = new Set<string>();
    this.failures.retain(new Set(result.acts.map((a) => a.label)));
    const res = await writes.finish();
    if (!res) return landed;
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

  /** An act may be tried now: not held back after failures, and writing no key the cache cannot read. */
  private tryable(act: Act<M>, now: number): boolean {
    if (this.failures.held(act.label, now)) return false;
    const unreadable = act.ops.map((o) => this.deps.cache.unreadableAt(o.key)).find((u) => u !== undefined);
    if (!unreadable) return true;
    this.failed(act, 'unreadable_key', `${unreadable.key}: ${unreadable.reason}`, now);
    return false;
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
    const stale = this.leadership?.health().staleKeysRemoved ?? [];
    return { synced: this.deps.cache.synced, leader: this.isLeader(), failingActs: this.failures.persistent().length, ...(stale.length ? { staleElectionKeys: stale } : {}) };
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.detach?.();
    clearTimeout(this.debounceTimer);
    clearTimeout(this.wakeTimer);
    clearInterval(this.tickTimer);
    this.deps.cache.off('changed', this.onChanged);
    this.deps.cache.off('synced', this.onSynced);
    this.deps.cache.off('replaced', this.onReplaced);
    await this.leadership?.stop();
  }
}

/** An act as sent: its ops with its audit records. */
interface Audited<M> {
  act: Act<M>;
  label: string;
  ops: Op[];
}

/** What a pass's writes need of their runner. */
interface PassWritesDeps<M> {
  store: Store;
  fence: Fence | undefined;
  audit: AuditLog;
  log: Logger;
  /** Whether an act may be tried now (not held back, no unreadable key); a refusal is booked by the runner. */
  tryable(act: Act<M>, now: number): boolean;
}

/**
 * One pass's writes (writer.Committer): acts are taken as they are decided, checked (held back,
 * unreadable key), given their audit records and sent in order. The audit lease gone (revoked,
 * or etcd restored from a snapshot) fails the commit: every act is sent again on a new lease,
 * and those that had landed conflict, as any act decided twice does.
 */
class PassWrites<M> {
  /** Acts taken so far (a stepped pass's result begins with them). */
  handed = 0;
  transactions = 0;
  /** Acts tried (not held back), and as sent, with their records. */
  private readonly tried: Act<M>[] = [];
  private readonly sent: Audited<M>[] = [];
  private readonly committer: Committer<Audited<M>>;
  /** Audit records are made in order, so acts reach the committer in plan order. */
  private sending: Promise<void> = Promise.resolve();
  private abandoned = false;

  constructor(private readonly deps: PassWritesDeps<M>) {
    this.committer = new Committer(deps.store, deps.fence);
  }

  send(acts: readonly Act<M>[], now: number): void {
    this.handed += acts.length;
    const fit = acts.filter((a) => this.deps.tryable(a, now));
    if (!fit.length) return;
    this.tried.push(...fit);
    this.sending = this.sending.then(async () => {
      const audited = await Promise.all(fit.map((a) => this.audited(a)));
      this.sent.push(...audited);
      if (this.abandoned || this.committer.broken) return;
      this.committer.add(audited);
      this.committer.flush();
    });
    this.sending.catch(() => undefined); // its error is thrown by finish
  }

  /** Every answer (undefined when nothing was tried); the first error, once every answer is in. */
  async finish(): Promise<CommitResult<Audited<M>> | undefined> {
    if (!this.tried.length) return undefined;
    let res: CommitResult<Audited<M>>;
    try {
      await this.sending;
      res = await this.committer.finish();
    } catch (e) {
      if (!isLeaseNotFound(e)) throw e;
      const leases = new Set(this.sent.flatMap((a) => a.ops.flatMap((o) => ('lease' in o && o.lease ? [o.lease] : []))));
      for (const l of leases) this.deps.audit.leaseLost(l);
      this.deps.log.warn({ leases: [...leases] }, 'the audit lease is gone; writing on a new one');
      res = await commitEach(this.deps.store, await Promise.all(this.tried.map((a) => this.audited(a))), this.deps.fence);
    }
    this.transactions = res.transactions;
    return res;
  }

  /** The pass failed: what is in flight finishes on its own, nothing more is sent. */
  abandon(): void {
    this.abandoned = true;
    void this.sending.then(() => this.committer.finish()).catch(() => undefined);
  }

  /** The ops of an act with its audit records (the act and its records are one transaction). */
  private async audited(act: Act<M>): Promise<Audited<M>> {
    return { act, label: act.label, ops: [...act.ops, ...(await this.deps.audit.ops(act.audit ?? []))] };
  }
}
