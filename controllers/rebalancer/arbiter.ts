// The one place a rebalancer move starts (Nomad's plan applier, the descheduler's evictor): the
// planners — pressure, placement conformance, spread, coalescing, preemption — say what they want
// as move intents, each with its trigger and reason, and never start anything. The arbiter holds
// the cadence (one move per cycle; none while one is in flight; placement conformance may start
// several, each within its service's budget), passes each intent through the shared move
// mechanism (which holds the disruption budget), counts a started move where it lands (on the
// move book and the placer, so later intents of the cycle see it) and writes its act.
import { startMove } from '../moves/move.js';
import { footprintOf } from '../placement/placer.js';
import type { MoveIntent, MoveView, PreemptWant, RebalanceAct, Trigger } from './plan.js';
import type { CycleView } from './view.js';

/** Why the cadence holds a trigger this cycle; undefined: it may start a move. */
export type Hold = string | undefined;

export interface ArbiterInput {
  /** The cycle's view of the cluster: the move book and the placer a started move is counted on, the nodes' pressures, the balancing epoch. */
  view: CycleView;
  now: number;
  /** Counted cycles only: an explain-only pass or a re-evaluation within half a cycle starts nothing. */
  countedCycle: boolean;
  /** The rebalancer's own moves in flight. */
  moving: number;
  /** The most pressured node is at or over the trigger (pressure goes first). */
  hotOverTrigger: boolean;
}

const MOVE_PREFIX: Record<Trigger, string> = { pressure: 'rb', placement: 'pl', spread: 'sp', coalesce: 'co', preempt: 'pe' };

export class Arbiter {
  /** The one move of the cycle (placement conformance: the first of its moves). */
  move?: MoveView;
  readonly acts: RebalanceAct[] = [];
  private stopped = false;

  constructor(private readonly input: ArbiterInput) {}

  /** The cadence: why `trigger` may not start a move now. Pressure comes first, then conformance, spread, coalescing, preemption. */
  hold(trigger: Trigger): Hold {
    const { countedCycle, moving, hotOverTrigger } = this.input;
    const m = this.move;
    // Pressure is gated by its cluster gates alone: a re-evaluation (or `jaco rebalance plan`) shows its move.
    if (trigger === 'pressure') return m ? `one move per cycle (${m.replica} scores higher)` : undefined;
    if (!countedCycle) return 'the cycle is not counted (explain only, or re-evaluated within half a cycle)';
    // A broken hard constraint is worth more than one move per cycle: conformance moves together.
    if (m && !(trigger === 'placement' && m.trigger === 'placement')) return `one move per cycle (${m.trigger} move ${m.replica} started this cycle)`;
    if (trigger === 'placement') return undefined;
    if (moving) return `${moving} rebalancer move(s) in flight`;
    if (trigger === 'spread' && hotOverTrigger) return 'a node is over the pressure trigger (pressure goes first)';
    return undefined;
  }

  /**
   * Offers intents in their planner's order: alternatives (the first the move mechanism accepts
   * starts, the rest are held), or, for conformance, each on its own.
   */
  offer(intents: readonly MoveIntent[], opts: { each?: boolean } = {}): boolean {
    let any = false;
    for (const intent of intents) {
      const why = this.hold(intent.trigger) ?? (any && !opts.each ? `one move per cycle (${this.move!.replica} moves)` : undefined);
      if (why) {
        intent.held(why);
        continue;
      }
      any = this.start(intent) || any;
    }
    return any;
  }

  /** Preemption's one disruption: a migration, or every stop of its plan at once, when nothing else moves. */
  preempt(want: PreemptWant): void {
    const why = this.hold('preempt');
    if (why) {
      Object.assign(want.view, { verdict: 'held', detail: `${want.view.detail}; not this cycle: ${why}` });
    } else if ('migrate' in want) {
      this.offer([want.migrate]);
    } else if ('wait' in want) {
      Object.assign(want.view, { verdict: 'held', detail: `${want.view.detail}; ${want.wait}` });
    } else {
      const { victims, ops, audit } = want.stop();
      const v = want.view;
      this.stopped = true;
      this.acts.push({ label: `rebalance preempt ${victims.map((x) => x.replica).join(',')} on ${v.node} for ${v.deployment}/${v.service}`, ops, audit, effect: { kind: 'preempt', stopped: victims.length } });
    }
  }

  /** Whether the cycle acts: a move started or replicas stopped for a pending one. */
  get acted(): boolean {
    return !!this.move || this.stopped;
  }

  private start(i: MoveIntent): boolean {
    const { view: cluster, now } = this.input;
    const { book } = cluster;
    const moveId = `${MOVE_PREFIX[i.trigger]}-${now}-${i.replica}`;
    const decision = i.verdicts && { verdicts: i.verdicts(), why: i.why };
    const started = startMove(book, { replica: i.replica, src: i.src, dst: i.dst, by: 'rebalancer', id: moveId, now, timeoutMs: i.timeoutMs, ...(decision ? { decision } : {}), ...(i.forPending ? { forPending: i.forPending } : {}), epoch: cluster.pingPong.epoch(i.deployment) });
    if (!started.ok) {
      i.refused(started.refusal, started.detail);
      return false;
    }
    // Later intents of the cycle see it: the budget (book) and the destination's occupancy (placer).
    book.assume(i.replica, started);
    cluster.placer().assume({ id: i.replica, deployment: i.deployment, service: i.service, node: i.dst, ...footprintOf(started.dst.spec.template) });
    i.started?.();
    const [from, to] = [cluster.viewOf.get(i.src), cluster.viewOf.get(i.dst)];
    const [srcP, dstP] = [from?.pressure ?? 0, to?.pressure ?? 0];
    const view: MoveView = { trigger: i.trigger, replica: i.replica, deployment: i.deployment, service: i.service, src: i.src, dst: i.dst, dominant: to?.dominant ?? 'memory', relief: 0, score: 0, srcBefore: srcP, srcAfter: srcP, dstBefore: dstP, dstAfter: dstP, ...i.view, moveId };
    this.move ??= view;
    const payload = i.trigger === 'pressure' ? { ...i.payload, move_id: moveId, trigger: i.trigger } : { replica_id: i.replica, deployment: i.deployment, service: i.service, src: i.src, dst: i.dst, trigger: i.trigger, move_id: moveId, ...i.payload };
    this.acts.push({
      label: i.trigger === 'pressure' ? `rebalance move ${i.replica} ${i.src}→${i.dst}` : `rebalance ${i.trigger} ${i.replica} ${i.src}→${i.dst}`,
      ops: started.ops,
      audit: [{ type: 'rebalance_moved', time: now, deployment: i.deployment, payload }],
      effect: { kind: 'move', trigger: i.trigger, replica: i.replica, src: i.src, dst: i.dst },
    });
    return true;
  }
}
