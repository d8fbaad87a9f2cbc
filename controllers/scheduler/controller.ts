// The scheduler on the shared runtime: its snapshot (read from the process's cache), its pure core
// (decide.ts) and its only leader-local memory — since when each node has been NotReady, which a
// new term starts afresh, so a node is never declared lost on a stale memory.
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
import { allSteps } from '../../src/runtime/steps.js';
import { LAST_READY } from '../../src/runtime/heartbeats.js';
import { REPLICAS } from '../../src/runtime/replicas.js';
import { nodeValuesOf } from '../../src/runtime/nodes.js';
import type { ControllerSpec, PassInput, PassResult } from '../../src/runtime/runner.js';
import type { Timings } from '../../src/timings.js';
import { eligibilityRevisions, networkViewOf, nodeSettingsOf } from '../placement/input.js';
import { decideSteps } from './decide.js';
import { trackNotReady } from './node-loss.js';
import { schedulerConfig, type ActMetrics, type SchedulerAct, type SchedulerConfig, type SchedulerPlan, type SchedulerSnapshot } from './plan.js';
import { countLanded, schedulerMetrics, setUnschedulable } from './metrics.js';

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

export interface SchedulerOptions {
  config?: SchedulerConfig;
}

/** The scheduler as the runtime runs it (`jaco controller scheduler|all`). */
export function schedulerController(timings: Timings, opts: SchedulerOptions = {}): ControllerSpec<SchedulerState, SchedulerSnapshot, ActMetrics, SchedulerPlan> {
  const config = opts.config ?? schedulerConfig(timings);
  function* steps(_state: SchedulerState, snap: SchedulerSnapshot, now: number): Generator<readonly SchedulerAct[], SchedulerPlan & Pick<PassResult<SchedulerState>, 'next'>, void> {
    // The decide's own time, without the writes the runner sends between its steps.
    let busy = 0;
    const plan = decideSteps(snap, now, config);
    for (;;) {
      const t = performance.now();
      const s = plan.next();
      busy += performance.now() - t;
      if (!s.done) {
        yield s.value;
        continue;
      }
      schedulerMetrics.reconcileDuration.observe(busy / 1000);
      // Every clock judged the heartbeat this snapshot holds (trackNotReady restarts the others).
      return { ...s.value, next: () => ({ notReadySince: snap.notReadySince, failoverClocks: snap.failoverClocks, notReadyJudged: new Map([...snap.notReadySince.keys()].map((h) => [h, snap.lastReady.get(h) ?? 0])) }) };
    }
  }
  return {
    name: 'scheduler',
    reads: SCHEDULER_READS,
    initialState: () => ({ notReadySince: new Map() }),
    snapshot: schedulerSnapshot,
    decide: (state, snap, now) => allSteps(steps(state, snap, now)),
    // Service by service: a pass placing thousands of replicas writes while it decides.
    decideSteps: steps,
    countMetric: countLanded,
    afterPass: (_state, plan) => setUnschedulable(plan.unschedulable),
    leadershipChanged: (leading) => leading || setUnschedulable({}),
  };
}

/** Reads the cache a scheduler would (for `jaco explain`-style tools and tests). */
export function schedulerSnapshotOf(cache: Cache, now: number): SchedulerSnapshot {
  return schedulerSnapshot({ cache, failing: [] }, { notReadySince: new Map() }, now);
}
