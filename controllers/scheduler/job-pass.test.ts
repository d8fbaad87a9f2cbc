// Jobs through the scheduler's whole pass (the World harness: the production preconditions over an
// in-memory store, a fake clock): gating, retries, the result kept per spec hash, and what must
// never run a finished job again (a lost key, a lost node, a re-apply of the same spec).
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { DeploymentStatus, ServiceSpec } from '../../src/api/types.js';
import { iso, World } from '../../test/support/scheduler-world.js';

const IMG = 'jaco-demo/busybox:1';
const migrate = (x: Partial<ServiceSpec> = {}): ServiceSpec => ({ image: IMG, mode: 'job', job: { attempts: 2, backoff: '1s' }, ...x });
const web = (): ServiceSpec => ({ image: IMG, dependsOn: { migrate: { condition: 'service_completed_successfully' } } });

function world(): World {
  const w = new World();
  for (const n of ['node-1', 'node-2']) w.node(n);
  w.deploy('d', { migrate: migrate(), web: web() });
  return w;
}
const sched = (w: World, s: string) => w.get<DeploymentStatus>(keys.deploymentStatus('d'))?.status?.scheduling?.services[s];
const exited = (w: World, code: number) => ({ exitCode: code, startedAt: iso(w.now - 2000), finishedAt: iso(w.now) });

describe('a job through the scheduler', () => {
  it('holds its dependent until it exited 0; then the dependent is placed and the result is audited once', () => {
    const w = world();
    w.converge();
    expect(w.desired({ service: 'migrate' })).toHaveLength(1);
    expect(w.desired({ service: 'web' })).toEqual([]);
    expect(sched(w, 'web')!.waitingForDependency).toEqual(['migrate (running (0 of 1 replica succeeded))']);
    w.observe('d-migrate-0', 'running', { startedAt: iso(w.now) });
    w.converge();
    expect(w.desired({ service: 'web' })).toEqual([]);
    w.advance(2000);
    w.observe('d-migrate-0', 'exited', exited(w, 0));
    w.converge();
    expect(sched(w, 'migrate')!.job).toMatchObject({ state: 'succeeded', attempts: 1, exitCode: 0, durationMs: 2000 });
    expect(w.desired({ service: 'web' })).toHaveLength(1);
    // An exit 0 is no restart cause: no command was written for it.
    expect(w.list(keys.commandsOf())).toEqual([]);
    expect(w.auditOf('job_succeeded').map((a) => a.payload.service)).toEqual(['migrate']);
    w.converge();
    expect(w.auditOf('job_succeeded')).toHaveLength(1);
  });

  it('a non-zero exit runs again after the back-off; the last allowed failure fails the job and holds the dependent with the reason', () => {
    const w = world();
    w.converge();
    w.observe('d-migrate-0', 'exited', exited(w, 3));
    w.converge();
    expect(w.auditOf('job_retried')).toEqual([]); // the back-off (1s) first
    w.advance(1000);
    w.converge();
    expect(w.auditOf('job_retried').map((a) => [a.payload.replica, a.payload.attempt])).toEqual([['d-migrate-0', 2]]);
    w.ack('d-migrate-0', 'exited', exited(w, 3));
    w.converge();
    expect(sched(w, 'migrate')!.job).toMatchObject({ state: 'failed', attempts: 2, exitCode: 3, reason: 'exit 3 after 2 attempts' });
    expect(sched(w, 'web')!.waitingForDependency).toEqual(['migrate (failed: exit 3 after 2 attempts)']);
    expect(w.auditOf('job_failed')).toHaveLength(1);
    // Failed is final at this spec: no more runs, however long.
    w.advance(60_000);
    w.converge();
    expect(w.auditOf('job_retried')).toHaveLength(1);
    expect(w.desired({ service: 'web' })).toEqual([]);
    // A changed spec runs afresh under a new id; the failed run goes.
    w.deploy('d', { migrate: migrate({ env: { FIXED: '1' } }), web: web() });
    w.converge();
    expect(w.desired({ service: 'migrate' }).map((d) => d.spec.replica)).toEqual(['d-migrate-1']);
    expect(sched(w, 'migrate')!.job).toMatchObject({ state: 'running', revision: 2 });
  });

  it.each([
    ['its desired key is deleted', (w: World, node: string) => w.remove(keys.desired(node, 'd-migrate-0'))],
    ['its node is lost', (w: World, node: string) => w.nodeDown(node)],
    ['the same spec is applied again', (w: World) => w.deploy('d', { migrate: migrate({ replicas: 1 }), web: web() })],
  ])('a finished job is not run again when %s', (_n, event) => {
    const w = world();
    w.converge();
    w.observe('d-migrate-0', 'exited', exited(w, 0));
    w.converge();
    const node = w.desired({ service: 'migrate' })[0]!.spec.node;
    event(w, node);
    w.converge();
    w.advance(10_000);
    w.converge();
    w.advance(10_000);
    w.converge();
    expect(w.auditOf('replica_placed').filter((a) => a.payload.service === 'migrate')).toHaveLength(1);
    expect(w.desired({ service: 'migrate' }).every((d) => d.spec.replica === 'd-migrate-0')).toBe(true);
    expect(sched(w, 'migrate')!.job!.state).toBe('succeeded');
  });

  it('a job still running when its node is lost runs again elsewhere (it has no result yet)', () => {
    const w = world();
    w.converge();
    w.observe('d-migrate-0', 'running');
    const node = w.desired({ service: 'migrate' })[0]!.spec.node;
    w.nodeDown(node);
    w.converge();
    w.advance(10_000);
    w.converge();
    expect(w.desired({ service: 'migrate' }).map((d) => d.spec.node)).not.toContain(node);
  });
});
