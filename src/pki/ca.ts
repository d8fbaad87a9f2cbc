// The cluster's certificate authority: made once under a directory (ca.key, mode 600, and ca.pem),
// and the certificates it issues (server, client, or both for peers) with their IP and DNS names.
// The registry's TLS uses it now; the agents' mutual TLS and the deploy scripts are to reuse it.
//
// Made with the openssl CLI (Debian's, which scripts/ensure-system.sh installs): the files are
// plain PEM any tool reads, the same commands work on a host by hand, and the npm X.509 libraries
// either need a global Reflect polyfill (@peculiar/x509) or generate keys in slow pure JavaScript
// (node-forge). Keys are ECDSA P-256: fast to make, and taken by Go (registry, etcd) and Node.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ClusterCa {
  dir: string;
  /** The CA certificate (public: give it to whoever must trust what the CA issued). */
  certFile: string;
  /** The CA's private key, mode 600. */
  keyFile: string;
  certPem: string;
}

/** server: a TLS server (serverAuth); client: a TLS client (clientAuth); peer: both (etcd peers, agents that dial each other). */
export type CertificateUsage = 'server' | 'client' | 'peer';

export interface CertificateRequest {
  commonName: string;
  ips?: string[];
  dnsNames?: string[];
  usage: CertificateUsage;
  /** Validity in days (default 365). */
  days?: number;
}

export interface IssuedCertificate {
  certFile: string;
  /** Mode 600. */
  keyFile: string;
  certPem: string;
  keyPem: string;
}

export class OpensslNotInstalledError extends Error {
  override name = 'OpensslNotInstalledError';
  constructor() {
    super('openssl is not installed (no `openssl` on PATH). Install it with `apt-get install -y openssl` or run scripts/ensure-system.sh, which does.');
  }
}

/** A request the CA refuses, or openssl failing (its own words in the message). */
export class PkiError extends Error {
  override name = 'PkiError';
}

const CA_CERT = 'ca.pem';
const CA_KEY = 'ca.key';
const EXTENDED_USAGE: Record<CertificateUsage, string> = { server: 'serverAuth', client: 'clientAuth', peer: 'serverAuth,clientAuth' };

function openssl(args: string[], input?: string): string {
  try {
    return execFileSync(process.env.JACO_OPENSSL_BIN ?? 'openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (e) {
    const err = e as NodeJS.ErrnoException & { stderr?: string };
    if (err.code === 'ENOENT') throw new OpensslNotInstalledError();
    throw new PkiError(`openssl ${args[0]} failed: ${(err.stderr ?? err.message).trim().split('\n').slice(0, 3).join('; ')}`);
  }
}

/** A fresh P-256 private key, as PKCS#8 PEM (never written anywhere by openssl). */
function newKey(): string {
  return openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256']);
}

/** Runs fn with a private temporary directory for openssl's config files. */
function withScratch<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-pki-'));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// A subject is written into an openssl config: keep it to characters that need no quoting there.
const SAFE_NAME = /^[A-Za-z0-9][A-Za-z0-9 ._:@-]{0,63}$/;
const DNS_NAME = /^(\*\.)?([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$/i;

/** The CA of `dir`, made on first use (a CA once made is never replaced: what it issued stays valid). */
export function ensureClusterCa(dir: string, opts: { commonName?: string; days?: number } = {}): ClusterCa {
  const certFile = join(dir, CA_CERT);
  const keyFile = join(dir, CA_KEY);
  const [hasCert, hasKey] = [existsSync(certFile), existsSync(keyFile)];
  if (hasCert && hasKey) return { dir, certFile, keyFile, certPem: readFileSync(certFile, 'utf8') };
  if (hasCert !== hasKey) throw new PkiError(`${dir} holds ${hasCert ? CA_CERT : CA_KEY} without ${hasCert ? CA_KEY : CA_CERT}: an incomplete CA; restore the missing file or remove both to make a new CA (everything it issued must then be issued again)`);
  const commonName = opts.commonName ?? 'jaco cluster CA';
  if (!SAFE_NAME.test(commonName)) throw new PkiError(`CA common name ${JSON.stringify(commonName)}: use letters, digits, space and . _ : @ - (at most 64)`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = newKey();
  const cert = withScratch((scratch) => {
    const keyTmp = join(scratch, 'ca.key');
    writeFileSync(keyTmp, key, { mode: 0o600 });
    writeFileSync(
      join(scratch, 'ca.cnf'),
      ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', `CN = ${commonName}`, '[v3_ca]', 'basicConstraints = critical,CA:TRUE,pathlen:0', 'keyUsage = critical,keyCertSign,cRLSign', 'subjectKeyIdentifier = hash', ''].join('\n'),
    );
    return openssl(['req', '-x509', '-new', '-key', keyTmp, '-config', join(scratch, 'ca.cnf'), '-extensions', 'v3_ca', '-sha256', '-days', String(opts.days ?? 3650), '-set_serial', serial()]);
  });
  // The key lands first and the certificate last (each by rename): a ca.pem means a whole CA.
  const suffix = randomBytes(4).toString('hex');
  writeFileSync(`${keyFile}.${suffix}`, key, { mode: 0o600 });
  renameSync(`${keyFile}.${suffix}`, keyFile);
  writeFileSync(`${certFile}.${suffix}`, cert, { mode: 0o644 });
  renameSync(`${certFile}.${suffix}`, certFile);
  return { dir, certFile, keyFile, certPem: cert };
}

/**
 * A P-256 key pair for signing (not a certificate): `<dir>/<name>.key` (mode 600) and
 * `<dir>/<name>.pub`, made on first use and kept (etcd's JWT tokens are signed with it).
 */
export function ensureSigningKey(dir: string, name: string): { keyFile: string; publicFile: string } {
  const keyFile = join(dir, `${name}.key`);
  const publicFile = join(dir, `${name}.pub`);
  if (existsSync(keyFile) && existsSync(publicFile)) return { keyFile, publicFile };
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const key = newKey();
  const pub = openssl(['pkey', '-pubout'], key);
  // The key lands first and the public half last (each by rename): a .pub means a whole pair.
  const suffix = randomBytes(4).toString('hex');
  writeFileSync(`${keyFile}.${suffix}`, key, { mode: 0o600 });
  renameSync(`${keyFile}.${suffix}`, keyFile);
  writeFileSync(`${publicFile}.${suffix}`, pub, { mode: 0o644 });
  renameSync(`${publicFile}.${suffix}`, publicFile);
  return { keyFile, publicFile };
}

/** 128 random bits: serials must be unique per CA, and nothing keeps a counter. */
function serial(): string {
  return `0x${randomBytes(16).toString('hex')}`;
}

function checkRequest(req: CertificateRequest): void {
  if (!SAFE_NAME.test(req.commonName)) throw new PkiError(`common name ${JSON.stringify(req.commonName)}: use letters, digits, space and . _ : @ - (at most 64)`);
  for (const ip of req.ips ?? []) if (!isIP(ip)) throw new PkiError(`${JSON.stringify(ip)} is not an IP address`);
  for (const d of req.dnsNames ?? []) if (!DNS_NAME.test(d) || d.length > 253) throw new PkiError(`${JSON.stringify(d)} is not a DNS name`);
  if (req.usage !== 'client' && !(req.ips?.length || req.dnsNames?.length)) throw new PkiError(`a ${req.usage} certificate needs at least one IP address or DNS name (clients check the server's name against them)`);
  if (req.days !== undefined && !(Number.isInteger(req.days) && req.days > 0)) throw new PkiError(`days must be a positive whole number, not ${req.days}`);
}

/**
 * Issues a certificate signed by the CA, writing `<dir>/<name>.pem` and `<dir>/<name>.key`
 * (mode 600); `name` defaults to the common name with unsafe characters replaced.
 */
export function issueCertificate(ca: ClusterCa, req: CertificateRequest, out: { dir: string; name?: string }): IssuedCertificate {
  checkRequest(req);
  const name = out.name ?? req.commonName.replace(/[^A-Za-z0-9._-]/g, '_');
  const san = [...(req.ips ?? []).map((ip) => `IP:${ip}`), ...(req.dnsNames ?? []).map((d) => `DNS:${d}`)];
  const keyPem = newKey();
  const certPem = withScratch((scratch) => {
    const keyTmp = join(scratch, 'leaf.key');
    writeFileSync(keyTmp, keyPem, { mode: 0o600 });
    const csr = openssl(['req', '-new', '-key', keyTmp, '-subj', `/CN=${req.commonName}`]);
    writeFileSync(
      join(scratch, 'ext.cnf'),
      [
        '[v3]',
        'basicConstraints = critical,CA:FALSE',
        'keyUsage = critical,digitalSignature',
        `extendedKeyUsage = ${EXTENDED_USAGE[req.usage]}`,
        ...(san.length ? [`subjectAltName = ${san.join(',')}`] : []),
        'subjectKeyIdentifier = hash',
        'authorityKeyIdentifier = keyid',
        '',
      ].join('\n'),
    );
    return openssl(['x509', '-req', '-in', '-', '-CA', ca.certFile, '-CAkey', ca.keyFile, '-set_serial', serial(), '-days', String(req.days ?? 365), '-sha256', '-extfile', join(scratch, 'ext.cnf'), '-extensions', 'v3'], csr);
  });
  mkdirSync(out.dir, { recursive: true });
  const certFile = join(out.dir, `${name}.pem`);
  const keyFile = join(out.dir, `${name}.key`);
  writeFileSync(keyFile, keyPem, { mode: 0o600 });
  chmodSync(keyFile, 0o600); // an existing file keeps its mode through writeFileSync
  writeFileSync(certFile, certPem);
  return { certFile, keyFile, certPem, keyPem };
}
