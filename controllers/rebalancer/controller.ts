// The rebalancer's shell: a cycle-driven, leader-elected controller (a pass every cycle, no watch
// triggers) around the pure cycle in decide.ts. It holds the leader-local state (EWMAs, counters,
// cooldowns), reset whenever leadership changes, and serves `jaco rebalance plan` on the
// process's metrics address (GET /rebalance/plan) while it leads.
import { jsonRoutes } from '../../src/observability/server.js';
import { Controller, type ControllerContext, type PlannedAct, type Reconciler } from '../../src/runtime/controller.js';
import type { CommitResult } from '../../src/store/writer.js';
import type { ControllerHandle } from '../index.js';
import { observeMoveDuration } from '../moves/metrics.js';
import { defaultConfig, type Config } from './config.js';
import { afterCommit, decide, initialState, type Cycle, type RebalanceAct, type RebalancePlan, type RebalancerState } from './decide.js';
import { clearCycleMetrics, rebalanceMetrics, recordCycle, setGate } from './metrics.js';
import { REBALANCER_INFORMERS, snapshotOf } from './snapshot.js';

export const PLAN_PATH = '/rebalance/plan';

/** What the leader answers on GET /rebalance/plan. */
export interface PlanResponse {
  source: 'leader';
  identity: string;
  plan: RebalancePlan;
  /** The last counted cycle: when it ran and how it ended. */
  lastCycle?: { at: string; cycle: number; stoppedBy: string; move?: string };
}

export interface RebalancerOptions {
  config?: Config;
  clock?: () => number;
}

export class RebalancerReconciler implements Reconciler {
  state: RebalancerState = initialState();
  private pending?: Cycle;
  private lastCycle?: PlanResponse['lastCycle'];
  private lastStop = '';
  private shownNodes = new Set<string>();

  constructor(
    private readonly c: Controller,
    readonly config: Config,
    private readonly identity: string,
    private readonly clock: () => number = Date.now,
  ) {}

  private snapshot(now: number) {
    const items = <T>(name: keyof typeof REBALANCER_INFORMERS) => this.c.informer<T>(name).items.values();
    return snapshotOf(
      { nodes: items('nodes'), heartbeats: items('heartbeats'), drains: items('drains'), desired: items('desired'), observed: items('observed'), volumes: items('volumes') },
      now,
      this.config,
    );
  }

  reconcile(now: number): PlannedAct[] {
    const stopTimer = rebalanceMetrics.cycleDuration.startTimer();
    const cycle = decide(this.state, this.snapshot(now), now, this.config);
    stopTimer();
    this.pending = cycle;
    return cycle.acts;
  }

  committed(result: CommitResult, _acts: PlannedAct[], now: number): void {
    const cycle = this.pending;
    this.pending = undefined;
    if (!cycle) return;
    const labels = new Set(result.committed.map((a) => a.label));
    const landed: RebalanceAct[] = cycle.acts.filter((a) => labels.has(a.label));
    this.state = afterCommit(cycle.state, landed, now);
    const { plan } = cycle;
    this.shownNodes = recordCycle(plan, this.shownNodes);
    const moved = landed.find((a) => a.effect?.kind === 'move');
    for (const a of landed) {
      for (const r of a.audit ?? []) {
        if (r.type === 'rebalance_moved') rebalanceMetrics.moves.inc();
        if (r.type === 'rebalance_completed' || r.type === 'rebalance_abandoned') {
          rebalanceMetrics.outcomes.inc({ outcome: r.type === 'rebalance_completed' ? 'completed' : 'abandoned' });
          if (r.type === 'rebalance_completed') observeMoveDuration('rebalancer', Number(r.payload.duration_ms) / 1000);
        }
        if (r.type !== 'rebalance_skipped') this.c.log.info({ deployment: r.deployment, ...r.payload }, r.type);
        else this.c.log.debug({ deployment: r.deployment, ...r.payload }, r.type);
      }
    }
    // A planned move that did not land (conflict) is retried by the next pass: not "none".
    const stoppedBy = plan.stoppedBy === 'none' && !moved ? 'candidates' : plan.stoppedBy;
    setGate(stoppedBy);
    if (plan.countedCycle) this.lastCycle = { at: plan.at, cycle: plan.cycle, stoppedBy, ...(moved && plan.move ? { move: `${plan.move.replica} ${plan.move.src}→${plan.move.dst}` } : {}) };
    // One log line per change of outcome, not per cycle ("cluster uniformly busy: nothing to do").
    const gate = plan.gates.find((g) => g.gate === stoppedBy);
    const stop = `${stoppedBy} ${plan.src ?? ''}`;
    if (stop !== this.lastStop && stoppedBy !== 'none') this.c.log.info({ gate: stoppedBy, detail: gate?.detail, src: plan.src }, 'rebalance cycle stopped at a gate');
    this.lastStop = stop;
  }

  leadershipChanged(leading: boolean): void {
    // EWMAs, counters and cooldowns are leader-local (ADR 0002): a new term rebuilds them.
    this.state = initialState();
    this.pending = undefined;
    this.lastCycle = undefined;
    this.lastStop = '';
    if (!leading) {
      clearCycleMetrics(this.shownNodes);
      this.shownNodes = new Set();
    }
  }

  /** The plan as the leader sees it now, without moving anything (GET /rebalance/plan). */
  async explain(): Promise<{ status: number; body: unknown }> {
    if (!this.c.leadership.isLeader()) return { status: 503, body: { leader: false, error: 'this process does not lead the rebalancer' } };
    const now = this.clock();
    const { plan } = decide(this.state, this.snapshot(now), now, this.config, { explainOnly: true });
    const body: PlanResponse = { source: 'leader', identity: this.identity, plan, ...(this.lastCycle ? { lastCycle: this.lastCycle } : {}) };
    return { status: 200, body };
  }
}

export interface RebalancerHandle extends ControllerHandle {
  controller: Controller;
  reconciler: RebalancerReconciler;
}

/** The factory `jaco controller rebalancer|all` runs (options are for tests). */
export async function startRebalancer(ctx: ControllerContext, opts: RebalancerOptions = {}): Promise<RebalancerHandle> {
  const config = opts.config ?? defaultConfig(ctx.timings);
  const controller = new Controller({ name: 'rebalancer', ctx, informers: REBALANCER_INFORMERS, tickMs: config.cycleMs, eventDriven: false, clock: opts.clock });
  const reconciler = new RebalancerReconciler(controller, config, ctx.identity, opts.clock);
  await controller.start(reconciler);
  const route = () => reconciler.explain();
  jsonRoutes.set(PLAN_PATH, route);
  return {
    name: 'rebalancer',
    controller,
    reconciler,
    async stop() {
      if (jsonRoutes.get(PLAN_PATH) === route) jsonRoutes.delete(PLAN_PATH);
      await controller.stop();
    },
    health: () => ({ synced: Object.values(controller.informers).every((i) => i.synced), leader: controller.leadership.isLeader() }),
  };
}
