// What one scheduler pass reads, how it is configured, and what it returns: the snapshot (the
// scheduler's view of the cache, controller.ts builds it), the config, and the plan — named buckets
// each item with its reason, and the acts that carry them out. Types only, imported by every job of
// a pass and by the orchestrator (decide.ts) alike, so no job imports the orchestrator back.
import type { NodeSettingsResolved } from '../../src/api/eligibility.js';
import type { PlaceTrigger, RemoveReason, RestartCause, UnschedulableReason } from '../../src/api/reasons/scheduling.js';
import type {
  Deployment,
  DeploymentRevision,
  DeploymentStatus,
  EndpointAddress,
  Endpoints,
  Heartbeat,
  Node,
  NodeDrain,
  ReplicaCommand,
  ReplicaCommandStatus,
  ReplicaCounter,
  RolloutPlan,
  ServiceSchedulingStatus,
  VolumeHome,
} from '../../src/api/types.js';
import type { Act, ActFailure } from '../../src/runtime/acts.js';
import type { ReplicaIndex } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Timings } from '../../src/timings.js';
import type { Op } from '../../src/store/writer.js';
import type { NetworkView } from '../placement/ipam.js';
import type { EligibilityRevisions } from '../placement/input.js';
import { DEFAULT_PLACEMENT_CONFIG, type PlacementConfig } from '../placement/placer.js';
import { MAX_CONSECUTIVE_RESTARTS, type RestartPolicy } from './restarts.js';

/** Everything decide reads: the scheduler's view of the cache (controller.ts builds it). */
export interface SchedulerSnapshot {
  /** By deployment name. */
  deployments: ReadonlyMap<string, Versioned<Deployment>>;
  /** Deployments whose key exists but cannot be read (and never could): present, frozen. */
  frozenDeployments: ReadonlySet<string>;
  /** By key (keys.revision(name, n)). */
  revisions: ReadonlyMap<string, DeploymentRevision>;
  /** By `<deployment>/<service>`. */
  rollouts: ReadonlyMap<string, RolloutPlan>;
  /** By node name. */
  nodes: ReadonlyMap<string, Node>;
  /** Nodes whose key exists but cannot be read: neither gone nor schedulable. */
  frozenNodes: ReadonlySet<string>;
  /** Mod revisions of the node and drain keys (an act placing on a node compares them). */
  eligibility: EligibilityRevisions;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  /**
   * Mod revisions of the heartbeat keys, by node (absent: no heartbeat). A re-placement off a lost
   * node compares its node's: one judged from a cache that lags, or missed the node's heartbeats,
   * is refused instead of moving replicas off a node that is alive.
   */
  heartbeatRevisions: ReadonlyMap<string, number>;
  /** By host: the revision of the newest Ready heartbeat seen (LAST_READY), what each NotReady clock judged. */
  lastReady: ReadonlyMap<string, number>;
  drains: ReadonlyMap<string, NodeDrain>;
  /** Every replica with its copies and what their agents observe (the shared index). */
  replicas: ReplicaIndex;
  /** By store key (commands/<host>/<replica>). */
  commands: ReadonlyMap<string, Versioned<ReplicaCommand>>;
  /** By `<deployment>/<service>`. */
  counters: ReadonlyMap<string, Versioned<ReplicaCounter>>;
  /** By `<deployment>/<volume>`. */
  volumeHomes: ReadonlyMap<string, Versioned<VolumeHome>>;
  /** By `<deployment>/<service>`. */
  endpoints: ReadonlyMap<string, Versioned<Endpoints>>;
  /** By store key (decisions/<deployment>/<replica>); their values are not needed. */
  decisions: ReadonlyMap<string, { key: string; modRevision: number }>;
  /** By deployment name. */
  statuses: ReadonlyMap<string, Versioned<DeploymentStatus>>;
  /** The cluster network: its ranges, each node's subnets, the addresses claimed (IPAM). */
  network: NetworkView;
  /** The cluster's node-eligibility settings (degraded nodes, default scratch disk; config/nodes). */
  settings?: NodeSettingsResolved;
  /** Leader-local: since when (ms) each NotReady node has been seen NotReady. */
  notReadySince: ReadonlyMap<string, number>;
  /**
   * Leader-local: the NotReady clocks this term's first pass started (host → since), while they run.
   * Such a node has the failover grace.
   */
  failoverClocks: ReadonlyMap<string, number>;
  /** The scheduler's acts that keep failing (reported in their deployment's status). */
  failing: readonly ActFailure[];
}

export interface SchedulerConfig {
  placement: PlacementConfig;
  /** A node NotReady this long is lost: its stateless replicas are re-placed. */
  nodeLostGraceMs: number;
  /** The grace of a node already NotReady when the term began (Timings.nodeLostFailoverGraceMs). */
  nodeLostFailoverGraceMs: number;
  restart: RestartPolicy;
  /** Written into decisions and audit records. */
  actor: string;
}

export function schedulerConfig(t: Pick<Timings, 'nodeLostGraceMs' | 'nodeLostFailoverGraceMs' | 'restartBackoffMs'>, placement: PlacementConfig = DEFAULT_PLACEMENT_CONFIG): SchedulerConfig {
  return { placement, nodeLostGraceMs: t.nodeLostGraceMs, nodeLostFailoverGraceMs: t.nodeLostFailoverGraceMs, restart: { backoffMs: t.restartBackoffMs, maxRestarts: MAX_CONSECUTIVE_RESTARTS }, actor: 'scheduler' };
}

// ---------------------------------------------------------------- the plan

export interface PlaceItem {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  index?: number;
  trigger: PlaceTrigger;
  why: string;
}

export interface StopItem {
  replica: string;
  deployment: string;
  service: string;
  /** Every node with a copy (two while a move is in flight). */
  nodes: string[];
  reason: RemoveReason;
}

export interface ReplaceItem {
  replica: string;
  deployment: string;
  service: string;
  from: string[];
  to: string;
  notReadyForMs: number;
  why: string;
}

export interface RestartItem {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  cause: RestartCause;
  /** Consecutive restarts including this one. */
  restarts: number;
  seq: number;
}

export interface CommandStatusItem {
  replica: string;
  node: string;
  kind: 'exhaust' | 'recover' | 'reset';
  status: ReplicaCommandStatus;
}

export interface ServiceNote {
  deployment: string;
  service: string;
  note: string;
}

export interface CleanupItem {
  key: string;
  why: string;
}

export interface ActMetrics {
  placements?: { trigger: PlaceTrigger; count: number };
  restarts?: { deployment: string; service: string };
}

export interface SchedulerAct extends Act<ActMetrics> {
  audit: AuditRecord[];
}

export interface SchedulerPlan {
  place: PlaceItem[];
  stop: StopItem[];
  replaceLost: ReplaceItem[];
  restart: RestartItem[];
  commandStatus: CommandStatusItem[];
  /**
   * Stateful replicas left on lost nodes (status node_lost), each with the evidence of loss its
   * first report compares (node-loss.ts lossGuard): a report judged from a cache that lags is refused.
   */
  stranded: { replica: string; node: string; guard: Op[] }[];
  /** Per deployment, the scheduling status this pass leaves (written only when it changed). */
  status: Map<string, Record<string, ServiceSchedulingStatus>>;
  /** Endpoints that changed (written this pass). */
  endpoints: { deployment: string; service: string; addresses: EndpointAddress[] }[];
  cleanup: CleanupItem[];
  /** Replicas of a service not placed this pass for a reason other than being unschedulable. */
  waiting: ServiceNote[];
  /** Unschedulable replicas by reason, all services (the gauge). */
  unschedulable: Partial<Record<UnschedulableReason, number>>;
  acts: SchedulerAct[];
  /** The earliest time a pass could decide something new without any event. */
  wakeAt?: number;
}
