// Acts as controllers plan them, and what the runtime remembers about acts that keep failing.
// An act is a group of writes that must land together (a placement with its decision and audit
// record, a move with its marker). Each commits on its own — batched into transactions for
// throughput, but one that fails never holds back the others — and an act that keeps failing the
// same way is held back with a growing delay, counted and reported instead of retried at once
// forever. The policy here is pure: the clock comes in.
import { backoffAfter } from '../backoff.js';
import type { AuditRecord } from '../store/audit.js';
import type { OpGroup } from '../store/writer.js';
import type { ActFailureReason } from '../api/reasons/acts.js';

export { ACT_FAILURES, type ActFailureReason } from '../api/reasons/acts.js';

/** A controller's act: a group of ops (OpGroup) that lands with its audit records, and what it counts. */
export interface Act<M = unknown> extends OpGroup {
  /**
   * What the act is, stable across passes for the same intent ("place hello/web 3..5"): the
   * runtime recognises an act that failed before by it.
   */
  label: string;
  /** Audit records that land in the same transaction. */
  audit?: AuditRecord[];
  /** Counted once the act has landed. */
  metrics?: M[];
  /** The object the act is for, e.g. `deployment/hello`, `node/node-1`: where its failures are reported. */
  subject?: string;
}

export interface ActFailure {
  label: string;
  subject?: string;
  reason: ActFailureReason;
  detail: string;
  /** Consecutive failures with this reason. */
  attempts: number;
  since: number;
  /** Not tried again before this time. */
  retryAt: number;
}

/** Conflicts are normal (the cache catches up in milliseconds): the first few retry at once. */
const FREE_CONFLICTS = 3;
const FIRST_DELAY_MS = 100;
const MAX_DELAY_MS = 30_000;

/** The delay before the next attempt of an act after `attempts` consecutive failures. */
export function retryDelay(reason: ActFailureReason, attempts: number): number {
  const free = reason === 'conflict' ? FREE_CONFLICTS : 0;
  if (attempts <= free) return 0;
  return backoffAfter(attempts - free, FIRST_DELAY_MS, MAX_DELAY_MS);
}

/** Failing acts of one controller, by label. */
export class ActFailures {
  private readonly byLabel = new Map<string, ActFailure>();

  /** Records a failure; returns the record, and whether it is new or changed reason (worth a log line). */
  failed(act: Pick<Act, 'label' | 'subject'>, reason: ActFailureReason, detail: string, now: number): { failure: ActFailure; changed: boolean } {
    const prev = this.byLabel.get(act.label);
    const attempts = prev?.reason === reason ? prev.attempts + 1 : 1;
    const failure: ActFailure = {
      label: act.label,
      ...(act.subject ? { subject: act.subject } : {}),
      reason,
      detail,
      attempts,
      since: prev?.reason === reason ? prev.since : now,
      retryAt: now + retryDelay(reason, attempts),
    };
    this.byLabel.set(act.label, failure);
    return { failure, changed: prev?.reason !== reason || prev.detail !== detail };
  }

  landed(label: string): boolean {
    return this.byLabel.delete(label);
  }

  /** The act is being held back at `now` (its retry time has not come). */
  held(label: string, now: number): ActFailure | undefined {
    const f = this.byLabel.get(label);
    return f && f.retryAt > now ? f : undefined;
  }

  /** Forgets acts no longer planned: a failure only lives while its act keeps being planned. */
  retain(planned: ReadonlySet<string>): void {
    for (const label of this.byLabel.keys()) if (!planned.has(label)) this.byLabel.delete(label);
  }

  /** The earliest retry time after `now`, if any act is held. */
  nextRetry(now: number): number | undefined {
    let at: number | undefined;
    for (const f of this.byLabel.values()) if (f.retryAt > now) at = Math.min(at ?? f.retryAt, f.retryAt);
    return at;
  }

  /** Only failures that are not plain first conflicts (what status and health report). */
  persistent(): ActFailure[] {
    return [...this.byLabel.values()].filter((f) => f.reason !== 'conflict' || f.attempts > FREE_CONFLICTS).sort((a, b) => (a.label < b.label ? -1 : 1));
  }

  get size(): number {
    return this.byLabel.size;
  }

  clear(): void {
    this.byLabel.clear();
  }
}
