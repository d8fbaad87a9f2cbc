// Building a compose-style `build:` (context, dockerfile, args, target) with the operator's Docker
// engine and pushing the result, returning the pushed manifest digest that apply pins. The context
// goes as a tar that honours .dockerignore as the Docker CLI does; RUN steps get host networking
// (jaco's engines have no bridge network); a failed build names the step it failed at.
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { isAbsolute, join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import dockerignoreModule from '@balena/dockerignore';
import type Docker from 'dockerode';
import tar from 'tar-fs';

// CommonJS with a `default` on its export (its typings say ES default): the factory either way.
const dockerignore = ((dockerignoreModule as unknown as { default?: unknown }).default ?? dockerignoreModule) as unknown as typeof dockerignoreModule.default;
import { dockerAuthConfig } from './access.js';
import { DOCKER_HUB_AUTH_KEY } from './credentials.js';
import { DEFAULT_TAG, DOCKER_HUB, familiarString, parseImageReference, pinnedReference, validateDigest } from './reference.js';
import { classifyPullError, imageAccessError, type RegistryCredentials } from './registry.js';

/** compose's `build:` in its long form (a string is its context). */
export interface BuildSpec {
  /** The context directory. */
  context: string;
  /** The Dockerfile, relative to the context (default Dockerfile); may lie outside it, as compose allows. */
  dockerfile?: string;
  /** compose's dockerfile_inline: the Dockerfile's text itself. */
  dockerfileInline?: string;
  args?: Record<string, string>;
  /** The stage of a multi-stage Dockerfile to build. */
  target?: string;
  labels?: Record<string, string>;
  noCache?: boolean;
  /** Pull newer base images while building. */
  pull?: boolean;
}

export interface BuildOptions {
  /** Each line of the build's output, as it comes. */
  onOutput?: (line: string) => void;
  /** Credentials for registries the Dockerfile's FROM lines pull from: registry → credentials. */
  registryAuth?: Record<string, RegistryCredentials>;
  signal?: AbortSignal;
}

/** A build that failed: the step it failed at (when it got to one) and the engine's words. */
export class ImageBuildError extends Error {
  override name = 'ImageBuildError';
  constructor(
    readonly image: string,
    readonly reason: string,
    /** "Step 3/6 : RUN make" (the classic builder's step line), when the build got to one. */
    readonly step: string | undefined,
    /** The last lines of the build's output. */
    readonly output: string[],
  ) {
    super(`building ${image} failed${step ? ` at ${step}` : ''}: ${reason}`);
  }
}

/** A push that failed for a reason other than the image codes (those throw ImageAccessError). */
export class ImagePushError extends Error {
  override name = 'ImagePushError';
}

// ---------------------------------------------------------------- the context

/** Where the Dockerfile is, inside the context's tar. */
interface DockerfilePlacement {
  /** Its path in the tar. */
  name: string;
  /** Its text, when it is added to the tar (outside the context, or inline). */
  extra?: string;
}

function placeDockerfile(spec: BuildSpec): DockerfilePlacement {
  const context = resolve(spec.context);
  if (spec.dockerfileInline !== undefined) return { name: `.dockerfile.${randomBytes(6).toString('hex')}`, extra: spec.dockerfileInline };
  const file = resolve(context, spec.dockerfile ?? 'Dockerfile');
  if (!existsSync(file)) throw new ImageBuildError(spec.context, `no Dockerfile at ${file}`, undefined, []);
  const rel = relative(context, file);
  // Outside the context the Docker CLI sends it under a random name; so does this.
  if (rel.startsWith('..') || isAbsolute(rel)) return { name: `.dockerfile.${randomBytes(6).toString('hex')}`, extra: readFileSync(file, 'utf8') };
  return { name: rel.split(sep).join('/') };
}

/**
 * The build context as a tar stream, without what .dockerignore excludes (matched as the Docker
 * CLI matches it, by @balena/dockerignore); the Dockerfile and .dockerignore always go, as the
 * engine needs them. Owners are root and modes are kept, as in the CLI's context.
 */
export function packContext(contextDir: string, dockerfile: DockerfilePlacement): Readable {
  const context = resolve(contextDir);
  if (!existsSync(context) || !statSync(context).isDirectory()) throw new ImageBuildError(contextDir, `the build context ${context} is not a directory`, undefined, []);
  const ignoreFile = join(context, '.dockerignore');
  const patterns = existsSync(ignoreFile) ? readFileSync(ignoreFile, 'utf8') : '';
  const matcher = dockerignore({ ignorecase: false }).add(patterns);
  // A directory with an exception pattern under it must still be walked for the exception.
  const exceptions = patterns
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.startsWith('!'))
    .map((l) => l.slice(1).replace(/^\/+/, ''));
  const alwaysSent = new Set(['.dockerignore', dockerfile.name]);
  const ignore = (abs: string): boolean => {
    const rel = relative(context, abs).split(sep).join('/');
    if (!rel || alwaysSent.has(rel) || dockerfile.name.startsWith(`${rel}/`)) return false;
    if (!matcher.ignores(rel)) return false;
    let isDir = false;
    try {
      isDir = statSync(abs).isDirectory();
    } catch {
      return true;
    }
    return !(isDir && exceptions.some((p) => `${p}/`.startsWith(`${rel}/`) || p.startsWith('*') || p.startsWith('**')));
  };
  const options = {
    ignore,
    umask: 0,
    map: (h: tar.Headers) => ({ ...h, uid: 0, gid: 0 }),
    ...(dockerfile.extra !== undefined
      ? {
          finalize: false,
          finish: (pack: tar.Pack) => {
            const pk = pack as unknown as { entry(h: object, body: string): void; finalize(): void };
            pk.entry({ name: dockerfile.name, mode: 0o644, uid: 0, gid: 0, mtime: new Date() }, dockerfile.extra!);
            pk.finalize();
          },
        }
      : {}),
  };
  return tar.pack(context, options as tar.PackOptions) as unknown as Readable;
}

// ---------------------------------------------------------------- the engine's streams

/** One JSON message of a build or push stream. */
export interface StreamEvent {
  stream?: string;
  status?: string;
  error?: string;
  errorDetail?: { message?: string; code?: number };
  aux?: { ID?: string; Digest?: string; Tag?: string; Size?: number };
}

const STEP_LINE = /^Step \d+\/\d+ : .*/;

/** The image ID a finished build stream reports, or the ImageBuildError it ends with. */
export function buildOutcome(events: StreamEvent[], image: string): string {
  const lines: string[] = [];
  let step: string | undefined;
  let id: string | undefined;
  for (const e of events) {
    for (const line of (e.stream ?? '').split('\n').filter((l) => l.trim())) {
      lines.push(line);
      if (STEP_LINE.test(line)) step = line.trim();
    }
    if (e.aux?.ID) id = e.aux.ID;
    const error = e.errorDetail?.message ?? e.error;
    if (error) throw new ImageBuildError(image, error.trim(), step, lines.slice(-20));
  }
  // Older engines say "Successfully built <short id>" instead of an aux message.
  id ??= lines.map((l) => /^Successfully built ([0-9a-f]{12,})/.exec(l)?.[1]).find(Boolean);
  if (!id) throw new ImageBuildError(image, 'the engine reported no image ID', step, lines.slice(-20));
  return id;
}

/** The manifest digest a finished push stream reports; a failure throws with the image codes when it has one. */
export function pushOutcome(events: StreamEvent[], image: string, registry: string): string {
  let digest: string | undefined;
  for (const e of events) {
    const error = e.errorDetail?.message ?? e.error;
    if (error) {
      const code = classifyPullError(error);
      throw code ? imageAccessError(code, image, registry, error) : new ImagePushError(`pushing ${image} to ${registry} failed: ${error}`);
    }
    digest = e.aux?.Digest ?? /digest: (sha256:[0-9a-f]{64})/.exec(e.status ?? '')?.[1] ?? digest;
  }
  if (!digest) throw new ImagePushError(`pushing ${image} to ${registry}: the engine reported no digest`);
  return validateDigest(digest);
}

/** Reads a stream of the engine to its end, each event handed to onEvent as it comes. */
function readEvents(docker: Docker, stream: NodeJS.ReadableStream, onEvent: (e: StreamEvent) => void): Promise<StreamEvent[]> {
  return new Promise((resolveEvents, reject) => {
    docker.modem.followProgress(
      stream,
      (err: Error | null, events: StreamEvent[]) => (err ? reject(err) : resolveEvents(events)),
      onEvent,
    );
  });
}

// ---------------------------------------------------------------- build, tag, push


/** Builds the spec with the engine, tagged `tag`; returns the image ID. */
export async function buildImage(docker: Docker, spec: BuildSpec, tag: string, opts: BuildOptions = {}): Promise<string> {
  const ref = parseImageReference(tag);
  const dockerfile = placeDockerfile(spec);
  const context = packContext(spec.context, dockerfile);
  const registryconfig = opts.registryAuth ? Object.fromEntries(Object.entries(opts.registryAuth).map(([r, c]) => [r === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : r, dockerAuthConfig(r, c)])) : undefined;
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.buildImage(context as unknown as NodeJS.ReadableStream, {
      t: familiarString(ref),
      dockerfile: dockerfile.name,
      ...(spec.args && Object.keys(spec.args).length ? { buildargs: spec.args } : {}),
      ...(spec.target ? { target: spec.target } : {}),
      ...(spec.labels && Object.keys(spec.labels).length ? { labels: spec.labels } : {}),
      ...(spec.noCache ? { nocache: true } : {}),
      ...(spec.pull ? { pull: true } : {}),
      // The engine has no bridge network: RUN steps share the host's.
      networkmode: 'host',
      rm: true,
      forcerm: true,
      ...(registryconfig ? { registryconfig } : {}),
      ...(opts.signal ? { abortSignal: opts.signal } : {}),
    } as Docker.ImageBuildOptions);
  } catch (e) {
    throw new ImageBuildError(familiarString(ref), (e as Error).message.replace(/^\(HTTP code \d+\) [a-z ]+- /, '').trim(), undefined, []);
  }
  const events = await readEvents(docker, stream, (e) => {
    if (opts.onOutput) for (const line of (e.stream ?? '').split('\n').filter((l) => l.trim())) opts.onOutput(line);
  });
  return buildOutcome(events, familiarString(ref));
}

/** Pushes a local image named `reference`, returning the manifest digest the registry stored. */
export async function pushImage(docker: Docker, reference: string, credentials?: RegistryCredentials, opts: { onOutput?: (line: string) => void; signal?: AbortSignal } = {}): Promise<string> {
  const ref = parseImageReference(reference);
  const name = familiarString({ ...ref, tag: undefined, digest: undefined });
  const image = familiarString({ ...ref, tag: ref.tag ?? DEFAULT_TAG, digest: undefined });
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.getImage(name).push({ tag: ref.tag ?? DEFAULT_TAG, authconfig: dockerAuthConfig(ref.registry, credentials) as Docker.AuthConfig, ...(opts.signal ? { abortSignal: opts.signal } : {}) });
  } catch (e) {
    const message = (e as Error).message;
    const code = classifyPullError(message);
    throw code ? imageAccessError(code, image, ref.registry, message) : new ImagePushError(`pushing ${image} to ${ref.registry} failed: ${message}`);
  }
  const events = await readEvents(docker, stream, (e) => opts.onOutput?.(e.status ?? ''));
  return pushOutcome(events, image, ref.registry);
}

/** Tags an image the engine already has (e.g. jaco-demo/busybox:1) as `target` and pushes it; returns the digest. */
export async function pushLocalImage(docker: Docker, localName: string, target: string, credentials?: RegistryCredentials): Promise<string> {
  const ref = parseImageReference(target);
  try {
    await docker.getImage(localName).tag({ repo: familiarString({ ...ref, tag: undefined, digest: undefined }), tag: ref.tag ?? DEFAULT_TAG });
  } catch (e) {
    throw new ImagePushError(`tagging ${localName} as ${target} failed: ${(e as Error).message}`);
  }
  return pushImage(docker, target, credentials);
}

export interface BuiltImage {
  imageId: string;
  digest: string;
  /** target pinned to what was pushed: registry/repo:tag@sha256:… */
  pinned: string;
}

/** Builds `spec` as `target`, pushes it with `credentials`, and gives what apply stores. */
export async function buildAndPush(docker: Docker, spec: BuildSpec, target: string, credentials?: RegistryCredentials, opts: BuildOptions = {}): Promise<BuiltImage> {
  const imageId = await buildImage(docker, spec, target, opts);
  const digest = await pushImage(docker, target, credentials, opts.signal ? { signal: opts.signal } : {});
  return { imageId, digest, pinned: pinnedReference(parseImageReference(target), digest) };
}
