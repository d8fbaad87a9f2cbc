import { describe, expect, it } from 'vitest';
import { API_VERSION, type NodeDrain, type NodeDrainStatus } from '../../src/api/types.js';
import { drainProgress, drainSummary, replicaLine } from './progress.js';

const drain = (status?: NodeDrainStatus): NodeDrain => ({
  apiVersion: API_VERSION,
  kind: 'NodeDrain',
  metadata: { name: 'node-2' },
  spec: { node: 'node-2', timeout: '5m', force: false, remove: false, requestedAt: '2026-11-21T10:00:00.000Z' },
  ...(status ? { status } : {}),
});
const times = { startedAt: '2026-11-21T10:00:00.000Z', finishedAt: '2026-11-21T10:00:14.000Z' };

describe('drainProgress', () => {
  it.each<[string, NodeDrain | undefined, string | undefined, number | undefined]>([
    ['not picked up yet', drain(), undefined, undefined],
    ['draining', drain({ state: 'draining', replicas: {} }), undefined, undefined],
    [
      'completed',
      drain({ state: 'completed', ...times, replicas: { a: { state: 'done', dst: 'node-1' }, b: { state: 'dropped', reason: 'global_replica' } } }),
      'drain/node-2 completed in 14s: 1 moved, 1 dropped, 0 stopped; the node stays cordoned (jaco node uncordon node-2 to use it again)',
      0,
    ],
    ['removed', drain({ state: 'removed', ...times, replicas: {} }), 'node/node-2 removed from the cluster (drained in 14s: 0 moved, 0 dropped, 0 stopped); its agent stops its containers and exits', 0],
    [
      'aborted',
      drain({ state: 'aborted', reason: 'drain_timeout', ...times, replicas: { db: { state: 'blocked', reason: 'stateful_replica' }, web: { state: 'blocked', reason: 'move_timeout' } } }),
      'drain/node-2 aborted: drain_timeout (web: move_timeout) — a replica could not be moved within the drain timeout (--timeout, default 5m): the old replica keeps running, the node stays cordoned',
      1,
    ],
    ['gone (cancelled)', undefined, 'the drain is gone (cancelled with jaco node drain --cancel?)', 1],
  ])('%s', (_n, d, verdict, exitCode) => {
    const p = drainProgress(d);
    expect(p.verdict).toBe(verdict);
    expect(p.exitCode).toBe(exitCode);
  });

  it('one line for the drain and one per replica, by id, keyed for a follower', () => {
    const p = drainProgress(drain({ state: 'draining', replicas: { 'd-web-1': { state: 'moving', dst: 'node-3' }, 'd-agent-node-2': { state: 'dropped', reason: 'global_replica' } } }));
    expect(p.lines).toEqual([
      { key: '', text: 'drain/node-2 draining' },
      { key: 'd-agent-node-2', text: '  d-agent-node-2  dropped (global_replica)' },
      { key: 'd-web-1', text: '  d-web-1  moving → node-3' },
    ]);
  });

  it.each([
    [{ state: 'pending', reason: 'budget_exceeded' } as const, 'pending (budget_exceeded)'],
    [{ state: 'done', dst: 'node-1' } as const, 'done → node-1'],
    [{ state: 'blocked', reason: 'stateful_replica' } as const, 'blocked (stateful_replica): has volumes; jaco node drain node-2 --force stops it on the node'],
    [{ state: 'stopped', reason: 'node_drained' } as const, 'stopped (node_drained)'],
  ])('replica line %#', (st, want) => {
    expect(replicaLine('node-2', st)).toBe(want);
  });
});

describe('drainSummary (jaco describe node)', () => {
  it.each<[string, NodeDrain, string[]]>([
    ['not picked up yet', drain(), ['pending']],
    [
      'draining: counts, then only what still holds it up, with why',
      drain({ state: 'draining', replicas: { a: { state: 'done', dst: 'node-1' }, c: { state: 'pending', reason: 'budget_exceeded' }, b: { state: 'moving', dst: 'node-3' }, g: { state: 'dropped', reason: 'global_replica' } } }),
      ['draining: 1 moved, 1 dropped, 0 stopped, 2 to go', '  b  moving → node-3', '  c  pending (budget_exceeded)'],
    ],
    [
      'aborted with its reason and the blocked replica',
      drain({ state: 'aborted', reason: 'drain_timeout', replicas: { db: { state: 'blocked', reason: 'stateful_replica' } } }),
      ['aborted (drain_timeout): 0 moved, 0 dropped, 0 stopped, 1 to go', '  db  blocked (stateful_replica): has volumes; jaco node drain node-2 --force stops it on the node'],
    ],
    ['completed: nothing left to list', drain({ state: 'completed', ...times, replicas: { a: { state: 'stopped', reason: 'node_drained' } } }), ['completed: 0 moved, 0 dropped, 1 stopped']],
  ])('%s', (_n, d, want) => {
    expect(drainSummary(d)).toEqual(want);
  });
});
