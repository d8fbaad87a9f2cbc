// The drain controller's pure core (seed 001, "Drain on graceful node remove"): from one snapshot
// of drains, nodes, replicas and volume homes, decide what every drain does next — drop global
// replicas, block or (with force) stop stateful ones, move the rest make-before-break through the
// shared move mechanism to a node the scheduler's own placement core picks, complete, abort on
// timeout, remove the node — and resume replicas a forced drain stopped once their node is
// schedulable again. No I/O, no clock (`now` comes in); deterministic: drains by host, replicas by id.
import { keys } from '../../src/api/keys.js';
import { drainActive, nodeReady } from '../../src/api/nodes.js';
import { replicaRunning } from '../../src/api/readiness.js';
import { canonicalJson, isJob, isStateful, placementMode } from '../../src/api/spec.js';
import type { NetworkView } from '../placement/ipam.js';
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { DisruptionLedger, DrainReplicaStatus, Heartbeat, Node, NodeDrain, NodeDrainStatus, ReplicaCommand, ReplicaDesired, VolumeHome } from '../../src/api/types.js';
import { durationMs, formatDuration } from '../../src/api/units.js';
import type { Act } from '../../src/runtime/acts.js';
import type { Copy, ReplicaIndex } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import { advanceMoves, budgetRefusal, cancelMove, inFlight, MoveBook, moveWakeAt, startMove, type MoveStep } from '../moves/move.js';
import type { Placer, PlacementConfig } from '../placement/placer.js';
import { placerFor, type EligibilityRevisions } from '../placement/input.js';
import type { DrainAbortReason, DrainMoveResult, DrainReplicaReason } from '../../src/api/reasons/drain.js';

/** Everything decide reads: the drain controller's view of the cache (index.ts builds it). */
export interface DrainSnapshot {
  drains: readonly Versioned<NodeDrain>[];
  /** By host. */
  nodes: ReadonlyMap<string, Versioned<Node>>;
  /** By host. */
  heartbeats: ReadonlyMap<string, Heartbeat>;
  /** Every replica with its copies and what their agents observe. */
  replicas: ReplicaIndex;
  /** Disruption ledgers by `<deployment>/<service>`. */
  ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>;
  /** Restart commands by store key (the disruption budget counts pending ones). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  volumeHomes: readonly VolumeHome[];
  /** Mod revisions of the node and drain keys (a move start compares its destination's). */
  eligibility: EligibilityRevisions;
  /** The cluster network: a moved cluster-network replica gets an address on its destination. */
  network?: NetworkView;
  /** The cluster's node-eligibility settings (degraded destinations, default scratch disk). */
  settings?: NodeSettingsResolved;
}

export interface DrainConfig {
  /** Per-replica timeout of a drain whose spec.timeout does not parse (timings.drainTimeoutMs). */
  drainTimeoutMs: number;
  placement?: PlacementConfig;
}

export type DrainMetricEvent = { result: DrainMoveResult; seconds?: number };

export interface DrainAct extends Act<DrainMetricEvent> {
  audit: AuditRecord[];
  metrics: DrainMetricEvent[];
}

/** Why a replica waits: for logs, never for decisions. */
export interface DrainNote {
  node: string;
  replica: string;
  note: string;
}

export interface DrainDecision {
  acts: DrainAct[];
  /** Drains pending or draining once the acts land (jaco_drains_in_progress). */
  inProgress: number;
  /** The earliest time a pass could decide something new without any event (a deadline, a ready time). */
  wakeAt?: number;
  notes: DrainNote[];
}

/** The reason every replica of a forced drain is suspended with (and the only one resumed). */
export const SUSPEND_REASON = 'node_drained';

type ReplicaStates = Record<string, DrainReplicaStatus>;

const iso = (ms: number) => new Date(ms).toISOString();
const inProgress = (d: NodeDrain) => !d.status || d.status.state === 'pending' || d.status.state === 'draining';
const settled = (s: DrainReplicaStatus) => s.state === 'done' || s.state === 'dropped' || s.state === 'stopped';

/** A drain's spec.timeout in ms; a malformed one falls back to the default rather than stalling the drain. */
function timeoutOf(d: NodeDrain, fallbackMs: number): number {
  try {
    const ms = durationMs(d.spec.timeout);
    return ms > 0 ? ms : fallbackMs;
  } catch {
    return fallbackMs;
  }
}

/** A copy's move marker, when it is the destination of a move onto `host`. */
function inboundTo(host: string, copy: Copy): boolean {
  return copy.desired.spec.node === host && !!copy.desired.spec.move;
}

/** The state of one pass: shared by every drain (one move book, one placer, one list of acts). */
class Pass {
  readonly acts: DrainAct[] = [];
  readonly notes: DrainNote[] = [];
  readonly book: MoveBook;
  readonly steps = new Map<string, MoveStep>();
  private placerCache?: Placer;

  constructor(readonly s: DrainSnapshot, readonly now: number, readonly config: DrainConfig) {
    this.book = new MoveBook(s);
  }

  get placer(): Placer {
    const { s } = this;
    this.placerCache ??= placerFor(
      { nodes: [...s.nodes.values()].map((n) => n.value), heartbeats: s.heartbeats, drains: new Map(s.drains.map((d) => [d.value.spec.node, d.value])), replicas: s.replicas, volumeHomes: s.volumeHomes, commands: s.commands, network: s.network, settings: s.settings },
      this.now,
      this.config.placement,
    );
    return this.placerCache;
  }

  nodeReady(node: string): boolean {
    return this.s.nodes.has(node) && nodeReady(this.s.heartbeats.get(node));
  }

  /** Cuts over, completes, abandons (deadline, failed, lost destination) every drain move that is due. */
  advance(): void {
    // Only the nodes of moves matter; each is judged once, not per replica.
    const lost = new Set<string>();
    for (const id of this.book.moving()) {
      const dst = inFlight(this.book.copies(id))!;
      for (const node of [dst.desired.spec.node, dst.desired.spec.move!.from]) if (!lost.has(node) && !this.nodeReady(node)) lost.add(node);
    }
    const observed = (node: string, replica: string) => this.s.replicas.observed(node, replica);
    for (const step of advanceMoves(this.book, this.now, { by: 'drain', lostNodes: lost }, observed)) this.addStep(step);
  }

  addStep(step: MoveStep): void {
    this.steps.set(step.replica, step);
    if (step.outcome === 'cutover') {
      // The replacement is ready: the source's desired key goes, its container stops; completion follows.
      this.acts.push({ label: `move ${step.replica} ${step.src}→${step.dst}: cutover`, ops: step.ops, audit: [], metrics: [] });
      return;
    }
    const result: DrainMoveResult = step.outcome === 'completed' ? 'completed' : step.reason!;
    const audit: AuditRecord[] =
      step.outcome === 'completed'
        ? [
            {
              type: 'replica_moved',
              time: this.now,
              deployment: step.deployment,
              payload: { replica: step.replica, deployment: step.deployment, service: step.service, src: step.src, dst: step.dst, by: 'drain', moveId: step.moveId, duration: formatDuration(step.durationMs), durationMs: step.durationMs },
            },
          ]
        : [
            // An abandoned move removes its destination copy: recorded like the rebalancer's.
            {
              type: 'drain_move_abandoned',
              time: this.now,
              deployment: step.deployment,
              payload: { replica: step.replica, deployment: step.deployment, service: step.service, src: step.src, dst: step.dst, by: 'drain', moveId: step.moveId, reason: step.reason ?? null, durationMs: step.durationMs },
            },
          ];
    this.acts.push({
      label: `move ${step.replica} ${step.src}→${step.dst}: ${result}`,
      ops: step.ops,
      audit,
      metrics: [{ result, ...(step.outcome === 'completed' ? { seconds: step.durationMs / 1000 } : {}) }],
    });
  }

  note(node: string, replica: string, note: string): void {
    this.notes.push({ node, replica, note });
  }
}

/** One drain's pass: the replica states after it, the acts it adds, whether it aborts or finishes. */
class DrainPass {
  readonly host: string;
  readonly spec: NodeDrain['spec'];
  readonly states: ReplicaStates;
  readonly timeoutMs: number;
  /** Acts planned for this node's replicas in this pass (a drain finishes only in a pass with none). */
  private work = 0;
  private abort?: { replica: string; cause: DrainReplicaReason };

  constructor(readonly p: Pass, readonly drain: Versioned<NodeDrain>) {
    this.spec = drain.value.spec;
    this.host = this.spec.node;
    this.states = structuredClone(drain.value.status?.replicas ?? {});
    this.timeoutMs = timeoutOf(drain.value, p.config.drainTimeoutMs);
  }

  private set(id: string, state: DrainReplicaStatus['state'], reason?: DrainReplicaReason, dst?: string, deadline?: string): void {
    const cur = this.states[id];
    const next: DrainReplicaStatus = { state, ...(reason ? { reason } : {}), ...(dst ? { dst } : {}) };
    const changed = !cur || cur.state !== state || cur.reason !== next.reason || cur.dst !== next.dst;
    next.at = changed ? iso(this.p.now) : (cur?.at ?? iso(this.p.now));
    const dl = deadline ?? cur?.deadline;
    if (dl && !settled(next)) next.deadline = dl;
    if (cur?.failedOn && !settled(next)) next.failedOn = cur.failedOn;
    this.states[id] = next;
  }

  /** A move of the replica failed on `node` (its copy failed to start or exited): the drain does not try that node again. */
  private failedOn(id: string, node: string): void {
    const st = this.states[id]!;
    if (!st.failedOn?.includes(node)) st.failedOn = [...(st.failedOn ?? []), node].sort();
  }

  /** Replica ids with a copy on the draining node, by id. */
  private onNode(): [string, readonly Copy[]][] {
    const out: [string, readonly Copy[]][] = [];
    for (const id of this.p.s.replicas.byId.keys()) {
      const copies = this.p.book.copies(id);
      if (copies.some((c) => c.desired.spec.node === this.host)) out.push([id, copies]);
    }
    return out.sort(([a], [b]) => (a < b ? -1 : 1));
  }

  /** The replica must still leave the node by moving (not global, not stateful, not suspended). */
  private movable(copy: Copy): boolean {
    const t = copy.desired.spec.template;
    return placementMode(t) !== 'global' && !isJob(t) && !isStateful(t) && !copy.desired.spec.suspended;
  }

  run(): { status: NodeDrainStatus; audit: AuditRecord[]; extraOps: Op[] } {
    const replicas = this.onNode();
    this.findAbort(replicas);
    for (const [id, copies] of replicas) this.replica(id, copies);
    this.settleDeparted(new Set(replicas.map(([id]) => id)));
    return this.status();
  }

  /** A drain aborts when one of its moves timed out, or a replica it could not move is past its deadline. */
  private findAbort(replicas: [string, readonly Copy[]][]): void {
    for (const [id, copies] of replicas) {
      const step = this.p.steps.get(id);
      if (step?.src === this.host && step.reason === 'move_timeout') {
        this.abort = { replica: id, cause: 'move_timeout' };
        return;
      }
      const here = copies.find((c) => c.desired.spec.node === this.host)!;
      const deadline = this.states[id]?.deadline;
      if (!step && !inFlight(copies) && this.movable(here) && deadline && this.p.now >= Date.parse(deadline)) {
        this.abort = { replica: id, cause: this.states[id]?.reason ?? 'move_timeout' };
        return;
      }
    }
  }

  private replica(id: string, copies: readonly Copy[]): void {
    const here = copies.find((c) => c.desired.spec.node === this.host)!;
    const step = this.p.steps.get(id);
    const moving = inFlight(copies);
    if (inboundTo(this.host, here)) {
      this.set(id, 'pending', 'inbound_move');
      return this.p.note(this.host, id, `a move onto ${this.host} (by ${here.desired.spec.move!.by}) finishes first`);
    }
    if (step && step.src === this.host) {
      this.work++;
      if (step.outcome === 'completed') return this.set(id, 'done', undefined, step.dst);
      if (step.outcome === 'cutover') return this.set(id, 'moving', undefined, step.dst);
      this.set(id, step.reason === 'move_timeout' ? 'blocked' : 'pending', step.reason);
      if (step.reason === 'dst_failed') this.failedOn(id, step.dst);
      return;
    }
    if (moving) {
      const marker = moving.desired.spec.move!;
      if (marker.by === 'drain' && marker.from === this.host) {
        if (this.abort) {
          this.work++;
          this.p.addStep(cancelMove(this.p.book, id, this.p.now)!);
          return this.set(id, 'pending', 'drain_aborted');
        }
        return this.set(id, 'moving', undefined, moving.desired.spec.node);
      }
      this.set(id, 'pending', 'move_in_flight');
      return this.p.note(this.host, id, `moving to ${moving.desired.spec.node} by ${marker.by}; it finishes first`);
    }
    if (this.abort) {
      // An aborting drain starts nothing new; the replica that timed out shows why.
      if (this.abort.replica === id) this.set(id, 'blocked', this.abort.cause);
      return;
    }
    const t = here.desired.spec.template;
    if (placementMode(t) === 'global') return this.drop(id, here, 'global_replica');
    // A job is never moved (a move waits for "running and healthy", and a job ends): a run under
    // way finishes here, then its replica goes; the scheduler places it elsewhere only if the job
    // has no result yet at its spec (controllers/scheduler/job.ts).
    if (isJob(t)) {
      if (!replicaRunning(here.observed)) return this.drop(id, here, 'job_replica');
      this.set(id, 'pending', 'job_running');
      return this.p.note(this.host, id, 'a job run under way finishes first');
    }
    if (here.desired.spec.suspended) return this.set(id, 'stopped', here.desired.spec.suspended.reason as DrainReplicaReason);
    if (isStateful(t)) {
      if (!this.spec.force) {
        this.set(id, 'blocked', 'stateful_replica');
        return this.p.note(this.host, id, 'stateful: waits for --force');
      }
      return this.suspend(id, here);
    }
    this.move(id, here);
  }

  // Dropping and stopping change a desired replica like any other act: each is recorded in its own
  // transaction (they had no record; the simulation's workload has neither global nor stateful
  // services, so its "every act has its audit record" never saw them).
  private drop(id: string, here: Copy, reason: 'global_replica' | 'job_replica'): void {
    this.work++;
    const sp = here.desired.spec;
    const audit: AuditRecord[] = [{ type: 'drain_replica_dropped', time: this.p.now, deployment: sp.deployment, payload: { replica: id, deployment: sp.deployment, service: sp.service, node: this.host, reason } }];
    this.p.acts.push({ label: `drop ${id} from ${this.host}`, ops: [{ op: 'delete', key: here.key, modRevision: here.modRevision }], audit, metrics: [] });
    this.set(id, 'dropped', reason);
  }

  private suspend(id: string, here: Copy): void {
    this.work++;
    const sp = here.desired.spec;
    const value: ReplicaDesired = { ...here.desired, spec: { ...sp, suspended: { reason: SUSPEND_REASON, at: iso(this.p.now) } } };
    const audit: AuditRecord[] = [{ type: 'drain_replica_stopped', time: this.p.now, deployment: sp.deployment, payload: { replica: id, deployment: sp.deployment, service: sp.service, node: this.host, reason: SUSPEND_REASON } }];
    this.p.acts.push({ label: `stop ${id} on ${this.host}`, ops: [{ op: 'update', key: here.key, value, modRevision: here.modRevision }], audit, metrics: [] });
    this.set(id, 'stopped', SUSPEND_REASON);
  }

  /** Picks a destination with the scheduler's placement core and starts a make-before-break move. */
  private move(id: string, here: Copy): void {
    const sp = here.desired.spec;
    // The budget first: no destination is worth computing for a replica that may not move yet.
    const over = budgetRefusal(this.p.book, id);
    if (over) {
      this.set(id, 'pending', over.refusal);
      return this.p.note(this.host, id, over.detail);
    }
    const deadline = this.states[id]?.deadline ?? iso(this.p.now + this.timeoutMs);
    // Not where a copy of it already failed in this drain: a crash-looping image or a clash on one
    // node tries each other node once, then waits blocked (and aborts at the deadline), not churning.
    const failedOn = this.states[id]?.failedOn ?? [];
    const d = this.p.placer.place({ replica: id, deployment: sp.deployment, service: sp.service, spec: this.p.book.shape(sp), index: sp.index, exclude: [this.host, ...failedOn] });
    if (!d.chosen) {
      this.set(id, 'blocked', failedOn.length ? 'dst_failed' : d.reason, undefined, deadline);
      return this.p.note(this.host, id, failedOn.length ? `its copy failed on ${failedOn.join(', ')}; ${d.why}` : d.why);
    }
    const moveId = `drain-${this.host}-${id}-${this.p.now}`;
    const r = startMove(this.p.book, {
      replica: id,
      src: this.host,
      dst: d.chosen,
      by: 'drain',
      id: moveId,
      now: this.p.now,
      timeoutMs: Math.max(1, Date.parse(deadline) - this.p.now),
      sourceLeaving: true,
      decision: { verdicts: d, why: `drained off ${this.host}: ${d.why}` },
    });
    if (!r.ok) {
      this.p.placer.forget(id, d.chosen);
      // A move no request can carry never will: blocked, and past the deadline the drain aborts
      // saying so (not a timeout of a move that never started). Other refusals pass with waiting.
      if (r.refusal === 'too_large') this.set(id, 'blocked', r.refusal, undefined, deadline);
      else this.set(id, 'pending', r.refusal);
      return this.p.note(this.host, id, r.detail);
    }
    this.work++;
    this.p.book.assume(id, r);
    // The move's start is a decision like any other: recorded in its own transaction (the cutover is
    // the second half of the move, recorded by its start and its end).
    const audit: AuditRecord[] = [
      { type: 'drain_move_started', time: this.p.now, deployment: sp.deployment, payload: { replica: id, deployment: sp.deployment, service: sp.service, src: this.host, dst: d.chosen, by: 'drain', moveId } },
    ];
    this.p.acts.push({ label: `move ${id} ${this.host}→${d.chosen}: start`, ops: r.ops, audit, metrics: [] });
    this.set(id, 'moving', undefined, d.chosen, deadline);
  }

  /** Replicas the status lists that are no longer on the node: moving still, moved, or gone altogether. */
  private settleDeparted(present: Set<string>): void {
    for (const [id, st] of Object.entries(this.states)) {
      if (present.has(id) || st.state === 'done' || st.state === 'dropped') continue;
      const step = this.p.steps.get(id);
      if (step?.src === this.host && step.outcome === 'completed') {
        this.work++;
        this.set(id, 'done', undefined, step.dst);
        continue;
      }
      const elsewhere = this.p.book.copies(id);
      const cut = inFlight(elsewhere)?.desired.spec.move;
      // Cut over but not complete: its container on this node is still stopping.
      if (cut?.from === this.host) this.set(id, 'moving', undefined, inFlight(elsewhere)!.desired.spec.node);
      else if (elsewhere.length) this.set(id, 'done', undefined, elsewhere[0]!.desired.spec.node);
      else this.set(id, 'dropped', 'replica_removed');
    }
  }

  /**
   * What the node's agent still reports that should be gone: containers of replicas that left the
   * node, and suspended ones not yet stopped. A drain completes on observed state, not on desired.
   */
  private stillRunning(): string[] {
    const out: string[] = [];
    for (const [replica, o] of this.p.s.replicas.observedOn(this.host)) {
      const here = this.p.book.copies(replica).find((c) => c.desired.spec.node === this.host);
      if (!here || (here.desired.spec.suspended && o.value.status.state !== 'stopped')) out.push(replica);
    }
    return out.sort();
  }

  private status(): { status: NodeDrainStatus; audit: AuditRecord[]; extraOps: Op[] } {
    const old = this.drain.value.status;
    const now = this.p.now;
    const audit: AuditRecord[] = [];
    const extraOps: Op[] = [];
    const base: NodeDrainStatus = { state: 'draining', startedAt: old?.startedAt ?? iso(now), replicas: this.states };
    if (!old || old.state === 'pending') {
      const n = Object.keys(this.states).length;
      audit.push({ type: 'drain_started', time: now, payload: { node: this.host, replicas: n, timeout: this.spec.timeout, force: this.spec.force, remove: this.spec.remove } });
    }
    if (this.abort) {
      const reason: DrainAbortReason = 'drain_timeout';
      audit.push({ type: 'drain_aborted', time: now, payload: { node: this.host, reason, replica: this.abort.replica, cause: this.abort.cause, ...this.counts() } });
      return { status: { ...base, state: 'aborted', reason, finishedAt: iso(now) }, audit, extraOps };
    }
    // Finish only in a pass that found nothing left to do (the previous pass's writes have landed)
    // and once the node's agent reports every container that left it gone. A NotReady node cannot
    // report: its drain finishes with what it could not confirm.
    const settledAll = old?.state === 'draining' && this.work === 0 && Object.values(this.states).every(settled);
    const running = settledAll ? this.stillRunning() : [];
    const ready = this.p.nodeReady(this.host);
    if (!settledAll || (running.length && ready)) {
      if (running.length) {
        base.stopping = running;
        this.p.note(this.host, running[0]!, `waiting for the agent of ${this.host} to report ${running.length} container(s) gone`);
      }
      return { status: base, audit, extraOps };
    }
    if (running.length) base.unconfirmed = running;
    extraOps.push(...this.keptCopies());
    const took = formatDuration(now - Date.parse(base.startedAt!));
    audit.push({ type: 'drain_completed', time: now, payload: { node: this.host, duration: took, remove: this.spec.remove, ...this.counts() } });
    if (!this.spec.remove) return { status: { ...base, state: 'completed', finishedAt: iso(now) }, audit, extraOps };
    // The node object, what operators decided about it and its heartbeat go whatever they hold now:
    // the drain decided the node leaves (one that rejoins starts uncordoned, as a new node).
    extraOps.push({ op: 'delete', key: keys.node(this.host) }, { op: 'delete', key: keys.nodeSpec(this.host) }, { op: 'delete', key: keys.heartbeat(this.host) });
    audit.push({ type: 'node_removed', time: now, payload: { node: this.host, ...this.counts() } });
    return { status: { ...base, state: 'removed', finishedAt: iso(now) }, audit, extraOps };
  }

  /**
   * The evidence a completion compares: the desired key of every copy left on the node (the
   * replicas --force stopped, whose stopped containers may stay) at the revision judged. One
   * removed or resumed since (a scale-down, an uncordon landing between the decision and its
   * commit) has a container to go or to run: the completion is refused and decided again — the
   * breadth simulation, seed 4453, completed a drain while the agent still reported the container of
   * a stopped replica that a scale-down had just removed.
   */
  private keptCopies(): Op[] {
    const ops: Op[] = [];
    for (const e of this.p.s.replicas.onNode(this.host)) for (const c of e.copies) if (c.desired.spec.node === this.host) ops.push({ op: 'check', key: c.key, modRevision: c.modRevision });
    return ops;
  }

  private counts(): { moved: number; dropped: number; stopped: number } {
    const v = Object.values(this.states);
    return { moved: v.filter((s) => s.state === 'done').length, dropped: v.filter((s) => s.state === 'dropped').length, stopped: v.filter((s) => s.state === 'stopped').length };
  }
}

/** The drain's status changed in anything but the order of its keys. */
function statusChanged(a: NodeDrainStatus | undefined, b: NodeDrainStatus): boolean {
  return canonicalJson(a ?? null) !== canonicalJson(b);
}

/**
 * Resumes replicas a forced drain stopped once their node takes placements again (uncordoned, no
 * drain in progress): their data is there, and nothing else will ever start them.
 */
function resumeSuspended(p: Pass): void {
  const drains = new Map(p.s.drains.map((d) => [d.value.spec.node, d.value]));
  const suspended = suspendedCopies(p.s.replicas);
  for (const d of suspended) {
    const sp = d.desired.spec;
    if (!sp.suspended) continue;
    const node = p.s.nodes.get(sp.node)?.value;
    if (!node || node.spec?.unschedulable || drainActive(drains.get(sp.node))) continue;
    const { suspended: _s, ...rest } = sp;
    p.acts.push({
      label: `resume ${sp.replica} on ${sp.node}`,
      ops: [{ op: 'update', key: d.key, value: { ...d.desired, spec: rest }, modRevision: d.modRevision }],
      audit: [{ type: 'replica_resumed', time: p.now, deployment: sp.deployment, payload: { replica: sp.replica, deployment: sp.deployment, service: sp.service, node: sp.node, suspendedAt: sp.suspended.at } }],
      metrics: [],
    });
  }
}

/**
 * A removed node that registered again (its agent started with --rejoin) is back in the cluster:
 * its removed drain would otherwise keep it unschedulable forever. The node must have been created
 * after the removal, so a node object the informers still hold from before it is never mistaken.
 */
function retireRejoined(p: Pass): void {
  for (const d of p.s.drains) {
    if (d.value.status?.state !== 'removed') continue;
    const node = p.s.nodes.get(d.value.spec.node);
    if (node && node.createRevision > d.modRevision)
      p.acts.push({ label: `retire drain ${d.value.spec.node}: node rejoined`, ops: [{ op: 'delete', key: d.key, modRevision: d.modRevision }], audit: [], metrics: [] });
  }
}

/** Copies stopped by a forced drain, by key. */
function suspendedCopies(replicas: ReplicaIndex): Copy[] {
  const out: Copy[] = [];
  for (const e of replicas.byId.values()) for (const c of e.copies) if (c.desired.spec.suspended?.reason === SUSPEND_REASON) out.push(c);
  return out.sort((a, b) => (a.key < b.key ? -1 : 1));
}

export function decide(s: DrainSnapshot, now: number, config: DrainConfig): DrainDecision {
  const active = s.drains.filter((d) => inProgress(d.value)).sort((a, b) => (a.value.spec.node < b.value.spec.node ? -1 : 1));
  const drainMoves = [...s.replicas.moving].some((id) => inFlight(s.replicas.byId.get(id)?.copies ?? [])?.desired.spec.move?.by === 'drain');
  const suspended = suspendedCopies(s.replicas).length > 0;
  const removed = s.drains.some((d) => d.value.status?.state === 'removed');
  // Nothing drains, nothing is moving, nothing waits to resume: the common case costs nothing.
  if (!active.length && !drainMoves && !suspended && !removed) return { acts: [], inProgress: 0, notes: [] };

  const p = new Pass(s, now, config);
  // Due moves first: a completed or abandoned move changes what each drain sees.
  p.advance();
  const drainedHosts = new Set<string>();
  let still = 0;
  let wakeAt = moveWakeAt(p.book, 'drain');
  for (const drain of active) {
    const dp = new DrainPass(p, drain);
    drainedHosts.add(dp.host);
    const { status, audit, extraOps } = dp.run();
    if (status.state === 'draining') {
      still++;
      for (const r of Object.values(status.replicas)) if (r.deadline && !settled(r)) wakeAt = Math.min(wakeAt ?? Infinity, Date.parse(r.deadline));
    }
    if (!statusChanged(drain.value.status, status) && !audit.length && !extraOps.length) continue;
    const value: NodeDrain = { ...drain.value, status };
    p.acts.push({
      label: `drain ${dp.host}: ${status.state}`,
      ops: [{ op: 'update', key: drain.key, value, modRevision: drain.modRevision }, ...extraOps],
      audit,
      metrics: [],
    });
  }
  // A drain move whose drain is no longer in progress (aborted, cancelled) is withdrawn.
  const orphans: string[] = [];
  for (const id of p.book.moving()) {
    const m = inFlight(p.book.copies(id))?.desired.spec.move;
    if (m?.by === 'drain' && !m.cutoverAt && !drainedHosts.has(m.from) && !p.steps.has(id)) orphans.push(id);
  }
  for (const id of orphans.sort()) p.addStep(cancelMove(p.book, id, now)!);
  retireRejoined(p);
  resumeSuspended(p);
  return { acts: p.acts, inProgress: still, wakeAt, notes: p.notes };
}
