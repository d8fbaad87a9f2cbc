// Images at apply: every service's image becomes the digest every node will run (pinnedImage),
// resolved at the registry it names (a short name where the cluster's image setting sends it:
// qualifyImage), or built with the operator's engine and pushed first (build:). planImage decides
// per service (pure, table-tested); pinImages carries it out. A failure names the deployment, the
// service and the image, and nothing is written (docs/images.md).
import { qualifyImage, registryAccessFor, ShortNameError } from '../images/access.js';
import { atRegistry, DEFAULT_TAG, familiarString, formatReference, parseImageReference, pinnedReference, type ImageReference } from '../images/reference.js';
import { ImageNotFoundError, imagePorts, resolveDigest, type RegistryAccess } from '../images/registry.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { normalizePorts } from '../api/ports.js';
import type { ImageSettingsSpec, PullPolicy, ServiceSpec } from '../api/types.js';
import { buildAndPush } from '../images/build.js';
import { operatorCredentials } from '../images/credentials.js';
import { dockerode } from '../dockerode.js';
import type { Store } from '../store/store.js';
import type { ApplyItem } from '../app/apply.js';
import { readImageAccess } from '../app/registries.js';

/** What to do with one service's image at apply. */
export type ImagePlan =
  /** Not resolved: pullPolicy never, or a short name no registry of the cluster's is asked about. */
  | { kind: 'unpinned'; why: string }
  /** The image names its digest: that is the pin. */
  | { kind: 'keep'; pinned: string }
  /** Ask the registry for the tag's digest. */
  | { kind: 'resolve'; ref: ImageReference }
  /** Build with the operator's engine, push as `target`, pin what was pushed. */
  | { kind: 'build'; target: ImageReference; unlessPushed: boolean };

export class ImagePlanError extends Error {
  override name = 'ImagePlanError';
}

/**
 * The plan of one service, given where builds go (`buildRegistry`: --registry, else the cluster's
 * default). Pure. A tag is resolved at every apply (missing, the default, and always): a tag pushed
 * again changes nothing until the next apply, and then every node runs the new bytes together.
 */
export function planImage(svc: ServiceSpec, settings: ImageSettingsSpec, buildRegistry: string | undefined): ImagePlan {
  const policy: PullPolicy = svc.pullPolicy ?? 'missing';
  if (policy === 'never') return { kind: 'unpinned', why: 'pullPolicy never: each node runs its own copy' };
  const ref = parseImageReference(svc.image);
  if (svc.build && policy !== 'always') {
    const registry = ref.shortName ? (svc.build.registry ?? buildRegistry) : ref.registry;
    if (!registry) throw new ImagePlanError(`image ${svc.image} is built here, and there is no registry to push it to: name one in image:, or give --registry, or set the cluster's default (jaco registry default REGISTRY)`);
    const target = ref.shortName ? atRegistry(ref, registry) : ref;
    if (target.digest) throw new ImagePlanError(`image ${svc.image} names a digest, and a build makes a new one: name a tag`);
    // compose's pull_policy missing with a build: build only what the registry does not have yet.
    return { kind: 'build', target: { ...target, tag: target.tag ?? DEFAULT_TAG }, unlessPushed: policy === 'missing' && !!svc.pullPolicy };
  }
  let at: ImageReference;
  try {
    at = qualifyImage(ref, settings);
  } catch (e) {
    if (!(e instanceof ShortNameError)) throw e;
    // A cluster with no registry at all (the shared-engine test tier, a cluster not yet set up):
    // nothing to pin against, and never Docker Hub by accident. Said, not refused.
    if (ref.digest) return { kind: 'keep', pinned: svc.image };
    return { kind: 'unpinned', why: 'the cluster has no default registry and does not resolve short names at Docker Hub (jaco registry default): each node runs its own copy' };
  }
  // A digest is a pin already.
  if (ref.digest) return { kind: 'keep', pinned: formatReference(at) };
  return { kind: 'resolve', ref: at };
}

/** How pinImages reaches registries and the operator's engine. */
export interface ImageTools {
  /** The access (credentials, CA) to use for a registry. */
  access(registry: string): Promise<Omit<RegistryAccess, 'registry'>>;
  /** Builds and pushes `target`; returns the pushed digest. Absent: this apply cannot build. */
  buildAndPush?(svc: ServiceSpec, target: string): Promise<string>;
  /** The TCP ports a pinned image declares (EXPOSE). Absent: not read (imagePorts left out). */
  ports?(pinned: string): Promise<number[]>;
  /** Progress for the operator (stderr). */
  note(line: string): void;
  /** An image left unpinned, and why (said once per apply for each reason). */
  unpinned(image: string, why: string): void;
}

export interface PinOptions {
  settings: ImageSettingsSpec;
  /** Where builds are pushed when the image names no registry (--registry; default: the cluster's). */
  registry?: string;
  /** A dry run resolves but does not build or push. */
  dryRun?: boolean;
  /** Only these services are looked at; the others pass as they are (rollout restart of some services). */
  select?: (deployment: string, service: string) => boolean;
}

/** Resolves (and builds) every service's image of every item; returns the items with their pins. */
export async function pinImages(items: ApplyItem[], opts: PinOptions, tools: ImageTools): Promise<ApplyItem[]> {
  const out: ApplyItem[] = [];
  for (const item of items) {
    const services: Record<string, ServiceSpec> = {};
    for (const [name, svc] of Object.entries(item.spec.services)) {
      const where = `deployment/${item.name} service ${name}`;
      if (opts.select && !opts.select(item.name, name)) {
        services[name] = svc;
        continue;
      }
      try {
        services[name] = await pinService(svc, opts, tools);
      } catch (e) {
        (e as Error).message = `${where}: ${(e as Error).message}`;
        throw e;
      }
    }
    for (const line of portlessDependencies(item.name, services)) tools.note(line);
    out.push({ ...item, spec: { ...item.spec, services } });
  }
  return out;
}

/**
 * The services others wait on (dependsOn) whose name answers on no TCP port: they list none and
 * their pinned image declares none. docker compose reaches any port a container listens on; jaco's
 * service address answers only on known ports, so a client would be refused (docs/compose.md).
 * A service whose image was not read (unpinned, or its ports unreadable: said already) is not judged.
 */
export function portlessDependencies(deployment: string, services: Record<string, ServiceSpec>): string[] {
  const waitedOnBy = new Map<string, string[]>();
  for (const [name, svc] of Object.entries(services))
    for (const [dep, { condition }] of Object.entries(svc.dependsOn ?? {}))
      if (condition !== 'service_completed_successfully') waitedOnBy.set(dep, [...(waitedOnBy.get(dep) ?? []), name]);
  const lines: string[] = [];
  for (const [dep, by] of waitedOnBy) {
    const svc = services[dep];
    if (!svc || svc.network !== 'cluster' || svc.mode === 'job' || !svc.pinnedImage) continue;
    if (normalizePorts(svc).some((p) => p.protocol === 'tcp')) continue;
    lines.push(
      `warning: deployment/${deployment} service ${dep}: ${by.join(', ')} ${by.length > 1 ? 'depend' : 'depends'} on it, but its name answers on no port: it lists none (ports, compose's expose) and its image declares none — a connection to ${dep} is refused; name the port it listens on (expose: ["PORT"])`,
    );
  }
  return lines;
}

async function pinService(svc: ServiceSpec, opts: PinOptions, tools: ImageTools): Promise<ServiceSpec> {
  const pinned = await pinImage(svc, opts, tools);
  if (pinned.network !== 'cluster' || !pinned.pinnedImage || !tools.ports) return pinned;
  // On the cluster network its name answers on the ports its image declares too (docs/networking.md).
  try {
    const ports = await tools.ports(pinned.pinnedImage);
    return ports.length ? { ...pinned, imagePorts: ports } : pinned;
  } catch (e) {
    tools.note(`warning: the ports ${familiarString(parseImageReference(pinned.pinnedImage))} declares could not be read (${(e as Error).message}): its service answers at its name only on the ports it lists (add them to ports or compose's expose)`);
    return pinned;
  }
}

/** The service with its image pinned (or left unpinned, and why said); what an earlier apply read of the image is dropped. */
async function pinImage(svc: ServiceSpec, opts: PinOptions, tools: ImageTools): Promise<ServiceSpec> {
  const { pinnedImage: _stale, imagePorts: _staleToo, ...spec } = svc;
  const plan = planImage(spec, opts.settings, opts.registry ?? opts.settings.defaultRegistry);
  switch (plan.kind) {
    case 'unpinned':
      tools.unpinned(svc.image, plan.why);
      return spec;
    case 'keep':
      return { ...spec, pinnedImage: plan.pinned };
    case 'resolve': {
      const digest = await resolveDigest(plan.ref, await tools.access(plan.ref.registry));
      return { ...spec, pinnedImage: pinnedReference(plan.ref, digest) };
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

/** Where the operator's engine keeps a registry's CA (`docker` trusts it; so does jaco apply). */
const DOCKER_CERTS_DIR = '/etc/docker/certs.d';

/**
 * The image step of an apply as the CLI runs it: reads the cluster's image setting and registries
 * (one read), takes the operator's `docker login` credentials, builds with the operator's engine
 * (DOCKER_HOST, else the local socket) and writes progress to stderr.
 */
export async function prepareImages(store: Store, items: ApplyItem[], opts: { dryRun?: boolean; registry?: string; select?: PinOptions['select'] } = {}): Promise<ApplyItem[]> {
  const needs = items.some((i) => Object.values(i.spec.services).some((s) => s.pullPolicy !== 'never'));
  if (!needs) return items;
  const { registries, settings } = await readImageAccess(store);
  const stored = registries.map((r) => r.value);
  const access = async (registry: string) => {
    const a = registryAccessFor(registry, stored, await operatorCredentials(registry));
    if (!a.caPem && !a.insecure) {
      try {
        a.caPem = readFileSync(join(DOCKER_CERTS_DIR, registry, 'ca.crt'), 'utf8');
      } catch {
        // the system's roots only
      }
    }
    return a;
  };
  let docker: Docker | undefined;
  const unpinned = new Map<string, Set<string>>();
  const out = await pinImages(
    items,
    { settings, ...(opts.registry ? { registry: opts.registry } : {}), ...(opts.dryRun ? { dryRun: true } : {}), ...(opts.select ? { select: opts.select } : {}) },
    {
      access,
      ports: async (pinned) => (await imagePorts(pinned, await access(parseImageReference(pinned).registry))).tcp,
      note: (line) => process.stderr.write(`${line}\n`),
      unpinned: (image, why) => unpinned.set(why, (unpinned.get(why) ?? new Set()).add(image)),
      async buildAndPush(svc, target) {
        docker ??= new (dockerode())();
        const { credentials } = await access(parseImageReference(target).registry);
        const b = svc.build!;
        const built = await buildAndPush(docker, { context: b.context, ...(b.dockerfile ? { dockerfile: b.dockerfile } : {}), ...(b.args ? { args: b.args } : {}), ...(b.target ? { target: b.target } : {}), ...(b.labels ? { labels: b.labels } : {}), ...(b.noCache ? { noCache: true } : {}), ...(b.pull ? { pull: true } : {}) }, target, credentials);
        return built.digest;
      },
    },
  );
  for (const [why, images] of unpinned) process.stderr.write(`warning: not pinned to a digest: ${[...images].join(', ')} (${why})\n`);
  return out;
}
