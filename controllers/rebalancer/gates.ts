// The cluster gates of ADR 0002 (seed 000), cheapest first: pressure data, the trigger, consecutive
// cycles over it, the imbalance gap, no rebalancer move in flight. The first that does not hold
// stops the pressure path; the thresholds the plan shows beside them.
import { atLeast, f2, type Config } from './config.js';
import type { GateView, InFlightView, NodeView, RebalancePlan } from './plan.js';

/** The cluster gates in order, the most pressured node, and the first gate that does not hold. */
export function clusterGates(views: readonly NodeView[], silent: readonly unknown[], inFlightViews: readonly InFlightView[], config: Config) {
  const moving = inFlightViews.length;
  const gates: GateView[] = [];
  let src: NodeView | undefined;
  let min: NodeView | undefined;
  for (const v of views) {
    if (!src || v.pressure > src.pressure) src = v;
    if (!min || v.pressure < min.pressure) min = v;
  }
  if (!src || !min) {
    gates.push({ gate: 'pressure_data', holds: false, detail: `no node has a fresh pressure sample (${silent.length} silent)` });
    for (const g of ['trigger_threshold', 'consecutive_cycles', 'imbalance_gap'] as const) gates.push({ gate: g, holds: null, detail: 'no data' });
  } else {
    gates.push({ gate: 'pressure_data', holds: true, detail: `${views.length} node(s) with fresh samples, ${silent.length} silent` });
    gates.push({ gate: 'trigger_threshold', holds: atLeast(src.pressure, config.trigger), detail: `max pressure ${f2(src.pressure)} (${src.node}, ${src.dominant}) vs trigger ${config.trigger}` });
    gates.push({ gate: 'consecutive_cycles', holds: src.over >= config.consecutiveCycles, detail: `${src.node} at or over the trigger for ${src.over} consecutive cycle(s), ${config.consecutiveCycles} needed` });
    const gap = src.pressure - min.pressure;
    gates.push({ gate: 'imbalance_gap', holds: atLeast(gap, config.imbalanceGap), detail: `max − min = ${f2(src.pressure)} (${src.node}) − ${f2(min.pressure)} (${min.node}) = ${f2(gap)} vs ${config.imbalanceGap}` });
  }
  gates.push({ gate: 'move_in_flight', holds: moving === 0, detail: moving ? `${moving} rebalancer move(s) in flight: ${inFlightViews.map((m) => `${m.replica} ${m.src}→${m.dst}`).join(', ')}` : 'no rebalancer move in flight' });
  const closed = gates.find((g) => g.holds !== true);
  return { gates, src, closed };
}

/** The thresholds the gates and the pressure planner judge by, as the plan shows them. */
export const thresholdsOf = (c: Config): RebalancePlan['thresholds'] => ({ trigger: c.trigger, consecutiveCycles: c.consecutiveCycles, imbalanceGap: c.imbalanceGap, reliefFloor: c.reliefFloor, dstCap: c.dstCap, dstFit: c.dstFit, moveCost: c.moveCost });
