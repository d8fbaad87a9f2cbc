// The agent's picture of its containers: connects, follows the runtime's event stream, resyncs
// (on connect and every dockerResyncMs, catching what the stream missed), and keeps the container
// cache. When Docker is away it marks itself down and retries with back-off; containers are left
// as they are. Every change calls `changed` so the agent decides again.
import { Backoff, sleep } from '../../src/backoff.js';
import type { Logger } from '../../src/observability/log.js';
import type { Timings } from '../../src/timings.js';
import { ContainerCache } from './container-cache.js';
import { agentMetrics } from './metrics.js';
import { DockerUnreachableError, type ContainerEngine } from './engine.js';


export class DockerView {
  readonly cache = new ContainerCache();
  readonly host: string;
  up = false;
  /** A full resync has completed since the last connect (the cache is complete). */
  synced = false;
  private downSince?: number;
  private eventsAbort?: AbortController;
  private resyncTimer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    readonly docker: ContainerEngine,
    private readonly timings: Timings,
    private readonly log: Logger,
    private readonly changed: () => void,
    /** Each time the view holds every container again (first at start, then after Docker was down). */
    private readonly onSynced: () => void = () => undefined,
  ) {
    this.host = docker.host;
  }

  async start(): Promise<void> {
    await this.ping();
    void this.loop();
    this.resyncTimer = setInterval(() => void this.resyncTick(), this.timings.dockerResyncMs);
  }

  /** Stops following Docker (containers keep running). */
  stop(): void {
    this.stopped = true;
    clearInterval(this.resyncTimer);
    this.eventsAbort?.abort();
  }

  private setUp(up: boolean, err?: Error): void {
    agentMetrics.dockerUp.set(up ? 1 : 0);
    if (up && !this.up) {
      if (this.downSince !== undefined) this.log.info({ docker: this.host, downForMs: Date.now() - this.downSince }, 'Docker is reachable again');
      this.downSince = undefined;
    }
    if (!up && (this.up || this.downSince === undefined)) {
      this.downSince = Date.now();
      this.synced = false;
      this.log.error({ docker: this.host, err: err?.message }, `cannot reach Docker at ${this.host}; containers are left as they are, retrying with back-off`);
    }
    this.up = up;
  }

  private async ping(): Promise<boolean> {
    try {
      await this.docker.ping();
      this.setUp(true);
      return true;
    } catch (e) {
      this.setUp(false, e as Error);
      return false;
    }
  }

  /** Connects, follows events, resyncs; on any failure marks Docker down and retries with back-off. */
  private async loop(): Promise<void> {
    const retry = new Backoff(this.timings.backoffMinMs, this.timings.backoffMaxMs);
    while (!this.stopped) {
      const ac = new AbortController();
      this.eventsAbort = ac;
      try {
        await this.docker.ping();
        this.setUp(true);
        // Events first, then the full resync, so nothing that happens in between is missed.
        const { ended } = await this.docker.watchEvents((id, action) => this.onEvent(id, action), ac.signal);
        await this.resync();
        retry.reset();
        await ended;
        if (this.stopped) return;
        throw new DockerUnreachableError(this.host, 'the event stream ended');
      } catch (e) {
        ac.abort();
        if (this.stopped) return;
        this.setUp(false, e as Error);
        this.changed();
        await sleep(retry.next());
      }
    }
  }

  /** Lists and inspects every container of this agent (adoption on start; missed events later). */
  private async resync(): Promise<void> {
    const since = this.cache.begin();
    const ids = await this.docker.listOwn();
    const facts = await Promise.all(ids.map((id) => this.docker.inspect(id)));
    for (const f of facts) if (f) this.cache.put(f, since);
    this.cache.sweep(new Set(ids), since);
    const first = !this.synced;
    if (first) this.log.info({ containers: ids.length }, 'containers adopted from Docker');
    this.synced = true;
    this.changed();
    if (first) this.onSynced();
  }

  private async resyncTick(): Promise<void> {
    if (this.stopped || !this.up) return;
    try {
      await this.resync();
    } catch (e) {
      // The loop notices through its event stream; make sure it does.
      this.setUp(false, e as Error);
      this.eventsAbort?.abort();
    }
  }

  private onEvent(id: string, action: string): void {
    if (action.startsWith('exec_')) return; // health check probes
    if (action === 'destroy') {
      this.cache.remove(id);
      this.changed();
      return;
    }
    void this.refresh(id).catch(() => undefined);
  }

  /** Re-inspects one container into the cache. */
  async refresh(id: string): Promise<void> {
    const since = this.cache.begin();
    const f = await this.docker.inspect(id);
    if (f) this.cache.put(f, since);
    else this.cache.remove(id);
    this.changed();
  }

  health(): Record<string, unknown> {
    return { up: this.up, host: this.host, synced: this.synced };
  }
}
