// deploy/README.md step 1 as an operator does it, for the tests that follow deploy/ (the units test
// on one host, the walk on three): the cluster CA, each etcd member's certificate and environment
// file from etcd/member.env.example, each host's etcd client certificate, then `jaco etcd rbac
// --enable-auth` and its env files copied where the units read them. Every file is made by the
// command the README names; the test only plays the copying (placeFile).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { hostPath, placeFile, readEnvFile, type Host } from './units.js';

/** The operator's `jaco ARGS` with this environment on top of its own; its stdout, throwing on a failure. */
export type OperatorJaco = (args: string[], env: Record<string, string>) => Promise<string>;

export interface EtcdMemberHost {
  host: Host;
  /** ETCD_NAME */
  member: string;
  /** The host's address, which its clients and peers dial. */
  address: string;
}

/** Where each host keeps its etcd client certificate (the README's, and what the env files name). */
export const CLIENT_TLS_DIR = '/etc/jaco/etcd-client';

const example = () => readFileSync(join(PACKAGE_ROOT, 'deploy', 'etcd', 'member.env.example'), 'utf8');

/** A member's /etc/jaco/etcd.env: member.env.example with its name, its address and the whole cluster. */
export function memberEnv(m: EtcdMemberHost, members: readonly EtcdMemberHost[]): string {
  const cluster = members.map((o) => `${o.member}=https://${o.address}:2380`).join(',');
  return example()
    .replaceAll('10.0.0.11', m.address)
    .replace(/^ETCD_NAME=.*$/m, `ETCD_NAME=${m.member}`)
    .replace(/^ETCD_INITIAL_CLUSTER=.*$/m, `ETCD_INITIAL_CLUSTER=${cluster}`);
}

/**
 * The certificates and the members' env files: the CA in `caDir`, a member certificate per member
 * host (for its address and loopback, where member.env.example listens too), an etcd client
 * certificate per host and one for the operator in `operatorTlsDir`. Returns the operator's
 * connection environment (TLS; no user yet).
 */
export async function etcdTlsFiles(jaco: OperatorJaco, caDir: string, members: readonly EtcdMemberHost[], hosts: readonly Host[], operatorTlsDir: string): Promise<Record<string, string>> {
  await jaco(['cert', 'ca', '--ca-dir', caDir], {});
  for (const m of members) placeFile(m.host, '/etc/jaco/etcd.env', memberEnv(m, members));
  // Each certificate on its own: the operator's machine issues them in any order.
  await Promise.all([
    ...members.map((m) => jaco(['cert', 'etcd', m.member, '--ip', `${m.address},127.0.0.1`, '--ca-dir', caDir, '--out', hostPath(m.host, '/etc/jaco/etcd-tls')], {})),
    ...hosts.map((h) => jaco(['cert', 'etcd-client', h.hostname, '--ca-dir', caDir, '--out', hostPath(h, CLIENT_TLS_DIR)], {})),
    jaco(['cert', 'etcd-client', 'operator', '--ca-dir', caDir, '--out', operatorTlsDir], {}),
  ]);
  return { JACO_ETCD_CACERT: join(operatorTlsDir, 'ca.pem'), JACO_ETCD_CERT: join(operatorTlsDir, 'cert.pem'), JACO_ETCD_KEY: join(operatorTlsDir, 'cert.key') };
}

/** An env file of `jaco etcd rbac`, copied to a host under the name its unit reads. */
export interface EnvFileCopy {
  file: string;
  host: Host;
  path: string;
}

/**
 * `jaco etcd rbac --out OUT --enable-auth --client-tls-dir … NODE...` as the operator, then each
 * env file copied (mode 600) where `copies` say. Returns the operator's environment as root.
 */
export async function etcdUsers(jaco: OperatorJaco, operatorEnv: Record<string, string>, out: string, nodes: readonly string[], copies: readonly EnvFileCopy[]): Promise<Record<string, string>> {
  await jaco(['etcd', 'rbac', '--out', out, '--enable-auth', '--client-tls-dir', CLIENT_TLS_DIR, ...nodes], operatorEnv);
  for (const c of copies) placeFile(c.host, c.path, readFileSync(join(out, c.file), 'utf8'), 0o600);
  const root = readEnvFile(join(out, 'root.env'));
  return { ...operatorEnv, JACO_ETCD_USER: root.JACO_ETCD_USER!, JACO_ETCD_PASSWORD: root.JACO_ETCD_PASSWORD! };
}

/** The store options of a jaco process's environment (user, password, TLS files). */
export const storeAuth = (env: Record<string, string | undefined>) => ({
  user: env.JACO_ETCD_USER,
  password: env.JACO_ETCD_PASSWORD,
  caFile: env.JACO_ETCD_CACERT,
  certFile: env.JACO_ETCD_CERT,
  keyFile: env.JACO_ETCD_KEY,
});
