// Images at apply: every service's image becomes the digest every node will run (pinnedImage),
// resolved at the registry it names — a short name at the cluster's default registry first, at
// Docker Hub only when the cluster allows it — or built with the operator's engine and pushed
// first (build:). planImage decides per service (pure, table-tested); pinImages carries it out.
// A failure names the service and the image, and nothing is written (docs/images.md).
import { atRegistry, DEFAULT_TAG, DOCKER_HUB, familiarString, formatReference, parseImageReference, pinnedReference, type ImageReference } from '../images/reference.js';
import { ImageNotFoundError, resolveDigest, type RegistryAccess } from '../images/registry.js';
import type { PullPolicy, ServiceSpec } from '../api/types.js';
import type { ApplyItem } from './apply.js';

/** What the cluster says about images (config/images and registries/, docs/images.md). */
export interface ClusterImages {
  /** Builds are pushed here; short names are looked up here first (as Docker's registry mirrors are). */
  defaultRegistry?: string;
  /** Short names not found in the default registry may be resolved at Docker Hub. */
  hub: boolean;
}

/** What to do with one service's image at apply. */
export type ImagePlan =
  /** Not resolved: pullPolicy never, or a short name no registry of the cluster's is asked about. */
  | { kind: 'unpinned'; why: string }
  /** The live pin stands (pullPolicy missing, the image unchanged), or the image names its digest. */
  | { kind: 'keep'; pinned: string }
  /** Ask these registries for the tag's digest, in order; the first that has it pins it. */
  | { kind: 'resolve'; candidates: ImageReference[] }
  /** Build with the operator's engine, push as `target`, pin what was pushed. */
  | { kind: 'build'; target: ImageReference; unlessPushed: boolean };

export class ImagePlanError extends Error {
  override name = 'ImagePlanError';
}

/**
 * The plan of one service, given the live spec of the same service (if any) and where builds go
 * (`buildRegistry`: --registry, else the cluster's default). Pure.
 */
export function planImage(svc: ServiceSpec, live: ServiceSpec | undefined, cluster: ClusterImages, buildRegistry: string | undefined): ImagePlan {
  const policy: PullPolicy = svc.pullPolicy ?? 'missing';
  if (policy === 'never') return { kind: 'unpinned', why: 'pullPolicy never: each node runs its own copy' };
  const ref = parseImageReference(svc.image);
  if (svc.build && policy !== 'always') {
    const registry = ref.shortName ? buildRegistry : ref.registry;
    if (!registry) throw new ImagePlanError(`image ${svc.image} is built here, and there is no registry to push it to: name one in image:, or give --registry, or set the cluster's default (jaco registry default REGISTRY)`);
    const target = ref.shortName ? atRegistry(ref, registry) : ref;
    if (target.digest) throw new ImagePlanError(`image ${svc.image} names a digest, and a build makes a new one: name a tag`);
    // compose's pull_policy missing with a build: build only what the registry does not have yet.
    return { kind: 'build', target: { ...target, tag: target.tag ?? DEFAULT_TAG }, unlessPushed: policy === 'missing' && !!svc.pullPolicy };
  }
  if (policy === 'missing' && live && live.image === svc.image && live.pinnedImage) return { kind: 'keep', pinned: live.pinnedImage };
  const candidates = ref.shortName ? [...(cluster.defaultRegistry ? [atRegistry(ref, cluster.defaultRegistry)] : []), ...(cluster.hub ? [ref] : [])] : [ref];
  // A digest is a pin already (at the first registry that would be asked for its tag).
  if (ref.digest) return { kind: 'keep', pinned: formatReference(candidates[0] ?? ref) };
  if (!candidates.length)
    return { kind: 'unpinned', why: `the cluster has no registry to resolve the short name ${svc.image} at, and does not use Docker Hub (jaco registry default): each node runs its own copy` };
  return { kind: 'resolve', candidates };
}

/** How pinImages reaches registries and the operator's engine. */
export interface ImageTools {
  /** The access (credentials, CA) to use for a registry. */
  access(registry: string): Promise<Omit<RegistryAccess, 'registry'>>;
  /** Builds and pushes `target`; returns the pushed digest. Absent: this apply cannot build. */
  buildAndPush?(svc: ServiceSpec, target: string): Promise<string>;
  /** Progress for the operator (stderr). */
  note(line: string): void;
}

export interface PinOptions {
  cluster: ClusterImages;
  /** Live deployments' specs by name (pullPolicy missing keeps their pins). */
  live: Map<string, { services: Record<string, ServiceSpec> }>;
  /** Where builds are pushed when the image names no registry (--registry; default: the cluster's). */
  registry?: string;
  /** A dry run resolves but does not build or push. */
  dryRun?: boolean;
  /** Services to resolve again whatever their policy (rollout restart of pullPolicy always services). */
  force?: (deployment: string, service: string) => boolean;
}

/** Resolves (and builds) every service's image of every item; returns the items with their pins. */
export async function pinImages(items: ApplyItem[], opts: PinOptions, tools: ImageTools): Promise<ApplyItem[]> {
  const out: ApplyItem[] = [];
  for (const item of items) {
    const services: Record<string, ServiceSpec> = {};
    for (const [name, svc] of Object.entries(item.spec.services)) {
      const where = `deployment/${item.name} service ${name}`;
      try {
        services[name] = await pinService(svc, opts.live.get(item.name)?.services[name], opts, tools, opts.force?.(item.name, name) ?? false);
      } catch (e) {
        (e as Error).message = `${where}: ${(e as Error).message}`;
        throw e;
      }
    }
    out.push({ ...item, spec: { ...item.spec, services } });
  }
  return out;
}

async function pinService(svc: ServiceSpec, live: ServiceSpec | undefined, opts: PinOptions, tools: ImageTools, force: boolean): Promise<ServiceSpec> {
  const { pinnedImage: _stale, ...spec } = svc;
  const plan = planImage(spec, force ? undefined : live, opts.cluster, opts.registry ?? opts.cluster.defaultRegistry);
  switch (plan.kind) {
    case 'unpinned':
      tools.note(`${svc.image}: not pinned to a digest (${plan.why})`);
      return spec;
    case 'keep':
      return { ...spec, pinnedImage: plan.pinned };
    case 'resolve': {
      const looked: string[] = [];
      for (const c of plan.candidates) {
        try {
          const digest = await resolveDigest(c, await tools.access(c.registry));
          return { ...spec, pinnedImage: pinnedReference(c, digest) };
        } catch (e) {
          if (!(e instanceof ImageNotFoundError) || c === plan.candidates.at(-1)) {
            if (e instanceof ImageNotFoundError && looked.length) e.message = `${e.message} (nor in ${looked.join(', ')})`;
            throw e;
          }
          looked.push(c.registry === DOCKER_HUB ? 'Docker Hub' : c.registry);
        }
      }
      throw new ImagePlanError('unreachable');
    }
    case 'build': {
      const target = formatReference(plan.target);
      const image = familiarString(plan.target);
      if (plan.unlessPushed) {
        try {
          const digest = await resolveDigest(plan.target, await tools.access(plan.target.registry));
          tools.note(`${image}: in the registry already (pull_policy missing): not built`);
          return { ...spec, image, pinnedImage: pinnedReference(plan.target, digest) };
        } catch (e) {
          if (!(e instanceof ImageNotFoundError)) throw e;
        }
      }
      if (opts.dryRun) {
        tools.note(`${image}: would be built from ${svc.build!.context} and pushed (dry run)`);
        return { ...spec, image };
      }
      if (!tools.buildAndPush) throw new ImagePlanError(`${image} must be built, and this command builds nothing`);
      const started = Date.now();
      const digest = await tools.buildAndPush(spec, target);
      tools.note(`${image}: built from ${svc.build!.context} and pushed as ${digest.slice(0, 19)}… in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return { ...spec, image, pinnedImage: pinnedReference(plan.target, digest) };
    }
  }
}
