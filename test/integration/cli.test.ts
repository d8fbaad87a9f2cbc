// The CLI as an operator runs it (./bin/jaco) against a real etcd: apply semantics, revisions,
// all-or-nothing, bad input that writes nothing, exit codes, output formats.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { BAD_CORPUS } from '../fixtures/manifests/bad-corpus.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { jaco } from '../support/cli.js';
import { keys } from '../../src/api/keys.js';
import { commitAtomic } from '../../src/store/writer.js';

const etcd = useTestEtcd();

const BAD = join(PACKAGE_ROOT, 'test/fixtures/manifests/bad');
const GOOD = join(PACKAGE_ROOT, 'test/fixtures/manifests/good');
const tmp = mkdtempSync(join(tmpdir(), 'jaco-cli-'));

function manifest(name: string, services: Record<string, unknown>): string {
  return JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name }, spec: { services } });
}

/** A registered node of 2 CPUs and 1 GiB, as its agent would write it (status extras merged in). */
function nodeValue(name: string, status: Record<string, unknown> = {}) {
  return { apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis: 2000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 't', registeredAt: new Date().toISOString(), ...status } };
}

/** A fresh heartbeat with Docker up: the node is Ready for an hour. */
function readyHeartbeat(name: string) {
  return { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: new Date().toISOString(), intervalMs: 3_600_000, agentVersion: 't', dockerUp: true } };
}

/** Everything under the prefix, and the store revision: to prove nothing was written. */
async function snapshot(prefix: string) {
  const store = etcd.store(prefix);
  const { kvs, revision } = await store.listRaw('');
  return { keys: kvs.map((k) => k.key.toString()), revision };
}

describe('jaco apply', () => {
  it('creates, reports unchanged, configures, and keeps a revision per spec change', async () => {
    const prefix = uniquePrefix();
    const f = join(tmp, 'web.yaml');
    writeFileSync(f, `# web\napiVersion: jaco.dev/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  services:\n    web:\n      image: jaco-demo/busybox:1\n      replicas: 2\n`);
    let r = await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix });
    // No registry in this cluster: said once, not refused (docs/images.md).
    expect(r.stderr).toBe('warning: not pinned to a digest: jaco-demo/busybox:1 (the cluster has no default registry and does not resolve short names at Docker Hub (jaco registry default): each node runs its own copy)\n');
    expect(r.stdout).toBe('deployment/web created (revision 1: created with web)\n');
    r = await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix });
    expect(r.stdout).toBe('deployment/web unchanged\n');
    // A comment and reordering are not a change.
    writeFileSync(f, `apiVersion: jaco.dev/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  services:\n    web:\n      replicas: 2 # two\n      image: jaco-demo/busybox:1\n`);
    expect((await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix })).stdout).toBe('deployment/web unchanged\n');
    writeFileSync(f, manifest('web', { web: { image: 'jaco-demo/busybox:2', replicas: 3 } }));
    r = await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix });
    expect(r.stdout).toBe('deployment/web configured (revision 2: web: image jaco-demo/busybox:1 → jaco-demo/busybox:2, replicas 2 → 3)\n');

    const got = await jaco(['get', 'deployment', 'web', '-o', 'json'], { endpoint: etcd.endpoint, prefix });
    const d = JSON.parse(got.stdout);
    expect(d.metadata.generation).toBe(2);
    expect(Number(d.metadata.resourceVersion)).toBeGreaterThan(0);
    const store = etcd.store(prefix);
    const revs = await store.list<{ spec: { revision: number; template: { services: { web: { image: string } } } } }>('revisions/web/');
    expect(revs.items.map((i) => [i.value.spec.revision, i.value.spec.template.services.web.image])).toEqual([
      [1, 'jaco-demo/busybox:1'],
      [2, 'jaco-demo/busybox:2'],
    ]);
    const audit = await jaco(['audit', '--type', 'deployment_applied', '-o', 'json'], { endpoint: etcd.endpoint, prefix });
    expect(audit.stdout.trim().split('\n').map((l) => JSON.parse(l).payload.revision)).toEqual([1, 2]);
  });

  it('is all-or-nothing: a bad second document leaves the first unwritten', async () => {
    const prefix = uniquePrefix();
    const before = await snapshot(prefix);
    const r = await jaco(['apply', '-f', join(BAD, 'second-doc-bad.yaml')], { endpoint: etcd.endpoint, prefix });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('nothing was written');
    expect(r.stderr).toContain('second-doc-bad.yaml:18:24: document 2 (Deployment "bad-one"): spec.services.web.stopGracePeriod');
    expect(await snapshot(prefix)).toEqual(before);
  });

  it.each(BAD_CORPUS)('refuses %s with file:line, exit 1, and writes nothing', async (file, expected) => {
    const prefix = uniquePrefix();
    const before = await snapshot(prefix);
    const r = await jaco(['apply', '-f', join(BAD, file)], { endpoint: etcd.endpoint, prefix });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    for (const e of expected) expect(r.stderr).toContain(e.replace(`${file}:`, `${join(BAD, file)}:`));
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('refuses an object too large for one etcd request up front, with its size and the limit', async () => {
    const prefix = uniquePrefix();
    const f = join(tmp, 'huge.yaml');
    writeFileSync(f, manifest('huge', { web: { image: 'x', env: { BLOB: 'x'.repeat(1_000_000) } } }));
    const r = await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/deployment "huge" .* is [0-9.]+ MiB \([0-9]+ bytes\); etcd accepts at most 1\.50 MiB \(1572864 bytes\) per request/);
    expect((await snapshot(prefix)).keys).toEqual([]);
  });

  it('refuses a file over the manifest size limit before parsing it', async () => {
    const f = join(tmp, 'enormous.yaml');
    writeFileSync(f, '#'.repeat(17 * 1024 * 1024));
    const r = await jaco(['apply', '-f', f], { endpoint: etcd.endpoint, prefix: uniquePrefix() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('file is 17.0 MiB; manifests are limited to 16 MiB');
  });

  it('refuses a deployment whose replica ids would collide with an existing one', async () => {
    const prefix = uniquePrefix();
    expect((await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('a-b', { c: { image: 'x' } }) })).code).toBe(0);
    const before = await snapshot(prefix);
    const r = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('a', { 'b-c': { image: 'x' } }) });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('would both name replicas "a-b-c-<n>"');
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('refuses a port another deployment publishes, or one in a registered node\'s dynamic range, and writes nothing', async () => {
    const prefix = uniquePrefix();
    const web = (published: number) => ({ image: 'x', ports: [{ name: 'http', containerPort: 80, published }] });
    expect((await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('shop', { web: web(18080) }) })).code).toBe(0);
    const before = await snapshot(prefix);
    const clash = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('blog', { site: web(18080) }) });
    expect(clash.code).toBe(1);
    expect(clash.stderr).toContain('port 18080 is published by deployment "blog" service "site" and by deployment "shop" service "web"');
    expect(await snapshot(prefix)).toEqual(before);
    // A node registered with its own range: a port inside it is refused, named with the node.
    const store = etcd.store(prefix);
    const node = nodeValue('edge', { portRange: { min: 18000, max: 18999 } });
    await commitAtomic(store, [{ ops: [{ op: 'put', key: keys.node('edge'), value: node }] }]);
    const inRange = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('blog', { site: web(18500) }) });
    expect(inRange.code).toBe(1);
    expect(inRange.stderr).toContain('port 18500 published by deployment "blog" service "site" lies in the dynamic host port range 18000-18999 of node edge');
    // Moving shop's own port is fine: its old claim goes with the re-apply.
    expect((await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('shop', { web: web(19080) }) })).code).toBe(0);
  });

  it("get endpoints and describe service show each node's ingress routing of every copy", async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    expect((await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('shop', { web: { image: 'x', ports: [{ name: 'http', containerPort: 80, published: 18080 }] } }) })).code).toBe(0);
    const server = (replica: string, n: number, state: 'ready' | 'drain', check = 'UP') => ({ replica, node: `node-${n}`, address: `127.0.1.${n}`, port: 20000 + n, state, check });
    const ingress = (n: number, servers: object[]) => ({ apiVersion: 'jaco.dev/v1', kind: 'IngressStatus', metadata: { name: `node-${n}` }, spec: { node: `node-${n}`, address: `127.0.1.${n}`, time: new Date().toISOString(), haproxy: 'running', routes: [{ published: 18080, deployment: 'shop', service: 'web', servers }] } });
    const endpoints = { apiVersion: 'jaco.dev/v1', kind: 'Endpoints', metadata: { name: 'shop-web' }, spec: { deployment: 'shop', service: 'web', addresses: [{ replica: 'shop-web-0', node: 'node-1', address: '127.0.1.1', ports: [20001], hostPorts: { http: 20001 } }] } };
    await commitAtomic(store, [
      {
        ops: [
          ...[1, 2, 3].map((n) => ({ op: 'put' as const, key: keys.node(`node-${n}`), value: nodeValue(`node-${n}`) })),
          { op: 'put', key: keys.endpoints('shop', 'web'), value: endpoints },
          { op: 'put', key: keys.ingress('node-1'), value: ingress(1, [server('shop-web-0', 1, 'ready'), server('shop-web-1', 2, 'drain')]) },
          { op: 'put', key: keys.ingress('node-2'), value: ingress(2, [server('shop-web-0', 1, 'ready', 'DOWN')]) },
        ],
      },
    ]);
    const get = await jaco(['get', 'endpoints', 'shop/web'], { endpoint: etcd.endpoint, prefix });
    expect(get.code, get.stderr).toBe(0);
    expect(get.stdout.split('\n')[0]).toMatch(/^DEPLOYMENT\s+SERVICE\s+REPLICA\s+NODE\s+ENDPOINTS\s+ROUTING$/);
    expect(get.stdout).toMatch(/shop-web-0\s+node-1\s+http=127\.0\.1\.1:20001\s+node-1=ready,node-2=ready \(check DOWN\)/);
    expect(get.stdout).toMatch(/shop-web-1\s+node-2\s+127\.0\.1\.2:20002\s+node-1=drain,node-2=absent/);
    const d = await jaco(['describe', 'service', 'shop/web'], { endpoint: etcd.endpoint, prefix });
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout).toContain('Ports:      http 80/tcp → host dynamic, published 18080');
    expect(d.stdout).toMatch(/REPLICA\s+NODE\s+STATE\s+ENDPOINT\s+IN ENDPOINTS\s+INGRESS node-1\s+INGRESS node-2/);
    expect(d.stdout).toMatch(/shop-web-1\s+node-2\s+gone\s+127\.0\.1\.2:20002\s+no\s+drain\s+absent/);
    expect(d.stdout).toContain('No ingress status from: node-3');
    const missing = await jaco(['describe', 'service', 'shop/nope'], { endpoint: etcd.endpoint, prefix });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('service "shop/nope" not found');
  });

  it('apply --dry-run says where the scheduler would place new replicas, and what would stay unschedulable, writing nothing', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    await commitAtomic(store, [{ ops: ['node-1', 'node-2'].flatMap((n) => [{ op: 'put' as const, key: keys.node(n), value: nodeValue(n) }, { op: 'put' as const, key: keys.heartbeat(n), value: readyHeartbeat(n) }]) }]);
    const before = await snapshot(prefix);
    const r = await jaco(['apply', '--dry-run', '-f', '-'], {
      endpoint: etcd.endpoint,
      prefix,
      input: manifest('shop', { web: { image: 'x', replicas: 2, resources: { memory: '256Mi' } }, big: { image: 'x', resources: { memory: '4Gi' } } }),
    });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('deployment/shop created (dry run)');
    expect(r.stdout).toContain('The scheduler would, now:');
    // spread: one web replica on each node.
    expect(r.stdout).toMatch(/shop\/web: shop-web-0 would be placed on node-[12] \(/);
    expect(r.stdout).toMatch(/shop\/web: shop-web-1 would be placed on node-[12] \(/);
    expect(new Set([...r.stdout.matchAll(/shop-web-\d would be placed on (node-\d)/g)].map((m) => m[1]))).toEqual(new Set(['node-1', 'node-2']));
    expect(r.stdout).toContain('shop/big: 1 replica(s) would be unschedulable: no_capacity_memory');
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('a node whose agent reports its data root 95% full is Degraded: get/describe say why, dry-run places nothing there (node_degraded); trust, distrust and settings are audited, bad settings write nothing', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const Gi = 2 ** 30;
    const full = { ...readyHeartbeat('node-1'), spec: { ...readyHeartbeat('node-1').spec, disk: { path: '/var/lib/docker', totalBytes: 110 * Gi, usedBytes: 95 * Gi, availableBytes: 5 * Gi, capped: false, driver: 'overlay2', backingFs: 'extfs' } } };
    const disk = (n: number) => ({ capacity: { cpuMillis: 2000, memoryBytes: 1 << 30, gpus: 0, diskBytes: n * Gi } });
    await commitAtomic(store, [{ ops: [{ op: 'put' as const, key: keys.node('node-1'), value: nodeValue('node-1', disk(110)) }, { op: 'put' as const, key: keys.heartbeat('node-1'), value: full }] }]);
    const run = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, ...(input ? { input } : {}) });
    let r = await run(['get', 'nodes']);
    expect(r.stdout).toMatch(/^node-1 +Ready,Degraded +2 +1Gi +110Gi +0 /m);
    r = await run(['describe', 'node', 'node-1']);
    expect(r.stdout).toContain('Disk:         /var/lib/docker: 5Gi free of 110Gi (95% used; degraded past 90%); scratch disk booked, not capped: overlay2 on extfs');
    expect(r.stdout).toContain('  disk_pressure: /var/lib/docker is 95% full (5Gi of 110Gi free; limit 90%)');
    r = await run(['apply', '--dry-run', '-f', '-'], manifest('shop', { web: { image: 'x' } }));
    expect(r.stdout).toContain('shop/web: 1 replica(s) would be unschedulable: node_degraded');

    // A bad setting names its flag and writes nothing.
    const before = await snapshot(prefix);
    r = await run(['node', 'settings', '--disk-pressure', '150']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--disk-pressure: 150 is not a percentage in (0, 100]');
    expect(await snapshot(prefix)).toEqual(before);

    expect((await run(['node', 'trust', 'node-1'])).stdout).toBe('node/node-1 trusted: it takes placements even while degraded\n');
    expect((await run(['get', 'nodes'])).stdout).toMatch(/^node-1 +Ready,Degraded\(trusted\) /m);
    expect((await run(['apply', '--dry-run', '-f', '-'], manifest('shop', { web: { image: 'x' } }))).stdout).toMatch(/shop-web-0 would be placed on node-1/);
    expect((await run(['node', 'distrust', 'node-1'])).stdout).toBe('node/node-1 no longer trusted\n');

    r = await run(['node', 'settings', '--disk-pressure', '96', '--default-disk', '200Gi']);
    expect(r.stdout).toContain('node settings changed');
    expect(r.stdout).toContain('disk pressure:       96%');
    expect((await run(['get', 'nodes'])).stdout).toMatch(/^node-1 +Ready +/m);
    // The default scratch disk of 200Gi no longer fits the node's 110Gi.
    expect((await run(['apply', '--dry-run', '-f', '-'], manifest('shop', { web: { image: 'x' } }))).stdout).toContain('shop/web: 1 replica(s) would be unschedulable: no_capacity_disk');
    const audit = await run(['audit', '--type', 'node_trusted,node_settings_changed', '-o', 'json']);
    expect(audit.stdout.trim().split('\n').map((l) => JSON.parse(l).type)).toEqual(['node_trusted', 'node_trusted', 'node_settings_changed']);
  });

  it('restarts of containers removed or paused outside jaco do not degrade a node; restarts for failures, and old records without a cause, do', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const now = new Date().toISOString();
    // The scheduler's bookkeeping of replicas of three services restarted a minute ago on node-1.
    const restarted = (replica: string, cause?: string) => ({
      apiVersion: 'jaco.dev/v1',
      kind: 'ReplicaCommand',
      metadata: { name: replica },
      spec: { replica, op: 'restart', seq: 1, issuedAt: now, reason: cause ?? 'exited' },
      status: { restarts: 1, lastRestartAt: new Date(Date.now() - 60_000).toISOString(), generation: 1, ...(cause ? { lastRestartCause: cause } : {}) },
    });
    const put = (causes: (string | undefined)[]) =>
      commitAtomic(store, [{ ops: ['a-web-0', 'b-web-0', 'c-web-0'].map((r, i) => ({ op: 'put' as const, key: keys.command('node-1', r), value: restarted(r, causes[i]) })) }]);
    await commitAtomic(store, [{ ops: [{ op: 'put' as const, key: keys.node('node-1'), value: nodeValue('node-1') }, { op: 'put' as const, key: keys.heartbeat('node-1'), value: readyHeartbeat('node-1') }] }]);
    const run = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, ...(input ? { input } : {}) });

    // docker rm / jaco down, and docker pause: not the node's failures.
    await put(['removed', 'removed', 'paused']);
    expect((await run(['get', 'nodes'])).stdout).toMatch(/^node-1 +Ready +/m);
    expect((await run(['describe', 'node', 'node-1'])).stdout).toContain('Degraded:     no\n');
    expect((await run(['apply', '--dry-run', '-f', '-'], manifest('shop', { web: { image: 'x' } }))).stdout).toMatch(/shop-web-0 would be placed on node-1/);

    // One of them failed for real, one record predates causes: three services failing on node-1.
    await put(['degraded', 'exited', undefined]);
    expect((await run(['get', 'nodes'])).stdout).toMatch(/^node-1 +Ready,Degraded /m);
    expect((await run(['describe', 'node', 'node-1'])).stdout).toMatch(/ {2}repeated_failures: replicas of 3 services restarted within 10m \(a-web-0, b-web-0, c-web-0\); limit 3/);
    expect((await run(['apply', '--dry-run', '-f', '-'], manifest('shop', { web: { image: 'x' } }))).stdout).toContain('shop/web: 1 replica(s) would be unschedulable: node_degraded');
  });

  it('apply --dry-run of a replica that fits nowhere shows the moves the rescheduler would make room with', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const now = new Date().toISOString();
    // filler: two 400 MiB replicas, one per node; a 600 MiB replica then fits on neither (1 GiB, 32 MiB overhead each).
    const filler = { image: 'x', replicas: 2, resources: { memory: '400Mi' } };
    expect((await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('filler', { web: filler }) })).code).toBe(0);
    const template = { ...filler, placement: { mode: 'spread' } };
    const hash = 'a'.repeat(64);
    const desired = (i: number, n: string) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: `filler-web-${i}` }, spec: { replica: `filler-web-${i}`, deployment: 'filler', service: 'web', node: n, index: i, revision: 1, specHash: hash, template, placedAt: '2026-01-01T00:00:00Z' } });
    const observed = (i: number, n: string) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: `filler-web-${i}` }, status: { replica: `filler-web-${i}`, node: n, deployment: 'filler', service: 'web', state: 'running', specHash: hash, revision: 1, health: 'none', startedAt: '2026-01-01T00:00:00Z', observedAt: now } });
    await commitAtomic(store, [
      {
        ops: ['node-1', 'node-2'].flatMap((n, i) => [
          { op: 'put' as const, key: keys.node(n), value: nodeValue(n) },
          { op: 'put' as const, key: keys.heartbeat(n), value: readyHeartbeat(n) },
          { op: 'put' as const, key: keys.desired(n, `filler-web-${i}`), value: desired(i, n) },
          { op: 'put' as const, key: keys.observed(n, `filler-web-${i}`), value: observed(i, n) },
        ]),
      },
    ]);
    const before = await snapshot(prefix);
    const r = await jaco(['apply', '--dry-run', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('shop', { big: { image: 'x', resources: { memory: '600Mi' } } }) });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('shop/big: 1 replica(s) would be unschedulable: no_capacity_memory');
    expect(r.stdout).toMatch(/shop\/big: the rescheduler would make room on node-[12] by moving filler-web-[01] node-[12] → node-[12], one at a time/);
    expect(await snapshot(prefix)).toEqual(before);
  });

  it('reads stdin and directories', async () => {
    const prefix = uniquePrefix();
    const r1 = await jaco(['apply', '-f', '-'], { endpoint: etcd.endpoint, prefix, input: manifest('fromstdin', { s: { image: 'x' } }) });
    expect(r1.stdout).toContain('deployment/fromstdin created');
    const r2 = await jaco(['apply', '-f', GOOD], { endpoint: etcd.endpoint, prefix });
    expect(r2.stdout).toBe('deployment/alpha created (revision 1: created with web)\ndeployment/beta created (revision 1: created with worker)\n');
  });
});

describe('jaco get, diff, delete', () => {
  it('lists as a kubectl-style List, diffs, and deletes with revisions', async () => {
    const prefix = uniquePrefix();
    await jaco(['apply', '-f', GOOD], { endpoint: etcd.endpoint, prefix });
    const list = JSON.parse((await jaco(['get', 'deployments', '-o', 'json'], { endpoint: etcd.endpoint, prefix })).stdout);
    expect(list.kind).toBe('List');
    expect(list.items.map((i: { metadata: { name: string } }) => i.metadata.name)).toEqual(['alpha', 'beta']);
    const yamlList = parse((await jaco(['get', 'deploy', '-o', 'yaml'], { endpoint: etcd.endpoint, prefix })).stdout);
    expect(yamlList.items).toHaveLength(2);
    const tableOut = (await jaco(['get', 'deployments'], { endpoint: etcd.endpoint, prefix })).stdout;
    expect(tableOut.split('\n')[0]).toMatch(/^NAME\s+SERVICES\s+RUNNING\s+REVISION\s+AGE$/);

    const f = join(tmp, 'alpha2.yaml');
    writeFileSync(f, manifest('alpha', { web: { image: 'jaco-demo/busybox:2', command: ['sh', '-c', 'sleep 100000'], replicas: 2 } }));
    const diff = await jaco(['diff', '-f', f], { endpoint: etcd.endpoint, prefix });
    expect(diff.code).toBe(1);
    expect(diff.stdout).toMatch(/^--- deployment\/alpha \(live\)/);
    expect(diff.stdout).toContain('\n-    image: jaco-demo/busybox:1\n+    image: jaco-demo/busybox:2\n');
    expect((await jaco(['diff', '-f', join(GOOD, 'two-deployments.yaml')], { endpoint: etcd.endpoint, prefix })).code).toBe(0);

    const del = await jaco(['delete', 'deployment', 'alpha'], { endpoint: etcd.endpoint, prefix });
    expect(del.stdout).toBe('deployment/alpha deleted\n');
    const store = etcd.store(prefix);
    expect(await store.countPrefix('revisions/alpha/')).toBe(0);
    const missing = await jaco(['delete', 'deployment', 'alpha'], { endpoint: etcd.endpoint, prefix });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain('deployment "alpha" not found');
    expect((await jaco(['get', 'deployment', 'nope'], { endpoint: etcd.endpoint, prefix })).stderr).toContain('deployment "nope" not found');
  });
});

describe('exit codes', () => {
  it('exits 2 naming the endpoint when etcd is unreachable', async () => {
    const r = await jaco(['get', 'nodes'], { endpoint: 'http://127.0.0.1:1', prefix: uniquePrefix() });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('cannot reach etcd at http://127.0.0.1:1');
    expect(r.stderr).toContain('--endpoints');
  });

  it('exits 1 on usage errors and 0 on --help for every command', async () => {
    expect((await jaco(['get'])).code).toBe(1);
    expect((await jaco(['frobnicate'])).code).toBe(1);
    expect((await jaco(['get', 'pods'], { endpoint: etcd.endpoint })).code).toBe(1);
    for (const c of ['apply', 'get', 'describe', 'delete', 'diff', 'audit', 'up', 'down', 'controller', 'version', 'node cordon', 'node trust', 'node distrust', 'node settings']) {
      const r = await jaco([...c.split(' '), '--help']);
      expect(r.code, c).toBe(0);
      expect(r.stdout, c).toContain('Usage: jaco');
    }
  });
});
