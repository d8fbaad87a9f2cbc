// The shell shared by controllers whose pure core returns a whole decision: acts with the metric
// events they imply, why things wait (notes), how many operations are in progress, and the next
// time something becomes due without any event (a ready time, a timeout). It counts metrics and
// logs audit records only for acts that committed, logs notes when they change, and wakes the
// controller at `wakeAt`. The rest (informers, leadership, fenced commits) is Controller's.
import { Controller, type ControllerContext, type InformerSpec, type PlannedAct, type Reconciler } from './controller.js';
import type { CommitResult } from '../store/writer.js';

export interface DecidedAct<M> extends PlannedAct {
  /** Counted once the act has landed. */
  metrics: M[];
}

export interface Decision<M> {
  acts: DecidedAct<M>[];
  /** Why things wait (logged at debug level when they change). */
  notes: object[];
  inProgress: number;
  wakeAt?: number;
}

export interface DecideControllerOptions<M> {
  name: string;
  informers: Record<string, InformerSpec>;
  /** Reads the informers (controller.informer(name).items) and decides. */
  decide(controller: Controller, now: number): Decision<M>;
  countMetric(e: M): void;
  setInProgress(n: number): void;
}

class DecideReconciler<M> implements Reconciler {
  private metricsByLabel = new Map<string, M[]>();
  private lastNotes = '';
  private wakeTimer?: NodeJS.Timeout;

  constructor(private readonly c: Controller, private readonly opts: DecideControllerOptions<M>) {}

  reconcile(now: number): PlannedAct[] {
    const d = this.opts.decide(this.c, now);
    this.opts.setInProgress(d.inProgress);
    this.metricsByLabel = new Map(d.acts.map((a) => [a.label, a.metrics]));
    const notes = JSON.stringify(d.notes);
    if (notes !== this.lastNotes) {
      this.lastNotes = notes;
      for (const n of d.notes) this.c.log.debug(n, `${this.opts.name} waiting`);
    }
    // Ready times and timeouts pass without any event: wake up for them.
    clearTimeout(this.wakeTimer);
    if (d.wakeAt !== undefined) this.wakeTimer = setTimeout(() => this.c.trigger(0), Math.max(0, d.wakeAt - now) + 20);
    return d.acts;
  }

  committed(result: CommitResult, acts: PlannedAct[]): void {
    const landed = new Set(result.committed.map((a) => a.label));
    for (const act of acts) {
      if (!landed.has(act.label)) continue;
      for (const e of this.metricsByLabel.get(act.label) ?? []) this.opts.countMetric(e);
      for (const a of act.audit ?? []) this.c.log.info({ ...a.payload }, a.type);
    }
  }

  leadershipChanged(leading: boolean): void {
    if (leading) return;
    clearTimeout(this.wakeTimer);
    this.opts.setInProgress(0);
  }

  stop(): void {
    clearTimeout(this.wakeTimer);
  }
}

/** Starts the controller; the handle is what controllers/index.ts factories return. */
export async function startDecideController<M>(ctx: ControllerContext, opts: DecideControllerOptions<M>) {
  const controller = new Controller({ name: opts.name, ctx, informers: opts.informers });
  const reconciler = new DecideReconciler(controller, opts);
  await controller.start(reconciler);
  return {
    name: opts.name,
    async stop(): Promise<void> {
      reconciler.stop();
      await controller.stop();
    },
    health: () => ({ synced: Object.values(controller.informers).every((i) => i.synced), leader: controller.leadership.isLeader() }),
  };
}
