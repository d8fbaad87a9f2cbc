// The invariants the simulation checks after every step. Each is a named function over the
// simulated store that returns what is wrong, or undefined.
import type { ReplicaDesired } from '../../src/api/types.js';
import type { Sim } from './world.js';
import { maxUnavailableOf } from '../../src/api/update.js';

export interface Invariant {
  name: string;
  check(sim: Sim): string | undefined;
}

/**
 * No replica id has two desired copies outside a move's window: a second copy exists only as a
 * move's destination (spec.move) beside its source on move.from — never two sources, never three.
 */
export const oneCopyOutsideMoves: Invariant = {
  name: 'no replica with two copies outside a move',
  check(sim) {
    const byId = new Map<string, ReplicaDesired[]>();
    for (const d of sim.desired()) byId.set(d.spec.replica, [...(byId.get(d.spec.replica) ?? []), d]);
    for (const [id, copies] of byId) {
      if (copies.length === 1) continue;
      const dst = copies.filter((c) => c.spec.move);
      if (copies.length > 2 || dst.length !== 1 || copies.find((c) => !c.spec.move)!.spec.node !== dst[0]!.spec.move!.from)
        return `${id} has ${copies.length} copies: ${copies.map((c) => `${c.spec.node}${c.spec.move ? ` (move from ${c.spec.move.from})` : ''}`).join(', ')}`;
    }
    return undefined;
  },
};

/**
 * Voluntary disruption stays within the budget: a service never has more replicas moving at once
 * than its maxUnavailable (default 1).
 */
export const movesWithinBudget: Invariant = {
  name: 'moves within maxUnavailable',
  check(sim) {
    const moving = new Map<string, Set<string>>();
    for (const d of sim.desired()) {
      if (!d.spec.move) continue;
      const k = `${d.spec.deployment}/${d.spec.service}`;
      moving.set(k, (moving.get(k) ?? new Set()).add(d.spec.replica));
    }
    for (const [k, ids] of moving) {
      const copies = sim.desired().filter((d) => `${d.spec.deployment}/${d.spec.service}` === k);
      const max = maxUnavailableOf(copies[0]?.spec.template, new Set(copies.map((d) => d.spec.replica)).size);
      if (ids.size > max) return `${k} has ${ids.size} replicas moving at once (maxUnavailable ${max}): ${[...ids].join(', ')}`;
    }
    return undefined;
  },
};

/** Every desired replica belongs to a service its deployment has (or to a deployment being removed: checked at removal). */
export const noUnknownNodes: Invariant = {
  name: 'replicas only on known nodes',
  check(sim) {
    const bad = sim.desired().filter((d) => !sim.nodes.includes(d.spec.node));
    return bad.length ? `on unknown nodes: ${bad.map((d) => `${d.spec.replica}@${d.spec.node}`).join(', ')}` : undefined;
  },
};

export const ALL_INVARIANTS: readonly Invariant[] = [oneCopyOutsideMoves, movesWithinBudget, noUnknownNodes];
