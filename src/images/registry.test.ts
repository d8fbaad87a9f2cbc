// The registry client's tables (challenges, an engine's pull errors) and the Bearer-token exchange
// of Docker Hub and GHCR, played by a small server on 127.0.0.1 (the real distribution registry,
// Basic auth and TLS are test/integration/registry.test.ts).
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { classifyPullError, exposedPortsOf, ImageNotFoundError, ImageUnauthorizedError, parseChallenge, RegistryUnreachableError, resolveDigest, type ImageAccessError } from './registry.js';

describe('parseChallenge', () => {
  it.each([
    ['Basic realm="jaco"', { scheme: 'basic', params: { realm: 'jaco' } }],
    [
      'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull"',
      { scheme: 'bearer', params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io', scope: 'repository:library/busybox:pull' } },
    ],
    ['Bearer realm="https://ghcr.io/token", service="ghcr.io",scope="repository:o/a:pull"', { scheme: 'bearer', params: { realm: 'https://ghcr.io/token', service: 'ghcr.io', scope: 'repository:o/a:pull' } }],
    // Quoted commas and escapes, and a bare token value.
    ['Bearer realm="https://x/t?a=1,b=2",error=invalid_token,error_description="say \\"hi\\""', { scheme: 'bearer', params: { realm: 'https://x/t?a=1,b=2', error: 'invalid_token', error_description: 'say "hi"' } }],
    ['Basic', { scheme: 'basic', params: {} }],
  ])('%s', (header, want) => expect(parseChallenge(header)).toEqual(want));

  it('gives nothing for an empty header', () => expect(parseChallenge('')).toBeUndefined());
});

describe('classifyPullError: the text of a failed pull from a Docker engine', () => {
  // Provoked from dockerd 20.10 on this machine (test/e2e/images.test.ts provokes them again)…
  const provoked: [string, string][] = [
    ['Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused', 'registry_unreachable'],
    ['manifest for 127.0.0.1:15111/bb:nope not found: manifest unknown: manifest unknown', 'image_not_found'],
    ['Head "http://127.0.0.1:15112/v2/bb/manifests/1": no basic auth credentials', 'image_unauthorized'],
    ['unauthorized: authentication required', 'image_unauthorized'],
    ['(HTTP code 404) unexpected - manifest for 127.0.0.1:15111/nothing:1 not found: manifest unknown: manifest unknown ', 'image_not_found'],
  ];
  // …and as engines print them for what a test here must not provoke (public names, other hosts).
  const documented: [string, string][] = [
    ["pull access denied for nothing, repository does not exist or may require 'docker login': denied: requested access to the resource is denied", 'image_unauthorized'],
    ['Head "https://ghcr.io/v2/o/a/manifests/1": denied', 'image_unauthorized'],
    ['Get "https://registry-1.docker.io/v2/": unauthorized: incorrect username or password', 'image_unauthorized'],
    ['Get "https://registry.example.com/v2/": dial tcp: lookup registry.example.com on 127.0.0.53:53: no such host', 'registry_unreachable'],
    ['Get "https://10.1.2.3:5000/v2/": dial tcp 10.1.2.3:5000: i/o timeout', 'registry_unreachable'],
    ['Get "https://reg.local:5000/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)', 'registry_unreachable'],
    ['Get "https://reg.local:5000/v2/": x509: certificate signed by unknown authority', 'registry_unreachable'],
    ['Get "https://reg.local:5000/v2/": x509: certificate is valid for other.local, not reg.local', 'registry_unreachable'],
    ['Get "https://reg.local:5000/v2/": http: server gave HTTP response to HTTPS client', 'registry_unreachable'],
    ['toomanyrequests: You have reached your pull rate limit. You may increase the limit by authenticating and upgrading', 'registry_unreachable'],
    ['received unexpected HTTP status: 503 Service Unavailable', 'registry_unreachable'],
    ['manifest unknown: Requested image not found', 'image_not_found'],
    ['Error response from daemon: repository reg.local/app not found: name unknown: repository name not known to registry', 'image_not_found'],
  ];
  it.each([...provoked, ...documented])('%s → %s', (message, code) => expect(classifyPullError(message)).toBe(code));

  it('leaves what it does not recognise to the caller', () => {
    expect(classifyPullError('write /var/lib/docker/tmp/x: no space left on device')).toBeUndefined();
    expect(classifyPullError('')).toBeUndefined();
  });
});

// ---------------------------------------------------------------- a registry handing out Bearer tokens

interface FakeRegistry {
  url: string;
  host: string;
  requests: { method: string; path: string; auth?: string; body: string }[];
  close(): Promise<void>;
}

const MANIFEST = JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json', config: {}, layers: [] });
const MANIFEST_DIGEST = `sha256:${createHash('sha256').update(MANIFEST).digest('hex')}`;
const HEADER_DIGEST = `sha256:${'a'.repeat(64)}`;

/**
 * A registry of one image (app:1) behind Docker's token protocol: the realm hands "T-<user>" for
 * u:pw, "T-anon" to anyone when `anonymous`, "T-refresh" for the refresh token "RT".
 */
async function fakeRegistry(opts: { anonymous?: boolean; digestHeader?: boolean; headAllowed?: boolean; status?: number; hang?: boolean } = {}): Promise<FakeRegistry> {
  const requests: FakeRegistry['requests'] = [];
  let base = '';
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const url = new URL(req.url!, base);
      requests.push({ method: req.method!, path: `${url.pathname}${url.search}`, ...(req.headers.authorization ? { auth: req.headers.authorization } : {}), body });
      if (opts.hang) return; // never answers
      if (url.pathname === '/token') {
        const basic = req.headers.authorization?.startsWith('Basic ') ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString() : undefined;
        const form = new URLSearchParams(body);
        let token: string | undefined;
        if (req.method === 'POST' && form.get('grant_type') === 'refresh_token' && form.get('refresh_token') === 'RT') token = 'T-refresh';
        else if (basic === 'u:pw') token = 'T-u';
        else if (!basic && opts.anonymous) token = 'T-anon';
        if (!token) return void res.writeHead(401, { 'content-type': 'application/json' }).end('{"details":"incorrect username or password"}');
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(req.method === 'POST' ? { access_token: token } : { token }));
      }
      if (!req.headers.authorization?.startsWith('Bearer T-')) {
        return void res
          .writeHead(401, { 'www-authenticate': `Bearer realm="${base}token",service="fake",scope="repository:app:pull"`, 'content-type': 'application/json' })
          .end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      }
      if (opts.status) return void res.writeHead(opts.status).end('{"errors":[{"code":"UNAVAILABLE","message":"backend down"}]}');
      if (req.method === 'HEAD' && opts.headAllowed === false) return void res.writeHead(405).end();
      if (url.pathname !== '/v2/app/manifests/1') return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
      res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json', 'content-length': Buffer.byteLength(MANIFEST), ...(opts.digestHeader === false ? {} : { 'docker-content-digest': HEADER_DIGEST }) });
      res.end(req.method === 'HEAD' ? undefined : MANIFEST);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  base = `http://127.0.0.1:${port}/`;
  return {
    url: base,
    host: `127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

describe('resolveDigest through a Bearer token realm', () => {
  let reg: FakeRegistry | undefined;
  afterEach(async () => {
    await reg?.close();
    reg = undefined;
  });
  const failure = async (p: Promise<unknown>): Promise<ImageAccessError> => {
    const e = await p.then(
      () => undefined,
      (x: unknown) => x,
    );
    expect(e, 'expected a failure').toBeDefined();
    return e as ImageAccessError;
  };

  it('takes an anonymous token when the realm gives one, asking for the repository pull scope', async () => {
    reg = await fakeRegistry({ anonymous: true });
    expect(await resolveDigest(`${reg.host}/app:1`, { insecure: true })).toBe(HEADER_DIGEST);
    const token = reg.requests.find((r) => r.path.startsWith('/token'))!;
    expect(token.path).toBe('/token?service=fake&scope=repository%3Aapp%3Apull');
    expect(token.auth).toBeUndefined();
    expect(reg.requests.map((r) => `${r.method} ${r.path.split('?')[0]} ${r.auth ?? '-'}`)).toEqual(['HEAD /v2/app/manifests/1 -', 'GET /token -', 'HEAD /v2/app/manifests/1 Bearer T-anon']);
  });

  it('logs in to the realm with a user and password; a wrong one is image_unauthorized', async () => {
    reg = await fakeRegistry();
    expect(await resolveDigest(`${reg.host}/app:1`, { insecure: true, credentials: { username: 'u', password: 'pw' } })).toBe(HEADER_DIGEST);
    expect(reg.requests.find((r) => r.path.startsWith('/token'))!.auth).toBe(`Basic ${Buffer.from('u:pw').toString('base64')}`);
    const e = await failure(resolveDigest(`${reg.host}/app:1`, { insecure: true, credentials: { username: 'u', password: 'nope' } }));
    expect(e).toBeInstanceOf(ImageUnauthorizedError);
    expect(e.code).toBe('image_unauthorized');
    expect(e.message).toBe(`registry ${reg.host} refused access to image ${reg.host}/app:1: the token service ${reg.host} refused the credentials (HTTP 401)`);
    const anon = await failure(resolveDigest(`${reg.host}/app:1`, { insecure: true }));
    expect(anon.message).toContain('refused an anonymous token');
  });

  it('trades an identity token (docker login to an OAuth2 registry) as a refresh token', async () => {
    reg = await fakeRegistry();
    expect(await resolveDigest(`${reg.host}/app:1`, { insecure: true, credentials: { identityToken: 'RT' } })).toBe(HEADER_DIGEST);
    const token = reg.requests.find((r) => r.path.startsWith('/token'))!;
    expect(token.method).toBe('POST');
    expect(Object.fromEntries(new URLSearchParams(token.body))).toEqual({ grant_type: 'refresh_token', refresh_token: 'RT', client_id: 'jaco', service: 'fake', scope: 'repository:app:pull' });
  });

  it('computes the sha256 of the manifest when no Docker-Content-Digest comes, and GETs when HEAD is refused', async () => {
    reg = await fakeRegistry({ anonymous: true, digestHeader: false });
    expect(await resolveDigest(`${reg.host}/app:1`, { insecure: true })).toBe(MANIFEST_DIGEST);
    await reg.close();
    reg = await fakeRegistry({ anonymous: true, headAllowed: false });
    expect(await resolveDigest(`${reg.host}/app:1`, { insecure: true })).toBe(HEADER_DIGEST);
    expect(reg.requests.map((r) => r.method)).toEqual(['HEAD', 'GET', 'HEAD', 'GET']);
  });

  it('names a missing tag image_not_found and a server error registry_unreachable', async () => {
    reg = await fakeRegistry({ anonymous: true, headAllowed: false });
    const missing = await failure(resolveDigest(`${reg.host}/app:2`, { insecure: true }));
    expect(missing).toBeInstanceOf(ImageNotFoundError);
    expect(missing.message).toBe(`image ${reg.host}/app:2 not found in registry ${reg.host}: manifest unknown (HTTP 404)`);
    await reg.close();
    reg = await fakeRegistry({ anonymous: true, status: 503 });
    const down = await failure(resolveDigest(`${reg.host}/app:1`, { insecure: true }));
    expect(down).toBeInstanceOf(RegistryUnreachableError);
    // A HEAD answer has no body to quote.
    expect(down.detail).toBe('server error (HTTP 503)');
  });

  it('gives up at the timeout, naming it', async () => {
    reg = await fakeRegistry({ hang: true });
    const t0 = Date.now();
    const e = await failure(resolveDigest(`${reg.host}/app:1`, { insecure: true, timeoutMs: 300 }));
    expect(Date.now() - t0).toBeLessThan(3000);
    expect(e).toBeInstanceOf(RegistryUnreachableError);
    expect(e.detail).toBe(`timed out after 300 ms (http://${reg.host})`);
  });

  it('answers a reference that carries a digest without asking, and sends credentials only to their registry', async () => {
    const pinned = `sha256:${'b'.repeat(64)}`;
    expect(await resolveDigest(`127.0.0.1:1/app:1@${pinned}`)).toBe(pinned);
    await expect(resolveDigest('127.0.0.1:1/app:1', { registry: '127.0.0.1:2', credentials: { username: 'u', password: 'pw' } })).rejects.toThrow('the access given is for registry 127.0.0.1:2, and image 127.0.0.1:1/app:1 is in 127.0.0.1:1');
  });
});

describe('exposedPortsOf: an image config\'s ExposedPorts', () => {
  it.each([
    ['tcp and udp, sorted; no protocol is tcp', { '8080/tcp': {}, '53/udp': {}, '80': {}, '443/TCP': {} }, { tcp: [80, 443, 8080], udp: [53] }],
    ['nothing declared', undefined, { tcp: [], udp: [] }],
    ['not an object', 'EXPOSE 80', { tcp: [], udp: [] }],
    ['what is no port is left out (a range, 0, too high, sctp)', { '8000-8010/tcp': {}, '0/tcp': {}, '70000/tcp': {}, '9/sctp': {}, '22/tcp': {} }, { tcp: [22], udp: [] }],
  ])('%s', (_what, exposed, want) => expect(exposedPortsOf(exposed)).toEqual(want));
});
