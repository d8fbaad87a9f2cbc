// Copies: a replica has one desired key, two while a move is in flight (its source and its
// destination). Anything else is damage — a hand edit, state written by an older release, a bug —
// and left alone it lasts forever: restarts and rollouts skip a replica with two copies. This job
// heals it, audited: surplus copies are removed (the best one stays), and a source that says it is
// moving to a destination that does not exist forgets it.
import { keys } from '../../src/api/keys.js';
import { notReadyBecause, replicaRunning } from '../../src/api/readiness.js';
import type { Copy, ReplicaEntry } from '../../src/runtime/replicas.js';
import type { Op } from '../../src/store/writer.js';
import { inFlight } from '../moves/move.js';
import { cmp, type SchedulerPass } from './pass.js';

/**
 * How good a copy is to keep, lower first: serving (running and ready) on a Ready node, then
 * running on a Ready node, then merely on a Ready node, then the rest.
 */
function rank(pass: SchedulerPass, c: Copy): number {
  if (!pass.ready(c.desired.spec.node)) return 3;
  if (!replicaRunning(c.observed)) return 2;
  return notReadyBecause(c.desired, c.observed, pass.now) ? 1 : 0;
}

/** The copy that stays of a replica with surplus copies: the best ranked, then the earliest placed, then by node. */
export function bestCopy(pass: SchedulerPass, copies: readonly Copy[]): Copy {
  return [...copies].sort(
    (a, b) =>
      rank(pass, a) - rank(pass, b) ||
      Number(!!a.desired.spec.suspended) - Number(!!b.desired.spec.suspended) ||
      cmp(a.desired.spec.placedAt ?? '', b.desired.spec.placedAt ?? '') ||
      cmp(a.desired.spec.node, b.desired.spec.node),
  )[0]!;
}

/** The copies a replica may have: the lone copy, or a move's source and destination. */
function legitimate(pass: SchedulerPass, e: ReplicaEntry): { keep: Copy[]; surplus: Copy[] } {
  const dst = inFlight(e.copies);
  if (dst) {
    const marker = dst.desired.spec.move!;
    // The source is the copy on the move's `from` node (after cutover there is none).
    const keep = e.copies.filter((c) => c === dst || c.desired.spec.node === marker.from);
    return { keep, surplus: e.copies.filter((c) => !keep.includes(c)) };
  }
  const best = bestCopy(pass, e.copies);
  return { keep: [best], surplus: e.copies.filter((c) => c !== best) };
}

/**
 * Heals the replicas of one service and returns them as they will be once the heal lands. Each
 * heal is one act that compares every key it relied on: if a mover or another scheduler pass
 * changed the replica meanwhile, the act fails and the next pass decides again.
 */
export function healCopies(pass: SchedulerPass, replicas: readonly ReplicaEntry[]): ReplicaEntry[] {
  return replicas.map((e) => {
    const moving = inFlight(e.copies);
    const stale = moving ? undefined : e.copies.filter((c) => c.desired.spec.movingTo);
    if (e.copies.length === 1 && !stale?.length) return e; // the common case
    if (moving && e.copies.length <= 2) return e; // a move in flight: its mover owns it
    const { keep, surplus } = legitimate(pass, e);
    const ops: Op[] = [];
    const healed: Copy[] = [];
    const staleMoveTo: string[] = [];
    for (const c of keep) {
      const target = c.desired.spec.movingTo;
      if (!moving && target) {
        // Moving to a copy that is not there: the move was lost (its destination deleted by hand).
        const { movingTo: _t, ...spec } = c.desired.spec;
        const value = { ...c.desired, spec };
        ops.push({ op: 'update', key: c.key, value, modRevision: c.modRevision }, { op: 'check', key: keys.desired(target.node, e.id), modRevision: 0 });
        healed.push({ ...c, desired: value, modRevision: 0 });
        staleMoveTo.push(target.node);
      } else {
        ops.push({ op: 'check', key: c.key, modRevision: c.modRevision });
        healed.push(c);
      }
    }
    ops.push(...pass.deleteCopies(e, surplus));
    const kept = keep.map((c) => c.desired.spec.node);
    const removed = surplus.map((c) => c.desired.spec.node);
    if (removed.length) pass.plan.stop.push({ replica: e.id, deployment: e.deployment, service: e.service, nodes: removed, reason: 'duplicate' });
    pass.replicaAct(e, 'heal', ops, 'replica_healed', { kept, removed, staleMoveTo });
    return { ...e, copies: healed };
  });
}
