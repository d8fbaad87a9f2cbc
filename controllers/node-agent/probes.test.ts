// Tables for the agent-run health checks (healthcheck.http/.tcp): where a check goes, how a run of
// results becomes a health state (Docker's machine: start period, retries, a starting container
// checked fast), and how that state reaches readiness, routing's observed state and the
// scheduler's restart verdict — the same path an exec check's Docker health takes. Then the real
// dialer against a loopback server, and the loop with a scripted dialer.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notReadyBecause } from '../../src/api/readiness.js';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaDesired, type ReplicaDesiredSpec, type ReplicaObserved, type ServiceSpec } from '../../src/api/types.js';
import { restartCause } from '../scheduler/restarts.js';
import { createOptions } from './container-spec.js';
import { observeContainer, readiness } from './decide.js';
import { factsFromInspect, PROBE_LABEL, probeFromLabel, type ContainerFacts, type ProbeResult, type ProbeSpec } from './facts.js';
import { containerFacts } from '../../test/support/container-facts.js';
import { afterCheck, AgentProbes, dialProbe, initialProbeState, nextCheckDelayMs, probeSpec, withProbeHealth, type ProbeState } from './probes.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const owner = { clusterUid: '0123456789abcdef-uid', node: 'node-2', address: '127.0.1.2' };

function desiredSpec(s: ServiceSpec, extra: Partial<ReplicaDesiredSpec> = {}): ReplicaDesiredSpec {
  const t = templateOf(1, s);
  return { replica: 'shop-web-1', deployment: 'shop', service: 'web', node: 'node-2', revision: 1, specHash: t.specHash, template: t.template, placedAt: '2026-01-01T00:00:00Z', ...extra };
}

describe('probeSpec: where a check goes', () => {
  const http = { path: '/healthz', port: 'http' as const };
  it.each<[string, ServiceSpec, Partial<ReplicaDesiredSpec>, Partial<ProbeSpec> | string | undefined]>([
    ['an exec check: not the agent’s', { image: 'i', healthcheck: { test: ['CMD', 'true'] } }, {}, undefined],
    ['no check', { image: 'i' }, {}, undefined],
    [
      'host network, a named dynamic port: its assigned host port at the node’s address',
      { image: 'i', ports: [{ name: 'http', containerPort: 80 }], healthcheck: { http } },
      { hostPorts: { http: 20123 } },
      { kind: 'http', host: '127.0.1.2', port: 20123, path: '/healthz' },
    ],
    ['host network, a listed container port by number: its host port', { image: 'i', ports: [{ name: 'http', containerPort: 80, hostPort: 8080 }], healthcheck: { tcp: { port: 80 } } }, {}, { kind: 'tcp', host: '127.0.1.2', port: 8080 }],
    ['host network, an unlisted port: as given', { image: 'i', healthcheck: { tcp: { port: 6379 } } }, {}, { kind: 'tcp', host: '127.0.1.2', port: 6379 }],
    [
      'cluster network: the replica’s own address and the container port',
      { image: 'i', network: 'cluster', ports: [{ name: 'http', containerPort: 80 }], healthcheck: { http: { port: 'http', expect: 204 } } },
      { address: { ipv4: '10.208.3.5/24', ipv6: 'fd00::5/64' } },
      { kind: 'http', host: '10.208.3.5', port: 80, path: '/', expect: 204 },
    ],
    ['cluster network without an address yet', { image: 'i', network: 'cluster', healthcheck: { tcp: { port: 80 } } }, {}, 'carries none'],
    ['defaults as Docker’s', { image: 'i', healthcheck: { tcp: { port: 1 } } }, {}, { intervalMs: 30_000, timeoutMs: 30_000, retries: 3, startPeriodMs: 0 }],
    ['own timings', { image: 'i', healthcheck: { tcp: { port: 1 }, interval: '1s', timeout: '500ms', retries: 2, startPeriod: '3s' } }, {}, { intervalMs: 1000, timeoutMs: 500, retries: 2, startPeriodMs: 3000 }],
  ])('%s', (_what, svc, extra, want) => {
    const d = desiredSpec(svc, extra);
    if (typeof want === 'string') expect(() => probeSpec(d, owner)).toThrow(want);
    else if (want === undefined) expect(probeSpec(d, owner)).toBeUndefined();
    else expect(probeSpec(d, owner)).toMatchObject(want);
  });

  it('an agent-run check rides on the container as a label, and Docker runs none (not even the image’s)', () => {
    const o = createOptions(desiredSpec({ image: 'i', ports: [{ name: 'http', containerPort: 80 }], healthcheck: { http: { port: 'http' }, interval: '1s' } }, { hostPorts: { http: 20001 } }), owner);
    expect(o.Healthcheck).toEqual({ Test: ['NONE'] });
    const label = o.Labels![PROBE_LABEL];
    expect(probeFromLabel(label)).toEqual({ kind: 'http', host: '127.0.1.2', port: 20001, path: '/', intervalMs: 1000, timeoutMs: 30_000, retries: 3, startPeriodMs: 0 });
    // Read back by the agent from docker inspect (an adopted container keeps its check).
    const facts = factsFromInspect({
      Id: 'c9',
      Name: '/x',
      Created: '2026-03-01T11:00:00Z',
      Config: { Labels: o.Labels, Image: 'i', Healthcheck: { Test: ['NONE'] } },
      State: { Status: 'running', Running: true, ExitCode: 0, Pid: 7, StartedAt: '2026-03-01T11:00:01Z', FinishedAt: '0001-01-01T00:00:00Z' },
      HostConfig: { NetworkMode: 'host' },
    } as never);
    expect(facts.health).toBe('none');
    expect(facts.probe?.port).toBe(20001);
  });

  it.each(['', 'not json', '{"kind":"udp","host":"h","port":1}', '{"kind":"tcp","host":"h","port":1.5,"intervalMs":1,"timeoutMs":1,"retries":1,"startPeriodMs":0}'])('a label it cannot read is no check: %j', (v) => expect(probeFromLabel(v)).toBeUndefined());
});

describe('afterCheck: results → health state', () => {
  const P = { intervalMs: 1000, retries: 3, startPeriodMs: 0 };
  const start = NOW;
  const ok: ProbeResult = { ok: true, output: 'HTTP 200' };
  const bad: ProbeResult = { ok: false, output: 'HTTP 503' };
  /** Runs checks at the given offsets (ms after the start) with the given results. */
  const run = (p: typeof P, steps: [number, boolean][], from: ProbeState = initialProbeState(start)) =>
    steps.reduce<ProbeState[]>((acc, [at, pass]) => [...acc, afterCheck(acc.at(-1) ?? from, p, start, start + at, pass ? ok : bad)], []).map((s) => s.status);

  it.each<[string, typeof P, [number, boolean][], string[]]>([
    ['a first success: healthy at once', P, [[250, true]], ['healthy']],
    ['fast failures while starting count once an interval: unhealthy after retries × interval', P, [[250, false], [500, false], [1000, false], [1250, false], [2000, false], [3000, false]], ['starting', 'starting', 'starting', 'starting', 'starting', 'unhealthy']],
    ['failures within the start period never count', { ...P, startPeriodMs: 5000 }, [[1000, false], [2000, false], [3000, false], [4000, false], [6000, false], [7000, false], [8000, false]], ['starting', 'starting', 'starting', 'starting', 'starting', 'starting', 'unhealthy']],
    ['a healthy replica turns unhealthy after `retries` failures in a row', P, [[250, true], [1250, false], [2250, false], [3250, false]], ['healthy', 'healthy', 'healthy', 'unhealthy']],
    ['one success between failures restarts the count', P, [[250, true], [1250, false], [2250, false], [3250, true], [4250, false], [5250, false]], ['healthy', 'healthy', 'healthy', 'healthy', 'healthy', 'healthy']],
    ['an unhealthy replica recovers on its next success', { ...P, retries: 1 }, [[250, true], [1250, false], [2250, true]], ['healthy', 'unhealthy', 'healthy']],
  ])('%s', (_what, p, steps, want) => expect(run(p, steps)).toEqual(want));

  it('keeps the last output and its time', () => {
    const s = afterCheck(initialProbeState(start), P, start, start + 1000, bad);
    expect(s).toMatchObject({ status: 'starting', streak: 1, output: 'HTTP 503', lastAt: start + 1000 });
  });

  it.each<[string, ProbeState['status'], number]>([
    ['starting: every 250 ms', 'starting', 250],
    ['healthy: every interval', 'healthy', 1000],
    ['unhealthy: every interval', 'unhealthy', 1000],
  ])('next check when %s', (_w, status, want) => expect(nextCheckDelayMs({ status, streak: 0, countedAt: 0 }, { intervalMs: 1000 })).toBe(want));

  it('an interval below 250 ms is kept while starting too', () => expect(nextCheckDelayMs(initialProbeState(0), { intervalMs: 100 })).toBe(100));

  it.each<[string, ReplicaObserved['status']['health'] | undefined, string]>([
    ['a container never reported: starting', undefined, 'starting'],
    ['adopted after an agent restart, reported healthy: healthy until checked', 'healthy', 'healthy'],
    ['adopted, reported unhealthy: unhealthy', 'unhealthy', 'unhealthy'],
  ])('initial state: %s', (_w, health, want) => expect(initialProbeState(start, health ? { health } : undefined).status).toBe(want));
});

describe('the verdict follows the exec check’s path: readiness, routing, restarts', () => {
  const template = templateOf(1, { image: 'i', ports: [{ name: 'http', containerPort: 80 }], healthcheck: { http: { port: 'http' }, interval: '1s', retries: 2 } });
  const d: ReplicaDesired = { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: 'shop-web-1' }, spec: desiredSpec({ image: 'i' }, { template: template.template, specHash: template.specHash, hostPorts: { http: 20001 } }) };
  const probe = probeSpec(d.spec, owner)!;
  const c = containerFacts(NOW, { specHash: d.spec.specHash, probe });

  it.each<[string, ProbeState | undefined, ContainerFacts, { ready: boolean; state: string; code?: string; notReady?: string; restart?: string }]>([
    ['not checked yet: starting, not ready, no restart', undefined, c, { ready: false, state: 'running', notReady: 'health_starting' }],
    ['passed: ready, routed', { status: 'healthy', streak: 0, countedAt: NOW, lastAt: NOW, output: 'HTTP 200' }, c, { ready: true, state: 'running' }],
    [
      'failing past its retries: degraded (out of routing), restarted by the scheduler',
      { status: 'unhealthy', streak: 2, countedAt: NOW, lastAt: NOW, output: 'HTTP 503 from http://127.0.1.2:20001/' },
      c,
      { ready: false, state: 'degraded', code: 'unhealthy', notReady: 'unhealthy', restart: 'degraded' },
    ],
    ['a stopped container: its exit, not a check', { status: 'healthy', streak: 0, countedAt: NOW }, { ...c, state: 'exited', exitCode: 1 }, { ready: false, state: 'exited', notReady: 'not_running', restart: 'exited' }],
  ])('%s', (_w, st, container, want) => {
    const seen = withProbeHealth(container, st);
    expect(readiness(seen, d.spec.template, NOW).ready).toBe(want.ready);
    const obs = observeContainer(seen);
    expect(obs.state).toBe(want.state);
    expect(obs.code).toBe(want.code);
    if (st?.status === 'unhealthy') expect(obs.details).toBe(st.output);
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: 'shop-web-1' },
      status: { ...obs, replica: 'shop-web-1', node: 'node-2', deployment: 'shop', service: 'web', revision: 1, specHash: d.spec.specHash, observedAt: new Date(NOW).toISOString() },
    };
    expect(notReadyBecause(d, o, NOW)).toBe(want.notReady);
    expect(restartCause(o)).toBe(want.restart);
  });
});

describe('dialProbe (loopback)', () => {
  let server: Server;
  let port = 0;
  let status = 200;
  beforeAll(async () => {
    server = createServer((req, res) => {
      res.statusCode = req.url === '/healthz' ? status : 404;
      res.end('x');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  const spec = (o: Partial<ProbeSpec>): ProbeSpec => ({ kind: 'http', host: '127.0.0.1', port, path: '/healthz', intervalMs: 1000, timeoutMs: 2000, retries: 1, startPeriodMs: 0, ...o });

  it('http: a 2xx passes, another status fails and says which', async () => {
    status = 200;
    expect(await dialProbe('c', spec({}))).toEqual({ ok: true, output: `HTTP 200 from http://127.0.0.1:${port}/healthz` });
    status = 503;
    expect(await dialProbe('c', spec({}))).toEqual({ ok: false, output: `HTTP 503 from http://127.0.0.1:${port}/healthz, expected 200–399` });
    expect((await dialProbe('c', spec({ path: '/other' }))).ok).toBe(false);
  });

  it('http: expect names the one status that passes', async () => {
    status = 204;
    expect((await dialProbe('c', spec({ expect: 204 }))).ok).toBe(true);
    expect((await dialProbe('c', spec({ expect: 200 }))).output).toContain('HTTP 204 from');
  });

  it('tcp: an accepted connection passes; a closed port fails with the error', async () => {
    expect(await dialProbe('c', spec({ kind: 'tcp' }))).toEqual({ ok: true, output: `connected to 127.0.0.1:${port}` });
    const closed = await dialProbe('c', spec({ kind: 'tcp', port: 1 }));
    expect(closed.ok).toBe(false);
    expect(closed.output).toMatch(/ECONNREFUSED.*\(127\.0\.0\.1:1\)/);
  });
});

describe('AgentProbes', () => {
  const log = pino({ level: 'silent' });
  const probe: ProbeSpec = { kind: 'tcp', host: '127.0.0.1', port: 1, intervalMs: 20, timeoutMs: 100, retries: 2, startPeriodMs: 0 };

  it('checks a running container until it turns unhealthy, then reports it so; forgets it once stopped', async () => {
    let c: ContainerFacts | undefined = containerFacts(Date.now(), { startedAt: new Date(Date.now() - 60_000).toISOString(), probe });
    const results = [true, false, false, false, false, false];
    let calls = 0;
    let changes = 0;
    const probes = new AgentProbes(async () => ({ ok: results[Math.min(calls++, results.length - 1)]!, output: `check ${calls}` }), () => c, log, () => changes++);
    probes.sync([c]);
    await until(() => probes.overlay([c!], new Map())[0]!.health === 'unhealthy');
    const seen = probes.overlay([c], new Map())[0]!;
    expect(seen).toMatchObject({ health: 'unhealthy', healthOutput: expect.stringMatching(/^check \d+$/) });
    expect(changes).toBeGreaterThanOrEqual(2); // starting → healthy, healthy → unhealthy
    c = { ...c, state: 'exited' };
    probes.sync([c]);
    const n = calls;
    await new Promise((r) => setTimeout(r, 80));
    expect(calls).toBeLessThanOrEqual(n + 1);
    expect(probes.overlay([c], new Map())[0]!.health).toBe('none');
    probes.stop();
  });

  it('an adopted container starts from what the agent last reported of it', () => {
    const c = containerFacts(NOW, { probe });
    const probes = new AgentProbes(async () => ({ ok: true, output: '' }), () => c, log, () => {});
    const reported = new Map([['web-1', { containerId: 'c1', health: 'healthy' } as never]]);
    expect(probes.overlay([c], reported)[0]!.health).toBe('healthy');
    expect(probes.overlay([{ ...c, id: 'c2' }], reported)[0]!.health).toBe('starting');
    expect(probes.overlay([{ ...c, probe: undefined }], reported)[0]!.health).toBe('none');
  });
});

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
}
