// The chaos checker must be able to fail: each check, on snapshots built by hand, reports what it
// is there to catch and stays quiet on what is allowed (a move's two copies, a start-first
// replacement, a stray while its agent is held by a fault, an apply of unknown outcome).
import { describe, expect, it } from 'vitest';
import { LABELS } from '../../src/api/labels.js';
import { DEREGISTRATION_LABEL } from '../../controllers/node-agent/facts.js';
import { templateOf } from '../../src/api/serving.js';
import type { Deployment, ReplicaDesired, ReplicaObserved, ServiceSpec } from '../../src/api/types.js';
import { allowedAfterRestore, appliedShape, deposedLeaderWrite, KeptAcrossRestore, lostApplies, notConverged, simViolations, StrayTracker, unauditedPlacement, unauditedRemoval, writerOf, writeUnderAnotherLeader, type AuditAt, type Snapshot } from './invariants.js';

const spec: ServiceSpec = { image: 'jaco-demo/busybox:1', replicas: 1 };
const t = templateOf(1, spec);
const dep: Deployment = { apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'd', generation: 1 }, spec: { services: { s: spec } } };

function desired(node: string, replica = 'd-s-0', move?: string): ReplicaDesired {
  return {
    apiVersion: 'jaco.dev/v1',
    kind: 'ReplicaDesired',
    metadata: { name: replica },
    spec: { replica, deployment: 'd', service: 's', node, index: 0, revision: 1, specHash: t.specHash, template: t.template, placedAt: '', ...(move ? { move: { from: move } as never } : {}) },
  };
}
const observed = (node: string, replica = 'd-s-0'): ReplicaObserved =>
  ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: replica }, status: { replica, node, deployment: 'd', service: 's', state: 'running', revision: 1, specHash: t.specHash, observedAt: '' } }) as ReplicaObserved;
const container = (id: string, node: string, replica = 'd-s-0', hash = t.specHash) => ({ Id: id, Labels: { [LABELS.node]: node, [LABELS.replica]: replica, [LABELS.specHash]: hash } }) as never;

function snap(over: Partial<Snapshot>): Snapshot {
  return { at: 0, revision: 1, desired: [desired('n1')], observed: [observed('n1')], nodes: ['n1', 'n2'], deployments: [dep], rollouts: [], drains: [], running: [container('a', 'n1')], desiredKeys: [], audits: [], leaders: [], ...over };
}

describe('the chaos checker', () => {
  it('runs the simulation’s invariants on a real snapshot: two sources of one replica, a replica on an unknown node', () => {
    expect(simViolations(snap({}))).toEqual([]);
    expect(simViolations(snap({ desired: [desired('n1'), desired('n2', 'd-s-0', 'n1')] }))).toEqual([]);
    expect(simViolations(snap({ desired: [desired('n1'), desired('n2')] })).map((v) => v.invariant)).toEqual(['no replica with two copies outside a move']);
    expect(simViolations(snap({ desired: [desired('n9')] })).map((v) => v.invariant)).toEqual(['replicas only on known nodes']);
  });

  it('a stray container is a violation only once it outlives the bound while its agent is up', () => {
    const tracker = new StrayTracker(6000);
    const stray = (at: number) => snap({ at, desired: [], running: [container('x', 'n1')] });
    let held = true;
    const since = () => (held ? undefined : 10_000);
    expect(tracker.check(stray(0), since)).toEqual([]);
    expect(tracker.check(stray(9_000), since)).toEqual([]); // the agent is held by a fault
    held = false;
    expect(tracker.check(stray(15_000), since)).toEqual([]); // 5 s since its agent came back
    const v = tracker.check(stray(16_500), since);
    expect(v.map((x) => x.detail)).toEqual([expect.stringMatching(/^orphan: n1\/d-s-0 running \(x\) without a desired replica, for 6500 ms/)]);
    expect(tracker.check(stray(20_000), since)).toEqual([]); // reported once
    expect(tracker.longest.ms).toBe(6500);
  });

  it('a container held out of routing for its deregistration delay has that long more', () => {
    const tracker = new StrayTracker(6000);
    const held = container('x', 'n1') as { Id: string; Labels: Record<string, string> };
    held.Labels[DEREGISTRATION_LABEL] = '5000';
    const at = (ms: number) => snap({ at: ms, desired: [], running: [held as never] });
    expect(tracker.check(at(0), () => 0)).toEqual([]);
    expect(tracker.check(at(10_000), () => 0)).toEqual([]);
    expect(tracker.check(at(11_500), () => 0).map((v) => v.detail)).toEqual([expect.stringMatching(/^orphan: n1\/d-s-0 .* for 11500 ms/)]);
  });

  it('a duplicate at one spec is a stray; a start-first replacement at another spec is not', () => {
    const tracker = new StrayTracker(0);
    const dup = (at: number) => snap({ at, running: [container('a', 'n1'), container('b', 'n1')] });
    expect(tracker.check(dup(1), () => 0)).toEqual([]);
    expect(tracker.check(dup(2), () => 0).map((v) => v.detail)).toEqual([expect.stringMatching(/^duplicate: n1\/d-s-0 runs twice/)]);
    const replacing = new StrayTracker(0);
    for (const at of [1, 2, 3]) expect(replacing.check(snap({ at, running: [container('a', 'n1'), container('b', 'n1', 'd-s-0', 'older')] }), () => 0)).toEqual([]);
  });

  it('an acknowledged apply missing from etcd is lost; one of unknown outcome may or may not be there', () => {
    const shape = appliedShape(dep);
    const other = appliedShape({ ...dep, spec: { services: { s: { ...spec, replicas: 3 } } } });
    expect(lostApplies(snap({}), new Map([['d', [shape]]]))).toEqual([]);
    expect(lostApplies(snap({}), new Map([['d', [other, shape]]]))).toEqual([]);
    expect(lostApplies(snap({}), new Map([['d', [other]]])).map((v) => v.invariant)).toEqual(['no acknowledged apply lost']);
    expect(lostApplies(snap({ deployments: [] }), new Map([['d', [shape]]])).map((v) => v.detail)).toEqual([expect.stringMatching(/^deployments\/d is \(absent\)/)]);
  });

  it('converged only with every replica desired, observed and running once in Docker at the current spec', () => {
    expect(notConverged(snap({}))).toBeUndefined();
    expect(notConverged(snap({ running: [] }))).toMatch(/0 containers running in Docker/);
    expect(notConverged(snap({ observed: [] }))).toMatch(/not observed running/);
    expect(notConverged(snap({ desired: [] }))).toMatch(/0 desired of 1/);
    expect(notConverged(snap({ running: [container('a', 'n1'), container('z', 'n2', 'd-s-9')] }))).toMatch(/^orphan: n2\/d-s-9/);
    expect(notConverged(snap({ deployments: [{ ...dep, spec: { services: { s: { ...spec, image: 'jaco-demo/busybox:2' } } } }] }))).toMatch(/desired at an older spec/);
  });

  it('every act has its audit record: a desired key created at revision R needs a record created at R that names its replica', () => {
    const p = { key: 'desired/n2/d-s-0', createRevision: 40, replica: 'd-s-0', node: 'n2' };
    const rec = (createRevision: number, type: string, payload: object): AuditAt => ({ key: `audit/${createRevision}-${type}`, createRevision, type, actor: 'scheduler', payload: JSON.stringify(payload) });
    const table: [string, AuditAt[], RegExp | undefined][] = [
      ['placed, recorded in its transaction', [rec(40, 'replica_placed', { replica: 'd-s-0', node: 'n2' })], undefined],
      ['re-placed after its node was lost', [rec(39, 'x', {}), rec(40, 'node_lost', { node: 'n1', replicas: ['d-s-0'] })], undefined],
      ['a drain move’s destination', [rec(40, 'drain_move_started', { replica: 'd-s-0', src: 'n1', dst: 'n2' })], undefined],
      ['no record at all', [], /created at revision 40 with no audit record/],
      ['a record of an earlier transaction only', [rec(39, 'replica_placed', { replica: 'd-s-0' })], /with no audit record in that transaction/],
      ['a record of a later transaction only', [rec(41, 'replica_moved', { replica: 'd-s-0' })], /with no audit record in that transaction/],
      ['a record in its transaction about another replica', [rec(40, 'replica_placed', { replica: 'd-s-01' })], /\(replica_placed\) do not name d-s-0/],
    ];
    for (const [why, audits, want] of table) {
      const got = unauditedPlacement(p, audits);
      if (want) expect(got, why).toMatch(want);
      else expect(got, why).toBeUndefined();
    }
  });

  it('every act has its audit record, removals too: a desired key deleted at revision D needs a record created at D that names its replica — but a move’s cutover', () => {
    const r = { key: 'desired/n1/d-s-0', createRevision: 20, replica: 'd-s-0', deletedAt: 40, cutover: false };
    const rec = (createRevision: number, type: string, payload: object): AuditAt => ({ key: `audit/${createRevision}-${type}`, createRevision, type, actor: 'scheduler', payload: JSON.stringify(payload) });
    const table: [string, typeof r, AuditAt[], RegExp | undefined][] = [
      ['removed, recorded in its transaction', r, [rec(40, 'replica_removed', { replica: 'd-s-0', reason: 'scale_down' })], undefined],
      ['a move’s destination abandoned', r, [rec(40, 'drain_move_abandoned', { replica: 'd-s-0' })], undefined],
      ['a move’s source at cutover (recorded by the move’s start and end)', { ...r, cutover: true }, [], undefined],
      ['no record at all', r, [], /deleted at revision 40 with no audit record/],
      ['a record of an earlier transaction only', r, [rec(39, 'replica_removed', { replica: 'd-s-0' })], /with no audit record in that transaction/],
      ['a record in its transaction about another replica', r, [rec(40, 'replica_removed', { replica: 'd-s-01' })], /\(replica_removed\) do not name d-s-0/],
    ];
    for (const [why, removal, audits, want] of table) {
      const got = unauditedRemoval(removal, audits);
      if (want) expect(got, why).toMatch(want);
      else expect(got, why).toBeUndefined();
    }
  });

  it('no write from a deposed leader lands: a controller’s write needs one of its terms in force at its revision', () => {
    const w = { what: 'replica_placed (audit/1)', revision: 50, controller: 'scheduler' };
    const key = (lease: string, createRevision: number) => ({ key: `leaders/scheduler/${lease}`, createRevision });
    const table: [string, ReturnType<typeof key>[], RegExp | undefined][] = [
      ['its leader’s key alive', [key('a', 10)], undefined],
      ['a leader and a standby alive', [key('b', 30), key('a', 10)], undefined],
      ['every key gone (leases expired or revoked): the writer was deposed', [], /no scheduler term was in force/],
      ['only a key created after the write', [key('c', 60)], /before the term of leaders\/scheduler\/c began/],
    ];
    for (const [why, leaders, want] of table) {
      const got = deposedLeaderWrite(w, leaders);
      if (want) expect(got, why).toMatch(want);
      else expect(got, why).toBeUndefined();
    }
  });

  it('no write from a deposed leader lands, per process: one writer’s records all land under its own identity’s terms', () => {
    expect(writerOf('audit/000001764000000000-ab12-00000007')).toBe('ab12');
    const leader = (identity: string, lease = identity) => ({ key: `leaders/scheduler/${lease}`, createRevision: 1, identity });
    const write = (writer: string, revision: number) => ({ what: `w@${revision}`, revision, controller: 'scheduler', writer });
    const table: [string, [ReturnType<typeof write>, ReturnType<typeof leader>][], RegExp | undefined][] = [
      ['one process, one leader', [[write('p1', 10), leader('A')], [write('p1', 20), leader('A')]], undefined],
      ['one process across two of its own terms (re-elected on a new lease)', [[write('p1', 10), leader('A', 'l1')], [write('p1', 30), leader('A', 'l2')]], undefined],
      ['failover: the new leader is another process', [[write('p1', 10), leader('A')], [write('p2', 30), leader('B')]], undefined],
      ['the old leader writes after the other copy took over', [[write('p1', 10), leader('A')], [write('p2', 30), leader('B')], [write('p1', 31), leader('B')]], /process p1 wrote under A's term \(revision 10\) and w@31 under B's/],
      ['the same process, other controller, is separate', [[write('p1', 10), leader('A')], [{ ...write('p1', 11), controller: 'rollout' }, leader('B')]], undefined],
    ];
    for (const [why, writes, want] of table) {
      const seen = new Map<string, { identity: string; revision: number }>();
      const got = writes.map(([w, l]) => writeUnderAnotherLeader(w, l, seen)).filter(Boolean);
      if (want) expect(got, why).toEqual([expect.stringMatching(want)]);
      else expect(got, why).toEqual([]);
    }
  });
});

describe('what a restore of the store may undo', () => {
  const at = (replicas: number) => appliedShape({ ...dep, spec: { services: { s: { ...spec, replicas } } } });
  it.each([
    ['the snapshot undoes an apply acknowledged after it', { d: at(1) }, [], at(1), at(3), true],
    ['an apply acknowledged after the snapshot is not what the restored store may hold', { d: at(1) }, [], at(3), at(3), false],
    ['an apply sent since the restore began may have landed', { d: at(1) }, [['d', at(2)]], at(2), at(3), true],
    ['another deployment’s apply allows nothing here', { d: at(1) }, [['e', at(2)]], at(2), at(3), false],
    ['a deployment the snapshot lacks is absent', {}, [], '(absent)', at(3), true],
  ] as const)('%s', (_, snapshotShapes, sent, have, acknowledgedBefore, ok) => {
    const allowed = allowedAfterRestore(['d'], new Map(Object.entries(snapshotShapes)), sent);
    expect(allowed.get('d')).not.toContain(acknowledgedBefore);
    const d = have === '(absent)' ? [] : [{ ...dep, spec: { services: { s: { ...spec, replicas: Number(JSON.parse(have)[0][2]) } } } }];
    expect(lostApplies(snap({ deployments: d }), allowed)).toHaveLength(ok ? 0 : 1);
  });
});

describe('no container destroyed without instruction across a restore', () => {
  const audit = (createRevision: number, replica: string): AuditAt => ({ key: `audit/${createRevision}`, createRevision, type: 'replica_restarted', actor: 'scheduler', payload: JSON.stringify({ replica }) });
  it.each([
    ['kept running', snap({}), 0],
    ['gone while the restored store still wants it, nobody decided', snap({ running: [] }), 1],
    ['gone, and the restored store does not want it (placed after the snapshot)', snap({ running: [], desired: [] }), 0],
    ['gone, wanted at another spec now (a rollout since)', snap({ running: [], desired: [{ ...desired('n1'), spec: { ...desired('n1').spec, specHash: 'other' } }] }), 0],
    ['gone after a controller decided about the replica since the restore', snap({ running: [], audits: [audit(12, 'd-s-0')] }), 0],
    ['gone; the only decision about it predates the restore', snap({ running: [], audits: [audit(9, 'd-s-0')] }), 1],
    ['gone after the window', snap({ running: [], at: 60_000 }), 0],
  ] as const)('%s', (_, after, violations) => {
    const k = new KeptAcrossRestore();
    k.begin(snap({}), 10);
    k.restored(0, 30_000);
    expect(k.check(after)).toHaveLength(violations);
  });
});
