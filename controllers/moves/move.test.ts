import { describe, expect, it } from 'vitest';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { NodeVerdict, ObservedState, ReplicaDesired, ReplicaObserved, ServiceSpec } from '../../src/api/types.js';
import { actBytes } from '../../src/store/writer.js';
import { DEFAULT_PLACEMENT_CONFIG } from '../placement/placer.js';
import { desiredObject, iso, StoreWorld, T0 } from '../../test/support/harness.js';
import { advanceMoves, cancelMove, MOVE_START_OTHER_BYTES, MoveBook, moverView, moveStartValueBytes, moveWakeAt, startMove, type MoveRequest } from './move.js';

const web: ServiceSpec = withDefaults({ image: 'jaco-demo/busybox:1', replicas: 3 });

/** A desired copy (made by the one table-test harness's builders, test/support/harness.ts); world() stores it. */
function desired(id: string, node: string, spec: ServiceSpec = web, extra: Partial<ReplicaDesired['spec']> = {}): ReplicaDesired {
  return desiredObject({ replica: id, deployment: 'd', service: id.split('-')[1]!, node, revision: 1, specHash: specHash(spec), template: spec, placedAt: iso(T0 - 3_600_000), ...extra });
}

/** Where the last world() stored its copies: what a copy's key was read at (an update or delete compares it). */
let stored = new StoreWorld();
const readAt = (key: string): number => stored.versioned(key)!.modRevision;

/**
 * The copies (observed where a state is given) stored in the one table-test harness's world
 * (test/support/harness.ts), and what a mover's pass reads from its cache (moverView).
 */
function world(entries: [ReplicaDesired, ObservedState | undefined, Partial<ReplicaObserved['status']>?][]): MoveBook {
  stored = new StoreWorld();
  for (const [d, state, extra] of entries) {
    stored.desire(d.spec);
    if (state) stored.report(d, state, extra);
  }
  return new MoveBook(moverView(stored.cache));
}

/** What the source's agent reports after a cutover: nothing (the container is gone), or still a container. */
const gone = () => undefined;
const stillThere = () => ({});

const move = (replica: string, src: string, dst: string, extra: Partial<MoveRequest> = {}): MoveRequest => ({ replica, src, dst, by: 'drain', id: `m-${replica}`, now: T0, timeoutMs: 300_000, ...extra });

describe('startMove', () => {
  const running = (id: string, node: string, spec?: ServiceSpec) => [desired(id, node, spec), 'running'] as [ReplicaDesired, ObservedState];

  it('writes the source (so competing starts conflict), creates the destination with a marker, records the disruption', () => {
    const r = startMove(world([running('d-web-0', 'a'), running('d-web-1', 'b')]), move('d-web-0', 'a', 'c'));
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.ops[0]).toMatchObject({ op: 'update', key: 'desired/a/d-web-0', modRevision: readAt('desired/a/d-web-0'), value: { spec: { node: 'a', movingTo: { id: 'm-d-web-0', node: 'c', by: 'drain' } } } });
    expect(r.ops[1]).toMatchObject({ op: 'create', key: 'desired/c/d-web-0', value: { spec: { node: 'c', move: { from: 'a', by: 'drain', id: 'm-d-web-0', deadline: iso(T0 + 300_000) } } } });
    expect(r.ops[2]).toMatchObject({ op: 'create', key: 'disruptions/d/web', value: { spec: { sequence: 1, last: { replica: 'd-web-0', by: 'drain', kind: 'move' } } } });
    // The destination is still schedulable as judged: its node, node spec and drain keys are compared.
    expect(r.ops.slice(3)).toEqual([
      { op: 'check', key: 'nodes/c', modRevision: 0 },
      { op: 'check', key: 'nodespecs/c', modRevision: 0 },
      { op: 'check', key: 'drains/c', modRevision: 0 },
    ]);
  });

  it('two movers deciding from one state both write the source at the revision they read: only one can land', () => {
    const book = world([running('d-web-0', 'a'), running('d-web-1', 'b'), running('d-web-2', 'c')]);
    const drain = startMove(book, move('d-web-0', 'a', 'd', { by: 'drain' }));
    const other = startMove(world([running('d-web-0', 'a'), running('d-web-1', 'b'), running('d-web-2', 'c')]), move('d-web-0', 'a', 'e', { by: 'rebalancer' }));
    if (!drain.ok || !other.ok) throw new Error('both start');
    const src = (r: typeof drain) => r.ops.find((o) => o.key === 'desired/a/d-web-0');
    expect(src(drain)).toMatchObject({ op: 'update', modRevision: readAt('desired/a/d-web-0') });
    expect(src(other)).toMatchObject({ op: 'update', modRevision: readAt('desired/a/d-web-0') });
  });

  it.each<[string, [ReplicaDesired, ObservedState | undefined][], MoveRequest, string]>([
    ['a move already in flight', [running('d-web-0', 'a'), [desired('d-web-0', 'c', web, { move: { id: 'x', from: 'a', by: 'rebalancer', startedAt: iso(T0), deadline: iso(T0 + 1000) } }), 'starting']], move('d-web-0', 'a', 'b'), 'move_in_flight'],
    ['budget: another replica of the service is moving', [running('d-web-0', 'a'), running('d-web-1', 'b'), [desired('d-web-1', 'c', web, { move: { id: 'x', from: 'b', by: 'rebalancer', startedAt: iso(T0), deadline: iso(T0 + 1000) } }), 'starting']], move('d-web-0', 'a', 'c'), 'budget_exceeded'],
    ['budget: another replica of the service is down', [running('d-web-0', 'a'), [desired('d-web-1', 'b'), 'exited']], move('d-web-0', 'a', 'c'), 'budget_exceeded'],
    ['the replica itself is not running', [[desired('d-web-0', 'a'), 'pending']], move('d-web-0', 'a', 'c'), 'replica_not_running'],
    ['stateful', [running('d-db-0', 'a', withDefaults({ image: 'x', volumes: [{ type: 'volume', source: 'data', target: '/d' }] }))], move('d-db-0', 'a', 'c'), 'stateful_replica'],
    ['global', [running('d-agent-a', 'a', withDefaults({ image: 'x', placement: { mode: 'global' } }))], move('d-agent-a', 'a', 'c'), 'global_replica'],
    ['unknown replica', [], move('d-web-9', 'a', 'c'), 'unknown_replica'],
    ['same node', [running('d-web-0', 'a')], move('d-web-0', 'a', 'a'), 'same_node'],
  ])('refuses: %s', (_n, entries, m, refusal) => {
    const r = startMove(world(entries), m);
    expect(r).toMatchObject({ ok: false, refusal });
  });

  it('the budget is shared: a drain move and a rebalancer move of one service never run together', () => {
    const book = world([running('d-web-0', 'a'), running('d-web-1', 'b'), running('d-web-2', 'c')]);
    const first = startMove(book, move('d-web-0', 'a', 'd', { by: 'drain' }));
    if (!first.ok) throw new Error(first.detail);
    // Apply the first move to the world, as the store would after the commit.
    const after = world([
      [first.src, 'running'],
      [first.dst, 'starting'],
      running('d-web-1', 'b'),
      running('d-web-2', 'c'),
    ]);
    expect([...after.budget('d', 'web', web).disrupted]).toEqual([['d-web-0', 'moving']]);
    expect(startMove(after, move('d-web-1', 'b', 'e', { by: 'rebalancer' }))).toMatchObject({ ok: false, refusal: 'budget_exceeded' });
  });

  // Issue 30: a replica is available again once its move cut over to a destination running its
  // spec (the source out of endpoints, its container running out its grace): the next move starts.
  it.each<[string, ObservedState | undefined, Partial<ReplicaObserved['status']>, string | undefined]>([
    ['cut over, the destination running its spec: available, the next move starts', 'running', {}, undefined],
    ['cut over, the destination no longer running', 'exited', {}, 'moving'],
    ['cut over, the destination unhealthy', 'degraded', {}, 'moving'],
    ['cut over, the destination observed at another spec', 'running', { specHash: 'other' }, 'moving'],
    ['cut over, the destination not observed', undefined, {}, 'moving'],
  ])('%s', (_n, state, extra, disrupted) => {
    const marker = { id: 'x', from: 'b', by: 'drain' as const, startedAt: iso(T0), deadline: iso(T0 + 60_000), cutoverAt: iso(T0 + 5_000) };
    const book = world([running('d-web-0', 'a'), [desired('d-web-1', 'c', web, { move: marker }), state, extra], running('d-web-2', 'd')]);
    expect(book.budget('d', 'web', web).disrupted.get('d-web-1')).toBe(disrupted);
    expect(startMove(book, move('d-web-0', 'a', 'e')).ok).toBe(disrupted === undefined);
  });

  it('before its cutover a move holds its room even with the destination running (the source still serves)', () => {
    const marker = { id: 'x', from: 'b', by: 'drain' as const, startedAt: iso(T0), deadline: iso(T0 + 60_000) };
    const book = world([running('d-web-0', 'a'), [desired('d-web-1', 'b', web, { movingTo: { id: 'x', node: 'c', by: 'drain' } }), 'running'], [desired('d-web-1', 'c', web, { move: marker }), 'running']]);
    expect(book.budget('d', 'web', web).disrupted.get('d-web-1')).toBe('moving');
    expect(startMove(book, move('d-web-0', 'a', 'e'))).toMatchObject({ ok: false, refusal: 'budget_exceeded' });
  });

  it('maxUnavailable 2 allows two at once', () => {
    const spec = withDefaults({ image: 'x', replicas: 3, update: { maxUnavailable: 2 } });
    const idx = world([running('d-web-0', 'a', spec), running('d-web-1', 'b', spec), [desired('d-web-1', 'c', spec, { move: { id: 'x', from: 'b', by: 'drain', startedAt: iso(T0), deadline: iso(T0 + 1000) } }), 'starting']]);
    expect(startMove(idx, move('d-web-0', 'a', 'd')).ok).toBe(true);
  });
});

describe('advanceMoves', () => {
  const marker = (by: 'drain' | 'rebalancer', deadline = T0 + 300_000) => ({ move: { id: 'm1', from: 'a', by, startedAt: iso(T0 - 10_000), deadline: iso(deadline) } });

  it('cuts over once the destination runs healthy: deletes the source, records the cutover on the marker', () => {
    const idx = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, marker('drain')), 'running', { startedAt: iso(T0 - 9_000) }],
    ]);
    const [step] = advanceMoves(idx, T0, { by: 'drain' }, stillThere);
    expect(step).toMatchObject({ outcome: 'cutover', src: 'a', dst: 'c', durationMs: 10_000 });
    expect(step!.ops[0]).toEqual({ op: 'delete', key: 'desired/a/d-web-0', modRevision: readAt('desired/a/d-web-0') });
    expect((step!.ops[1] as { value: ReplicaDesired }).value.spec.move).toMatchObject({ from: 'a', cutoverAt: iso(T0) });
  });

  it('completes only once the source container is gone (or its node lost): clears the marker', () => {
    const cut = { move: { ...marker('drain').move, cutoverAt: iso(T0 - 1000) } };
    const book = world([[desired('d-web-0', 'c', web, cut), 'running']]);
    expect(advanceMoves(book, T0, { by: 'drain' }, stillThere)).toEqual([]);
    const [step] = advanceMoves(book, T0, { by: 'drain' }, gone);
    expect(step).toMatchObject({ outcome: 'completed', src: 'a', dst: 'c' });
    const updated = (step!.ops[0] as { value: ReplicaDesired }).value;
    expect(updated.spec.move).toBeUndefined();
    expect(updated.spec.placedAt).toBe(iso(T0));
    expect(advanceMoves(book, T0, { by: 'drain', lostNodes: new Set(['a']) }, stillThere)[0]).toMatchObject({ outcome: 'completed' });
  });

  it.each<[string, ObservedState | undefined, Partial<ReplicaObserved['status']>]>([
    ['not observed yet', undefined, {}],
    ['starting', 'starting', {}],
    ['running but not for the minimum ready time', 'running', { startedAt: iso(T0 - 1000) }],
    ['running an older spec', 'running', { specHash: 'old' }],
  ])('waits while the destination is %s', (_n, state, extra) => {
    const idx = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, marker('drain')), state, extra],
    ]);
    expect(advanceMoves(idx, T0, { by: 'drain' }, stillThere)).toEqual([]);
  });

  it('waits for a passing health check when the service has one', () => {
    const hc = withDefaults({ image: 'x', healthcheck: { test: ['CMD', 'true'] } });
    const mk = (health: 'starting' | 'healthy') =>
      world([
        [desired('d-web-0', 'a', hc), 'running'],
        [desired('d-web-0', 'c', hc, marker('drain')), 'running', { health }],
      ]);
    expect(advanceMoves(mk('starting'), T0, { by: 'drain' }, stillThere)).toEqual([]);
    expect(advanceMoves(mk('healthy'), T0, { by: 'drain' }, stillThere)[0]!.outcome).toBe('cutover');
  });

  it('abandons at the deadline: the destination copy goes, the source keeps serving and forgets the move', () => {
    const idx = world([
      [desired('d-web-0', 'a', web, { movingTo: { id: 'm1', node: 'c', by: 'drain' } }), 'running'],
      [desired('d-web-0', 'c', web, marker('drain', T0)), 'starting'],
    ]);
    const [step] = advanceMoves(idx, T0, { by: 'drain' }, stillThere);
    expect(step).toMatchObject({ outcome: 'abandoned', reason: 'move_timeout' });
    expect(step!.ops[0]).toEqual({ op: 'delete', key: 'desired/c/d-web-0', modRevision: readAt('desired/c/d-web-0') });
    expect(step!.ops[1]).toMatchObject({ op: 'update', key: 'desired/a/d-web-0', modRevision: readAt('desired/a/d-web-0') });
    expect((step!.ops[1] as { value: ReplicaDesired }).value.spec.movingTo).toBeUndefined();
  });

  it('abandons at once when the destination copy failed or its node is lost', () => {
    const failed = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, marker('drain')), 'failed'],
    ]);
    expect(advanceMoves(failed, T0, { by: 'drain' }, stillThere)[0]).toMatchObject({ outcome: 'abandoned', reason: 'dst_failed' });
    const lost = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, marker('drain')), 'starting'],
    ]);
    expect(advanceMoves(lost, T0, { by: 'drain', lostNodes: new Set(['c']) }, stillThere)[0]).toMatchObject({ outcome: 'abandoned', reason: 'dst_lost' });
  });

  it('abandons at once when the destination container of its spec exited: no restart comes while it moves', () => {
    const dstIs = (state: ObservedState, extra: Partial<ReplicaObserved['status']> = {}) =>
      advanceMoves(
        world([
          [desired('d-web-0', 'a'), 'running'],
          [desired('d-web-0', 'c', web, marker('drain')), state, extra],
        ]),
        T0,
        { by: 'drain' },
        stillThere,
      );
    expect(dstIs('exited', { exitCode: 1 })[0]).toMatchObject({ outcome: 'abandoned', reason: 'dst_failed', dst: 'c' });
    expect(dstIs('exited', { code: 'container_removed' })[0]).toMatchObject({ outcome: 'abandoned', reason: 'dst_failed' });
    // What the agent said of an earlier copy (another revision) says nothing of this one: its agent starts it.
    expect(dstIs('exited', { revision: 0 })).toEqual([]);
    // Running but failing its health check may still pass it: the deadline decides.
    expect(dstIs('degraded')).toEqual([]);
  });

  it("advances only the caller's own moves", () => {
    const idx = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, marker('rebalancer', T0)), 'starting'],
    ]);
    expect(advanceMoves(idx, T0, { by: 'drain' }, stillThere)).toEqual([]);
    expect(advanceMoves(idx, T0, { by: 'rebalancer' }, stillThere)).toHaveLength(1);
  });

  it('cuts over even when the source copy is already gone', () => {
    const idx = world([[desired('d-web-0', 'c', web, marker('drain')), 'running']]);
    const [step] = advanceMoves(idx, T0, { by: 'drain' }, stillThere);
    expect(step!.outcome).toBe('cutover');
    expect(step!.ops).toHaveLength(1);
    expect(step!.ops[0]!.op).toBe('update');
  });
});

describe('the budget and a leaving source (drain)', () => {
  const running = (id: string, node: string, spec?: ServiceSpec) => [desired(id, node, spec), 'running'] as [ReplicaDesired, ObservedState];
  const marker = { id: 'x', from: 'b', by: 'rebalancer' as const, startedAt: iso(T0), deadline: iso(T0 + 1000) };

  it.each<[string, [ReplicaDesired, ObservedState | undefined][], Partial<MoveRequest>, true | string]>([
    ['a crashed replica may not be moved by the rebalancer', [[desired('d-web-0', 'a'), 'exited'], running('d-web-1', 'b')], {}, 'replica_not_running'],
    ['a crashed replica leaves a draining node: it counts once, not twice', [[desired('d-web-0', 'a'), 'exited'], running('d-web-1', 'b')], { sourceLeaving: true }, true],
    ['a never-observed replica leaves a draining node', [[desired('d-web-0', 'a'), undefined]], { sourceLeaving: true }, true],
    ['…but not when another replica of the service is down too', [[desired('d-web-0', 'a'), 'exited'], [desired('d-web-1', 'b'), 'exited']], { sourceLeaving: true }, 'budget_exceeded'],
    ['a suspended sibling (forced drain) is not counted as down', [running('d-web-0', 'a'), [desired('d-web-1', 'b', web, { suspended: { reason: 'node_drained', at: iso(T0) } }), 'stopped']], {}, true],
    ['a suspended replica itself is never moved', [[desired('d-web-0', 'a', web, { suspended: { reason: 'node_drained', at: iso(T0) } }), 'stopped']], { sourceLeaving: true }, 'replica_suspended'],
    ['an in-flight move of another replica is counted', [running('d-web-0', 'a'), running('d-web-1', 'b'), [desired('d-web-1', 'c', web, { move: marker }), 'starting']], { sourceLeaving: true }, 'budget_exceeded'],
  ])('%s', (_n, entries, extra, want) => {
    const r = startMove(world(entries), move('d-web-0', 'a', 'c', extra));
    if (want === true) expect(r.ok).toBe(true);
    else expect(r).toMatchObject({ ok: false, refusal: want });
  });

  it('a refusal says what the budget counted', () => {
    const r = startMove(world([running('d-web-0', 'a'), running('d-web-1', 'b'), [desired('d-web-1', 'c', web, { move: marker }), 'starting'], [desired('d-web-2', 'c'), 'exited']]), move('d-web-0', 'a', 'd'));
    expect(r).toEqual({ ok: false, refusal: 'budget_exceeded', detail: 'web: 2 disrupted (d-web-1: a move of it is in flight, d-web-2: not running), maxUnavailable 1' });
  });

  it('assume: a second move of the same service in the same pass is refused', () => {
    const idx = world([running('d-web-0', 'a'), running('d-web-1', 'b'), running('d-web-2', 'c')]);
    const first = startMove(idx, move('d-web-0', 'a', 'd'));
    if (!first.ok) throw new Error(first.detail);
    idx.assume('d-web-0', first);
    expect(idx.copies('d-web-0').map((c) => c.desired.spec.node)).toEqual(['a', 'd']);
    expect(startMove(idx, move('d-web-1', 'b', 'd'))).toMatchObject({ ok: false, refusal: 'budget_exceeded' });
    expect(startMove(idx, move('d-web-0', 'a', 'e'))).toMatchObject({ ok: false, refusal: 'move_in_flight' });
  });
});

describe('cancelMove and moveWakeAt', () => {
  const noHc = withDefaults({ image: 'x', update: { minReadyTime: '5s' } });
  const mark = (by: 'drain' | 'rebalancer', deadline: number) => ({ move: { id: 'm1', from: 'a', by, startedAt: iso(T0 - 10_000), deadline: iso(deadline) } });

  it('cancel deletes the destination copy (nothing after a cutover)', () => {
    const idx = world([
      [desired('d-web-0', 'a'), 'running'],
      [desired('d-web-0', 'c', web, mark('drain', T0 + 60_000)), 'running'],
    ]);
    expect(cancelMove(idx, 'd-web-0', T0)).toMatchObject({ outcome: 'abandoned', reason: 'cancelled', src: 'a', dst: 'c', ops: [{ op: 'delete', key: 'desired/c/d-web-0', modRevision: readAt('desired/c/d-web-0') }] });
    expect(cancelMove(world([[desired('d-web-0', 'a'), 'running']]), 'd-web-0', T0)).toBeUndefined();
    const cut = { move: { ...mark('drain', T0 + 60_000).move, cutoverAt: iso(T0) } };
    expect(cancelMove(world([[desired('d-web-0', 'c', web, cut), 'running']]), 'd-web-0', T0)).toBeUndefined();
  });

  it.each<[string, ServiceSpec, ObservedState | undefined, Partial<ReplicaObserved['status']>, 'drain' | 'rebalancer', number | undefined]>([
    ['the deadline while the destination starts', noHc, 'starting', {}, 'drain', T0 + 60_000],
    ['the minimum ready time when it is sooner', noHc, 'running', { startedAt: iso(T0 - 2000) }, 'drain', T0 + 3000],
    ['only the deadline with a health check (its result is an event)', withDefaults({ image: 'x', healthcheck: { test: ['CMD', 'true'] } }), 'running', { health: 'starting' }, 'drain', T0 + 60_000],
    ["nothing for another actor's move", noHc, 'starting', {}, 'rebalancer', undefined],
  ])('wakes at %s', (_n, spec, state, extra, by, want) => {
    const idx = world([
      [desired('d-web-0', 'a', spec), 'running'],
      [desired('d-web-0', 'c', spec, mark(by, T0 + 60_000)), state, extra],
    ]);
    expect(moveWakeAt(idx, 'drain')).toBe(want);
  });
});

describe('a move start fits one request (issue 29 item 8)', () => {
  const long = (c: string) => c.repeat(253);
  // The largest act a move start makes: the longest names, a full decision (every node of a
  // cluster of explainNodes listed, each with a long rejection detail), a ledger, and the mover's
  // audit record. What is not the two desired values must fit MOVE_START_OTHER_BYTES.
  it('all but its two desired values stays within MOVE_START_OTHER_BYTES', () => {
    const id = `${long('d').slice(0, 60)}-${long('s').slice(0, 60)}-999999`;
    const [src, dst] = [long('a'), long('b')];
    const book = world([[desired(id, src), 'running']]);
    const verdicts: NodeVerdict[] = Array.from({ length: DEFAULT_PLACEMENT_CONFIG.explainNodes }, (_, i) =>
      i % 2 ? { node: `${long('n').slice(0, 250)}${i}`, rejected: { filter: 'memory', reason: 'no_capacity_memory', detail: `needs 1024.0 MiB of memory, ${'9'.repeat(12)} MiB free of ${'9'.repeat(12)} MiB (replicas booked: ${'9'.repeat(6)})`.padEnd(300, '.') } } : { node: `${long('n').slice(0, 250)}${i}`, score: { total: -123456.789, parts: { peers: 99999, failures: 99999, cpu: -123.456, hash: 0.123456789 } } },
    );
    const r = startMove(book, move(id, src, dst, { id: `drain-${src}-${id}-${T0}`, forPending: { deployment: long('p'), service: long('q'), node: long('r') }, decision: { verdicts: { replica: id, deployment: 'd', service: 's', mode: 'spread', chosen: dst, why: 'x'.repeat(1000), verdicts }, why: 'y'.repeat(1000) } }));
    if (!r.ok) throw new Error(r.detail);
    const audit = { apiVersion: 'jaco.dev/v1', kind: 'AuditEvent', metadata: { name: `${'9'.repeat(15)}-${'f'.repeat(16)}-${'9'.repeat(10)}` }, spec: { type: 'rebalance_moved', time: iso(T0), actor: long('c'), deployment: long('d'), payload: { replica: id, deployment: long('d'), service: long('s'), src, dst, by: 'rebalancer', moveId: r.marker.id, reason: 'x'.repeat(500) } } };
    const rest = r.ops.slice(2);
    const bytes = actBytes([...rest, { op: 'create', key: `audit/${audit.metadata.name}`, value: audit }]);
    expect(bytes).toBeLessThanOrEqual(MOVE_START_OTHER_BYTES);
    // And the two desired values are bounded by moveStartValueBytes, at any names.
    expect(actBytes(r.ops.slice(0, 2))).toBeLessThanOrEqual(moveStartValueBytes(desired(id, src).spec));
  });

  const withEnv = (bytes: number) => withDefaults({ image: 'x', env: { BLOB: 'x'.repeat(bytes) } });
  it.each([
    { what: 'a small spec', env: 1_000, refusal: undefined },
    { what: 'a 767 KiB spec (apply used to accept it; the move did not fit)', env: 767 * 1024, refusal: 'too_large' },
  ])('$what', ({ env, refusal }) => {
    const r = startMove(world([[desired('d-web-0', 'a', withEnv(env)), 'running']]), move('d-web-0', 'a', 'c'));
    if (refusal) expect(r).toMatchObject({ ok: false, refusal, detail: expect.stringContaining('etcd accepts at most 1.50 MiB') });
    else expect(r.ok).toBe(true);
  });
});
