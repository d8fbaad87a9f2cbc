// The pressure charts' memory: each node's CPU and memory EWMA over the last hour, folded from its
// heartbeat samples with the rebalancer's own fold and window (controllers/rebalancer/pressure.ts),
// so the lines drawn are the signal the rebalancer acts on. Lost on restart by design (ADR 0002:
// EWMAs are state that is fine to lose). Times come in as arguments.
import { fold, readingOf, type NodeEwma } from '../app/controllers.js';
import type { Heartbeat } from '../api/types.js';
import type { PressurePoints } from './wire.js';

export const HISTORY_MS = 3_600_000;

export class PressureHistory {
  private readonly ewma = new Map<string, NodeEwma>();
  private readonly points = new Map<string, [number, number, number][]>();

  constructor(private readonly windowMs: number, private readonly keepMs = HISTORY_MS) {}

  /** Folds every heartbeat's newest sample once; returns the points that are new since the last call. */
  observe(heartbeats: Iterable<Heartbeat>, now: number): PressurePoints {
    const fresh: PressurePoints = {};
    for (const hb of heartbeats) {
      const p = hb.spec.pressure;
      if (!p) continue;
      const node = hb.spec.node;
      const prev = this.ewma.get(node);
      const next = fold(prev, readingOf(p), now, this.windowMs);
      if (next === prev) continue;
      this.ewma.set(node, next);
      const pt: [number, number, number] = [next.t, next.cpu, next.memory];
      const list = this.points.get(node) ?? [];
      list.push(pt);
      while (list.length && list[0]![0] < now - this.keepMs) list.shift();
      this.points.set(node, list);
      (fresh[node] ??= []).push(pt);
    }
    return fresh;
  }

  current(node: string): { cpu: number; memory: number } | undefined {
    const e = this.ewma.get(node);
    return e && { cpu: e.cpu, memory: e.memory };
  }

  all(): PressurePoints {
    return Object.fromEntries(this.points);
  }
}
