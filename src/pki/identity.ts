// Who is who on the agents' logs and exec endpoint (docs/operate.md, "Trust"): every certificate
// is issued by the cluster CA, and its common name says what it is — `node:<name>` for an agent's
// server certificate (the CLI checks it is the node it meant to reach), `operator:<name>` for a
// person or tool that may read logs and open a shell, `viewer:<name>` for one that may read logs
// only. A certificate and its key and the CA sit in one directory: ca.pem, cert.pem, cert.key.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { issueCertificate, PkiError, type ClusterCa } from './ca.js';

export type ApiRole = 'operator' | 'viewer';
export const API_ROLES: readonly ApiRole[] = ['operator', 'viewer'];
export type ApiAction = 'logs' | 'exec';

/** What each role may do on an agent's endpoint. */
export const ROLE_ACTIONS: Record<ApiRole, readonly ApiAction[]> = { operator: ['logs', 'exec'], viewer: ['logs'] };

const VERB: Record<ApiAction, string> = { logs: 'read logs', exec: 'exec' };

export const nodeCommonName = (node: string) => `node:${node}`;
export const clientCommonName = (role: ApiRole, name: string) => `${role}:${name}`;

/** The role and name a client certificate's common name carries, or undefined for any other (a node's, the registry's). */
export function clientIdentity(cn: string | undefined): { role: ApiRole; name: string } | undefined {
  const m = /^(operator|viewer):(.+)$/.exec(cn ?? '');
  return m ? { role: m[1] as ApiRole, name: m[2]! } : undefined;
}

/** Why a certificate's holder may not do `action`, or undefined when it may. */
export function refusal(cn: string | undefined, action: ApiAction): string | undefined {
  const who = clientIdentity(cn);
  if (!who) return `certificate ${JSON.stringify(cn ?? '')} is not an operator's or a viewer's (its common name must be operator:<name> or viewer:<name>)`;
  if (!ROLE_ACTIONS[who.role].includes(action)) return `${cn} is a ${who.role}: it may ${ROLE_ACTIONS[who.role].map((a) => VERB[a]).join(' and ')}, not ${VERB[action]}`;
  return undefined;
}

/** The three files of a TLS directory. */
export const TLS_FILES = { ca: 'ca.pem', cert: 'cert.pem', key: 'cert.key' } as const;

export interface TlsMaterial {
  dir: string;
  ca: string;
  cert: string;
  key: string;
}

export const hasTlsDir = (dir: string) => Object.values(TLS_FILES).every((f) => existsSync(join(dir, f)));

/** Reads a TLS directory; a missing file is named, with how to make it. */
export function readTlsDir(dir: string, what: string): TlsMaterial {
  const read = (f: string) => {
    const p = join(dir, f);
    try {
      return readFileSync(p, 'utf8');
    } catch (e) {
      throw new PkiError(`${what}: cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}); \`jaco cert\` issues ${TLS_FILES.ca}, ${TLS_FILES.cert} and ${TLS_FILES.key} into one directory (docs/operate.md)`);
    }
  };
  return { dir, ca: read(TLS_FILES.ca), cert: read(TLS_FILES.cert), key: read(TLS_FILES.key) };
}

/** A node's server certificate (its addresses as IP names) with the CA, into `dir`. */
export function issueNodeTls(ca: ClusterCa, node: string, ips: string[], dir: string, days?: number): void {
  issueCertificate(ca, { commonName: nodeCommonName(node), ips, usage: 'server', ...(days ? { days } : {}) }, { dir, name: 'cert' });
  writeCa(ca, dir);
}

/**
 * An etcd member's certificate with the CA, into `dir`: one certificate for both of its sides —
 * clients dial it (serverAuth) and its peers dial it and are dialled by it (clientAuth).
 */
export function issueEtcdMemberTls(ca: ClusterCa, member: string, ips: string[], dir: string, days?: number): void {
  issueCertificate(ca, { commonName: `etcd:${member}`, ips, usage: 'peer', ...(days ? { days } : {}) }, { dir, name: 'cert' });
  writeCa(ca, dir);
}

/**
 * The etcd client certificate of a host's jaco processes with the CA, into `dir` (etcd requires
 * one: --client-cert-auth). It proves the host holds a certificate of the cluster; who a process
 * is, its password says (etcd takes the certificate's name as the user only when none is given).
 */
export function issueEtcdClientTls(ca: ClusterCa, host: string, dir: string, days?: number): void {
  issueCertificate(ca, { commonName: `etcd-client:${host}`, usage: 'client', ...(days ? { days } : {}) }, { dir, name: 'cert' });
  writeCa(ca, dir);
}

/** An operator's or viewer's client certificate with the CA, into `dir`. */
export function issueClientTls(ca: ClusterCa, role: ApiRole, name: string, dir: string, days?: number): void {
  issueCertificate(ca, { commonName: clientCommonName(role, name), usage: 'client', ...(days ? { days } : {}) }, { dir, name: 'cert' });
  writeCa(ca, dir);
}

function writeCa(ca: ClusterCa, dir: string): void {
  // The CA's certificate only: its key never leaves the CA directory.
  const p = join(dir, TLS_FILES.ca);
  writeFileSync(p, ca.certPem, { mode: 0o644 });
}
