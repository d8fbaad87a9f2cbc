// The rebalancer's world for tests and the benchmark: nodes and replicas made by the one table-test
// harness's builders (test/support/harness.ts), samples per cycle, and a recorder of every plan.
// Unlike the store-backed worlds it builds the snapshot itself — its tables give each cycle's
// loads, which the heartbeats carry — and it commits every act (as if the store accepted it) so
// leader-local effects follow, applying landed moves to the world.
import { keys } from '../../src/api/keys.js';
import { withDefaults, specHash } from '../../src/api/spec.js';
import type { Heartbeat, MoveMarker, Node, PressureSample, ReplicaCommand, ReplicaDesired, ReplicaFootprint, ReplicaObserved, ServiceSpec } from '../../src/api/types.js';
import { ReplicaIndex } from '../../src/runtime/replicas.js';
import { placerFor } from '../../controllers/placement/input.js';
import type { Versioned } from '../../src/store/store.js';
import { defaultConfig, type Config } from '../../controllers/rebalancer/config.js';
import { decide } from '../../controllers/rebalancer/decide.js';
import { afterCommit, initialState } from '../../controllers/rebalancer/state.js';
import type { Cycle, RebalancerState, Snapshot } from '../../controllers/rebalancer/plan.js';
import { desiredObject, GiB, heartbeatObject, iso, nodeObject, observedObject, T0 } from './harness.js';

export { GiB, T0 };

export function service(extra: Partial<ServiceSpec> = {}): ServiceSpec {
  return withDefaults({ image: 'jaco-demo/busybox:1', replicas: 3, ...extra });
}

export interface NodeOpts {
  cpuMillis?: number;
  memoryBytes?: number;
  labels?: Record<string, string>;
  cordoned?: boolean;
}

export function nodeObj(name: string, o: NodeOpts = {}): Node {
  return nodeObject(name, { cpuMillis: o.cpuMillis ?? 1000, memoryBytes: o.memoryBytes, labels: o.labels, spec: { unschedulable: o.cordoned ?? false }, registeredAt: T0 - 86_400_000 });
}

export function heartbeat(name: string, now: number, pressure?: PressureSample, intervalMs = 30_000): Heartbeat {
  return heartbeatObject(name, now, { intervalMs, ...(pressure ? { pressure } : {}) });
}

export interface ReplicaOpts {
  deployment?: string;
  service?: string;
  spec?: ServiceSpec;
  placedAt?: number;
  running?: boolean;
  move?: MoveMarker;
  index?: number;
}

export type VersionedDesired = Versioned<ReplicaDesired>;

export interface ReplicaCopy {
  desired: VersionedDesired;
  observed?: ReplicaObserved;
}

/** Mod revisions: deterministic per world (reset with resetRevisions). */
let rev = 100;
export function resetRevisions(): void {
  rev = 100;
}

function versioned<T>(key: string, value: T): Versioned<T> {
  const r = rev++;
  return { key, value, modRevision: r, createRevision: r, version: 1 };
}

export function replica(id: string, node: string, o: ReplicaOpts = {}): ReplicaCopy {
  const spec = o.spec ?? service();
  const deployment = o.deployment ?? id.split('-')[0]!;
  const svc = o.service ?? id.split('-')[1]!;
  const d = desiredObject({
    replica: id,
    deployment,
    service: svc,
    node,
    revision: 1,
    specHash: specHash(spec),
    template: spec,
    placedAt: iso(o.placedAt ?? T0 - 86_400_000),
    ...(o.index !== undefined ? { index: o.index } : {}),
    ...(o.move ? { move: o.move } : {}),
  });
  const observed = o.running === false ? undefined : observedObject(d, 'running', T0, { startedAt: iso(T0 - 86_400_000) });
  return { desired: versioned(`desired/${node}/${id}`, d), ...(observed ? { observed } : {}) };
}

/** Utilisation of one node in one sample, with optional per-replica footprints. */
export interface Load {
  cpu: number;
  memory?: number;
  replicas?: Record<string, Partial<ReplicaFootprint>>;
}

export function sample(now: number, l: Load): PressureSample {
  const replicas: Record<string, ReplicaFootprint> = {};
  for (const [id, f] of Object.entries(l.replicas ?? {})) replicas[id] = { cpuMillis: f.cpuMillis ?? 0, memoryBytes: f.memoryBytes ?? 0 };
  return { time: iso(now), cpuUtil: l.cpu, memoryUtil: l.memory ?? 0.1, replicas };
}

export class World {
  nodes = new Map<string, Node>();
  replicas: ReplicaCopy[] = [];
  notReady = new Set<string>();
  /** Nodes whose agent reports its data root 99% full: degraded (src/api/eligibility.ts). */
  diskFull = new Set<string>();
  /** Services the scheduler reports unschedulable for capacity (coalescing's input). */
  pending: NonNullable<Snapshot['pending']> = [];
  /** The deployments' current placement by `<deployment>/<service>` (placement conformance's input). */
  placements = new Map<string, ServiceSpec['placement']>();
  /** Each node key's revision (a node change, e.g. re-registration, bumps it: new balancing is triggered). */
  nodeRevisions = new Map<string, number>();
  /** Deployment generations (a changed deployment triggers new balancing). */
  generations = new Map<string, number>();
  /** Restart bookkeeping by store key (recent failures count against a node in the scheduler's score). */
  commands = new Map<string, Versioned<ReplicaCommand>>();
  private revision = 0;

  /** `restarts` health restarts of a replica on `node`, the last at `at` (a node where replicas keep failing). */
  failing(node: string, replica: string, restarts: number, at: number): this {
    const key = `commands/${node}/${replica}`;
    this.commands.set(key, versioned(key, { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: replica }, spec: { replica, op: 'restart', seq: restarts, issuedAt: iso(at), reason: 'unhealthy' }, status: { restarts, lastRestartAt: iso(at), generation: 1 } } as ReplicaCommand));
    return this;
  }

  addNode(name: string, o: NodeOpts = {}): this {
    this.nodes.set(name, nodeObj(name, o));
    this.nodeRevisions.set(name, ++this.revision);
    return this;
  }

  /** A node's key written again (re-registered, relabelled, cordoned…): a node change. */
  touchNode(name: string): this {
    this.nodeRevisions.set(name, ++this.revision);
    return this;
  }

  add(...r: ReplicaCopy[]): this {
    this.replicas.push(...r);
    return this;
  }

  /**
   * The agents: every copy that `which` picks (by default, those without a report yet) is observed
   * running at its desired spec, started a minute before `now`, without a health check (ready).
   */
  observeRunning(now: number, which: (r: ReplicaCopy) => boolean = (r) => !r.observed): void {
    for (const r of this.replicas) {
      if (!which(r)) continue;
      r.observed = observedObject(r.desired.value, 'running', now);
    }
  }

  /** The snapshot at `now` with the given loads (a node without a load is silent). */
  snapshot(now: number, loads: Record<string, Load>): Snapshot {
    const samples = new Map<string, PressureSample>();
    const heartbeats = new Map<string, Heartbeat>();
    for (const name of this.nodes.keys()) {
      const l = loads[name];
      const s = l ? sample(now, l) : undefined;
      if (s) samples.set(name, s);
      if (this.notReady.has(name)) continue;
      const hb = heartbeat(name, now, s);
      heartbeats.set(name, this.diskFull.has(name) ? { ...hb, spec: { ...hb.spec, disk: { path: '/var/lib/docker', totalBytes: 100 * GiB, usedBytes: 99 * GiB, availableBytes: GiB, capped: false, driver: 'overlay2' } } } : hb);
    }
    const replicas = new ReplicaIndex();
    for (const r of this.replicas) {
      const s = r.desired.value.spec;
      if (r.observed) replicas.putObserved(s.node, s.replica, versioned(`observed/${s.node}/${s.replica}`, r.observed));
      replicas.putDesired(r.desired);
    }
    // A placer built afresh for each snapshot (the controller's is kept between passes: placement/kept.ts).
    const snap: Snapshot = { placer: () => placerFor(snap, now), samples, nodes: [...this.nodes.values()], heartbeats, drains: new Map(), replicas, ledgers: new Map(), commands: this.commands, volumeHomes: [], eligibility: new Map([...this.nodeRevisions].map(([n, rev]) => [keys.node(n), rev])), pending: this.pending, placements: this.placements, generations: this.generations };
    return snap;
  }

  /** Applies a committed move to the world: the destination copy appears (not yet running). */
  applyOps(cycle: Cycle): void {
    for (const a of cycle.acts)
      for (const op of a.ops) {
        if (op.op === 'create' && op.key.startsWith('desired/')) this.replicas.push({ desired: versioned(op.key, op.value as ReplicaDesired) });
        if (op.op === 'delete') this.replicas = this.replicas.filter((r) => r.desired.key !== op.key);
        if (op.op === 'update' && op.key.startsWith('desired/')) {
          const r = this.replicas.find((x) => x.desired.key === op.key);
          if (r) r.desired = versioned(op.key, op.value as ReplicaDesired);
        }
      }
  }
}

/** Runs cycles against a world, committing every act, and records each plan. */
export class Harness {
  state: RebalancerState = initialState();
  now = T0;
  readonly cycles: Cycle[] = [];

  constructor(
    readonly world: World,
    readonly config: Config = defaultConfig(),
  ) {}

  /** One cycle at the current time, then the clock advances one cycle. */
  cycle(loads: Record<string, Load>): Cycle {
    const c = decide(this.state, this.world.snapshot(this.now, loads), this.now, this.config);
    this.state = afterCommit(c.state, c.acts, this.now);
    this.world.applyOps(c);
    this.cycles.push(c);
    this.now += this.config.cycleMs;
    return c;
  }

  run(n: number, loads: Record<string, Load> | ((i: number) => Record<string, Load>)): Cycle[] {
    return Array.from({ length: n }, (_, i) => this.cycle(typeof loads === 'function' ? loads(i) : loads));
  }

  /** Every audit record written so far, in order. */
  audit(): { type: string; payload: Record<string, unknown> }[] {
    return this.cycles.flatMap((c) => c.acts.flatMap((a) => a.audit ?? []));
  }
}

/** Runs `cycles` cycles at `loads` against a world, every new copy observed running after each (the agents). */
export function runCycles(w: World, cycles: number, loads: Record<string, Load>): Harness {
  const h = new Harness(w);
  for (let i = 0; i < cycles; i++) {
    h.cycle(loads);
    w.observeRunning(T0);
  }
  return h;
}
