// The one make-before-break move mechanism, shared by the drain controller and the rebalancer
// (ARCHITECTURE.md rule 5), with the disruption budget they share. Pure: state in, ops out.
//
// A move of replica R from src to dst:
//   start    — desired/<dst>/<R> is created with a move marker {from: src, by, deadline}; the
//              source keeps running. Refused with a typed reason when the budget would be exceeded.
//   complete — once the dst copy is observed running and healthy at its spec, desired/<src>/<R>
//              is deleted and the marker cleared (placedAt = now), in one transaction.
//   abandon  — past the deadline, when the dst copy failed or its node is lost, or when the actor
//              cancels it: desired/<dst>/<R> is deleted; src keeps serving.
// While a move is in flight, R has two desired keys: every controller counts it once.
import { keys } from '../../src/api/keys.js';
import { minReadyAt, notReadyBecause, replicaRunning } from '../../src/api/readiness.js';
import { isStateful, placementMode, SERVICE_DEFAULTS } from '../../src/api/spec.js';
import type { MoveActor, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import type { Op } from '../../src/store/writer.js';

/** Why a move may not start: closed union, the same strings in drain status, audit and metrics. */
export const MOVE_REFUSALS = {
  move_in_flight: 'the replica is already being moved',
  budget_exceeded: 'the service already has as many replicas moving or down as update.maxUnavailable allows',
  replica_not_running: 'the replica is not running; moving it would not keep anything serving',
  stateful_replica: 'the replica has volumes: its data cannot follow it to another node',
  global_replica: 'global replicas run one per node and are never moved',
  replica_suspended: 'the replica is stopped (drained with --force) and stays where it is',
  same_node: 'the destination is the source',
  unknown_replica: 'no desired copy of the replica on the source node',
} as const;
export type MoveRefusal = keyof typeof MOVE_REFUSALS;

/** One desired key of a replica, with what its node observes of it. */
export interface Copy {
  key: string;
  modRevision: number;
  desired: ReplicaDesired;
  observed?: ReplicaObserved;
}

/** Every replica id with its copies (two while a move is in flight). */
export type ReplicaIndex = Map<string, Copy[]>;

export interface VersionedDesired {
  key: string;
  modRevision: number;
  value: ReplicaDesired;
}

/** Groups desired keys by replica id; observedOf(host, replica) finds each copy's observation. */
export function indexReplicas(desired: Iterable<VersionedDesired>, observedOf: (host: string, replica: string) => ReplicaObserved | undefined): ReplicaIndex {
  const idx: ReplicaIndex = new Map();
  for (const d of desired) {
    const id = d.value.spec.replica;
    const copy: Copy = { key: d.key, modRevision: d.modRevision, desired: d.value, observed: observedOf(d.value.spec.node, id) };
    const list = idx.get(id);
    if (list) list.push(copy);
    else idx.set(id, [copy]);
  }
  for (const list of idx.values()) list.sort((a, b) => (a.desired.spec.node < b.desired.spec.node ? -1 : 1));
  return idx;
}

/** The destination copy of an in-flight move, if any. */
export function inFlight(copies: Copy[]): Copy | undefined {
  return copies.find((c) => c.desired.spec.move);
}

// Replica ids by "<deployment>/<service>", built once per index: a pass that checks the budget
// for every replica of a draining node must not scan the whole cluster each time. Rebuilt when
// the index changed size (assumeStarted adds copies to existing ids only).
const byService = new WeakMap<ReplicaIndex, { size: number; ids: Map<string, string[]> }>();
function serviceReplicas(idx: ReplicaIndex): Map<string, string[]> {
  const cached = byService.get(idx);
  if (cached && cached.size === idx.size) return cached.ids;
  const ids = new Map<string, string[]>();
  for (const [id, copies] of idx) {
    const s = copies[0]?.desired.spec;
    if (!s) continue;
    const k = `${s.deployment}/${s.service}`;
    const list = ids.get(k);
    if (list) list.push(id);
    else ids.set(k, [id]);
  }
  byService.set(idx, { size: idx.size, ids });
  return ids;
}

/**
 * Replicas of one service that are moving or not running: what the budget counts. A suspended
 * replica (stopped on purpose by a forced drain) is not counted as down: it is not coming back
 * by itself, and counting it would freeze every other move of its service.
 */
export function unavailable(idx: ReplicaIndex, deployment: string, service: string): { moving: string[]; down: string[] } {
  const moving: string[] = [];
  const down: string[] = [];
  for (const id of serviceReplicas(idx).get(`${deployment}/${service}`) ?? []) {
    const copies = idx.get(id);
    if (!copies?.length) continue;
    if (inFlight(copies)) moving.push(id);
    else if (copies.every((c) => c.desired.spec.suspended)) continue;
    else if (!copies.some((c) => replicaRunning(c.observed))) down.push(id);
  }
  return { moving: moving.sort(), down: down.sort() };
}

export interface MoveRequest {
  replica: string;
  src: string;
  dst: string;
  by: MoveActor;
  /** Unique id of this move (the caller's, e.g. derived from the time and replica). */
  id: string;
  now: number;
  timeoutMs: number;
  /**
   * The source node is leaving (drain): the replica must go even if it is not running. It is
   * then already unavailable, so the budget counts it once, not twice.
   */
  sourceLeaving?: boolean;
}

export type MoveStart =
  | { ok: true; ops: Op[]; marker: NonNullable<ReplicaDesired['spec']['move']>; /** The destination's desired value. */ dst: ReplicaDesired }
  | { ok: false; refusal: MoveRefusal; detail: string };

/**
 * The disruption budget alone: refuses when moving `replica` now would leave its service with more
 * than update.maxUnavailable replicas moving or down. The replica itself is not counted as down
 * (a move of a replica that is not running takes nothing further down). Cheap: a caller may ask
 * before computing a destination.
 */
export function budgetRefusal(idx: ReplicaIndex, replica: string): { ok: false; refusal: 'budget_exceeded'; detail: string } | undefined {
  const spec = idx.get(replica)?.[0]?.desired.spec;
  if (!spec) return undefined;
  const budget = spec.template.update?.maxUnavailable ?? SERVICE_DEFAULTS.maxUnavailable;
  const { moving, down: allDown } = unavailable(idx, spec.deployment, spec.service);
  const down = allDown.filter((id) => id !== replica);
  if (moving.length + down.length + 1 <= budget) return undefined;
  return {
    ok: false,
    refusal: 'budget_exceeded',
    detail: `${spec.service}: ${moving.length} moving (${moving.join(', ') || '-'}), ${down.length} down (${down.join(', ') || '-'}), maxUnavailable ${budget}`,
  };
}

/** Starts a move if the replica and its service's disruption budget allow it. */
export function startMove(idx: ReplicaIndex, m: MoveRequest): MoveStart {
  const copies = idx.get(m.replica) ?? [];
  const src = copies.find((c) => c.desired.spec.node === m.src);
  const refuse = (refusal: MoveRefusal, detail: string = MOVE_REFUSALS[refusal]): MoveStart => ({ ok: false, refusal, detail });
  if (!src) return refuse('unknown_replica', `no desired/${m.src}/${m.replica}`);
  if (m.src === m.dst) return refuse('same_node');
  const spec = src.desired.spec;
  if (inFlight(copies)) return refuse('move_in_flight', `already moving to ${inFlight(copies)!.desired.spec.node}`);
  if (placementMode(spec.template) === 'global') return refuse('global_replica');
  if (isStateful(spec.template)) return refuse('stateful_replica');
  if (spec.suspended) return refuse('replica_suspended');
  if (!m.sourceLeaving && !replicaRunning(src.observed)) return refuse('replica_not_running');
  const over = budgetRefusal(idx, m.replica);
  if (over) return over;
  const marker = { id: m.id, from: m.src, by: m.by, startedAt: new Date(m.now).toISOString(), deadline: new Date(m.now + m.timeoutMs).toISOString() };
  const dst: ReplicaDesired = {
    ...src.desired,
    metadata: { name: src.desired.metadata.name },
    spec: { ...spec, node: m.dst, placedAt: marker.startedAt, move: marker },
  };
  // The source must still be what we decided on; the destination must not exist yet.
  return { ok: true, marker, dst, ops: [{ op: 'check', key: src.key, modRevision: src.modRevision }, { op: 'create', key: keys.desired(m.dst, m.replica), value: dst }] };
}

/**
 * Counts a move planned in this pass in the index, as if it had landed, so that later
 * startMove calls of the same pass see it in the budget (a pass may start several moves).
 */
export function assumeStarted(idx: ReplicaIndex, replica: string, start: Extract<MoveStart, { ok: true }>): void {
  const copies = idx.get(replica) ?? [];
  copies.push({ key: keys.desired(start.dst.spec.node, replica), modRevision: 0, desired: start.dst });
  copies.sort((a, b) => (a.desired.spec.node < b.desired.spec.node ? -1 : 1));
  idx.set(replica, copies);
}

export type MoveOutcome = 'completed' | 'abandoned';

/** Why a move was abandoned: closed union, the same strings in drain status, audit and metrics. */
export const ABANDON_REASONS = {
  move_timeout: 'the destination copy was not running and healthy by the deadline',
  dst_failed: 'the destination copy failed (restart budget exhausted)',
  dst_lost: 'the destination node went NotReady or away before the copy was ready',
  cancelled: 'the actor withdrew the move (e.g. its drain aborted)',
} as const;
export type AbandonReason = keyof typeof ABANDON_REASONS;

export interface MoveStep {
  replica: string;
  deployment: string;
  service: string;
  src: string;
  dst: string;
  by: MoveActor;
  moveId: string;
  outcome: MoveOutcome;
  /** For abandoned moves: why. */
  reason?: AbandonReason;
  durationMs: number;
  ops: Op[];
}

export interface AdvanceOptions {
  /** Only moves by this actor (each controller advances its own moves). */
  by: MoveActor;
  /** Nodes that are gone or NotReady: a move toward one is abandoned at once. */
  lostNodes?: ReadonlySet<string>;
}

function stepBase(replica: string, dst: Copy, now: number): Omit<MoveStep, 'outcome' | 'ops' | 'reason'> {
  const marker = dst.desired.spec.move!;
  return {
    replica,
    deployment: dst.desired.spec.deployment,
    service: dst.desired.spec.service,
    src: marker.from,
    dst: dst.desired.spec.node,
    by: marker.by,
    moveId: marker.id,
    durationMs: now - Date.parse(marker.startedAt),
  };
}

/** Withdraws the replica's in-flight move: the destination copy goes, the source keeps serving. */
export function cancelMove(idx: ReplicaIndex, replica: string, now: number): MoveStep | undefined {
  const dst = inFlight(idx.get(replica) ?? []);
  if (!dst) return undefined;
  return { ...stepBase(replica, dst, now), outcome: 'abandoned', reason: 'cancelled', ops: [{ op: 'delete', key: dst.key, modRevision: dst.modRevision }] };
}

/** Completes or abandons the actor's in-flight moves that are due; the rest wait. */
export function advanceMoves(idx: ReplicaIndex, now: number, opts: AdvanceOptions): MoveStep[] {
  const steps: MoveStep[] = [];
  // Only replicas with a move in flight, in id order (sorting every replica would dominate a large cluster's pass).
  const moving = [...idx].filter(([, copies]) => inFlight(copies)?.desired.spec.move?.by === opts.by).sort(([a], [b]) => (a < b ? -1 : 1));
  for (const [id, copies] of moving) {
    const dst = inFlight(copies);
    const marker = dst?.desired.spec.move;
    if (!dst || !marker) continue;
    const src = copies.find((c) => c !== dst && c.desired.spec.node === marker.from);
    const base = stepBase(id, dst, now);
    if (!notReadyBecause(dst.desired, dst.observed, now)) {
      const { move: _m, ...rest } = dst.desired.spec;
      const done: ReplicaDesired = { ...dst.desired, spec: { ...rest, placedAt: new Date(now).toISOString() } };
      steps.push({
        ...base,
        outcome: 'completed',
        ops: [...(src ? [{ op: 'delete' as const, key: src.key, modRevision: src.modRevision }] : []), { op: 'update', key: dst.key, value: done, modRevision: dst.modRevision }],
      });
      continue;
    }
    const reason: AbandonReason | undefined =
      now >= Date.parse(marker.deadline) ? 'move_timeout' : dst.observed?.status?.state === 'failed' ? 'dst_failed' : opts.lostNodes?.has(base.dst) ? 'dst_lost' : undefined;
    if (reason) steps.push({ ...base, outcome: 'abandoned', reason, ops: [{ op: 'delete', key: dst.key, modRevision: dst.modRevision }] });
  }
  return steps;
}

/**
 * The earliest time one of the actor's in-flight moves could complete or be abandoned without any
 * watch event: a deadline, or the moment a destination without a health check has run for its
 * minimum ready time. The shell wakes itself then instead of waiting for the safety tick.
 */
export function moveWakeAt(idx: ReplicaIndex, by: MoveActor): number | undefined {
  let at: number | undefined;
  const soonest = (t: number) => (at = Math.min(at ?? t, t));
  for (const copies of idx.values()) {
    const dst = inFlight(copies);
    const marker = dst?.desired.spec.move;
    if (!dst || !marker || marker.by !== by) continue;
    soonest(Date.parse(marker.deadline));
    const ready = minReadyAt(dst.desired, dst.observed);
    if (ready !== undefined) soonest(ready);
  }
  return at;
}
