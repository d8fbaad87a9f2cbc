// The agent's own health checks: a service's `healthcheck.http` or `healthcheck.tcp` (issue 28),
// run from the node-agent against the replica — its own address on the cluster network, its
// node's under host networking — so an image without a shell can be checked. What Docker does for
// an exec check, the agent does for these, with the same meaning of interval, timeout, retries and
// start period; its verdict becomes the container's health, so readiness, routing and restarts
// follow it exactly as they follow Docker's.
//
// What to check is resolved once, when the container is made (probeSpec), and carried on the
// container as a label: an agent that restarts adopts its containers with their checks, and an old
// container of a rolling update keeps its own. The decisions are pure (probeSpec, afterCheck,
// nextCheckDelayMs, withProbeHealth); AgentProbes runs one loop per running container.
import { request } from 'node:http';
import { connect } from 'node:net';
import { bareAddress } from '../../src/api/network.js';
import { endpointPortsOf, normalizePorts } from '../../src/api/ports.js';
import type { HealthState, ReplicaDesiredSpec, ReplicaObservedStatus } from '../../src/api/types.js';
import { durationMs } from '../../src/api/units.js';
import type { Logger } from '../../src/observability/log.js';
import { abortableSleep, EARLY_CHECK_EVERY_MS, runKey } from './early-health.js';
import { type ContainerFacts, type ProbeResult, type ProbeSpec } from './facts.js';
import { agentMetrics } from './metrics.js';
import type { Owner } from './engine.js';

/**
 * The check a replica's container gets, or undefined when its health check is not an agent-run
 * one. The port is where the replica is reached: a named port (or a listed container port) as its
 * endpoint port — the host port under host networking — else the number as given.
 */
export function probeSpec(d: Pick<ReplicaDesiredSpec, 'template' | 'hostPorts' | 'address'>, owner: Pick<Owner, 'address'>): ProbeSpec | undefined {
  const h = d.template.healthcheck;
  const check = h?.http ?? h?.tcp;
  if (!h || !check) return undefined;
  const reached = endpointPortsOf(d);
  const named = typeof check.port === 'string' ? check.port : normalizePorts(d.template).find((p) => p.containerPort === check.port)?.name;
  const port = (named !== undefined ? reached[named] : undefined) ?? (typeof check.port === 'number' ? check.port : undefined);
  if (port === undefined) throw new Error(`healthcheck port ${JSON.stringify(check.port)} is not a port of the service`);
  const host = d.template.network === 'cluster' ? (d.address ? bareAddress(d.address.ipv4) : undefined) : (owner.address ?? '127.0.0.1');
  if (!host) throw new Error('a cluster-network replica is checked at its address, and its record carries none');
  return {
    kind: h.http ? 'http' : 'tcp',
    host,
    port,
    ...(h.http ? { path: h.http.path ?? '/', ...(h.http.expect !== undefined ? { expect: h.http.expect } : {}) } : {}),
    intervalMs: durationMs(h.interval, 30_000),
    timeoutMs: durationMs(h.timeout, 30_000),
    retries: h.retries ?? 3,
    startPeriodMs: durationMs(h.startPeriod, 0),
  };
}

/** What the agent knows of one container run's checks: Docker's health state machine, kept by the agent. */
export interface ProbeState {
  status: Exclude<HealthState, 'none'>;
  /** Consecutive failures counted toward `retries`. */
  streak: number;
  /** When the last failure counted, or the container started: a failure counts at most once an interval. */
  countedAt: number;
  lastAt?: number;
  output?: string;
}

/** A container run before its first check: starting, or what the agent last reported of it (adopted after a restart). */
export function initialProbeState(startedAt: number, reported?: Pick<ReplicaObservedStatus, 'health' | 'lastHealthAt' | 'details'>): ProbeState {
  const status = reported?.health === 'healthy' || reported?.health === 'unhealthy' ? reported.health : 'starting';
  return { status, streak: 0, countedAt: startedAt };
}

/**
 * The state after one check at `at`. A success is healthy at once. A failure within the start
 * period does not count; after it, a failure counts — while still starting at most once an
 * interval, since the agent checks a starting container every 250 ms to see its first success
 * early (as Docker would at `interval`, retries × interval after the start) — and `retries`
 * counted in a row make it unhealthy.
 */
export function afterCheck(st: ProbeState, p: Pick<ProbeSpec, 'intervalMs' | 'retries' | 'startPeriodMs'>, startedAt: number, at: number, r: ProbeResult): ProbeState {
  if (r.ok) return { status: 'healthy', streak: 0, countedAt: at, lastAt: at, output: r.output };
  const inStartPeriod = at < startedAt + p.startPeriodMs;
  const counts = !inStartPeriod && (st.status !== 'starting' || at - st.countedAt >= p.intervalMs);
  if (!counts) return { ...st, lastAt: at, output: r.output };
  const streak = st.streak + 1;
  return { status: streak >= Math.max(1, p.retries) ? 'unhealthy' : st.status, streak, countedAt: at, lastAt: at, output: r.output };
}

/** The wait before the next check: fast while starting (its first success seen early), else the interval. */
export function nextCheckDelayMs(st: ProbeState, p: Pick<ProbeSpec, 'intervalMs'>): number {
  return st.status === 'starting' ? Math.min(EARLY_CHECK_EVERY_MS, p.intervalMs) : p.intervalMs;
}

/** The container as the agent reports it: a running container with an agent-run check has the agent's verdict as its health. */
export function withProbeHealth(c: ContainerFacts, st: ProbeState | undefined): ContainerFacts {
  if (!c.probe || c.state !== 'running') return c;
  const s = st ?? { status: 'starting' as const };
  return {
    ...c,
    health: s.status,
    ...(st?.output ? { healthOutput: st.output } : {}),
    ...(st?.lastAt !== undefined ? { lastHealthAt: new Date(st.lastAt).toISOString() } : {}),
  };
}

/** Runs one check of a container; never throws (a failure is a result). */
export type Dialer = (id: string, p: ProbeSpec) => Promise<ProbeResult>;

/** The real checks: a TCP connect, or an HTTP GET without keep-alive, each bounded by the check's timeout. */
export const dialProbe: Dialer = (_id, p) =>
  new Promise<ProbeResult>((resolve) => {
    const target = p.kind === 'http' ? `http://${p.host}:${p.port}${p.path ?? '/'}` : `${p.host}:${p.port}`;
    const fail = (why: string) => resolve({ ok: false, output: `${why} (${target})` });
    if (p.kind === 'tcp') {
      const s = connect({ host: p.host, port: p.port, timeout: p.timeoutMs });
      s.once('connect', () => {
        s.destroy();
        resolve({ ok: true, output: `connected to ${target}` });
      });
      s.once('timeout', () => {
        s.destroy();
        fail(`no connection within ${p.timeoutMs}ms`);
      });
      s.once('error', (e) => fail((e as Error).message));
      return;
    }
    const req = request({ host: p.host, port: p.port, path: p.path ?? '/', method: 'GET', agent: false, timeout: p.timeoutMs, headers: { 'user-agent': 'jaco-health-check' } }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      const ok = p.expect !== undefined ? code === p.expect : code >= 200 && code < 400;
      resolve({ ok, output: `HTTP ${code} from ${target}${ok ? '' : p.expect !== undefined ? `, expected ${p.expect}` : ', expected 200–399'}` });
      req.destroy();
    });
    req.once('timeout', () => {
      req.destroy();
      fail(`no answer within ${p.timeoutMs}ms`);
    });
    req.once('error', (e) => fail((e as Error).message));
    req.end();
  });

/** Runs the agent-run checks of this agent's running containers and keeps their verdicts. */
export class AgentProbes {
  private readonly states = new Map<string, ProbeState>();
  private readonly running = new Map<string, AbortController>();
  private stopped = false;

  constructor(
    private readonly dial: Dialer,
    /** The container as the agent knows it now (undefined: gone). */
    private readonly current: (id: string) => ContainerFacts | undefined,
    private readonly log: Logger,
    /** A verdict changed: decide again. */
    private readonly changed: () => void,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * The containers with the agent's verdicts applied (what decide sees). A run not checked yet
   * starts from what the agent last reported of that very container, so an agent restart does not
   * take a healthy replica out of routing until its first check.
   */
  overlay(containers: readonly ContainerFacts[], reported: ReadonlyMap<string, ReplicaObservedStatus>): ContainerFacts[] {
    return containers.map((c) => {
      if (!c.probe || c.state !== 'running') return c;
      const k = runKey(c);
      let st = this.states.get(k);
      if (!st) {
        const prev = reported.get(c.replica);
        if (prev?.containerId === c.id) this.states.set(k, (st = initialProbeState(startMs(c, this.clock()), prev)));
      }
      return withProbeHealth(c, st);
    });
  }

  /** Starts checking running containers that have a check; forgets runs that are gone. */
  sync(containers: readonly ContainerFacts[]): void {
    if (this.stopped) return;
    const live = new Set(containers.filter((c) => c.probe && c.state === 'running').map(runKey));
    for (const [k, ac] of this.running) if (!live.has(k)) ac.abort();
    for (const k of this.states.keys()) if (!live.has(k)) this.states.delete(k);
    for (const c of containers) {
      const k = runKey(c);
      if (live.has(k) && !this.running.has(k)) void this.loop(c, k);
    }
  }

  stop(): void {
    this.stopped = true;
    for (const ac of this.running.values()) ac.abort();
  }

  /** Checks one container run until it stops or is gone. */
  private async loop(first: ContainerFacts, key: string): Promise<void> {
    const ac = new AbortController();
    this.running.set(key, ac);
    const log = this.log.child({ replica: first.replica, container: first.name });
    const p = first.probe!;
    const startedAt = startMs(first, this.clock());
    try {
      for (;;) {
        const c = this.current(first.id);
        if (ac.signal.aborted || this.stopped || !c || runKey(c) !== key || c.state !== 'running') return;
        const r = await this.dial(c.id, p);
        if (ac.signal.aborted || this.stopped) return;
        const prev = this.states.get(key) ?? initialProbeState(startedAt);
        const next = afterCheck(prev, p, startedAt, this.clock(), r);
        this.states.set(key, next);
        agentMetrics.probeChecks.inc({ kind: p.kind, result: r.ok ? 'passed' : 'failed' });
        if (next.status !== prev.status) {
          log.info({ health: next.status, was: prev.status, output: r.output }, `${p.kind} health check: ${next.status}`);
          this.changed();
        } else if (next.status === 'unhealthy' && next.output !== prev.output) this.changed();
        await abortableSleep(nextCheckDelayMs(next, p), ac.signal);
      }
    } finally {
      this.running.delete(key);
    }
  }
}

function startMs(c: ContainerFacts, fallback: number): number {
  const t = c.startedAt ? Date.parse(c.startedAt) : NaN;
  return Number.isFinite(t) ? t : fallback;
}
