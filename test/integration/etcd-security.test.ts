// jaco against a secured etcd, as production runs it: users and roles (each agent only its own
// keys, deploy/etcd/rbac.sh) and TLS with client certificates. Real etcd members throughout.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startEtcdMember, waitForEtcd, type EtcdMember } from '../../src/runtime/etcd.js';
import { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { jaco } from '../support/cli.js';
import { startTestEtcd, type TestEtcd } from '../support/etcd.js';
import { makeTestPki, type TestPki } from '../support/tls.js';

const counter = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: 'c' }, spec: { next: 1 } };

describe('etcd with authentication and per-agent roles', () => {
  let etcd: TestEtcd;
  beforeAll(async () => {
    etcd = await startTestEtcd();
    const admin = etcd.store('/jaco/');
    const c = admin.client;
    await c.user('root').create('rootpw');
    await c.user('root').addRole('root');
    // What deploy/etcd/rbac.sh grants the agent of node n1: its own observed keys, nothing else.
    const role = await c.role('jaco-agent-n1').create();
    await role.grant({ permission: 'Readwrite', range: c.range({ prefix: '/jaco/observed/n1/' }) });
    await role.grant({ permission: 'Read', range: c.range({ prefix: '/jaco/desired/n1/' }) });
    await c.user('agent-n1').create('agentpw');
    await c.user('agent-n1').addRole('jaco-agent-n1');
    await c.auth.authEnable({});
  });
  afterAll(async () => {
    await etcd?.stop();
  });

  it('refuses an anonymous CLI with a clear error, and accepts --user or the environment', async () => {
    const anon = await jaco(['get', 'nodes'], { endpoint: etcd.endpoint });
    expect(anon.code).not.toBe(0);
    expect(anon.stderr).toMatch(/user name is empty|authentication/i);
    const flag = await jaco(['--user', 'root:rootpw', 'get', 'nodes'], { endpoint: etcd.endpoint });
    expect(flag.code, flag.stderr).toBe(0);
    const env = await jaco(['get', 'nodes'], { endpoint: etcd.endpoint, env: { JACO_ETCD_USER: 'root', JACO_ETCD_PASSWORD: 'rootpw' } });
    expect(env.code, env.stderr).toBe(0);
    const noPassword = await jaco(['--user', 'root', 'get', 'nodes'], { endpoint: etcd.endpoint });
    expect(noPassword.code).toBe(1);
    expect(noPassword.stderr).toContain('etcd user root needs a password');
  });

  it("an agent's user writes its own observed keys and is refused everything else", async () => {
    const agent = new Store({ endpoints: etcd.endpoint, prefix: '/jaco/', user: 'agent-n1', password: 'agentpw' });
    try {
      await commitAtomic(agent, [{ ops: [{ op: 'put', key: 'observed/n1/r1', value: counter }] }]);
      expect(await agent.get('observed/n1/r1')).toBeDefined();
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'desired/n1/r1', value: counter }] }])).rejects.toThrow(/permission denied/i);
      await expect(commitAtomic(agent, [{ ops: [{ op: 'put', key: 'observed/n2/r1', value: counter }] }])).rejects.toThrow(/permission denied/i);
    } finally {
      agent.close();
    }
  });
});

describe('etcd over TLS with client certificates', () => {
  let pki: TestPki;
  let member: EtcdMember;
  let dataDir: string;
  beforeAll(async () => {
    pki = makeTestPki();
    dataDir = mkdtempSync(join(tmpdir(), 'jaco-etcd-tls-'));
    member = startEtcdMember({ name: 'tls', dataDir, clientPort: await freePort(), peerPort: await freePort(), tls: { cert: pki.serverCert, key: pki.serverKey, ca: pki.ca } });
    await waitForEtcd([member.endpoint], 20_000, member.process, { caFile: pki.ca, certFile: pki.clientCert, keyFile: pki.clientKey });
  });
  afterAll(async () => {
    await member?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
    if (pki) rmSync(pki.dir, { recursive: true, force: true });
  });

  it('connects with --cacert/--cert/--key and applies; without them it cannot reach etcd', async () => {
    expect(member.endpoint).toMatch(/^https:/);
    const tlsFlags = ['--cacert', pki.ca, '--cert', pki.clientCert, '--key', pki.clientKey];
    const manifest = JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'tls' }, spec: { services: { web: { image: 'x' } } } });
    const ok = await jaco([...tlsFlags, 'apply', '-f', '-'], { endpoint: member.endpoint, input: manifest });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('deployment/tls created');
    const env = await jaco(['get', 'deployments', '-o', 'json'], { endpoint: member.endpoint, env: { JACO_ETCD_CACERT: pki.ca, JACO_ETCD_CERT: pki.clientCert, JACO_ETCD_KEY: pki.clientKey } });
    expect(JSON.parse(env.stdout).items).toHaveLength(1);
    const plain = await jaco(['get', 'deployments'], { endpoint: member.endpoint });
    expect(plain.code).toBe(2);
    const noClientCert = await jaco(['--cacert', pki.ca, 'get', 'deployments'], { endpoint: member.endpoint });
    expect(noClientCert.code).not.toBe(0);
    const halfCert = await jaco(['--cacert', pki.ca, '--cert', pki.clientCert, 'get', 'deployments'], { endpoint: member.endpoint });
    expect(halfCert.stderr).toContain('needs both --cert and --key');
  });
});
