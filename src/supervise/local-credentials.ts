// Where `jaco up` keeps what its processes present to its etcd (TLS and authentication on, as in
// production): the etcd server's and the local client certificate under .jaco/pki (from the cluster
// CA), and one env file per etcd user under .jaco/credentials (src/store/rbac.ts: each controller,
// agent and ingress its own). The operator's CLI finds them here without flags, as it finds its
// logs and exec certificate under .jaco/pki/operator.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureClusterCa, ensureSigningKey, issueCertificate } from '../pki/ca.js';
import { provisionRbac, provisionRoles, type RoleDef } from '../store/rbac.js';
import { Store, type StoreOptions } from '../store/store.js';

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

/**
 * etcd's flags for a store with authentication under the data directory. bcrypt's lowest cost:
 * every password here is 192 random bits (nothing to stretch), and each user made and each
 * process's login hashes once — with the default cost (10) and users made one by one, TLS and
 * authentication first added ~4 s to `jaco up` on two cores; now ~0.5 s (docs/local-cluster.md).
 * Tokens are JWTs signed with a key under pki/, not etcd's simple tokens: a simple token names the
 * raft index it was issued at, and a member restored from a snapshot (its index behind that) holds
 * every request bearing one for its whole request timeout (15 s) before refusing it, longer than
 * a client's call deadline, so a client never learns to log in again (seen in the chaos suite's
 * restore). A JWT is checked by its signature on any member, restored, restarted or not. Clients
 * log in once per token lifetime (24 h; a lapsed token is refused at once and they log in again).
 */
export function etcdAuthArgs(dataDir: string): string[] {
  const k = ensureSigningKey(join(dataDir, 'pki'), 'etcd-token');
  return ['--bcrypt-cost', '4', '--auth-token', `jwt,pub-key=${k.publicFile},priv-key=${k.keyFile},sign-method=ES256,ttl=24h`];
}

/**
 * etcd's server certificate from the data directory's cluster CA, for every address its clients
 * dial (loopback, and `ips`), made anew each call (an address can change); and the client
 * certificate every process of this machine presents (etcd requires one: --client-cert-auth), kept.
 */
export function issueEtcdCertificates(dataDir: string, ips: readonly string[] = []): { cert: string; key: string; ca: string } {
  const pki = join(dataDir, 'pki');
  const ca = ensureClusterCa(pki);
  const f = etcdTlsFiles(dataDir);
  // Server and client usage: etcd's own gateway dials it with this certificate.
  issueCertificate(ca, { commonName: 'jaco etcd', ips: ['127.0.0.1', ...ips], usage: 'peer' }, { dir: pki, name: 'etcd-server' });
  // Its name is no etcd user: a process is who its password says (etcd takes a client
  // certificate's name as the user only when no password is given).
  if (!existsSync(f.clientCert)) issueCertificate(ca, { commonName: 'jaco-local-client', usage: 'client' }, { dir: pki, name: 'etcd-client' });
  return { cert: f.serverCert, key: f.serverKey, ca: f.ca };
}

/**
 * One etcd user per process (src/store/rbac.ts), its password under the data directory's
 * credentials, and authentication on. Safe to run at every start: a store of a version before
 * authentication (no users) gets its users and auth turned on; a later run finds them and keeps
 * their passwords (a user whose env file is gone gets a new one). `passwords`: of users made now.
 */
export async function provisionLocalUsers(endpoints: string[], dataDir: string, nodes: readonly string[], passwords?: Readonly<Record<string, string>>): Promise<void> {
  const dir = credentialsDir(dataDir);
  const hasRoot = !!readEnvFile(join(dir, 'root.env'));
  const store = new Store({ endpoints, ...localStoreOptions(dataDir, hasRoot ? 'root.env' : false) });
  try {
    await provisionRbac(store, nodes, { outDir: dir, enableAuth: true, resetMissing: true, ...(passwords ? { passwords } : {}) });
  } catch (e) {
    if (!hasRoot && /user name is empty|authentication|permission denied/i.test((e as Error).message))
      throw new Error(`etcd under ${dataDir} has authentication on but ${join(dir, 'root.env')} is missing: put back its root user's credentials (JACO_ETCD_USER=root, JACO_ETCD_PASSWORD=…) or start afresh with \`jaco down --purge\``);
    throw e;
  } finally {
    store.close();
  }
}

/** Users for processes joining later (a node added to a running cluster): their roles, and env files for those not made yet. */
export async function provisionLocalRoles(endpoints: string[], dataDir: string, roles: readonly RoleDef[]): Promise<void> {
  const store = new Store({ endpoints, ...localStoreOptions(dataDir) });
  try {
    await provisionRoles(store, roles, { outDir: credentialsDir(dataDir), resetMissing: true });
  } finally {
    store.close();
  }
}

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
