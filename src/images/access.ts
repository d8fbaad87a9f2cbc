// Which registry an image goes to and how to reach it, from what the cluster stores: the image
// setting (config/images: a default registry for builds and short names, Docker Hub allowed or not)
// and the registries' access (registries/<host>). Pure: the CLI and the node-agent both call it
// with what they read, the CLI adding the operator's own `docker login` credentials.

/** Credentials for one pull or push, as Docker's X-Registry-Auth takes them. */
export interface PullAuth {
  serveraddress: string;
  username?: string;
  password?: string;
  identitytoken?: string;
}
import type { ImageSettingsSpec, Registry, RegistrySpec } from '../api/types.js';
import { atRegistry, DOCKER_HUB, familiarString, parseImageReference, parseRegistryHost, type ImageReference } from './reference.js';
import type { RegistryAccess, RegistryCredentials } from './registry.js';
import { DOCKER_HUB_AUTH_KEY } from './credentials.js';

/** What a cluster that never ran `jaco registry default` has: no default registry, no Docker Hub. */
export const DEFAULT_IMAGE_SETTINGS: ImageSettingsSpec = { hub: false };

/** A short name (no registry written) the cluster's setting gives nowhere to go. */
export class ShortNameError extends Error {
  override name = 'ShortNameError';
  constructor(readonly image: string) {
    super(
      `image ${image} names no registry, and this cluster has no default registry and does not resolve short names at Docker Hub: write the registry in the image (e.g. 127.0.0.1:5000/${image}), set a default with \`jaco registry default REGISTRY\`, or allow Docker Hub with \`jaco registry default --hub\``,
    );
  }
}

/**
 * Where a reference is resolved and pulled from: a reference with a registry stays as it is; a
 * short name goes to the default registry, else to Docker Hub when the cluster allows it, else it
 * is refused (ShortNameError) — so no test or local cluster ever looks Docker Hub up by accident.
 */
export function qualifyImage(ref: ImageReference, settings: ImageSettingsSpec = DEFAULT_IMAGE_SETTINGS): ImageReference {
  if (!ref.shortName) return ref;
  if (settings.defaultRegistry) return atRegistry(ref, settings.defaultRegistry);
  if (settings.hub) return { ...ref, shortName: false };
  throw new ShortNameError(familiarString(ref));
}

/** The stored access of a host, whatever form the caller holds them in (a list, or the informer's map by key). */
function storedFor(host: string, stored: Iterable<Registry | RegistrySpec> | ReadonlyMap<string, Registry>): RegistrySpec | undefined {
  const items = stored instanceof Map ? stored.values() : (stored as Iterable<Registry | RegistrySpec>);
  for (const r of items) {
    const spec = 'spec' in r ? r.spec : r;
    if (spec.host === host) return spec;
  }
  return undefined;
}

/**
 * The RegistryAccess for a registry host: the CA and the insecure flag from the cluster's record;
 * the credentials of the operator when given (the CLI acts as its operator, who may push where
 * nodes only pull), else the cluster's: its user, and the password opened from the Secret the
 * record names — which only a node holding a copy can do (`openPassword`; the CLI cannot).
 */
export function registryAccessFor(
  host: string,
  stored: Iterable<Registry | RegistrySpec> | ReadonlyMap<string, Registry>,
  operatorCredentials?: RegistryCredentials,
  openPassword?: (secret: string) => string,
): RegistryAccess {
  const key = parseRegistryHost(host);
  const spec = storedFor(key, stored);
  const cluster: RegistryCredentials | undefined =
    !operatorCredentials && openPassword && spec?.username !== undefined ? { username: spec.username, password: spec.passwordSecret ? openPassword(spec.passwordSecret) : '' } : undefined;
  const credentials = operatorCredentials ?? cluster;
  return {
    registry: key,
    ...(credentials ? { credentials } : {}),
    ...(spec?.caPem ? { caPem: spec.caPem } : {}),
    ...(spec?.insecure ? { insecure: true } : {}),
  };
}

/**
 * The Secret holding the password a node pulls `image` with, and the registry it is for: what the
 * secrets controller copies to the nodes whose replicas use the image, and what the agent opens.
 * Undefined when the image's registry has no stored password, or the image names no registry the
 * cluster's setting gives it.
 */
export function registrySecretOf(
  image: string,
  stored: Iterable<Registry | RegistrySpec> | ReadonlyMap<string, Registry>,
  settings: ImageSettingsSpec = DEFAULT_IMAGE_SETTINGS,
): { registry: string; secret: string } | undefined {
  let registry: string;
  try {
    registry = qualifyImage(parseImageReference(image), settings).registry;
  } catch {
    return undefined; // unparseable or a short name with nowhere to go: the agent reports that
  }
  const secret = storedFor(registry, stored)?.passwordSecret;
  return secret ? { registry, secret } : undefined;
}


/** The X-Registry-Auth of a push or pull: Docker Hub's credentials go under its index URL. */
export function dockerAuthConfig(registry: string, credentials?: RegistryCredentials): PullAuth {
  const serveraddress = registry === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : registry;
  if (!credentials) return { serveraddress };
  return 'username' in credentials ? { username: credentials.username, password: credentials.password, serveraddress } : { identitytoken: credentials.identityToken, serveraddress };
}
