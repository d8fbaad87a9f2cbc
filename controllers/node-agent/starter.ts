// One asynchronous start of one replica at one (revision, spec hash): pull the image if missing
// (observed pulling, then pending/image_pull_failed with back-off), stop what must go first
// (stop-first, restart), on the cluster network make its sandbox and give it the replica's
// addresses (pending/network_failed with back-off), create, start. Each replica's start runs on
// its own, so a stuck pull never holds up another replica or the reconcile loop; a newer desired
// state cancels it.
import type { Logger } from '../../src/observability/log.js';
import { UnitError } from '../../src/api/units.js';
import { Backoff, sleep } from '../../src/backoff.js';
import type { Timings } from '../../src/timings.js';
import type { ObservedCode, StartResult, StopReason } from '../../src/api/reasons/agent.js';
import { containerName, createOptions } from './container-spec.js';
import { runImage } from '../../src/api/spec.js';
import type { SandboxOrder, StartOrder, StartProgress } from './decide.js';
import { holdsAddress } from './cni.js';
import { CniError, type ReplicaNetwork } from './network.js';
import { sandboxCreateOptions, sandboxName } from './sandbox.js';
import { agentMetrics } from './metrics.js';
import { DockerApiError, DockerUnreachableError, statusOf, type ContainerEngine, type Owner } from './engine.js';
import type { PullAuth } from '../../src/images/access.js';
import { classifyPullError } from '../../src/images/registry.js';
import type { PullPolicy, ServiceSpec } from '../../src/api/types.js';
import { FileDeliveryError } from './files.js';
import { LABELS } from '../../src/api/labels.js';

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
  docker: ContainerEngine;
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
  /** Cluster network: plumbs a sandbox's addresses (CNI ptp). */
  network: ReplicaNetwork;
  /** The storage driver caps writable layers: resources.disk becomes StorageOpt size. */
  capDisk?: boolean;
  /** The pause image, qualified at the cluster's default registry; throws when it cannot be (a short name, no default). */
  sandboxImage(): string;
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

export class StartWorker {
  readonly progress: StartProgress;
  /** Ended by an unexpected error (not a cancel, not a terminal refusal): retry after a back-off. */
  interrupted = false;
  private readonly abort = new AbortController();
  private readonly log: Logger;
  /** What the whole start is reported as, unless a phase says more (pulling, a failure). */
  private readonly baseCode?: ObservedCode;
  /** The last create found its container already there (by name) rather than making it. */
  private adopted = false;

  constructor(
    readonly order: StartOrder,
    queuedAt: number | undefined,
    private readonly deps: StarterDeps,
  ) {
    const s = order.desired.spec;
    this.baseCode = order.kind === 'restart' ? 'restarting' : order.stopFirst.length ? 'stop_first' : undefined;
    this.progress = {
      revision: s.revision,
      specHash: s.specHash,
      ...(order.sandbox ? { sandboxHash: order.sandbox.spec.hash } : {}),
      kind: order.kind,
      phase: 'queued',
      ...(this.baseCode ? { code: this.baseCode } : {}),
      ...(queuedAt !== undefined ? { queuedAt } : {}),
    };
    this.log = deps.log.child({ replica: order.replica, revision: s.revision, specHash: s.specHash.slice(0, 8), start: order.kind });
  }

  get cancelled(): boolean {
    return this.abort.signal.aborted;
  }

  cancel(): void {
    this.abort.abort();
  }

  private update(p: Omit<StartProgress, 'revision' | 'specHash' | 'sandboxHash' | 'kind'>): void {
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
    const sb = order.sandbox;
    const filesDir = deps.files?.dirOf(name);
    // A bad quantity is found before anything is stopped (the sandbox id is only a placeholder here).
    try {
      createOptions(spec, deps.owner, { filesDir, sandbox: sb ? (sb.reuse ?? 'sandbox') : undefined, capDisk: deps.capDisk });
    } catch (e) {
      if (e instanceof UnitError) throw new InvalidSpecError(e.message);
      throw e;
    }
    // The images come first, so a stop-first replacement or a restart is not down while pulling;
    // then the files, so it is not down for want of a secret either.
    await this.ensureImage(runImage(spec.template), spec.template.pullPolicy);
    const sandboxImage = sb && !sb.reuse ? await this.ensureSandboxImage() : undefined;
    this.check();
    await this.prepareFiles(name);
    this.check();
    const reason: StopReason = order.kind === 'restart' ? 'restart' : 'stop_first';
    if (order.stopFirst.length || sb?.replace.length) {
      this.update({ phase: 'stopping' });
      await Promise.all(order.stopFirst.map((id) => deps.stop(id, reason, order.replica)));
      this.check();
      // Then the sandboxes they were in: their addresses first (CNI DEL), then the container.
      await Promise.all((sb?.replace ?? []).map((id) => deps.stop(id, reason, order.replica)));
      this.check();
    }
    const sandbox = sb ? await this.ensureSandbox(sb, sandboxImage) : undefined;
    this.update({ phase: 'creating' });
    const opts = createOptions(spec, deps.owner, { filesDir, sandbox, capDisk: deps.capDisk });
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
   * One step of the start, tried until it returns: each try first checks the start is still
   * wanted; a failure goes to `failed`, which reports it (log, observed phase) or throws it when
   * retrying cannot help, and the next try waits the agent's back-off (backoffMinMs doubling to
   * backoffMaxMs) or until the start is cancelled.
   */
  private async retrying<T>(tryOnce: (attempt: number) => Promise<T>, failed: (e: unknown, attempt: number, retryInMs: number) => void | Promise<void>): Promise<T> {
    const retry = new Backoff(this.deps.timings.backoffMinMs, this.deps.timings.backoffMaxMs);
    for (let attempt = 1; ; attempt++) {
      this.check();
      try {
        return await tryOnce(attempt);
      } catch (e) {
        await failed(e, attempt, retry.peek());
        await sleep(retry.next(), this.abort.signal);
      }
    }
  }

  /**
   * Pulls a missing image (with the cluster's credentials for its registry), retrying with
   * back-off until it succeeds or the start is cancelled. A failure says why in its code:
   * image_not_found, image_unauthorized, registry_unreachable, secret_missing (the registry's
   * password not copied to the node yet), else image_pull_failed. With
   * pullPolicy never nothing is pulled: the agent waits for the image to be loaded on the node.
   */
  private async ensureImage(image: string, policy: PullPolicy | undefined): Promise<void> {
    const { docker } = this.deps;
    if (await docker.imagePresent(image)) return;
    await this.retrying(
      async (attempt) => {
        if (attempt === 1 && policy !== 'never') this.update({ phase: 'pulling', code: 'pulling' });
        if (policy === 'never') {
          if (await docker.imagePresent(image)) return;
          throw new NeverPulledError(`no such image on ${this.deps.owner.node}, and pullPolicy never: load it on the node (docker load), or apply with another pullPolicy`);
        }
        this.log.info({ image, attempt }, 'pulling image');
        await docker.pull(image, this.abort.signal, this.deps.registryAuth?.(image));
        this.check();
        agentMetrics.imagePulls.inc({ result: 'success' });
        this.log.info({ image }, 'image pulled');
      },
      (e, attempt, retryInMs) => {
        if (e instanceof DockerUnreachableError || e instanceof CancelledError || this.cancelled) throw e;
        const msg = (e as Error).message;
        // The registry's password not on the node yet (its secret's copy): said as the secret's wait.
        const code = e instanceof NeverPulledError ? 'image_not_found' : e instanceof FileDeliveryError ? e.code : (classifyPullError(msg) ?? 'image_pull_failed');
        agentMetrics.imagePulls.inc({ result: 'failure' });
        this.log.warn({ image, attempt, code, err: msg, retryInMs }, 'image pull failed; will retry');
        this.update({ phase: 'pull_failed', code, details: `${image}: ${msg}` });
      },
    );
  }

  /**
   * Writes the container's secrets and configs on its own tmpfs before it exists, retrying with
   * back-off while they cannot be (a copy not there yet, the tmpfs refused): the replica is
   * reported pending with why, and its container is never created without them.
   */
  private async prepareFiles(name: string): Promise<void> {
    const { files } = this.deps;
    if (!files) return;
    await this.retrying(
      () => files.prepare(name, this.order.desired.spec.template),
      (e, _attempt, retryInMs) => {
        if (!(e instanceof FileDeliveryError)) throw e;
        this.log.warn({ code: e.code, err: e.message, retryInMs }, 'the replica\'s secrets and configs are not in place; will retry');
        this.update({ phase: 'create_failed', code: e.code, details: e.message });
      },
    );
  }

  /** The pause image, qualified and on the node (pulled like any image, with the cluster's credentials). */
  private async ensureSandboxImage(): Promise<string> {
    const image = await this.retrying(
      async () => this.deps.sandboxImage(),
      // No default registry to resolve a short name at (jaco registry default), until there is one.
      (e) => this.update({ phase: 'pull_failed', code: 'image_pull_failed', details: `sandbox image: ${(e as Error).message}` }),
    );
    await this.ensureImage(image, 'missing');
    return image;
  }

  /**
   * The replica's sandbox, running and holding its addresses: the one the order reuses, else one
   * made now (or found by its name: a start cut short after its create). Its addresses are given
   * (CNI ADD) unless it holds them already; a failure is undone (CNI DEL), reported as
   * pending/network_failed with the plugin's error, and retried with back-off.
   */
  private async ensureSandbox(sb: SandboxOrder, image: string | undefined): Promise<string> {
    const { deps, order } = this;
    const { docker, network } = deps;
    this.update({ phase: 'sandbox' });
    let id: string;
    // One made now holds nothing yet: no need to look (one found by its name, a start cut short, may).
    let fresh = false;
    if (sb.reuse) id = sb.reuse;
    else {
      id = await this.create(sandboxCreateOptions(order.desired.spec, sb.spec, deps.owner, image!), sandboxName(deps.owner, order.replica, sb.spec.hash));
      fresh = !this.adopted;
    }
    this.check();
    let ns: { id: string; pid: number } | undefined;
    let named = '';
    return this.retrying(
      async () => {
        await deps.slots.run(() => docker.start(id));
        const facts = await docker.inspect(id);
        if (!facts || facts.state !== 'running') throw new Error(`sandbox ${id.slice(0, 12)} is not running (${facts?.state ?? 'gone'}${facts?.error ? `: ${facts.error}` : ''})`);
        ns = { id, pid: facts.pid };
        named = facts.name;
        const have = fresh ? [] : await network.addresses(ns);
        if (holdsAddress(have, sb.spec.address)) return id;
        // Half plumbed (an agent stopped in the middle): undone before it is done again.
        if (have.length) await network.del(ns, sb.spec.address);
        // Not in a slot: the plugin is no engine call, and the engine can go on with other starts meanwhile.
        const t0 = performance.now();
        await network.add(ns, sb.spec.address);
        agentMetrics.cni.inc({ command: 'ADD', result: 'ok' });
        this.log.info({ sandbox: facts.name, ipv4: sb.spec.address.ipv4, ipv6: sb.spec.address.ipv6, addMs: Math.round(performance.now() - t0) }, 'sandbox plumbed');
        await deps.refresh(id);
        return id;
      },
      async (e, _attempt, retryInMs) => {
        if (!(e instanceof CniError)) throw e;
        agentMetrics.cni.inc({ command: 'ADD', result: 'failed' });
        // A failed ADD leaves what it did half done: DEL undoes it (the CNI contract).
        await network.del(ns!, sb.spec.address).catch(() => undefined);
        fresh = false;
        this.log.warn({ sandbox: named, err: e.message, retryInMs }, 'could not give the sandbox its addresses; will retry');
        this.update({ phase: 'network_failed', code: 'network_failed', details: e.message });
      },
    );
  }

  /** Creates the container; 400 is terminal, a name already taken by this very spec is adopted. */
  private async create(opts: ReturnType<typeof createOptions>, name = containerName(this.deps.owner, this.order.replica, this.order.desired.spec.revision, this.order.desired.spec.specHash)): Promise<string> {
    const { docker } = this.deps;
    this.adopted = false;
    const spec = this.order.desired.spec;
    return this.retrying(
      async () => {
        try {
          return await this.deps.slots.run(() => docker.create(opts));
        } catch (e) {
          if (statusOf(e) !== 409) throw e;
          // Same name = same cluster, node, replica, revision and spec hash (a sandbox: same
          // sandbox spec): ours already.
          const existing = await docker.inspect(name);
          const sandbox = opts.Labels?.[LABELS.role] === 'sandbox';
          if (!existing || existing.replica !== spec.replica || (sandbox ? existing.sandboxHash !== opts.Labels?.[LABELS.sandboxHash] : existing.specHash !== spec.specHash)) throw e;
          this.adopted = true;
          return existing.id;
        }
      },
      (e, _attempt, retryInMs) => {
        const status = statusOf(e);
        if (status === undefined) throw e;
        if (status === 400) throw new InvalidSpecError((e as Error).message);
        const msg = (e as Error).message;
        this.log.warn({ err: msg, retryInMs }, 'Docker could not create the container; will retry');
        this.update({ phase: 'create_failed', code: 'create_failed', details: msg });
      },
    );
  }
}
