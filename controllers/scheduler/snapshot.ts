// The scheduler's snapshot of the process's cache, and its only leader-local memory: since when
// each node has been NotReady, which a new term starts afresh, so a node is never declared lost on a
// stale memory. Apart from the controller (controller.ts) so a CLI that previews placements
// (src/app/placement-preview.ts) reads as the scheduler does without loading its metrics.
import type {
  Deployment,
  DeploymentRevision,
  DeploymentStatus,
  Endpoints,
  Heartbeat,
  NodeDrain,
  PlacementDecision,
  ReplicaCommand,
  ReplicaCounter,
  RolloutPlan,
  VolumeHome,
} from '../../src/api/types.js';
import { byRest, frozenKeys, valuesByRest, type Cache } from '../../src/runtime/cache.js';
import { LAST_READY } from '../../src/runtime/heartbeats.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import { nodeValuesOf } from '../../src/runtime/nodes.js';
import type { PassInput } from '../../src/runtime/runner.js';
import { eligibilityRevisions, networkViewOf, nodeSettingsOf } from '../placement/input.js';
import { trackNotReady } from './node-loss.js';
import type { SchedulerSnapshot } from './plan.js';

export const SCHEDULER_READS = [
  'deployments',
  'revisions',
  'rollouts',
  'nodes',
  'nodespecs',
  'heartbeats',
  'drains',
  'desired',
  'observed',
  'commands',
  'counters',
  'volumes',
  'endpoints',
  'decisions',
  'statuses',
  'network',
  'subnets',
  'addresses',
  'serviceAddresses',
  'nodeSettings',
] as const;

export interface SchedulerState {
  /** Since when (ms) each NotReady node has been seen NotReady in this term. */
  notReadySince: ReadonlyMap<string, number>;
  /** The node's last Ready heartbeat revision each of those clocks judged (trackNotReady; absent: none yet). */
  notReadyJudged?: ReadonlyMap<string, number>;
  /** The NotReady clocks the term's first pass started, while they run (absent: this is the first pass). */
  failoverClocks?: ReadonlyMap<string, number>;
}

/** The scheduler's snapshot of the cache (the state's NotReady clocks advanced to `now`). */
export function schedulerSnapshot(input: PassInput, state: SchedulerState, now: number): SchedulerSnapshot {
  const { cache } = input;
  const nodes = nodeValuesOf(cache);
  const hbs = cache.kind<Heartbeat>('heartbeats');
  const heartbeats = valuesByRest(hbs);
  const notReadySince = new Map(state.notReadySince);
  const heartbeatRevisions = new Map([...hbs.items.values()].map((v) => [hbs.rest(v.key), v.modRevision]));
  // Hosts with desired copies but no node key need a clock too: absent without a removal recorded
  // is a node the store lost, NotReady like one (api/nodes.ts nodeRemoved).
  const lastReady = cache.index(LAST_READY);
  const replicas = cache.index(REPLICAS);
  trackNotReady(notReadySince, new Map(state.notReadyJudged), [...nodes.keys(), ...frozenKeys(cache.kind('nodes')), ...replicas.desiredNodes()], heartbeats, lastReady, now);
  return {
    deployments: byRest(cache.kind<Deployment>('deployments')),
    frozenDeployments: frozenKeys(cache.kind('deployments')),
    revisions: new Map([...cache.kind<DeploymentRevision>('revisions').items].map(([k, v]) => [k, v.value])),
    rollouts: valuesByRest(cache.kind<RolloutPlan>('rollouts')),
    nodes,
    frozenNodes: frozenKeys(cache.kind('nodes')),
    eligibility: eligibilityRevisions(cache),
    heartbeats,
    heartbeatRevisions,
    lastReady: new Map(lastReady),
    drains: valuesByRest(cache.kind<NodeDrain>('drains')),
    replicas,
    commands: cache.kind<ReplicaCommand>('commands').items,
    counters: byRest(cache.kind<ReplicaCounter>('counters')),
    volumeHomes: byRest(cache.kind<VolumeHome>('volumes')),
    endpoints: byRest(cache.kind<Endpoints>('endpoints')),
    decisions: cache.kind<PlacementDecision>('decisions').items,
    statuses: byRest(cache.kind<DeploymentStatus>('statuses')),
    network: networkViewOf(cache),
    settings: nodeSettingsOf(cache),
    notReadySince,
    failoverClocks: failoverClocks(state.failoverClocks, notReadySince),
    failing: input.failing,
  };
}

/**
 * The clocks of nodes already NotReady when the term began: on its first pass every running clock,
 * then those still running from the same start (a node seen Ready since has lost its place).
 */
function failoverClocks(prev: ReadonlyMap<string, number> | undefined, notReadySince: ReadonlyMap<string, number>): ReadonlyMap<string, number> {
  if (!prev) return new Map(notReadySince);
  return new Map([...prev].filter(([h, since]) => notReadySince.get(h) === since));
}

/** Reads the cache a scheduler would (for `jaco explain`-style tools and tests). */
export function schedulerSnapshotOf(cache: Cache, now: number): SchedulerSnapshot {
  return schedulerSnapshot({ cache, failing: [] }, { notReadySince: new Map() }, now);
}
