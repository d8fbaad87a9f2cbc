// The one make-before-break move mechanism, shared by the drain controller and the rebalancer
// (ARCHITECTURE.md rule 5), with the disruption budget they share. Pure: state in, ops out.
//
// A move of replica R from src to dst:
//   start    — desired/<dst>/<R> is created with a move marker {from: src, by, deadline}; the
//              source keeps running. Refused with a typed reason when the budget would be exceeded.
//   complete — once the dst copy is observed running and healthy at its spec, desired/<src>/<R>
//              is deleted and the marker cleared (placedAt = now), in one transaction.
//   abandon  — past the deadline (or when dst is gone) desired/<dst>/<R> is deleted; src serves.
// While a move is in flight, R has two desired keys: every controller counts it once.
import { keys } from '../../src/api/keys.js';
import { notReadyBecause, replicaRunning } from '../../src/api/readiness.js';
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

/** Replicas of one service that are moving or not running: what the budget counts. */
export function unavailable(idx: ReplicaIndex, deployment: string, service: string): { moving: string[]; down: string[] } {
  const moving: string[] = [];
  const down: string[] = [];
  for (const [id, copies] of idx) {
    const s = copies[0]!.desired.spec;
    if (s.deployment !== deployment || s.service !== service) continue;
    if (inFlight(copies)) moving.push(id);
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
}

export type MoveStart = { ok: true; ops: Op[]; marker: NonNullable<ReplicaDesired['spec']['move']> } | { ok: false; refusal: MoveRefusal; detail: string };

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
  if (!replicaRunning(src.observed)) return refuse('replica_not_running');
  const budget = spec.template.update?.maxUnavailable ?? SERVICE_DEFAULTS.maxUnavailable;
  const { moving, down } = unavailable(idx, spec.deployment, spec.service);
  if (moving.length + down.length + 1 > budget)
    return refuse('budget_exceeded', `${spec.service}: ${moving.length} moving (${moving.join(', ') || '-'}), ${down.length} down (${down.join(', ') || '-'}), maxUnavailable ${budget}`);
  const marker = { id: m.id, from: m.src, by: m.by, startedAt: new Date(m.now).toISOString(), deadline: new Date(m.now + m.timeoutMs).toISOString() };
  const dst: ReplicaDesired = {
    ...src.desired,
    metadata: { name: src.desired.metadata.name },
    spec: { ...spec, node: m.dst, placedAt: marker.startedAt, move: marker },
  };
  // The source must still be what we decided on; the destination must not exist yet.
  return { ok: true, marker, ops: [{ op: 'check', key: src.key, modRevision: src.modRevision }, { op: 'create', key: keys.desired(m.dst, m.replica), value: dst }] };
}

export type MoveOutcome = 'completed' | 'abandoned';

export interface MoveStep {
  replica: string;
  deployment: string;
  service: string;
  src: string;
  dst: string;
  by: MoveActor;
  moveId: string;
  outcome: MoveOutcome;
  /** For abandoned moves: why (timeout, or the destination's copy failed). */
  reason?: 'move_timeout' | 'dst_failed';
  durationMs: number;
  ops: Op[];
}

export interface AdvanceOptions {
  /** Only moves by this actor (each controller advances its own moves). */
  by: MoveActor;
  /** Nodes that are gone or NotReady: a move toward one is abandoned at once. */
  lostNodes?: ReadonlySet<string>;
}

/** Completes or abandons the actor's in-flight moves that are due; the rest wait. */
export function advanceMoves(idx: ReplicaIndex, now: number, opts: AdvanceOptions): MoveStep[] {
  const steps: MoveStep[] = [];
  for (const [id, copies] of [...idx].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const dst = inFlight(copies);
    const marker = dst?.desired.spec.move;
    if (!dst || !marker || marker.by !== opts.by) continue;
    const src = copies.find((c) => c !== dst && c.desired.spec.node === marker.from);
    const base = {
      replica: id,
      deployment: dst.desired.spec.deployment,
      service: dst.desired.spec.service,
      src: marker.from,
      dst: dst.desired.spec.node,
      by: marker.by,
      moveId: marker.id,
      durationMs: now - Date.parse(marker.startedAt),
    };
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
    const failed = dst.observed?.status?.state === 'failed';
    if (now >= Date.parse(marker.deadline) || failed || opts.lostNodes?.has(base.dst))
      steps.push({ ...base, outcome: 'abandoned', reason: failed ? 'dst_failed' : 'move_timeout', ops: [{ op: 'delete', key: dst.key, modRevision: dst.modRevision }] });
  }
  return steps;
}
