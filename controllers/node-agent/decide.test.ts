// Tables for the node-agent's pure core: what it starts, stops, cancels and reports given the
// desired replicas of its node, its containers, the starts under way and what it last reported.
import { describe, expect, it } from 'vitest';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaCommand, type ReplicaDesired, type ReplicaObservedStatus, type ServiceSpec } from '../../src/api/types.js';
import { decide as decideAt, readiness, START_REPORT_DELAY_MS, statusChanged, stopFirstFor, type AgentSnapshot, type DecideConfig, type StartProgress } from './decide.js';
import type { ContainerFacts } from './facts.js';
import { containerFacts } from '../../test/support/container-facts.js';
import { sandboxSpec } from './sandbox.js';

const NOW = Date.parse('2026-03-01T12:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
// Starts are reported at once in these tables (what is reported is the point); the agent's own
// delay for a new replica's first report has its table below ("the first report of a new replica").
const CONFIG = { healthRefreshMs: 30_000, startReportDelayMs: 0 };
const BASE: ServiceSpec = { image: 'jaco-demo/busybox:1', command: ['sleep', '3600'] };

function des(replica: string, spec: Partial<ServiceSpec> = {}, revision = 1, extra: Partial<ReplicaDesired['spec']> = {}): ReplicaDesired {
  const t = templateOf(revision, { ...BASE, ...spec });
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: replica },
    spec: { replica, deployment: 'demo', service: 'web', node: 'n1', revision, specHash: t.specHash, template: t.template, placedAt: iso(NOW - 60_000), ...extra },
  };
}

let nextId = 0;
/** A container of a desired replica (its labels), running and started a minute ago unless told. */
function ctr(d: ReplicaDesired, o: Partial<ContainerFacts> = {}): ContainerFacts {
  const id = o.id ?? `c${String(++nextId).padStart(3, '0')}`;
  return containerFacts(NOW, {
    id,
    name: `jaco-x-n1-${d.spec.replica}-r${d.spec.revision}-${d.spec.specHash.slice(0, 8)}`,
    replica: d.spec.replica,
    revision: d.spec.revision,
    specHash: d.spec.specHash,
    image: d.spec.template.image,
    ...o,
  });
}

function cmd(replica: string, seq: number): ReplicaCommand {
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaCommand',
    metadata: { name: replica },
    spec: { replica, op: 'restart', seq, issuedAt: iso(NOW), reason: 'degraded' },
    status: { restarts: 1, generation: 1 },
  };
}

/** A snapshot whose monotonic clock may be left out: it then reads the same as the wall clock. */
type Snap = Omit<AgentSnapshot, 'mono'> & { mono?: number };
/** decide with the wall and monotonic clocks moving together, unless a row sets `mono` (a stepped wall clock). */
const decide = (s: Snap, now: number, config: DecideConfig) => decideAt({ mono: now, ...s }, now, config);

function snap(p: {
  desired?: ReplicaDesired[];
  containers?: ContainerFacts[];
  observed?: ReplicaObservedStatus[];
  starts?: Record<string, StartProgress>;
  commands?: ReplicaCommand[];
  /** Acknowledged restart commands, as the agent last reported them (observed). */
  acked?: Record<string, number>;
  invalid?: Record<string, { reason: string; deployment?: string; service?: string }>;
  stopping?: string[];
  /** The node's copies: ready, or unreadable with why. */
  files?: Record<string, 'ready' | string>;
  sandboxes?: ContainerFacts[];
  /** The registry password secret of images, by image. */
  pullSecrets?: Record<string, string>;
}): Snap {
  return {
    node: 'n1',
    desired: new Map((p.desired ?? []).map((d) => [d.spec.replica, d])),
    invalid: new Map(Object.entries(p.invalid ?? {})),
    commands: new Map((p.commands ?? []).map((c) => [c.spec.replica, c])),
    observed: new Map([
      ...Object.entries(p.acked ?? {}).map(([replica, ackedCommand]): [string, ReplicaObservedStatus] => [replica, { replica, node: 'n1', deployment: 'demo', service: 'web', state: 'running', ackedCommand, observedAt: iso(NOW - 1000) }]),
      ...(p.observed ?? []).map((o): [string, ReplicaObservedStatus] => [o.replica, o]),
    ]),
    containers: p.containers ?? [],
    sandboxes: p.sandboxes ?? [],
    starts: new Map(Object.entries(p.starts ?? {})),
    stopping: new Set(p.stopping ?? []),
    files: new Map(Object.entries(p.files ?? {}).map(([id, st]) => [id, st === 'ready' ? { state: 'ready' as const, uid: `uid-${id}` } : st.startsWith('uid:') ? { state: 'ready' as const, uid: st.slice(4) } : { state: 'unreadable' as const, detail: st }])),
    pullSecrets: new Map(Object.entries(p.pullSecrets ?? {})),
  };
}

const run = (s: Snap, now = NOW) => decide(s, now, CONFIG);
const obs = (plan: ReturnType<typeof run>, replica: string) => plan.observe.find((o) => o.replica === replica);

describe('the first report of a new replica', () => {
  const AGENT = { ...CONFIG, startReportDelayMs: START_REPORT_DELAY_MS };
  const d = des('demo-web-1');
  const starting = (queuedAt: number, phase: StartProgress['phase'] = 'starting', extra: Partial<StartProgress> = {}): Record<string, StartProgress> => ({
    'demo-web-1': { revision: 1, specHash: d.spec.specHash, kind: 'create', phase, queuedAt, ...extra },
  });

  it('waits for a quick start: nothing is written while it is under way, running is the first report', () => {
    const ordered = decide(snap({ desired: [d] }), NOW, AGENT);
    expect(ordered.starts.map((s) => s.replica)).toEqual(['demo-web-1']);
    expect(ordered.observe).toEqual([]);
    expect(ordered.recheckAt).toBe(NOW + START_REPORT_DELAY_MS);
    for (const phase of ['queued', 'creating', 'starting'] as const) expect(decide(snap({ desired: [d], starts: starting(NOW, phase) }), NOW + 300, AGENT).observe).toEqual([]);
    const up = decide(snap({ desired: [d], containers: [ctr(d)] }), NOW + 400, AGENT);
    expect(up.observe.map((o) => o.state)).toEqual(['running']);
  });

  it('reports a start that takes longer than the delay, and at once one that pulls or fails', () => {
    expect(obs(decide(snap({ desired: [d], starts: starting(NOW) }), NOW + START_REPORT_DELAY_MS, AGENT), 'demo-web-1')).toMatchObject({ state: 'starting' });
    expect(obs(decide(snap({ desired: [d], starts: starting(NOW, 'pulling', { code: 'pulling' }) }), NOW + 10, AGENT), 'demo-web-1')).toMatchObject({ state: 'pulling' });
    expect(obs(decide(snap({ desired: [d], starts: starting(NOW, 'pull_failed', { code: 'image_pull_failed', details: 'refused' }) }), NOW + 10, AGENT), 'demo-web-1')).toMatchObject({ state: 'pending', code: 'image_pull_failed' });
  });

  it('measures the delay on the monotonic clock: a wall clock stepped 10 minutes either way neither ends it nor lengthens it (issue 29)', () => {
    const STEP = 10 * 60_000;
    const ordered = decide({ ...snap({ desired: [d] }), mono: 0 }, NOW, AGENT);
    expect(ordered.starts[0]?.replica).toBe('demo-web-1');
    // Stepped forward: still under way, and the recheck is the delay's rest from the new wall time.
    const ahead = decide({ ...snap({ desired: [d], starts: starting(0) }), mono: START_REPORT_DELAY_MS - 1 }, NOW + STEP, AGENT);
    expect(ahead.observe).toEqual([]);
    expect(ahead.recheckAt).toBe(NOW + STEP + 1);
    // Stepped back: reported once the delay has run on the monotonic clock.
    const behind = decide({ ...snap({ desired: [d], starts: starting(0) }), mono: START_REPORT_DELAY_MS }, NOW - STEP, AGENT);
    expect(obs(behind, 'demo-web-1')).toMatchObject({ state: 'starting', observedAt: iso(NOW - STEP) });
  });

  it('reports at once a replica reported before, a restart, a start-first replacement, and a start with no time (an agent restarted meanwhile)', () => {
    const prev: ReplicaObservedStatus = { replica: 'demo-web-1', node: 'n1', deployment: 'demo', service: 'web', state: 'exited', observedAt: iso(NOW - 1000) };
    expect(obs(decide(snap({ desired: [d], observed: [prev] }), NOW, AGENT), 'demo-web-1')).toMatchObject({ state: 'starting' });
    expect(obs(decide(snap({ desired: [d], commands: [cmd('demo-web-1', 1)], containers: [ctr(d)] }), NOW, AGENT), 'demo-web-1')).toMatchObject({ state: 'starting', code: 'restarting' });
    const d2 = des('demo-web-1', {}, 2);
    expect(obs(decide(snap({ desired: [d2], containers: [ctr(d)] }), NOW, AGENT), 'demo-web-1')).toMatchObject({ state: 'starting', revision: 2 });
    expect(obs(decide(snap({ desired: [d], starts: { 'demo-web-1': { revision: 1, specHash: d.spec.specHash, kind: 'create', phase: 'starting' } } }), NOW, AGENT), 'demo-web-1')).toMatchObject({ state: 'starting' });
  });
});

describe('starting replicas', () => {
  it('starts a new desired replica and reports it starting', () => {
    const d = des('demo-web-1');
    const plan = run(snap({ desired: [d] }));
    expect(plan.starts).toEqual([{ replica: 'demo-web-1', kind: 'create', desired: d, stopFirst: [] }]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'starting', revision: 1, specHash: d.spec.specHash, deployment: 'demo', service: 'web', node: 'n1', image: BASE.image });
  });

  it('adopts a running container of the desired spec: nothing started or stopped', () => {
    const d = des('demo-web-1');
    const c = ctr(d);
    const plan = run(snap({ desired: [d], containers: [c] }));
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'running', containerId: c.id, containerName: c.name, health: 'none', startedAt: c.startedAt });
  });

  it('writes nothing when the report has not changed (only observedAt would)', () => {
    const d = des('demo-web-1');
    const c = ctr(d);
    const first = obs(run(snap({ desired: [d], containers: [c] })), 'demo-web-1')!;
    const again = run(snap({ desired: [d], containers: [c], observed: [first] }), NOW + 5000);
    expect(again.observe).toEqual([]);
  });

  it('does not start a replica whose start is already under way, and reports the start', () => {
    const d = des('demo-web-1');
    const cases: [StartProgress['phase'], Partial<ReplicaObservedStatus>][] = [
      ['queued', { state: 'starting' }],
      ['pulling', { state: 'pulling', code: 'pulling' }],
      ['pull_failed', { state: 'pending', code: 'image_pull_failed', details: 'img: connection refused' }],
      ['create_failed', { state: 'pending', code: 'create_failed', details: 'img: connection refused' }],
      ['creating', { state: 'starting' }],
      ['starting', { state: 'starting', containerId: 'c-new' }],
    ];
    for (const [phase, want] of cases) {
      const code = phase === 'pull_failed' ? 'image_pull_failed' : phase === 'create_failed' ? 'create_failed' : undefined;
      const start: StartProgress = {
        revision: 1,
        specHash: d.spec.specHash,
        kind: 'create',
        phase,
        ...(code ? { code, details: 'img: connection refused' } : {}),
        ...(phase === 'starting' ? { containerId: 'c-new' } : {}),
      };
      const plan = run(snap({ desired: [d], starts: { 'demo-web-1': start } }));
      expect(plan.starts, phase).toEqual([]);
      expect(plan.cancels, phase).toEqual([]);
      expect(obs(plan, 'demo-web-1'), phase).toMatchObject(want);
    }
  });

  it('leaves a terminally failed start alone until the desired state changes', () => {
    const d = des('demo-web-1');
    const failed: StartProgress = { revision: 1, specHash: d.spec.specHash, kind: 'create', phase: 'failed', code: 'invalid_spec', details: 'invalid mount config' };
    const plan = run(snap({ desired: [d], starts: { 'demo-web-1': failed } }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'failed', code: 'invalid_spec', details: 'invalid mount config' });
    const d2 = des('demo-web-1', { env: { A: '1' } }, 2);
    const next = run(snap({ desired: [d2], starts: { 'demo-web-1': failed } }));
    expect(next.cancels).toEqual([{ replica: 'demo-web-1', reason: 'superseded' }]);
    expect(next.starts.map((s) => s.desired)).toEqual([d2]);
  });

  it('a newer desired revision cancels and supersedes the start in flight', () => {
    const d1 = des('demo-web-1');
    const d2 = des('demo-web-1', { image: 'jaco-demo/busybox:2' }, 2);
    const plan = run(snap({ desired: [d2], starts: { 'demo-web-1': { revision: 1, specHash: d1.spec.specHash, kind: 'create', phase: 'pulling' } } }));
    expect(plan.cancels).toEqual([{ replica: 'demo-web-1', reason: 'superseded' }]);
    expect(plan.starts).toMatchObject([{ replica: 'demo-web-1', kind: 'create', desired: d2 }]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'starting', revision: 2 });
  });

  it('resumes a container that was created but never started (the agent stopped in between)', () => {
    const d = des('demo-web-1');
    const c = ctr(d, { state: 'created', startedAt: undefined });
    const plan = run(snap({ desired: [d], containers: [c] }));
    expect(plan.starts).toEqual([{ replica: 'demo-web-1', kind: 'resume', desired: d, stopFirst: [], resume: c.id }]);
  });

  it('does not retry a container Docker could not start: it is reported exited with start_failed', () => {
    const d = des('demo-web-1');
    const c = ctr(d, { state: 'created', startedAt: undefined, exitCode: 127, error: 'exec: "nope": executable file not found' });
    const plan = run(snap({ desired: [d], containers: [c] }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'exited', code: 'start_failed', exitCode: 127, details: c.error });
  });
});

describe('what containers show', () => {
  const d = des('demo-web-1', { healthcheck: { test: ['CMD', 'true'] } });
  const cases: [string, Partial<ContainerFacts>, Partial<ReplicaObservedStatus>][] = [
    ['healthy', { health: 'healthy', lastHealthAt: iso(NOW - 1000) }, { state: 'running', health: 'healthy', lastHealthAt: iso(NOW - 1000) }],
    ['health starting', { health: 'starting' }, { state: 'running', health: 'starting' }],
    ['unhealthy', { health: 'unhealthy', healthOutput: 'wget: server returned 500' }, { state: 'degraded', code: 'unhealthy', details: 'wget: server returned 500', health: 'unhealthy' }],
    ['exited', { state: 'exited', exitCode: 3 }, { state: 'exited', exitCode: 3, details: 'exited with code 3' }],
    ['exited at a time (a job\'s end: its duration and back-off)', { state: 'exited', exitCode: 0, finishedAt: iso(NOW - 500) }, { state: 'exited', exitCode: 0, finishedAt: iso(NOW - 500) }],
    ['oom killed', { state: 'exited', exitCode: 137, oomKilled: true }, { state: 'exited', code: 'oom_killed', exitCode: 137 }],
    ['paused', { state: 'paused' }, { state: 'degraded', code: 'paused' }],
    ['dead', { state: 'dead', exitCode: 1 }, { state: 'exited', exitCode: 1 }],
  ];
  for (const [name, facts, want] of cases)
    it(`${name} → ${want.state}${want.code ? `/${want.code}` : ''}`, () => {
      const plan = run(snap({ desired: [d], containers: [ctr(d, facts)] }));
      expect(plan.starts).toEqual([]);
      expect(plan.stops).toEqual([]);
      expect(obs(plan, 'demo-web-1')).toMatchObject(want);
    });

  it('never restarts an exited container by itself (the scheduler decides)', () => {
    const plan = run(snap({ desired: [d], containers: [ctr(d, { state: 'exited', exitCode: 1 })] }));
    expect(plan.starts).toEqual([]);
  });
});

describe('replacing a container when the spec changes', () => {
  const d1 = des('demo-web-1');
  const d2 = des('demo-web-1', { env: { COLOR: 'blue' } }, 2);

  it('starts the new container first and keeps the old one serving (start-first)', () => {
    const old = ctr(d1);
    const plan = run(snap({ desired: [d2], containers: [old] }));
    expect(plan.starts).toEqual([{ replica: 'demo-web-1', kind: 'create', desired: d2, stopFirst: [] }]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'starting', revision: 2, specHash: d2.spec.specHash, replacing: { revision: 1, specHash: d1.spec.specHash, containerId: old.id, state: 'running' } });
  });

  it('stops the old one once the new one has run for minReadyTime (no health check)', () => {
    const old = ctr(d1);
    const fresh = ctr(d2, { startedAt: iso(NOW - 2000) });
    const early = run(snap({ desired: [d2], containers: [old, fresh] }));
    expect(early.stops).toEqual([]);
    expect(early.recheckAt).toBe(NOW - 2000 + 5000);
    expect(obs(early, 'demo-web-1')).toMatchObject({ state: 'running', revision: 2, containerId: fresh.id, replacing: { containerId: old.id } });
    const later = run(snap({ desired: [d2], containers: [old, fresh] }), NOW + 3000);
    expect(later.stops).toEqual([{ replica: 'demo-web-1', containerId: old.id, name: old.name, remove: true, reason: 'replaced' }]);
  });

  it('with a health check, waits for healthy', () => {
    const h1 = des('demo-web-1', { healthcheck: { test: ['CMD', 'true'] } });
    const h2 = des('demo-web-1', { healthcheck: { test: ['CMD', 'true'] }, env: { A: '1' } }, 2);
    const old = ctr(h1, { health: 'healthy' });
    expect(run(snap({ desired: [h2], containers: [old, ctr(h2, { health: 'starting' })] }), NOW + 600_000).stops).toEqual([]);
    expect(run(snap({ desired: [h2], containers: [old, ctr(h2, { health: 'unhealthy' })] })).stops).toEqual([]);
    expect(run(snap({ desired: [h2], containers: [old, ctr(h2, { health: 'healthy' })] })).stops).toMatchObject([{ containerId: old.id, reason: 'replaced' }]);
  });

  it('keeps `replacing` while the old container is being stopped, and drops it once it is gone', () => {
    const old = ctr(d1);
    const fresh = ctr(d2);
    const stopping = run(snap({ desired: [d2], containers: [old, fresh], stopping: [old.id] }));
    expect(stopping.stops).toEqual([]);
    expect(obs(stopping, 'demo-web-1')?.replacing?.containerId).toBe(old.id);
    const prev = obs(stopping, 'demo-web-1')!;
    const gone = run(snap({ desired: [d2], containers: [fresh], observed: [prev] }));
    expect(obs(gone, 'demo-web-1')).toBeDefined();
    expect(obs(gone, 'demo-web-1')?.replacing).toBeUndefined();
  });

  it('removes old containers that no longer run without waiting', () => {
    const old = ctr(d1, { state: 'exited', exitCode: 0 });
    const plan = run(snap({ desired: [d2], containers: [old] }));
    expect(plan.stops).toEqual([{ replica: 'demo-web-1', containerId: old.id, name: old.name, remove: true, reason: 'superseded' }]);
    expect(plan.starts).toMatchObject([{ kind: 'create', stopFirst: [] }]);
    expect(obs(plan, 'demo-web-1')?.replacing).toBeUndefined();
  });

  it('stops first with update.order stop-first, a shared host port, or volumes', () => {
    const cases: [string, Partial<ServiceSpec>, Partial<ContainerFacts>, boolean][] = [
      ['stop-first order', { update: { order: 'stop-first' } }, {}, true],
      ['shared host port', { ports: [8080] }, { ports: [8080] }, true],
      ['disjoint ports', { ports: [8081] }, { ports: [8080] }, false],
      ['named volume', { volumes: [{ type: 'volume', source: 'data', target: '/data' }] }, {}, true],
      ['default', {}, {}, false],
    ];
    for (const [name, spec, oldFacts, stopFirst] of cases) {
      const nd = des('demo-web-1', { ...spec, env: { V: '2' } }, 2);
      const old = ctr(d1, oldFacts);
      const plan = run(snap({ desired: [nd], containers: [old] }));
      expect(plan.starts[0]?.stopFirst, name).toEqual(stopFirst ? [old.id] : []);
      expect(plan.stops, name).toEqual([]);
      if (stopFirst) expect(obs(plan, 'demo-web-1')?.code, name).toBe('stop_first');
    }
  });

  it('a rollback to the running revision cancels the start of the newer one', () => {
    const cur = ctr(d1);
    const plan = run(snap({ desired: [d1], containers: [cur], starts: { 'demo-web-1': { revision: 2, specHash: d2.spec.specHash, kind: 'create', phase: 'pulling' } } }));
    expect(plan.cancels).toEqual([{ replica: 'demo-web-1', reason: 'superseded' }]);
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'running', revision: 1 });
  });
});

describe('removing replicas', () => {
  const d = des('demo-web-1');

  it('stops and removes the containers of a replica with no desired key, then forgets it', () => {
    const c = ctr(d);
    const prev: ReplicaObservedStatus = { replica: 'demo-web-1', node: 'n1', deployment: 'demo', service: 'web', state: 'running', observedAt: iso(NOW - 1000) };
    const plan = run(snap({ containers: [c], observed: [prev] }));
    expect(plan.stops).toEqual([{ replica: 'demo-web-1', containerId: c.id, name: c.name, remove: true, reason: 'orphaned' }]);
    expect(plan.forget).toEqual([]);
    expect(plan.observe).toEqual([]);
    const after = run(snap({ observed: [prev] }));
    expect(after.forget).toEqual(['demo-web-1']);
  });

  it('does not order a second stop of a container already stopping', () => {
    const c = ctr(d);
    expect(run(snap({ containers: [c], stopping: [c.id] })).stops).toEqual([]);
  });

  it('cancels a start in flight when the desired key goes', () => {
    const plan = run(snap({ starts: { 'demo-web-1': { revision: 1, specHash: d.spec.specHash, kind: 'create', phase: 'pull_failed' } } }));
    expect(plan.cancels).toEqual([{ replica: 'demo-web-1', reason: 'desired_removed' }]);
  });
});

describe('restart commands', () => {
  const d = des('demo-web-1');

  it('executes a command whose seq is above the acknowledged one: stop everything, start fresh', () => {
    const c = ctr(d, { state: 'exited', exitCode: 1 });
    const plan = run(snap({ desired: [d], containers: [c], commands: [cmd('demo-web-1', 3)], acked: { 'demo-web-1': 2 } }));
    expect(plan.starts).toEqual([{ replica: 'demo-web-1', kind: 'restart', desired: d, stopFirst: [c.id], command: 3 }]);
    expect(plan.stops).toEqual([]);
    // Acknowledged in the same write that reports the restart, before it runs (never run twice).
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'starting', code: 'restarting', ackedCommand: 3 });
  });

  it('executes it once: an acknowledged seq does nothing', () => {
    const c = ctr(d);
    expect(run(snap({ desired: [d], containers: [c], commands: [cmd('demo-web-1', 3)], acked: { 'demo-web-1': 3 } })).starts).toEqual([]);
    const prev: ReplicaObservedStatus = { replica: 'demo-web-1', node: 'n1', deployment: 'demo', service: 'web', state: 'running', ackedCommand: 3, observedAt: iso(NOW) };
    expect(run(snap({ desired: [d], containers: [c], commands: [cmd('demo-web-1', 3)], observed: [prev] })).starts).toEqual([]);
  });

  it('a first command (no ack yet) runs, even with seq 0', () => {
    expect(run(snap({ desired: [d], containers: [ctr(d)], commands: [cmd('demo-web-1', 0)] })).starts).toMatchObject([{ kind: 'restart', command: 0 }]);
  });

  it('reports the acknowledged seq', () => {
    const plan = run(snap({ desired: [d], containers: [ctr(d)], acked: { 'demo-web-1': 4 } }));
    expect(obs(plan, 'demo-web-1')?.ackedCommand).toBe(4);
  });

  it('waits for a start in flight before executing a command', () => {
    const plan = run(snap({ desired: [d], commands: [cmd('demo-web-1', 1)], starts: { 'demo-web-1': { revision: 1, specHash: d.spec.specHash, kind: 'create', phase: 'pulling' } } }));
    expect(plan.starts).toEqual([]);
  });
});

describe('a container removed behind the agent’s back', () => {
  const d = des('demo-web-1');
  const reported: ReplicaObservedStatus = {
    replica: 'demo-web-1',
    node: 'n1',
    deployment: 'demo',
    service: 'web',
    state: 'running',
    revision: 1,
    specHash: d.spec.specHash,
    containerId: 'c-gone',
    containerName: 'jaco-x-n1-demo-web-1-r1-abc',
    observedAt: iso(NOW - 1000),
  };

  it('is reported exited with container_removed, not restarted', () => {
    const plan = run(snap({ desired: [d], observed: [reported] }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'exited', code: 'container_removed', containerId: 'c-gone' });
  });

  it('a restart command brings it back', () => {
    expect(run(snap({ desired: [d], observed: [reported], commands: [cmd('demo-web-1', 1)] })).starts).toMatchObject([{ kind: 'restart', stopFirst: [], command: 1 }]);
  });

  it('a container of an older spec that went is no reason to wait: the desired one starts', () => {
    const d2 = des('demo-web-1', { env: { A: '2' } }, 2);
    expect(run(snap({ desired: [d2], observed: [reported] })).starts).toMatchObject([{ kind: 'create' }]);
  });
});

describe('bad input', () => {
  it('reports a malformed desired key as failed/invalid_spec, and leaves its container running', () => {
    const d = des('demo-web-1');
    const c = ctr(d);
    const plan = run(snap({ containers: [c], invalid: { 'demo-web-1': { reason: 'spec.revision: is required', deployment: 'demo', service: 'web' } } }));
    expect(plan.stops).toEqual([]);
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'failed', code: 'invalid_spec', details: 'spec.revision: is required', deployment: 'demo', service: 'web' });
  });

  it('goes on with the other replicas', () => {
    const ok = des('demo-web-2');
    const plan = run(snap({ desired: [ok], invalid: { 'demo-web-1': { reason: 'bad' } } }));
    expect(plan.starts.map((s) => s.replica)).toEqual(['demo-web-2']);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'failed', code: 'invalid_spec', deployment: '', service: '' });
  });

  it('cancels a start in flight when its key turns malformed', () => {
    const d = des('demo-web-1');
    const plan = run(snap({ invalid: { 'demo-web-1': { reason: 'bad' } }, starts: { 'demo-web-1': { revision: 1, specHash: d.spec.specHash, kind: 'create', phase: 'pulling' } } }));
    expect(plan.cancels).toEqual([{ replica: 'demo-web-1', reason: 'invalid' }]);
  });
});

describe('suspended replicas', () => {
  const at = iso(NOW - 5000);
  const d = des('demo-web-1', {}, 1, { suspended: { reason: 'drain_forced', at } });

  it('stops (and keeps) the container; reports stopped, with the reason as code, once it has stopped', () => {
    const c = ctr(d);
    const plan = run(snap({ desired: [d], containers: [c] }));
    expect(plan.stops).toEqual([{ replica: 'demo-web-1', containerId: c.id, name: c.name, remove: false, reason: 'suspended' }]);
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'demo-web-1')).toMatchObject({ state: 'running', code: 'drain_forced', containerId: c.id });
    const exited = ctr(d, { state: 'exited', exitCode: 143 });
    const stopped = run(snap({ desired: [d], containers: [exited] }));
    expect(stopped.stops).toEqual([]);
    expect(obs(stopped, 'demo-web-1')).toMatchObject({ state: 'stopped', code: 'drain_forced', containerId: exited.id });
  });

  it('starts nothing while suspended, and resumes the stopped container afterwards', () => {
    const stopped = ctr(d, { state: 'exited', exitCode: 143 });
    const plan = run(snap({ desired: [d], containers: [stopped] }));
    expect(plan.stops).toEqual([]);
    expect(plan.starts).toEqual([]);
    const resumed = des('demo-web-1');
    const next = run(snap({ desired: [resumed], containers: [stopped], observed: [obs(plan, 'demo-web-1')!] }));
    expect(next.starts).toEqual([{ replica: 'demo-web-1', kind: 'resume', desired: resumed, stopFirst: [], resume: stopped.id }]);
  });
});

describe('determinism', () => {
  it('the same snapshot gives the same plan, replicas in id order', () => {
    const ds = ['demo-web-3', 'demo-web-1', 'demo-web-2'].map((r) => des(r));
    const orphan = ctr(des('demo-web-0'));
    const s = snap({ desired: ds, containers: [orphan] });
    const a = run(s);
    expect(run(s)).toEqual(a);
    expect(a.starts.map((x) => x.replica)).toEqual(['demo-web-1', 'demo-web-2', 'demo-web-3']);
    expect(a.stops.map((x) => x.replica)).toEqual(['demo-web-0']);
  });
});

describe('helpers', () => {
  it('readiness: healthy, or running for minReadyTime without a health check', () => {
    const t = des('r', { update: { minReadyTime: '10s' } }).spec.template;
    const d = des('r');
    expect(readiness(ctr(d, { startedAt: iso(NOW - 11_000) }), t, NOW)).toEqual({ ready: true });
    expect(readiness(ctr(d, { startedAt: iso(NOW - 1000) }), t, NOW)).toEqual({ ready: false, at: NOW + 9000 });
    expect(readiness(ctr(d, { health: 'healthy' }), t, NOW)).toEqual({ ready: true });
    expect(readiness(ctr(d, { health: 'starting' }), t, NOW)).toEqual({ ready: false });
    expect(readiness(ctr(d, { state: 'exited' }), t, NOW)).toEqual({ ready: false });
    // Measured on the agent's monotonic clock when known: a wall clock that stepped back since the
    // start (its stamp in the future) does not hold the container back, nor does one that stepped forward hurry it.
    expect(readiness(ctr(d, { startedAt: iso(NOW + 600_000), runningForMs: 11_000 }), t, NOW)).toEqual({ ready: true });
    expect(readiness(ctr(d, { startedAt: iso(NOW - 600_000), runningForMs: 1000 }), t, NOW)).toEqual({ ready: false, at: NOW + 9000 });
  });

  it('stopFirstFor: nothing to stop when nothing serves', () => {
    expect(stopFirstFor(des('r', { update: { order: 'stop-first' } }).spec.template, [])).toEqual([]);
  });

  it('statusChanged ignores observedAt and small lastHealthAt moves', () => {
    const a: ReplicaObservedStatus = { replica: 'r', node: 'n1', deployment: 'd', service: 's', state: 'running', health: 'healthy', lastHealthAt: iso(NOW), observedAt: iso(NOW) };
    expect(statusChanged(a, { ...a, observedAt: iso(NOW + 1) }, 30_000)).toBe(false);
    expect(statusChanged(a, { ...a, lastHealthAt: iso(NOW + 1000) }, 30_000)).toBe(false);
    expect(statusChanged(a, { ...a, lastHealthAt: iso(NOW + 30_000) }, 30_000)).toBe(true);
    expect(statusChanged(a, { ...a, state: 'degraded' }, 30_000)).toBe(true);
    expect(statusChanged(undefined, a, 30_000)).toBe(true);
  });
});

describe('leaving routing before a stop (deregistration delay)', () => {
  const WEB: Partial<ServiceSpec> = { ports: [{ name: 'http', containerPort: 80, published: 18080 }] };
  const routed = (d: ReplicaDesired, o: Partial<ContainerFacts> = {}) => ctr(d, { deregistrationMs: 5000, ports: [20100], ...o });

  it.each([
    ['a removed replica', (c: ContainerFacts) => ({ containers: [c] })],
    ['a stop-first replacement (a dynamic port both revisions bind)', (c: ContainerFacts) => ({ desired: [des('r1', WEB, 2, { hostPorts: { http: 20100 } })], containers: [c] })],
    ['a restart command', (c: ContainerFacts) => ({ desired: [des('r1', WEB, 1, { hostPorts: { http: 20100 } })], containers: [c], commands: [cmd('r1', 1)] })],
  ])('%s: held for the delay, then stopped', (_name, shape) => {
    const old = routed(des('r1', WEB, 1, { hostPorts: { http: 20100 } }));
    const first = decide({ ...snap(shape(old)) }, NOW, CONFIG);
    expect(first.stops).toEqual([]);
    expect(first.starts).toEqual([]);
    expect(first.retiring.get(old.id)).toBe(NOW);
    expect(first.recheckAt).toBe(NOW + 5000);
    // Still held a moment before the delay is over; the hold keeps its first time.
    const mid = decide({ ...snap(shape(old)), retiring: first.retiring }, NOW + 4999, CONFIG);
    expect(mid.stops.length + mid.starts.length).toBe(0);
    expect(mid.retiring.get(old.id)).toBe(NOW);
    const due = decide({ ...snap(shape(old)), retiring: mid.retiring }, NOW + 5000, CONFIG);
    const stopped = [...due.stops.map((s) => s.containerId), ...due.starts.flatMap((s) => s.stopFirst)];
    expect(stopped).toEqual([old.id]);
    expect(due.retiring.size).toBe(0);
  });

  it('holds for the delay on the monotonic clock: a wall clock stepped back 10 minutes does not lengthen the hold, one stepped forward does not cut it short (issue 29)', () => {
    const STEP = 10 * 60_000;
    const old = routed(des('r1', WEB, 1, { hostPorts: { http: 20100 } }));
    const first = decide({ ...snap({ containers: [old] }), mono: 100 }, NOW, CONFIG);
    expect(first.retiring.get(old.id)).toBe(100);
    const ahead = decide({ ...snap({ containers: [old] }), mono: 5099, retiring: first.retiring }, NOW + STEP, CONFIG);
    expect(ahead.stops).toEqual([]);
    expect(ahead.recheckAt).toBe(NOW + STEP + 1);
    const behind = decide({ ...snap({ containers: [old] }), mono: 5100, retiring: ahead.retiring }, NOW - STEP, CONFIG);
    expect(behind.stops.map((s) => s.containerId)).toEqual([old.id]);
  });

  it('a stop-first replacement reports the replica starting at its new revision while the old container leaves routing', () => {
    const d2 = des('r1', WEB, 2, { hostPorts: { http: 20100 } });
    const old = routed(des('r1', WEB, 1, { hostPorts: { http: 20100 } }));
    const p = decide(snap({ desired: [d2], containers: [old] }), NOW, CONFIG);
    expect(p.observe[0]).toMatchObject({ revision: 2, state: 'starting', code: 'stop_first', replacing: { revision: 1, containerId: old.id } });
  });

  it('a container without a delay (no published port) stops at once, as before', () => {
    const old = ctr(des('r1'));
    expect(decide(snap({ containers: [old] }), NOW, CONFIG).stops.map((s) => s.containerId)).toEqual([old.id]);
  });

  it('an assigned host port makes the replacement stop-first (two revisions cannot bind one port)', () => {
    const d2 = des('r1', WEB, 2, { hostPorts: { http: 20100 } });
    expect(stopFirstFor(d2.spec.template, [ctr(d2, { ports: [20100] })], [20100])).toHaveLength(1);
    expect(stopFirstFor(d2.spec.template, [ctr(d2, { ports: [20101] })], [20100])).toEqual([]);
  });
});

describe('secrets and configs: nothing starts without every one of its files', () => {
  const files = { secrets: [{ source: 'db_password' }, { source: 'api_key', target: '/etc/key' }], configs: [{ source: 'app.conf' }] };
  const d = des('r1', files);

  it('a replica whose copies are all on the node starts', () => {
    const plan = run(snap({ desired: [d], files: { 'secret/db_password': 'ready', 'secret/api_key': 'ready', 'config/app.conf': 'ready' } }));
    expect(plan.starts.map((o) => o.replica)).toEqual(['r1']);
  });

  const waits: [string, Record<string, string>, string, string][] = [
    ['no copy of a secret yet', { 'secret/api_key': 'ready', 'config/app.conf': 'ready' }, 'secret_missing', 'waiting for secret db_password (no copy on this node yet)'],
    ['no copy of a config yet', { 'secret/db_password': 'ready', 'secret/api_key': 'ready' }, 'config_missing', 'waiting for config app.conf (no copy on this node yet)'],
    ['a copy sealed to an older key of the node', { 'secret/db_password': 'sealed to node key nk-old; this node\'s key is nk-new', 'secret/api_key': 'ready', 'config/app.conf': 'ready' }, 'secret_unreadable', "waiting for secret db_password (sealed to node key nk-old; this node's key is nk-new)"],
    ['nothing at all: every file is named', {}, 'secret_missing', 'waiting for secret db_password (no copy on this node yet), secret api_key (no copy on this node yet), config app.conf (no copy on this node yet)'],
  ];
  it.each(waits)('%s: reported pending with its code, nothing started', (_what, have, code, details) => {
    const plan = run(snap({ desired: [d], files: have }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'pending', code, details });
  });

  it('a copy of another object of the same name (deleted and made again) is not the one the spec pinned: it waits', () => {
    const pinned = des('r2', { secrets: [{ source: 'db_password', version: 'uid-new' }] });
    const stale = run(snap({ desired: [pinned], files: { 'secret/db_password': 'uid:uid-old' } }));
    expect(stale.starts).toEqual([]);
    expect(obs(stale, 'r2')).toMatchObject({ state: 'pending', code: 'secret_missing', details: 'waiting for secret db_password (the copy on this node is of another secret of that name)' });
    expect(run(snap({ desired: [pinned], files: { 'secret/db_password': 'uid:uid-new' } })).starts.map((o) => o.replica)).toEqual(['r2']);
  });

  it('a running container is left alone when its copy goes (its files are in its own tmpfs)', () => {
    const plan = run(snap({ desired: [d], containers: [ctr(d)], files: {} }));
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'running' });
  });

  it('a rotation: the new revision waits for its secret, the old container serves meanwhile, then it starts', () => {
    const old = des('r1', { secrets: [{ source: 'db_password' }] }, 1);
    const next = des('r1', { secrets: [{ source: 'db_password_v2', target: 'db_password' }] }, 2);
    const c = ctr(old);
    const waiting = run(snap({ desired: [next], containers: [c], files: { 'secret/db_password': 'ready' } }));
    expect(waiting.starts).toEqual([]);
    expect(waiting.stops).toEqual([]);
    expect(obs(waiting, 'r1')).toMatchObject({ state: 'pending', code: 'secret_missing', replacing: { containerId: c.id } });
    const going = run(snap({ desired: [next], containers: [c], files: { 'secret/db_password_v2': 'ready' } }));
    expect(going.starts.map((o) => [o.replica, o.desired.spec.revision])).toEqual([['r1', 2]]);
  });

  it('a restart command waits for the files too, and is not acknowledged meanwhile', () => {
    const plan = run(snap({ desired: [d], containers: [ctr(d, { state: 'exited', exitCode: 1 })], commands: [cmd('r1', 1)], files: {} }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'pending', code: 'secret_missing' });
    expect(obs(plan, 'r1')!.ackedCommand).toBeUndefined();
    // Once the files are there, it runs and is acknowledged.
    const later = run(snap({ desired: [d], containers: [ctr(d, { state: 'exited', exitCode: 1 })], commands: [cmd('r1', 1)], files: { 'secret/db_password': 'ready', 'secret/api_key': 'ready', 'config/app.conf': 'ready' } }));
    expect(later.starts.map((o) => o.kind)).toEqual(['restart']);
    expect(obs(later, 'r1')!.ackedCommand).toBe(1);
  });
});

describe("a registry's password: the pull waits for this node's copy like a file", () => {
  const d = des('r1');
  const pullSecrets = { [d.spec.template.image]: 'registry_reg.example_v1' };

  it.each([
    ['no copy yet', {}, 'secret_missing', "waiting for the registry's password, secret registry_reg.example_v1 (no copy on this node yet)"],
    ['a copy this node cannot open', { 'secret/registry_reg.example_v1': 'sealed to node key nk-old' }, 'secret_unreadable', "waiting for the registry's password, secret registry_reg.example_v1 (sealed to node key nk-old)"],
  ] as const)('%s: pending with its code, no start (so no pull, no back-off)', (_what, files, code, details) => {
    const plan = run(snap({ desired: [d], files, pullSecrets }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'pending', code, details });
  });

  it('starts once the copy is here; an image from a registry without a password waits for nothing', () => {
    expect(run(snap({ desired: [d], files: { 'secret/registry_reg.example_v1': 'ready' }, pullSecrets })).starts.map((o) => o.replica)).toEqual(['r1']);
    expect(run(snap({ desired: [d], files: {}, pullSecrets: { 'other/image:1': 'registry_reg.example_v1' } })).starts.map((o) => o.replica)).toEqual(['r1']);
  });

  it('a running container keeps running when the copy goes (a logout, a replica that no longer pulls)', () => {
    const plan = run(snap({ desired: [d], containers: [ctr(d)], files: {}, pullSecrets }));
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'running' });
  });
});

describe('the cluster network: a sandbox per replica', () => {
  const ADDRESS = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' };
  const CLUSTER: Partial<ServiceSpec> = { network: 'cluster' };
  const desC = (replica: string, revision = 1, address = ADDRESS, spec: Partial<ServiceSpec> = {}) => des(replica, { ...CLUSTER, ...spec }, revision, { address });
  /** The sandbox of a desired replica's spec, running unless told. */
  const sbx = (d: ReplicaDesired, o: Partial<ContainerFacts> = {}): ContainerFacts => {
    const sp = sandboxSpec(d.spec)!;
    return containerFacts(NOW, {
      id: o.id ?? `s${String(++nextId).padStart(3, '0')}`,
      name: `jaco-x-n1-${d.spec.replica}-sandbox-${sp.hash.slice(0, 8)}`,
      replica: d.spec.replica,
      revision: 0,
      specHash: '',
      image: 'jaco/pause:1',
      role: 'sandbox',
      networkMode: 'none',
      sandboxHash: sp.hash,
      address: sp.address,
      ...o,
    });
  };
  /** A container of the replica in that sandbox. */
  const inSb = (d: ReplicaDesired, sb: ContainerFacts, o: Partial<ContainerFacts> = {}) => ctr(d, { networkMode: `container:${sb.id}`, ...o });

  it('a new replica: one start that makes its sandbox (nothing to reuse or replace)', () => {
    const d = desC('r1');
    const plan = run(snap({ desired: [d] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d, stopFirst: [], sandbox: { spec: sandboxSpec(d.spec), replace: [] } }]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'starting' });
    expect(obs(plan, 'r1')!.address).toBeUndefined();
  });

  it('adopts a sandbox and its container (an agent restart): nothing started or stopped, the addresses reported', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb);
    const plan = run(snap({ desired: [d], containers: [c], sandboxes: [sb] }));
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'running', containerId: c.id, address: ADDRESS });
  });

  it('adopts a running sandbox of its spec with no container in it yet (an agent stopped between the two): the start joins it', () => {
    const d = desC('r1');
    const sb = sbx(d);
    expect(run(snap({ desired: [d], sandboxes: [sb] })).starts[0]!.sandbox).toEqual({ spec: sandboxSpec(d.spec), reuse: sb.id, replace: [] });
  });

  it('a new revision replaces the container stop-first, in the same sandbox (it keeps its addresses)', () => {
    const d1 = desC('r1');
    const d2 = desC('r1', 2, ADDRESS, { env: { V: '2' } });
    const sb = sbx(d1);
    const old = inSb(d1, sb);
    const plan = run(snap({ desired: [d2], containers: [old], sandboxes: [sb] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d2, stopFirst: [old.id], sandbox: { spec: sandboxSpec(d2.spec), reuse: sb.id, replace: [] } }]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'starting', code: 'stop_first', revision: 2, replacing: { revision: 1, containerId: old.id } });
    expect(stopFirstFor(d2.spec.template, [old])).toEqual([old]);
  });

  it('a restart command keeps the sandbox: every container goes, the fresh one joins the same namespace', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb);
    const plan = run(snap({ desired: [d], containers: [c], sandboxes: [sb], commands: [cmd('r1', 1)] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'restart', desired: d, stopFirst: [c.id], command: 1, sandbox: { spec: sandboxSpec(d.spec), reuse: sb.id, replace: [] } }]);
  });

  it('another address: the container stops first, the old sandbox goes after it, a new one is made', () => {
    const d1 = desC('r1');
    const d2 = desC('r1', 1, { ipv4: '10.208.3.6/24', ipv6: 'fd4a:17c2:9e01:3::6/64' });
    const sb = sbx(d1);
    const c = inSb(d1, sb);
    const plan = run(snap({ desired: [d2], containers: [c], sandboxes: [sb] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d2, stopFirst: [c.id], sandbox: { spec: sandboxSpec(d2.spec), replace: [sb.id] } }]);
    expect(plan.stops).toEqual([]);
  });

  it('stop-first takes every other container of the replica, running or not (one of its name would be adopted in the wrong sandbox)', () => {
    const d1 = desC('r1');
    const d2 = desC('r1', 1, { ipv4: '10.208.3.6/24', ipv6: 'fd4a:17c2:9e01:3::6/64' });
    const sb = sbx(d1);
    const exited = inSb(d1, sb, { state: 'exited', exitCode: 0 });
    const plan = run(snap({ desired: [d2], containers: [exited], sandboxes: [sb] }));
    expect(plan.starts.map((x) => [x.stopFirst, x.sandbox?.replace])).toEqual([[[exited.id], [sb.id]]]);
    expect(plan.stops).toEqual([]);
  });

  it('a start for another sandbox than the desired one is superseded', () => {
    const d = desC('r1', 1, { ipv4: '10.208.3.6/24', ipv6: 'fd4a:17c2:9e01:3::6/64' });
    const start: StartProgress = { revision: 1, specHash: d.spec.specHash, sandboxHash: sandboxSpec(desC('r1').spec)!.hash, kind: 'create', phase: 'network_failed', code: 'network_failed' };
    const plan = run(snap({ desired: [d], starts: { r1: start } }));
    expect(plan.cancels).toEqual([{ replica: 'r1', reason: 'superseded' }]);
    expect(plan.starts.map((x) => x.sandbox?.spec.hash)).toEqual([sandboxSpec(d.spec)!.hash]);
  });

  it('a CNI failure under way is reported pending/network_failed with the plugin’s error', () => {
    const d = desC('r1');
    const details = "ptp ADD: failed to add route '{0.0.0.0 00000000} via 10.208.3.6 dev eth0': network is unreachable";
    const start: StartProgress = { revision: 1, specHash: d.spec.specHash, sandboxHash: sandboxSpec(d.spec)!.hash, kind: 'create', phase: 'network_failed', code: 'network_failed', details };
    const plan = run(snap({ desired: [d], starts: { r1: start }, sandboxes: [sbx(d)] }));
    expect(plan.starts).toEqual([]);
    expect(plan.cancels).toEqual([]);
    // The start owns the sandbox it is plumbing: nothing tears it down meanwhile.
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'pending', code: 'network_failed', details });
  });

  it('a record with no address yet: nothing starts, pending/network_failed says why', () => {
    const d = des('r1', CLUSTER);
    const plan = run(snap({ desired: [d] }));
    expect(plan.starts).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'pending', code: 'network_failed', details: expect.stringContaining('no address') });
  });

  it('an exited container is reported, not restarted; its sandbox stays (it holds the address)', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb, { state: 'exited', exitCode: 3 });
    const plan = run(snap({ desired: [d], containers: [c], sandboxes: [sb] }));
    expect(plan.starts).toEqual([]);
    expect(plan.stops).toEqual([]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'exited', exitCode: 3 });
  });

  it('tears down a sandbox no longer running, or of another spec, that nothing is in; keeps the one in use', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb);
    const dead = sbx(d, { state: 'exited' });
    const other = sbx(desC('r1', 1, { ipv4: '10.208.3.7/24', ipv6: 'fd4a:17c2:9e01:3::7/64' }));
    const plan = run(snap({ desired: [d], containers: [c], sandboxes: [sb, dead, other] }));
    expect(plan.stops).toEqual([
      { replica: 'r1', containerId: dead.id, name: dead.name, remove: true, reason: 'superseded', sandbox: true },
      { replica: 'r1', containerId: other.id, name: other.name, remove: true, reason: 'superseded', sandbox: true },
    ]);
    expect(plan.starts).toEqual([]);
  });

  it('a created container whose sandbox no longer runs is not resumed: made afresh in a new sandbox', () => {
    const d = desC('r1');
    const sb = sbx(d, { state: 'exited' });
    const c = inSb(d, sb, { state: 'created', startedAt: undefined });
    const plan = run(snap({ desired: [d], containers: [c], sandboxes: [sb] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d, stopFirst: [c.id], sandbox: { spec: sandboxSpec(d.spec), replace: [sb.id] } }]);
  });

  it('a created container in its running sandbox is resumed there', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb, { state: 'created', startedAt: undefined });
    expect(run(snap({ desired: [d], containers: [c], sandboxes: [sb] })).starts).toEqual([
      { replica: 'r1', kind: 'resume', desired: d, stopFirst: [], resume: c.id, sandbox: { spec: sandboxSpec(d.spec), reuse: sb.id, replace: [] } },
    ]);
  });

  it('a removed replica: its container first, then its sandbox (addresses and all), then the observed key', () => {
    const d = desC('r1');
    const sb = sbx(d);
    const c = inSb(d, sb);
    const prev: ReplicaObservedStatus = { replica: 'r1', node: 'n1', deployment: 'demo', service: 'web', state: 'running', observedAt: iso(NOW - 1000) };
    const first = run(snap({ containers: [c], sandboxes: [sb], observed: [prev] }));
    expect(first.stops.map((x) => [x.containerId, x.reason, x.sandbox])).toEqual([[c.id, 'orphaned', undefined]]);
    expect(first.forget).toEqual([]);
    const second = run(snap({ sandboxes: [sb], observed: [prev] }));
    expect(second.stops).toEqual([{ replica: 'r1', containerId: sb.id, name: sb.name, remove: true, reason: 'orphaned', sandbox: true }]);
    expect(second.forget).toEqual([]);
    expect(run(snap({ sandboxes: [sb], observed: [prev], stopping: [sb.id] })).stops).toEqual([]);
    expect(run(snap({ observed: [prev] })).forget).toEqual(['r1']);
  });

  it('a terminally failed start holds nothing up: a stale sandbox goes', () => {
    const d = desC('r1');
    const stale = sbx(desC('r1', 1, { ipv4: '10.208.3.7/24', ipv6: 'fd4a:17c2:9e01:3::7/64' }));
    const start: StartProgress = { revision: 1, specHash: d.spec.specHash, sandboxHash: sandboxSpec(d.spec)!.hash, kind: 'create', phase: 'failed', code: 'invalid_spec', details: 'refused' };
    const plan = run(snap({ desired: [d], starts: { r1: start }, sandboxes: [stale] }));
    expect(plan.starts).toEqual([]);
    expect(plan.stops.map((x) => x.containerId)).toEqual([stale.id]);
    expect(obs(plan, 'r1')).toMatchObject({ state: 'failed', code: 'invalid_spec' });
  });

  it('a sandbox left without its replica (an agent restart after the key went) is cleaned up', () => {
    const sb = sbx(desC('r9'));
    expect(run(snap({ sandboxes: [sb] })).stops).toEqual([{ replica: 'r9', containerId: sb.id, name: sb.name, remove: true, reason: 'orphaned', sandbox: true }]);
  });

  it('not while the start of a removed replica is being cancelled (it may be making the sandbox)', () => {
    const d = desC('r1');
    const start: StartProgress = { revision: 1, specHash: d.spec.specHash, sandboxHash: sandboxSpec(d.spec)!.hash, kind: 'create', phase: 'sandbox' };
    const plan = run(snap({ sandboxes: [sbx(d, { state: 'created' })], starts: { r1: start } }));
    expect(plan.cancels).toEqual([{ replica: 'r1', reason: 'desired_removed' }]);
    expect(plan.stops).toEqual([]);
  });

  it('back to the host network: the new container starts first, the sandbox goes once the old one has', () => {
    const d1 = desC('r1');
    const d2 = des('r1', {}, 2);
    const sb = sbx(d1);
    const old = inSb(d1, sb);
    const first = run(snap({ desired: [d2], containers: [old], sandboxes: [sb] }));
    expect(first.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d2, stopFirst: [] }]);
    expect(first.stops).toEqual([]);
    const fresh = ctr(d2, { networkMode: 'host', startedAt: iso(NOW - 10_000) });
    expect(run(snap({ desired: [d2], containers: [fresh, old], sandboxes: [sb] })).stops.map((x) => x.containerId)).toEqual([old.id]);
    expect(run(snap({ desired: [d2], containers: [fresh], sandboxes: [sb] })).stops).toEqual([{ replica: 'r1', containerId: sb.id, name: sb.name, remove: true, reason: 'superseded', sandbox: true }]);
  });

  it('suspended: the container stops and stays; the sandbox keeps the address', () => {
    const d = desC('r1', 1, ADDRESS);
    d.spec.suspended = { reason: 'drain_forced', at: iso(NOW) };
    const sb = sbx(d);
    const c = inSb(d, sb);
    expect(run(snap({ desired: [d], containers: [c], sandboxes: [sb] })).stops).toEqual([{ replica: 'r1', containerId: c.id, name: c.name, remove: false, reason: 'suspended' }]);
  });

  it('a container of the desired spec in no sandbox of it (its sandbox removed outside jaco) is made afresh', () => {
    const d = desC('r1');
    const c = ctr(d, { networkMode: 'container:gone' });
    const plan = run(snap({ desired: [d], containers: [c] }));
    expect(plan.starts).toEqual([{ replica: 'r1', kind: 'create', desired: d, stopFirst: [c.id], sandbox: { spec: sandboxSpec(d.spec), replace: [] } }]);
  });
});
