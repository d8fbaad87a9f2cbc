// Tables for the agent's own first health checks: which check it runs, when it checks, what
// readiness it reports given its early result and Docker's status, and the probe loop's bounds (one
// exec in flight, stop on success, on a stopped container, on Docker speaking, on a timeout).
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaDesired, type ServiceSpec } from '../../src/api/types.js';
import { decide } from './decide.js';
import { EarlyHealth, probeCommand, runKey, shouldProbe, withEarlyHealth, type EarlyCheck } from './early-health.js';
import type { ContainerFacts } from './facts.js';
import { containerFacts } from '../../test/support/container-facts.js';
import { HealthExecTimeout } from './engine.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const HC = { test: ['CMD', 'true'], timeoutMs: 5000 };
const log = pino({ level: 'silent' });

/** A container of revision 2 just started, Docker's health still starting. */
const ctr = (o: Partial<ContainerFacts> = {}): ContainerFacts =>
  containerFacts(NOW, { revision: 2, specHash: 'h2', image: 'jaco-demo/busybox:2', health: 'starting', createdAt: iso(NOW - 1000), startedAt: iso(NOW - 900), healthcheck: HC, ...o });

describe('probeCommand', () => {
  it.each([
    ['CMD runs as is', { test: ['CMD', 'wget', '-q', 'http://127.0.0.1/'], timeoutMs: 2000 }, { cmd: ['wget', '-q', 'http://127.0.0.1/'], timeoutMs: 2000 }],
    ['CMD-SHELL goes through /bin/sh -c', { test: ['CMD-SHELL', 'test -f /ready'], timeoutMs: 2000 }, { cmd: ['/bin/sh', '-c', 'test -f /ready'], timeoutMs: 2000 }],
    ['no timeout: Docker’s default 30 s', { test: ['CMD', 'true'], timeoutMs: 0 }, { cmd: ['true'], timeoutMs: 30_000 }],
    ['NONE: no check', { test: ['NONE'], timeoutMs: 0 }, undefined],
    ['an empty test: no check', { test: [], timeoutMs: 0 }, undefined],
    ['CMD without a command: no check', { test: ['CMD'], timeoutMs: 0 }, undefined],
    ['no health check', undefined, undefined],
  ])('%s', (_what, hc, want) => {
    expect(probeCommand(hc)).toEqual(want);
  });
});

describe('shouldProbe', () => {
  it.each<[string, Partial<ContainerFacts>, EarlyCheck | undefined, boolean]>([
    ['a new container Docker has not checked yet', {}, undefined, true],
    ['after early failures (no verdict yet)', {}, {}, true],
    ['once an early check passed', {}, { passedAt: NOW }, false],
    ['after giving up (a timeout)', {}, { gaveUp: true }, false],
    ['Docker said healthy', { health: 'healthy' }, undefined, false],
    ['Docker said unhealthy', { health: 'unhealthy' }, undefined, false],
    ['no health check', { health: 'none', healthcheck: undefined }, undefined, false],
    ['stopped', { state: 'exited' }, undefined, false],
    ['paused', { state: 'paused' }, undefined, false],
  ])('%s → %s', (_what, o, early, want) => {
    expect(shouldProbe(ctr(o), early)).toBe(want);
  });
});

describe('withEarlyHealth: what the agent reports', () => {
  it.each<[string, Partial<ContainerFacts>, EarlyCheck | undefined, string]>([
    ['Docker starting, early check passed → healthy', {}, { passedAt: NOW }, 'healthy'],
    ['Docker starting, no early success → starting', {}, {}, 'starting'],
    ['Docker starting, agent gave up → starting', {}, { gaveUp: true }, 'starting'],
    ['Docker unhealthy after the early success → unhealthy (Docker has spoken)', { health: 'unhealthy' }, { passedAt: NOW }, 'unhealthy'],
    ['Docker healthy → healthy', { health: 'healthy' }, undefined, 'healthy'],
    ['no health check → none (minReadyTime decides)', { health: 'none', healthcheck: undefined }, { passedAt: NOW }, 'none'],
    ['stopped since → as Docker sees it', { state: 'exited' }, { passedAt: NOW }, 'starting'],
  ])('%s', (_what, o, early, want) => {
    expect(withEarlyHealth(ctr(o), early).health).toBe(want);
  });

  it('an early success carries its time and says who checked', () => {
    const c = withEarlyHealth(ctr(), { passedAt: NOW });
    expect(c.lastHealthAt).toBe(iso(NOW));
    expect(c.healthOutput).toMatch(/node-agent/);
  });
});

describe('a start-first step with the early result', () => {
  const spec = (image: string): ServiceSpec => ({ image, command: ['sleep', '3600'], healthcheck: { test: ['CMD', 'true'], interval: '30s' } });
  function des(revision: number): ReplicaDesired {
    const t = templateOf(revision, spec(`jaco-demo/busybox:${revision}`));
    return { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: 'web-1' }, spec: { replica: 'web-1', deployment: 'demo', service: 'web', node: 'n1', revision, specHash: t.specHash, template: t.template, placedAt: iso(NOW) } };
  }
  const d = des(2);
  const old = ctr({ id: 'old', revision: 1, specHash: des(1).spec.specHash, health: 'healthy', startedAt: iso(NOW - 60_000) });
  const fresh = ctr({ id: 'new', revision: 2, specHash: d.spec.specHash });
  const plan = (early: EarlyCheck | undefined, o: Partial<ContainerFacts> = {}) =>
    decide(
      {
        node: 'n1',
        mono: NOW,
        desired: new Map([['web-1', d]]),
        invalid: new Map(),
        commands: new Map(),
        observed: new Map(),
        containers: [old, withEarlyHealth({ ...fresh, ...o }, early)],
        starts: new Map(),
        stopping: new Set(),
      },
      NOW,
      { healthRefreshMs: 30_000, startReportDelayMs: 0 },
    );

  it('early success while Docker is starting: reported running and healthy, the old container stopped', () => {
    const p = plan({ passedAt: NOW - 10 });
    expect(p.observe[0]).toMatchObject({ state: 'running', health: 'healthy', containerId: 'new', lastHealthAt: iso(NOW - 10) });
    expect(p.stops).toEqual([expect.objectContaining({ containerId: 'old', reason: 'replaced' })]);
  });
  it('no early success yet: starting, the old one keeps serving', () => {
    const p = plan(undefined);
    expect(p.observe[0]).toMatchObject({ state: 'running', health: 'starting' });
    expect(p.stops).toEqual([]);
  });
  it('Docker unhealthy after the early success: degraded', () => {
    const p = plan({ passedAt: NOW - 10 }, { health: 'unhealthy' });
    expect(p.observe[0]).toMatchObject({ state: 'degraded', code: 'unhealthy', health: 'unhealthy' });
    expect(p.stops).toEqual([]);
  });
});

describe('EarlyHealth (the probe loop, with a fake exec and fake timers)', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());
  const tick = (ms = 0) => vi.advanceTimersByTimeAsync(ms);

  function harness(results: (number | Error | 'hang')[]) {
    let c: ContainerFacts | undefined = ctr();
    const calls: string[][] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    let changed = 0;
    const exec = async (_id: string, cmd: string[]) => {
      calls.push(cmd);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      try {
        const r = results.shift() ?? 1;
        if (r === 'hang') return await new Promise<number>(() => undefined);
        await Promise.resolve();
        if (r instanceof Error) throw r;
        return r;
      } finally {
        inFlight--;
      }
    };
    const early = new EarlyHealth(exec, (id) => (c?.id === id ? c : undefined), log, () => changed++, () => NOW);
    return {
      early,
      calls,
      set: (o: Partial<ContainerFacts> | undefined) => (c = o ? ctr(o) : undefined),
      get c() {
        return c;
      },
      get changed() {
        return changed;
      },
      get maxInFlight() {
        return maxInFlight;
      },
    };
  }

  it('checks until the first success, one exec at a time, then reports healthy', async () => {
    const h = harness([1, 0]);
    h.early.sync([h.c!]);
    h.early.sync([h.c!]); // a second pass starts no second loop
    await tick(400);
    expect(h.calls).toEqual([['true'], ['true']]);
    expect(h.maxInFlight).toBe(1);
    expect(h.changed).toBe(1);
    expect(h.early.overlay([h.c!])[0]!.health).toBe('healthy');
    h.early.sync([h.c!]);
    await tick(300);
    expect(h.calls).toHaveLength(2); // nothing more once it passed
  });

  it.each<[string, Partial<ContainerFacts>]>([
    ['Docker speaks', { health: 'unhealthy' }],
    ['the container stops', { state: 'exited' }],
  ])('stops when %s', async (_w, later) => {
    const h = harness([1, 1, 1, 1]);
    h.early.sync([h.c!]);
    await tick(50);
    h.set(later);
    await tick(500);
    expect(h.calls).toHaveLength(1);
    expect(h.changed).toBe(0);
  });

  it('a check that times out ends the agent’s checks of that container (no exec storm)', async () => {
    const h = harness([new HealthExecTimeout('too slow'), 0]);
    h.early.sync([h.c!]);
    await tick(400);
    h.early.sync([h.c!]);
    await tick(50);
    expect(h.calls).toHaveLength(1);
    expect(h.early.overlay([h.c!])[0]!.health).toBe('starting');
  });

  it('a container gone: its loop ends and its result is forgotten; a new run of the container is checked anew', async () => {
    const h = harness([0, 0]);
    h.early.sync([h.c!]);
    await tick(50);
    expect(h.early.overlay([h.c!])[0]!.health).toBe('healthy');
    const before = runKey(h.c!);
    h.set({ startedAt: iso(NOW + 5000) }); // started again (a resumed suspension)
    expect(runKey(h.c!)).not.toBe(before);
    expect(h.early.overlay([h.c!])[0]!.health).toBe('starting');
    h.early.sync([h.c!]);
    await tick(50);
    expect(h.calls).toHaveLength(2);
  });

  it('a runtime without exec (hollow) checks nothing', () => {
    const early = new EarlyHealth(undefined, () => ctr(), log, () => undefined);
    early.sync([ctr()]);
    expect(early.overlay([ctr()])[0]!.health).toBe('starting');
  });

  it('hang: stop() ends the wait for a hanging exec’s loop', async () => {
    const h = harness(['hang']);
    h.early.sync([h.c!]);
    await tick(10);
    h.early.stop();
    expect(h.maxInFlight).toBe(1);
  });
});
