import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replicaContainer } from './api-server.js';
import type { ContainerFacts } from './facts.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { ensureClusterCa } from '../../src/pki/ca.js';
import { issueClientTls, issueNodeTls, readTlsDir, type TlsMaterial } from '../../src/pki/identity.js';
import { AgentClient, agentTarget } from '../../src/cli/agent-client.js';
import { logger } from '../../src/observability/log.js';
import { AgentApi } from './api-server.js';
import type { Node } from '../../src/api/types.js';

const c = (id: string, replica: string, state: ContainerFacts['state'], createdAt: string, role?: 'sandbox') => ({ id, replica, state, createdAt, ...(role ? { role } : {}) }) as ContainerFacts;

describe('replicaContainer: the container a request for a replica means', () => {
  const all = [c('aaa1', 'web-1', 'exited', '2026-11-27T10:00:00Z'), c('bbb2', 'web-1', 'running', '2026-11-27T09:00:00Z'), c('ccc3', 'web-1', 'created', '2026-11-27T11:00:00Z'), c('ddd4', 'web-1', 'running', '2026-11-27T12:00:00Z', 'sandbox'), c('eee5', 'web-2', 'exited', '2026-11-27T08:00:00Z')];
  it.each([
    ['web-1', undefined, 'bbb2'],
    ['web-1', 'ccc', 'ccc3'],
    ['web-2', undefined, 'eee5'],
  ])('%s (container %s) → %s', (replica, id, want) => expect(replicaContainer(all, replica, id)?.id).toBe(want));
  it.each([
    ['web-1', 'ddd4'],
    ['web-1', 'eee5'],
    ['web-3', undefined],
  ])('%s container %s: none (a sandbox, another replica\'s, no such replica)', (replica, id) => expect(replicaContainer(all, replica, id)).toBeUndefined());
  it('the newest when none runs', () => expect(replicaContainer([c('x', 'r', 'exited', '2026-11-27T01:00:00Z'), c('y', 'r', 'exited', '2026-11-27T02:00:00Z')], 'r')?.id).toBe('y'));
});

// The trust rules on a real TLS endpoint on 127.0.0.1 (certificates made with openssl, as the
// CA's own tests do); Docker is never reached: every request here is decided before it.

describe('the endpoint admits what the trust rules say (docs/operate.md)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-api-test-'));
  const ca = ensureClusterCa(join(dir, 'ca'));
  const other = ensureClusterCa(join(dir, 'other-ca'));
  issueNodeTls(ca, 'node-1', ['127.0.0.1'], join(dir, 'node-1'));
  issueNodeTls(ca, 'node-2', ['127.0.0.1'], join(dir, 'node-2'));
  issueClientTls(ca, 'operator', 'alice', join(dir, 'alice'));
  issueClientTls(ca, 'viewer', 'ci', join(dir, 'ci'));
  issueClientTls(other, 'operator', 'mallory', join(dir, 'mallory'));
  const api = new AgentApi({ node: 'node-1', host: '127.0.0.1', port: 0, tls: readTlsDir(join(dir, 'node-1'), 'test'), docker: {} as Docker, containers: () => [], log: logger('test') });
  let node: Node;
  beforeAll(async () => {
    const endpoint = await api.start();
    node = { status: { api: { endpoint } } } as Node;
  });
  afterAll(async () => {
    await api.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  const as = (who: string) => new AgentClient(readTlsDir(join(dir, who), 'test'));
  const attempt = async (who: string, method: string, path: string, nodeName = 'node-1', body?: unknown) => {
    const client = as(who);
    try {
      await client.call(agentTarget(node, nodeName), method, path, body);
      return 'ok';
    } catch (e) {
      return (e as Error).message;
    } finally {
      client.close();
    }
  };

  it('an operator is let in (the replica is not here: 404, named)', async () => {
    expect(await attempt('alice', 'GET', '/v1/replicas/web-1/logs')).toBe('node node-1: replica web-1 has no container on node node-1');
    expect(await attempt('alice', 'POST', '/v1/replicas/web-1/exec', 'node-1', { cmd: ['true'] })).toBe('node node-1: replica web-1 has no container on node node-1');
  });
  it('a viewer reads logs and may not exec', async () => {
    expect(await attempt('ci', 'GET', '/v1/replicas/web-1/logs')).toBe('node node-1: replica web-1 has no container on node node-1');
    expect(await attempt('ci', 'POST', '/v1/replicas/web-1/exec', 'node-1', { cmd: ['true'] })).toBe('node node-1: viewer:ci is a viewer: it may read logs, not exec');
  });
  it("a node's certificate is not a client's, and another CA's is nobody's: the handshake fails", async () => {
    for (const who of ['node-2', 'mallory']) expect(await attempt(who, 'GET', '/v1/replicas/web-1/logs')).toMatch(/^node node-1: its agent at https:\/\/127\.0\.0\.1:\d+ refused this certificate \(.+\): it must be a client certificate from the cluster CA/);
  });
  it("the CLI refuses an agent whose certificate is another node's", async () => {
    expect(await attempt('alice', 'GET', '/v1/replicas/web-1/logs', 'node-2')).toMatch(/the certificate at 127\.0\.0\.1:\d+ is node:node-1, not node:node-2/);
  });
});

describe('CA rotation without an outage (docs/operate.md, "Revoking access")', () => {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-api-rotate-'));
  const old = ensureClusterCa(join(dir, 'old'));
  const next = ensureClusterCa(join(dir, 'new'));
  issueNodeTls(old, 'node-1', ['127.0.0.1'], join(dir, 'node-old'));
  issueNodeTls(next, 'node-1', ['127.0.0.1'], join(dir, 'node-new'));
  issueClientTls(old, 'operator', 'alice', join(dir, 'alice-old'));
  issueClientTls(next, 'operator', 'alice', join(dir, 'alice-new'));
  const pem = (d: string) => readTlsDir(join(dir, d), 'test').ca;
  const bundle = pem('node-old') + pem('node-new');
  const attempt = async (server: TlsMaterial, client: TlsMaterial) => {
    const api = new AgentApi({ node: 'node-1', host: '127.0.0.1', port: 0, tls: server, docker: {} as Docker, containers: () => [], log: logger('test') });
    const endpoint = await api.start();
    const c = new AgentClient(client);
    try {
      await c.call(agentTarget({ status: { api: { endpoint } } } as Node, 'node-1'), 'GET', '/v1/replicas/web-1/logs');
      return 'ok';
    } catch (e) {
      return (e as Error).message.includes('has no container') ? 'admitted' : (e as Error).message;
    } finally {
      c.close();
      await api.stop();
    }
  };
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an agent and a CLI whose ca.pem holds both CAs trust certificates of either; the new CA alone refuses the old', async () => {
    const tls = (d: string, ca?: string) => ({ ...readTlsDir(join(dir, d), 'test'), ...(ca ? { ca } : {}) });
    // Step 2: the old node certificate, both CAs trusted: operators of either CA are let in.
    expect(await attempt(tls('node-old', bundle), tls('alice-old', bundle))).toBe('admitted');
    expect(await attempt(tls('node-old', bundle), tls('alice-new', bundle))).toBe('admitted');
    // Step 3: the node's certificate from the new CA, trusted by a CLI holding both.
    expect(await attempt(tls('node-new', bundle), tls('alice-old', bundle))).toBe('admitted');
    // Step 4: the new CA alone: the old CA's operator is refused at the handshake.
    expect(await attempt(tls('node-new'), tls('alice-old', bundle))).toMatch(/refused this certificate/);
    expect(await attempt(tls('node-new'), tls('alice-new'))).toBe('admitted');
  });
});
