// The hollow container runtime: an in-memory stand-in for Docker behind the agent's runtime
// interface (controllers/node-agent/engine.ts), so a real node-agent — registration, claim,
// heartbeats, passes, observed writes, restarts — runs without a container. Like kubemark's hollow
// kubelet it keeps no process: a container starts after a configured latency, passes or fails its
// health check (or, without one, exits) by a seeded draw, and reports synthetic CPU and memory.
//
// Draws are hashes of (seed, node, replica, how many containers this node made for the replica),
// not a stream: the same seed gives every replica the same fate whatever order starts happen in.
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import type { HealthState } from '../../src/api/types.js';
import type { CgroupUsage } from '../node-agent/cgroup.js';
import { DEREGISTRATION_LABEL, networkLabels, portsOf, PROBE_LABEL, probeFromLabel, type ContainerFacts, type ProbeResult, type ProbeSpec } from '../node-agent/facts.js';
import { DockerApiError, type ContainerEngine, type Owner, type UsageReader } from '../node-agent/engine.js';

export interface HollowEngineOptions {
  /** Time from `start` to running. */
  startLatencyMs: number;
  /** Share of containers (0 … 1) that fail: unhealthy when they have a health check, else exit 1. */
  failRate: number;
  seed: number;
  /** The host's wall clock (default Date.now): tests skew a hollow node's (issue 29). */
  clock?: () => number;
}

/** What a hollow container is: the facts the agent reads, and what drives them. */
interface HollowContainer {
  facts: ContainerFacts;
  /** Docker's health check interval (ms) when the spec has one. */
  healthIntervalMs?: number;
  fails: boolean;
  /** Synthetic steady usage. */
  cpuMillis: number;
  memoryBytes: number;
  timer?: NodeJS.Timeout;
}

const NS_PER_MS = 1_000_000;
const DEFAULT_CPU_MILLIS = 100;
const DEFAULT_MEMORY_BYTES = 64 * 1024 * 1024;

/** A uniform number in [0, 1) from a seed and names: the same inputs, the same number. */
export function draw(seed: number, ...parts: (string | number)[]): number {
  const h = createHash('sha1').update(`${seed}\u0000${parts.join('\u0000')}`).digest();
  return h.readUInt32BE(0) / 2 ** 32;
}

export class HollowEngine implements ContainerEngine, UsageReader {
  readonly host: string;
  readonly usage: UsageReader = this;
  private readonly containers = new Map<string, HollowContainer>();
  private readonly byName = new Map<string, string>();
  /** Containers made per replica: the draw of a restarted replica differs from its first. */
  private readonly made = new Map<string, number>();
  private made0 = 0;
  private listener?: (id: string, action: string) => void;
  private readonly now: () => number;
  private readonly iso = () => new Date(this.now()).toISOString();

  constructor(
    readonly owner: Owner,
    private readonly opts: HollowEngineOptions,
  ) {
    this.now = opts.clock ?? Date.now;
    this.host = `hollow://${owner.node}`;
  }

  /** Containers held (any state). */
  get size(): number {
    return this.containers.size;
  }

  /** Ends every timer (the fleet stops; nothing keeps the process alive). */
  close(): void {
    for (const c of this.containers.values()) clearTimeout(c.timer);
    this.listener = undefined;
  }

  private emit(id: string, action: string): void {
    this.listener?.(id, action);
  }

  /** An agent-run check (healthcheck.http/.tcp): nothing listens in memory, so a container answers unless it is one that fails. */
  async probe(id: string, p: ProbeSpec): Promise<ProbeResult> {
    const c = this.containers.get(id);
    const ok = !!c && c.facts.state === 'running' && !c.fails;
    return { ok, output: `${ok ? 'answered' : 'no answer'} at ${p.host}:${p.port} (hollow)` };
  }

  private must(id: string): HollowContainer {
    const c = this.containers.get(id) ?? this.containers.get(this.byName.get(id) ?? '');
    if (!c) throw new DockerApiError(`No such container: ${id}`, 404);
    return c;
  }

  async ping(): Promise<void> {}

  async listOwn(): Promise<string[]> {
    return [...this.containers.keys()];
  }

  async inspect(idOrName: string): Promise<ContainerFacts | undefined> {
    const c = this.containers.get(idOrName) ?? this.containers.get(this.byName.get(idOrName) ?? '');
    return c ? { ...c.facts } : undefined;
  }

  async imagePresent(): Promise<boolean> {
    return true;
  }

  async pull(): Promise<void> {}

  async create(opts: Docker.ContainerCreateOptions): Promise<string> {
    const name = opts.name ?? '';
    if (this.byName.has(name)) throw new DockerApiError(`Conflict. The container name "/${name}" is already in use`, 409);
    const labels = opts.Labels ?? {};
    const replica = labels[LABELS.replica] ?? '';
    const n = (this.made.get(replica) ?? 0) + 1;
    this.made.set(replica, n);
    const id = createHash('sha256').update(`${this.owner.clusterUid}/${this.owner.node}/${++this.made0}`).digest('hex');
    const u = (what: string) => draw(this.opts.seed, this.owner.node, replica, n, what);
    const nanoCpus = opts.HostConfig?.NanoCpus ?? 0;
    const memLimit = opts.HostConfig?.Memory ?? 0;
    const hc = opts.Healthcheck && opts.Healthcheck.Test?.[0] !== 'NONE' ? opts.Healthcheck : undefined;
    const dereg = Number(labels[DEREGISTRATION_LABEL]);
    const probe = probeFromLabel(labels[PROBE_LABEL]);
    const facts: ContainerFacts = {
      id,
      name,
      replica,
      deployment: labels[LABELS.deployment] ?? '',
      service: labels[LABELS.service] ?? '',
      revision: Number(labels[LABELS.revision]) || 0,
      specHash: labels[LABELS.specHash] ?? '',
      image: opts.Image ?? '',
      state: 'created',
      health: 'none',
      exitCode: 0,
      oomKilled: false,
      createdAt: this.iso(),
      ports: portsOf(opts.ExposedPorts),
      pid: 0,
      ...(dereg > 0 ? { deregistrationMs: dereg } : {}),
      ...(probe ? { probe } : {}),
      ...(opts.HostConfig?.NetworkMode ? { networkMode: opts.HostConfig.NetworkMode } : {}),
      ...networkLabels(labels),
    };
    this.containers.set(id, {
      facts,
      ...(hc ? { healthIntervalMs: Math.max(1, (hc.Interval ?? 30_000 * NS_PER_MS) / NS_PER_MS) } : {}),
      // A sandbox (the pause process) never fails: only the replica's own container does.
      fails: facts.role !== 'sandbox' && u('fail') < this.opts.failRate,
      // Busy at 20 … 80 % of its limit (or of 100m and 64 MiB without one).
      cpuMillis: Math.round((nanoCpus / NS_PER_MS || DEFAULT_CPU_MILLIS) * (0.2 + 0.6 * u('cpu'))),
      memoryBytes: Math.round((memLimit || DEFAULT_MEMORY_BYTES) * (0.2 + 0.6 * u('memory'))),
    });
    this.byName.set(name, id);
    this.emit(id, 'create');
    return id;
  }

  /** Resolves once the container runs (after the start latency); a failing one without a health check then exits. */
  async start(id: string): Promise<void> {
    const c = this.must(id);
    if (c.facts.state === 'running') return;
    clearTimeout(c.timer);
    await new Promise<void>((resolve) => {
      c.timer = setTimeout(() => {
        c.timer = undefined;
        if (!this.containers.has(id)) return resolve();
        this.set(c, { state: 'running', startedAt: this.iso(), exitCode: 0, health: c.healthIntervalMs ? 'starting' : 'none' });
        this.emit(id, 'start');
        if (c.healthIntervalMs) this.after(c, c.healthIntervalMs, () => this.health(c, c.fails ? 'unhealthy' : 'healthy'));
        else if (c.fails) this.after(c, 0, () => this.exit(c, 1));
        resolve();
      }, this.opts.startLatencyMs);
    });
  }

  async stop(id: string): Promise<void> {
    const c = this.containers.get(id);
    if (!c || c.facts.state !== 'running') return;
    this.exit(c, 143);
  }

  async remove(id: string): Promise<void> {
    const c = this.containers.get(id);
    if (!c) return;
    clearTimeout(c.timer);
    this.containers.delete(id);
    this.byName.delete(c.facts.name);
    this.emit(id, 'destroy');
  }

  async stats(id: string): Promise<CgroupUsage | undefined> {
    return this.read(id);
  }

  /** Synthetic usage: steady CPU since the start, steady memory. */
  read(id: string): CgroupUsage | undefined {
    const c = this.containers.get(id);
    if (!c || c.facts.state !== 'running' || !c.facts.startedAt) return undefined;
    const ranMs = this.now() - Date.parse(c.facts.startedAt);
    return { cpuUsageNs: Math.max(0, ranMs) * c.cpuMillis * 1000, memoryBytes: c.memoryBytes };
  }

  retain(): void {}

  async watchEvents(onEvent: (id: string, action: string) => void, signal: AbortSignal): Promise<{ ended: Promise<void> }> {
    this.listener = onEvent;
    const ended = new Promise<void>((resolve) => {
      const done = () => {
        if (this.listener === onEvent) this.listener = undefined;
        resolve();
      };
      if (signal.aborted) done();
      else signal.addEventListener('abort', done, { once: true });
    });
    return { ended };
  }

  private set(c: HollowContainer, p: Partial<ContainerFacts>): void {
    c.facts = { ...c.facts, ...p };
  }

  private after(c: HollowContainer, ms: number, fn: () => void): void {
    c.timer = setTimeout(() => {
      c.timer = undefined;
      if (this.containers.get(c.facts.id) === c && c.facts.state === 'running') fn();
    }, ms);
  }

  private health(c: HollowContainer, h: HealthState): void {
    this.set(c, { health: h, lastHealthAt: this.iso(), healthOutput: h === 'healthy' ? 'ok' : 'hollow: the seeded draw failed this health check' });
    this.emit(c.facts.id, `health_status: ${h}`);
  }

  private exit(c: HollowContainer, code: number): void {
    clearTimeout(c.timer);
    c.timer = undefined;
    this.set(c, { state: 'exited', exitCode: code, finishedAt: this.iso() });
    this.emit(c.facts.id, 'die');
  }
}
