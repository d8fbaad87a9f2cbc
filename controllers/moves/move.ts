// The one make-before-break move mechanism, shared by the drain controller and the rebalancer
// (docs/drain.md, "What happens to each replica"). Pure: the replica view in, ops out.
//
// A move of replica R from src to dst:
//   start    — desired/<src>/<R> gets movingTo {dst, id, by} and desired/<dst>/<R> is created with
//              a move marker {id, from: src, by, deadline}, with the service's ledger, in one act
//              that also compares dst's node and drain keys (a cordon or drain since refuses it).
//              Writing the source makes competing starts conflict: two movers (or a mover and the
//              scheduler replacing a lost node's replica) cannot both land. The source keeps
//              running. Refused with a typed reason when the disruption budget has no room.
//   cutover  — once the dst copy is observed running and healthy at its spec, desired/<src>/<R> is
//              deleted (its agent stops the container) and the marker records cutoverAt.
//   complete — once the source's agent no longer reports the replica (its container is gone), or
//              the source node is lost, the marker is cleared (placedAt = now, movedFrom = src, which
//              the rebalancer's ping-pong exclusion reads across leader failovers). "Completed" means
//              the old container is gone, not only its desired key.
//   abandon  — before cutover: past the deadline, when the dst copy failed (its start failed, or
//              its container exited: no restart is made while a move is in flight, so it would
//              never become ready), when its node is lost, or when the actor cancels it:
//              desired/<dst>/<R> is deleted and src's movingTo cleared; src keeps serving.
// While a move is in flight R has two desired keys (one after cutover): every controller counts it
// once. The disruption budget counts it as disrupted up to its cutover, and after it only while
// the destination does not run its spec (controllers/disruption/budget.ts): the source's stop
// grace overlaps the next move; the marker still keeps any other move of R out until completion.
import { keys } from '../../src/api/keys.js';
import { MOVE_REFUSALS, type AbandonReason, type MoveRefusal } from '../../src/api/reasons/moves.js';
import { minReadyAt, notReadyBecause, replicaRunning } from '../../src/api/readiness.js';
import { isStateful, placementMode } from '../../src/api/spec.js';
import { assignHostPorts, DEFAULT_PORT_RANGE, dynamicPortNames } from '../../src/api/ports.js';
import type { Deployment, DisruptionLedger, Heartbeat, HoleFor, MoveActor, MoveMarker, Node, PortRange, ReplicaAddress, ReplicaCommand, ReplicaDesired, ServiceSpec, VolumeHome } from '../../src/api/types.js';
import { byRest, valuesByRest, type Cache } from '../../src/runtime/cache.js';
import { REPLICAS, type Copy, type ReplicaEntry, type ReplicaIndex } from '../../src/runtime/replicas.js';
import type { Watchable } from '../../src/runtime/watchable.js';
import type { Versioned } from '../../src/store/store.js';
import { TooLargeError } from '../../src/store/errors.js';
import { MAX_REQUEST_BYTES } from '../../src/store/store.js';
import { actBytes, type Op } from '../../src/store/writer.js';
import { admits, budgetOf, LedgerBook, type Budget } from '../disruption/budget.js';
import { decisionValue } from '../placement/decision.js';
import { eligibilityGuard, eligibilityRevisions, networkViewOf, nodeSettingsOf, placedReplicaOf, type EligibilityRevisions } from '../placement/input.js';
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import { addressClaimOp, chooseAddress, claimedByNode, EMPTY_NETWORK, type NetworkView } from '../placement/ipam.js';
import type { Decision } from '../placement/placer.js';

export { ABANDON_REASONS, MOVE_REFUSALS, type AbandonReason, type MoveRefusal } from '../../src/api/reasons/moves.js';
export type { Copy } from '../../src/runtime/replicas.js';

/** The destination copy of an in-flight move, if any. */
export function inFlight(copies: readonly Copy[]): Copy | undefined {
  return copies.find((c) => c.desired.spec.move);
}

const iso = (ms: number) => new Date(ms).toISOString();

/** What a mover's snapshot holds that a move book is built from. */
export interface MoveView {
  replicas: ReplicaIndex;
  ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>;
  /** Restart commands by store key (the disruption budget counts pending ones). */
  commands?: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  eligibility: EligibilityRevisions;
  /** Each node's dynamic host port range (Node.status.portRange; absent: the default). */
  portRanges?: ReadonlyMap<string, PortRange>;
  /** The cluster network: a cluster-network replica's destination copy gets an address there. */
  network?: NetworkView;
  /**
   * Every service's placement now, by `<deployment>/<service>` (the deployment's spec): placement
   * is not in the spec hash, so a running replica's template may carry an older one.
   */
  placements?: ReadonlyMap<string, ServiceSpec['placement']>;
}

/** What every mover reads, and where each controller's snapshot places it: one reading of the cache. */
export const MOVER_READS = ['nodes', 'nodespecs', 'heartbeats', 'drains', 'desired', 'observed', 'volumes', 'disruptions', 'commands', 'network', 'subnets', 'addresses', 'nodeSettings', 'deployments'] as const satisfies readonly Watchable[];

/** A mover's view of the cache: the placement inputs and the move book's. */
export function moverView(cache: Cache): Required<MoveView> & { heartbeats: ReadonlyMap<string, Heartbeat>; volumeHomes: VolumeHome[]; settings: NodeSettingsResolved } {
  return {
    heartbeats: valuesByRest(cache.kind<Heartbeat>('heartbeats')),
    replicas: cache.index(REPLICAS),
    ledgers: byRest(cache.kind<DisruptionLedger>('disruptions')),
    commands: cache.kind<ReplicaCommand>('commands').items,
    volumeHomes: [...cache.kind<VolumeHome>('volumes').items.values()].map((v) => v.value),
    eligibility: eligibilityRevisions(cache),
    portRanges: new Map([...cache.kind<Node>('nodes').items.values()].flatMap((v) => (v.value.status?.portRange ? [[v.value.metadata.name, v.value.status.portRange] as const] : []))),
    network: networkViewOf(cache),
    settings: nodeSettingsOf(cache),
    placements: placementsOf(cache),
  };
}

/** Every service's current placement (the deployment's spec, not the replicas' templates). */
function placementsOf(cache: Cache): Map<string, ServiceSpec['placement']> {
  const out = new Map<string, ServiceSpec['placement']>();
  for (const [name, d] of valuesByRest(cache.kind<Deployment>('deployments'))) for (const [svc, spec] of Object.entries(d.spec.services)) out.set(`${name}/${svc}`, spec.placement);
  return out;
}

/**
 * The replicas as one pass of a mover sees them: the shared index, plus the moves this pass has
 * started (assumed landed, so later starts of the same pass count them in the budget), and the
 * ledger writes of the pass.
 */
export class MoveBook {
  private readonly assumed = new Map<string, Copy[]>();
  readonly ledger: LedgerBook;

  readonly replicas: ReplicaIndex;
  readonly commands?: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** The node and drain keys' revisions: a move start compares its destination's (no cordon or drain since). */
  readonly eligibility: EligibilityRevisions;

  readonly portRanges: ReadonlyMap<string, PortRange>;
  readonly network: NetworkView;
  readonly placements: ReadonlyMap<string, ServiceSpec['placement']>;
  /** Host numbers claimed per node, with the ones this pass gave. */
  private readonly addressesTaken: Map<string, Set<number>>;

  constructor(view: MoveView) {
    this.portRanges = view.portRanges ?? new Map();
    this.placements = view.placements ?? new Map();
    this.network = view.network ?? EMPTY_NETWORK;
    this.addressesTaken = claimedByNode(this.network.claims);
    this.replicas = view.replicas;
    this.commands = view.commands;
    this.eligibility = view.eligibility;
    this.ledger = new LedgerBook(view.ledgers);
  }

  /**
   * What a replica is placed as when it moves: its template under its service's placement now (the
   * scheduler places new replicas so too). A placement changed to allow more nodes lets a drained
   * replica go to them, though its running template still names the old hosts.
   */
  shape(s: ReplicaDesired['spec']): ServiceSpec {
    const key = `${s.deployment}/${s.service}`;
    return this.placements.has(key) ? { ...s.template, placement: this.placements.get(key) } : s.template;
  }

  copies(id: string): readonly Copy[] {
    return this.assumed.get(id) ?? this.replicas.byId.get(id)?.copies ?? [];
  }

  entry(id: string): ReplicaEntry | undefined {
    return this.replicas.byId.get(id);
  }

  /** The service's disruption budget as this pass leaves it so far. */
  budget(deployment: string, service: string, template: ReplicaDesired['spec']['template'] | undefined): Budget {
    return budgetOf(this.replicas.service(deployment, service), (id) => this.copies(id), template, { commands: this.commands });
  }

  /** Replica ids with a move in flight, in id order. */
  moving(): string[] {
    return [...new Set([...this.replicas.moving, ...this.assumed.keys()])].filter((id) => inFlight(this.copies(id))).sort();
  }

  /**
   * Dynamic host ports for a replica's copy on `node`: free ones of that node's range, given every
   * copy there (moves this pass started included). Dynamic ports are per node: a destination
   * never inherits the source's.
   */
  hostPortsOn(node: string, replica: string, template: ReplicaDesired['spec']['template']): Record<string, number> {
    const names = dynamicPortNames(template);
    if (!names.length) return {};
    const taken = new Set<number>();
    const ids = new Set([...this.replicas.onNode(node).map((e) => e.id), ...this.assumed.keys()]);
    for (const id of ids) {
      if (id === replica) continue;
      // What a copy holds as the placer accounts it (placedReplicaOf): one definition for both.
      for (const c of this.copies(id)) if (c.desired.spec.node === node) for (const p of placedReplicaOf(c.desired)?.ports ?? []) taken.add(p);
    }
    return assignHostPorts(replica, names, taken, this.portRanges.get(node) ?? DEFAULT_PORT_RANGE);
  }

  /**
   * A cluster-network replica's destination copy: an address of its node's subnets and the claim
   * to create with the move (none for a host-network replica). A node without subnets takes no
   * such copy: the move is refused.
   */
  addressOn(node: string, replica: ReplicaDesired['spec']): { address?: ReplicaAddress; ops: Op[] } | undefined {
    if (replica.template.network !== 'cluster') return { ops: [] };
    const subnets = this.network.subnets.get(node)?.value.spec;
    if (!subnets) return undefined;
    let taken = this.addressesTaken.get(node);
    if (!taken) this.addressesTaken.set(node, (taken = new Set()));
    const given = chooseAddress(replica.replica, subnets, taken);
    if (!given) return undefined;
    taken.add(given.hostNumber);
    return { address: given.address, ops: [addressClaimOp({ ...replica, node }, given, Date.parse(replica.placedAt) || 0)] };
  }

  /** Counts a move started in this pass as if it had landed. */
  assume(replica: string, start: Extract<MoveStart, { ok: true }>): void {
    const copies = this.copies(replica).map((c) => (c.desired.spec.node === start.src.spec.node ? { ...c, desired: start.src } : c));
    copies.push({ key: keys.desired(start.dst.spec.node, replica), modRevision: 0, desired: start.dst });
    copies.sort((a, b) => (a.desired.spec.node < b.desired.spec.node ? -1 : 1));
    this.assumed.set(replica, copies);
  }
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
  /**
   * The placer's verdicts over the nodes for this replica (its scheduler filters and scores): stored
   * with the move as the replica's placement decision, chosen = dst and `why` the mover's reason,
   * so `jaco explain REPLICA` explains where it is whatever put it there.
   */
  decision?: { verdicts: Decision; why: string };
  /** A coalescing move: the pending service it makes room for (kept on the marker, then on movedFrom). */
  forPending?: HoleFor;
  /** The mover's balancing epoch (rebalancer: the ping-pong exclusion), kept on the marker, then on movedFrom. */
  epoch?: string;
}

export type MoveStart =
  | { ok: true; ops: Op[]; marker: MoveMarker; /** The source's and destination's desired values. */ src: ReplicaDesired; dst: ReplicaDesired }
  | { ok: false; refusal: MoveRefusal; detail: string };

/** The disruption budget alone (cheap: a caller may ask before computing a destination). */
export function budgetRefusal(book: MoveBook, replica: string): { ok: false; refusal: 'budget_exceeded'; detail: string } | undefined {
  const spec = book.copies(replica)[0]?.desired.spec;
  if (!spec) return undefined;
  const verdict = admits(book.budget(spec.deployment, spec.service, spec.template), replica);
  return verdict.ok ? undefined : { ok: false, refusal: 'budget_exceeded', detail: `${spec.service}: ${verdict.detail}` };
}

/**
 * What a completed move leaves on the replica: the node it left, and — within one balancing epoch
 * — every node it left before (the ping-pong exclusion remembers them all, seed 002).
 */
function movedFromOf(marker: MoveMarker, prev: ReplicaDesired['spec']['movedFrom'], now: number): NonNullable<ReplicaDesired['spec']['movedFrom']> {
  const earlier = marker.epoch && prev?.epoch === marker.epoch ? [...new Set([prev.node, ...(prev.earlier ?? [])])].filter((n) => n !== marker.from).sort() : [];
  return {
    node: marker.from,
    by: marker.by,
    at: iso(now),
    ...(marker.forPending ? { forPending: marker.forPending } : {}),
    ...(marker.epoch ? { epoch: marker.epoch } : {}),
    ...(earlier.length ? { earlier } : {}),
  };
}

/** Starts a move if the replica and its service's disruption budget allow it. */
export function startMove(book: MoveBook, m: MoveRequest): MoveStart {
  const copies = book.copies(m.replica);
  const src = copies.find((c) => c.desired.spec.node === m.src);
  const refuse = (refusal: MoveRefusal, detail: string = MOVE_REFUSALS[refusal]): MoveStart => ({ ok: false, refusal, detail });
  if (!src) return refuse('unknown_replica', `no desired/${m.src}/${m.replica}`);
  if (m.src === m.dst) return refuse('same_node');
  const spec = src.desired.spec;
  const moving = inFlight(copies);
  if (moving || spec.movingTo) return refuse('move_in_flight', `already moving to ${moving?.desired.spec.node ?? spec.movingTo!.node}`);
  if (placementMode(spec.template) === 'global') return refuse('global_replica');
  if (isStateful(spec.template)) return refuse('stateful_replica');
  if (spec.suspended) return refuse('replica_suspended');
  if (!m.sourceLeaving && !replicaRunning(src.observed)) return refuse('replica_not_running');
  const over = budgetRefusal(book, m.replica);
  if (over) return over;
  // The real reason, not a timeout later: an act that no request can carry never lands.
  const size = moveStartFits(spec);
  if (size) return refuse('too_large', size);
  const marker: MoveMarker = { id: m.id, from: m.src, by: m.by, startedAt: iso(m.now), deadline: iso(m.now + m.timeoutMs), ...(m.forPending ? { forPending: m.forPending } : {}), ...(m.epoch ? { epoch: m.epoch } : {}) };
  const srcValue: ReplicaDesired = { ...src.desired, spec: { ...spec, movingTo: { id: m.id, node: m.dst, by: m.by } } };
  const { hostPorts: _srcPorts, address: _srcAddress, ...rest } = spec;
  const hostPorts = book.hostPortsOn(m.dst, m.replica, spec.template);
  // Addresses, like dynamic ports, are the node's: the destination gets one of its own.
  const address = book.addressOn(m.dst, { ...spec, placedAt: marker.startedAt });
  if (!address) return refuse('no_address', `${m.dst} has no free address of its subnets for ${m.replica} (ipam_exhausted)`);
  const dst: ReplicaDesired = {
    ...src.desired,
    metadata: { name: src.desired.metadata.name },
    spec: { ...rest, node: m.dst, placedAt: marker.startedAt, move: marker, ...(Object.keys(hostPorts).length ? { hostPorts } : {}), ...(address.address ? { address: address.address } : {}) },
  };
  return {
    ok: true,
    marker,
    src: srcValue,
    dst,
    ops: [
      // The source must still be what we decided on (and now says it is moving); the destination
      // must not exist yet, and must still be schedulable as judged (no cordon or drain since).
      { op: 'update', key: src.key, value: srcValue, modRevision: src.modRevision },
      { op: 'create', key: keys.desired(m.dst, m.replica), value: dst },
      ...address.ops,
      ...book.ledger.record(spec.deployment, spec.service, { replica: m.replica, by: m.by, kind: 'move', now: m.now }),
      ...eligibilityGuard(book.eligibility, m.dst),
      ...(m.decision ? [moveDecisionOp(m, m.decision)] : []),
    ],
  };
}

/**
 * What a move start writes beside its two desired values, at most: the service's disruption
 * ledger, the destination's address claim and placement decision, the mover's audit record and
 * the compares. A decision lists every node up to explainNodes (64), else 10 rejected and the 5
 * best (controllers/placement/placer.ts): the largest act, built at the longest names and details
 * by move.test.ts, takes 39 KiB of this beside its two desired values; the test fails if it grows
 * past the reserve.
 */
export const MOVE_START_OTHER_BYTES = 64 * 1024;

/**
 * The bytes of a move start's two desired values of a replica of this spec: the source marked
 * moving, the destination with its move marker, address and host ports — each at the longest
 * values they can take, so the bound holds for every node and replica.
 */
export function moveStartValueBytes(spec: ReplicaDesired['spec']): number {
  const long = 'x'.repeat(253);
  const at = new Date(0).toISOString();
  const src = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: long }, spec: { ...spec, replica: long, node: long, placedAt: at, movingTo: { id: long, node: long, by: 'rebalancer' } } };
  const dst = {
    ...src,
    spec: { ...spec, replica: long, node: long, placedAt: at, move: { id: long, from: long, by: 'rebalancer', startedAt: at, deadline: at, forPending: { deployment: long, service: long, node: long } }, address: { ipv4: '255.255.255.255/32', ipv6: 'ffff:'.repeat(8) + '/128' }, hostPorts: { [long]: 65535 } },
  };
  return actBytes([
    { op: 'update', key: `desired/${long}/${long}`, value: src, modRevision: 1 },
    { op: 'create', key: `desired/${long}/${long}`, value: dst },
  ]);
}

/** The most a move start of a replica of this spec can ask of one request. */
export function moveStartBytes(spec: ReplicaDesired['spec']): number {
  return moveStartValueBytes(spec) + MOVE_START_OTHER_BYTES;
}

/** Why a move start of this spec cannot fit one request, or undefined when it can. */
export function moveStartFits(spec: ReplicaDesired['spec']): string | undefined {
  const bytes = moveStartBytes(spec);
  return bytes > MAX_REQUEST_BYTES ? new TooLargeError(`a move start of ${spec.replica} (its spec twice, with the rest of the act)`, bytes, MAX_REQUEST_BYTES).message : undefined;
}

/** The stored decision of a move's destination (decisions/<deployment>/<replica>). */
function moveDecisionOp(m: MoveRequest, d: NonNullable<MoveRequest['decision']>): Op {
  const value = decisionValue({ ...d.verdicts, chosen: m.dst, why: d.why }, m.by === 'drain' ? 'drain' : 'rebalance', m.now, m.by);
  return { op: 'put', key: keys.decision(d.verdicts.deployment, m.replica), value };
}

export type MoveOutcome = 'cutover' | 'completed' | 'abandoned';

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
  /** Nodes that are gone or NotReady: a move toward one is abandoned at once; one away from one completes. */
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

/** The ops that withdraw a move before cutover: the destination goes, the source forgets it was moving. */
function abandonOps(copies: readonly Copy[], dst: Copy): Op[] {
  const ops: Op[] = [{ op: 'delete', key: dst.key, modRevision: dst.modRevision }];
  const src = copies.find((c) => c !== dst && c.desired.spec.movingTo?.id === dst.desired.spec.move!.id);
  if (src) {
    const { movingTo: _t, ...spec } = src.desired.spec;
    ops.push({ op: 'update', key: src.key, value: { ...src.desired, spec }, modRevision: src.modRevision });
  }
  return ops;
}

/** Withdraws the replica's in-flight move (not yet cut over): the destination copy goes, the source keeps serving. */
export function cancelMove(book: MoveBook, replica: string, now: number): MoveStep | undefined {
  const copies = book.copies(replica);
  const dst = inFlight(copies);
  if (!dst || dst.desired.spec.move!.cutoverAt) return undefined;
  return { ...stepBase(replica, dst, now), outcome: 'abandoned', reason: 'cancelled', ops: abandonOps(copies, dst) };
}

/**
 * Whether a move's destination copy will never become ready as it stands: its start failed, or its
 * container of this spec exited. The scheduler restarts no copy while its move is in flight (the
 * move decides), and the agent does not start again a container that exited: waiting would only
 * run out the move's deadline (minutes) with the source kept and nothing to show for it.
 */
function dstFailed(dst: Copy): boolean {
  const s = dst.observed?.status;
  if (s?.state === 'failed') return true;
  return s?.state === 'exited' && s.revision === dst.desired.spec.revision && s.specHash === dst.desired.spec.specHash;
}

/** Cuts over, completes or abandons the actor's in-flight moves that are due; the rest wait. */
export function advanceMoves(book: MoveBook, now: number, opts: AdvanceOptions, observedOn: (node: string, replica: string) => unknown): MoveStep[] {
  const steps: MoveStep[] = [];
  for (const id of book.moving()) {
    const copies = book.copies(id);
    const dst = inFlight(copies);
    const marker = dst?.desired.spec.move;
    if (!dst || !marker || marker.by !== opts.by) continue;
    const base = stepBase(id, dst, now);
    if (marker.cutoverAt) {
      // Complete once the source's container is gone (its agent forgot the replica), or its node is lost.
      if (observedOn(marker.from, id) !== undefined && !opts.lostNodes?.has(marker.from)) continue;
      const { move: _m, ...rest } = dst.desired.spec;
      const done: ReplicaDesired = { ...dst.desired, spec: { ...rest, placedAt: iso(now), movedFrom: movedFromOf(marker, rest.movedFrom, now) } };
      steps.push({ ...base, outcome: 'completed', ops: [{ op: 'update', key: dst.key, value: done, modRevision: dst.modRevision }] });
      continue;
    }
    if (!notReadyBecause(dst.desired, dst.observed, now)) {
      const src = copies.find((c) => c !== dst && c.desired.spec.node === marker.from);
      const cut: ReplicaDesired = { ...dst.desired, spec: { ...dst.desired.spec, move: { ...marker, cutoverAt: iso(now) } } };
      steps.push({
        ...base,
        outcome: 'cutover',
        ops: [...(src ? [{ op: 'delete' as const, key: src.key, modRevision: src.modRevision }] : []), { op: 'update', key: dst.key, value: cut, modRevision: dst.modRevision }],
      });
      continue;
    }
    const reason: AbandonReason | undefined =
      now >= Date.parse(marker.deadline) ? 'move_timeout' : dstFailed(dst) ? 'dst_failed' : opts.lostNodes?.has(base.dst) ? 'dst_lost' : undefined;
    if (reason) steps.push({ ...base, outcome: 'abandoned', reason, ops: abandonOps(copies, dst) });
  }
  return steps;
}

/**
 * The earliest time one of the actor's in-flight moves could advance without any change: a
 * deadline, or the moment a destination without a health check has run for its minimum ready
 * time. The runtime wakes the controller then instead of waiting for the safety tick.
 */
export function moveWakeAt(book: MoveBook, by: MoveActor): number | undefined {
  let at: number | undefined;
  const soonest = (t: number) => (at = Math.min(at ?? t, t));
  for (const id of book.moving()) {
    const dst = inFlight(book.copies(id));
    const marker = dst?.desired.spec.move;
    if (!dst || !marker || marker.by !== by || marker.cutoverAt) continue;
    soonest(Date.parse(marker.deadline));
    const ready = minReadyAt(dst.desired, dst.observed);
    if (ready !== undefined) soonest(ready);
  }
  return at;
}
