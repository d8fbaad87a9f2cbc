// The scheduler's shell: informers in, the pure core (decide.ts) in the middle, fenced CAS writes
// out through the shared Controller. It keeps the only leader-local state the scheduler has —
// since when each node has been NotReady — and wakes itself for back-offs, ready times and grace
// periods that end without any watch event.
import { informersFor } from '../../src/runtime/informers.js';
import type {
  Deployment,
  DeploymentRevision,
  DeploymentStatus,
  Endpoints,
  Heartbeat,
  Node,
  NodeDrain,
  PlacementDecision,
  ReplicaCommand,
  ReplicaCounter,
  ReplicaDesired,
  ReplicaObserved,
  RolloutPlan,
  VolumeHome,
} from '../../src/api/types.js';
import { Controller, type ControllerContext, type PlannedAct, type Reconciler } from '../../src/runtime/controller.js';
import type { Informer } from '../../src/store/informer.js';
import type { Versioned } from '../../src/store/store.js';
import type { CommitResult } from '../../src/store/writer.js';
import type { ControllerHandle } from '../index.js';
import { decide, schedulerConfig, trackNotReady, type ActMetrics, type SchedulerConfig, type SchedulerSnapshot } from './decide.js';
import { countLanded, schedulerMetrics, setUnschedulable } from './metrics.js';

export const SCHEDULER_INFORMERS = informersFor(
  'deployments',
  'revisions',
  'rollouts',
  'nodes',
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
);

type InformerName = keyof typeof SCHEDULER_INFORMERS;

export interface SchedulerOptions {
  /** Injected clock (tests). */
  clock?: () => number;
  /** Test seam: runs after decide and before the shell commits (e.g. to depose the leader mid-pass). */
  beforeCommit?: (acts: PlannedAct[]) => Promise<void>;
  config?: SchedulerConfig;
}

/**
 * observed/<host>/<replica> as node → replica → value, kept up to date from the informer's change
 * events, so a pass does not rebuild a map of every replica (and decide looks copies up without
 * building key strings).
 */
class ObservedByNode {
  readonly map = new Map<string, Map<string, ReplicaObserved>>();

  constructor(inf: Informer<ReplicaObserved>) {
    for (const [k, v] of inf.items) this.put(k, v.value);
    inf.on('change', (c) => (c.value ? this.put(c.key, c.value.value) : this.delete(c.key)));
  }

  private parts(key: string): [string, string] {
    const [, node, replica] = key.split('/');
    return [node!, replica!];
  }

  private put(key: string, v: ReplicaObserved): void {
    const [node, replica] = this.parts(key);
    let m = this.map.get(node);
    if (!m) this.map.set(node, (m = new Map()));
    m.set(replica, v);
  }

  private delete(key: string): void {
    const [node, replica] = this.parts(key);
    const m = this.map.get(node);
    m?.delete(replica);
    if (m && !m.size) this.map.delete(node);
  }
}

export class SchedulerReconciler implements Reconciler {
  /** Leader-local: since when each node has been seen NotReady (lost after the grace period). */
  readonly notReadySince = new Map<string, number>();
  private readonly observed: ObservedByNode;
  private metricsByLabel = new Map<string, ActMetrics | undefined>();
  private lastWaiting = '';
  private wakeTimer?: NodeJS.Timeout;
  readonly config: SchedulerConfig;

  constructor(private readonly c: Controller, ctx: ControllerContext, private readonly opts: SchedulerOptions = {}) {
    this.config = opts.config ?? schedulerConfig(ctx.timings);
    this.observed = new ObservedByNode(c.informer<ReplicaObserved>('observed'));
  }

  private items<T>(name: InformerName): Map<string, Versioned<T>> {
    return this.c.informer<T>(name).items;
  }

  snapshot(now: number): SchedulerSnapshot {
    const heartbeats = this.c.informer<Heartbeat>('heartbeats').valuesByRest();
    const nodes = this.c.informer<Node>('nodes').valuesByRest();
    const desired = [...this.items<ReplicaDesired>('desired').values()];
    // Hosts with desired keys but no node object are lost at once (decide): only nodes need a clock.
    trackNotReady(this.notReadySince, nodes.keys(), heartbeats, now);
    return {
      deployments: this.c.informer<Deployment>('deployments').versionedByRest(),
      revisions: new Map([...this.items<DeploymentRevision>('revisions')].map(([k, v]) => [k, v.value])),
      rollouts: this.c.informer<RolloutPlan>('rollouts').valuesByRest(),
      nodes,
      heartbeats,
      drains: this.c.informer<NodeDrain>('drains').valuesByRest(),
      desired,
      observed: this.observed.map,
      commands: this.items<ReplicaCommand>('commands'),
      counters: this.c.informer<ReplicaCounter>('counters').versionedByRest(),
      volumeHomes: this.c.informer<VolumeHome>('volumes').versionedByRest(),
      endpoints: this.c.informer<Endpoints>('endpoints').versionedByRest(),
      decisions: this.items<PlacementDecision>('decisions'),
      statuses: this.c.informer<DeploymentStatus>('statuses').versionedByRest(),
      notReadySince: this.notReadySince,
      seen: { deployments: this.c.informer('deployments').revision, desired: this.c.informer('desired').revision, nodes: this.c.informer('nodes').revision },
    };
  }

  async reconcile(now: number): Promise<PlannedAct[]> {
    const stopTimer = schedulerMetrics.reconcileDuration.startTimer();
    const plan = decide(this.snapshot(now), now, this.config);
    stopTimer();
    setUnschedulable(plan.unschedulable);
    this.metricsByLabel = new Map(plan.acts.map((a) => [a.label, a.metrics]));
    const waiting = JSON.stringify(plan.waiting);
    if (waiting !== this.lastWaiting) {
      this.lastWaiting = waiting;
      for (const w of plan.waiting) this.c.log.debug(w, 'scheduler waiting');
    }
    // Back-offs, ready times and grace periods end without any event: wake up for them.
    clearTimeout(this.wakeTimer);
    if (plan.wakeAt !== undefined) this.wakeTimer = setTimeout(() => this.c.trigger(0), Math.max(0, plan.wakeAt - now) + 20);
    if (plan.acts.length)
      this.c.log.debug(
        { place: plan.place.length, stop: plan.stop.length, replaceLost: plan.replaceLost.length, restart: plan.restart.length, acts: plan.acts.length },
        'scheduler plan',
      );
    await this.opts.beforeCommit?.(plan.acts);
    return plan.acts;
  }

  committed(result: CommitResult, acts: PlannedAct[]): void {
    const landed = new Set(result.committed.map((a) => a.label));
    for (const act of acts) {
      if (!landed.has(act.label)) continue;
      countLanded(this.metricsByLabel.get(act.label));
      for (const a of act.audit ?? []) this.c.log.info({ deployment: a.deployment, ...a.payload }, a.type);
    }
  }

  leadershipChanged(leading: boolean): void {
    // A new term starts its own NotReady clocks: a node is never declared lost on a stale memory.
    this.notReadySince.clear();
    if (!leading) {
      clearTimeout(this.wakeTimer);
      setUnschedulable({});
    }
  }

  stop(): void {
    clearTimeout(this.wakeTimer);
  }
}

export interface SchedulerHandle extends ControllerHandle {
  controller: Controller;
  reconciler: SchedulerReconciler;
}

/** The factory `jaco controller scheduler|all` runs (opts are for tests). */
export async function startScheduler(ctx: ControllerContext, opts: SchedulerOptions = {}): Promise<SchedulerHandle> {
  const controller = new Controller({ name: 'scheduler', ctx, informers: SCHEDULER_INFORMERS, clock: opts.clock });
  const reconciler = new SchedulerReconciler(controller, ctx, opts);
  await controller.start(reconciler);
  return {
    name: 'scheduler',
    controller,
    reconciler,
    async stop() {
      reconciler.stop();
      await controller.stop();
    },
    health: () => ({ synced: Object.values(controller.informers).every((i) => i.synced), leader: controller.leadership.isLeader() }),
  };
}
