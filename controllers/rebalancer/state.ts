// The rebalancer's leader-local state (ADR 0002: EWMAs, counters, cooldowns, what the audit log
// last recorded): where a term starts, what landing an act changes in it, and a state rebuilt
// outside the leader for `jaco rebalance plan`.
import type { PressureSample } from '../../src/api/types.js';
import { atLeast, type Config } from './config.js';
import type { Effect, NodeState, RebalanceAct, RebalancerState } from './plan.js';
import { composite, fold, readingOf } from './pressure.js';

export function initialState(): RebalancerState {
  return { cycles: 0, nodes: new Map(), received: new Map(), audited: new Map() };
}

/** Leader-local effects of the acts that landed: node cooldown, recorded skips. */
export function afterCommit(state: RebalancerState, landed: readonly RebalanceAct[], now: number): RebalancerState {
  const effects = landed.map((a) => a.effect).filter((e): e is Effect => !!e);
  if (!effects.length) return state;
  const received = new Map(state.received);
  const audited = new Map(state.audited);
  for (const e of effects) {
    if (e.kind === 'move') received.set(e.dst, now);
    else if (e.kind === 'skip' || e.kind === 'refusal') audited.set(e.key, { reason: e.reason, at: now });
  }
  return { ...state, received, audited };
}

/**
 * A state rebuilt outside the leader (`jaco rebalance plan` when the leader does not answer):
 * EWMAs seeded from the latest samples, a node over the trigger assumed to have been over for
 * the required cycles, node cooldowns from recent rebalance_moved audit records (the ping-pong
 * exclusion needs nothing: it is in the desired records).
 */
export function seedState(samples: ReadonlyMap<string, PressureSample>, recentMoves: readonly { dst: string; at: number }[], now: number, config: Config): RebalancerState {
  const nodes = new Map<string, NodeState>();
  for (const [name, s] of samples) {
    const ewma = fold(undefined, readingOf(s), now, config.ewmaWindowMs);
    nodes.set(name, { ewma, over: atLeast(composite(ewma).pressure, config.trigger) ? config.consecutiveCycles : 0 });
  }
  const received = new Map<string, number>();
  for (const m of [...recentMoves].sort((a, b) => a.at - b.at)) if (now - m.at < config.cooldownNodeMs) received.set(m.dst, m.at);
  return { ...initialState(), nodes, received, seeded: true };
}
