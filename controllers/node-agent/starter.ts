// One asynchronous start of one replica at one (revision, spec hash): pull the image if missing
// (observed pulling, then pending/image_pull_failed with back-off), stop what must go first
// (stop-first, restart), create, start. Each replica's start runs on its own, so a stuck pull
// never holds up another replica or the reconcile loop; a newer desired state cancels it.
import type { Logger } from '../../src/observability/log.js';
import { UnitError } from '../../src/api/units.js';
import type { Timings } from '../../src/timings.js';
import type { ObservedCode, StartResult, StopReason } from '../../src/api/reasons/agent.js';
import { containerName, createOptions, type Owner } from './container-spec.js';
import { runImage } from '../../src/api/spec.js';
import type { StartOrder, StartProgress } from './decide.js';
import { DockerApiError, DockerUnreachableError, statusOf } from './docker.js';
import { agentMetrics } from './metrics.js';
import type { ContainerRuntime } from './runtime.js';
import type { PullAuth } from '../../src/images/access.js';
import { classifyPullError } from '../../src/images/registry.js';
import type { PullPolicy, ServiceSpec } from '../../src/api/types.js';
import { FileDeliveryError } from './files.js';

/** Docker refused the spec (400) or a quantity did not parse: retrying cannot help. */
export class InvalidSpecError extends Error {
  override name = 'InvalidSpecError';
  readonly recoverable = false;
}

class CancelledError extends Error {
  override name = 'CancelledError';
}

/** pullPolicy never, and the image is not on the node. */
class NeverPulledError extends Error {
  override name = 'NeverPulledError';
}

/** Bounds the create+start calls in flight: Docker serialises much of them anyway, and a bound
 * gets the first containers running sooner. Pulls are not bounded (a stuck pull holds no slot). */
export class Slots {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(size: number) {
    this.free = size;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((r) => this.waiting.push(r));
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}

export interface StarterDeps {
  docker: ContainerRuntime;
  /** Shared by every start of the agent. */
  slots: Slots;
  owner: Owner;
  timings: Timings;
  log: Logger;
  /** Inspects a container into the agent's cache. */
  refresh(id: string): Promise<void>;
  /** Stops (and removes) a container, sharing a stop already under way. */
  stop(id: string, reason: StopReason, replica: string): Promise<void>;
  /** Something observable changed: decide again. */
  changed(): void;
  /** The cluster's credentials for an image's registry (registries/), when it has any. */
  registryAuth?(image: string): PullAuth | undefined;
  /** A container's secrets and configs (files.ts): where they go, and writing them before it starts. */
  files?: StartFiles;
}

/** What a start needs of the agent's ReplicaFiles. */
export interface StartFiles {
  dirOf(container: string): string;
  /** Writes the files a container's spec uses (throws FileDeliveryError); undefined when it uses none. */
  prepare(container: string, t: ServiceSpec): Promise<string | undefined>;
  release(container: string): Promise<void>;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

export class StartWorker {
  readonly progress: StartProgress;
  /** Ended by an unexpected error (not a cancel, not a terminal refusal): retry after a back-off. */
  interrupted = false;
  private readonly abort = new AbortController();
  private readonly log: Logger;
  /** What the whole start is reported as, unless a phase says more (pulling, a failure). */
  private readonly baseCode?: ObservedCode;

  constructor(
    readonly order: StartOrder,
    queuedAt: number | undefined,
    private readonly deps: StarterDeps,
  ) {
    const s = order.desired.spec;
    this.baseCode = order.kind === 'restart' ? 'restarting' : order.stopFirst.length ? 'stop_first' : undefined;
    this.progress = { revision: s.revision, specHash: s.specHash, kind: order.kind, phase: 'queued', ...(this.baseCode ? { code: this.baseCode } : {}), ...(queuedAt !== undefined ? { queuedAt } : {}) };
    this.log = deps.log.child({ replica: order.replica, revision: s.revision, specHash: s.specHash.slice(0, 8), start: order.kind });
  }

  get cancelled(): boolean {
    return this.abort.signal.aborted;
  }

  cancel(): void {
    this.abort.abort();
  }

  private update(p: Omit<StartProgress, 'revision' | 'specHash' | 'kind'>): void {
    if (this.cancelled) return;
    delete this.progress.code;
    delete this.progress.details;
    const code = p.code ?? this.baseCode;
    Object.assign(this.progress, p, code ? { code } : {});
    this.deps.changed();
  }

  private check(): void {
    if (this.cancelled) throw new CancelledError('cancelled');
  }

  /** Runs the start to its end; never throws. */
  async run(): Promise<StartResult> {
    let result: StartResult;
    try {
      result = this.order.kind === 'resume' ? await this.resume() : await this.createAndStart();
    } catch (e) {
      if (this.cancelled || e instanceof CancelledError) result = 'cancelled';
      else if (e instanceof InvalidSpecError) {
        result = 'invalid_spec';
        const s = this.order.desired.spec;
        await this.deps.files?.release(containerName(this.deps.owner, s.replica, s.revision, s.specHash)).catch(() => undefined);
        this.log.error({ err: e.message }, 'Docker refused the container spec; not retrying until the desired state changes');
        this.update({ phase: 'failed', code: 'invalid_spec', details: e.message });
      } else {
        // Docker went away, or something unexpected: drop the start; the next pass starts over.
        result = 'cancelled';
        this.interrupted = true;
        const level = e instanceof DockerUnreachableError ? 'warn' : 'error';
        this.log[level]({ err: (e as Error).message }, 'start interrupted; it will be retried');
      }
    }
    agentMetrics.starts.inc({ result });
    if (result === 'started') this.log.info({ kind: this.order.kind }, 'container started');
    return result;
  }

  private async resume(): Promise<StartResult> {
    const id = this.order.resume!;
    const s = this.order.desired.spec;
    // Its files again (a tmpfs lost with a reboot, or never written: the agent stopped before).
    await this.prepareFiles(containerName(this.deps.owner, s.replica, s.revision, s.specHash));
    this.check();
    this.update({ phase: 'starting', containerId: id });
    try {
      await this.deps.docker.start(id);
    } catch (e) {
      if (!(e instanceof DockerApiError)) throw e;
      this.log.warn({ err: e.message }, 'Docker could not start the container');
      await this.deps.refresh(id);
      return 'start_failed';
    }
    await this.deps.refresh(id);
    return 'started';
  }

  private async createAndStart(): Promise<StartResult> {
    const { order, deps } = this;
    const spec = order.desired.spec;
    const name = containerName(deps.owner, spec.replica, spec.revision, spec.specHash);
    let opts;
    try {
      opts = createOptions(spec, deps.owner, deps.files?.dirOf(name));
    } catch (e) {
      if (e instanceof UnitError) throw new InvalidSpecError(e.message);
      throw e;
    }
    // The image comes first, so a stop-first replacement or a restart is not down while pulling;
    // then the files, so it is not down for want of a secret either.
    await this.ensureImage(runImage(spec.template), spec.template.pullPolicy);
    this.check();
    await this.prepareFiles(name);
    this.check();
    if (order.stopFirst.length) {
      this.update({ phase: 'stopping' });
      const reason: StopReason = order.kind === 'restart' ? 'restart' : 'stop_first';
      await Promise.all(order.stopFirst.map((id) => deps.stop(id, reason, order.replica)));
      this.check();
    }
    this.update({ phase: 'creating' });
    const id = await this.create(opts);
    // Cancelled after create: the container stays; the next pass removes it as superseded.
    this.check();
    this.update({ phase: 'starting', containerId: id });
    try {
      await deps.slots.run(() => deps.docker.start(id));
    } catch (e) {
      if (!(e instanceof DockerApiError)) throw e;
      this.log.warn({ err: e.message, container: opts.name }, 'Docker could not start the container');
      await deps.refresh(id);
      return 'start_failed';
    }
    await deps.refresh(id);
    return 'started';
  }

  /**
   * Pulls a missing image (with the cluster's credentials for its registry), retrying with
   * back-off until it succeeds or the start is cancelled. A failure says why in its code:
   * image_not_found, image_unauthorized, registry_unreachable, else image_pull_failed. With
   * pullPolicy never nothing is pulled: the agent waits for the image to be loaded on the node.
   */
  private async ensureImage(image: string, policy: PullPolicy | undefined): Promise<void> {
    const { docker, timings } = this.deps;
    if (await docker.imagePresent(image)) return;
    let backoff = timings.backoffMinMs;
    for (let attempt = 1; ; attempt++) {
      this.check();
      if (attempt === 1 && policy !== 'never') this.update({ phase: 'pulling', code: 'pulling' });
      try {
        if (policy === 'never') {
          if (await docker.imagePresent(image)) return;
          throw new NeverPulledError(`no such image on ${this.deps.owner.node}, and pullPolicy never: load it on the node (docker load), or apply with another pullPolicy`);
        }
        this.log.info({ image, attempt }, 'pulling image');
        await docker.pull(image, this.abort.signal, this.deps.registryAuth?.(image));
        this.check();
        agentMetrics.imagePulls.inc({ result: 'success' });
        this.log.info({ image }, 'image pulled');
        return;
      } catch (e) {
        if (e instanceof DockerUnreachableError || e instanceof CancelledError || this.cancelled) throw e;
        const msg = (e as Error).message;
        const code = e instanceof NeverPulledError ? 'image_not_found' : (classifyPullError(msg) ?? 'image_pull_failed');
        agentMetrics.imagePulls.inc({ result: 'failure' });
        this.log.warn({ image, attempt, code, err: msg, retryInMs: backoff }, 'image pull failed; will retry');
        this.update({ phase: 'pull_failed', code, details: `${image}: ${msg}` });
        await sleep(backoff, this.abort.signal);
        backoff = Math.min(backoff * 2, timings.backoffMaxMs);
      }
    }
  }

  /**
   * Writes the container's secrets and configs on its own tmpfs before it exists, retrying with
   * back-off while they cannot be (a copy not there yet, the tmpfs refused): the replica is
   * reported pending with why, and its container is never created without them.
   */
  private async prepareFiles(name: string): Promise<void> {
    const { files, timings } = this.deps;
    if (!files) return;
    let backoff = timings.backoffMinMs;
    for (;;) {
      this.check();
      try {
        await files.prepare(name, this.order.desired.spec.template);
        return;
      } catch (e) {
        if (!(e instanceof FileDeliveryError)) throw e;
        this.log.warn({ code: e.code, err: e.message, retryInMs: backoff }, 'the replica\'s secrets and configs are not in place; will retry');
        this.update({ phase: 'create_failed', code: e.code, details: e.message });
        await sleep(backoff, this.abort.signal);
        backoff = Math.min(backoff * 2, timings.backoffMaxMs);
      }
    }
  }

  /** Creates the container; 400 is terminal, a name already taken by this very spec is adopted. */
  private async create(opts: ReturnType<typeof createOptions>): Promise<string> {
    const { docker, timings, owner } = this.deps;
    const spec = this.order.desired.spec;
    let backoff = timings.backoffMinMs;
    for (;;) {
      this.check();
      try {
        return await this.deps.slots.run(() => docker.create(opts));
      } catch (e) {
        const status = statusOf(e);
        if (status === undefined) throw e;
        if (status === 400) throw new InvalidSpecError((e as Error).message);
        if (status === 409) {
          // Same name = same cluster, node, replica, revision and spec hash: ours already.
          const name = containerName(owner, spec.replica, spec.revision, spec.specHash);
          const existing = await docker.inspect(name);
          if (existing && existing.replica === spec.replica && existing.specHash === spec.specHash) return existing.id;
        }
        const msg = (e as Error).message;
        this.log.warn({ err: msg, retryInMs: backoff }, 'Docker could not create the container; will retry');
        this.update({ phase: 'create_failed', code: 'create_failed', details: msg });
        await sleep(backoff, this.abort.signal);
        backoff = Math.min(backoff * 2, timings.backoffMaxMs);
      }
    }
  }
}
