import { describe, expect, it } from 'vitest';
import type { ServiceSpec } from '../api/types.js';
import { formatReference } from '../images/reference.js';
import type { ImageSettingsSpec } from '../api/types.js';
import { planImage, type ImagePlan } from './images.js';

const D = `sha256:${'d'.repeat(64)}`;
const local: ImageSettingsSpec = { defaultRegistry: '198.18.1.1:5000', hub: false };
const hubOnly: ImageSettingsSpec = { hub: true };
const offline: ImageSettingsSpec = { hub: false };

/** A plan with references written out, for readable tables. */
function show(p: ImagePlan): unknown {
  if (p.kind === 'resolve') return { resolve: formatReference(p.ref) };
  if (p.kind === 'build') return { build: formatReference(p.target), unlessPushed: p.unlessPushed };
  if (p.kind === 'keep') return { keep: p.pinned };
  return { unpinned: p.why };
}

describe('planImage: what apply does with a service image', () => {
  it.each<[string, ServiceSpec, ServiceSpec | undefined, ImageSettingsSpec, string | undefined, unknown]>([
    ['a short name is resolved at the default registry', { image: 'jaco-demo/busybox:1' }, undefined, local, undefined, { resolve: '198.18.1.1:5000/jaco-demo/busybox:1' }],
    ['… even when Docker Hub is allowed too (one place per name)', { image: 'nginx:1.27' }, undefined, { ...local, hub: true }, undefined, { resolve: '198.18.1.1:5000/nginx:1.27' }],
    ['a short name with Hub only', { image: 'nginx' }, undefined, hubOnly, undefined, { resolve: 'docker.io/library/nginx' }],
    ['a short name with nowhere to ask is left unpinned, said why', { image: 'jaco-demo/busybox:1' }, undefined, offline, undefined, { unpinned: expect.stringMatching(/no default registry/) }],
    ['a registry named in the image is the one asked', { image: 'ghcr.io/acme/api:2' }, undefined, local, undefined, { resolve: 'ghcr.io/acme/api:2' }],
    ['pullPolicy missing keeps the live pin of the same image', { image: 'a:1' }, { image: 'a:1', pinnedImage: `r/a:1@${D}` }, local, undefined, { keep: `r/a:1@${D}` }],
    ['… and resolves a changed image', { image: 'a:2' }, { image: 'a:1', pinnedImage: `r/a:1@${D}` }, local, undefined, { resolve: '198.18.1.1:5000/a:2' }],
    ['pullPolicy always resolves the same image again', { image: 'a:1', pullPolicy: 'always' }, { image: 'a:1', pinnedImage: `r/a:1@${D}` }, local, undefined, { resolve: '198.18.1.1:5000/a:1' }],
    ['pullPolicy never resolves nothing', { image: 'a:1', pullPolicy: 'never' }, undefined, local, undefined, { unpinned: expect.stringMatching(/pullPolicy never/) }],
    ['a digest is its own pin, at the registry its tag would be asked at', { image: `busybox@${D}` }, undefined, local, undefined, { keep: `198.18.1.1:5000/busybox@${D}` }],
    ['… and as written when there is none', { image: `busybox@${D}` }, undefined, offline, undefined, { keep: `busybox@${D}` }],
    ['a build is pushed to the build registry under the short name', { image: 'shop-api', build: { context: '/src' } }, undefined, local, '10.0.0.1:5000', { build: '10.0.0.1:5000/shop-api:latest', unlessPushed: false }],
    ['… or where the image names', { image: 'registry.example/acme/api:1.4', build: { context: '/src' } }, undefined, local, '198.18.1.1:5000', { build: 'registry.example/acme/api:1.4', unlessPushed: false }],
    ['… built again even when the live pin is of the same image (the source may have changed)', { image: 'shop-api', build: { context: '/src' } }, { image: 'shop-api', pinnedImage: `x/shop-api:latest@${D}` }, local, '198.18.1.1:5000', { build: '198.18.1.1:5000/shop-api:latest', unlessPushed: false }],
    ['compose pull_policy missing with a build: only what the registry lacks', { image: 'shop-api', build: { context: '/src' }, pullPolicy: 'missing' }, undefined, local, '198.18.1.1:5000', { build: '198.18.1.1:5000/shop-api:latest', unlessPushed: true }],
    ['pullPolicy always with a build pulls instead (compose)', { image: 'shop-api', build: { context: '/src' }, pullPolicy: 'always' }, undefined, local, '198.18.1.1:5000', { resolve: '198.18.1.1:5000/shop-api' }],
  ])('%s', (_, svc, live, cluster, buildRegistry, want) => {
    expect(show(planImage(svc, live, cluster, buildRegistry))).toEqual(want);
  });

  it('refuses a build with no registry to push to, and a build of a digest', () => {
    expect(() => planImage({ image: 'shop-api', build: { context: '/src' } }, undefined, offline, undefined)).toThrow(/no registry to push it to/);
    expect(() => planImage({ image: `r.example/a@${D}`, build: { context: '/src' } }, undefined, offline, undefined)).toThrow(/names a digest/);
  });

  it('refuses a reference Docker would refuse, with Docker’s reason', () => {
    expect(() => planImage({ image: 'Not/Valid:Ref' }, undefined, local, undefined)).toThrow();
  });
});
