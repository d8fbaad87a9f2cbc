// `jaco registry login | ls | logout | default` as an operator runs them (./bin/jaco) against a
// real etcd, a real TLS registry with users and a real secrets controller: the login checked
// against the registry, its password stored as a secret sealed to the cluster key and copied only
// to the nodes that pull from the registry, audited, and the password never printed by anything.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClusterKey, type ImageSettings, type Node, type NodeCopy, type Registry, type ReplicaDesired, type Secret } from '../../src/api/types.js';
import { templateOf } from '../../src/api/serving.js';
import { secretsController } from '../../controllers/secrets/controller.js';
import { startController, type SingleController } from '../../src/runtime/manager.js';
import { ensureClusterKeyFile, readClusterKeys } from '../../src/secrets/keyfile.js';
import { copyAad, generateKeyPair, open } from '../../src/secrets/seal.js';
import { commitAtomic } from '../../src/store/writer.js';
import { FAST } from '../../src/timings.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';
import { qualifyImage, registryAccessFor } from '../../src/images/access.js';
import { formatReference, parseImageReference } from '../../src/images/reference.js';
import { resolveDigest } from '../../src/images/registry.js';
import { readImageAccess } from '../../src/app/registries.js';
import { freePort } from '../../src/supervise/etcd.js';
import { jaco, type CliResult } from '../support/cli.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { startTestRegistry, type TestRegistry } from '../support/registry.js';

const etcd = useTestEtcd();
const PASSWORD = 'p4ss-w0rd-never-printed';

describe('jaco registry', () => {
  let reg: TestRegistry;
  let dir: string;
  let prefix: string;
  const outputs: CliResult[] = [];
  const cli = async (args: string[], input?: string) => {
    const r = await jaco(args, { endpoint: etcd.endpoint, prefix, ...(input !== undefined ? { input } : {}) });
    outputs.push(r);
    return r;
  };

  let ctl: SingleController<undefined, unknown, unknown, never>;
  const nodeKey = generateKeyPair('nk');

  beforeAll(async () => {
    reg = await startTestRegistry({ tls: true, users: { puller: PASSWORD } });
    dir = mkdtempSync(join(tmpdir(), 'jaco-registry-cli-'));
    prefix = uniquePrefix();
    // The secrets controller publishes the cluster key a login seals the password to, and copies it to nodes.
    const keyFile = join(dir, 'secrets.key');
    ensureClusterKeyFile(keyFile);
    const store = etcd.store(prefix);
    ctl = (await startController({ store, timings: FAST, log: testLogger(), identity: 'test' }, secretsController(FAST, { keyFile }))) as never;
    await eventually(async () => (await store.get<ClusterKey>(keys.clusterKey()))?.value.spec.id === readClusterKeys(keyFile).primary.id, { what: 'the cluster key published' });
    const node: Node = { apiVersion: API_VERSION, kind: 'Node', metadata: { name: 'n1' }, spec: {}, status: { capacity: { cpuMillis: 1000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 't', registeredAt: new Date().toISOString(), secretsKey: { id: nodeKey.id, publicKey: nodeKey.publicKey } } };
    await commitAtomic(store, [{ ops: [{ op: 'put', key: keys.node('n1'), value: node }] }]);
  });
  afterAll(async () => {
    // Nothing any command printed holds the password: not a table, a YAML, an audit record or an error.
    for (const r of outputs) expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
    expect(outputs.length).toBeGreaterThan(10);
    await ctl?.stop();
    await reg?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a wrong password after asking the registry, and stores nothing', async () => {
    const r = await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile], 'not-the-password\n');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('error: authentication required (the credentials of puller were refused) (image_unauthorized); nothing was stored (--no-verify stores without checking)\n');
    // Without the CA the registry's certificate is not trusted: said so, nothing stored.
    const noCa = await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin'], `${PASSWORD}\n`);
    expect(noCa.code).toBe(1);
    expect(noCa.stderr).toContain("TLS: the registry's certificate is not trusted");
    expect((await etcd.store(prefix).list(keys.registries())).items).toEqual([]);
  });

  it('logs in (checked against the registry), lists without the password, audits without it, and the nodes’ access resolves with it', async () => {
    const r = await cli(['registry', 'login', reg.host, '--username', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile], `${PASSWORD}\n`);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`registry/${reg.host} created: user puller, CA set, login checked\n`);
    expect((await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile], PASSWORD)).stdout).toBe(`registry/${reg.host} unchanged: user puller, CA set, login checked\n`);

    // Stored for the nodes: the user, and the password as a secret sealed to the cluster key (never in clear).
    const store = etcd.store(prefix);
    const stored = (await store.get<Registry>(keys.registry(reg.host)))!.value;
    const secretName = stored.spec.passwordSecret!;
    expect(secretName).toMatch(new RegExp(`^registry_${reg.host.replace(/[.]/g, '\\.').replace(':', '_')}_[0-9a-f]{12}$`));
    expect(stored.spec).toEqual({ host: reg.host, username: 'puller', passwordSecret: secretName, caPem: reg.ca!.certPem.trim() + '\n' });
    expect((await store.get<Secret>(keys.secret(secretName)))!.value.spec).toMatchObject({ size: PASSWORD.length, registry: reg.host });
    const raw = await store.listRaw('');
    for (const kv of raw.kvs) expect(kv.value.toString('utf8'), kv.key.toString()).not.toContain(PASSWORD);

    const ls = await cli(['registry', 'ls']);
    expect(ls.stdout.split('\n')[0]).toMatch(/^HOST\s+USER\s+CA\s+INSECURE\s+DEFAULT\s+AGE$/);
    expect(ls.stdout.split('\n')[1]).toMatch(new RegExp(`^${reg.host.replace(/\./g, '\\.')}\\s+puller\\s+yes\\s+no\\s+no\\s+\\d+s$`));
    const yaml = parse((await cli(['registry', 'ls', '-o', 'yaml'])).stdout) as { kind: string; items: Registry[] };
    expect(yaml.kind).toBe('List');
    expect(yaml.items.map((i) => i.spec)).toEqual([{ host: reg.host, username: 'puller', passwordSecret: secretName, caPem: stored.spec.caPem }]);
    // The secret lists as used by its registry, and cannot be removed while the registry names it.
    expect((await cli(['secret', 'ls', '-o', 'json'])).stdout).toContain(`registry/${reg.host}`);
    const rm = await cli(['secret', 'rm', secretName]);
    expect(rm.code).toBe(1);
    expect(rm.stderr).toContain(`secret ${secretName} is used by registry/${reg.host}`);

    const audit = await cli(['audit', '--type', 'registry_login', '-o', 'json']);
    const records = audit.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; payload: Record<string, unknown> });
    expect(records.map((a) => a.payload)).toEqual([{ host: reg.host, result: 'created', username: 'puller', ca: true, insecure: false }]);

    // No node pulls from the registry yet: no copy. A replica placed on n1 with an image there: n1 gets one.
    expect((await store.list(keys.copiesOf('n1'))).items).toEqual([]);
    const t = templateOf(1, { image: `${reg.host}/team/app:1` });
    const desired: ReplicaDesired = { apiVersion: API_VERSION, kind: 'ReplicaDesired', metadata: { name: 'r1' }, spec: { replica: 'r1', deployment: 'd', service: 's', node: 'n1', revision: 1, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString() } };
    await commitAtomic(store, [{ ops: [{ op: 'put', key: keys.desired('n1', 'r1'), value: desired }] }]);
    const copy = await eventually(async () => (await store.get<NodeCopy>(keys.copy('n1', 'secret', secretName)))?.value, { what: "the registry password's copy on n1" });

    // What the node-agent does with it: open its copy with its own key, resolve (and pull) with it.
    const digest = await reg.pushTinyImage('team/app', '1', { username: 'puller', password: PASSWORD });
    const { registries, settings } = await readImageAccess(store);
    const ref = qualifyImage(parseImageReference(`${reg.host}/team/app:1`), settings);
    const nodeOpens = (secret: string) => open(copy.spec.sealed, nodeKey, copyAad('n1', 'secret', secret, copy.spec.uid)).toString('utf8');
    expect(await resolveDigest(ref, registryAccessFor(ref.registry, registries.map((v) => v.value), undefined, nodeOpens))).toBe(digest);
    // The CLI, which cannot open the secret, has only the CA: the registry refuses it.
    await expect(resolveDigest(ref, registryAccessFor(ref.registry, registries.map((v) => v.value)))).rejects.toThrow(/authentication required/);

    // A login with another password: a new secret, the old one removed with it; the copy follows.
    const again = await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile, '--no-verify'], 'another-password');
    expect(again.stdout).toBe(`registry/${reg.host} updated: user puller, CA set, not checked\n`);
    const next = (await store.get<Registry>(keys.registry(reg.host)))!.value.spec.passwordSecret!;
    expect(next).not.toBe(secretName);
    expect(await store.get(keys.secret(secretName))).toBeUndefined();
    await eventually(async () => (await store.get(keys.copy('n1', 'secret', next))) !== undefined && (await store.get(keys.copy('n1', 'secret', secretName))) === undefined, { what: "n1's copy replaced" });
    // Back to the right password (the tests below use the registry), and the replica gone: no copy left.
    await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile], PASSWORD);
    await commitAtomic(store, [{ ops: [{ op: 'delete', key: keys.desired('n1', 'r1') }] }]);
    await eventually(async () => (await store.list(keys.copiesOf('n1'))).items.length === 0, { what: "n1's copies removed" });
  });

  it('stores an insecure registry it cannot reach with --no-verify, and logs out', async () => {
    const host = `127.0.0.1:${await freePort()}`;
    const unchecked = await cli(['registry', 'login', host, '--insecure']);
    expect(unchecked.code).toBe(1);
    expect(unchecked.stderr).toBe(`error: connection refused (http://${host}) (registry_unreachable); nothing was stored (--no-verify stores without checking)\n`);
    expect((await cli(['registry', 'login', host, '--insecure', '--no-verify'])).stdout).toBe(`registry/${host} created: no user, insecure (plain HTTP), not checked\n`);
    expect((await cli(['registry', 'ls'])).stdout).toMatch(new RegExp(`\\n${host.replace(/\./g, '\\.')}\\s+-\\s+no\\s+yes\\s`));
    expect((await cli(['registry', 'logout', host])).stdout).toBe(`registry/${host} removed\n`);
    expect((await cli(['registry', 'logout', host])).stdout).toBe(`registry/${host}: nothing stored\n`);
    expect(await etcd.store(prefix).get(keys.registry(host))).toBeUndefined();
    const audit = await cli(['audit', '--type', 'registry_logout', '-o', 'json']);
    expect(JSON.parse(audit.stdout.trim()).payload).toEqual({ host });
    // A logout removes the registry's password secret with it.
    expect((await etcd.store(prefix).list(keys.secrets())).items).toHaveLength(1);
    expect((await cli(['registry', 'logout', reg.host])).stdout).toBe(`registry/${reg.host} removed\n`);
    expect((await etcd.store(prefix).list(keys.secrets())).items).toEqual([]);
    expect((await cli(['registry', 'login', reg.host, '-u', 'puller', '--password-stdin', '--ca-file', reg.ca!.certFile], PASSWORD)).code).toBe(0);
  });

  it('junk under a registry key: ls names it, login writes over it, logout removes it', async () => {
    const host = `127.0.0.1:${await freePort()}`;
    const store = etcd.store(prefix);
    await store.ns.put(keys.registry(host)).value('not json {');
    const ls = await cli(['registry', 'ls']);
    expect(ls.code, ls.stderr).toBe(0);
    expect(ls.stderr).toContain(`warning: registries/${host} cannot be read`);
    expect((await cli(['registry', 'login', host, '--insecure', '--no-verify'])).stdout).toBe(`registry/${host} created: no user, insecure (plain HTTP), not checked\n`);
    expect((await store.get<Registry>(keys.registry(host)))?.value.spec).toEqual({ host, insecure: true });
    await store.ns.put(keys.registry(host)).value('not json {');
    expect((await cli(['registry', 'logout', host])).stdout).toBe(`registry/${host} removed\n`);
    expect(await store.ns.get(keys.registry(host)).string()).toBeNull();
  });

  it('shows and sets the cluster image setting: no default registry and no Docker Hub until told', async () => {
    expect((await cli(['registry', 'default'])).stdout).toBe('default registry: <none>\nshort names at Docker Hub: no\n');
    expect((await cli(['registry', 'default', reg.host])).stdout).toBe(`image settings changed\ndefault registry: ${reg.host}\nshort names at Docker Hub: no\n`);
    expect((await cli(['registry', 'ls'])).stdout).toMatch(/\syes\s+\d+s\n$/);
    expect((await cli(['registry', 'default', '--hub'])).stdout).toBe(`image settings changed\ndefault registry: ${reg.host}\nshort names at Docker Hub: yes\n`);
    expect((await cli(['registry', 'default', '--hub'])).stdout).toContain('image settings unchanged\n');
    const yaml = parse((await cli(['registry', 'default', '-o', 'yaml'])).stdout) as ImageSettings;
    expect(yaml).toMatchObject({ kind: 'ImageSettings', spec: { defaultRegistry: reg.host, hub: true } });
    // Short names now go to the default registry.
    const { settings } = await readImageAccess(etcd.store(prefix));
    expect(formatReference(qualifyImage(parseImageReference('team/app:1'), settings))).toBe(`${reg.host}/team/app:1`);
    expect((await cli(['registry', 'default', '--unset', '--no-hub'])).stdout).toBe('image settings changed\ndefault registry: <none>\nshort names at Docker Hub: no\n');
    const stored = await etcd.store(prefix).get<ImageSettings>(keys.imageSettings());
    expect(stored!.value.spec).toEqual({ hub: false });
    const audit = await cli(['audit', '--type', 'image_settings_changed', '-o', 'json']);
    expect(audit.stdout.trim().split('\n').map((l) => JSON.parse(l).payload)).toEqual([
      { defaultRegistry: reg.host, hub: false, previous: { defaultRegistry: null, hub: false } },
      { defaultRegistry: reg.host, hub: true, previous: { defaultRegistry: reg.host, hub: false } },
      { defaultRegistry: null, hub: false, previous: { defaultRegistry: reg.host, hub: true } },
    ]);
  });

  it('refuses bad input with a one-line error and exit 1, writing nothing', async () => {
    const notCa = join(dir, 'not-a-cert.pem');
    writeFileSync(notCa, 'hello\n');
    const cases: [string[], string | undefined, RegExp][] = [
      [['registry', 'login', 'https://ghcr.io', '--no-verify'], undefined, /"https:\/\/ghcr\.io" is not a registry host/],
      [['registry', 'login', '127.0.0.1:1', '-u', 'x', '--no-verify'], undefined, /give the password on standard input with --password-stdin/],
      [['registry', 'login', '127.0.0.1:1', '--password-stdin', '--no-verify'], 'pw', /--password-stdin needs --username/],
      [['registry', 'login', '127.0.0.1:1', '-u', 'x', '--password-stdin', '--no-verify'], '\n', /the password read from standard input is empty/],
      [['registry', 'login', '127.0.0.1:1', '--ca-file', notCa, '--no-verify'], undefined, /is not a PEM CA certificate/],
      [['registry', 'login', '127.0.0.1:1', '--ca-file', notCa, '--insecure', '--no-verify'], undefined, /exclude each other/],
      [['registry', 'default', '127.0.0.1:1', '--unset'], undefined, /give a registry or --unset, not both/],
      [['registry', 'ls', '-o', 'xml'], undefined, /unknown output format "xml"/],
    ];
    const before = await etcd.store(prefix).listRaw('');
    for (const [args, input, why] of cases) {
      const r = await cli(args, input);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toMatch(why);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
    }
    expect((await etcd.store(prefix).listRaw('')).revision).toBe(before.revision);
  });

  it('has --help with examples for every registry command', async () => {
    for (const c of ['login', 'logout', 'ls', 'default']) {
      const r = await cli(['registry', c, '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toContain(`Usage: jaco registry ${c}`);
      const examples = r.stdout.slice(r.stdout.indexOf('Examples:'));
      expect(r.stdout, c).toContain('Examples:');
      expect(examples, c).toContain(`jaco registry ${c}`);
    }
  });
});
