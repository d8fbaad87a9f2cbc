// One-off jobs in compose: deploy.mode replicated-job, a service others wait on with
// service_completed_successfully, and a job's restart_policy as its retries (docs/compose.md).
import { describe, expect, it } from 'vitest';
import { formatPath } from '../api/schema.js';
import { mapCompose } from './map.js';
import { tableContext } from '../../test/support/compose-context.js';

const ctx = tableContext;

const said = (r: ReturnType<typeof mapCompose>) => r.issues.map((i) => `${i.severity} ${formatPath(i.path)}: ${i.message}`);

describe('compose jobs', () => {
  it('replicated-job is a job; restart_policy gives its retries', () => {
    const r = mapCompose({ services: { migrate: { image: 'i', deploy: { mode: 'replicated-job', restart_policy: { condition: 'on-failure', max_attempts: 2, delay: '3s' } } } } }, ctx);
    expect(said(r)).toEqual([]);
    expect(r.spec.services.migrate).toMatchObject({ mode: 'job', job: { attempts: 3, backoff: '3s' } });
  });

  it('a service waited on with service_completed_successfully is a job', () => {
    const r = mapCompose({ services: { migrate: { image: 'i' }, app: { image: 'i', depends_on: { migrate: { condition: 'service_completed_successfully' } } } } }, ctx);
    expect(said(r)).toEqual([]);
    expect(r.spec.services.migrate!.mode).toBe('job');
    expect(r.spec.services.app!.dependsOn).toEqual({ migrate: { condition: 'service_completed_successfully' } });
    expect(r.spec.services.app!.mode).toBeUndefined();
  });

  it('restart_policy of a service that is no job is still ignored, said so', () => {
    const r = mapCompose({ services: { app: { image: 'i', deploy: { restart_policy: { max_attempts: 2 } } } } }, ctx);
    expect(said(r)).toEqual([expect.stringContaining('warn services.app.deploy.restart_policy: jaco owns restarts')]);
    expect(r.spec.services.app!.job).toBeUndefined();
  });

  it('an unknown condition and mode are refused by name', () => {
    const r = mapCompose({ services: { a: { image: 'i', deploy: { mode: 'global-job' } }, b: { image: 'i', depends_on: { a: { condition: 'service_done' } } } } }, ctx);
    expect(said(r)).toEqual([
      expect.stringMatching(/^refuse services\.a\.deploy\.mode: mode global-job is not supported/),
      expect.stringMatching(/^refuse services\.b\.depends_on\.a\.condition: service_done is not supported/),
    ]);
  });
});
