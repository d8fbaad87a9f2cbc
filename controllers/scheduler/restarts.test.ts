import { describe, expect, it } from 'vitest';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { ObservedState, ReplicaCommand, ReplicaCommandStatus, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { judgeRestart, nextRestartAt, type RestartPolicy } from './restarts.js';

const T = Date.parse('2026-11-21T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const policy: RestartPolicy = { backoffMs: 500, maxRestarts: 3 };
const template = withDefaults({ image: 'x' });
const d: ReplicaDesired = {
  apiVersion: 'jaco.dev/v1',
  kind: 'ReplicaDesired',
  metadata: { name: 'd-w-0' },
  spec: { replica: 'd-w-0', deployment: 'd', service: 'w', node: 'n1', index: 0, revision: 2, specHash: specHash(template), template, placedAt: iso(T - 60_000) },
};
const obs = (state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}): ReplicaObserved => ({
  apiVersion: 'jaco.dev/v1',
  kind: 'ReplicaObserved',
  metadata: { name: 'd-w-0' },
  status: { replica: 'd-w-0', node: 'n1', deployment: 'd', service: 'w', state, revision: 2, specHash: d.spec.specHash, startedAt: iso(T - 60_000), observedAt: iso(T), ackedCommand: 5, ...extra },
});
const cmd = (seq: number, status: Partial<ReplicaCommandStatus>): ReplicaCommand => ({
  apiVersion: 'jaco.dev/v1',
  kind: 'ReplicaCommand',
  metadata: { name: 'd-w-0' },
  spec: { replica: 'd-w-0', op: 'restart', seq, issuedAt: iso(T - 1000), reason: 'x' },
  status: { restarts: 0, generation: 1, ...status },
});

describe('judgeRestart', () => {
  it.each<[string, ReplicaObserved | undefined, ReplicaCommand | undefined, number, Record<string, unknown>]>([
    ['running, never restarted: nothing', obs('running'), undefined, 1, { kind: 'none' }],
    ['not observed yet: nothing', undefined, undefined, 1, { kind: 'none' }],
    ['exited, first failure: restart at once, seq 1', obs('exited'), undefined, 1, { kind: 'restart', cause: 'exited', seq: 1, status: { restarts: 1, generation: 1, lastRestartAt: iso(T), lastRestartCause: 'exited' } }],
    ['OOM-killed: exited', obs('exited', { code: 'oom_killed' }), undefined, 1, { kind: 'restart', cause: 'exited', status: { lastRestartCause: 'exited' } }],
    ['degraded: restart', obs('degraded', { code: 'unhealthy' }), undefined, 1, { kind: 'restart', cause: 'degraded', status: { lastRestartCause: 'degraded' } }],
    ['failed to start: restart', obs('failed', { code: 'start_failed' }), undefined, 1, { kind: 'restart', cause: 'failed', status: { lastRestartCause: 'failed' } }],
    // Acts outside jaco: restarted all the same, under a cause of their own that does not count against the node.
    ['container removed outside jaco (docker rm, jaco down)', obs('exited', { code: 'container_removed' }), undefined, 1, { kind: 'restart', cause: 'removed', status: { restarts: 1, lastRestartCause: 'removed' } }],
    ['container paused outside jaco (docker pause)', obs('degraded', { code: 'paused' }), undefined, 1, { kind: 'restart', cause: 'paused', status: { restarts: 1, lastRestartCause: 'paused' } }],
    ['removed again after a failed run: the last cause is recorded', obs('exited', { code: 'container_removed' }), cmd(5, { restarts: 1, lastRestartAt: iso(T - 60_000), lastRestartCause: 'exited' }), 1, { kind: 'restart', seq: 6, status: { restarts: 2, lastRestartCause: 'removed' } }],
    ['exhausted: the last cause is kept', obs('exited'), cmd(5, { restarts: 3, lastRestartAt: iso(T - 60_000), lastRestartCause: 'removed' }), 1, { kind: 'exhaust', cause: 'exited', status: { restarts: 3, exhausted: true, lastRestartCause: 'removed' } }],
    ['failed with an invalid spec: no restart can help', obs('failed', { code: 'invalid_spec' }), undefined, 1, { kind: 'none' }],
    ['command not executed yet (acked 5 < seq 6): wait', obs('exited'), cmd(6, { restarts: 1, lastRestartAt: iso(T - 5000) }), 1, { kind: 'none', why: 'restart_pending' }],
    ['second failure inside the back-off: wake at lastRestartAt + 500 ms', obs('exited'), cmd(5, { restarts: 1, lastRestartAt: iso(T - 100) }), 1, { kind: 'none', why: 'backoff', wakeAt: T + 400 }],
    ['second failure after the back-off: restart 2', obs('exited'), cmd(5, { restarts: 1, lastRestartAt: iso(T - 500) }), 1, { kind: 'restart', seq: 6, status: { restarts: 2 } }],
    ['the back-off doubles: 1 s after the second restart', obs('exited'), cmd(5, { restarts: 2, lastRestartAt: iso(T - 999) }), 1, { kind: 'none', wakeAt: T + 1 }],
    ['fourth failure: exhausted, no command', obs('exited'), cmd(5, { restarts: 3, lastRestartAt: iso(T - 60_000) }), 1, { kind: 'exhaust', status: { restarts: 3, exhausted: true, generation: 1 } }],
    ['exhausted: left alone', obs('exited'), cmd(5, { restarts: 3, exhausted: true }), 1, { kind: 'none', why: 'exhausted' }],
    ['exhausted, then a new apply: restarted at once with a fresh budget', obs('exited'), cmd(5, { restarts: 3, exhausted: true }), 2, { kind: 'restart', seq: 6, status: { restarts: 1, generation: 2 } }],
    ['exhausted, new apply, not failing now: budget reset', obs('starting'), cmd(5, { restarts: 3, exhausted: true }), 2, { kind: 'reset', status: { restarts: 0, generation: 2 } }],
    ['ready again after restarts: counter cleared', obs('running'), cmd(5, { restarts: 2, lastRestartAt: iso(T - 60_000) }), 1, { kind: 'recover', status: { restarts: 0, generation: 1 } }],
    ['running but not yet for its minimum ready time: wake when it will be', obs('running', { startedAt: iso(T - 1000) }), cmd(5, { restarts: 1, lastRestartAt: iso(T - 2000) }), 1, { kind: 'none', wakeAt: T + 4000 }],
  ])('%s', (_name, o, c, generation, want) => {
    expect(judgeRestart(d, o, c, generation, T, policy)).toMatchObject(want);
  });

  it('back-off after n restarts is backoff × 2^(n−1)', () => {
    expect([1, 2, 3].map((n) => nextRestartAt({ restarts: n, generation: 1, lastRestartAt: iso(T) }, policy) - T)).toEqual([500, 1000, 2000]);
    expect(nextRestartAt({ restarts: 0, generation: 1 }, policy)).toBe(-Infinity);
  });
});
