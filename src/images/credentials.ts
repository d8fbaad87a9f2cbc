// The credentials `docker login` leaves on the operator's machine, read as the Docker CLI reads
// them: $DOCKER_CONFIG/config.json (default ~/.docker/config.json) — a credential helper named for
// the registry (credHelpers) or for all of them (credsStore), asked with `docker-credential-<name>
// get`, else the `auths` entry (base64 `auth`, username/password, or an identity token).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { DOCKER_HUB } from './reference.js';
import type { RegistryCredentials } from './registry.js';

/** The key Docker files Docker Hub's credentials under (its v1 index URL). */
export const DOCKER_HUB_AUTH_KEY = 'https://index.docker.io/v1/';
const HUB_ALIASES = [DOCKER_HUB_AUTH_KEY, 'index.docker.io', 'docker.io', 'registry-1.docker.io', 'https://index.docker.io/v1', 'https://registry-1.docker.io/'];
const HELPER_TIMEOUT_MS = 20_000;

interface AuthEntry {
  auth?: string;
  username?: string;
  password?: string;
  identitytoken?: string;
}

interface DockerConfigFile {
  auths?: Record<string, AuthEntry>;
  credHelpers?: Record<string, string>;
  credsStore?: string;
}

export interface OperatorCredentialsOptions {
  /** Default: $DOCKER_CONFIG, else ~/.docker. */
  configDir?: string;
  /** The environment helpers run in (PATH finds them); default process.env. */
  env?: NodeJS.ProcessEnv;
}

/** config.json that cannot be read as Docker writes it. */
export class DockerConfigError extends Error {
  override name = 'DockerConfigError';
}

/** A credential helper that is missing or failed (other than "not found"). */
export class CredentialHelperError extends Error {
  override name = 'CredentialHelperError';
}

export function dockerConfigDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.DOCKER_CONFIG || join(env.HOME || homedir(), '.docker');
}

function readConfig(dir: string): DockerConfigFile | undefined {
  const file = join(dir, 'config.json');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new DockerConfigError(`cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not a JSON object');
    return parsed as DockerConfigFile;
  } catch (e) {
    throw new DockerConfigError(`${file} is not Docker's config file: ${(e as Error).message}`);
  }
}

/** The keys this registry's credentials may be filed under, the exact one first. */
function keysOf(registry: string): string[] {
  return registry === DOCKER_HUB ? HUB_ALIASES : [registry];
}

/** Docker's ConvertToHostname: a legacy key may be a URL. */
function hostOfKey(key: string): string {
  return key.replace(/^https?:\/\//, '').split('/')[0]!;
}

function fromEntry(entry: AuthEntry, where: string): RegistryCredentials | undefined {
  if (entry.identitytoken) return { identityToken: entry.identitytoken };
  if (entry.auth) {
    const decoded = Buffer.from(entry.auth, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new DockerConfigError(`the auth of ${where} does not decode to user:password`);
    return { username: decoded.slice(0, colon), password: decoded.slice(colon + 1) };
  }
  if (entry.username && entry.password !== undefined) return { username: entry.username, password: entry.password };
  return undefined;
}

/** `docker-credential-<helper> get`: the server on standard input, JSON out; undefined when it has none. */
export function runCredentialHelper(helper: string, server: string, env: NodeJS.ProcessEnv = process.env): Promise<RegistryCredentials | undefined> {
  const bin = `docker-credential-${helper}`;
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['get'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), HELPER_TIMEOUT_MS);
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new CredentialHelperError(e.code === 'ENOENT' ? `the credential helper ${bin} (named in Docker's config) is not on PATH` : `${bin}: ${e.message}`));
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) {
        try {
          const j = JSON.parse(out) as { Username?: string; Secret?: string };
          if (!j.Secret) return resolve(undefined);
          // Docker's convention: a Username of "<token>" means the secret is an identity token.
          return resolve(j.Username === '<token>' ? { identityToken: j.Secret } : { username: j.Username ?? '', password: j.Secret });
        } catch {
          return reject(new CredentialHelperError(`${bin} get answered something other than JSON: ${out.slice(0, 200)}`));
        }
      }
      // The helpers' shared word for "nothing stored for this server" (docker-credential-helpers).
      if (/credentials not found/i.test(out + err)) return resolve(undefined);
      reject(new CredentialHelperError(`${bin} get failed (${signal ?? `exit ${code}`}): ${(err || out).trim().slice(0, 300)}`));
    });
    child.stdin.on('error', () => undefined); // a helper that exits without reading
    child.stdin.end(server);
  });
}

/**
 * The operator's credentials for a registry (host[:port] as references name it, docker.io for
 * Hub), or undefined when `docker login` stored none. A helper configured for the registry (or
 * credsStore for all) is the only source, as for the Docker CLI.
 */
export async function operatorCredentials(registry: string, opts: OperatorCredentialsOptions = {}): Promise<RegistryCredentials | undefined> {
  const dir = opts.configDir ?? dockerConfigDir(opts.env);
  const config = readConfig(dir);
  if (!config) return undefined;
  const keys = keysOf(registry);
  const helperKey = keys.find((k) => config.credHelpers?.[k]);
  const helper = helperKey ? config.credHelpers![helperKey] : config.credsStore;
  if (helper) return runCredentialHelper(helper, registry === DOCKER_HUB ? DOCKER_HUB_AUTH_KEY : registry, opts.env ?? process.env);
  const auths = config.auths ?? {};
  for (const k of keys) if (auths[k]) return fromEntry(auths[k]!, `${k} in ${join(dir, 'config.json')}`);
  // A legacy key written as a URL ("https://reg.example.com/v2/").
  const legacy = Object.keys(auths).find((k) => keys.includes(hostOfKey(k)));
  return legacy ? fromEntry(auths[legacy]!, `${legacy} in ${join(dir, 'config.json')}`) : undefined;
}
