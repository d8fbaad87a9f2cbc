// The rebalancer's own moves in flight, advanced every cycle through the shared move mechanism:
// cut over, completed or abandoned when due (a move toward a node that is NotReady or gone is
// abandoned at once; one away from it completes), each outcome audited in the same transaction.
import { advanceMoves, inFlight } from '../moves/move.js';
import type { InFlightView, RebalanceAct } from './plan.js';
import type { CycleView } from './view.js';
import { byName } from './config.js';

/** The rebalancer's own moves advanced (cutover, completed, abandoned), and those still in flight. */
export function advanceOwnMoves(view: CycleView, now: number): { advanced: RebalanceAct[]; inFlightViews: InFlightView[] } {
  const { book } = view;
  // A move toward a node that is NotReady or gone is abandoned at once; one away from it completes.
  const lost = new Set<string>();
  for (const id of book.moving()) {
    const dst = inFlight(book.copies(id))!;
    for (const n of [dst.desired.spec.node, dst.desired.spec.move!.from]) if (!view.ready.has(n)) lost.add(n);
  }
  const steps = advanceMoves(book, now, { by: 'rebalancer', lostNodes: lost }, (n, r) => book.replicas.observed(n, r));
  const advanced: RebalanceAct[] = steps.map((s) =>
    s.outcome === 'cutover'
      ? { label: `rebalance move cutover ${s.replica} ${s.src}→${s.dst}`, ops: s.ops, audit: [] }
      : {
          label: `rebalance move ${s.outcome} ${s.replica} ${s.src}→${s.dst}`,
          ops: s.ops,
          audit: [
            {
              type: s.outcome === 'completed' ? 'rebalance_completed' : 'rebalance_abandoned',
              time: now,
              deployment: s.deployment,
              payload: { replica_id: s.replica, deployment: s.deployment, service: s.service, src: s.src, dst: s.dst, move_id: s.moveId, duration_ms: s.durationMs, ...(s.reason ? { reason: s.reason } : {}) },
            },
          ],
        },
  );
  const outcome = new Map(steps.map((s) => [s.replica, s.outcome]));
  const inFlightViews: InFlightView[] = [];
  for (const id of book.moving()) {
    const m = inFlight(book.copies(id))?.desired.spec;
    if (m?.move?.by !== 'rebalancer') continue;
    const o = outcome.get(id);
    inFlightViews.push({ replica: id, src: m.move.from, dst: m.node, startedAt: m.move.startedAt, deadline: m.move.deadline, ...(o ? { outcome: o } : {}) });
  }
  inFlightViews.sort((a, b) => byName(a.replica, b.replica));
  return { advanced, inFlightViews };
}
