import { describe, expect, it } from 'vitest';
import type { ServiceSpec } from '../api/types.js';
import { formatReference } from '../images/reference.js';
import type { ImageSettingsSpec } from '../api/types.js';
import { pinImages, planImage, portlessDependencies, type ImagePlan, type ImageTools } from './images.js';
import type { ApplyItem } from '../app/apply.js';

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
  it.each<[string, ServiceSpec, ImageSettingsSpec, string | undefined, unknown]>([
    ['a short name is resolved at the default registry', { image: 'jaco-demo/busybox:1' }, local, undefined, { resolve: '198.18.1.1:5000/jaco-demo/busybox:1' }],
    ['… even when Docker Hub is allowed too (one place per name)', { image: 'nginx:1.27' }, { ...local, hub: true }, undefined, { resolve: '198.18.1.1:5000/nginx:1.27' }],
    ['a short name with Hub only', { image: 'nginx' }, hubOnly, undefined, { resolve: 'docker.io/library/nginx' }],
    ['a short name with nowhere to ask is left unpinned, said why', { image: 'jaco-demo/busybox:1' }, offline, undefined, { unpinned: expect.stringMatching(/no default registry/) }],
    ['a registry named in the image is the one asked', { image: 'ghcr.io/acme/api:2' }, local, undefined, { resolve: 'ghcr.io/acme/api:2' }],
    ['pullPolicy missing (the default) resolves the tag at every apply', { image: 'a:1', pullPolicy: 'missing' }, local, undefined, { resolve: '198.18.1.1:5000/a:1' }],
    ['pullPolicy always too (and at rollout restart)', { image: 'a:1', pullPolicy: 'always' }, local, undefined, { resolve: '198.18.1.1:5000/a:1' }],
    ['pullPolicy never resolves nothing', { image: 'a:1', pullPolicy: 'never' }, local, undefined, { unpinned: expect.stringMatching(/pullPolicy never/) }],
    ['a digest is its own pin, at the registry its tag would be asked at', { image: `busybox@${D}` }, local, undefined, { keep: `198.18.1.1:5000/busybox@${D}` }],
    ['… and as written when there is none', { image: `busybox@${D}` }, offline, undefined, { keep: `busybox@${D}` }],
    ['a build is pushed to the build registry under the short name', { image: 'shop-api', build: { context: '/src' } }, local, '10.0.0.1:5000', { build: '10.0.0.1:5000/shop-api:latest', unlessPushed: false }],
    ['… or to its own registry (compose x-jaco.registry), before the build registry', { image: 'shop-api', build: { context: '/src', registry: '10.0.0.9:5000' } }, local, '10.0.0.1:5000', { build: '10.0.0.9:5000/shop-api:latest', unlessPushed: false }],
    ['… or where the image names', { image: 'registry.example/acme/api:1.4', build: { context: '/src' } }, local, '198.18.1.1:5000', { build: 'registry.example/acme/api:1.4', unlessPushed: false }],
    ['compose pull_policy missing with a build: only what the registry lacks', { image: 'shop-api', build: { context: '/src' }, pullPolicy: 'missing' }, local, '198.18.1.1:5000', { build: '198.18.1.1:5000/shop-api:latest', unlessPushed: true }],
    ['pullPolicy always with a build pulls instead (compose)', { image: 'shop-api', build: { context: '/src' }, pullPolicy: 'always' }, local, '198.18.1.1:5000', { resolve: '198.18.1.1:5000/shop-api' }],
  ])('%s', (_, svc, cluster, buildRegistry, want) => {
    expect(show(planImage(svc, cluster, buildRegistry))).toEqual(want);
  });

  it('refuses a build with no registry to push to, and a build of a digest', () => {
    expect(() => planImage({ image: 'shop-api', build: { context: '/src' } }, offline, undefined)).toThrow(/no registry to push it to/);
    expect(() => planImage({ image: `r.example/a@${D}`, build: { context: '/src' } }, offline, undefined)).toThrow(/names a digest/);
  });

  it('refuses a reference Docker would refuse, with Docker’s reason', () => {
    expect(() => planImage({ image: 'Not/Valid:Ref' }, local, undefined)).toThrow();
  });
});

describe('pinImages: the ports a cluster-network service\'s image declares', () => {
  const pinned = `198.18.1.1:5000/shop/redis:7@${D}`;
  const item = (svc: Partial<ServiceSpec>): ApplyItem => ({ kind: 'Deployment', name: 'shop', spec: { services: { cache: { image: pinned, ...svc } as ServiceSpec } } }) as unknown as ApplyItem;
  const tools = (ports: () => Promise<number[]>, notes: string[] = []): ImageTools => ({ access: async () => ({}), ports, note: (l) => notes.push(l), unpinned: () => undefined });
  const run = async (svc: Partial<ServiceSpec>, t: ImageTools) => (await pinImages([item(svc)], { settings: local }, t))[0]!.spec.services.cache!;

  it('are read for the cluster network and kept beside the pin', async () => {
    expect(await run({ network: 'cluster' }, tools(async () => [6379]))).toMatchObject({ pinnedImage: pinned, imagePorts: [6379] });
  });

  it('are not read on the host network, and a stale list goes with the old pin', async () => {
    const got = await run({ network: 'host', imagePorts: [1] }, tools(async () => [6379]));
    expect(got.imagePorts).toBeUndefined();
  });

  it('that cannot be read: a warning naming the way out, and the apply goes on', async () => {
    const notes: string[] = [];
    const got = await run({ network: 'cluster' }, tools(async () => Promise.reject(new Error('HTTP 500')), notes));
    expect(got.imagePorts).toBeUndefined();
    expect(got.pinnedImage).toBe(pinned);
    expect(notes.join('\n')).toMatch(/could not be read \(HTTP 500\).*expose/);
  });
});

describe('portlessDependencies: a service others wait on that answers at its name on no port', () => {
  const img = `198.18.1.1:5000/shop/app:1@${D}`;
  const svc = (s: Partial<ServiceSpec>): ServiceSpec => ({ image: 'app:1', pinnedImage: img, network: 'cluster', ...s }) as ServiceSpec;
  const waitsOn = (...deps: string[]) => svc({ dependsOn: Object.fromEntries(deps.map((d) => [d, { condition: 'service_started' as const }])) });
  it.each<[string, Record<string, ServiceSpec>, RegExp[]]>([
    ['no port listed, none declared: warned, naming who waits', { db: svc({}), app: waitsOn('db'), worker: waitsOn('db') }, [/service db: app, worker depend on it, but its name answers on no port.*expose/]],
    ['a listed port (compose expose)', { db: svc({ ports: [{ containerPort: 5432 }] }), app: waitsOn('db') }, []],
    ["a port its image declares", { db: svc({ imagePorts: [5432] }), app: waitsOn('db') }, []],
    ['only a UDP port: still nothing answers TCP', { dns: svc({ ports: [{ containerPort: 53, protocol: 'udp' }] }), app: waitsOn('dns') }, [/service dns: app depends on it/]],
    ['nobody waits on it (a worker)', { worker: svc({}), app: svc({}) }, []],
    ['host networking: its node’s ports, not a name', { db: svc({ network: 'host' }), app: waitsOn('db') }, []],
    ['a job waited on to complete', { migrate: svc({ mode: 'job' }), app: svc({ dependsOn: { migrate: { condition: 'service_completed_successfully' } } }) }, []],
    ['an image not read (unpinned): not judged', { db: svc({ pinnedImage: undefined }), app: waitsOn('db') }, []],
    ['a dependency not in the deployment', { app: waitsOn('elsewhere') }, []],
  ])('%s', (_name, services, want) => {
    const got = portlessDependencies('shop', services);
    expect(got).toHaveLength(want.length);
    want.forEach((re, i) => expect(got[i]).toMatch(re));
  });

  it('is said by pinImages through the operator\'s notes', async () => {
    const notes: string[] = [];
    const t: ImageTools = { access: async () => ({}), ports: async () => [], note: (l) => notes.push(l), unpinned: () => undefined };
    const item = { kind: 'Deployment', name: 'shop', spec: { services: { db: { image: img, network: 'cluster' }, app: { image: img, network: 'cluster', ports: [{ containerPort: 8080 }], dependsOn: { db: { condition: 'service_started' } } } } } } as unknown as ApplyItem;
    await pinImages([item], { settings: local }, t);
    expect(notes).toEqual([expect.stringMatching(/^warning: deployment\/shop service db: app depends on it/)]);
  });
});
