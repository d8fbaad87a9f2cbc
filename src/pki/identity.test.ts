import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureClusterCa } from './ca.js';
import { clientIdentity, issueEtcdClientTls, issueEtcdMemberTls, refusal, TLS_FILES } from './identity.js';

describe('who may do what on the agents\' endpoint', () => {
  it.each([
    ['operator:alice', 'logs', undefined],
    ['operator:alice', 'exec', undefined],
    ['viewer:ci', 'logs', undefined],
    ['viewer:ci', 'exec', 'viewer:ci is a viewer: it may read logs, not exec'],
    ['node:node-1', 'logs', 'certificate "node:node-1" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['jaco registry', 'exec', 'certificate "jaco registry" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    [undefined, 'logs', 'certificate "" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['operator:', 'logs', 'certificate "operator:" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
    ['Operator:alice', 'logs', 'certificate "Operator:alice" is not an operator\'s or a viewer\'s (its common name must be operator:<name> or viewer:<name>)'],
  ] as const)('%s → %s: %s', (cn, action, why) => expect(refusal(cn, action)).toBe(why));

  it('reads the role and the name', () => {
    expect(clientIdentity('viewer:on-call:bob')).toEqual({ role: 'viewer', name: 'on-call:bob' });
    expect(clientIdentity('node:x')).toBeUndefined();
  });
});

describe("etcd's certificates", () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-identity-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const ca = () => ensureClusterCa(join(dir, 'ca'));
  const read = (d: string) => new X509Certificate(readFileSync(join(d, TLS_FILES.cert)));

  it("a member's serves clients and peers and dials peers, at every address it is given; the CA beside it", () => {
    issueEtcdMemberTls(ca(), 'etcd-a', ['10.0.0.11', '127.0.0.1'], join(dir, 'member'));
    const cert = read(join(dir, 'member'));
    expect(cert.subject).toBe('CN=etcd:etcd-a');
    expect(cert.subjectAltName).toBe('IP Address:10.0.0.11, IP Address:127.0.0.1');
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
    expect(cert.checkIssued(new X509Certificate(readFileSync(join(dir, 'member', TLS_FILES.ca))))).toBe(true);
    expect(statSync(join(dir, 'member', TLS_FILES.key)).mode & 0o777).toBe(0o600);
  });

  it("a host's client certificate is for clients only, and names its host", () => {
    issueEtcdClientTls(ca(), 'node-1', join(dir, 'client'));
    const cert = read(join(dir, 'client'));
    expect(cert.subject).toBe('CN=etcd-client:node-1');
    expect(cert.keyUsage).toEqual(['1.3.6.1.5.5.7.3.2']);
    expect(cert.subjectAltName).toBeUndefined();
  });
});
