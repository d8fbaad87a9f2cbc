// Secrets and configs against a real etcd, as an operator runs them (./bin/jaco) beside a real
// secrets controller (in this process, with a real cluster key file): create, ls, inspect, get,
// describe, rm; compose files at apply (one transaction with the deployment); the copies a node's
// replicas need, sealed to the node's key; a rotation of the cluster key; and — throughout — the
// value in no output, no audit record, no key under the prefix, no file of etcd's data.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClusterKey, type Deployment, type Node, type NodeCopy, type ReplicaDesired, type Secret } from '../../src/api/types.js';
import { templateOf } from '../../src/api/serving.js';
import { startController, type SingleController } from '../../src/runtime/manager.js';
import { ensureClusterKeyFile, readClusterKeys } from '../../src/secrets/keyfile.js';
import { copyAad, generateKeyPair, open, type KeyPair } from '../../src/secrets/seal.js';
import type { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { secretsController } from '../../controllers/secrets/controller.js';
import { jaco } from '../support/cli.js';
import { startTestEtcd, uniquePrefix, type TestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

const PLAIN = 'Zq8-never-print-me-4e1d';
const PLAIN2 = 'second-value-77f0aa';
const COMPOSE_PW = 'compose-password-c0ffee';
const ENV_TOKEN = 'token-from-env-9b9b';
const PLAINS = [PLAIN, PLAIN2, COMPOSE_PW, ENV_TOKEN];
const b64 = (s: string) => Buffer.from(s).toString('base64');

/** Fails when any plaintext (or its base64) is in the text. */
function noPlaintext(where: string, text: string | Buffer): void {
  const t = Buffer.isBuffer(text) ? text : Buffer.from(text);
  for (const p of PLAINS) for (const form of [p, b64(p)]) expect(t.includes(Buffer.from(form)), `${where} holds ${form === p ? 'a plaintext' : 'the base64 of a plaintext'}`).toBe(false);
}

describe('secrets and configs: the CLI, the secrets controller and etcd', () => {
  let etcd: TestEtcd;
  let store: Store;
  let ctl: SingleController<undefined, unknown, unknown, never>;
  const prefix = uniquePrefix();
  const dir = mkdtempSync(join(tmpdir(), 'jaco-secrets-cli-'));
  const keyFile = join(dir, 'secrets.key');
  const outputs: [string, string][] = [];
  const cli = async (args: string[], input?: string, env?: Record<string, string>) => {
    const r = await jaco(args, { endpoint: etcd.endpoint, prefix, input, env });
    outputs.push([`jaco ${args.join(' ')}`, r.stdout + r.stderr]);
    return r;
  };
  const nodeKeys: Record<string, KeyPair> = { n1: generateKeyPair('nk'), n2: generateKeyPair('nk') };

  beforeAll(async () => {
    etcd = await startTestEtcd();
    store = etcd.store(prefix);
    ensureClusterKeyFile(keyFile);
    ctl = (await startController({ store, timings: FAST, log: testLogger(), identity: 'test' }, secretsController(FAST, { keyFile }))) as never;
    await eventually(async () => (await store.get<ClusterKey>(keys.clusterKey()))?.value.spec.id === readClusterKeys(keyFile).primary.id, { what: 'the cluster key published' });
    for (const n of ['n1', 'n2'])
      await commitAtomic(store, [
        {
          ops: [
            {
              op: 'put',
              key: keys.node(n),
              value: { apiVersion: API_VERSION, kind: 'Node', metadata: { name: n }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 't', registeredAt: new Date().toISOString(), secretsKey: { id: nodeKeys[n]!.id, publicKey: nodeKeys[n]!.publicKey } } } satisfies Node,
            },
          ],
        },
      ]);
  });
  afterAll(async () => {
    await ctl?.stop();
    await etcd?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates secrets from stdin or a file, sealed to the published cluster key; refuses what it must', async () => {
    const a = await cli(['secret', 'create', 'db_password', '-'], PLAIN);
    expect(a.code, a.stderr).toBe(0);
    expect(a.stdout).toMatch(/^secret\/db_password created \(23 bytes, sealed to cluster key ck-[0-9a-f]{16}\)\n$/);
    writeFileSync(join(dir, 'v2.txt'), PLAIN2);
    expect((await cli(['secret', 'create', 'db_password_v2', '-f', join(dir, 'v2.txt')])).code).toBe(0);
    const stored = (await store.get<Secret>(keys.secret('db_password')))!.value;
    expect(stored.spec.sealed.key).toBe(readClusterKeys(keyFile).primary.id);
    expect(stored.spec.size).toBe(PLAIN.length);

    const again = await cli(['secret', 'create', 'db_password', '-'], 'other');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('secret db_password exists; secrets are immutable: create a new name (db_password_v2)');
    expect((await cli(['secret', 'create', 'x'])).stderr).toContain('give the secret\'s value with -f FILE, or - to read it from stdin (never as an argument');
    expect((await cli(['secret', 'create', 'x', 'hunter2'])).stderr).toContain('unexpected argument "hunter2"');
    expect((await cli(['secret', 'create', 'bad/name', '-'], 'x')).stderr).toContain('secret name "bad/name" is not valid');
    expect((await cli(['secret', 'create', 'big', '-'], 'x'.repeat(500 * 1024 + 1))).stderr).toContain('a secret holds at most 512000 (500 KiB)');
    writeFileSync(join(dir, 'app.conf'), 'listen 80;\n');
    expect((await cli(['config', 'create', 'app.conf', '-f', join(dir, 'app.conf')])).stdout).toMatch(/^config\/app\.conf created \(11 bytes, sha256:/);
    // Configs are not secret: their content may be read back.
    expect((await cli(['config', 'cat', 'app.conf'])).stdout).toBe('listen 80;\n');
  });

  it('lists and shows them without any value', async () => {
    const ls = await cli(['secret', 'ls']);
    expect(ls.stdout).toMatch(/^NAME\s+SIZE\s+SEALED TO\s+USED BY\s+NODES\s+AGE\n/);
    expect(ls.stdout).toMatch(/^db_password\s+23\s+ck-[0-9a-f]{16}\s+-\s+0\s+\d+s$/m);
    const y = await cli(['secret', 'ls', '-o', 'yaml']);
    expect(y.stdout).toContain('kind: List');
    expect(y.stdout).toContain('sealedTo: ck-');
    expect(y.stdout).not.toMatch(/\bsealed:|epk:|^\s+data:/m);
    const j = JSON.parse((await cli(['get', 'secret', 'db_password', '-o', 'json'])).stdout);
    expect(j).toMatchObject({ kind: 'Secret', metadata: { name: 'db_password' }, spec: { size: 23 } });
    expect(j.spec.sealed).toBeUndefined();
    expect((await cli(['describe', 'secret', 'db_password'])).stdout).toMatch(/Sealed to:\s+cluster key ck-[0-9a-f]{16} \(the value is never shown\)/);
    expect((await cli(['secret', 'inspect', 'db_password'])).stdout).toContain('Size:         23 bytes');
    expect((await cli(['get', 'configs'])).stdout).toMatch(/^app\.conf\s+11\s+sha256:/m);
    expect((await cli(['secret', 'inspect', 'nope'])).stderr).toContain('secret "nope" not found');
  });

  it("copies a secret to the node whose replica uses it, sealed to that node's key, and removes it when the replica goes", async () => {
    const t = templateOf(1, { image: 'x', secrets: [{ source: 'db_password' }] });
    const d: ReplicaDesired = { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: 'demo-web-0' }, spec: { replica: 'demo-web-0', deployment: 'demo', service: 'web', node: 'n1', revision: 1, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString() } };
    await commitAtomic(store, [{ ops: [{ op: 'put', key: keys.desired('n1', 'demo-web-0'), value: d }] }]);
    const copy = await eventually(async () => (await store.get<NodeCopy>(keys.copy('n1', 'secret', 'db_password')))?.value, { what: "n1's copy" });
    expect(copy.spec).toMatchObject({ node: 'n1', kind: 'secret', name: 'db_password', nodeKey: nodeKeys.n1!.id });
    expect(open(copy.spec.sealed, nodeKeys.n1!, copyAad('n1', 'secret', 'db_password', copy.spec.uid)).toString()).toBe(PLAIN);
    expect(() => open(copy.spec.sealed, nodeKeys.n2!, copyAad('n1', 'secret', 'db_password', copy.spec.uid))).toThrow();
    expect((await store.list(keys.copiesOf('n2'))).items).toEqual([]);
    expect((await cli(['secret', 'ls'])).stdout).toMatch(/^db_password\s+23\s+ck-\S+\s+demo-web-0 \(demo\/web revision 1\)\s+1\s/m);
    await commitAtomic(store, [{ ops: [{ op: 'delete', key: keys.desired('n1', 'demo-web-0') }] }]);
    await eventually(async () => !(await store.get(keys.copy('n1', 'secret', 'db_password'))), { what: "n1's copy removed" });
  });

  it('refuses to remove a secret while a service uses it, naming it; removes it once nothing does', async () => {
    const manifest = JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'demo' }, spec: { services: { web: { image: 'x', secrets: [{ source: 'db_password' }] } } } });
    const applied = await cli(['apply', '-f', '-'], manifest);
    expect(applied.code, applied.stderr).toBe(0);
    const d = (await store.get<Deployment>(keys.deployment('demo')))!.value;
    expect(d.spec.services.web!.secrets).toEqual([{ source: 'db_password', version: (await store.get<Secret>(keys.secret('db_password')))!.value.metadata.uid }]);
    expect((await cli(['apply', '-f', '-'], manifest)).stdout).toBe('deployment/demo unchanged\n');
    const rm = await cli(['secret', 'rm', 'db_password', 'db_password_v2']);
    expect(rm.code).toBe(1);
    expect(rm.stderr).toBe('error: secret db_password is used by demo/web; nothing was removed (refer to another secret first, or delete the deployment)\n');
    expect(await store.get(keys.secret('db_password_v2'))).toBeDefined();
    // A reference to nothing is refused, and nothing written.
    const missing = await cli(['apply', '-f', '-'], JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'other' }, spec: { services: { api: { image: 'x', secrets: [{ source: 'nope' }] } } } }));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('service other/api uses secret nope, which does not exist');
    expect(await store.get(keys.deployment('other'))).toBeUndefined();
    expect((await cli(['delete', 'deployment', 'demo'])).code).toBe(0);
    expect((await cli(['secret', 'rm', 'db_password'])).stdout).toBe('secret/db_password removed\n');
    expect(await store.get(keys.secret('db_password'))).toBeUndefined();
  });

  it('a compose file: its secrets and configs are made at apply in the same transaction as the deployment, named by content; removed with it', async () => {
    const app = join(dir, 'shop');
    mkdirSync(app);
    writeFileSync(join(app, 'db_password.txt'), COMPOSE_PW);
    const compose = (svcImage: string) =>
      `name: shop\nservices:\n  db:\n    image: ${svcImage}\n    secrets: [db_password, api_token]\n    configs: [{source: motd, target: /etc/motd, mode: 0440}]\nsecrets:\n  db_password: {file: ./db_password.txt}\n  api_token: {environment: API_TOKEN}\nconfigs:\n  motd: {content: hello}\n`;
    writeFileSync(join(app, 'compose.yaml'), compose('x'));
    const dry = await cli(['apply', '--dry-run', '-f', app], undefined, { API_TOKEN: ENV_TOKEN });
    expect(dry.stdout).toMatch(/^secret\/shop_db_password_[0-9a-f]{12} created \(dry run\)$/m);
    expect((await store.list(keys.secrets())).items.map((i) => i.key)).toEqual(['secrets/db_password_v2']);
    const first = await cli(['apply', '-f', app], undefined, { API_TOKEN: ENV_TOKEN });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout.split('\n').filter(Boolean).map((l) => l.replace(/_[0-9a-f]{12} /, '_V '))).toEqual(['secret/shop_db_password_V created', 'secret/shop_api_token_V created', 'config/shop_motd_V created', 'deployment/shop created (revision 1: created with db)']);
    const dep = (await store.get<Deployment>(keys.deployment('shop')))!;
    const made = (await store.list<Secret>(keys.secrets())).items.filter((i) => i.value.spec.owner?.deployment === 'shop');
    expect(made.map((m) => m.value.spec.owner!.name).sort()).toEqual(['api_token', 'db_password']);
    // One transaction: the objects were created at the revision the deployment was.
    for (const m of made) expect(m.createRevision).toBe(dep.createRevision);
    expect(dep.value.spec.services.db!.secrets!.map((s) => s.target)).toEqual(['db_password', 'api_token']);
    expect(dep.value.spec.services.db!.configs).toMatchObject([{ target: '/etc/motd', mode: 0o440 }]);
    expect((await cli(['apply', '-f', app], undefined, { API_TOKEN: ENV_TOKEN })).stdout).toMatch(/deployment\/shop unchanged\n$/);
    // A changed value is a new object (its services roll); the old one stays for the kept revision.
    writeFileSync(join(app, 'db_password.txt'), `${COMPOSE_PW}-2`);
    PLAINS.push(`${COMPOSE_PW}-2`);
    const second = await cli(['apply', '-f', app], undefined, { API_TOKEN: ENV_TOKEN });
    expect(second.stdout).toMatch(/^secret\/shop_db_password_[0-9a-f]{12} created$/m);
    expect(second.stdout).toMatch(/deployment\/shop configured \(revision 2/);
    expect((await store.list<Secret>(keys.secrets())).items.filter((i) => i.value.spec.owner?.name === 'db_password')).toHaveLength(2);
    const del = await cli(['delete', 'deployment', 'shop']);
    expect(del.code, del.stderr).toBe(0);
    expect((await store.list<Secret>(keys.secrets())).items.map((i) => i.key)).toEqual(['secrets/db_password_v2']);
    expect((await store.list(keys.configs())).items.map((i) => i.key)).toEqual(['configs/app.conf']);
  });

  it('rotates the cluster key: a key added to the file seals from then on, every secret is re-sealed to it, the old one pruned', async () => {
    const before = readClusterKeys(keyFile).primary.id;
    const rot = await cli(['secret', 'key', 'rotate', '--key-file', keyFile]);
    expect(rot.code, rot.stderr).toBe(0);
    const after = readClusterKeys(keyFile).primary.id;
    expect(after).not.toBe(before);
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    // The running controller reads the file again: publishes the new key, re-seals every secret.
    await eventually(async () => (await store.get<ClusterKey>(keys.clusterKey()))?.value.spec.id === after, { what: 'the new key published' });
    await eventually(async () => (await store.list<Secret>(keys.secrets())).items.every((s) => s.value.spec.sealed.key === after), { what: 'every secret re-sealed' });
    expect((await cli(['secret', 'key', 'ls', '--key-file', keyFile])).stdout).toMatch(new RegExp(`^${before}\\s+\\S+\\s+no\\s+no\\s+0$`, 'm'));
    const pruned = await cli(['secret', 'key', 'prune', '--key-file', keyFile]);
    expect(pruned.stdout).toContain(`removed ${before}`);
    expect(readClusterKeys(keyFile).keys.map((k) => k.id)).toEqual([after]);
    // Everything still opens with the new key alone: a node gets its copy.
    const t = templateOf(1, { image: 'x', secrets: [{ source: 'db_password_v2' }] });
    await commitAtomic(store, [{ ops: [{ op: 'put', key: keys.desired('n2', 'r9'), value: { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: 'r9' }, spec: { replica: 'r9', deployment: 'd', service: 's', node: 'n2', revision: 1, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString() } } }] }]);
    const copy = await eventually(async () => (await store.get<NodeCopy>(keys.copy('n2', 'secret', 'db_password_v2')))?.value, { what: "n2's copy after the rotation" });
    expect(open(copy.spec.sealed, nodeKeys.n2!, copyAad('n2', 'secret', 'db_password_v2', copy.spec.uid)).toString()).toBe(PLAIN2);
    // A new secret is sealed to the new key.
    await cli(['secret', 'create', 'after_rotation', '-'], 'x');
    expect((await store.get<Secret>(keys.secret('after_rotation')))!.value.spec.sealed.key).toBe(after);
  });

  it('no value is in any output, the audit log, any key under the prefix (etcdctl), or any file of etcd (a snapshot too)', async () => {
    const audit = await cli(['audit', '-o', 'json']);
    expect(audit.code, audit.stderr).toBe(0);
    expect(audit.stdout).toContain('secret_created');
    for (const [what, out] of outputs) noPlaintext(what, out);
    const env = { ...process.env, ETCDCTL_API: '3', ETCDCTL_ENDPOINTS: etcd.endpoint };
    const get = spawnSync('etcdctl', ['get', '--prefix', prefix], { env, encoding: 'buffer', maxBuffer: 64 << 20 });
    expect(get.status, get.stderr.toString()).toBe(0);
    expect(get.stdout.includes(Buffer.from('secrets/db_password_v2'))).toBe(true);
    noPlaintext('etcdctl get --prefix', get.stdout);
    const snap = join(dir, 'etcd.snapshot');
    expect(spawnSync('etcdctl', ['snapshot', 'save', snap], { env }).status).toBe(0);
    noPlaintext('an etcd snapshot', readFileSync(snap));
    const files = (d: string): string[] => readdirSync(d, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(join(d, e.name)) : [join(d, e.name)]));
    const data = files(etcd.member.spec.dataDir);
    expect(data.length).toBeGreaterThan(1);
    for (const f of data) noPlaintext(f, readFileSync(f));
  });
});
