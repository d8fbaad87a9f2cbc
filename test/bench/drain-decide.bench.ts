// Benchmark: one pass of the drain controller's pure core (controllers/drain/decide.ts) on large
// synthetic clusters — the cost a leader pays per watch event while a drain runs. No I/O: the
// snapshot is read through the runtime's cache from an in-memory store, as in production.
//
//   npx tsx test/bench/drain-decide.bench.ts [--runs 20]
//
// Each cluster: N nodes (Ready, 64 GiB), S services of R replicas spread over them (plus one
// global service), node-000 draining. "start" is the first pass (placement of one move per
// service through the placement core, under the budget); "steady" a pass with those moves in
// flight and nothing new to decide; "idle" a pass with no drain at all.
import { keys } from '../../src/api/keys.js';
import { specHash, withDefaults } from '../../src/api/spec.js';
import { API_VERSION, type Heartbeat, type Node, type NodeDrain, type ReplicaDesired, type ReplicaObserved, type ServiceSpec } from '../../src/api/types.js';
import { Cache } from '../../src/runtime/cache.js';
import { decide } from '../../controllers/drain/decide.js';
import { drainSnapshot } from '../../controllers/drain/index.js';
import { MemoryStore } from '../support/memory-store.js';

function arg(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1]! : fallback;
}
const runs = Number(arg('runs', '20'));
const T0 = Date.parse('2026-11-21T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const CFG = { drainTimeoutMs: 300_000 };

function cluster(nodes: number, services: number, replicas: number): MemoryStore {
  const store = new MemoryStore();
  const names = Array.from({ length: nodes }, (_, i) => `node-${String(i).padStart(3, '0')}`);
  for (const name of names) {
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis: 16_000, memoryBytes: 64 * 2 ** 30, gpus: 0 }, agentVersion: 'b', registeredAt: iso(T0) } };
    store.put(keys.node(name), node);
    const hb: Heartbeat = { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(T0), intervalMs: 30_000, agentVersion: 'b', dockerUp: true } };
    store.put(keys.heartbeat(name), hb);
  }
  const add = (id: string, dep: string, svc: string, node: string, spec: ServiceSpec, index?: number) => {
    const d: ReplicaDesired = {
      apiVersion: API_VERSION,
      kind: 'ReplicaDesired',
      metadata: { name: id },
      spec: { replica: id, deployment: dep, service: svc, node, ...(index === undefined ? {} : { index }), revision: 1, specHash: specHash(spec), template: spec, placedAt: iso(T0 - 3_600_000) },
    };
    store.put(keys.desired(node, id), d);
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: id },
      status: { replica: id, node, deployment: dep, service: svc, state: 'running', revision: 1, specHash: d.spec.specHash, startedAt: iso(T0 - 600_000), health: 'healthy', observedAt: iso(T0) },
    };
    store.put(keys.observed(node, id), o);
  };
  for (let s = 0; s < services; s++) {
    const spec = withDefaults({ image: 'x', replicas, resources: { cpu: '100m', memory: '64Mi' }, healthcheck: { test: ['CMD', 'true'] } });
    for (let r = 0; r < replicas; r++) add(`d-s${s}-${r}`, 'd', `s${s}`, names[(s + r * 7) % nodes]!, spec, r);
  }
  const g = withDefaults({ image: 'x', placement: { mode: 'global' } });
  for (const n of names) add(`d-g-${n}`, 'd', 'g', n, g);
  return store;
}

function drainNode0(store: MemoryStore): void {
  const drain: NodeDrain = { apiVersion: API_VERSION, kind: 'NodeDrain', metadata: { name: 'node-000' }, spec: { node: 'node-000', timeout: '5m', force: false, remove: false, requestedAt: iso(T0) } };
  store.put(keys.drain('node-000'), drain);
}

function time(fn: () => unknown): number {
  const t = process.hrtime.bigint();
  fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

console.log(`drain decide() per pass, median of ${runs} runs (ms)`);
console.log('nodes  replicas  on the drained node  moves started  start    steady   idle');
for (const [nodes, services, replicas] of [
  [10, 30, 10],
  [50, 100, 20],
  [200, 250, 40],
] as const) {
  const store = cluster(nodes, services, replicas);
  const cache = new Cache(store);
  const m = () => median(Array.from({ length: runs }, () => time(() => decide(drainSnapshot(cache), T0 + 1000, CFG))));
  const idle = m();
  drainNode0(store);
  const first = decide(drainSnapshot(cache), T0, CFG);
  const moves = first.acts.filter((a) => a.label.endsWith(': start')).length;
  const start = m();
  // The first pass's acts land: moves in flight, status written.
  for (const a of first.acts) store.applyAct(a.ops);
  const steady = m();
  const total = store.keys('desired/').length;
  const here = store.keys('desired/node-000/').length;
  console.log(`${String(nodes).padStart(5)}  ${String(total).padStart(8)}  ${String(here).padStart(19)}  ${String(moves).padStart(13)}  ${start.toFixed(2).padStart(6)}  ${steady.toFixed(2).padStart(6)}  ${idle.toFixed(3).padStart(6)}`);
}
