// A fleet of hollow nodes: N real node-agents in one process, sharing one etcd client (the
// store), each on its own in-memory runtime. What makes a thousand of them cheap is what they
// share — one gRPC connection, one process, one logger — not a lighter agent: each is the agent
// `jaco agent` runs, with its own lease, watches, cache and passes.
import type { Capacity } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import type { Store } from '../../src/store/store.js';
import type { Timings } from '../../src/timings.js';
import { NodeAgent } from '../node-agent/agent.js';
import { HollowEngine, type HollowEngineOptions } from './engine.js';

/**
 * The pause image of a hollow node's sandboxes, named with a registry. A real agent qualifies
 * `jaco/pause:1` at the cluster's default registry and waits while there is none; a hollow cluster
 * has none (apply would then resolve its made-up images there), and its runtime pulls nothing.
 */
export const HOLLOW_SANDBOX_IMAGE = '127.0.0.1:5000/jaco/pause:1';

export interface FleetOptions {
  store: Store;
  timings: Timings;
  statusIntervalMs: number;
  capacity: Capacity;
  labels: Record<string, string>;
  runtime: HollowEngineOptions;
  log: Logger;
  /** Nodes are <namePrefix><first> … <namePrefix><first + count - 1>, zero-padded to one width. */
  namePrefix: string;
  first: number;
  count: number;
  /** Agents starting at once: registration and the first list are a burst of etcd requests. */
  concurrency?: number;
  /** How far the fleet's clock is off the process's (ms; tests of clock skew, issue 29). */
  clockOffsetMs?: number;
}

/** The name of hollow node i: hollow-0007 among a thousand (names sort as numbers do). */
export function hollowNodeName(prefix: string, i: number, last: number): string {
  return `${prefix}${String(i).padStart(Math.max(4, String(last).length), '0')}`;
}

/** A loopback address of its own per hollow node (127.2.0.0/16): nothing binds it, endpoints show it. */
export function hollowAddress(i: number): string {
  return `127.${2 + Math.floor(i / 65536)}.${(i >> 8) & 255}.${i & 255}`;
}

export class HollowFleet {
  readonly agents = new Map<string, NodeAgent>();
  private readonly runtimes = new Map<string, HollowEngine>();

  constructor(private readonly opts: FleetOptions) {}

  get names(): string[] {
    const { namePrefix, first, count } = this.opts;
    return Array.from({ length: count }, (_, k) => hollowNodeName(namePrefix, first + k, first + count - 1));
  }

  /** Starts every agent (a bounded number at a time); resolves when all have registered and claimed their node. */
  async start(): Promise<void> {
    const names = this.names;
    const queue = names.map((name, k) => ({ name, i: this.opts.first + k }));
    const worker = async () => {
      for (let job = queue.shift(); job; job = queue.shift()) await this.startOne(job.name, job.i);
    };
    await Promise.all(Array.from({ length: Math.min(this.opts.concurrency ?? 50, names.length) }, worker));
  }

  private async startOne(node: string, i: number): Promise<void> {
    const { opts } = this;
    const offset = opts.clockOffsetMs ?? 0;
    const clock = offset ? () => Date.now() + offset : undefined;
    const agent = new NodeAgent({
      ...(clock ? { clock } : {}),
      node,
      store: opts.store,
      timings: opts.timings,
      statusIntervalMs: opts.statusIntervalMs,
      capacity: opts.capacity,
      labels: opts.labels,
      dockerHost: `hollow://${node}`,
      rejoin: true,
      log: opts.log.child({ node }),
      address: hollowAddress(i),
      sandboxImage: HOLLOW_SANDBOX_IMAGE,
      engine: (owner) => {
        const r = new HollowEngine(owner, clock ? { ...opts.runtime, clock } : opts.runtime);
        this.runtimes.set(node, r);
        return r;
      },
    });
    this.agents.set(node, agent);
    void agent.exited.then((e) => {
      opts.log.info({ node, code: e.code }, e.reason);
      this.runtimes.get(node)?.close();
      this.agents.delete(node);
    });
    await agent.start();
  }

  /**
   * Stops the named agents (all without names): their heartbeat leases are revoked, so their
   * nodes turn NotReady at once, and their hollow containers end with them.
   */
  async stop(names: readonly string[] = [...this.agents.keys()]): Promise<void> {
    await Promise.all(
      names.map(async (n) => {
        await this.agents.get(n)?.stop();
        this.runtimes.get(n)?.close();
        this.agents.delete(n);
        this.runtimes.delete(n);
      }),
    );
  }

  /** Containers held by the running agents' runtimes (any state). */
  containers(): number {
    let n = 0;
    for (const r of this.runtimes.values()) n += r.size;
    return n;
  }

  health(): { ok: boolean; detail: Record<string, unknown> } {
    let healthy = 0;
    for (const a of this.agents.values()) if (a.health().ok) healthy++;
    return { ok: healthy === this.agents.size, detail: { agents: this.agents.size, healthy, containers: this.containers() } };
  }
}
