// What one rebalancer cycle reads and returns: the leader-local state, the snapshot (snapshot.ts
// builds it from the cache), what the planners want (move intents) and the plan `jaco rebalance
// plan` prints, with every planner's view. Types only, imported by the planners, the arbiter and
// the orchestrator (decide.ts) alike, so no part of the cycle imports the orchestrator back.
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { Gate, NoPlanReason, NoPreemptReason, SkipReason, Exclusion } from '../../src/api/reasons/rebalance.js';
import type { UnschedulableReason } from '../../src/api/reasons/scheduling.js';
import type { DisruptionLedger, Heartbeat, HoleFor, Node, NodeDrain, PressureSample, ReplicaCommand, ServiceSpec, VolumeHome } from '../../src/api/types.js';
import type { Act } from '../../src/runtime/acts.js';
import type { ReplicaIndex } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import type { MoveOutcome, MoveRefusal } from '../moves/move.js';
import type { NetworkView } from '../placement/ipam.js';
import type { EligibilityRevisions } from '../placement/input.js';
import type { Decision, Placer } from '../placement/placer.js';
import type { Config } from './config.js';
import type { Dimension, NodeEwma } from './pressure.js';
import type { ReliefSource } from './scorer.js';


/** What the audit log last recorded for a key: a candidate's skip, or why a pending service gets no help. */
export type AuditedReason = SkipReason | NoPlanReason | NoPreemptReason;

export interface NodeState {
  ewma: NodeEwma;
  /** Consecutive cycles at or over the trigger (reset by a cycle under it or without a sample). */
  over: number;
}

export interface RebalancerState {
  cycles: number;
  /** When the last counted cycle ran; passes closer than half a cycle re-evaluate it. */
  lastCycleAt?: number;
  nodes: ReadonlyMap<string, NodeState>;
  /** Node → when it last received a move (node cooldown). */
  received: ReadonlyMap<string, number>;
  /** Skip key → the reason last recorded in the audit log, and when (no flooding). */
  audited: ReadonlyMap<string, { reason: AuditedReason; at: number }>;
  /** Pending service (`<deployment>/<service>`) → when this leader first saw it unschedulable for capacity. */
  pendingSince?: ReadonlyMap<string, number>;
  /** Set on a state rebuilt outside the leader: counters and cooldowns are assumptions. */
  seeded?: boolean;
}

/** What the cycle reads: the cache's view (snapshot.ts builds it) and the fresh pressure samples. */
export interface Snapshot {
  /** Fresh samples by node (PressureSource.samples()). */
  samples: ReadonlyMap<string, PressureSample>;
  nodes: readonly Node[];
  heartbeats: ReadonlyMap<string, Heartbeat>;
  drains: ReadonlyMap<string, NodeDrain>;
  /** Every replica with its copies and what their agents observe. */
  replicas: ReplicaIndex;
  /** Disruption ledgers by `<deployment>/<service>`. */
  ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>;
  /** Restart commands by store key (the disruption budget counts pending ones). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  volumeHomes: readonly VolumeHome[];
  /** Mod revisions of the node and drain keys (a move start compares its destination's). */
  eligibility: EligibilityRevisions;
  /** Services the scheduler cannot place for capacity (memory, GPUs, ports): coalescing's work. */
  pending?: readonly Omit<PendingService, 'since'>[];
  /** Every service's current placement by `<deployment>/<service>` (the move book's: conformance and every move's placement). */
  placements?: ReadonlyMap<string, ServiceSpec['placement']>;
  /** Every service's current priority by `<deployment>/<service>` (preemption; templates may lag: priority is not in the spec hash). */
  priorities?: ReadonlyMap<string, number>;
  /** The cluster network: a moved cluster-network replica gets an address on its destination. */
  network?: NetworkView;
  /** Every deployment's generation (a change to it triggers new balancing: the ping-pong exclusion ends). */
  generations?: ReadonlyMap<string, number>;
  /** The placer, on first use: the cache's, kept between passes and patched from its changes (placement/kept.ts). */
  placer: () => Placer;
  /** The cluster's node-eligibility settings (degraded destinations, default scratch disk). */
  settings?: NodeSettingsResolved;
}

export interface NodeView {
  node: string;
  cpu: number;
  memory: number;
  pressure: number;
  dominant: Dimension;
  /** Consecutive cycles at or over the trigger. */
  over: number;
  sampleAt: string;
  /** Why it takes no moves (NotReady, cordoned, draining…), if so. */
  ineligible?: string;
  /** It received a move this long ago, within the node cooldown. */
  cooldownMs?: number;
}

export interface GateView {
  gate: Gate;
  /** null: not evaluated (an earlier gate has no data to evaluate it on). */
  holds: boolean | null;
  detail: string;
}

export type Verdict = 'move' | 'movable' | 'skipped' | 'refused';

export interface CandidateView {
  replica: string;
  deployment: string;
  service: string;
  verdict: Verdict;
  reason?: SkipReason;
  refusal?: MoveRefusal;
  detail: string;
  dominant: Dimension;
  relief: number;
  reliefSource: ReliefSource;
  score: number;
  srcBefore: number;
  srcAfter: number;
  dst?: string;
  dstBefore?: number;
  dstAfter?: number;
  /** For skips: whether this cycle writes an audit record (false: same reason recorded recently). */
  audited?: boolean;
  /** On small clusters: every destination's verdict, coolest first. */
  dsts?: { node: string; stage?: string; reason?: SkipReason; detail: string; after: number }[];
}

export interface ExcludedView {
  replica: string;
  reason: Exclusion;
  detail: string;
}

export interface MoveView {
  /** What asked for the move: a pressured node, a spread service's skew, or room for a pending replica. */
  trigger: 'pressure' | 'placement' | 'spread' | 'coalesce' | 'preempt';
  replica: string;
  deployment: string;
  service: string;
  src: string;
  dst: string;
  dominant: Dimension;
  relief: number;
  score: number;
  srcBefore: number;
  srcAfter: number;
  dstBefore: number;
  dstAfter: number;
  moveId: string;
}

export interface InFlightView {
  replica: string;
  src: string;
  dst: string;
  startedAt: string;
  deadline: string;
  /** What this cycle does with it, if anything. */
  outcome?: MoveOutcome;
}

export interface RebalancePlan {
  at: string;
  cycle: number;
  /** False when this pass re-evaluated the current cycle (or only explained it): counters did not advance. */
  countedCycle: boolean;
  thresholds: Pick<Config, 'trigger' | 'consecutiveCycles' | 'imbalanceGap' | 'reliefFloor' | 'dstCap' | 'dstFit' | 'moveCost'>;
  nodes: NodeView[];
  silent: { node: string; why: string }[];
  src?: string;
  gates: GateView[];
  /** The gate that stopped the cycle; 'none' when it chose a move. */
  stoppedBy: Gate;
  candidates: CandidateView[];
  excluded: ExcludedView[];
  move?: MoveView;
  /** Replicas on nodes their service's placement no longer allows, and what this cycle does about each. */
  placement: ConformView[];
  /** Spread services as this cycle judged their skew (only those with more than one replica on a node are worth a look). */
  spread: SpreadView[];
  /** Pending services and the plan that would make room for each (coalescing). */
  coalesce: CoalesceView[];
  /** Pending services coalescing could not serve, and the lower-priority replicas each would evict. */
  preempt: PreemptView[];
  inFlight: InFlightView[];
  /** Set on a plan recomputed outside the leader: what was assumed. */
  assumptions?: string[];
}

/** What landing an act means for leader-local state (applied by afterCommit). */
export type Effect =
  | { kind: 'move'; trigger: MoveView['trigger']; replica: string; src: string; dst: string }
  | { kind: 'skip'; key: string; reason: AuditedReason }
  /** A pending service the rescheduler can do nothing for, recorded (the metric counts it by trigger and reason). */
  | { kind: 'refusal'; key: string; trigger: 'coalesce' | 'preempt'; reason: NoPlanReason | NoPreemptReason }
  /** Replicas stopped for a higher-priority pending one (the metric counts them). */
  | { kind: 'preempt'; stopped: number };

export interface RebalanceAct extends Act {
  effect?: Effect;
}

export interface Cycle {
  state: RebalancerState;
  acts: RebalanceAct[];
  plan: RebalancePlan;
}

// ---------------------------------------------------------------- what planners want

export type Trigger = MoveView['trigger'];

/** What a planner wants: one replica from src to dst, and why. */
export interface MoveIntent {
  trigger: Trigger;
  replica: string;
  deployment: string;
  service: string;
  src: string;
  dst: string;
  /** The mover's reason, stored with the placer's verdicts as the replica's placement decision. */
  why: string;
  /** The placer's verdicts over the nodes for the replica (`jaco explain REPLICA`): worked out only for a move that starts. */
  verdicts?: () => Decision;
  /** A move that makes room for a pending service (kept on the marker, then on movedFrom). */
  forPending?: HoleFor;
  timeoutMs: number;
  /** The audit record's payload beside replica, src, dst, trigger and move id. */
  payload: Record<string, unknown>;
  /** The plan's view of the move (pressure: its scores; others: the nodes' pressures). */
  view?: Partial<MoveView>;
  /** Told back to the planner's view: started, held by the cadence, or refused by the move mechanism. */
  started?(): void;
  held(why: string): void;
  refused(refusal: MoveRefusal, detail: string): void;
}

// ---------------------------------------------------------------- the planners' views

export interface ConformView {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  /** What the node no longer satisfies. */
  broken: string;
  verdict: 'move' | 'held' | 'no_dst';
  detail: string;
  dst?: string;
}

export type SpreadVerdict = 'move' | 'even' | 'held';

/** One spread service as the cycle judged it (what `jaco rebalance plan` prints). */
export interface SpreadView {
  deployment: string;
  service: string;
  /** Replicas of the service per node that holds one or could take one. */
  counts: Record<string, number>;
  /** Most-loaded holder minus least-loaded node that could take a replica. */
  skew: number;
  verdict: SpreadVerdict;
  detail: string;
  replica?: string;
  src?: string;
  dst?: string;
}

/** A service with replicas the scheduler cannot place for capacity (from its deploymentstatus). */
export interface PendingService {
  deployment: string;
  service: string;
  /** The service spec, defaults applied (what a new replica would carry). */
  spec: ServiceSpec;
  reason: UnschedulableReason;
  count: number;
  /** When the rebalancer first saw it pending (leader-local). */
  since: number;
}

export interface CoalesceVictim {
  replica: string;
  deployment: string;
  service: string;
  from: string;
  to: string;
}

export interface CoalesceView {
  deployment: string;
  service: string;
  reason: UnschedulableReason;
  verdict: 'move' | 'held' | 'no_plan' | 'grace' | 'fits';
  detail: string;
  noPlan?: NoPlanReason;
  /** The node the hole is made on, and every move of the plan (the first starts this cycle). */
  node?: string;
  plan?: CoalesceVictim[];
  /** With no plan: what preemption by priority does instead (`jaco status` and `explain` show it with the verdict). */
  preempt?: PreemptView;
}

export interface PreemptVictim {
  replica: string;
  deployment: string;
  service: string;
  priority: number;
  node: string;
  /** Moved elsewhere (to `to`) or stopped where it is. */
  action: 'migrate' | 'stop';
  to?: string;
}

export interface PreemptView {
  deployment: string;
  service: string;
  priority: number;
  reason: UnschedulableReason;
  /** preempt: this cycle evicts (or the plan waits only for one move per cycle); held: waits its turn or its migrations; none: no plan. */
  verdict: 'preempt' | 'held' | 'none';
  noPreempt?: NoPreemptReason;
  node?: string;
  victims?: PreemptVictim[];
  detail: string;
}

/** Every stop of a plan, in one act with its audit records. */
export interface PreemptStop {
  victims: PreemptVictim[];
  ops: Op[];
  audit: AuditRecord[];
}

/**
 * What the served plan wants this cycle: its first migration (a move intent), or — once none is
 * left — every stop at once, or to wait for the migrations already under way. The arbiter lets it
 * act only when no other move started or is in flight (one disruption per cycle).
 */
export type PreemptWant = { view: PreemptView } & ({ migrate: MoveIntent } | { stop: () => PreemptStop } | { wait: string });

/** Where the leader serves its plan (`jaco rebalance plan`, the dashboard): on its metrics address. */
export const PLAN_PATH = '/rebalance/plan';

/** What the leader answers on GET /rebalance/plan. */
export interface PlanResponse {
  source: 'leader';
  identity: string;
  plan: RebalancePlan;
  /** The last counted cycle: when it ran and how it ended. */
  lastCycle?: { at: string; cycle: number; stoppedBy: string; move?: string };
}
