// The manager: one per process. It owns the process's cache (one reflector over the union of
// what its controllers read) and runs every controller on it, each on its own runner. `jaco
// controller all` is one manager with every controller; a node-agent is one manager with one
// unelected controller over its own prefixes; tests start a manager with one controller.
import type { Logger } from '../observability/log.js';
import type { Store } from '../store/store.js';
import type { Timings } from '../timings.js';
import { Cache, type CacheOptions } from './cache.js';
import type { Watchable } from './watchable.js';
import { Runner, type ControllerSpec, type PassResult, type RunnerDeps, type RunnerHealth } from './runner.js';

export interface ManagerOptions {
  store: Store;
  timings: Timings;
  log: Logger;
  /** This process, as shown in election keys and logs. */
  identity: string;
  clock?: () => number;
  /** How the cache watches (an agent restricted by RBAC watches each of its prefixes). */
  cache?: Omit<CacheOptions, 'log'>;
  /** Sources held besides what the controllers read (e.g. for /healthz or a dashboard). */
  extraSources?: Watchable[];
  /** Test seam: see RunnerDeps.beforeCommit. */
  beforeCommit?: RunnerDeps['beforeCommit'];
  /** The simulation drives every pass: see RunnerDeps.manual. */
  manual?: boolean;
  /** The simulation sends a stepped pass's acts step by step: see RunnerDeps.stepCommits. */
  stepCommits?: boolean;
}

/** Consistency check period of the cache, per timings (a lost event is found within this). */
const CHECK_EVERY = { production: 60_000, fast: 5_000 } as const;

export class Manager {
  readonly cache: Cache;
  readonly runners: Runner[] = [];
  private started = false;

  constructor(
    readonly opts: ManagerOptions,
    specs: ControllerSpec<any, any, any>[],
  ) {
    const names = [...new Set([...specs.flatMap((s) => s.reads), ...(opts.extraSources ?? [])])].sort() as Watchable[];
    this.cache = Cache.onStore(opts.store, names, { log: opts.log, checkEveryMs: CHECK_EVERY[opts.timings.name], ...opts.cache });
    for (const spec of specs)
      this.runners.push(new Runner(spec, { store: opts.store, cache: this.cache, timings: opts.timings, log: opts.log, identity: opts.identity, clock: opts.clock, beforeCommit: opts.beforeCommit, manual: opts.manual, stepCommits: opts.stepCommits }));
  }

  runner<S = unknown, Snap = unknown, M = unknown>(name: string): Runner<S, Snap, M> {
    const r = this.runners.find((x) => x.name === name);
    if (!r) throw new Error(`no controller named ${name} in this process`);
    return r as Runner<S, Snap, M>;
  }

  /** Lists everything once, then starts every controller. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    await this.cache.start();
    for (const r of this.runners) r.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.runners.map((r) => r.stop()));
    await this.cache.stop();
  }

  /**
   * For /healthz: ok while the cache is synced (not while it lists again, a store replaced under
   * it included); each controller leading or standing by; the store followed and its replacements.
   */
  health(): { ok: boolean; detail: Record<string, unknown> } {
    const controllers: Record<string, RunnerHealth> = Object.fromEntries(this.runners.map((r) => [r.name, r.health()]));
    const store = this.cache.storeHealth();
    return { ok: this.cache.synced, detail: { synced: this.cache.synced, revision: this.cache.revision, ...(store ? { store } : {}), controllers } };
  }
}

/** A process running one controller (tests, benchmarks): its manager and the controller's runner. */
export interface SingleController<S, Snap, M, R extends PassResult<S, M>> {
  manager: Manager;
  runner: Runner<S, Snap, M, R>;
  stop(): Promise<void>;
}

/** Starts a manager running one controller. */
export async function startController<S, Snap, M, R extends PassResult<S, M>>(opts: ManagerOptions, spec: ControllerSpec<S, Snap, M, R>): Promise<SingleController<S, Snap, M, R>> {
  const manager = new Manager(opts, [spec]);
  await manager.start();
  return { manager, runner: manager.runners[0] as Runner<S, Snap, M, R>, stop: () => manager.stop() };
}
