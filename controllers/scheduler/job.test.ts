import { describe, expect, it } from 'vitest';
import { API_VERSION, type ReplicaCommand, type ReplicaObserved, type ReplicaObservedStatus } from '../../src/api/types.js';
import { jobResult, judgeJobCopy, jobWaitReason, type JobVerdict } from './job.js';

const H = 'hash-1';
const T0 = Date.parse('2026-01-01T00:00:00Z');
const at = (s: number) => new Date(T0 + s * 1000).toISOString();
const policy = { attempts: 3, backoffMs: 5000 };

function obs(s: Partial<ReplicaObservedStatus>): ReplicaObserved {
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaObserved',
    metadata: { name: 'd-migrate-0' },
    status: { replica: 'd-migrate-0', node: 'n1', deployment: 'd', service: 'migrate', state: 'running', specHash: H, observedAt: at(10), ...s },
  };
}

function cmd(restarts: number, seq: number, acked = true): { cmd: ReplicaCommand; acked: number } {
  return {
    cmd: { apiVersion: API_VERSION, kind: 'ReplicaCommand', metadata: { name: 'd-migrate-0' }, spec: { replica: 'd-migrate-0', op: 'restart', seq, issuedAt: at(0), reason: 'job retry' }, status: { restarts, lastRestartAt: at(0), generation: 1 } },
    acked: acked ? seq : seq - 1,
  };
}

const exited = (code: number, extra: Partial<ReplicaObservedStatus> = {}) => ({ state: 'exited' as const, exitCode: code, startedAt: at(1), finishedAt: at(10), ...extra });

describe('judgeJobCopy', () => {
  const cases: { name: string; o?: Partial<ReplicaObservedStatus>; c?: ReturnType<typeof cmd>; now: number; want: Partial<JobVerdict> }[] = [
    { name: 'not observed yet', now: 0, want: { kind: 'pending', attempts: 1 } },
    { name: 'observed at another spec', o: { ...exited(0), specHash: 'old' }, now: 20, want: { kind: 'pending' } },
    { name: 'pulling', o: { state: 'pulling' }, now: 20, want: { kind: 'pending' } },
    { name: 'running', o: { state: 'running', startedAt: at(1) }, now: 20, want: { kind: 'running', attempts: 1, startedAt: at(1) } },
    { name: 'exit 0 completes it', o: exited(0), now: 20, want: { kind: 'succeeded', attempts: 1, startedAt: at(1), finishedAt: at(10) } },
    { name: 'exit 0 on the third run', o: exited(0), c: cmd(2, 2), now: 20, want: { kind: 'succeeded', attempts: 3 } },
    { name: 'OOM-killed with code 0 is no success', o: exited(0, { code: 'oom_killed' }), now: T0 + 15_000, want: { kind: 'retry', attempts: 1 } },
    { name: 'exit 3, back-off running (5s from the exit)', o: exited(3), now: T0 + 14_000, want: { kind: 'backoff', attempts: 1, exitCode: 3, wakeAt: T0 + 15_000, startedAt: at(1) } },
    { name: 'exit 3, back-off over: run 2', o: exited(3), now: T0 + 15_000, want: { kind: 'retry', attempts: 1, exitCode: 3, seq: 1, status: { restarts: 1, lastRestartAt: at(15), lastRestartCause: 'exited', generation: 1 }, startedAt: at(1) } },
    { name: 'second failure doubles the back-off', o: exited(3), c: cmd(1, 1), now: T0 + 19_000, want: { kind: 'backoff', attempts: 2, wakeAt: T0 + 20_000 } },
    { name: 'retry under way: what it shows predates it', o: exited(3), c: cmd(1, 1, false), now: T0 + 60_000, want: { kind: 'pending', attempts: 2 } },
    { name: 'third failure of 3 attempts: failed', o: exited(3), c: cmd(2, 2), now: T0 + 60_000, want: { kind: 'failed', attempts: 3, exitCode: 3, reason: 'exit 3 after 3 attempts' } },
    { name: 'a spec Docker refuses fails at once', o: { state: 'failed', code: 'invalid_spec', details: 'bad' }, now: 20, want: { kind: 'failed', attempts: 1, reason: 'invalid_spec: bad after 1 attempt' } },
    // A failed run of the job, but not the node's failure (src/api/eligibility.ts restartCountsAgainstNode).
    { name: 'removed behind the agent counts as a failed run', o: { state: 'exited', code: 'container_removed', finishedAt: undefined, observedAt: at(10) }, now: T0 + 15_000, want: { kind: 'retry', status: { restarts: 1, lastRestartAt: at(15), lastRestartCause: 'removed', generation: 1 } } },
  ];
  for (const t of cases)
    it(t.name, () => {
      const o = t.o ? obs(t.o) : undefined;
      if (o && t.c) o.status.ackedCommand = t.c.acked;
      expect(judgeJobCopy(H, o, t.c?.cmd, policy, 1, t.now)).toMatchObject(t.want);
    });

  it("the back-off runs on the controllers' clock: a node 60 s ahead reports its exit 60 s later than it was", () => {
    // Exited at T0+10s on the controllers' clock, stamped T0+70s by an agent 60 s ahead; back-off 5 s.
    const o = obs(exited(3, { finishedAt: at(70) }));
    expect(judgeJobCopy(H, o, undefined, policy, 1, T0 + 14_000, 60_000)).toMatchObject({ kind: 'backoff', wakeAt: T0 + 15_000 });
    expect(judgeJobCopy(H, o, undefined, policy, 1, T0 + 15_000, 60_000)).toMatchObject({ kind: 'retry' });
    // Unmeasured skew (an older agent): its own stamps, as before.
    expect(judgeJobCopy(H, o, undefined, policy, 1, T0 + 15_000)).toMatchObject({ kind: 'backoff', wakeAt: T0 + 75_000 });
  });

  it('attempts: 1 never retries', () => {
    expect(judgeJobCopy(H, obs(exited(1)), undefined, { attempts: 1, backoffMs: 0 }, 1, T0 + 60_000)).toMatchObject({ kind: 'failed', reason: 'exit 1 after 1 attempt' });
  });
});

describe('jobResult', () => {
  const t = { specHash: H, revision: 4, incarnation: 7 };
  const now = T0 + 100_000;
  const ok = (s: number, attempts = 1): JobVerdict => ({ kind: 'succeeded', attempts, startedAt: at(s), finishedAt: at(s + 10) });
  const cases: { name: string; vs: JobVerdict[]; want: number; prev?: Parameters<typeof jobResult>[3]; expected: Record<string, unknown> }[] = [
    { name: 'nothing placed yet', vs: [], want: 1, expected: { state: 'running', attempts: 0, reason: '0 of 1 replica succeeded' } },
    { name: 'one replica running', vs: [{ kind: 'running', attempts: 1, startedAt: at(1) }], want: 1, expected: { state: 'running', attempts: 1, startedAt: at(1) } },
    { name: 'one succeeded', vs: [ok(1)], want: 1, expected: { state: 'succeeded', attempts: 1, exitCode: 0, startedAt: at(1), finishedAt: at(11), durationMs: 10_000, reason: 'succeeded after 1 attempt' } },
    { name: 'two of three succeeded', vs: [ok(1), ok(2), { kind: 'running', attempts: 1 }], want: 3, expected: { state: 'running', reason: '2 of 3 replicas succeeded' } },
    { name: 'all succeeded: first start to last end', vs: [ok(1), ok(5, 2)], want: 2, expected: { state: 'succeeded', attempts: 2, startedAt: at(1), finishedAt: at(15), durationMs: 14_000 } },
    { name: 'backing off', vs: [{ kind: 'backoff', attempts: 1, exitCode: 3, wakeAt: 0 }], want: 1, expected: { state: 'running', reason: 'exit 3; retrying (attempt 2)' } },
    // The first run's start, from its back-off, is the job's start: the next passes keep it (prev).
    { name: 'backing off keeps the failed run\'s start', vs: [{ kind: 'backoff', attempts: 1, exitCode: 3, wakeAt: 0, startedAt: at(1) }], want: 1, expected: { state: 'running', startedAt: at(1) } },
    {
      name: 'failed after retries: the duration runs from the first start',
      vs: [{ kind: 'failed', attempts: 2, exitCode: 3, reason: 'exit 3 after 2 attempts', startedAt: at(30), finishedAt: at(30) }],
      want: 1,
      prev: { specHash: H, revision: 4, incarnation: 7, state: 'running', attempts: 1, startedAt: at(1) },
      expected: { state: 'failed', startedAt: at(1), durationMs: 29_000 },
    },
    {
      // Docker stamps a container that exits at once with a FinishedAt up to a few ms before its StartedAt.
      name: 'a run that ended "before" it started took no time',
      vs: [{ kind: 'failed', attempts: 1, exitCode: 3, reason: 'exit 3 after 1 attempt', startedAt: '2026-01-01T00:00:01.799Z', finishedAt: '2026-01-01T00:00:01.798Z' }],
      want: 1,
      expected: { state: 'failed', durationMs: 0 },
    },
    {
      name: 'one failed fails the job',
      vs: [ok(1), { kind: 'failed', attempts: 3, exitCode: 3, reason: 'exit 3 after 3 attempts', finishedAt: at(40) }],
      want: 2,
      expected: { state: 'failed', attempts: 3, exitCode: 3, finishedAt: at(40), durationMs: 39_000, reason: 'exit 3 after 3 attempts' },
    },
    {
      name: 'the start of the run is kept across retries',
      vs: [{ kind: 'running', attempts: 2, startedAt: at(30) }],
      want: 1,
      prev: { specHash: H, revision: 4, incarnation: 7, state: 'running', attempts: 1, startedAt: at(1) },
      expected: { startedAt: at(1), attempts: 2 },
    },
    {
      name: "an earlier spec's start is not",
      vs: [{ kind: 'running', attempts: 1, startedAt: at(30) }],
      want: 1,
      prev: { specHash: 'old', revision: 3, incarnation: 7, state: 'succeeded', attempts: 1, startedAt: at(1) },
      expected: { startedAt: at(30), revision: 4, specHash: H },
    },
    {
      name: "another incarnation's (the deployment deleted and re-created) is not either",
      vs: [{ kind: 'running', attempts: 1, startedAt: at(30) }],
      want: 1,
      prev: { specHash: H, revision: 4, incarnation: 3, state: 'running', attempts: 1, startedAt: at(1) },
      expected: { startedAt: at(30), incarnation: 7 },
    },
  ];
  for (const c of cases) it(c.name, () => expect(jobResult(c.vs, c.want, t, c.prev, now)).toMatchObject(c.expected));

  it('the reason a dependent shows', () => {
    expect(jobWaitReason(undefined)).toBe('not run yet');
    expect(jobWaitReason({ specHash: H, revision: 1, incarnation: 1, state: 'failed', attempts: 3, reason: 'exit 3 after 3 attempts' })).toBe('failed: exit 3 after 3 attempts');
  });
});
