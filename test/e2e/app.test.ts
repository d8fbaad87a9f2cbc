// Issue 26's proof on separate hosts (`jaco up`: a namespace, an engine, an agent and an ingress
// per node, joined by the WireGuard overlay): test/fixtures/app/compose.yaml, a plain compose file
// (no x-jaco, no jaco variables), applied as a user applies it. nginx published on 18100 proxies
// to app:8080; app (built by apply from `build:`, 4 replicas on 3 nodes) counts every request in
// redis and stores a row in db (postgres), all reached by name. It answers through every node's
// ingress; under a bounded concurrent request loop a rolling update of app, a drain of a node
// holding app replicas and the rebalancer's move of one back onto that node once it is uncordoned
// fail no request; the traffic between nodes crossed the WireGuard link. Debian's Prometheus, with
// deploy/prometheus's configuration, then scrapes every jaco process and reports what the test caused.
import { execFile } from 'node:child_process';
import { copyFileSync, cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { AuditEvent, ReplicaDesired } from '../../src/api/types.js';
import { NETNS_DIR, overlayInterface } from '../../src/supervise/local-network.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { parseWgDump } from '../../controllers/node-agent/overlay-observe.js';
import { execIn } from '../support/docker-exec.js';
import { requestLoop } from '../support/ingress.js';
import { TestPrometheus } from '../support/prometheus.js';
import { metric } from './agent-fixtures.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';
import { textInNetns } from '../support/netns-fetch.js';

const run = promisify(execFile);
const NODES = ['node-1', 'node-2', 'node-3'];
const PORT = 18100;
const FIXTURE = join(PACKAGE_ROOT, 'test', 'fixtures', 'app');
/** What app answers: its replica, the count redis gave this request, and its VERSION. */
const ANSWER = /^(counter-app-\d+) (\d+) (v\d)$/;

describe('issue 26: a plain compose application across separate hosts', () => {
  const c = new UpCluster({ nodes: 3 });
  const dir = mkdtempSync(join(tmpdir(), 'jaco-app-e2e-'));
  const file = join(dir, 'compose.yaml');

  beforeAll(async () => {
    // The compose project as a user has it, with a static busybox in app's build context.
    cpSync(FIXTURE, dir, { recursive: true });
    copyFileSync('/bin/busybox', join(dir, 'app', 'busybox'));
    await c.start();
    const r = await c.jaco(['registry', 'push', 'jaco-demo/nginx:1', 'jaco-demo/redis:7', 'jaco-demo/postgres:15', 'jaco/pause:1'], undefined, 300_000);
    expect(r.code, r.stderr).toBe(0);
  }, 600_000);
  afterAll(async () => {
    await c.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const inNode = async (node: string, ...cmd: string[]) => (await run('nsenter', [`--net=${NETNS_DIR}/${c.node(node).netns}`, '--', ...cmd], { encoding: 'utf8', timeout: 15_000 })).stdout;
  /** GET / of `to`'s ingress on 18100, asked from `from`'s namespace. */
  const ask = async (from: string, to: string) => (await textInNetns(c.node(from).netns, `http://${c.node(to).address}:${PORT}/`, 5000)).trim();
  const replicas = async (service: string) =>
    (await c.store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value.spec).filter((s) => s.deployment === 'counter' && s.service === service);
  /** How many of a service's replicas each node holds. */
  const perNode = async (service: string) => {
    const n = new Map<string, number>();
    for (const s of await replicas(service)) n.set(s.node, (n.get(s.node) ?? 0) + 1);
    return n;
  };
  /** Bytes each node's WireGuard interface received from and sent to its peers, summed. */
  const transfer = async (node: string) => {
    const { peers } = parseWgDump(await inNode(node, 'wg', 'show', overlayInterface(c.net, c.node(node)), 'dump'));
    expect(peers.length).toBe(2);
    return { rx: peers.reduce((a, p) => a + p.rxBytes, 0), tx: peers.reduce((a, p) => a + p.txBytes, 0) };
  };
  /** SQL in the db container (on node-1's engine), as its user. */
  const sql = async (query: string) => {
    const engine = c.engine('node-1');
    const [db] = (await engine.listContainers({ filters: { label: [`${LABELS.deployment}=counter`, `${LABELS.service}=db`] } })).filter((x) => x.Labels[LABELS.role] !== 'sandbox' && x.State === 'running');
    expect(db, 'the running db container on node-1').toBeDefined();
    const r = await execIn(engine.getContainer(db!.Id), ['psql', '-h', '127.0.0.1', '-U', 'app', '-d', 'app', '-tA', '-v', 'ON_ERROR_STOP=1', '-c', query], ['PGPASSWORD=counter-pw']);
    expect(r.code, r.stderr).toBe(0);
    return r.stdout.trim();
  };
  const spreadMovesOf = async (service: string) =>
    (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec).filter((e) => e.type === 'rebalance_moved' && e.payload.trigger === 'spread' && e.payload.service === service);
  /** Requests the load test sent through the ingresses (Prometheus must count at least these). */
  let sentUnderLoad = 0;
  const rolledOut = async () => {
    const r = await c.jaco(['rollout', 'status', 'counter', '--timeout', '300s'], undefined, 310_000);
    expect(r.code, r.stdout + r.stderr).toBe(0);
  };

  it('applies: app built and pushed, every service running, app 4 replicas on 3 nodes (two on one), redis reached without ports listed', () =>
    c.withLogs(async () => {
      // Plain: no x-jaco key anywhere, no jaco variable.
      expect(readFileSync(file, 'utf8')).not.toMatch(/^\s*x-jaco|\$\$?\{?JACO_/m);
      const applied = await c.jaco(['apply', '-f', file], undefined, 300_000);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stderr).not.toMatch(/^warning:/m);
      await rolledOut();
      const app = await perNode('app');
      expect([...app.values()].sort()).toEqual([1, 1, 2]);
      expect((await replicas('app')).every((s) => s.template.image.includes('counter-app') && s.address?.ipv4)).toBe(true);
      expect((await replicas('redis')).map((s) => s.node)).toEqual(['node-1']);
      expect((await replicas('db')).map((s) => s.node)).toEqual(['node-1']);
    }), 600_000);

  it("answers through every node's ingress, asked from another node; redis counts every request and db holds a row for each; the traffic crossed WireGuard", () =>
    c.withLogs(async () => {
      const before = Object.fromEntries(await Promise.all(NODES.map(async (n) => [n, await transfer(n)] as const)));
      // The first answers wait for the service addresses and routes to settle on every node.
      for (const [i, to] of NODES.entries()) await eventually(async () => ANSWER.test(await ask(NODES[(i + 1) % 3]!, to)), { what: `${to}:${PORT} answering`, timeoutMs: 60_000 });
      const counts: number[] = [];
      const served = new Set<string>();
      for (let round = 0; round < 8; round++) {
        for (const [i, to] of NODES.entries()) {
          const m = ANSWER.exec(await ask(NODES[(i + 1) % 3]!, to));
          expect(m, `an app answer through ${to}`).not.toBeNull();
          served.add(m![1]!);
          counts.push(Number(m![2]));
          expect(m![3]).toBe('v1');
        }
      }
      // Sequential requests: each one counted after the one before.
      for (let i = 1; i < counts.length; i++) expect(counts[i]).toBeGreaterThan(counts[i - 1]!);
      // Balanced over app's replicas (a TCP connection per request, spread by the ingress).
      expect(served.size).toBeGreaterThan(1);
      // Every count redis gave is a row in db, from the replica that answered it.
      const rows = await sql(`select count(*) from hits where n between ${counts[0]} and ${counts.at(-1)}`);
      expect(Number(rows)).toBe(counts.at(-1)! - counts[0]! + 1);
      expect(Number(await sql(`select count(distinct replica) from hits where n in (${counts.join(',')})`))).toBe(served.size);
      // redis and db live on node-1, app replicas on all three: node-2 and node-3 talked to node-1 over the overlay.
      for (const n of NODES) {
        const after = await transfer(n);
        expect(after.rx, `${n} received over WireGuard`).toBeGreaterThan(before[n]!.rx);
        expect(after.tx, `${n} sent over WireGuard`).toBeGreaterThan(before[n]!.tx);
      }
    }), 300_000);

  it('fails no request under concurrent load through a rolling update of app, a drain of a node holding app replicas and a rebalancer move back onto it', () =>
    c.withLogs(async () => {
      const wg = Object.fromEntries(await Promise.all(NODES.map(async (n) => [n, await transfer(n)] as const)));
      // Two loops on every node's ingress, bounded in requests and (by the timer) in time.
      const loops = NODES.map((n) => requestLoop(`http://${c.node(n).address}:${PORT}/`, 20_000, 2));
      const bound = setTimeout(() => loops.forEach((l) => void l.stop()), 540_000);
      let results: Awaited<ReturnType<(typeof loops)[number]['stop']>>[];
      try {
        // The rolling update: a changed environment, applied again (nothing to build).
        writeFileSync(file, readFileSync(file, 'utf8').replace('VERSION: v1', 'VERSION: v2'));
        const applied = await c.jaco(['apply', '-f', file], undefined, 120_000);
        expect(applied.code, applied.stderr).toBe(0);
        expect(applied.stdout).toContain('deployment/counter configured');
        await rolledOut();
        expect((await replicas('app')).every((s) => s.template.env?.VERSION === 'v2')).toBe(true);
        // The drain: a node other than node-1 (redis and db stay) holding app replicas, the most of them.
        const app = await perNode('app');
        const [victim] = [...app.entries()].filter(([n]) => n !== 'node-1').sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]!;
        const drained = await c.jaco(['node', 'drain', victim, '--wait'], undefined, 300_000);
        expect(drained.code, drained.stdout + drained.stderr).toBe(0);
        expect((await perNode('app')).get(victim)).toBeUndefined();
        expect((await replicas('app')).length).toBe(4);
        await rolledOut();
        // The node back: app is lopsided (4 on 2 nodes), and the rebalancer's spread pass moves a
        // replica onto it, make-before-break, under the same load.
        const back = await c.jaco(['node', 'uncordon', victim]);
        expect(back.code, back.stderr).toBe(0);
        await eventually(async () => (await spreadMovesOf('app')).some((m) => m.payload.dst === victim) && (await perNode('app')).get(victim) === 1, { what: `a spread move of app back onto ${victim}`, timeoutMs: 180_000 });
        await rolledOut();
      } finally {
        clearTimeout(bound);
        results = await Promise.all(loops.map((l) => l.stop()));
      }
      const failures = results.flatMap((r) => r.failures);
      const sent = results.reduce((a, r) => a + r.sent, 0);
      expect(failures.length, `${failures.length} of ${sent} requests failed:\n${failures.join('\n')}`).toBe(0);
      expect(sent).toBeGreaterThan(200);
      sentUnderLoad = sent;
      // Under load to the end: no loop ran out of requests before the last move was over.
      for (const r of results) expect(r.sent).toBeLessThan(20_000);
      // Both revisions answered, v2 from every replica at the end.
      const bodies = results.flatMap((r) => [...r.seen]);
      expect(bodies.every((b) => ANSWER.test(b))).toBe(true);
      expect(bodies.some((b) => b.endsWith(' v1'))).toBe(true);
      const last = new Set<string>();
      await eventually(
        async () => {
          const m = ANSWER.exec(await ask('node-2', 'node-3'))!;
          expect(m[3]).toBe('v2');
          last.add(m[1]!);
          return last.size === 4;
        },
        { what: 'all four app replicas answering v2', timeoutMs: 60_000, intervalMs: 0 },
      );
      // Every counted hit is a row: nothing half-done (counted, not stored) under the moves.
      const [count, max] = (await sql('select count(*) || \' \' || max(n) from hits')).split(' ').map(Number);
      expect(count).toBe(max);
      for (const n of NODES) expect((await transfer(n)).rx).toBeGreaterThan(wg[n]!.rx);
    }), 900_000);

  it("Prometheus with deploy/prometheus's configuration scrapes every jaco process: the moves, rollouts and requests it reports are what the test caused, and the alert rules load", () =>
    c.withLogs(async () => {
      expect(sentUnderLoad, 'the load test ran first').toBeGreaterThan(0);
      const addresses = (which: (name: string) => boolean) => c.state.children.filter((ch) => which(ch.name)).map((ch) => ch.metrics);
      const targets = { controllers: addresses((n) => n === 'controllers'), agents: addresses((n) => NODES.includes(n)), ingresses: addresses((n) => n.startsWith('ingress-')) };
      expect([targets.controllers.length, targets.agents.length, targets.ingresses.length]).toEqual([1, 3, 3]);
      const prom = await TestPrometheus.start(targets);
      try {
        await eventually(async () => (await prom.targets()).filter((t) => t.health === 'up').length === 7, { what: 'all 7 jaco processes scraped', timeoutMs: 60_000 });
        const jobs = (await prom.targets()).map((t) => t.job).sort();
        expect(jobs).toEqual(['jaco-agent', 'jaco-agent', 'jaco-agent', 'jaco-controller', 'jaco-ingress', 'jaco-ingress', 'jaco-ingress']);
        const rules = await prom.rules();
        expect(rules.length).toBeGreaterThanOrEqual(8);
        expect(rules.filter((r) => r.health !== 'ok')).toEqual([]);

        // The rebalancer's moves by trigger: one per rebalance_moved audit record (one controllers process here).
        const audits = (await c.store.list<AuditEvent>(keys.audits())).items.map((a) => a.value.spec);
        const spread = audits.filter((e) => e.type === 'rebalance_moved' && e.payload.trigger === 'spread').length;
        expect(spread).toBeGreaterThan(0);
        const one = async (q: string) => (await prom.query(q))[0]?.value;
        await eventually(async () => (await one('sum(jaco_rebalance_moves_total{trigger="spread"})')) === spread, { what: `Prometheus counting ${spread} spread move(s)`, timeoutMs: 30_000 });
        // Skips by reason and rollouts by result: what the controllers process itself says, reason by reason.
        const own = `http://${targets.controllers[0]}/metrics`;
        await eventually(
          async () => {
            for (const s of await prom.query('sum by (reason) (jaco_rebalance_skips_total)')) if (s.value !== (await metric(own, 'jaco_rebalance_skips_total', `reason="${s.metric.reason}"`))) return false;
            return true;
          },
          { what: "Prometheus's rebalancer skips by reason equal to the process's", timeoutMs: 30_000 },
        );
        expect((await prom.query('jaco_rebalance_skips_total')).length).toBeGreaterThan(0);
        // The rolling update to v2 and the moves' re-rolls completed; none aborted.
        expect(await one('sum(jaco_rollouts_total{result="completed"})')).toBeGreaterThanOrEqual(1);
        expect(await one('sum(jaco_rollouts_total{result="aborted"})')).toBe(0);
        expect(await one('sum(jaco_rollout_in_progress)')).toBe(0);
        // The ingresses answered at least every request of the load test (HAProxy's own counters).
        expect(await one('sum(jaco_ingress_requests_total)')).toBeGreaterThanOrEqual(sentUnderLoad);
        // Every agent's Docker is up, as the alert rule reads it.
        expect((await prom.query('jaco_agent_docker_up == 1')).length).toBe(3);
      } finally {
        await prom.stop();
      }
    }), 180_000);
});
