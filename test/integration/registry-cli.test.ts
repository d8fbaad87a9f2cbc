// `jaco registry login | ls | logout | default` as an operator runs them (./bin/jaco) against a
// real etcd and a real TLS registry with users: the login checked against the registry, stored
// where the nodes read it, audited, and the password never printed by anything.
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { keys } from '../../src/api/keys.js';
import type { ImageSettings, Registry } from '../../src/api/types.js';
import { qualifyImage, registryAccessFor } from '../../src/images/access.js';
import { formatReference, parseImageReference } from '../../src/images/reference.js';
import { resolveDigest } from '../../src/images/registry.js';
import { readImageAccess } from '../../src/cli/registries.js';
import { freePort } from '../../src/runtime/etcd.js';
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

  beforeAll(async () => {
    reg = await startTestRegistry({ tls: true, users: { puller: PASSWORD } });
    dir = mkdtempSync(join(tmpdir(), 'jaco-registry-cli-'));
    prefix = uniquePrefix();
  });
  afterAll(async () => {
    // Nothing any command printed holds the password: not a table, a YAML, an audit record or an error.
    for (const r of outputs) expect(`${r.stdout}${r.stderr}`).not.toContain(PASSWORD);
    expect(outputs.length).toBeGreaterThan(10);
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

    // Stored for the nodes, the password with it (etcd RBAC keeps it to agents and controllers).
    const stored = (await etcd.store(prefix).get<Registry>(keys.registry(reg.host)))!.value;
    expect(stored.spec).toEqual({ host: reg.host, username: 'puller', password: PASSWORD, caPem: reg.ca!.certPem.trim() + '\n' });

    const ls = await cli(['registry', 'ls']);
    expect(ls.stdout.split('\n')[0]).toMatch(/^HOST\s+USER\s+CA\s+INSECURE\s+DEFAULT\s+AGE$/);
    expect(ls.stdout.split('\n')[1]).toMatch(new RegExp(`^${reg.host.replace(/\./g, '\\.')}\\s+puller\\s+yes\\s+no\\s+no\\s+\\d+s$`));
    const yaml = parse((await cli(['registry', 'ls', '-o', 'yaml'])).stdout) as { kind: string; items: Registry[] };
    expect(yaml.kind).toBe('List');
    expect(yaml.items.map((i) => i.spec)).toEqual([{ host: reg.host, username: 'puller', caPem: stored.spec.caPem }]);
    const json = JSON.parse((await cli(['registry', 'ls', '-o', 'json'])).stdout) as { items: Registry[] };
    expect(json.items[0]!.spec).not.toHaveProperty('password');

    const audit = await cli(['audit', '--type', 'registry_login', '-o', 'json']);
    const records = audit.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; payload: Record<string, unknown> });
    expect(records.map((a) => a.payload)).toEqual([{ host: reg.host, result: 'created', username: 'puller', ca: true, insecure: false }]);

    // What a node-agent would do with what is stored: resolve (and pull) with it.
    const digest = await reg.pushTinyImage('team/app', '1', { username: 'puller', password: PASSWORD });
    const { registries, settings } = await readImageAccess(etcd.store(prefix));
    const ref = qualifyImage(parseImageReference(`${reg.host}/team/app:1`), settings);
    expect(await resolveDigest(ref, registryAccessFor(ref.registry, registries.map((v) => v.value)))).toBe(digest);
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
