// Docker image references, parsed and normalised exactly as Docker's own reference package
// (distribution/reference, ParseNormalizedNamed) does it: the grammar, the registry-host rule, the
// docker.io/library/ expansion of familiar names, digest validation and Docker's error texts.
//
// Written here rather than taken from npm: the parsers there (@codefresh-io/docker-reference 0.1,
// its fork @swimlane/docker-reference 2.0) refuse IPv6 registry hosts ("[fd00::1]:5000/app", which
// the cluster's ULA addresses make real), read "Foo/bar" as an upper-case repository instead of a
// registry host, and accept upper-case hex digests that Docker refuses. The grammar below is the
// one distribution/reference documents in its regexp.go, one line per production.

/** Docker Hub, as references name it; its API answers at registry-1.docker.io. */
export const DOCKER_HUB = 'docker.io';
const LEGACY_HUB = 'index.docker.io';
const OFFICIAL_PREFIX = 'library/';
export const DOCKER_HUB_API_HOST = 'registry-1.docker.io';
const NAME_TOTAL_LENGTH_MAX = 255;

// The grammar (distribution/reference regexp.go).
const alphanumeric = '[a-z0-9]+';
const separator = '(?:[._]|__|[-]+)';
const pathComponent = `${alphanumeric}(?:${separator}${alphanumeric})*`;
const remoteName = `${pathComponent}(?:/${pathComponent})*`;
const domainNameComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domainName = `${domainNameComponent}(?:\\.${domainNameComponent})*`;
// IPv6 in brackets, without zone identifiers or IPv4-mapped forms.
const ipv6address = '\\[(?:[a-fA-F0-9:]+)\\]';
const domainAndPort = `(?:${domainName}|${ipv6address})(?::[0-9]+)?`;
const tag = '[\\w][\\w.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}';
const namePat = `(?:${domainAndPort}/)?${remoteName}`;

const REFERENCE = new RegExp(`^(${namePat})(?::(${tag}))?(?:@(${digest}))?$`);
const ANCHORED_NAME = new RegExp(`^(?:(${domainAndPort})/)?(${remoteName})$`);
const IDENTIFIER = /^[a-f0-9]{64}$/;
const REGISTRY_HOST = new RegExp(`^${domainAndPort}$`);
const TAG = new RegExp(`^${tag}$`);

/** Digest algorithms Docker accepts, with their hex length (go-digest's registered algorithms). */
const DIGEST_HEX_LENGTH: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };

export interface ImageReference {
  /** The registry host[:port] as written, or docker.io. */
  registry: string;
  /** The repository path in that registry, e.g. library/busybox. */
  repository: string;
  tag?: string;
  digest?: string;
  /**
   * No registry was written (busybox, jaco-demo/busybox): Docker sends such a name to Docker Hub;
   * jaco sends it to the cluster's default registry, or to Hub only when the cluster allows it.
   */
  shortName: boolean;
}

/** A reference Docker would refuse; `reason` is Docker's own text. */
export class InvalidReferenceError extends Error {
  override name = 'InvalidReferenceError';
  constructor(
    readonly reference: string,
    readonly reason: string,
  ) {
    super(`invalid image reference ${JSON.stringify(reference)}: ${reason}`);
  }
}

/** go-digest's Parse: "sha256:<64 lower-case hex>" (or sha384, sha512); throws Docker's message otherwise. */
export function validateDigest(d: string): string {
  const colon = d.indexOf(':');
  if (colon <= 0 || colon + 1 === d.length) throw new InvalidReferenceError(d, 'invalid checksum digest format');
  const algorithm = d.slice(0, colon);
  const encoded = d.slice(colon + 1);
  const length = DIGEST_HEX_LENGTH[algorithm];
  if (length === undefined) throw new InvalidReferenceError(d, new RegExp(`^${digest}$`).test(d) ? 'unsupported digest algorithm' : 'invalid checksum digest format');
  if (encoded.length !== length) throw new InvalidReferenceError(d, 'invalid checksum digest length');
  if (!/^[a-f0-9]+$/.test(encoded)) throw new InvalidReferenceError(d, 'invalid checksum digest format');
  return d;
}

/** Splits off the registry as Docker's splitDockerDomain does. */
function splitRegistry(name: string): { registry: string; remainder: string; shortName: boolean } {
  const slash = name.indexOf('/');
  if (slash < 0) return { registry: DOCKER_HUB, remainder: OFFICIAL_PREFIX + name, shortName: true };
  const first = name.slice(0, slash);
  const rest = name.slice(slash + 1);
  let registry: string;
  let remainder: string;
  let shortName = false;
  if (first === 'localhost') [registry, remainder] = [first, rest];
  else if (first === LEGACY_HUB) [registry, remainder] = [DOCKER_HUB, rest];
  else if (/[.:]/.test(first)) [registry, remainder] = [first, rest];
  // Repository paths are lower-case: an upper-case first component can only be a host.
  else if (first.toLowerCase() !== first) [registry, remainder] = [first, rest];
  else [registry, remainder, shortName] = [DOCKER_HUB, name, true];
  if (registry === DOCKER_HUB && !remainder.includes('/')) remainder = OFFICIAL_PREFIX + remainder;
  return { registry, remainder, shortName };
}

/**
 * Parses a reference as `docker pull` reads it (ParseNormalizedNamed): busybox →
 * docker.io/library/busybox, a first component with "." or ":" or "localhost" (or upper case) is a
 * registry host, then an optional :tag and @digest. No default tag is added.
 */
export function parseImageReference(text: string): ImageReference {
  const fail = (reason: string): never => {
    throw new InvalidReferenceError(text, reason);
  };
  if (IDENTIFIER.test(text)) fail(`invalid repository name (${text}), cannot specify 64-byte hexadecimal strings`);
  const { registry, remainder, shortName } = splitRegistry(text);
  const colon = remainder.indexOf(':');
  const remote = colon >= 0 ? remainder.slice(0, colon) : remainder;
  if (remote.toLowerCase() !== remote) fail(`invalid reference format: repository name (${remote}) must be lowercase`);

  // Docker's Parse, on the name with its registry made explicit.
  const full = `${registry}/${remainder}`;
  const m = REFERENCE.exec(full);
  if (!m) {
    if (text === '') fail('repository name must have at least one component');
    if (REFERENCE.test(full.toLowerCase())) fail('repository name must be lowercase');
    fail('invalid reference format');
  }
  const [, name, tagPart, digestPart] = m!;
  if (name!.length > NAME_TOTAL_LENGTH_MAX) fail(`repository name must not be more than ${NAME_TOTAL_LENGTH_MAX} characters`);
  const nm = ANCHORED_NAME.exec(name!)!;
  if (digestPart) {
    try {
      validateDigest(digestPart);
    } catch (e) {
      fail((e as InvalidReferenceError).reason);
    }
  }
  return {
    registry: nm[1] ?? registry,
    repository: nm[2]!,
    ...(tagPart ? { tag: tagPart } : {}),
    ...(digestPart ? { digest: digestPart } : {}),
    shortName,
  };
}

/** Whether a string is a registry host[:port] as references name one ("127.0.0.1:5000", "[fd00::1]:5000", "ghcr.io"). */
export function isRegistryHost(s: string): boolean {
  return REGISTRY_HOST.test(s);
}

/** A registry host as the operator typed it, normalised: index.docker.io → docker.io, lower case. Throws on anything else. */
export function parseRegistryHost(s: string): string {
  if (!isRegistryHost(s)) throw new InvalidReferenceError(s, 'not a registry host: expected host[:port] as in an image reference, e.g. 127.0.0.1:5000, registry.example.com, [fd00::1]:5000');
  const host = s.toLowerCase();
  return host === LEGACY_HUB || host === DOCKER_HUB_API_HOST ? DOCKER_HUB : host;
}

export function isValidTag(s: string): boolean {
  return TAG.test(s);
}

/** The fully qualified form: docker.io/library/busybox:1@sha256:… (Docker's ref.String()). */
export function formatReference(ref: Pick<ImageReference, 'registry' | 'repository' | 'tag' | 'digest'>): string {
  return `${ref.registry}/${ref.repository}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/** The short form Docker prints (FamiliarString): docker.io/library/ is dropped. */
export function familiarString(ref: Pick<ImageReference, 'registry' | 'repository' | 'tag' | 'digest'>): string {
  let name = `${ref.registry}/${ref.repository}`;
  if (ref.registry === DOCKER_HUB) {
    name = ref.repository;
    const rest = name.startsWith(OFFICIAL_PREFIX) ? name.slice(OFFICIAL_PREFIX.length) : undefined;
    if (rest !== undefined && !rest.includes('/')) name = rest;
  }
  return `${name}${ref.tag ? `:${ref.tag}` : ''}${ref.digest ? `@${ref.digest}` : ''}`;
}

/** The repository's name without tag or digest: registry/repository. */
export function repositoryName(ref: Pick<ImageReference, 'registry' | 'repository'>): string {
  return `${ref.registry}/${ref.repository}`;
}

/** The tag a reference without one means (Docker's TagNameOnly). */
export const DEFAULT_TAG = 'latest';

/**
 * The reference pinned to a digest, its tag kept for people to read: registry/repo:tag@sha256:….
 * Docker pulls and runs such a reference by its digest alone.
 */
export function pinnedReference(ref: ImageReference, digestValue: string): string {
  return formatReference({ ...ref, tag: ref.tag ?? DEFAULT_TAG, digest: validateDigest(digestValue) });
}

/**
 * A short name re-homed at another registry (the cluster's default): jaco-demo/busybox:1 at
 * 127.0.0.1:5000 is 127.0.0.1:5000/jaco-demo/busybox:1, as the operator would tag it. Hub's
 * library/ prefix is Hub's own convention and is not carried over.
 */
export function atRegistry(ref: ImageReference, registry: string): ImageReference {
  const repository = ref.registry === DOCKER_HUB && ref.shortName && ref.repository.startsWith(OFFICIAL_PREFIX) && !ref.repository.slice(OFFICIAL_PREFIX.length).includes('/') ? ref.repository.slice(OFFICIAL_PREFIX.length) : ref.repository;
  return { ...ref, registry, repository, shortName: false };
}

/** The host the registry's HTTP API answers at (Docker Hub's is not docker.io). */
export function registryApiHost(registry: string): string {
  return registry === DOCKER_HUB ? DOCKER_HUB_API_HOST : registry;
}
