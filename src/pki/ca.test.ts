// The cluster CA and what it issues, checked with Node's own X.509 reader and a real TLS handshake
// on 127.0.0.1 (openssl makes them; it is on every machine of the project: scripts/ensure-system.sh).
import { mkdtempSync, readFileSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { connect, createServer, type Server } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureClusterCa, issueCertificate, PkiError, type CertificateRequest } from './ca.js';

const dirs: string[] = [];
const tmp = () => {
  const d = mkdtempSync(join(tmpdir(), 'jaco-ca-test-'));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';

describe('ensureClusterCa', () => {
  it('makes the CA once: ca.key private, ca.pem a CA certificate; later calls return the same', () => {
    const dir = join(tmp(), 'ca');
    const ca = ensureClusterCa(dir, { commonName: 'jaco cluster CA test' });
    expect(statSync(ca.keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.subject).toBe('CN=jaco cluster CA test');
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(Date.parse(cert.validTo) - Date.now()).toBeGreaterThan(9 * 365 * 86_400_000);
    const again = ensureClusterCa(dir);
    expect(again.certPem).toBe(ca.certPem);
    expect(readFileSync(again.keyFile, 'utf8')).toBe(readFileSync(ca.keyFile, 'utf8'));
  });

  it('refuses a directory holding half a CA rather than replacing it', () => {
    const dir = join(tmp(), 'ca');
    const ca = ensureClusterCa(dir);
    unlinkSync(ca.keyFile);
    expect(() => ensureClusterCa(dir)).toThrow(/holds ca\.pem without ca\.key: an incomplete CA/);
  });
});

describe('issueCertificate', () => {
  const ca = ensureClusterCa(join(tmp(), 'ca'));

  it('issues a server certificate for its IPs and names, signed by the CA, with a private key', () => {
    const out = tmp();
    const c = issueCertificate(ca, { commonName: 'registry', ips: ['127.0.0.1', 'fd00::1'], dnsNames: ['registry.jaco.internal', 'localhost'], usage: 'server', days: 30 }, { dir: out });
    expect(c.certFile).toBe(join(out, 'registry.pem'));
    expect(statSync(c.keyFile).mode & 0o777).toBe(0o600);
    const cert = new X509Certificate(c.certPem);
    expect(cert.ca).toBe(false);
    expect(cert.verify(new X509Certificate(ca.certPem).publicKey)).toBe(true);
    expect(cert.checkIssued(new X509Certificate(ca.certPem))).toBe(true);
    expect(cert.subjectAltName).toBe('IP Address:127.0.0.1, IP Address:FD00:0:0:0:0:0:0:1, DNS:registry.jaco.internal, DNS:localhost');
    expect(cert.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(cert.checkHost('registry.jaco.internal')).toBe('registry.jaco.internal');
    expect(cert.checkHost('other.internal')).toBeUndefined();
    expect(cert.keyUsage).toEqual([SERVER_AUTH]);
    expect(Math.round((Date.parse(cert.validTo) - Date.parse(cert.validFrom)) / 86_400_000)).toBe(30);
    expect(new X509Certificate(readFileSync(c.certFile)).fingerprint256).toBe(cert.fingerprint256);
  });

  it('issues client and peer certificates with their extended key usages; serials differ', () => {
    const out = tmp();
    const client = new X509Certificate(issueCertificate(ca, { commonName: 'agent n1', usage: 'client' }, { dir: out }).certPem);
    const peer = new X509Certificate(issueCertificate(ca, { commonName: 'etcd-1', ips: ['127.0.0.1'], usage: 'peer' }, { dir: out, name: 'peer' }).certPem);
    expect(client.keyUsage).toEqual([CLIENT_AUTH]);
    expect(client.subject).toBe('CN=agent n1');
    expect(peer.keyUsage).toEqual([SERVER_AUTH, CLIENT_AUTH]);
    expect(client.serialNumber).not.toBe(peer.serialNumber);
  });

  const refused: [CertificateRequest, RegExp][] = [
    [{ commonName: 'a/CN=evil', usage: 'client' }, /common name/],
    [{ commonName: 'r', ips: ['127.0.0.256'], usage: 'server' }, /not an IP address/],
    [{ commonName: 'r', dnsNames: ['bad_name.example'], usage: 'server' }, /not a DNS name/],
    [{ commonName: 'r', usage: 'server' }, /needs at least one IP address or DNS name/],
    [{ commonName: 'r', ips: ['127.0.0.1'], usage: 'server', days: 0 }, /days must be a positive whole number/],
  ];
  it.each(refused)('refuses %j', (req, why) => {
    const out = tmp();
    expect(() => issueCertificate(ca, req, { dir: out })).toThrow(why);
    expect(() => issueCertificate(ca, req, { dir: out })).toThrow(PkiError);
  });

  it('makes a TLS server that a client trusting ca.pem accepts, and one without it refuses', async () => {
    const c = issueCertificate(ca, { commonName: 'tls', ips: ['127.0.0.1'], usage: 'server' }, { dir: tmp() });
    const server: Server = createServer({ cert: c.certPem, key: c.keyPem }, (s) => s.end('hello'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const talk = (ca?: string) =>
      new Promise<string>((resolve, reject) => {
        const s = connect({ host: '127.0.0.1', port, ...(ca ? { ca } : {}) }, () => undefined);
        let got = '';
        s.on('data', (d: Buffer) => (got += d.toString()));
        s.on('end', () => resolve(got));
        s.on('error', reject);
      });
    try {
      expect(await talk(ca.certPem)).toBe('hello');
      await expect(talk()).rejects.toMatchObject({ code: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
    } finally {
      server.close();
    }
  });
});
