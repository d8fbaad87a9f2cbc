// templateOf's spec hash (memoized for frozen specs, never stale for a spec changed in place), and servingTemplate.
import { describe, expect, it } from 'vitest';
import { WATCHABLE } from '../runtime/watchable.js';
import { SourceState, ValueReader } from '../store/reflector.js';
import { testLogger } from '../../test/support/log.js';
import { servingTemplate, templateOf } from './serving.js';
import { specHash } from './spec.js';
import type { Deployment, DeploymentRevision, RolloutPlan, ServiceSpec } from './types.js';

describe('templateOf spec hash', () => {
  it('a spec changed in place after hashing gets the hash of what it now says', () => {
    const spec: ServiceSpec = { image: 'jaco-demo/busybox:1', replicas: 2 };
    const before = templateOf(1, spec).specHash;
    spec.image = 'jaco-demo/busybox:2';
    const after = templateOf(1, spec).specHash;
    expect(after).not.toBe(before);
    expect(after).toBe(specHash({ image: 'jaco-demo/busybox:2', replicas: 2 }));
  });

  it('a frozen spec whose parts are not frozen is not memoized either', () => {
    const spec = Object.freeze({ image: 'jaco-demo/busybox:1', env: { A: '1' } as Record<string, string> });
    const before = templateOf(1, spec).specHash;
    spec.env.A = '2';
    expect(templateOf(1, spec).specHash).not.toBe(before);
  });

  it('the cache holds deployment and revision service specs frozen (so their hash is memoized safely)', () => {
    const src = new SourceState('deployments', WATCHABLE.deployments, new ValueReader(testLogger()));
    const d: Deployment = { apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'a', generation: 1 }, spec: { services: { web: { image: 'jaco-demo/busybox:1', env: { A: 'x' } } } } };
    src.put('deployments/a', { modRevision: 2, createRevision: 2, version: 1 }, JSON.stringify(d));
    const held = src.items.get('deployments/a')!.value as Deployment;
    const web = held.spec.services.web!;
    expect(Object.isFrozen(web)).toBe(true);
    expect(Object.isFrozen(web.env)).toBe(true);
    expect(templateOf(1, web).specHash).toBe(specHash(d.spec.services.web!));
    expect(templateOf(1, web).specHash).toBe(templateOf(1, web).specHash);
    expect(WATCHABLE.revisions.share).toEqual([['spec', 'template', 'services']]);
  });
});

describe('servingTemplate after an aborted rollout', () => {
  const dep = (image: string, generation: number): Deployment => ({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'd', generation }, spec: { services: { web: { image } } } });
  const rev = (n: number, image: string): DeploymentRevision => ({ apiVersion: 'jaco.dev/v1', kind: 'DeploymentRevision', metadata: { name: `d-${n}` }, spec: { deployment: 'd', revision: n, appliedAt: '', cause: 'apply', summary: '', template: { services: { web: { image } } } } });
  const aborted = (fromHash: string): RolloutPlan => ({ apiVersion: 'jaco.dev/v1', kind: 'RolloutPlan', metadata: { name: 'd-web' }, spec: { deployment: 'd', service: 'web', fromRevision: 1, toRevision: 2, fromHash, toHash: 'x', totalSteps: 1, currentStep: 1, state: 'aborted', startedAt: '', steps: [] } });
  const old = templateOf(1, { image: 'img:1' });

  it('serves the revision the aborted rollout came from', () => {
    expect(servingTemplate(dep('img:2', 2), 'web', aborted(old.specHash), () => rev(1, 'img:1'))).toMatchObject({ revision: 1, specHash: old.specHash });
  });

  it('never a record under the same number of another spec (a deployment deleted and re-created: seed 11639)', () => {
    const t = servingTemplate(dep('img:2', 2), 'web', aborted(old.specHash), () => rev(1, 'other:9'));
    expect(t).toMatchObject({ revision: 2, specHash: templateOf(2, { image: 'img:2' }).specHash });
  });
});
