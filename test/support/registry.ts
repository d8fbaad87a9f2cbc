// A throwaway distribution registry for tests: Debian's docker-registry on a free 127.0.0.1 port,
// optionally over TLS (a cluster CA made for it) and with htpasswd users, its storage in a temporary
// directory. pushTinyImage uploads a small image with plain HTTP PUTs, so tests of resolving need
// no Docker. Starting fails loudly when the registry is not installed: nothing is skipped.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureClusterCa, issueCertificate, type ClusterCa } from '../../src/pki/ca.js';
import { freePort } from '../../src/supervise/etcd.js';
import { startRegistry, waitForRegistry, type RegistryServer } from '../../src/supervise/registry.js';

const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

export interface TestRegistry {
  /** host:port, as image references name it. */
  host: string;
  url: string;
  server: RegistryServer;
  /** With tls: the CA that signed its certificate. */
  ca?: ClusterCa;
  caPem?: string;
  /**
   * Uploads a small image (one layer of random bytes) as repository:tag with the distribution API,
   * as `user` when the registry has users; returns the manifest's digest (with `image.index`: the
   * digest of an OCI index whose one linux entry, for this machine's architecture, is the manifest).
   */
  pushTinyImage(repository: string, tag: string, user?: { username: string; password: string }, image?: TinyImage): Promise<string>;
  stop(): Promise<void>;
}

/** What the tiny image declares. */
export interface TinyImage {
  /** Its config's ExposedPorts keys ("8080/tcp", "53/udp"), as a Dockerfile's EXPOSE writes them. */
  exposedPorts?: string[];
  /** Pushed as a multi-platform index around its manifest. */
  index?: boolean;
}

/** Node's process.arch → an OCI platform architecture. */
const OCI_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64' };

export interface TestRegistryOptions {
  /** Serve HTTPS with a certificate for 127.0.0.1 from a fresh cluster CA (or the one given). */
  tls?: boolean | ClusterCa;
  users?: Record<string, string>;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function call(url: URL, method: string, headers: Record<string, string>, body: Buffer | string | undefined, caPem: string | undefined): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = (url.protocol === 'https:' ? https : http).request(url, { method, headers, agent: false, ...(caPem ? { ca: caPem } : {}) }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

const sha256 = (b: Buffer | string) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export async function startTestRegistry(opts: TestRegistryOptions = {}): Promise<TestRegistry> {
  const dir = mkdtempSync(join(base, 'jaco-registry-'));
  let ca: ClusterCa | undefined;
  let tls: { certFile: string; keyFile: string } | undefined;
  if (opts.tls) {
    ca = opts.tls === true ? ensureClusterCa(join(dir, 'ca')) : opts.tls;
    const cert = issueCertificate(ca, { commonName: 'registry', ips: ['127.0.0.1'], dnsNames: ['localhost'], usage: 'server', days: 2 }, { dir: join(dir, 'tls') });
    tls = { certFile: cert.certFile, keyFile: cert.keyFile };
  }
  const server = startRegistry({ dir: join(dir, 'registry'), port: await freePort(), ...(tls ? { tls } : {}), ...(opts.users ? { users: opts.users } : {}) });
  try {
    await waitForRegistry(server);
  } catch (e) {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const caPem = ca?.certPem;

  async function pushTinyImage(repository: string, tag: string, user?: { username: string; password: string }, image: TinyImage = {}): Promise<string> {
    const auth: Record<string, string> = user ? { authorization: `Basic ${Buffer.from(`${user.username}:${user.password}`).toString('base64')}` } : {};
    const v2 = (path: string) => new URL(`/v2/${repository}/${path}`, server.url);
    const upload = async (blob: Buffer): Promise<string> => {
      const digest = sha256(blob);
      const started = await call(v2('blobs/uploads/'), 'POST', { ...auth, 'content-length': '0' }, undefined, caPem);
      if (started.status !== 202) throw new Error(`starting an upload to ${repository}: HTTP ${started.status} ${started.body}`);
      const location = new URL(String(started.headers.location), server.url);
      location.searchParams.set('digest', digest);
      const put = await call(location, 'PUT', { ...auth, 'content-type': 'application/octet-stream', 'content-length': String(blob.length) }, blob, caPem);
      if (put.status !== 201) throw new Error(`uploading ${digest} to ${repository}: HTTP ${put.status} ${put.body}`);
      return digest;
    };
    const arch = OCI_ARCH[process.arch] ?? process.arch;
    const exposed = Object.fromEntries((image.exposedPorts ?? []).map((p) => [p, {}]));
    const config = Buffer.from(JSON.stringify({ architecture: arch, os: 'linux', rootfs: { type: 'layers', diff_ids: [] }, config: image.exposedPorts ? { ExposedPorts: exposed } : {} }));
    const layer = randomBytes(64);
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: await upload(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: await upload(layer), size: layer.length }],
    });
    const putManifest = async (ref: string, body: string, type: string): Promise<string> => {
      const put = await call(v2(`manifests/${ref}`), 'PUT', { ...auth, 'content-type': type }, body, caPem);
      if (put.status !== 201) throw new Error(`putting the manifest of ${repository}:${ref}: HTTP ${put.status} ${put.body}`);
      const digest = sha256(body);
      if (put.headers['docker-content-digest'] !== digest) throw new Error(`the registry stored ${repository}:${ref} as ${String(put.headers['docker-content-digest'])}, not ${digest}`);
      return digest;
    };
    const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
    if (!image.index) return putManifest(tag, manifest, MANIFEST);
    const inner = await putManifest(sha256(manifest), manifest, MANIFEST);
    const INDEX = 'application/vnd.oci.image.index.v1+json';
    const index = JSON.stringify({ schemaVersion: 2, mediaType: INDEX, manifests: [{ mediaType: MANIFEST, digest: inner, size: manifest.length, platform: { os: 'linux', architecture: arch } }] });
    return putManifest(tag, index, INDEX);
  }

  return {
    host: server.host,
    url: server.url,
    server,
    ...(ca ? { ca, caPem } : {}),
    pushTinyImage,
    async stop() {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
