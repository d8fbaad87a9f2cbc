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
import { freePort } from '../../src/runtime/etcd.js';
import { startRegistry, waitForRegistry, type RegistryServer } from '../../src/runtime/registry.js';

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
   * as `user` when the registry has users; returns the manifest's digest.
   */
  pushTinyImage(repository: string, tag: string, user?: { username: string; password: string }): Promise<string>;
  stop(): Promise<void>;
}

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

  async function pushTinyImage(repository: string, tag: string, user?: { username: string; password: string }): Promise<string> {
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
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', rootfs: { type: 'layers', diff_ids: [] }, config: {} }));
    const layer = randomBytes(64);
    const manifest = JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: await upload(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: await upload(layer), size: layer.length }],
    });
    const put = await call(v2(`manifests/${tag}`), 'PUT', { ...auth, 'content-type': 'application/vnd.oci.image.manifest.v1+json' }, manifest, caPem);
    if (put.status !== 201) throw new Error(`putting the manifest of ${repository}:${tag}: HTTP ${put.status} ${put.body}`);
    const digest = sha256(manifest);
    if (put.headers['docker-content-digest'] !== digest) throw new Error(`the registry stored ${repository}:${tag} as ${String(put.headers['docker-content-digest'])}, not ${digest}`);
    return digest;
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
