// templateOf's spec hash: memoized for frozen specs (the cache's), never stale for a spec changed in place.
import { describe, expect, it } from 'vitest';
import { WATCHABLE } from '../runtime/watchable.js';
import { SourceState, ValueReader } from '../store/reflector.js';
import { testLogger } from '../../test/support/log.js';
import { templateOf } from './serving.js';
import { specHash } from './spec.js';
import type { Deployment, ServiceSpec } from './types.js';

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
