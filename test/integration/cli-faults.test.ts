// The CLI against faults of its input and of the store (issue 29, items 5–8), on a real etcd:
// input without end, junk values under every prefix, many applies at once, specs at the size limit.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Deployment, DeploymentSpec } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import type { Store } from '../../src/store/store.js';
import { WATCHABLE } from '../../src/runtime/watchable.js';
import { templateOf } from '../../src/api/serving.js';
import { withDefaults, specHash } from '../../src/api/spec.js';
import { MAX_REQUEST_BYTES } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { ReplicaIndex } from '../../src/runtime/replicas.js';
import { MoveBook, moveStartBytes, startMove } from '../../controllers/moves/move.js';
import { EXIT_ROLLOUT_TIMEOUT } from '../../src/cli/commands/rollout.js';
import { jaco, JACO_BIN } from '../support/cli.js';
import { TcpProxy } from '../support/proxy.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const etcd = useTestEtcd();
const tmp = mkdtempSync(join(tmpdir(), 'jaco-cli-faults-'));

/** Prints the process's peak resident memory (KiB) to stderr as it exits. */
const MAXRSS = join(tmp, 'maxrss.cjs');
writeFileSync(MAXRSS, "process.on('exit', () => require('node:fs').writeSync(2, `\\nmaxrss_kib=${process.resourceUsage().maxRSS}\\n`));\n");

/**
 * Runs the built CLI with its peak memory reported; `endless` keeps writing to its stdin until it
 * exits (a producer that never stops). A CLI that reads without bound never exits: the timeout fails it.
 */
function jacoMeasured(args: string[], prefix: string, opts: { endless?: boolean } = {}): Promise<{ code: number; stderr: string; maxRssMiB: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--require', MAXRSS, JACO_BIN, ...args], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: prefix }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.stdout.resume();
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`jaco ${args.join(' ')} did not finish in 30 s`));
    }, 30_000);
    child.stdin.on('error', () => undefined); // EPIPE once it stops reading and exits
    if (opts.endless) {
      const chunk = Buffer.from('a: b\n'.repeat(13_000));
      const write = () => {
        while (!child.stdin.destroyed && child.stdin.write(chunk));
      };
      child.stdin.on('drain', write);
      write();
    } else child.stdin.end();
    child.on('close', (code) => {
      clearTimeout(timer);
      const kib = Number(/maxrss_kib=(\d+)/.exec(stderr)?.[1] ?? NaN);
      resolve({ code: code ?? -1, stderr, maxRssMiB: kib / 1024 });
    });
  });
}

describe('unbounded input (item 7)', () => {
  it('jaco apply -f /dev/zero: the size error a large file gets, in bounded memory, nothing written', async () => {
    const prefix = uniquePrefix();
    const r = await jacoMeasured(['apply', '-f', '/dev/zero'], prefix);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('/dev/zero:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
    // Node and the CLI's modules take ~100 MiB; the cap adds at most 16 MiB read (and its text).
    expect(r.maxRssMiB).toBeLessThan(250);
    expect((await etcd.store(prefix).listRaw('')).kvs).toEqual([]);
  });

  it('an endless jaco apply -f -: the same error, in bounded memory', async () => {
    const prefix = uniquePrefix();
    const r = await jacoMeasured(['apply', '-f', '-'], prefix, { endless: true });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('<stdin>:0:0: more than 16 MiB read, and it goes on; manifests are limited to 16 MiB');
    expect(r.maxRssMiB).toBeLessThan(250);
    expect((await etcd.store(prefix).listRaw('')).kvs).toEqual([]);
  });

  it('a secret from /dev/zero or an endless stdin: refused at its own limit', async () => {
    const prefix = uniquePrefix();
    let r = await jacoMeasured(['secret', 'create', 'z', '-f', '/dev/zero'], prefix);
    expect(r.stderr).toContain('/dev/zero holds more than 500 KiB; a secret holds at most 512000 (500 KiB)');
    r = await jacoMeasured(['config', 'create', 'z', '-'], prefix, { endless: true });
    expect(r.stderr).toContain('stdin holds more than 500 KiB; a config holds at most 512000 (500 KiB)');
    expect(r.maxRssMiB).toBeLessThan(250);
  });
});

/** Holds every store's first read of deployments/ until `n` of them have read: the applies race for real. */
function raceAfterRead(stores: Store[], n = stores.length): void {
  let arrived = 0;
  let release!: () => void;
  const allRead = new Promise<void>((r) => (release = r));
  for (const st of stores) {
    const listRaw = st.listRaw.bind(st);
    let first = true;
    st.listRaw = (async (...args: Parameters<Store['listRaw']>) => {
      const r = await listRaw(...args);
      if (first && args[0] === keys.deployments()) {
        first = false;
        if (++arrived === n) release();
        await allRead;
      }
      return r;
    }) as Store['listRaw'];
  }
}

describe('concurrent applies (item 6)', () => {
  const web = (i: number, port?: number): DeploymentSpec => ({ services: { web: { image: `jaco-demo/busybox:${i}`, replicas: 1, ...(port ? { ports: [{ containerPort: 80, published: port }] } : {}) } } });

  it('200 applies of different deployments, 10 at a time: every one lands', async () => {
    const prefix = uniquePrefix();
    const stores = Array.from({ length: 10 }, () => etcd.store(prefix));
    const failures: string[] = [];
    let next = 0;
    // Ten workers, each applying the next deployment as soon as its last one ended: always 10 in flight.
    // Half publish a port of their own (outside the dynamic range): their guards are distinct keys.
    await Promise.all(
      stores.map(async (store) => {
        for (let i = next++; i < 200; i = next++)
          await applyDeployments(store, [{ name: `app-${i}`, spec: web(i, i % 2 ? 10_000 + i : undefined), cause: 'apply' }]).catch((e: Error) => failures.push(`app-${i}: ${e.message}`));
      }),
    );
    expect(failures).toEqual([]);
    expect((await stores[0]!.list(keys.deployments())).items).toHaveLength(200);
  });

  it('two applies of the same deployment that read alike: one lands, the other is refused and writes nothing', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [etcd.store(prefix), etcd.store(prefix)];
    raceAfterRead([a, b]);
    const results = await Promise.allSettled([
      applyDeployments(a, [{ name: 'same', spec: web(1), cause: 'apply' }]),
      applyDeployments(b, [{ name: 'same', spec: web(2), cause: 'apply' }]),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect(String((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)).toContain('the store changed while this change was prepared; nothing was written, try again');
    const stored = await a.list<Deployment>(keys.deployments());
    expect(stored.items.map((d) => d.value.metadata.generation)).toEqual([1]);
    expect((await a.listRaw(keys.revisions())).kvs).toHaveLength(1);
  });

  it('two applies of different deployments that start to publish one port: one lands', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [etcd.store(prefix), etcd.store(prefix)];
    raceAfterRead([a, b]);
    const results = await Promise.allSettled([
      applyDeployments(a, [{ name: 'left', spec: web(1, 8443), cause: 'apply' }]),
      applyDeployments(b, [{ name: 'right', spec: web(2, 8443), cause: 'apply' }]),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect((await a.list(keys.deployments())).items).toHaveLength(1);
    // Tried again, the loser is refused for the clash itself.
    const loser = results[0]!.status === 'rejected' ? 'left' : 'right';
    await expect(applyDeployments(a, [{ name: loser, spec: web(3, 8443), cause: 'apply' }])).rejects.toThrow('port 8443 is published by deployment');
  });

  it('two applies of deployments whose replica ids would meet: one lands', async () => {
    const prefix = uniquePrefix();
    const [a, b] = [etcd.store(prefix), etcd.store(prefix)];
    raceAfterRead([a, b]);
    // "x" service "a-b" and "x-a" service "b" would both name replicas "x-a-b-<n>".
    const results = await Promise.allSettled([
      applyDeployments(a, [{ name: 'x', spec: { services: { 'a-b': { image: 'i' } } }, cause: 'apply' }]),
      applyDeployments(b, [{ name: 'x-a', spec: { services: { b: { image: 'i' } } }, cause: 'apply' }]),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect((await a.list(keys.deployments())).items).toHaveLength(1);
  });
});

describe('a value that is not JSON, under every prefix (item 5)', () => {
  const JUNK = 'not json {';
  // Every prefix a controller reads, and those only the CLI reads (revisions, decisions, audit).
  const prefixes = [...new Set([...Object.values(WATCHABLE).map((w) => w.prefix), keys.revisions(), keys.decisions(), keys.audits()])];
  const junkKeys = prefixes.flatMap((p) => (p.endsWith('/') ? [`${p}junk`, ...(['desired/', 'observed/', 'commands/', 'decisions/', 'revisions/'].includes(p) ? [`${p}n1/junk`] : [])] : [p])).concat(keys.decision('web', 'junk'));
  const node = { apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name: 'n1' }, spec: {}, status: { capacity: { cpuMillis: 2000, memoryBytes: 1 << 30, gpus: 0 }, agentVersion: 't', registeredAt: new Date().toISOString() } };
  const heartbeat = { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name: 'n1' }, spec: { node: 'n1', time: new Date().toISOString(), intervalMs: 3_600_000, agentVersion: 't', dockerUp: true } };
  const manifest = (name: string) => JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name }, spec: { services: { web: { image: 'jaco-demo/busybox:1', replicas: 1 } } } });

  it('every command carries on and names the keys it could not read; delete and apply replace them', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const run = (args: string[], input?: string) => jaco(args, { endpoint: etcd.endpoint, prefix, ...(input ? { input } : {}) });
    expect((await run(['apply', '-f', '-'], manifest('web'))).code).toBe(0);
    await store.client.put(prefix + keys.node('n1')).value(JSON.stringify(node));
    await store.client.put(prefix + keys.heartbeat('n1')).value(JSON.stringify(heartbeat));
    for (const k of junkKeys) await store.client.put(prefix + k).value(JUNK);
    const named = (r: { stderr: string }, key: string) => expect(r.stderr).toContain(`warning: ${key} cannot be read (not JSON: `);

    let r = await run(['get', 'deployments']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^web\s/m);
    expect(r.stdout).toMatch(/^junk\s+Unreadable/m);
    named(r, 'deployments/junk');
    // Nothing on stderr but those warnings: no bare parse error, no log line.
    expect(r.stderr.split('\n').filter((l) => l && !l.startsWith('warning: '))).toEqual([]);
    r = await run(['get', 'nodes']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^n1\s+Ready/m);
    expect(r.stdout).toMatch(/^junk\s+Unreadable/m);
    // What operators decided about node "junk" cannot be read either: listed by its key.
    expect(r.stdout).toMatch(/^nodespecs\/junk\s+Unreadable/m);
    named(r, 'heartbeats/junk');
    named(r, 'nodespecs/junk');
    expect((await run(['get', 'replicas'])).code).toBe(0);
    r = await run(['get', 'endpoints']);
    expect(r.code).toBe(0);
    named(r, 'endpoints/junk');
    r = await run(['get', 'deployment', 'junk']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('cannot show deployment "junk": deployments/junk cannot be read (not JSON: ');

    r = await run(['status']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Deployment web');
    for (const k of ['deployments/junk', 'deploymentstatus/junk', 'nodes/junk', 'drains/junk', 'desired/n1/junk', 'observed/junk', 'commands/junk', 'rollouts/junk']) named(r, k);
    r = await run(['status', '-o', 'json']);
    expect(JSON.parse(r.stdout).deployments.map((d: { name: string }) => d.name)).toEqual(['web']);

    r = await run(['describe', 'deployment', 'web']);
    expect(r.code).toBe(0);
    named(r, 'audit/junk');
    expect((await run(['describe', 'node', 'n1'])).code).toBe(0);
    expect((await run(['describe', 'service', 'web/web'])).code).toBe(0);
    r = await run(['explain', 'web/web']);
    expect(r.code).toBe(0);
    named(r, 'decisions/web/junk');

    r = await run(['node', 'cordon', 'n1']);
    expect(r.stdout).toBe('node/n1 cordoned\n');
    r = await run(['node', 'cordon', 'junk']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('cannot cordon node "junk": nodes/junk cannot be read (not JSON: ');
    r = await run(['node', 'drain', 'n1']);
    expect(r.code).toBe(0);
    r = await run(['node', 'drain', 'n1', '--cancel']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('the node stays cordoned (jaco node uncordon n1)');
    // Uncordoned during the drain: the cancel says what is so, not what usually is.
    expect((await run(['node', 'drain', 'n1'])).code).toBe(0);
    expect((await run(['node', 'uncordon', 'n1'])).code).toBe(0);
    r = await run(['node', 'drain', 'n1', '--cancel']);
    expect(r.stdout).toContain('the node is not cordoned (uncordoned during the drain)');
    // A drain that cannot be read: named, and --cancel deletes it.
    r = await run(['node', 'drain', 'junk']);
    expect(r.stderr).toContain('nodes/junk cannot be read');
    r = await run(['node', 'drain', 'junk', '--cancel']);
    expect(r.stdout).toContain('drain/junk (unreadable: not JSON: ');
    expect(await store.get(keys.drain('junk'))).toBeUndefined();

    // apply carries on beside junk deployments and nodes, and says what it could not check.
    r = await run(['apply', '-f', '-'], manifest('other'));
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('deployment/other created (revision 1: created with web)\n');
    named(r, 'deployments/junk');
    // Applied over a junk key: replaced, numbered after its kept revisions.
    await store.client.put(prefix + keys.deployment('over')).value(JUNK);
    r = await run(['apply', '-f', '-'], manifest('over'));
    expect(r.stdout).toMatch(/^deployment\/over configured \(revision 1: replaced a value that could not be read \(not JSON: /);
    expect((await store.get<Deployment>(keys.deployment('over')))?.value.spec.services.web?.replicas).toBe(1);

    // delete removes the key it cannot read, with its revision records.
    r = await run(['delete', 'deployment', 'junk']);
    expect(r.code).toBe(0);
    expect(await store.get(keys.deployment('junk'))).toBeUndefined();
    expect((await store.listRaw(keys.revisions('junk'))).kvs).toEqual([]);
    r = await run(['get', 'deployments']);
    expect(r.stderr).not.toContain('deployments/junk');
  });

  it('a direct read of such a value names the key (no bare parse error anywhere)', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    await store.client.put(prefix + 'nodes/x').value(JUNK);
    await expect(store.get('nodes/x')).rejects.toThrow(/^the value of nodes\/x cannot be read \(not JSON: /);
    await expect(store.list('nodes/')).rejects.toThrow('the value of nodes/x cannot be read');
  });
});

describe('specs near the size limit (item 8)', () => {
  const spec = (blob: number): DeploymentSpec => ({ services: { web: { image: 'jaco-demo/busybox:1', replicas: 2, env: { BLOB: 'x'.repeat(blob) } } } });
  const moveBytes = (blob: number) => {
    const t = templateOf(1, spec(blob).services.web!);
    return moveStartBytes({ replica: 'big-web-0', deployment: 'big', service: 'web', node: '', index: 0, revision: 1, specHash: t.specHash, template: t.template, placedAt: '' });
  };
  // The largest spec apply accepts: derived from the move's own bound, found by bisection.
  let lo = 0;
  let hi = MAX_REQUEST_BYTES;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (moveBytes(mid) <= MAX_REQUEST_BYTES) lo = mid;
    else hi = mid - 1;
  }
  const atBudget = lo;

  it('a spec at the budget applies, and its move start lands on etcd; one byte more is refused naming the limit', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    await expect(applyDeployments(store, [{ name: 'over', spec: spec(atBudget + 1), cause: 'apply' }])).rejects.toThrow(
      /deployment "over" service "web" cannot be moved later: a move \(drain, rebalancer\) writes its spec twice in one request, which is 1\.50 MiB \(15728\d\d bytes\); etcd accepts at most 1\.50 MiB \(1572864 bytes\) per request/,
    );
    // The 767 KiB spec of the issue: refused at apply now, not at the drain.
    await expect(applyDeployments(store, [{ name: 'issue', spec: spec(767 * 1024), cause: 'apply' }])).rejects.toThrow('cannot be moved later');
    expect((await store.listRaw('')).kvs).toEqual([]);
    await applyDeployments(store, [{ name: 'big', spec: spec(atBudget), cause: 'apply' }]);
    const stored = (await store.get<Deployment>(keys.deployment('big')))!.value.spec.services.web!;
    // Its move start, as the drain would make it, lands in one request on a real etcd.
    const template = withDefaults(stored);
    const desired = { key: keys.desired('n1', 'big-web-0'), modRevision: 0, createRevision: 0, version: 0, value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: 'big-web-0' }, spec: { replica: 'big-web-0', deployment: 'big', service: 'web', node: 'n1', index: 0, revision: 1, specHash: specHash(template), template, placedAt: new Date().toISOString() } } } as const;
    await commitAtomic(store, [{ label: 'place', ops: [{ op: 'create', key: desired.key, value: desired.value }] }]);
    const placed = (await store.get<typeof desired.value>(desired.key))!;
    const idx = new ReplicaIndex();
    idx.putDesired({ ...placed, value: placed.value as never });
    idx.putObserved('n1', 'big-web-0', { key: keys.observed('n1', 'big-web-0'), modRevision: 1, createRevision: 1, version: 1, value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: 'big-web-0' }, status: { replica: 'big-web-0', node: 'n1', deployment: 'big', service: 'web', state: 'running', revision: 1, specHash: specHash(template), startedAt: new Date().toISOString(), health: 'none', observedAt: new Date().toISOString() } } as never });
    const r = startMove(new MoveBook({ replicas: idx, ledgers: new Map(), eligibility: new Map() }), { replica: 'big-web-0', src: 'n1', dst: 'n2', by: 'drain', id: 'm1', now: Date.now(), timeoutMs: 60_000 });
    if (!r.ok) throw new Error(r.detail);
    await commitAtomic(store, [{ label: 'move start', ops: r.ops }]);
    expect((await store.get(keys.desired('n2', 'big-web-0')))).toBeDefined();
  });
});

describe('a store that answers its probe and then never delivers a read', () => {
  it('jaco rollout status --timeout ends the wait, the first read of the cluster included', async () => {
    const prefix = uniquePrefix();
    // The list of deployments/ reaches etcd, and its reply never comes back on a connection that
    // stays up (the CLI's first check that etcd answers passes: it asks something else).
    const proxy = new TcpProxy(etcd.member.spec.clientPort);
    const endpoint = await proxy.start();
    void proxy.loseReplyTo(`${prefix}${keys.deployments()}`, { settleMs: 60_000 });
    try {
      const r = await jaco(['rollout', 'status', 'web', '--timeout', '1s'], { endpoint, prefix, timeoutMs: 40_000 });
      expect(r.stdout, r.stderr).toContain('timed out after 1s waiting for deployment "web" to roll out');
      expect(r.code).toBe(EXIT_ROLLOUT_TIMEOUT);
    } finally {
      await proxy.close();
    }
  });
});
