// Compose files through the CLI as an operator runs it (./bin/jaco) against a real etcd: apply
// (a file, a directory, stdin with --name), unchanged and configured, warnings on stderr, diff,
// convert, delete -f, a refused file that writes nothing, and depends_on restart: true as apply and
// diff write it (read through COMPOSE_FILE, no -f).
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { keys } from '../../src/api/keys.js';
import type { Deployment } from '../../src/api/types.js';
import { jaco } from '../support/cli.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const etcd = useTestEtcd();

const compose = (level: string) => `services:
  web:
    image: jaco-demo/busybox:1
    environment:
      - LEVEL=${level}
      - TOKEN=\${TOKEN:?set TOKEN}
    deploy:
      replicas: 2
      resources:
        limits: {cpus: 0.5, memory: 64M}
    healthcheck:
      test: ["CMD", "true"]
      interval: 2s
    restart: always
  worker:
    image: jaco-demo/busybox:1
    command: sleep 3600
`;

function app(dirName: string, level = 'info'): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'jaco-compose-')), dirName);
  mkdirSync(dir);
  writeFileSync(join(dir, 'compose.yaml'), compose(level));
  writeFileSync(join(dir, '.env'), 'TOKEN=abc\n');
  return dir;
}

describe('jaco apply -f compose.yaml', () => {
  it('creates a deployment named after the directory, then unchanged, then configured; warnings on stderr', async () => {
    const prefix = uniquePrefix();
    const dir = app('My_Shop');
    const first = await jaco(['apply', '-f', join(dir, 'compose.yaml')], { endpoint: etcd.endpoint, prefix });
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe('deployment/my-shop created (revision 1: created with web, worker)\n');
    expect(first.stderr).toMatch(/^warning: .*compose\.yaml:14:14: services\.web\.restart: restart: jaco owns restarts/m);
    const d = (await etcd.store(prefix).get<Deployment>(keys.deployment('my-shop')))!.value;
    expect(d.spec.services.web).toMatchObject({ replicas: 2, env: { LEVEL: 'info', TOKEN: 'abc' }, resources: { cpu: 0.5, memory: '64Mi' }, healthcheck: { test: ['CMD', 'true'], interval: '2s' } });
    expect(d.spec.services.worker).toMatchObject({ args: ['sleep', '3600'] });
    // The directory means its compose.yaml.
    const again = await jaco(['apply', '-f', dir], { endpoint: etcd.endpoint, prefix });
    expect(again.stdout).toBe('deployment/my-shop unchanged\n');
    writeFileSync(join(dir, 'compose.yaml'), compose('debug'));
    const diff = await jaco(['diff', '-f', dir], { endpoint: etcd.endpoint, prefix });
    expect(diff.code).toBe(1);
    expect(diff.stdout).toMatch(/-\s+LEVEL: info\n\+\s+LEVEL: debug/);
    const changed = await jaco(['apply', '-f', dir], { endpoint: etcd.endpoint, prefix });
    expect(changed.stdout).toMatch(/^deployment\/my-shop configured \(revision 2/);
    const del = await jaco(['delete', '-f', dir], { endpoint: etcd.endpoint, prefix });
    expect(del.stdout).toBe('deployment/my-shop deleted\n');
    expect(await etcd.store(prefix).get(keys.deployment('my-shop'))).toBeUndefined();
  });

  it('reads stdin with --name, and refuses stdin without a name', async () => {
    const prefix = uniquePrefix();
    const text = compose('info').replace('${TOKEN:?set TOKEN}', 'x');
    const named = await jaco(['apply', '-f', '-', '--name', 'piped'], { endpoint: etcd.endpoint, prefix, input: text });
    expect(named.code, named.stderr).toBe(0);
    expect(named.stdout).toBe('deployment/piped created (revision 1: created with web, worker)\n');
    const anonymous = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: text });
    expect(anonymous.code).toBe(1);
    expect(anonymous.stderr).toContain('<stdin>:1:1: a compose file from stdin needs a name: --name NAME, COMPOSE_PROJECT_NAME, or a top-level name:');
  });

  it('a refused file writes nothing and names file, line and field; --strict refuses what is otherwise ignored', async () => {
    const prefix = uniquePrefix();
    const dir = app('strict');
    const before = (await etcd.store(prefix).listRaw('')).revision;
    const strict = await jaco(['apply', '-f', dir, '--strict'], { endpoint: etcd.endpoint, prefix });
    expect(strict.code).toBe(1);
    expect(strict.stderr).toMatch(/compose\.yaml:14:14: services\.web\.restart: restart: jaco owns restarts.* \[ignored\]/);
    const missing = await jaco(['apply', '-f', dir, '--env-file', '/dev/null'], { endpoint: etcd.endpoint, prefix });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/compose\.yaml:6:9: services\.web\.environment\[1\]: required variable TOKEN is missing a value: set TOKEN/);
    expect((await etcd.store(prefix).listRaw('')).revision).toBe(before);
  });

  it('convert prints the Deployment (yaml or json) without touching etcd', async () => {
    const dir = app('converted');
    const y = await jaco(['convert', '-f', dir], { endpoint: 'http://127.0.0.1:1' });
    expect(y.code, y.stderr).toBe(0);
    expect(parse(y.stdout)).toMatchObject({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'converted' }, spec: { services: { web: { replicas: 2 } } } });
    const j = await jaco(['convert', '-f', dir, '-o', 'json'], { endpoint: 'http://127.0.0.1:1' });
    expect(JSON.parse(j.stdout).spec.services.worker.args).toEqual(['sleep', '3600']);
    // What convert prints applies as a native manifest, to the same spec.
    const prefix = uniquePrefix();
    const native = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: y.stdout });
    expect(native.stdout).toBe('deployment/converted created (revision 1: created with web, worker)\n');
    const same = await jaco(['apply', '-f', dir], { endpoint: etcd.endpoint, prefix });
    expect(same.stdout).toBe('deployment/converted unchanged\n');
  });

  it('depends_on restart: true — apply writes the dependency’s spec hash into its dependent; diff agrees; a changed dependency changes it; no -f reads COMPOSE_FILE', async () => {
    const prefix = uniquePrefix();
    const dir = join(mkdtempSync(join(tmpdir(), 'jaco-compose-')), 'restarts');
    mkdirSync(dir);
    const file = join(dir, 'app.yaml');
    const text = (level: string) => `services:\n  db:\n    image: jaco-demo/busybox:1\n    environment: {LEVEL: ${level}}\n  web:\n    image: jaco-demo/busybox:1\n    depends_on:\n      db: {condition: service_started, restart: true}\n`;
    writeFileSync(file, text('info'));
    const env = { COMPOSE_FILE: file };
    const first = await jaco(['apply'], { endpoint: etcd.endpoint, prefix, env });
    expect(first.code, first.stderr).toBe(0);
    const stored = async () => (await etcd.store(prefix).get<Deployment>(keys.deployment('restarts')))!.value.spec.services;
    const hash1 = (await stored()).web!.dependsOn!.db!.specHash;
    expect(hash1).toMatch(/^[0-9a-f]{64}$/);
    expect((await stored()).web!.dependsOn!.db).toMatchObject({ condition: 'service_started', restart: true });
    // What apply wrote is what diff computes: nothing differs.
    expect((await jaco(['diff'], { endpoint: etcd.endpoint, prefix, env })).code).toBe(0);
    writeFileSync(file, text('debug'));
    const diff = await jaco(['diff'], { endpoint: etcd.endpoint, prefix, env });
    expect(diff.code).toBe(1);
    expect(diff.stdout).toMatch(new RegExp(`^- +specHash: ${hash1}$`, 'm'));
    expect((await jaco(['apply'], { endpoint: etcd.endpoint, prefix, env })).stdout).toMatch(/^deployment\/restarts configured/);
    expect((await stored()).web!.dependsOn!.db!.specHash).not.toBe(hash1);
  });

  it('several files are one application: a directory with its override file, -f a -f b in order, convert -o compose', async () => {
    const dir = app('layered');
    writeFileSync(join(dir, 'compose.override.yaml'), 'services:\n  web:\n    deploy:\n      replicas: 3\n  extra:\n    extends: {file: compose.yaml, service: worker}\n    command: sleep 60\n');
    writeFileSync(join(dir, 'prod.yaml'), 'services:\n  worker:\n    environment: {STAGE: prod}\n');
    const fromDir = await jaco(['convert', '-f', dir], { endpoint: 'http://127.0.0.1:1' });
    expect(fromDir.code, fromDir.stderr).toBe(0);
    const d = parse(fromDir.stdout) as Deployment;
    expect(d.spec.services.web!.replicas).toBe(3);
    expect(d.spec.services.extra).toMatchObject({ image: 'jaco-demo/busybox:1', args: ['sleep', '60'] });
    // Named files: only those, in order (the override beside them is not read).
    const named = await jaco(['convert', '-f', join(dir, 'compose.yaml'), '-f', join(dir, 'prod.yaml')], { endpoint: 'http://127.0.0.1:1' });
    expect(named.code, named.stderr).toBe(0);
    const n = parse(named.stdout) as Deployment;
    expect(n.spec.services.web!.replicas).toBe(2);
    expect(n.spec.services.worker!.env).toEqual({ STAGE: 'prod' });
    expect(n.spec.services.extra).toBeUndefined();
    const model = await jaco(['convert', '-f', dir, '-o', 'compose'], { endpoint: 'http://127.0.0.1:1' });
    expect(model.code, model.stderr).toBe(0);
    expect(parse(model.stdout).services.extra).toEqual({ image: 'jaco-demo/busybox:1', command: 'sleep 60' });
    // A problem in the override file is reported there.
    writeFileSync(join(dir, 'compose.override.yaml'), 'services:\n  web:\n    deploy:\n      replicas: many\n');
    const bad = await jaco(['convert', '-f', dir], { endpoint: 'http://127.0.0.1:1' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/compose\.override\.yaml:4:17: services\.web\.deploy\.replicas: /);
  });
});
