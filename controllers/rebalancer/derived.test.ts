// What the cycle keeps between passes (derived.ts) must give exactly what rebuilding gives:
// replaced values, appended keys (a move starting), deleted keys (a move completing) and node
// changes, in sequence, compared with a rebuild at every step.
import { describe, expect, it } from 'vitest';
import type { VersionedDesired } from '../moves/move.js';
import type { PlacementRequest } from '../scheduler/placement.js';
import { defaultConfig } from './config.js';
import { decide } from './decide.js';
import { layoutOf, placerFor, withoutKept } from './derived.js';
import { Harness, replica, service, T0, World, type Load } from '../../test/support/rebalancer-world.js';

const config = defaultConfig();

function world(): World {
  const w = new World();
  for (const n of ['a', 'b', 'c', 'd']) w.addNode(n, { memoryBytes: 2 * 1024 ** 3 });
  const web = service({ resources: { memory: '512Mi' }, ports: [8080] });
  const api = service({ resources: { cpu: '300m', memory: '256Mi' } });
  for (const [i, n] of ['a', 'b', 'c'].entries()) w.add(replica(`d-web-${i}`, n, { spec: web, index: i }), replica(`d-api-${i}`, 'a', { spec: api, index: i }));
  return w;
}

/** Every hard-filter verdict of every replica on every node: the placer's observable state. */
function verdicts(w: World): unknown[] {
  const snap = w.snapshot(T0, {});
  const ineligible = snap.nodes.map(() => undefined);
  const placer = placerFor(snap, T0, ineligible);
  const out: unknown[] = [];
  for (const d of snap.desired) {
    const s = d.value.spec;
    const req: PlacementRequest = { replica: s.replica, deployment: s.deployment, service: s.service, spec: s.template, index: s.index, exclude: [s.node] };
    out.push(placer.candidates(req), ...snap.nodes.map((n) => placer.check(req, n.metadata.name)));
  }
  return out;
}

const layoutNow = (d: readonly VersionedDesired[]) => JSON.stringify(layoutOf(d), (_k, v: unknown) => (v instanceof Map ? [...v].sort(([a], [b]) => (a < b ? -1 : 1)) : v));

describe('kept between cycles', () => {
  it('layout and placer after each kind of change equal a rebuild', () => {
    const w = world();
    const steps: [string, (w: World) => void][] = [
      ['nothing', () => {}],
      ['a value replaced in place (same node and service)', (w) => (w.replicas[0] = replica('d-web-0', 'a', { spec: service({ resources: { memory: '1Gi' } }), index: 0 }))],
      ['a key appended (a move starting)', (w) => w.add(replica('d-api-1', 'd', { spec: service({ resources: { cpu: '300m', memory: '256Mi' } }), index: 1, move: { id: 'm', from: 'a', by: 'rebalancer', startedAt: new Date(T0).toISOString(), deadline: new Date(T0 + 60_000).toISOString() } }))],
      ['a key deleted (the move completing)', (w) => (w.replicas = w.replicas.filter((r) => r.desired.key !== 'desired/a/d-api-1'))],
      ['a value replaced with another node', (w) => (w.replicas[1] = replica('d-api-0', 'c', { index: 0 }))],
      ['many keys replaced', (w) => (w.replicas = w.replicas.map((r) => replica(r.desired.value.spec.replica, r.desired.value.spec.node, { spec: r.desired.value.spec.template })))],
    ];
    for (const [what, change] of steps) {
      change(w);
      const d = w.snapshot(T0, {}).desired;
      expect(layoutNow(d), what).toBe(withoutKept(() => layoutNow(d)));
      expect(verdicts(w), what).toEqual(withoutKept(() => verdicts(w)));
    }
  });

  it('a run of cycles with moves gives the same plans as cycles that keep nothing', () => {
    const w = new World().addNode('a').addNode('b').addNode('c');
    for (let i = 0; i < 4; i++) w.add(replica(`d-s${i}-0`, 'a'));
    const h = new Harness(w);
    const loads = (): Record<string, Load> => ({
      a: { cpu: 0.99, replicas: Object.fromEntries(w.replicas.filter((r) => r.desired.value.spec.node === 'a').map((r) => [r.desired.value.spec.replica, { cpuMillis: 200 }])) },
      b: { cpu: 0.1 },
      c: { cpu: 0.2 },
    });
    for (let i = 0; i < 12; i++) {
      const snap = w.snapshot(h.now, loads());
      const fresh = withoutKept(() => decide(h.state, snap, h.now, config));
      const kept = decide(h.state, snap, h.now, config);
      expect(JSON.stringify(kept.plan)).toBe(JSON.stringify(fresh.plan));
      expect(JSON.stringify(kept.acts)).toBe(JSON.stringify(fresh.acts));
      h.cycle(loads());
      // Moves land: destination copies run, so the next cycle completes them.
      for (const r of w.replicas)
        if (r.desired.value.spec.move && !r.observed) r.observed = { ...replica(r.desired.value.spec.replica, r.desired.value.spec.node).observed! };
      h.now += 11 * 60_000;
    }
    expect(h.audit().filter((a) => a.type === 'rebalance_moved').length).toBeGreaterThan(1);
    expect(h.audit().filter((a) => a.type === 'rebalance_completed').length).toBeGreaterThan(0);
  });
});
