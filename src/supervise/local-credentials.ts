// Where `jaco up` keeps what its processes present to its etcd (TLS and authentication on, as in
// production): the etcd server's and the local client certificate under .jaco/pki (from the cluster
// CA), and one env file per etcd user under .jaco/credentials (src/store/rbac.ts: each controller,
// agent and ingress its own). The operator's CLI finds them here without flags, as it finds its
// logs and exec certificate under .jaco/pki/operator.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StoreOptions } from '../store/store.js';

export const credentialsDir = (dataDir: string) => join(dataDir, 'credentials');
export const etcdTlsFiles = (dataDir: string) => {
  const pki = join(dataDir, 'pki');
  return {
    ca: join(pki, 'ca.pem'),
    serverCert: join(pki, 'etcd-server.pem'),
    serverKey: join(pki, 'etcd-server.key'),
    clientCert: join(pki, 'etcd-client.pem'),
    clientKey: join(pki, 'etcd-client.key'),
  };
};

/** An env file's variables (KEY=VALUE lines), or undefined when it does not exist. */
export function readEnvFile(file: string): Record<string, string> | undefined {
  if (!existsSync(file)) return undefined;
  return Object.fromEntries(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.includes('='))
      .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
  );
}

/** Whether the data directory's etcd is served over TLS (made by `jaco up` since TLS and auth). */
export const localEtcdSecured = (dataDir: string) => existsSync(etcdTlsFiles(dataDir).clientCert);

/** The environment of a process of the local cluster: TLS files, and the user of `envFile` (root.env, agent-node-1.env…; false: none). */
export function localProcessEnv(dataDir: string, envFile: string | false): Record<string, string> {
  if (!localEtcdSecured(dataDir)) return {};
  const f = etcdTlsFiles(dataDir);
  const user = envFile ? readEnvFile(join(credentialsDir(dataDir), envFile)) : undefined;
  return { JACO_ETCD_CACERT: f.ca, JACO_ETCD_CERT: f.clientCert, JACO_ETCD_KEY: f.clientKey, ...(user ?? {}) };
}

/** Store options of a process of the local cluster under the user of `envFile` (default root; false: TLS only). */
export function localStoreOptions(dataDir: string, envFile: string | false = 'root.env'): Pick<StoreOptions, 'caFile' | 'certFile' | 'keyFile' | 'user' | 'password'> {
  const env = localProcessEnv(dataDir, envFile);
  return {
    ...(env.JACO_ETCD_CACERT ? { caFile: env.JACO_ETCD_CACERT, certFile: env.JACO_ETCD_CERT, keyFile: env.JACO_ETCD_KEY } : {}),
    ...(env.JACO_ETCD_USER ? { user: env.JACO_ETCD_USER, password: env.JACO_ETCD_PASSWORD } : {}),
  };
}

/** What the flags and the environment said of the connection, so the local cluster fills only the rest. */
export interface ConnectionGiven {
  endpoints: boolean;
  tls: boolean;
  user: boolean;
}

/**
 * The operator's CLI beside a running `jaco up` cluster (cwd/.jaco/up.json): its endpoint when none
 * is given, and — when talking to that endpoint — its TLS files and root user when none are given.
 * `make up` then `jaco get nodes` just works; another endpoint is left alone.
 */
export function localClusterDefaults(cwd: string, given: ConnectionGiven, endpoints: string[]): Partial<StoreOptions> & { endpoints?: string[] } {
  const dataDir = join(cwd, '.jaco');
  let endpoint: string | undefined;
  try {
    endpoint = (JSON.parse(readFileSync(join(dataDir, 'up.json'), 'utf8')) as { endpoint?: string }).endpoint;
  } catch {
    return {};
  }
  if (!endpoint) return {};
  const resolved = given.endpoints ? endpoints : [endpoint];
  if (resolved.length !== 1 || resolved[0] !== endpoint) return {};
  const local = localStoreOptions(dataDir);
  return {
    ...(given.endpoints ? {} : { endpoints: [endpoint] }),
    ...(given.tls ? {} : { caFile: local.caFile, certFile: local.certFile, keyFile: local.keyFile }),
    ...(given.user || !local.user ? {} : { user: local.user, password: local.password }),
  };
}
