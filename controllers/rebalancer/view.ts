// One view of the cluster per cycle, read from the snapshot once: each node with its pressure
// signal (the EWMA folded with its fresh sample) and why it takes no moves, the move book, the
// placer (on first use), the pending services with when this leader first saw them, every
// service's current placement and priority, and the cooldowns and the ping-pong exclusion that
// planners filter candidates and destinations with. The planners and the arbiter read this view
// (or what the orchestrator hands them from it), never the snapshot: its shape is known here alone.
import { nodeLabels, nodeReady, unschedulableBecause } from '../../src/api/nodes.js';
import type { Node, PressureSample, ServiceSpec } from '../../src/api/types.js';
import { formatDuration } from '../../src/api/units.js';
import { MoveBook, type Copy } from '../moves/move.js';
import type { Placer } from '../placement/placer.js';
import { atLeast, byName, type Config } from './config.js';
import { PingPong } from './ping-pong.js';
import type { NodeState, NodeView, PendingService, RebalancerState, Snapshot } from './plan.js';
import { composite, fold, readingOf } from './pressure.js';

export class CycleView {
  /** Registered nodes by name. */
  readonly nodes: ReadonlyMap<string, Node>;
  /** Nodes whose agent is Ready (a move toward any other is abandoned). */
  readonly ready: ReadonlySet<string>;
  /** Node labels by name (placement conformance). */
  readonly labels: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** Every node with a fresh sample, by name; the others are silent. */
  readonly signal: readonly NodeView[];
  readonly viewOf: ReadonlyMap<string, NodeView>;
  readonly silent: readonly { node: string; why: string }[];
  /** The EWMAs and counters the next cycle starts from. */
  readonly nextNodes: ReadonlyMap<string, NodeState>;
  /** Node → when it last received a move, within the node cooldown. */
  readonly received: ReadonlyMap<string, number>;
  /** The replicas with the moves this cycle starts (the budget of every mover). */
  readonly book: MoveBook;
  /** Services pending for capacity, with when this leader first saw each (coalescing waits a grace). */
  readonly pending: readonly PendingService[];
  readonly pendingSince: ReadonlyMap<string, number>;
  /** Every service's current priority by `<deployment>/<service>` (the deployment's spec); its placement is the book's. */
  private readonly priorities: ReadonlyMap<string, number>;
  /** The ping-pong exclusion and the balancing epoch a move starts in. */
  readonly pingPong: PingPong;
  private readonly samples: ReadonlyMap<string, PressureSample>;
  private readonly now: number;
  private readonly cooldownReplicaMs: number;
  private readonly placerOf: () => Placer;
  private kept?: Placer;

  constructor(state: RebalancerState, snap: Snapshot, now: number, config: Config, countedCycle: boolean) {
    this.nodes = new Map(snap.nodes.map((n) => [n.metadata.name, n]));
    this.ready = new Set(snap.nodes.filter((n) => nodeReady(snap.heartbeats.get(n.metadata.name))).map((n) => n.metadata.name));
    this.labels = new Map(snap.nodes.map((n) => [n.metadata.name, nodeLabels(n)]));
    this.received = new Map([...state.received].filter(([, t]) => now - t < config.cooldownNodeMs));
    // Why each node takes no moves (NotReady, cordoned, draining…), as the scheduler judges it.
    const whyIneligible = new Map(snap.nodes.map((n) => [n.metadata.name, unschedulableBecause(n, snap.heartbeats.get(n.metadata.name), snap.drains.get(n.metadata.name))]));
    const signal = readSignal(state, snap.samples, this.nodes, whyIneligible, this.received, now, config, countedCycle);
    this.signal = signal.views;
    this.viewOf = new Map(signal.views.map((v) => [v.node, v]));
    this.silent = signal.silent;
    this.nextNodes = signal.nextNodes;
    this.samples = snap.samples;
    this.book = new MoveBook(snap);
    const pendingSince = new Map<string, number>();
    this.pending = (snap.pending ?? []).map((p) => {
      const key = `${p.deployment}/${p.service}`;
      const since = state.pendingSince?.get(key) ?? now;
      pendingSince.set(key, since);
      return { ...p, since };
    });
    this.pendingSince = pendingSince;
    this.priorities = snap.priorities ?? new Map();
    this.pingPong = new PingPong(snap.replicas, snap.eligibility, snap.generations);
    this.placerOf = snap.placer;
    this.now = now;
    this.cooldownReplicaMs = config.cooldownReplicaMs;
  }

  /** The placer, built on first use: most cycles stop at a gate and never need it. */
  placer(): Placer {
    return (this.kept ??= this.placerOf());
  }

  /** A node's fresh pressure sample (its replicas' measured usage). */
  sample(node: string): PressureSample | undefined {
    return this.samples.get(node);
  }

  /** A service's priority now (the deployment's spec: priority is not in the spec hash, templates may lag). */
  priorityOf(deployment: string, service: string, template: ServiceSpec): number {
    return this.priorities.get(`${deployment}/${service}`) ?? template.priority ?? 0;
  }

  /** A replica placed or moved within the replica cooldown stays: how long ago, if so. */
  replicaCooldown(copy: Copy): number | undefined {
    const ago = this.now - Date.parse(copy.desired.spec.placedAt);
    return ago < this.cooldownReplicaMs ? ago : undefined;
  }

  /** A node that received a move within the node cooldown takes none: how long ago, if so. */
  nodeCooldown(node: string): number | undefined {
    const at = this.received.get(node);
    return at === undefined ? undefined : this.now - at;
  }

  nodeCooldownText(node: string): string | undefined {
    const ago = this.nodeCooldown(node);
    return ago === undefined ? undefined : `received a move ${formatDuration(ago)} ago (node cooldown)`;
  }

  /** The nodes a service moved away from since balancing was last triggered (seed 002): none takes it back. */
  movedAwayFrom(deployment: string, service: string): ReadonlySet<string> {
    return this.pingPong.excluded(deployment, service);
  }
}

/** Each node's EWMA folded with its fresh sample, its view, and the nodes that are silent. */
function readSignal(
  state: RebalancerState,
  samples: ReadonlyMap<string, PressureSample>,
  nodes: ReadonlyMap<string, Node>,
  whyIneligible: ReadonlyMap<string, string | undefined>,
  received: ReadonlyMap<string, number>,
  now: number,
  config: Config,
  countedCycle: boolean,
) {
  const nextNodes = new Map<string, NodeState>();
  const views: NodeView[] = [];
  const silent: { node: string; why: string }[] = [];
  for (const name of [...new Set([...nodes.keys(), ...samples.keys()])].sort(byName)) {
    const prev = state.nodes.get(name);
    const sample = samples.get(name);
    const node = nodes.get(name);
    if (!sample || !node) {
      silent.push({ node: name, why: !node ? 'not registered' : 'no fresh pressure sample' });
      if (prev) nextNodes.set(name, { ewma: prev.ewma, over: countedCycle ? 0 : prev.over });
      continue;
    }
    const ewma = fold(prev?.ewma, readingOf(sample), now, config.ewmaWindowMs);
    const c = composite(ewma);
    const over = countedCycle ? (atLeast(c.pressure, config.trigger) ? (prev?.over ?? 0) + 1 : 0) : (prev?.over ?? 0);
    nextNodes.set(name, { ewma, over });
    const got = received.get(name);
    const why = whyIneligible.get(name);
    views.push({
      node: name,
      cpu: ewma.cpu,
      memory: ewma.memory,
      pressure: c.pressure,
      dominant: c.dominant,
      over,
      sampleAt: sample.time,
      ...(why ? { ineligible: why } : {}),
      ...(got !== undefined ? { cooldownMs: now - got } : {}),
    });
  }
  return { views, silent, nextNodes };
}
