import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { localClusterDefaults } from './local-credentials.js';

describe("the CLI beside a `jaco up` cluster (./.jaco): what it takes from there", () => {
  const cwd = mkdtempSync(join(tmpdir(), 'jaco-local-creds-'));
  const jaco = join(cwd, '.jaco');
  mkdirSync(join(jaco, 'pki'), { recursive: true });
  mkdirSync(join(jaco, 'credentials'), { recursive: true });
  writeFileSync(join(jaco, 'up.json'), JSON.stringify({ endpoint: 'https://127.0.0.1:2379' }));
  for (const f of ['ca.pem', 'etcd-client.pem', 'etcd-client.key']) writeFileSync(join(jaco, 'pki', f), 'x');
  writeFileSync(join(jaco, 'credentials', 'root.env'), 'JACO_ETCD_USER=root\nJACO_ETCD_PASSWORD=pw=with=equals\n');
  afterAll(() => rmSync(cwd, { recursive: true, force: true }));
  const none = { endpoints: false, tls: false, user: false };
  const tls = { caFile: join(jaco, 'pki', 'ca.pem'), certFile: join(jaco, 'pki', 'etcd-client.pem'), keyFile: join(jaco, 'pki', 'etcd-client.key') };

  it.each([
    ['nothing given: its endpoint, TLS files and root', none, ['http://127.0.0.1:2379'], { endpoints: ['https://127.0.0.1:2379'], ...tls, user: 'root', password: 'pw=with=equals' }],
    ['its endpoint given: TLS files and root', { ...none, endpoints: true }, ['https://127.0.0.1:2379'], { ...tls, user: 'root', password: 'pw=with=equals' }],
    ['another endpoint given: nothing', { ...none, endpoints: true }, ['http://127.0.0.1:4001'], {}],
    ['a user given: only the endpoint and TLS files', { ...none, user: true }, ['http://127.0.0.1:2379'], { endpoints: ['https://127.0.0.1:2379'], ...tls }],
    ['TLS given: only the endpoint and root', { ...none, tls: true }, ['http://127.0.0.1:2379'], { endpoints: ['https://127.0.0.1:2379'], user: 'root', password: 'pw=with=equals' }],
  ] as const)('%s', (_what, given, endpoints, want) => {
    expect(localClusterDefaults(cwd, given, [...endpoints])).toEqual(want);
  });

  it('no running cluster here: nothing', () => {
    expect(localClusterDefaults(tmpdir(), none, ['http://127.0.0.1:2379'])).toEqual({});
  });
});
