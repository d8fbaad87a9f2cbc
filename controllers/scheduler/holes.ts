// Holding the hole (issue 17): a coalescing move makes room on one node for one pending service's
// replica; until that replica is placed, no other service's new replica takes the room. The hole
// is on the move's marker (`move.forPending`) while it is in flight and on the moved replica's
// `movedFrom.forPending` once it completes — both in desired records, so a new scheduler leader
// holds it as the old one did. A replica preemption stopped holds the hole on its
// `preempted.for` the same way. It is held while the pending service was still unschedulable at the
// scheduler's last pass (its own status) and, after the move completed, for HOLE_HOLD_MS at most:
// a service deleted or scaled down meanwhile releases it by itself.
import type { HoleFor } from '../../src/api/types.js';
import type { SchedulerSnapshot } from './plan.js';

/** How long after its move completed a hole stays held (the scheduler places within a pass or two). */
export const HOLE_HOLD_MS = 2 * 60_000;

/** Holes held now, by node. */
export function holesOf(snap: Pick<SchedulerSnapshot, 'replicas' | 'statuses'>, now: number): Map<string, HoleFor[]> {
  const out = new Map<string, HoleFor[]>();
  for (const e of snap.replicas.byId.values())
    for (const c of e.copies) {
      const s = c.desired.spec;
      const moved = s.movedFrom?.forPending && now - Date.parse(s.movedFrom.at) < HOLE_HOLD_MS ? s.movedFrom.forPending : undefined;
      // A replica stopped by preemption holds the room it gave up for its beneficiary, as long.
      const preempted = s.preempted && now - Date.parse(s.preempted.at) < HOLE_HOLD_MS ? s.preempted.for : undefined;
      const h = s.move?.forPending ?? moved ?? preempted;
      if (!h || !snap.statuses.get(h.deployment)?.value.status?.scheduling?.services[h.service]?.unschedulable) continue;
      if (!out.get(h.node)?.some((x) => x.deployment === h.deployment && x.service === h.service)) out.set(h.node, [...(out.get(h.node) ?? []), h]);
    }
  return out;
}

/** The nodes a service's new replicas may not take: holes held for other services, with why. */
export function heldAgainst(holes: ReadonlyMap<string, readonly HoleFor[]>, deployment: string, service: string): Record<string, string> | undefined {
  let out: Record<string, string> | undefined;
  for (const [node, hs] of holes) {
    const others = hs.filter((h) => h.deployment !== deployment || h.service !== service);
    if (others.length) (out ??= {})[node] = `held for ${others.map((h) => `${h.deployment}/${h.service}`).join(', ')}: the rescheduler made room here for it`;
  }
  return out;
}
