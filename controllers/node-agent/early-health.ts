// The agent's own first health checks (issue 14). Docker 20.10 has no `start_interval`: its first
// check of a new container waits a whole `interval`, and a rolling update step waits with it. So
// right after a start the agent runs the container's own health check itself (docker exec of its
// Test), every 250 ms until the first success, and then hands over: once Docker's health state has
// spoken (healthy or unhealthy) it is the truth again, whatever the agent saw.
//
// The decisions are pure (probeCommand, shouldProbe, withEarlyHealth); EarlyHealth runs the probes:
// at most one exec in flight per container, bounded by the check's timeout, ended when the
// container stops, succeeds, or Docker reports a status.
import type { Logger } from '../../src/observability/log.js';
import type { ContainerFacts, HealthcheckFacts } from './facts.js';
import { agentMetrics } from './metrics.js';
import { statusOf } from './engine.js';

/** Between two early checks of one container (the figure). */
export const EARLY_CHECK_EVERY_MS = 250;
/** After this many failed early checks the agent slows down to one a second (no exec storm for a
 * container that takes long to come up; Docker's own checks decide meanwhile). */
export const EARLY_CHECKS_FAST = 40;
export const EARLY_CHECK_SLOW_MS = 1000;
/** Docker's default health check timeout. */
export const DOCKER_DEFAULT_TIMEOUT_MS = 30_000;

export interface HealthProbe {
  /** What to exec in the container. */
  cmd: string[];
  timeoutMs: number;
}

/** The exec form of a container's health check: CMD runs as is, CMD-SHELL through /bin/sh -c; NONE or anything else: no check. */
export function probeCommand(hc: HealthcheckFacts | undefined): HealthProbe | undefined {
  if (!hc) return undefined;
  const [form, ...rest] = hc.test;
  const timeoutMs = hc.timeoutMs > 0 ? hc.timeoutMs : DOCKER_DEFAULT_TIMEOUT_MS;
  if (form === 'CMD' && rest.length) return { cmd: rest, timeoutMs };
  if (form === 'CMD-SHELL' && rest.length) return { cmd: ['/bin/sh', '-c', rest.join(' ')], timeoutMs };
  return undefined;
}

/** One start of one container: a container started again (a resumed suspension) is checked anew. */
export const runKey = (c: Pick<ContainerFacts, 'id' | 'startedAt'>) => `${c.id}@${c.startedAt ?? ''}`;

/** What the agent knows of its early checks of one container run. */
export interface EarlyCheck {
  /** When the first early check passed (ms). */
  passedAt?: number;
  /** The agent stopped checking without a success (a check timed out, or exec is refused). */
  gaveUp?: boolean;
}

/** Whether the agent (still) checks a container itself: running, Docker still `starting`, a check it can exec, no verdict of its own yet. */
export function shouldProbe(c: ContainerFacts, early: EarlyCheck | undefined): boolean {
  return c.state === 'running' && c.health === 'starting' && !!probeCommand(c.healthcheck) && early?.passedAt === undefined && !early?.gaveUp;
}

/** The wait before early check number `attempt` + 1 (0-based count of checks done). */
export function nextCheckDelayMs(attempt: number): number {
  return attempt < EARLY_CHECKS_FAST ? EARLY_CHECK_EVERY_MS : EARLY_CHECK_SLOW_MS;
}

/**
 * The container as the agent reports it: healthy from its own first passed check while Docker
 * still says `starting`; Docker's `healthy` or `unhealthy` (it has spoken), a stopped container or
 * one without a check are reported as Docker sees them.
 */
export function withEarlyHealth(c: ContainerFacts, early: EarlyCheck | undefined): ContainerFacts {
  if (c.state !== 'running' || c.health !== 'starting' || early?.passedAt === undefined) return c;
  return { ...c, health: 'healthy', lastHealthAt: new Date(early.passedAt).toISOString(), healthOutput: 'first health check passed (run by the node-agent before Docker’s first)' };
}

/** Runs one exec of a command in a container to its exit code; throws (engine.ts HealthExecTimeout) past the timeout. */
export type ExecFn = (id: string, cmd: string[], timeoutMs: number) => Promise<number>;

/** Runs the early checks of this agent's containers and keeps their results. */
export class EarlyHealth {
  private readonly checks = new Map<string, EarlyCheck>();
  /** Probe loops running, by run key. */
  private readonly running = new Map<string, AbortController>();
  private stopped = false;

  constructor(
    private readonly exec: ExecFn | undefined,
    /** The container as the agent knows it now (undefined: gone). */
    private readonly current: (id: string) => ContainerFacts | undefined,
    private readonly log: Logger,
    /** An early check passed: decide again. */
    private readonly changed: () => void,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The containers with the agent's early results applied (what decide sees). */
  overlay(containers: readonly ContainerFacts[]): ContainerFacts[] {
    return containers.map((c) => withEarlyHealth(c, this.checks.get(runKey(c))));
  }

  /** Starts checking containers that need it; forgets containers that are gone. */
  sync(containers: readonly ContainerFacts[]): void {
    if (this.stopped || !this.exec) return;
    const live = new Set(containers.map(runKey));
    for (const [k, ac] of this.running) if (!live.has(k)) ac.abort();
    for (const k of this.checks.keys()) if (!live.has(k)) this.checks.delete(k);
    for (const c of containers) {
      const k = runKey(c);
      if (!this.running.has(k) && shouldProbe(c, this.checks.get(k))) void this.probe(c, k);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const ac of this.running.values()) ac.abort();
  }

  /** Checks until the first success, the container stopping, Docker speaking, or a timeout. */
  private async probe(first: ContainerFacts, key: string): Promise<void> {
    const ac = new AbortController();
    this.running.set(key, ac);
    const log = this.log.child({ replica: first.replica, container: first.name });
    try {
      for (let attempt = 0; ; attempt++) {
        const c = this.current(first.id);
        if (ac.signal.aborted || this.stopped || !c || runKey(c) !== key || !shouldProbe(c, this.checks.get(key))) return;
        const probe = probeCommand(c.healthcheck)!;
        let code: number;
        try {
          code = await this.exec!(c.id, probe.cmd, probe.timeoutMs);
        } catch (e) {
          // A check that hangs past its timeout, or an engine that refuses exec: Docker's checks decide.
          const gone = statusOf(e) === 404 || statusOf(e) === 409;
          if (!gone) log.info({ err: (e as Error).message }, 'early health check not possible; Docker’s own checks decide');
          agentMetrics.earlyHealthChecks.inc({ result: 'gave_up' });
          this.checks.set(key, { gaveUp: true });
          return;
        }
        agentMetrics.earlyHealthChecks.inc({ result: code === 0 ? 'passed' : 'failed' });
        if (code === 0) {
          this.checks.set(key, { passedAt: this.clock() });
          log.debug({ attempt: attempt + 1 }, 'early health check passed');
          this.changed();
          return;
        }
        await abortableSleep(nextCheckDelayMs(attempt), ac.signal);
      }
    } finally {
      this.running.delete(key);
    }
  }
}

/** Waits ms, or less when the signal aborts (never rejects). */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
