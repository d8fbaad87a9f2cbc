// The traffic path end to end on the real thing: etcd, `jaco controller all`, three `jaco agent`
// processes (simulated nodes at 127.0.1.1-3 on the local Docker engine), two `jaco ingress`
// processes driving real HAProxy children. A busybox httpd service with a dynamic host port is
// published on every node's ingress. Asserted: one node's ingress reaches the replicas on the
// other nodes; a rolling update 1 → 2 and a drain of a node hosting a replica, each under a
// bounded request loop (loopback only), fail 0 requests — and HAProxy neither retried nor
// re-dispatched one (jaco's routing did the work, not HAProxy's second line); so do a drain move
// of a single-replica service, and a delete and re-apply of another service. Each ingress reports
// what it routes (ingresses/<node>), shown by `jaco get endpoints`, and the report goes with it. A
// published port another process holds on one node leaves that one route out there, said in the
// report and `describe service`, while every other route still loads; freed, it is taken.
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runtimeCommand, serverName } from '../../controllers/ingress/haproxy.js';
import { LABELS } from '../../src/api/labels.js';
import { keys } from '../../src/api/keys.js';
import type { Endpoints, IngressStatus } from '../../src/api/types.js';
import { startCluster, type Proc, type TestCluster } from '../support/cluster.js';
import { backendStat, httpdManifest, ingressSocket, nodeAddress as address, requestLoop, startIngress } from '../support/ingress.js';
import { eventually, sleep } from '../support/wait.js';

// Not 18080 (the demo's): a `make up` cluster on this machine must not collide with the test.
const PUBLISHED = 18180;
// Each request loop is bounded (at a few ms a request, well over a minute) but must still be
// running when the disruption it measures is over: every test asserts it did not hit the cap.
const LOOP_MAX = 50_000;
const NODES = ['node-1', 'node-2', 'node-3'];

const manifest = (image: string) => httpdManifest({ deployment: 'shop', image, published: PUBLISHED, page: '$JACO_REPLICA r$JACO_REVISION $JACO_NODE', healthGuard: 'test ! -f /tmp/sick', healthInterval: '1s' });

let c: TestCluster;
const ingresses: Proc[] = [];

beforeAll(async () => {
  c = await startCluster({ nodes: 0, controllers: 'all' });
  for (const n of NODES) await c.startAgent(n, ['--address', address(n)]);
  for (const n of ['node-1', 'node-2']) ingresses.push(startIngress(c, n, ['--drain-period', '1s']));
}, 120_000);
afterAll(async () => {
  await Promise.all(ingresses.map((p) => p.kill()));
  await c?.stop();
});

async function get(url: string): Promise<{ status: number; body: string }> {
  const r = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: r.status, body: (await r.text()).trim() };
}

/** What answers at node's ingress over n requests: the page bodies (replica, revision, node). */
async function pages(node: string, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await get(`http://${address(node)}:${PUBLISHED}/`);
    if (r.status === 200) out.push(r.body);
  }
  return out;
}

const socket = (node: string) => ingressSocket(c, node);
const shopStat = () => backendStat(socket('node-1'), 'be_shop_web_http');
const unboundOn1Gone = async () => !(await c.store.get<IngressStatus>(keys.ingress('node-1')))?.value.spec.unbound;

describe('ingress', () => {
  it("a published service answers on every node's ingress, from replicas on every node", async () => {
    await c.apply(manifest('jaco-demo/busybox:1'));
    const eps = await eventually(async () => {
      const e = (await c.store.get<Endpoints>(keys.endpoints('shop', 'web')))?.value.spec.addresses;
      return e && e.length === 3 ? e : undefined;
    }, { what: 'three endpoints', timeoutMs: 90_000 });
    // Endpoints are address:port per replica, each at its node's address with a dynamic port.
    for (const e of eps) {
      expect(e.address).toBe(address(e.node));
      expect(e.hostPorts!.http).toBeGreaterThanOrEqual(20000);
      expect(e.hostPorts!.http).toBeLessThanOrEqual(32767);
    }
    expect(new Set(eps.map((e) => e.node))).toEqual(new Set(NODES));
    // node-1's ingress reaches all three replicas (two of them on other nodes), and so does node-2's.
    for (const n of ['node-1', 'node-2'])
      await eventually(async () => new Set((await pages(n, 12)).map((p) => p.split(' ')[2])).size === 3, { what: `${n}'s ingress reaching every node`, timeoutMs: 30_000 });
    const body = (await pages('node-1', 1))[0]!;
    expect(body).toMatch(/^shop-web-\d+ r1 node-\d$/);
    // Each ingress reports the three servers it routes, ready and UP by HAProxy's own check, and
    // `jaco get endpoints` shows every copy routed by both.
    for (const n of ['node-1', 'node-2'])
      await eventually(async () => {
        const r = (await c.store.get<IngressStatus>(keys.ingress(n)))?.value.spec.routes.find((x) => x.published === PUBLISHED);
        return r?.servers.length === 3 && r.servers.every((x) => x.state === 'ready' && x.check?.startsWith('UP'));
      }, { what: `ingresses/${n} reporting three ready servers`, timeoutMs: 30_000 });
    const ep = await c.jaco(['get', 'endpoints', 'shop/web']);
    expect(ep.code, ep.stderr).toBe(0);
    expect(ep.stdout.match(/ready on 2\/2 ingresses/g)).toHaveLength(3);
  }, 150_000);

  it('a rolling update 1 → 2 under load through one ingress: 0 failed requests, none retried by HAProxy', async () => {
    const before = await shopStat();
    const l = requestLoop(`http://${address('node-1')}:${PUBLISHED}/`, LOOP_MAX);
    await sleep(500);
    await c.apply(manifest('jaco-demo/busybox:2'));
    const st = await c.jaco(['rollout', 'status', 'shop', '--timeout', '150s']);
    expect(st.code, st.stdout + st.stderr).toBe(0);
    // Every replica at revision 2 answers through the ingress before the loop ends.
    await eventually(async () => new Set((await pages('node-1', 12)).filter((p) => p.includes(' r2 ')).map((p) => p.split(' ')[0])).size === 3, { what: 'three replicas at r2 behind the ingress', timeoutMs: 30_000 });
    const r = await l.stop();
    expect(r.failures).toEqual([]);
    expect(r.sent).toBeGreaterThan(50);
    expect(r.sent, 'the loop ran until the rollout was over').toBeLessThan(LOOP_MAX);
    expect([...r.seen].some((p) => p.includes(' r1 '))).toBe(true);
    expect([...r.seen].some((p) => p.includes(' r2 '))).toBe(true);
    const after = await shopStat();
    expect(after.errors - before.errors).toBe(0);
    expect(after.retries - before.retries).toBe(0);
  }, 240_000);

  it("a drain of a node hosting a replica under load through another node's ingress: 0 failed requests", async () => {
    const onNode3 = (await c.desired()).find((d) => d.spec.deployment === 'shop' && d.spec.node === 'node-3')!;
    expect(onNode3).toBeDefined();
    const before = await shopStat();
    const l = requestLoop(`http://${address('node-1')}:${PUBLISHED}/`, LOOP_MAX);
    await sleep(500);
    const d = await c.jaco(['node', 'drain', 'node-3', '--wait']);
    expect(d.code, d.stdout + d.stderr).toBe(0);
    // The moved replica answers from its new node, at that node's address and a port of its own.
    const moved = await eventually(async () => {
      const e = (await c.store.get<Endpoints>(keys.endpoints('shop', 'web')))?.value.spec.addresses.find((a) => a.replica === onNode3.spec.replica);
      return e && e.node !== 'node-3' ? e : undefined;
    }, { what: `${onNode3.spec.replica} routed on another node`, timeoutMs: 60_000 });
    expect(moved.address).toBe(address(moved.node));
    await eventually(async () => (await pages('node-1', 12)).some((p) => p.startsWith(`${onNode3.spec.replica} `) && p.endsWith(moved.node)), { what: 'the moved replica answering', timeoutMs: 30_000 });
    const r = await l.stop();
    expect(r.failures).toEqual([]);
    expect(r.sent).toBeGreaterThan(20);
    expect(r.sent, 'the loop ran until the disruption was over').toBeLessThan(LOOP_MAX);
    const after = await shopStat();
    expect(after.errors - before.errors).toBe(0);
    expect(after.retries - before.retries).toBe(0);
  }, 240_000);

  it('a drain move of a single-replica service, and a delete and re-apply of another service, under load: 0 failed requests', async () => {
    expect((await c.jaco(['node', 'uncordon', 'node-3'])).code).toBe(0);
    const one = (image: string) => httpdManifest({ deployment: 'solo', image, published: PUBLISHED + 1, replicas: 1, extra: 'deregistrationDelay: 2s' });
    await c.apply(one('jaco-demo/busybox:1'));
    const at = await eventually(async () => (await c.store.get<Endpoints>(keys.endpoints('solo', 'web')))?.value.spec.addresses[0], { what: 'solo routed', timeoutMs: 60_000 });
    await eventually(async () => (await get(`http://${address('node-1')}:${PUBLISHED + 1}/`).catch(() => ({ status: 0 }))).status === 200, { what: 'solo answering', timeoutMs: 30_000 });
    // (c) The one replica moves off its node, make-before-break: the loop never finds it gone.
    let l = requestLoop(`http://${address('node-1')}:${PUBLISHED + 1}/`, LOOP_MAX);
    await sleep(300);
    const d = await c.jaco(['node', 'drain', at.node, '--wait']);
    expect(d.code, d.stdout + d.stderr).toBe(0);
    await eventually(async () => (await c.store.get<Endpoints>(keys.endpoints('solo', 'web')))?.value.spec.addresses.find((a) => a.node !== at.node), { what: 'solo routed on another node', timeoutMs: 30_000 });
    let r = await l.stop();
    expect(r.failures).toEqual([]);
    expect(r.sent).toBeGreaterThan(20);
    expect(r.sent, 'the loop ran until the disruption was over').toBeLessThan(LOOP_MAX);
    expect((await c.jaco(['node', 'uncordon', at.node])).code).toBe(0);
    // (e) Deleting another published service and applying it again reloads every ingress (a new
    // frontend set): shop's requests through it do not notice.
    const before = await shopStat();
    l = requestLoop(`http://${address('node-1')}:${PUBLISHED}/`, LOOP_MAX);
    await sleep(300);
    expect((await c.jaco(['delete', 'deployment', 'solo'])).code).toBe(0);
    await eventually(async () => (await get(`http://${address('node-1')}:${PUBLISHED + 1}/`).catch(() => ({ status: 0 }))).status !== 200, { what: 'solo gone from the ingress', timeoutMs: 30_000 });
    await c.apply(one('jaco-demo/busybox:1'));
    await eventually(async () => (await get(`http://${address('node-1')}:${PUBLISHED + 1}/`).catch(() => ({ status: 0 }))).status === 200, { what: 'solo back', timeoutMs: 60_000 });
    r = await l.stop();
    expect(r.failures).toEqual([]);
    expect(r.sent).toBeGreaterThan(20);
    expect(r.sent, 'the loop ran until the disruption was over').toBeLessThan(LOOP_MAX);
    const after = await shopStat();
    expect(after.errors - before.errors).toBe(0);
  }, 240_000);

  it('a replica whose health check starts failing is out of the ingress within 5 s of its health turning', async () => {
    const eps = (await c.store.get<Endpoints>(keys.endpoints('shop', 'web')))!.value.spec.addresses;
    const victim = eps[0]!;
    const server = serverName(victim.replica, victim.node, victim.hostPorts!.http!);
    const routed = async () => (await runtimeCommand(socket('node-1'), 'show servers state be_shop_web_http')).split('\n').some((l) => l.split(' ')[3] === server && (Number(l.split(' ')[6]) & 0x08) === 0);
    // Routed before it turns sick: the endpoints are read from the store, and the ingress applies
    // them moments later (the case before this one re-applied and moved services).
    await eventually(routed, { what: `${server} routed by node-1's ingress`, timeoutMs: 30_000 });
    const ctr = (await c.containers(victim.node)).find((x) => x.Labels[LABELS.replica] === victim.replica && x.State === 'running')!;
    const exec = await c.docker.getContainer(ctr.Id).exec({ Cmd: ['touch', '/tmp/sick'] });
    await exec.start({});
    let unhealthyAt: number | undefined;
    let outAt: number | undefined;
    const deadline = Date.now() + 60_000;
    while ((!unhealthyAt || !outAt) && Date.now() < deadline) {
      const now = Date.now();
      if (!unhealthyAt && (await c.docker.getContainer(ctr.Id).inspect()).State.Health?.Status === 'unhealthy') unhealthyAt = now;
      if (!outAt && !(await routed())) outAt = now;
      await sleep(100);
    }
    expect(unhealthyAt, 'Docker reported the container unhealthy').toBeDefined();
    expect(outAt, 'the ingress took the replica out of routing').toBeDefined();
    // Out of routing no later than 5 s after Docker first showed it unhealthy (it may even be
    // earlier: HAProxy's own check, or the poll seeing Docker's state late).
    expect(outAt! - unhealthyAt!).toBeLessThanOrEqual(5000);
    // The scheduler restarts it; it comes back into routing once healthy again (the restart
    // creates a fresh container without /tmp/sick).
    await eventually(async () => (await c.store.get<Endpoints>(keys.endpoints('shop', 'web')))?.value.spec.addresses.some((a) => a.replica === victim.replica), { what: `${victim.replica} back in endpoints`, timeoutMs: 90_000 });
  }, 180_000);

  it('a published port another process holds on one node: that route alone is left out there, said, and taken once free', async () => {
    const HELD = PUBLISHED + 2; // + 1 is solo's, still applied
    const holder = createServer((sock) => sock.end('HTTP/1.0 200 OK\r\n\r\nnot jaco\n'));
    await new Promise<void>((resolve, reject) => {
      holder.once('error', reject);
      holder.listen(HELD, address('node-1'), resolve);
    });
    try {
      await c.apply(httpdManifest({ deployment: 'held', image: 'jaco-demo/busybox:1', published: HELD, replicas: 1 }));
      const unboundOn1 = async () => (await c.store.get<IngressStatus>(keys.ingress('node-1')))?.value.spec.unbound ?? [];
      await eventually(async () => (await unboundOn1()).some((u) => u.published === HELD && u.reason === 'Address already in use'), { what: `node-1 reporting ${HELD} unbound`, timeoutMs: 60_000 });
      // The other routes loaded without it: node-1 answers the shop as before, node-2 answers the new port.
      expect((await pages('node-1', 3)).length).toBe(3);
      await eventually(async () => (await get(`http://${address('node-2')}:${HELD}/`).catch(() => ({ status: 0, body: '' }))).status === 200, { what: "node-2's ingress answering the held port", timeoutMs: 60_000 });
      expect((await c.jaco(['describe', 'service', 'held/web'])).stdout).toContain(`Not answered on node-1: ${address('node-1')}:${HELD} cannot be bound (Address already in use)`);
    } finally {
      await new Promise((r) => holder.close(r));
    }
    // Freed: the next try (after the longest back-off) binds it.
    await eventually(async () => (await unboundOn1Gone()) && (await get(`http://${address('node-1')}:${HELD}/`).catch(() => ({ status: 0, body: '' }))).status === 200, { what: 'node-1 answering the freed port', timeoutMs: 60_000 });
    expect((await c.jaco(['delete', 'deployment', 'held'])).code).toBe(0);
  }, 180_000);

  it("a stopped ingress's report goes with its lease", async () => {
    expect(await c.store.get(keys.ingress('node-2'))).toBeDefined();
    await ingresses[1]!.kill();
    await eventually(async () => (await c.store.get(keys.ingress('node-2'))) === undefined, { what: 'ingresses/node-2 gone', timeoutMs: 30_000 });
    expect(await c.store.get(keys.ingress('node-1'))).toBeDefined();
  }, 60_000);
});
