// Health-driven restarts (seed 001, "Health and restart policy"), one replica at a time: when the
// agent observes a replica degraded, exited or failed, the scheduler writes a restart command; it
// waits for the agent to acknowledge it, backs off between restarts (doubling per consecutive
// failure) and after 3 consecutive failures without the replica becoming ready marks it exhausted
// until the deployment's next apply. The bookkeeping lives in commands/<host>/<replica>.status.
import { backoffAfter } from '../../src/backoff.js';
import { minReadyAt, replicaReady } from '../../src/api/readiness.js';
import type { ReplicaCommand, ReplicaCommandStatus, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import type { RestartCause } from '../../src/api/reasons/scheduling.js';

/** Restarts in a row without the replica becoming ready, before it is marked restart_exhausted. */
export const MAX_CONSECUTIVE_RESTARTS = 3;

export interface RestartPolicy {
  /** Wait after the first restart before the second; doubles for each further one. */
  backoffMs: number;
  maxRestarts: number;
}

export type RestartVerdict =
  /** Nothing to write. wakeAt: when a pass could decide something new without any event. */
  | { kind: 'none'; wakeAt?: number; why?: 'restart_pending' | 'exhausted' | 'backoff' }
  /** Write a restart command (spec.seq + 1). */
  | { kind: 'restart'; cause: RestartCause; seq: number; status: ReplicaCommandStatus }
  /** Failed again with the budget spent: mark it exhausted, no command. */
  | { kind: 'exhaust'; cause: RestartCause; status: ReplicaCommandStatus }
  /** Ready again: the consecutive-failure counter is cleared. */
  | { kind: 'recover'; status: ReplicaCommandStatus }
  /** A new apply restored the budget of a replica that is not failing. */
  | { kind: 'reset'; status: ReplicaCommandStatus };

const NOTHING: RestartVerdict = Object.freeze({ kind: 'none' });
const PENDING: RestartVerdict = Object.freeze({ kind: 'none', why: 'restart_pending' });

/** Why an observation calls for a restart, or undefined when it does not. */
export function restartCause(o: ReplicaObserved | undefined): RestartCause | undefined {
  const s = o?.status;
  if (!s) return undefined;
  // Someone's docker rm or docker pause is a cause of its own: it says nothing of the node (eligibility.ts).
  if (s.state === 'degraded') return s.code === 'paused' ? 'paused' : 'degraded';
  if (s.state === 'exited') return s.code === 'container_removed' ? 'removed' : 'exited';
  // A spec Docker refuses will not start on a retry either: that needs a new apply.
  if (s.state === 'failed' && s.code !== 'invalid_spec') return 'failed';
  return undefined;
}

/** When the next restart may be issued after `restarts` consecutive ones. */
export function nextRestartAt(st: ReplicaCommandStatus, policy: RestartPolicy): number {
  if (!st.restarts || !st.lastRestartAt) return -Infinity;
  return Date.parse(st.lastRestartAt) + backoffAfter(st.restarts, policy.backoffMs, Infinity);
}

/** A restart command is executed by the agent once, when its seq exceeds the acknowledged one. */
export function restartPending(cmd: ReplicaCommand | undefined, o: ReplicaObserved | undefined): boolean {
  return !!cmd && (o?.status.ackedCommand ?? -1) < cmd.spec.seq;
}

/**
 * What to do about one replica copy's health. `generation` is the deployment's current one: an
 * apply since the bookkeeping was written restores the budget (seed 001: "until the next apply").
 */
export function judgeRestart(
  d: ReplicaDesired,
  o: ReplicaObserved | undefined,
  cmd: ReplicaCommand | undefined,
  generation: number,
  now: number,
  policy: RestartPolicy,
): RestartVerdict {
  // The agent has not executed the last command yet: what it reports predates the restart.
  if (restartPending(cmd, o)) return PENDING;
  const cause = restartCause(o);
  // The common case, cheap (it runs for every replica on every pass): fine and never restarted.
  if (!cause && !cmd) return NOTHING;
  const prev: ReplicaCommandStatus = cmd?.status ?? { restarts: 0, generation };
  const newApply = prev.generation !== generation && (prev.restarts > 0 || !!prev.exhausted);
  const st: ReplicaCommandStatus = newApply ? { restarts: 0, generation } : prev;

  if (!cause) {
    if (replicaReady(d, o, now)) return st.restarts > 0 || st.exhausted ? { kind: 'recover', status: { restarts: 0, generation } } : NOTHING;
    if (newApply) return { kind: 'reset', status: st };
    return { kind: 'none', wakeAt: st.restarts > 0 ? minReadyAt(d, o) : undefined };
  }
  if (st.exhausted) return { kind: 'none', why: 'exhausted' };
  if (st.restarts >= policy.maxRestarts)
    return { kind: 'exhaust', cause, status: { ...st, exhausted: true, generation } };
  const at = nextRestartAt(st, policy);
  if (now < at) return { kind: 'none', why: 'backoff', wakeAt: at };
  return {
    kind: 'restart',
    cause,
    seq: (cmd?.spec.seq ?? 0) + 1,
    status: { restarts: st.restarts + 1, lastRestartAt: new Date(now).toISOString(), lastRestartCause: cause, generation },
  };
}

