// One simulated node's container engine and the agent's executor in its place: the containers
// (and cluster-network sandboxes) the node-agent's real decide (controllers/node-agent/decide.ts)
// reads as its facts, the starts and stops it ordered while they take their time, and how a plan
// is carried out on them. Everything the starter and executor do on Docker happens here at once or
// after a seeded delay; nothing here decides — decide does.
import { hostPortList } from '../../src/api/ports.js';
import { runImage } from '../../src/api/spec.js';
import type { ContainerFacts } from '../../controllers/node-agent/facts.js';
import type { AgentPlan, StartOrder, StartProgress } from '../../controllers/node-agent/decide.js';
import { RunningClock } from '../../controllers/node-agent/running-clock.js';

const iso = (ms: number) => new Date(ms).toISOString();

interface Start {
  progress: StartProgress;
  order: StartOrder;
  /** When the container runs (true time). */
  dueAt: number;
}

export class SimEngine {
  /** The node's containers, sandboxes included (role sandbox). */
  readonly containers: ContainerFacts[] = [];
  /** Starts under way, by replica (the executor's workers). */
  readonly starts = new Map<string, Start>();
  /** Stops under way: when each container is stopped, and whether it is removed then. */
  readonly stops = new Map<string, { dueAt: number; remove: boolean }>();
  /** The last plan's containers held out of routing (decide's snapshot.retiring). */
  retiring = new Map<string, number>();
  private made = 0;
  /** The agent's monotonic clock of its containers' running time (the real one, on true time); a new one per agent process. */
  private running: RunningClock;

  constructor(
    readonly node: string,
    /** True time: the agent's monotonic clock. */
    private readonly mono: () => number,
  ) {
    this.running = new RunningClock(mono);
  }

  /**
   * The starts and stops that came due by true time `at` are done; what they stamp (startedAt,
   * finishedAt) is on the node's clock, `now`. Docker's work takes its time whatever the node's
   * clock says: a clock that jumps back must not hold a stop for as long as it jumped.
   */
  advance(now: number, at: number): void {
    for (const [id, s] of [...this.stops]) {
      if (s.dueAt > at) continue;
      this.stops.delete(id);
      const c = this.byId(id);
      if (!c) continue;
      if (s.remove) this.remove(id);
      else this.replace(c, { ...c, state: 'exited', exitCode: 137, finishedAt: iso(now), pid: 0 });
    }
    for (const [replica, s] of [...this.starts]) {
      if (s.dueAt > at) continue;
      this.starts.delete(replica);
      this.run(s.order, now);
    }
  }

  /**
   * Carries out a plan decided at `now` on the node's clock, true time `at`: cancels, stops, then
   * starts (the first part of a start — its stopFirst, the sandboxes it replaces — at once).
   */
  apply(plan: AgentPlan, now: number, at: number, delay: () => number): void {
    this.retiring = plan.retiring;
    for (const c of plan.cancels) this.starts.delete(c.replica);
    for (const s of plan.stops) if (!this.stops.has(s.containerId)) this.stops.set(s.containerId, { dueAt: at + delay(), remove: s.remove });
    for (const o of plan.starts) {
      for (const id of o.stopFirst) this.remove(id);
      for (const id of o.sandbox?.replace ?? []) this.remove(id);
      const { spec } = o.desired;
      this.starts.set(o.replica, {
        order: o,
        dueAt: at + delay(),
        progress: { revision: spec.revision, specHash: spec.specHash, kind: o.kind, phase: 'starting', queuedAt: at, ...(o.sandbox ? { sandboxHash: o.sandbox.spec.hash } : {}) },
      });
    }
  }

  /** What decide reads of the engine, at `now` on the node's wall clock (running times as the agent's RunningClock gives them). */
  facts(now: number): { containers: ContainerFacts[]; sandboxes: ContainerFacts[]; starts: Map<string, StartProgress>; stopping: Set<string> } {
    return {
      containers: this.running.stamp(this.containers.filter((c) => c.role !== 'sandbox'), now),
      sandboxes: this.containers.filter((c) => c.role === 'sandbox'),
      starts: new Map([...this.starts].map(([r, s]) => [r, s.progress])),
      stopping: new Set(this.stops.keys()),
    };
  }

  /** A running container of a replica exits on its own (code 1). */
  crash(id: string, now: number): void {
    const c = this.byId(id);
    if (c?.state === 'running') this.replace(c, { ...c, state: 'exited', exitCode: 1, finishedAt: iso(now), pid: 0 });
  }

  /** The agent process restarts: what it had in memory (starts under way, holds) is gone; Docker's containers stay. */
  agentRestarts(): void {
    this.starts.clear();
    this.running = new RunningClock(this.mono);
    this.retiring = new Map();
  }

  /** The node is removed: the agent stops and removes everything it runs. */
  clear(): void {
    this.containers.length = 0;
    this.starts.clear();
    this.stops.clear();
    this.retiring = new Map();
  }

  private run(o: StartOrder, now: number): void {
    if (o.kind === 'resume' && o.resume) {
      const c = this.byId(o.resume);
      if (c) this.replace(c, { ...c, state: 'running', startedAt: iso(now), exitCode: 0, pid: 1 });
      return;
    }
    const spec = o.desired.spec;
    let networkMode = 'host';
    if (o.sandbox) {
      const reuse = o.sandbox.reuse ? this.byId(o.sandbox.reuse) : undefined;
      const sb = reuse ?? this.add({ ...this.base(spec, now, `sandbox-${o.sandbox.spec.hash.slice(0, 8)}`), role: 'sandbox', sandboxHash: o.sandbox.spec.hash, address: o.sandbox.spec.address });
      networkMode = `container:${sb.id}`;
    }
    this.add({ ...this.base(spec, now, `${spec.revision}-${spec.specHash.slice(0, 8)}`), ports: o.sandbox ? [] : hostPortList(spec), networkMode });
  }

  private base(spec: StartOrder['desired']['spec'], now: number, tail: string): ContainerFacts {
    const id = `${this.node}-c${++this.made}`;
    return {
      id,
      name: `${this.node}-${spec.replica}-${tail}`,
      replica: spec.replica,
      deployment: spec.deployment,
      service: spec.service,
      revision: spec.revision,
      specHash: spec.specHash,
      image: runImage(spec.template),
      state: 'running',
      health: 'none',
      exitCode: 0,
      oomKilled: false,
      createdAt: iso(now),
      startedAt: iso(now),
      ports: [],
      pid: 1,
    };
  }

  private add(c: ContainerFacts): ContainerFacts {
    this.containers.push(c);
    return c;
  }

  private byId(id: string): ContainerFacts | undefined {
    return this.containers.find((c) => c.id === id);
  }

  private replace(c: ContainerFacts, next: ContainerFacts): void {
    this.containers[this.containers.indexOf(c)] = next;
  }

  private remove(id: string): void {
    const i = this.containers.findIndex((c) => c.id === id);
    if (i >= 0) this.containers.splice(i, 1);
    this.stops.delete(id);
  }
}
