import { describe, expect, it } from 'vitest';
import type { Deployment } from '../../api/types.js';
import { parseScaleTargets, scaledSpecs } from './scale.js';

describe('parseScaleTargets', () => {
  it.each([
    [['shop/web=3'], [{ deployment: 'shop', service: 'web', replicas: 3 }]],
    [['shop/web=0', 'shop/db=1'], [{ deployment: 'shop', service: 'web', replicas: 0 }, { deployment: 'shop', service: 'db', replicas: 1 }]],
    [['a/b=10000'], [{ deployment: 'a', service: 'b', replicas: 10000 }]],
  ])('%j', (args, want) => expect(parseScaleTargets(args)).toEqual(want));

  it.each([
    [[], /at least one/],
    [['shop=3'], /is not DEPLOYMENT\/SERVICE=N/],
    [['shop/web'], /is not DEPLOYMENT\/SERVICE=N/],
    [['shop/web/x=1'], /is not DEPLOYMENT\/SERVICE=N/],
    [['shop/web=-1'], /whole number from 0 to 10000/],
    [['shop/web=1.5'], /whole number/],
    [['shop/web='], /whole number/],
    [['shop/web=10001'], /whole number/],
    [['shop/web=1', 'shop/web=2'], /named twice/],
  ])('refuses %j', (args, msg) => expect(() => parseScaleTargets(args)).toThrow(msg));
});

describe('scaledSpecs', () => {
  const dep = (name: string): Deployment => ({
    apiVersion: 'jaco.dev/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { services: { web: { image: 'x:1', replicas: 2 }, db: { image: 'y:1' }, agent: { image: 'z:1', placement: { mode: 'global' } } } },
  });
  const current = new Map([['shop', dep('shop')]]);

  it('sets the counts named, keeps the rest of the spec, and folds two targets of one deployment into one spec', () => {
    const out = scaledSpecs(current, [
      { deployment: 'shop', service: 'web', replicas: 5 },
      { deployment: 'shop', service: 'db', replicas: 0 },
    ]);
    expect(out.get('shop')!.services).toEqual({ web: { image: 'x:1', replicas: 5 }, db: { image: 'y:1', replicas: 0 }, agent: { image: 'z:1', placement: { mode: 'global' } } });
    // The stored spec is not changed in place.
    expect(current.get('shop')!.spec.services.web!.replicas).toBe(2);
  });

  it.each([
    [{ deployment: 'nope', service: 'web', replicas: 1 }, /deployment "nope" not found/],
    [{ deployment: 'shop', service: 'nope', replicas: 1 }, /no service "nope"; it has agent, db, web/],
    [{ deployment: 'shop', service: 'agent', replicas: 1 }, /placed globally/],
  ])('refuses %j', (t, msg) => expect(() => scaledSpecs(current, [t])).toThrow(msg));
});
