// Carries out what the agent decided on Docker: start workers (one per replica, deduplicated,
// bounded create/start slots), stops (shared per container, retried with back-off; a sandbox's
// addresses go before its container: CNI DEL), cancels. It
// keeps what a pass must know about work under way — starts in flight, stops under way or backing
// off — and calls `changed` whenever something finishes.
import { Backoff } from '../../src/backoff.js';
import type { Logger } from '../../src/observability/log.js';
import type { StopReason } from '../../src/api/reasons/agent.js';
import type { ReplicaAddress } from '../../src/api/types.js';
import type { Timings } from '../../src/timings.js';
import { containerName } from './container-spec.js';
import type { AgentPlan, StartOrder, StartProgress } from './decide.js';
import type { DockerView } from './docker-view.js';
import { agentMetrics } from './metrics.js';
import type { ReplicaNetwork } from './network.js';
import { monotonicNow } from './running-clock.js';
import type { Owner } from './engine.js';
import { Slots, StartWorker, type StartFiles, type StarterDeps } from './starter.js';

/** create+start calls in flight at once (see Slots). */
const START_SLOTS = 4;

export class Executor {
  private readonly workers = new Map<string, StartWorker>();
  private readonly slots = new Slots(START_SLOTS);
  private readonly stopping = new Map<string, Promise<void>>();
  /** Containers whose in-flight stop also removes them. */
  private readonly stopRemoves = new Set<string>();
  /** Containers whose stop failed: not retried before the time given (back-off, monotonic clock). */
  private readonly stopRetryAt = new Map<string, { at: number; retry: Backoff }>();
  /** Per replica: the back-off after a start that was interrupted by an error. */
  private readonly startBackoff = new Map<string, Backoff>();
  /** The storage driver caps writable layers (disk.ts): a service's resources.disk goes to Docker as StorageOpt size. */
  capDisk = false;
  /** One-shot timers (back-offs), cleared on stop. */
  private readonly pending = new Set<NodeJS.Timeout>();

  constructor(
    private readonly view: DockerView,
    private readonly owner: Owner,
    private readonly timings: Timings,
    private readonly log: Logger,
    private readonly changed: () => void,
    private readonly network: ReplicaNetwork,
    private readonly sandboxImage: () => string,
    /** The containers' secrets and configs (absent: the agent writes none). */
    private readonly files?: StartFiles,
    private readonly registryAuth?: StarterDeps['registryAuth'],
    /** Called before a replica's container is removed (the logs endpoint keeps its last lines for `jaco logs --previous`). */
    private readonly beforeRemove?: (id: string, replica: string) => Promise<void>,
  ) {}

  /** Starts in flight (or terminally failed), by replica: what decide sees. */
  starts(): Map<string, StartProgress> {
    return new Map([...this.workers].map(([r, w]) => [r, w.progress]));
  }

  /** Containers a stop is under way for, or backing off after a failed one (`mono`: the monotonic clock now). */
  stoppingIds(mono: number): Set<string> {
    for (const id of this.stopRetryAt.keys()) if (!this.view.cache.get(id)) this.stopRetryAt.delete(id);
    return new Set([...this.stopping.keys(), ...[...this.stopRetryAt].filter(([, r]) => r.at > mono).map(([id]) => id)]);
  }

  /** The containers the starts under way are making (their files are being written: never swept). */
  startingNames(): string[] {
    return [...this.workers.values()].map((w) => containerName(this.owner, w.order.replica, w.progress.revision, w.progress.specHash));
  }

  startsInFlight(): number {
    return [...this.workers.values()].filter((w) => w.progress.phase !== 'failed').length;
  }

  /** Cancels, stops, and starts what the plan orders (restarts excepted: see launch). */
  /** `mono`: when the plan was decided, on the monotonic clock (its starts' queuedAt). */
  execute(plan: AgentPlan, opts: { restarts: boolean; mono: number }): void {
    for (const c of plan.cancels) {
      const w = this.workers.get(c.replica);
      if (!w) continue;
      w.cancel();
      this.workers.delete(c.replica);
      if (w.progress.phase !== 'failed') this.log.info({ replica: c.replica, reason: c.reason, revision: w.progress.revision }, 'start cancelled');
    }
    for (const s of plan.starts) if (opts.restarts || s.kind !== 'restart') this.launch(s, opts.mono);
    for (const s of plan.stops) void this.stop(s.containerId, s.reason, s.replica, s.remove).catch(() => undefined);
    const counts = new Map<string, number>();
    for (const c of this.view.cache.values()) counts.set(c.state, (counts.get(c.state) ?? 0) + 1);
    agentMetrics.containers.reset();
    for (const [state, n] of counts) agentMetrics.containers.set({ state }, n);
  }

  /** Starts one order (a restart only once its acknowledgement is stored: it must never run twice). */
  launch(order: StartOrder, queuedAt?: number): void {
    this.workers.get(order.replica)?.cancel();
    const w = new StartWorker(order, queuedAt, {
      docker: this.view.docker,
      slots: this.slots,
      owner: this.owner,
      timings: this.timings,
      log: this.log,
      refresh: (id) => this.view.refresh(id),
      stop: (id, reason, replica) => this.stop(id, reason, replica),
      changed: this.changed,
      network: this.network,
      sandboxImage: this.sandboxImage,
      capDisk: this.capDisk,
      ...(this.files ? { files: this.files } : {}),
      ...(this.registryAuth ? { registryAuth: this.registryAuth } : {}),
    });
    this.workers.set(order.replica, w);
    if (order.command !== undefined) this.log.info({ replica: order.replica, seq: order.command }, 'executing restart command');
    void w.run().then((result) => {
      if (result !== 'cancelled' && order.command !== undefined) agentMetrics.commands.inc({ op: 'restart' });
      const mine = this.workers.get(order.replica) === w;
      if (w.interrupted && mine) {
        // Interrupted by an error (Docker away, a stop that failed): the worker stays in the map,
        // so nothing new starts, until its back-off ends.
        const retry = this.startBackoff.get(order.replica) ?? new Backoff(this.timings.backoffMinMs, this.timings.backoffMaxMs);
        this.startBackoff.set(order.replica, retry);
        const backoffMs = retry.next();
        this.after(backoffMs, () => {
          if (this.workers.get(order.replica) === w) this.workers.delete(order.replica);
          this.changed();
        });
        return;
      }
      if (result === 'started') this.startBackoff.delete(order.replica);
      // A terminal failure stays (decide will not retry it); anything else makes way for the next pass.
      if (mine && result !== 'invalid_spec') this.workers.delete(order.replica);
      this.changed();
    });
  }

  /** A replica the agent no longer reports: forget its back-off. */
  forget(replica: string): void {
    this.startBackoff.delete(replica);
  }

  /**
   * Stops (and removes) a container; concurrent calls for one container share the stop. A call
   * that must remove the container while a stop-only is in flight (a suspended replica's node is
   * removed) waits for that stop and then removes it.
   */
  stop(id: string, reason: StopReason, replica: string, remove = true): Promise<void> {
    const running = this.stopping.get(id);
    if (running) {
      if (!remove || this.stopRemoves.has(id)) return running;
      return running.catch(() => undefined).then(() => this.stop(id, reason, replica, remove));
    }
    if (remove) this.stopRemoves.add(id);
    const facts = this.view.cache.get(id);
    const name = facts?.name ?? id.slice(0, 12);
    const p = (async () => {
      this.log.info({ replica, container: name, reason }, remove ? 'stopping and removing container' : 'stopping container');
      // A sandbox's addresses go first, while its namespace is still there to take them from.
      if (facts?.role === 'sandbox' && facts.address) await this.unplumb(facts.id, facts.state === 'running' ? facts.pid : 0, facts.address);
      await this.view.docker.stop(id);
      if (remove) {
        if (facts && facts.role !== 'sandbox') await this.beforeRemove?.(id, replica).catch((e: Error) => this.log.warn({ container: name, err: e.message }, 'could not keep the last lines of the container\'s log'));
        await this.view.docker.remove(id);
        this.view.cache.remove(id);
        // Its secrets and configs go with it (their tmpfs unmounted), unless a start under way
        // makes a container of the same name (a restart, or one that exited recreated at the same
        // spec): those files are already the new container's.
        if (name !== id.slice(0, 12) && !this.startingNames().includes(name)) await this.files?.release(name).catch((e: Error) => this.log.warn({ container: name, err: e.message }, 'could not remove the container\'s files; the next sweep tries again'));
      } else await this.view.refresh(id);
      agentMetrics.stops.inc({ reason });
    })();
    const tracked = p
      .then(() => void this.stopRetryAt.delete(id))
      .catch((e: Error) => {
        const retry = this.stopRetryAt.get(id)?.retry ?? new Backoff(this.timings.backoffMinMs, this.timings.backoffMaxMs);
        const backoffMs = retry.next();
        this.stopRetryAt.set(id, { at: monotonicNow() + backoffMs, retry });
        this.after(backoffMs + 10, this.changed);
        this.log.warn({ replica, container: name, reason, err: e.message, retryInMs: backoffMs }, 'could not stop the container; will try again');
        throw e;
      })
      .finally(() => {
        this.stopping.delete(id);
        this.stopRemoves.delete(id);
        this.changed();
      });
    this.stopping.set(id, tracked);
    return tracked;
  }

  /** CNI DEL of a sandbox (veth and routes go; a namespace already gone leaves nothing to take). */
  private async unplumb(id: string, pid: number, address: ReplicaAddress): Promise<void> {
    try {
      await this.network.del({ id, pid }, address);
      agentMetrics.cni.inc({ command: 'DEL', result: 'ok' });
    } catch (e) {
      agentMetrics.cni.inc({ command: 'DEL', result: 'failed' });
      throw e;
    }
  }

  private after(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.pending.delete(t);
      fn();
    }, ms);
    this.pending.add(t);
  }

  /** Cancels every start and back-off (containers keep running). */
  stopAll(): void {
    for (const w of this.workers.values()) w.cancel();
    this.workers.clear();
    for (const t of this.pending) clearTimeout(t);
  }
}
