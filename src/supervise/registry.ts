// The cluster's image registry as a real component: Debian's docker-registry (the CNCF
// distribution registry 2.8) started as a child process with a config of its own — storage under
// its directory, its listen address, optional TLS and htpasswd users — the way etcd.ts starts etcd.
import { spawn, type ChildProcess } from 'node:child_process';
import { binaryAnswers, stopProcess } from '../child.js';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import bcrypt from 'bcryptjs';
import { stringify } from 'yaml';
import { joinHostPort } from '../api/network.js';

export interface RegistryServerSpec {
  /** Holds everything of this registry: data/ (the images), config.yml, htpasswd, http-secret. */
  dir: string;
  /** The address to listen on (default 127.0.0.1): loopback, or an address inside a namespace jaco made. */
  address?: string;
  port: number;
  /** Serve HTTPS with this certificate (e.g. issued by the cluster CA, src/pki/ca.ts). */
  tls?: { certFile: string; keyFile: string };
  /** Require these users (htpasswd, bcrypt-hashed into <dir>/htpasswd): user → password. */
  users?: Record<string, string>;
  /** Append the registry's own log here (default: kept in memory for the error of a failed start). */
  logFile?: string;
}

export interface RegistryServer {
  spec: RegistryServerSpec;
  /** host:port as image references name it: 127.0.0.1:5000, [::1]:5000. */
  host: string;
  /** http(s)://host/ */
  url: string;
  process: ChildProcess;
  /** The registry's latest log lines of this run. */
  log(): string;
  /** Whether this process has said it listens (a probe alone could reach another one on the port). */
  listening(): boolean;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export class RegistryNotInstalledError extends Error {
  override name = 'RegistryNotInstalledError';
  constructor() {
    super("the image registry is not installed (no /usr/bin/docker-registry). Install Debian's package with `apt-get install -y docker-registry` or run scripts/ensure-system.sh, which does.");
  }
}

export function registryBinary(): string {
  const bin = process.env.JACO_REGISTRY_BIN ?? 'docker-registry';
  if (!binaryAnswers(bin)) throw new RegistryNotInstalledError();
  return bin;
}

/**
 * bcrypt's cost for htpasswd lines: `htpasswd -B`'s default. The registry checks the hash on every
 * request (each layer of each pull), and at cost 10 that is ~60 ms of CPU a request here; the
 * cluster's passwords are long random strings, for which a higher cost adds nothing.
 */
export const HTPASSWD_BCRYPT_COST = 5;

/** One htpasswd line; distribution accepts bcrypt hashes only. */
export function htpasswdLine(user: string, password: string, cost = HTPASSWD_BCRYPT_COST): string {
  if (!user || /[:\s]/.test(user)) throw new Error(`registry user ${JSON.stringify(user)}: a name without ":" or spaces`);
  return `${user}:${bcrypt.hashSync(password, cost)}`;
}

/** host:port of an address, with IPv6 in brackets as references write it. */
export function registryHost(address: string, port: number): string {
  return joinHostPort(address, port);
}

export interface RegistryFiles {
  dataDir: string;
  htpasswd?: string;
  secret: string;
}

/** The registry's config.yml for a spec (distribution 2.8's configuration reference). */
export function registryConfig(spec: RegistryServerSpec, files: RegistryFiles): string {
  const config = {
    version: 0.1,
    // info: the "listening on" line is how a start is told apart from another server on the port.
    log: { level: 'info', formatter: 'text', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: files.dataDir }, cache: { blobdescriptor: 'inmemory' } },
    http: {
      addr: registryHost(spec.address ?? '127.0.0.1', spec.port),
      // Signs upload state: kept across restarts so an upload in flight survives one.
      secret: files.secret,
      headers: { 'X-Content-Type-Options': ['nosniff'] },
      ...(spec.tls ? { tls: { certificate: spec.tls.certFile, key: spec.tls.keyFile, minimumtls: 'tls1.2' } } : {}),
    },
    ...(files.htpasswd ? { auth: { htpasswd: { realm: 'jaco', path: files.htpasswd } } } : {}),
    health: { storagedriver: { enabled: true, interval: '10s', threshold: 3 } },
  };
  return stringify(config, { lineWidth: 0 });
}

/** Writes the config (and htpasswd) under spec.dir; returns the config file's path. */
export function writeRegistryConfig(spec: RegistryServerSpec): string {
  mkdirSync(spec.dir, { recursive: true, mode: 0o700 });
  const dataDir = join(spec.dir, 'data');
  mkdirSync(dataDir, { recursive: true });
  const secretFile = join(spec.dir, 'http-secret');
  if (!existsSync(secretFile)) writeFileSync(secretFile, randomBytes(24).toString('hex'), { mode: 0o600 });
  let htpasswd: string | undefined;
  if (spec.users && Object.keys(spec.users).length) {
    htpasswd = join(spec.dir, 'htpasswd');
    writeFileSync(htpasswd, Object.entries(spec.users).map(([u, p]) => htpasswdLine(u, p)).join('\n') + '\n', { mode: 0o600 });
  }
  const file = join(spec.dir, 'config.yml');
  writeFileSync(file, registryConfig(spec, { dataDir, secret: readFileSync(secretFile, 'utf8').trim(), ...(htpasswd ? { htpasswd } : {}) }), { mode: 0o600 });
  return file;
}

/** The environment without REGISTRY_* variables: they would override the config file. */
function childEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('REGISTRY_')));
}

/** Starts the registry; does not wait for it to answer (see waitForRegistry). */
export function startRegistry(spec: RegistryServerSpec, opts: { detached?: boolean } = {}): RegistryServer {
  const bin = registryBinary();
  const config = writeRegistryConfig(spec);
  const out = spec.logFile ? createWriteStream(spec.logFile, { flags: 'a' }) : undefined;
  const child = spawn(bin, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'], env: childEnv(), detached: opts.detached });
  let kept = '';
  let listening = false;
  const keep = (d: Buffer) => {
    kept = (kept + d.toString()).slice(-16_384);
    listening ||= /msg="listening on /.test(kept);
  };
  for (const s of [child.stdout, child.stderr]) {
    if (out) s?.pipe(out);
    s?.on('data', keep);
  }
  const host = registryHost(spec.address ?? '127.0.0.1', spec.port);
  return {
    spec,
    host,
    url: `${spec.tls ? 'https' : 'http'}://${host}/`,
    process: child,
    log: () => kept,
    listening: () => listening,
    stop: (signal: NodeJS.Signals = 'SIGTERM') => stopProcess(child, { signal }),
  };
}

/** One GET /v2/: the status, or the network error. */
function probe(url: URL): Promise<number> {
  return new Promise((resolve, reject) => {
    // A liveness check of a process we started: whether its certificate is trusted is the
    // clients' question (resolveDigest), not this one's.
    const req = (url.protocol === 'https:' ? https : http).get(url, { timeout: 1000, agent: false, ...(url.protocol === 'https:' ? { rejectUnauthorized: false } : {}) }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy(new Error('no answer within 1 s')));
    req.on('error', reject);
  });
}

/** Waits until the registry answers /v2/ (200, or 401 when it wants users), or fails with its log. */
export async function waitForRegistry(server: RegistryServer, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const url = new URL('/v2/', server.url);
  const child = server.process;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the registry exited (code ${child.exitCode ?? child.signalCode}) before answering: ${server.log().trim().split('\n').slice(-5).join(' | ')}`);
    try {
      if (!server.listening()) throw new Error('it has not said it listens yet');
      const status = await probe(url);
      if (status === 200 || status === 401) return;
      throw new Error(`GET /v2/ answered HTTP ${status}`);
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`the registry at ${server.url} did not answer within ${timeoutMs} ms: ${(e as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
