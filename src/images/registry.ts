// Asking a registry what a tag points at (the OCI distribution API): the manifest digest that apply
// pins, through the registry's 401 challenge (Basic, or a Bearer token as Docker Hub and GHCR hand
// out), over TLS with the cluster's CA or plain HTTP when told. Failures are typed with the closed
// codes of src/api/reasons/images.ts, and classifyPullError gives the same codes to the text a
// Docker engine returns for a failed pull, so apply and the node-agent report alike.
//
// A few requests against a documented API, written here: the npm clients (e.g.
// @snyk/docker-registry-v2-client) fetch whole manifests by GET only, add SSRF policies and retries
// of their own, and report needle's errors, which would still need this module's classification.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import { IMAGE_ERROR_CODES, type ImageErrorCode } from '../api/reasons/images.js';
import { DEFAULT_TAG, familiarString, parseImageReference, registryApiHost, validateDigest, type ImageReference } from './reference.js';

/** What `docker login` stores: a user and password (or token), or an OAuth2 refresh token. */
export type RegistryCredentials = { username: string; password: string } | { identityToken: string };

/** How to reach one registry: the same shape for apply (CLI) and a node's pulls (agent). */
export interface RegistryAccess {
  /** host[:port] as image references name it (docker.io for Docker Hub). */
  registry: string;
  credentials?: RegistryCredentials;
  /** PEM of the CA that signs the registry's certificate (trusted beside the system's). */
  caPem?: string;
  /** Speak plain HTTP: only for a registry that serves no TLS. */
  insecure?: boolean;
  /** For the whole exchange, token included (default 10 s). */
  timeoutMs?: number;
}

export const DEFAULT_REGISTRY_TIMEOUT_MS = 10_000;

/** The media types asked for: a multi-platform index (OCI or Docker) or a single manifest. */
export const MANIFEST_ACCEPT = [
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
].join(', ');

/** The distribution registry refuses manifests above 4 MiB; nothing larger is one. */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/** An image that could not be had, with its code (src/api/reasons/images.ts); one subclass per code. */
export abstract class ImageAccessError extends Error {
  abstract readonly code: ImageErrorCode;
  constructor(
    message: string,
    readonly image: string,
    readonly registry: string,
    readonly detail: string,
  ) {
    super(message);
  }
  get description(): string {
    return IMAGE_ERROR_CODES[this.code];
  }
}

export class ImageNotFoundError extends ImageAccessError {
  override name = 'ImageNotFoundError';
  readonly code = 'image_not_found';
  constructor(image: string, registry: string, detail: string) {
    super(`image ${image} not found in registry ${registry}: ${detail}`, image, registry, detail);
  }
}

export class ImageUnauthorizedError extends ImageAccessError {
  override name = 'ImageUnauthorizedError';
  readonly code = 'image_unauthorized';
  constructor(image: string, registry: string, detail: string) {
    super(`registry ${registry} refused access to image ${image}: ${detail}`, image, registry, detail);
  }
}

export class RegistryUnreachableError extends ImageAccessError {
  override name = 'RegistryUnreachableError';
  readonly code = 'registry_unreachable';
  constructor(image: string, registry: string, detail: string) {
    super(`registry ${registry} unreachable for image ${image}: ${detail}`, image, registry, detail);
  }
}

const ERROR_OF: Record<ImageErrorCode, new (image: string, registry: string, detail: string) => ImageAccessError> = {
  image_not_found: ImageNotFoundError,
  image_unauthorized: ImageUnauthorizedError,
  registry_unreachable: RegistryUnreachableError,
};

/** The error of a code (e.g. from classifyPullError), naming the image and the registry. */
export function imageAccessError(code: ImageErrorCode, image: string, registry: string, detail: string): ImageAccessError {
  return new ERROR_OF[code](image, registry, detail);
}

// ---------------------------------------------------------------- classifying an engine's pull error

// Checked in this order: a network failure can quote a URL with any word in it, a refusal can say
// "repository does not exist" (Docker Hub's answer to both), so "not found" is the last resort.
const PULL_PATTERNS: [ImageErrorCode, RegExp][] = [
  [
    'registry_unreachable',
    /connection refused|no such host|i\/o timeout|x509:|tls:|certificate|server gave http response to https client|network is unreachable|no route to host|connection reset|context deadline exceeded|client\.timeout exceeded|timeout exceeded|temporary failure in name resolution|server misbehaving|dial tcp|: eof\b|toomanyrequests|received unexpected http status: 5\d\d|service unavailable|bad gateway/i,
  ],
  ['image_unauthorized', /pull access denied|unauthorized|authentication required|\bdenied\b|access to the resource is denied|no basic auth credentials|incorrect username or password|forbidden/i],
  ['image_not_found', /manifest unknown|name unknown|not found|no such image|does not exist/i],
];

/**
 * The code of a failed pull from the error text a Docker engine returns ("pull access denied …",
 * "manifest for … not found: manifest unknown", "dial tcp …: connection refused", "x509: …"), or
 * undefined when the text says none of these (the agent's image_pull_failed then stands).
 */
export function classifyPullError(message: string): ImageErrorCode | undefined {
  return PULL_PATTERNS.find(([, re]) => re.test(message))?.[0];
}

// ---------------------------------------------------------------- the 401 challenge

export interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/**
 * The first challenge of a WWW-Authenticate header (RFC 7235): `Bearer realm="…",service="…",
 * scope="…"` or `Basic realm="…"`. Registries send one.
 */
export function parseChallenge(header: string): Challenge | undefined {
  const m = /^\s*([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*)\s*(.*)$/s.exec(header);
  if (!m) return undefined;
  const params: Record<string, string> = {};
  const re = /([A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*(?:,|$)\s*/gy;
  const rest = m[2]!;
  let p: RegExpExecArray | null;
  while (re.lastIndex < rest.length && (p = re.exec(rest))) params[p[1]!.toLowerCase()] = p[2] !== undefined ? p[2].replace(/\\(.)/g, '$1') : p[3]!;
  return { scheme: m[1]!.toLowerCase(), params };
}

// ---------------------------------------------------------------- HTTP

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** One request/answer pair; network failures come back as the error Node gives. */
function send(url: URL, opts: { method: string; headers: Record<string, string>; agent: http.Agent; signal: AbortSignal; body?: string }): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const mod = url.protocol === 'https:' ? https : http;
    const req = mod.request(url, { method: opts.method, headers: opts.headers, agent: opts.agent, signal: opts.signal }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY_BYTES) req.destroy(new Error(`the answer is larger than ${MAX_BODY_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

const TLS_TRUST_CODES = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'CERT_UNTRUSTED',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/** What went wrong on the wire, in words an operator acts on. */
export function networkFailure(e: unknown, url: URL, timeoutMs: number, timedOut: boolean): string {
  const err = e as NodeJS.ErrnoException;
  const code = err?.code ?? '';
  const where = `${url.protocol}//${url.host}`;
  if (timedOut || code === 'ABORT_ERR' || err?.name === 'AbortError') return `timed out after ${timeoutMs} ms (${where})`;
  if (code === 'ECONNREFUSED') return `connection refused (${where})`;
  if (code === 'ENOTFOUND') return `no such host: DNS lookup of ${url.hostname} failed`;
  if (code === 'EAI_AGAIN') return `DNS lookup of ${url.hostname} failed (temporary failure in name resolution)`;
  if (code === 'ECONNRESET') return `connection reset (${where})`;
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH') return `no route to host (${where})`;
  if (code === 'ETIMEDOUT') return `connection timed out (${where})`;
  if (TLS_TRUST_CODES.has(code))
    return `TLS: the registry's certificate is not trusted: ${err.message} (give the CA that signed it: jaco registry login … --ca-file)`;
  if (code === 'EPROTO' || code === 'ERR_SSL_WRONG_VERSION_NUMBER' || /wrong version number|packet length too long/i.test(err?.message ?? ''))
    return `TLS handshake failed: the registry answers plain HTTP, not HTTPS (${where}); mark it insecure only if it is meant to serve no TLS`;
  if (/^ERR_SSL|^ERR_TLS/.test(code)) return `TLS failure: ${err.message} (${where})`;
  // A TLS server's answer to plain HTTP (Go's 400 with a body, even to HEAD) is no valid HTTP.
  if (code.startsWith('HPE_') && url.protocol === 'http:') return `the registry's answer over plain HTTP is not valid HTTP (${err.message}; ${where}): if it speaks HTTPS, do not mark it insecure`;
  return `${err?.message ?? String(e)} (${where})`;
}

/** The `errors` of a registry's JSON error body, as "manifest unknown; …". */
function registryErrors(body: Buffer): string | undefined {
  try {
    const j = JSON.parse(body.toString('utf8')) as { errors?: { code?: string; message?: string }[] };
    const msgs = (j.errors ?? []).map((e) => e.message || e.code).filter(Boolean);
    return msgs.length ? msgs.join('; ') : undefined;
  } catch {
    return undefined;
  }
}

const contexts = new Map<string, SecureContext>();

/**
 * A TLS context trusting the system's CAs and this one, made once per CA: parsing the ~140 system
 * roots costs ~20 ms, more than the rest of a resolve.
 */
function trustingAlso(caPem: string): SecureContext {
  let ctx = contexts.get(caPem);
  if (!ctx) {
    ctx = createSecureContext({ ca: [...rootCertificates, caPem] });
    if (contexts.size >= 32) contexts.delete(contexts.keys().next().value!);
    contexts.set(caPem, ctx);
  }
  return ctx;
}

/** One exchange with one registry: its connections, a deadline, the token it earned. */
class RegistrySession {
  private readonly agents = new Map<string, http.Agent>();
  private readonly controller = new AbortController();
  private readonly timer: NodeJS.Timeout;
  private authorization?: string;
  timedOut = false;
  readonly timeoutMs: number;
  readonly base: URL;

  constructor(
    readonly access: RegistryAccess,
    readonly image: string,
  ) {
    this.timeoutMs = access.timeoutMs ?? DEFAULT_REGISTRY_TIMEOUT_MS;
    this.base = new URL(`${access.insecure ? 'http' : 'https'}://${registryApiHost(access.registry)}/`);
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort();
    }, this.timeoutMs);
  }

  close(): void {
    clearTimeout(this.timer);
    for (const a of this.agents.values()) a.destroy();
  }

  /** Kept-alive connections per scheme; the given CA is trusted beside the system's (a token realm may sit on a public host). */
  private agentFor(url: URL): http.Agent {
    let agent = this.agents.get(url.protocol);
    if (!agent) {
      agent = url.protocol === 'https:' ? new https.Agent({ keepAlive: true, ...(this.access.caPem ? { secureContext: trustingAlso(this.access.caPem) } : {}) }) : new http.Agent({ keepAlive: true });
      this.agents.set(url.protocol, agent);
    }
    return agent;
  }

  async send(url: URL, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
    try {
      return await send(url, { method, headers, agent: this.agentFor(url), signal: this.controller.signal, ...(body !== undefined ? { body } : {}) });
    } catch (e) {
      throw this.fail('registry_unreachable', networkFailure(e, url, this.timeoutMs, this.timedOut));
    }
  }

  fail(code: ImageErrorCode, detail: string): ImageAccessError {
    return imageAccessError(code, this.image, this.access.registry, detail);
  }

  /** A request to the registry's API, answering its 401 challenge once. */
  async api(path: string, method: 'GET' | 'HEAD', accept: string | undefined, scope: string | undefined): Promise<Answer> {
    const url = new URL(path, this.base);
    const headers = (): Record<string, string> => ({ ...(accept ? { accept } : {}), ...(this.authorization ? { authorization: this.authorization } : {}) });
    let answer = await this.send(url, method, headers());
    if (answer.status === 401 && !this.authorization) {
      await this.authenticate(answer, scope);
      answer = await this.send(url, method, headers());
    }
    this.checkCommon(answer);
    return answer;
  }

  /** Answers that mean the same whatever was asked. */
  private checkCommon(a: Answer): void {
    const given = this.access.credentials ? ('username' in this.access.credentials ? `the credentials of ${this.access.credentials.username} were refused` : 'the identity token was refused') : 'no credentials were given';
    if (a.status === 401) throw this.fail('image_unauthorized', `${registryErrors(a.body) ?? 'authentication required'} (${given})`);
    if (a.status === 403) throw this.fail('image_unauthorized', `${registryErrors(a.body) ?? 'access denied'} (HTTP 403; ${given})`);
    // Go's TLS server answers a plain HTTP request with this 400.
    if (a.status === 400 && /HTTP request to an HTTPS server/i.test(a.body.toString('utf8')))
      throw this.fail('registry_unreachable', `the registry speaks HTTPS, and it was asked over plain HTTP (${this.base.host}): do not mark it insecure`);
    if (a.status === 429) throw this.fail('registry_unreachable', `rate limited (HTTP 429${registryErrors(a.body) ? `: ${registryErrors(a.body)}` : ''})`);
    if (a.status >= 500) throw this.fail('registry_unreachable', `server error (HTTP ${a.status}${registryErrors(a.body) ? `: ${registryErrors(a.body)}` : ''})`);
  }

  private async authenticate(answer: Answer, scope: string | undefined): Promise<void> {
    const header = answer.headers['www-authenticate'];
    const challenge = parseChallenge(Array.isArray(header) ? header[0]! : (header ?? ''));
    const creds = this.access.credentials;
    if (challenge?.scheme === 'basic') {
      if (!creds) throw this.fail('image_unauthorized', 'authentication required (Basic), and no credentials were given');
      if (!('username' in creds)) throw this.fail('image_unauthorized', 'the registry wants a user and password (Basic); an identity token was given');
      this.authorization = `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}`;
      return;
    }
    if (challenge?.scheme !== 'bearer' || !challenge.params.realm) throw this.fail('image_unauthorized', `authentication required, with a challenge this client does not know: ${JSON.stringify(header ?? '')}`);
    this.authorization = `Bearer ${await this.token(challenge.params, scope)}`;
  }

  /** A Bearer token from the realm (Docker's token protocol; an identity token as an OAuth2 refresh token). */
  private async token(params: Record<string, string>, scope: string | undefined): Promise<string> {
    let realm: URL;
    try {
      realm = new URL(params.realm!);
    } catch {
      throw this.fail('registry_unreachable', `the registry's token realm is not a URL: ${JSON.stringify(params.realm)}`);
    }
    if (realm.protocol !== 'https:' && realm.protocol !== 'http:') throw this.fail('registry_unreachable', `the registry's token realm is not HTTP(S): ${realm.href}`);
    const wantScope = scope ?? params.scope;
    const creds = this.access.credentials;
    let answer: Answer;
    if (creds && 'identityToken' in creds) {
      const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: creds.identityToken, client_id: 'jaco', ...(params.service ? { service: params.service } : {}), ...(wantScope ? { scope: wantScope } : {}) });
      answer = await this.send(realm, 'POST', { 'content-type': 'application/x-www-form-urlencoded' }, form.toString());
    } else {
      if (params.service) realm.searchParams.set('service', params.service);
      if (wantScope) realm.searchParams.set('scope', wantScope);
      const auth: Record<string, string> = creds ? { authorization: `Basic ${Buffer.from(`${creds.username}:${creds.password}`).toString('base64')}` } : {};
      answer = await this.send(realm, 'GET', auth);
    }
    if (answer.status === 401 || answer.status === 403)
      throw this.fail('image_unauthorized', `the token service ${realm.host} refused ${creds ? 'the credentials' : 'an anonymous token'} (HTTP ${answer.status}${registryErrors(answer.body) ? `: ${registryErrors(answer.body)}` : ''})`);
    if (answer.status !== 200) throw this.fail('registry_unreachable', `the token service ${realm.host} answered HTTP ${answer.status}`);
    let token: string | undefined;
    try {
      const j = JSON.parse(answer.body.toString('utf8')) as { token?: string; access_token?: string };
      token = j.token || j.access_token;
    } catch {
      token = undefined;
    }
    if (!token) throw this.fail('registry_unreachable', `the token service ${realm.host} answered without a token`);
    return token;
  }
}

function digestOf(answer: Answer): string | undefined {
  const h = answer.headers['docker-content-digest'];
  return Array.isArray(h) ? h[0] : h;
}

/**
 * The manifest digest a tag points at now (for a multi-platform image, the index's digest: what
 * `docker push` reports and `docker pull name@digest` takes). A reference that already carries a
 * digest is answered without asking. Throws ImageNotFoundError, ImageUnauthorizedError or
 * RegistryUnreachableError, each naming the image and the registry.
 */
export async function resolveDigest(reference: string | ImageReference, access?: Omit<RegistryAccess, 'registry'> & { registry?: string }): Promise<string> {
  const ref = typeof reference === 'string' ? parseImageReference(reference) : reference;
  if (ref.digest) return ref.digest;
  // Credentials go only to the registry they were given for.
  if (access?.registry !== undefined && access.registry.toLowerCase() !== ref.registry.toLowerCase())
    throw new Error(`the access given is for registry ${access.registry}, and image ${familiarString(ref)} is in ${ref.registry}`);
  const session = new RegistrySession({ ...access, registry: ref.registry }, familiarString({ ...ref, tag: ref.tag ?? DEFAULT_TAG }));
  const path = `/v2/${ref.repository}/manifests/${encodeURIComponent(ref.tag ?? DEFAULT_TAG)}`;
  const scope = `repository:${ref.repository}:pull`;
  try {
    let answer = await session.api(path, 'HEAD', MANIFEST_ACCEPT, scope);
    if (answer.status === 404) throw session.fail('image_not_found', 'manifest unknown (HTTP 404)');
    let digest = answer.status === 200 ? digestOf(answer) : undefined;
    if (!digest) {
      // No digest header (or no HEAD): the digest is the sha256 of the manifest as served.
      answer = await session.api(path, 'GET', MANIFEST_ACCEPT, scope);
      if (answer.status === 404) throw session.fail('image_not_found', `${registryErrors(answer.body) ?? 'manifest unknown'} (HTTP 404)`);
      if (answer.status !== 200) throw session.fail('registry_unreachable', `unexpected answer HTTP ${answer.status} to GET ${path}`);
      digest = digestOf(answer) ?? `sha256:${createHash('sha256').update(answer.body).digest('hex')}`;
    }
    try {
      return validateDigest(digest);
    } catch {
      throw session.fail('registry_unreachable', `the registry answered a malformed digest ${JSON.stringify(digest)}`);
    }
  } finally {
    session.close();
  }
}

/**
 * Checks that the registry answers and takes these credentials, as `docker login` does: GET /v2/
 * through the challenge (a token with no repository scope). Throws like resolveDigest.
 */
export async function checkRegistryLogin(access: RegistryAccess): Promise<void> {
  const session = new RegistrySession(access, `${access.registry} (login)`);
  try {
    const answer = await session.api('/v2/', 'GET', undefined, undefined);
    if (answer.status !== 200) throw session.fail('registry_unreachable', `GET /v2/ answered HTTP ${answer.status}: not a registry (distribution API v2)?`);
  } finally {
    session.close();
  }
}

/** The ports an image's config declares (Dockerfile EXPOSE), by protocol, ascending. */
export interface ImagePorts {
  tcp: number[];
  udp: number[];
}

/** Node's process.arch → the OCI platform architecture of an index entry. */
const OCI_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', arm: 'arm', ppc64: 'ppc64le', s390x: 's390x', riscv64: 'riscv64' };

/** `{"8080/tcp": {}, "53/udp": {}}` → { tcp: [8080], udp: [53] }; anything else is not a port and is left out. */
export function exposedPortsOf(exposed: unknown): ImagePorts {
  const out: ImagePorts = { tcp: [], udp: [] };
  if (!exposed || typeof exposed !== 'object') return out;
  for (const k of Object.keys(exposed)) {
    const m = /^([0-9]{1,5})(?:\/(tcp|udp))?$/i.exec(k);
    const port = m ? Number(m[1]) : 0;
    if (!m || port < 1 || port > 65535) continue;
    out[(m[2]?.toLowerCase() ?? 'tcp') as 'tcp' | 'udp'].push(port);
  }
  out.tcp.sort((a, b) => a - b);
  out.udp.sort((a, b) => a - b);
  return out;
}

/**
 * The ports the image at a pinned reference declares: its manifest (for a multi-platform index,
 * the linux manifest of this machine's architecture, else the first linux one), then its config
 * blob. Read at apply so a cluster-network service answers at its name on the ports its image
 * listens on (docs/networking.md). Throws like resolveDigest.
 */
export async function imagePorts(reference: string | ImageReference, access?: Omit<RegistryAccess, 'registry'>): Promise<ImagePorts> {
  const ref = typeof reference === 'string' ? parseImageReference(reference) : reference;
  const session = new RegistrySession({ ...access, registry: ref.registry }, familiarString(ref));
  const scope = `repository:${ref.repository}:pull`;
  const json = async (path: string, what: string, accept?: string): Promise<Record<string, unknown>> => {
    let answer = await session.api(path, 'GET', accept, scope);
    // A registry on object storage redirects blob reads; the storage wants no registry token.
    const location = answer.headers.location;
    if (answer.status >= 301 && answer.status <= 308 && location) answer = await session.send(new URL(location, session.base), 'GET', {});
    if (answer.status === 404) throw session.fail('image_not_found', `${what} unknown (HTTP 404)`);
    if (answer.status !== 200) throw session.fail('registry_unreachable', `unexpected answer HTTP ${answer.status} to GET ${path}`);
    try {
      return JSON.parse(answer.body.toString('utf8')) as Record<string, unknown>;
    } catch {
      throw session.fail('registry_unreachable', `the ${what} is not JSON`);
    }
  };
  try {
    let manifest = await json(`/v2/${ref.repository}/manifests/${ref.digest ?? encodeURIComponent(ref.tag ?? DEFAULT_TAG)}`, 'manifest', MANIFEST_ACCEPT);
    if (Array.isArray(manifest.manifests)) {
      type Entry = { digest?: string; platform?: { os?: string; architecture?: string } };
      const entries = (manifest.manifests as Entry[]).filter((m) => m.platform?.os === 'linux' && typeof m.digest === 'string');
      const chosen = entries.find((m) => m.platform?.architecture === (OCI_ARCH[process.arch] ?? process.arch)) ?? entries[0];
      if (!chosen) throw session.fail('image_not_found', 'the image index has no linux manifest');
      manifest = await json(`/v2/${ref.repository}/manifests/${chosen.digest!}`, 'manifest', MANIFEST_ACCEPT);
    }
    const configDigest = (manifest.config as { digest?: unknown } | undefined)?.digest;
    if (typeof configDigest !== 'string') throw session.fail('registry_unreachable', 'the manifest names no config');
    const config = await json(`/v2/${ref.repository}/blobs/${validateDigest(configDigest)}`, 'config blob');
    return exposedPortsOf((config.config as { ExposedPorts?: unknown } | undefined)?.ExposedPorts);
  } finally {
    session.close();
  }
}
