// The shell of a leader-elected controller. It owns the wiring every controller shares:
// informers in, leader election, triggers (watch events debounced, plus a safety tick), the
// fenced batched commit, and one place for requeue rules:
//   - success: wait for the next trigger;
//   - ConflictError / a conflicted transaction: the informers are behind; run again shortly;
//   - FencedError: no longer leader; stop writing at once and campaign again;
//   - anything else: retry with exponential back-off, counted by error name.
// A controller supplies only `reconcile(now)`: read its informers, decide, return acts.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from '../observability/log.js';
import { metrics } from '../observability/metrics.js';
import { AuditLog, type AuditRecord } from '../store/audit.js';
import { FencedError } from '../store/errors.js';
import { Informer } from '../store/informer.js';
import { Leadership } from '../store/leadership.js';
import type { Store } from '../store/store.js';
import { commitActs, type CommitResult, type Fence, type Op } from '../store/writer.js';
import type { Timings } from '../timings.js';

/** An act as controllers plan it: its ops plus the audit records that must land with it. */
export interface PlannedAct {
  label: string;
  ops: Op[];
  audit?: AuditRecord[];
}

export interface ControllerContext {
  store: Store;
  timings: Timings;
  log: Logger;
  /** This process, as shown in election keys and logs. */
  identity: string;
}

export interface Reconciler {
  /** One level-triggered pass over the current informer state. */
  reconcile(now: number): PlannedAct[] | Promise<PlannedAct[]>;
  /** Called with what landed, so leader-local state (cooldowns, counters) can follow. */
  committed?(result: CommitResult, acts: PlannedAct[], now: number): void;
  /** Called when leadership is gained or lost (reset leader-local state). */
  leadershipChanged?(leading: boolean): void;
}

export interface InformerSpec {
  prefix: string;
  kind?: string;
}

export interface ControllerOptions {
  name: string;
  ctx: ControllerContext;
  informers: Record<string, InformerSpec>;
  /** Periodic pass (default: the safety tick). */
  tickMs?: number;
  /** React to watch events (debounced); a cycle-driven controller (rebalancer) turns it off. */
  eventDriven?: boolean;
  /** Injected clock, for tests. */
  clock?: () => number;
}

export function processIdentity(): string {
  return `${hostname()}/${process.pid}/${randomBytes(2).toString('hex')}`;
}

export class Controller {
  readonly informers: Record<string, Informer<unknown>> = {};
  readonly leadership: Leadership;
  readonly audit: AuditLog;
  readonly log: Logger;
  private reconciler?: Reconciler;
  private debounceTimer?: NodeJS.Timeout;
  private tickTimer?: NodeJS.Timeout;
  private running = false;
  private again = false;
  private stopped = false;
  private backoffMs = 0;
  private readonly clock: () => number;
  /** Resolves after the next completed pass (tests and `waitForPass`). */
  private passWaiters: (() => void)[] = [];
  passes = 0;

  constructor(readonly opts: ControllerOptions) {
    const { ctx, name } = opts;
    this.log = ctx.log.child({ controller: name });
    this.clock = opts.clock ?? Date.now;
    for (const [k, spec] of Object.entries(opts.informers)) this.informers[k] = new Informer(ctx.store, spec.prefix, { kind: spec.kind, log: this.log });
    this.leadership = new Leadership(ctx.store, { controller: name, identity: ctx.identity, ttlSec: ctx.timings.leaderTtlSec, log: this.log });
    this.audit = new AuditLog(ctx.store, name, ctx.timings.auditRetentionMs);
  }

  /** Typed access to an informer by the name it was declared with. */
  informer<T>(name: string): Informer<T> {
    const i = this.informers[name];
    if (!i) throw new Error(`${this.opts.name}: no informer named ${name}`);
    return i as Informer<T>;
  }

  async start(reconciler: Reconciler): Promise<void> {
    this.reconciler = reconciler;
    await Promise.all(Object.values(this.informers).map((i) => i.start()));
    if (this.opts.eventDriven !== false)
      for (const inf of Object.values(this.informers)) {
        inf.on('change', () => this.trigger());
        inf.on('relisted', () => this.trigger());
      }
    this.leadership.on('elected', () => {
      reconciler.leadershipChanged?.(true);
      this.trigger(0);
    });
    this.leadership.on('deposed', () => reconciler.leadershipChanged?.(false));
    this.leadership.start();
    const tick = this.opts.tickMs ?? this.opts.ctx.timings.safetyTickMs;
    this.tickTimer = setInterval(() => this.trigger(0), tick);
  }

  /** Schedules a pass after the debounce (or `delayMs`). */
  trigger(delayMs = this.opts.ctx.timings.debounceMs): void {
    if (this.stopped) return;
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

  private async pass(): Promise<void> {
    if (this.stopped || !this.reconciler) return;
    const fence = this.leadership.fence();
    if (!fence) return this.finishPass();
    this.running = true;
    const timer = metrics.reconcileDuration.startTimer({ controller: this.opts.name });
    try {
      const now = this.clock();
      const acts = await this.reconciler.reconcile(now);
      const result = await this.commit(acts, fence);
      this.reconciler.committed?.(result, acts, now);
      this.backoffMs = 0;
      if (result.conflicted.length) {
        metrics.writeConflicts.inc({ controller: this.opts.name }, result.conflicted.length);
        this.log.debug({ conflicted: result.conflicted.map((a) => a.label) }, 'write conflict; deciding again');
        this.again = true;
      }
    } catch (e) {
      const err = e as Error;
      metrics.reconcileErrors.inc({ controller: this.opts.name, error: err.name });
      if (e instanceof FencedError) {
        this.leadership.depose(err.message);
      } else {
        this.backoffMs = Math.min(Math.max(this.backoffMs * 2, this.opts.ctx.timings.backoffMinMs), this.opts.ctx.timings.backoffMaxMs);
        this.log.error({ err: err.message, stack: err.stack, retryInMs: this.backoffMs }, 'reconcile failed; retrying with back-off');
        this.again = true;
      }
    } finally {
      timer();
      this.running = false;
      this.finishPass();
    }
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

  /** Converts planned acts (with their audit records) into ops and commits them, fenced. */
  async commit(acts: PlannedAct[], fence: Fence): Promise<CommitResult> {
    if (!acts.length) return { committed: [], conflicted: [], transactions: 0 };
    const withAudit = await Promise.all(
      acts.map(async (a) => ({ label: a.label, ops: [...a.ops, ...(await this.audit.ops(a.audit ?? []))] })),
    );
    return commitActs(this.opts.ctx.store, withAudit, fence);
  }

  waitForPass(): Promise<void> {
    return new Promise((r) => this.passWaiters.push(r));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.debounceTimer);
    clearInterval(this.tickTimer);
    await this.leadership.stop();
    await Promise.all(Object.values(this.informers).map((i) => i.stop()));
  }
}
