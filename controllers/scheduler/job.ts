// One-off jobs (mode: job): each replica runs to completion once per applied change of the
// service's spec. An exit 0 completes it; a non-zero exit runs it again after the job's back-off
// (doubling), up to job.attempts runs. The service's result is stored per spec hash in its
// scheduling status (JobResult): once succeeded or failed at the current hash, nothing places,
// re-places (node loss, a drained or lost key) or restarts its replicas until the spec changes.
// judgeJobCopy and jobResult are pure (tables in job.test.ts); reconcileJob writes what they say.
import { backoffAfter } from '../../src/backoff.js';
import { keys } from '../../src/api/keys.js';
import type { ServingTemplate } from '../../src/api/serving.js';
import { jobPolicy } from '../../src/api/spec.js';
import { API_VERSION, type JobResult, type ReplicaCommand, type ReplicaCommandStatus, type ReplicaObserved, type ServiceSchedulingStatus, type ServiceSpec } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { inFlight } from '../moves/move.js';
import { placeIndexed, scaleDown } from './membership.js';
import { replaceLost } from './node-loss.js';
import { restartCause, restartPending } from './restarts.js';
import { cmp, iso, type SchedulerPass } from './pass.js';

export interface JobRetryPolicy {
  /** Runs in all, the first included. */
  attempts: number;
  /** Wait before the second run; doubles for each further one. */
  backoffMs: number;
}

/** What one replica of a job shows; `attempts` counts its runs so far (the current one included). */
export type JobVerdict =
  /** Not started at this spec yet, or a retry under way. */
  | { kind: 'pending'; attempts: number }
  | { kind: 'running'; attempts: number; startedAt?: string }
  | { kind: 'succeeded'; attempts: number; startedAt?: string; finishedAt?: string }
  /** Exited non-zero, runs left: wait until wakeAt. */
  | { kind: 'backoff'; attempts: number; exitCode?: number; wakeAt: number; startedAt?: string }
  /** Exited non-zero, runs left, back-off over: write restart command `seq`. */
  | { kind: 'retry'; attempts: number; exitCode?: number; seq: number; status: ReplicaCommandStatus; why: string; startedAt?: string }
  | { kind: 'failed'; attempts: number; exitCode?: number; reason: string; startedAt?: string; finishedAt?: string };

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** How a run ended, in a few words: "exit 3", "killed for exceeding its memory limit". */
function endOf(s: ReplicaObserved['status']): string {
  if (s.code === 'oom_killed') return `exit ${s.exitCode ?? '?'} (OOM-killed)`;
  if (s.state === 'failed' || s.code === 'start_failed' || s.code === 'container_removed') return `${s.code ?? s.state}${s.details ? `: ${s.details}` : ''}`;
  return `exit ${s.exitCode ?? '?'}`;
}

/**
 * One replica of a job at its desired spec: what it shows, and what to do. `cmd` is its restart
 * command (its status counts the retries); `generation` is the deployment's, for the bookkeeping.
 * `skewMs` is how far its node's clock is ahead of the controllers' (its heartbeat's clockSkewMs):
 * the run's end is the agent's time, and the back-off is counted on the controllers' clock.
 */
export function judgeJobCopy(
  specHash: string,
  o: ReplicaObserved | undefined,
  cmd: ReplicaCommand | undefined,
  policy: JobRetryPolicy,
  generation: number,
  now: number,
  skewMs = 0,
): JobVerdict {
  const attempts = (cmd?.status?.restarts ?? 0) + 1;
  const s = o?.status;
  // What the agent reports predates the last retry, or another spec: nothing to judge yet.
  if (!s || s.specHash !== specHash || restartPending(cmd, o)) return { kind: 'pending', attempts };
  if (s.state === 'running' || s.state === 'degraded') return { kind: 'running', attempts, ...(s.startedAt ? { startedAt: s.startedAt } : {}) };
  const started = s.startedAt ? { startedAt: s.startedAt } : {};
  const times = { ...started, ...(s.finishedAt ? { finishedAt: s.finishedAt } : {}) };
  if (s.state === 'exited' && s.exitCode === 0 && !s.code) return { kind: 'succeeded', attempts, ...times };
  if (s.state !== 'exited' && s.state !== 'failed') return { kind: 'pending', attempts };
  const end = endOf(s);
  const exit = s.exitCode !== undefined ? { exitCode: s.exitCode } : {};
  // A spec Docker refuses fails the same way on every run: no retry can help.
  if (s.code === 'invalid_spec' || attempts >= policy.attempts) return { kind: 'failed', attempts, ...exit, reason: `${end} after ${plural(attempts, 'attempt')}`, ...times };
  const wakeAt = Date.parse(s.finishedAt ?? s.observedAt) - skewMs + backoffAfter(attempts, policy.backoffMs, Infinity);
  // A run that failed still started: the service's result keeps the first run's start, so its
  // duration covers every attempt and the back-offs between them.
  if (now < wakeAt) return { kind: 'backoff', attempts, ...exit, wakeAt, ...started };
  return {
    kind: 'retry',
    attempts,
    ...exit,
    ...started,
    seq: (cmd?.spec.seq ?? 0) + 1,
    // Its cause, as a health restart records it: a run whose container was removed by hand is not the node's failure.
    status: { restarts: attempts, lastRestartAt: iso(now), lastRestartCause: restartCause(o) ?? 'exited', generation },
    why: `${end}; run ${attempts + 1} of ${policy.attempts}`,
  };
}

const earliest = (xs: (string | undefined)[]) => xs.filter((x): x is string => !!x).sort(cmp)[0];
const latest = (xs: (string | undefined)[]) => xs.filter((x): x is string => !!x).sort(cmp).at(-1);

/**
 * The service's result from its replicas' verdicts (by replica id): failed as soon as one replica
 * failed, succeeded once `want` replicas succeeded, else running. A run of the same spec keeps the
 * start it first reported (a retry's container starts later).
 */
export function jobResult(verdicts: readonly JobVerdict[], want: number, t: Pick<JobResult, 'specHash' | 'revision' | 'incarnation'>, prev: JobResult | undefined, now: number): JobResult {
  const base = { specHash: t.specHash, revision: t.revision, incarnation: t.incarnation };
  const sameRun = sameSpec(prev, t) ? prev : undefined;
  const startedAt = sameRun?.startedAt ?? earliest(verdicts.map((v) => ('startedAt' in v ? v.startedAt : undefined)));
  const started = startedAt ? { startedAt } : {};
  const attempts = Math.max(0, ...verdicts.map((v) => (v.kind === 'pending' && v.attempts === 1 ? 0 : v.attempts)));
  const failed = verdicts.find((v) => v.kind === 'failed');
  if (failed) {
    const finishedAt = failed.finishedAt ?? iso(now);
    return { ...base, state: 'failed', attempts: failed.attempts, ...(failed.exitCode !== undefined ? { exitCode: failed.exitCode } : {}), ...started, finishedAt, ...duration(startedAt, finishedAt), reason: failed.reason };
  }
  const succeeded = verdicts.filter((v) => v.kind === 'succeeded');
  if (succeeded.length >= want) {
    const finishedAt = latest(succeeded.map((v) => v.finishedAt)) ?? iso(now);
    return { ...base, state: 'succeeded', attempts, exitCode: 0, ...started, finishedAt, ...duration(startedAt, finishedAt), reason: `succeeded after ${plural(attempts, 'attempt')}` };
  }
  const waiting = verdicts.find((v) => v.kind === 'backoff' || v.kind === 'retry');
  const reason = waiting ? `exit ${waiting.exitCode ?? '?'}; retrying (attempt ${waiting.attempts + 1})` : `${succeeded.length} of ${plural(want, 'replica')} succeeded`;
  return { ...base, state: 'running', attempts, ...started, reason };
}

/**
 * How long a run took. Docker may stamp a container that exits at once with a FinishedAt a little
 * before its StartedAt (each is taken on its own path): that is a run of no time, not an unknown one.
 */
function duration(startedAt: string | undefined, finishedAt: string): { durationMs?: number } {
  const ms = startedAt ? Date.parse(finishedAt) - Date.parse(startedAt) : NaN;
  return Number.isFinite(ms) ? { durationMs: Math.max(0, ms) } : {};
}

/** Whether a stored result is of this spec of this incarnation of the deployment. */
export function sameSpec(r: JobResult | undefined, t: Pick<JobResult, 'specHash' | 'incarnation'>): r is JobResult {
  return !!r && r.specHash === t.specHash && r.incarnation === t.incarnation;
}

/** The one line a dependent waiting on a job shows: "failed: exit 3 after 3 attempts". */
export function jobWaitReason(r: JobResult | undefined): string {
  if (!r) return 'not run yet';
  return r.state === 'failed' ? `failed: ${r.reason ?? 'failed'}` : r.state === 'running' ? `running${r.reason ? ` (${r.reason})` : ''}` : 'succeeded';
}

/**
 * Membership and retries of a job service. Runs of an earlier spec go first (a changed spec runs
 * afresh, under new replica ids); a result final at the current spec holds everything still.
 * Returns the replicas kept (for endpoints).
 */
export function reconcileJob(
  pass: SchedulerPass,
  dep: string,
  svc: string,
  spec: ServiceSpec,
  template: () => ServingTemplate,
  replicas: ReplicaEntry[],
  waiting: boolean,
  generation: number,
  st: ServiceSchedulingStatus,
): ReplicaEntry[] {
  const served = template();
  const t = { ...served, incarnation: pass.snap.deployments.get(dep)!.createRevision };
  const prev = pass.snap.statuses.get(dep)?.value.status?.scheduling?.services[svc]?.job;
  const current: ReplicaEntry[] = [];
  for (const e of replicas) {
    if (e.copies.some((c) => c.desired.spec.specHash !== t.specHash)) pass.remove(e, 'job_superseded');
    else current.push(e);
  }
  const want = spec.replicas ?? 1;
  st.desired = want;
  if (sameSpec(prev, t) && prev.state !== 'running') {
    // Done at this spec: what ran stays as it ended (its logs, its exit), nothing runs again.
    st.placed = current.length;
    st.job = prev;
    return current;
  }
  const kept = replaceLost(pass, scaleDown(pass, current, want), spec, st);
  let placed = kept.length;
  if (placed < want && !waiting) placed += placeIndexed(pass, dep, svc, spec, template, kept, want - placed, st);
  st.placed = Math.min(placed, want);
  const policy = jobPolicy(spec);
  const verdicts: JobVerdict[] = [];
  for (const e of [...kept].sort((a, b) => cmp(a.id, b.id))) {
    if (e.copies.length !== 1 || inFlight(e.copies)) {
      verdicts.push({ kind: 'pending', attempts: 1 });
      continue;
    }
    const c = e.copies[0]!;
    const cmd = pass.command(e, c.desired.spec.node);
    const v = c.modRevision === 0 ? ({ kind: 'pending', attempts: 1 } as const) : judgeJobCopy(t.specHash, c.observed, cmd?.value, policy, generation, pass.now, pass.snap.heartbeats.get(c.desired.spec.node)?.spec.clockSkewMs);
    verdicts.push(v);
    if (v.kind === 'backoff') pass.wake(v.wakeAt);
    if (v.kind === 'retry' && pass.ready(c.desired.spec.node)) retry(pass, e, c.desired.spec.node, cmd, v);
  }
  st.job = jobResult(verdicts, want, t, prev, pass.now);
  return kept;
}

/** The retry's restart command and its record, like a health-driven restart (health.ts). */
function retry(pass: SchedulerPass, e: ReplicaEntry, node: string, cmd: ReturnType<SchedulerPass['command']>, v: Extract<JobVerdict, { kind: 'retry' }>): void {
  const key = keys.command(node, e.id);
  const value: ReplicaCommand = {
    apiVersion: API_VERSION,
    kind: 'ReplicaCommand',
    metadata: { name: e.id },
    spec: { replica: e.id, op: 'restart', seq: v.seq, issuedAt: pass.iso, reason: `job retry: ${v.why}` },
    status: v.status,
  };
  pass.plan.restart.push({ replica: e.id, deployment: e.deployment, service: e.service, node, cause: 'exited', restarts: v.status.restarts, seq: v.seq });
  pass.plan.acts.push({
    label: `retry ${node}/${e.id}`,
    subject: `deployment/${e.deployment}`,
    ops: [cmd ? { op: 'update', key, value, modRevision: cmd.modRevision } : { op: 'create', key, value }],
    audit: [{ type: 'job_retried', time: pass.now, deployment: e.deployment, payload: { replica: e.id, service: e.service, node, exitCode: v.exitCode, attempt: v.attempts + 1, why: v.why, seq: v.seq } }],
    metrics: [{ restarts: { deployment: e.deployment, service: e.service } }],
  });
}
