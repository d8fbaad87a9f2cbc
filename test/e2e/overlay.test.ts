// Issue 26's overlay on separate hosts (`jaco up`: a namespace, an address and an engine per node,
// joined by routed links): the agents make a WireGuard full mesh over those links. Each node has
// the others as peers with their subnets (given by the scheduler once a cluster-network service
// exists) routed over its interface; traffic between two nodes' subnets crosses the router's links
// encrypted (captured there: only WireGuard's UDP, never the payload) and shows in the peers'
// counters; a cut link heals; an agent killed and restarted adopts the interface; a removed node's
// peer and routes go from the others, and a node that rejoins is a peer again.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { bareAddress, gatewayOf, replicaAddress } from '../../src/api/network.js';
import type { DeploymentStatus, Node, NodeSubnet, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { agentStateDir, enginesOf, readUpState } from '../../src/supervise/local-cluster.js';
import { localProcessEnv } from '../../src/supervise/local-credentials.js';
import { NETNS_DIR, overlayInterface } from '../../src/supervise/local-network.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { parseWgDump, type ObservedPeer } from '../../controllers/node-agent/overlay-observe.js';
import { requireDocker } from '../support/cluster.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually, sleep } from '../support/wait.js';

const run = promisify(execFile);
/** A distinctive payload: found in a capture of the links, it would have crossed them in the clear. */
const MARKER = 'JACO-OVERLAY-PLAINTEXT-MARKER-';
const HTTP_PORT = 18480;

/** An HTTP server in a node's namespace on the given addresses: / names the node, /bytes?n=N sends N bytes of MARKER. */
const SERVER = `
const http = require('http');
const [node, port, ...addrs] = process.argv.slice(1);
const chunk = Buffer.alloc(1 << 16, ${JSON.stringify(MARKER)});
const serve = (q, s) => {
  const n = Number(new URL(q.url, 'http://x').searchParams.get('n') || 0);
  if (!n) return s.end('hello from ' + node);
  s.writeHead(200, { 'content-length': n });
  let left = n;
  (function more() {
    while (left > 0) { const k = Math.min(left, chunk.length); left -= k; if (!s.write(chunk.subarray(0, k))) return s.once('drain', more); }
    s.end();
  })();
};
for (const a of addrs) http.createServer(serve).listen(Number(port), a);
console.log('listening');
`;

/** One GET from a node's namespace, from a given source address: {status, bytes, marker, body} or {error}. */
const CLIENT = `
const http = require('http');
const [url, localAddress, timeoutMs = '10000'] = process.argv.slice(1);
const t0 = Date.now();
const req = http.get(url, { localAddress, timeout: Number(timeoutMs) }, (res) => {
  let bytes = 0, head = '', marker = false;
  res.on('data', (d) => { bytes += d.length; if (head.length < 200) head += d.toString(); if (!marker && d.includes(${JSON.stringify(MARKER)})) marker = true; });
  res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, bytes, marker, body: head.slice(0, 100), ms: Date.now() - t0 })));
});
req.on('timeout', () => req.destroy(new Error('timeout')));
req.on('error', (e) => console.log(JSON.stringify({ error: e.message })));
`;

interface Got {
  status?: number;
  bytes?: number;
  marker?: boolean;
  body?: string;
  ms?: number;
  error?: string;
}

describe('separate hosts: the WireGuard mesh between nodes', () => {
  const c = new UpCluster({ nodes: 3 });
  const servers: ChildProcess[] = [];
  let rejoined: ChildProcess | undefined;
  const scratch = mkdtempSync(join(tmpdir(), 'jaco-overlay-e2e-'));

  const ns = (node: string) => c.node(node).netns;
  const dev = (node: string) => overlayInterface(c.net, c.node(node));
  const inNs = (node: string, cmd: string, args: string[]) => run('nsenter', [`--net=${NETNS_DIR}/${ns(node)}`, '--', cmd, ...args], { maxBuffer: 16 << 20 }).then((r) => r.stdout);
  const dump = async (node: string) => parseWgDump(await inNs(node, 'wg', ['show', dev(node), 'dump']));
  const subnets = async () => new Map((await c.store.list<NodeSubnet>(keys.subnets())).items.map((i) => [i.value.spec.node, i.value.spec]));
  const overlayOf = async (node: string) => (await c.store.get<Node>(keys.node(node)))?.value.status?.overlay;
  /** Host number 200 of a node's subnets, IPv4 and IPv6: the test's own address there. */
  const testAddress = async (node: string) => {
    const s = (await subnets()).get(node);
    if (!s) throw new Error(`${node} has no subnets`);
    const a = replicaAddress(s, 200);
    return { ipv4: bareAddress(a.ipv4), ipv6: bareAddress(a.ipv6) };
  };
  const peerOf = async (node: string, other: string): Promise<ObservedPeer | undefined> => {
    const key = (await overlayOf(other))?.publicKey;
    return (await dump(node)).peers.find((p) => p.publicKey === key);
  };
  /** Puts the test's addresses of a node's subnets on its loopback and serves HTTP there. */
  const serveOn = async (node: string, alsoOnLink = false) => {
    const a = await testAddress(node);
    await inNs(node, 'ip', ['addr', 'replace', `${a.ipv4}/32`, 'dev', 'lo']);
    await inNs(node, 'ip', ['addr', 'replace', `${a.ipv6}/128`, 'dev', 'lo']);
    const on = [a.ipv4, a.ipv6, ...(alsoOnLink ? [c.node(node).address] : [])];
    const p = spawn('nsenter', [`--net=${NETNS_DIR}/${ns(node)}`, '--', process.execPath, '-e', SERVER, node, String(HTTP_PORT), ...on], { stdio: ['ignore', 'pipe', 'inherit'] });
    servers.push(p);
    await new Promise<void>((resolve, reject) => {
      p.stdout!.once('data', () => resolve());
      p.once('exit', (code) => reject(new Error(`the test server on ${node} exited (${code})`)));
    });
    return a;
  };
  /**
   * A GET from `from`'s test address to `to`'s (IPv4, or IPv6). A request that must be answered
   * waits 10 s without a byte before it is a timeout: TCP sends its SYN again after 1, 3 and 7 s, so
   * a machine stalled for a few seconds (a clean run once lost an etcd lease so, and with a 2.5 s
   * limit these requests with it) is slow, not broken. One that must not be answered passes less.
   */
  const get = async (from: string, to: string, path = '/', family: 4 | 6 = 4, timeoutMs = 10_000): Promise<Got> => {
    const [src, dst] = [await testAddress(from), await testAddress(to)];
    const url = family === 4 ? `http://${dst.ipv4}:${HTTP_PORT}${path}` : `http://[${dst.ipv6}]:${HTTP_PORT}${path}`;
    return JSON.parse((await inNs(from, process.execPath, ['-e', CLIENT, url, family === 4 ? src.ipv4 : src.ipv6, String(timeoutMs)])).trim()) as Got;
  };
  /** Whether this kernel makes WireGuard interfaces itself (else the agents run wireguard-go): tried in node-1's namespace. */
  let kernelWireGuard = false;
  const ifindex = async (node: string) => (JSON.parse(await inNs(node, 'ip', ['-j', 'link', 'show', 'dev', dev(node)])) as { ifindex: number }[])[0]!.ifindex;
  const healthz = async (node: string) => (await (await fetch(`http://${c.node(node).address}:9465/healthz`, { signal: AbortSignal.timeout(3000) })).json()) as { overlay?: Record<string, unknown> };
  const wireguardGoPids = async (node: string) => {
    const pids = (await run('ip', ['netns', 'pids', ns(node)])).stdout.split('\n').filter(Boolean);
    return pids.filter((p) => {
      try {
        return readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'wireguard-go';
      } catch {
        return false;
      }
    });
  };

  /**
   * What the path between two nodes' tunnels looked like, for a request that got no answer: each
   * end's WireGuard peers (latest handshake, bytes each way, endpoint), the router's counters of
   * both nodes' links, the route `from` takes, each end's routes, tunnel interface counters and UDP
   * counters, and both agents' overlay health. A failure then says whether the handshake, the link
   * or the client stalled.
   */
  const pathReport = async (from: string, to: string) => {
    const part = async (what: string, f: () => Promise<string>) => `-- ${what}\n${await f().catch((e: Error) => `(failed: ${e.message})`)}`;
    const dst = (await testAddress(to)).ipv4;
    const parts = await Promise.all([
      ...[from, to].map((n) => part(`${n}: wg show dump`, () => inNs(n, 'wg', ['show', dev(n), 'dump']))),
      ...[from, to].map((n) => part(`router: ${n}'s link`, () => run('nsenter', [`--net=${NETNS_DIR}/${c.net.router}`, '--', 'ip', '-s', 'link', 'show', 'dev', c.node(n).link]).then((r) => r.stdout))),
      part(`${from}: route to ${dst}`, () => inNs(from, 'ip', ['route', 'get', dst])),
      // Where each end's tunnel packets go (a route to the peer's endpoint through the tunnel itself
      // would loop), what its tunnel interface dropped, and what its UDP stack dropped.
      ...[from, to].map((n) => part(`${n}: routes`, () => inNs(n, 'ip', ['route', 'show', 'table', 'all']))),
      ...[from, to].map((n) => part(`${n}: ${dev(n)}`, () => inNs(n, 'ip', ['-s', 'link', 'show', 'dev', dev(n)]))),
      ...[from, to].map((n) => part(`${n}: UDP counters`, async () => (await inNs(n, 'nstat', ['-asz'])).split('\n').filter((l) => /^Udp/.test(l)).join('\n'))),
      ...[from, to].map((n) => part(`${n}: agent's overlay health`, async () => JSON.stringify((await healthz(n)).overlay))),
    ]);
    return `no answer from ${to} to ${from} at ${new Date().toISOString()}\n${parts.join('\n')}`;
  };
  /** A GET from `from` to `to` that must be answered: a failure carries pathReport. */
  const answered = async (from: string, to: string, path = '/', family: 4 | 6 = 4) => {
    const got = await get(from, to, path, family);
    if (got.status !== 200) throw new Error(`${JSON.stringify(got)}\n${await pathReport(from, to)}`);
    return got;
  };

  beforeAll(async () => {
    await requireDocker();
    await c.start();
    const probe = ['--net=' + `${NETNS_DIR}/${ns('node-1')}`, '--', 'ip', 'link'];
    kernelWireGuard = spawnSync('nsenter', [...probe, 'add', 'dev', 'probe-wg', 'type', 'wireguard']).status === 0;
    if (kernelWireGuard) spawnSync('nsenter', [...probe, 'del', 'dev', 'probe-wg']);
    const r = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1'], undefined, 60_000);
    expect(r.code, r.stderr).toBe(0);
    // A cluster-network service makes the scheduler give every node its subnets; none of its replicas needs to run.
    await c.apply(`
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: mesh}
spec:
  services:
    web:
      image: jaco-demo/busybox:1
      replicas: 0
      network: cluster
`);
    await eventually(async () => (await subnets()).size === 3, { what: 'subnets for the three nodes', timeoutMs: 30_000 });
  });
  afterAll(async () => {
    for (const p of servers) p.kill('SIGTERM');
    rejoined?.kill('SIGTERM');
    await c.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('every node has the two others as peers, their subnets as allowed IPs, routed over its interface; handshakes follow', () =>
    c.withLogs(async () => {
      const nodes = ['node-1', 'node-2', 'node-3'];
      const subs = await subnets();
      for (const n of nodes) {
        const others = nodes.filter((o) => o !== n);
        // The agent's own word first: up, both peers configured (its configuring pass — peers, then
        // routes — is over). The subnets beforeAll waited for have only just been given, and a
        // look at the interface between the pass's steps could see peers with no route yet.
        const up = { up: true, interface: dev(n), peers: { expected: 2, configured: 2 }, missing: [] };
        const h = await eventually(
          async () => {
            const o = (await healthz(n)).overlay;
            expect(o).toMatchObject(up);
            return o;
          },
          { what: `${n}'s /healthz: overlay up with both peers`, timeoutMs: 60_000 },
        );
        // These test machines' kernels have no WireGuard: wireguard-go; one with it: the kernel's.
        expect([h.mode, h.kind]).toEqual(kernelWireGuard ? ['kernel', 'wireguard'] : ['userspace', 'tun']);
        await eventually(
          async () => {
            const d = await dump(n);
            const want = await Promise.all(others.map(async (o) => ({ key: (await overlayOf(o))!.publicKey, endpoint: `${c.node(o).address}:51820`, ips: [subs.get(o)!.ipv4, subs.get(o)!.ipv6] })));
            return d.publicKey === (await overlayOf(n))?.publicKey && d.listenPort === 51820 && want.every((w) => d.peers.some((p) => p.publicKey === w.key && p.endpoint === w.endpoint && p.allowedIps.join() === w.ips.join() && p.latestHandshake > 0)) && d.peers.length === 2;
          },
          { what: `${n}: both others as peers with a handshake`, timeoutMs: 60_000 },
        );
        // A route to each other node's subnet (both families) goes over the WireGuard interface, from the node's own subnet.
        for (const o of others) {
          const a = await testAddress(o);
          for (const addr of [a.ipv4, a.ipv6]) {
            const [route] = JSON.parse(await inNs(n, 'ip', ['-j', 'route', 'get', addr])) as { dev: string; prefsrc?: string }[];
            expect(route!.dev, `${n} → ${addr}`).toBe(dev(n));
            expect(route!.prefsrc).toBe(gatewayOf(subs.get(n)![addr.includes(':') ? 'ipv6' : 'ipv4']));
          }
        }
        // The handshakes' ages are read on the overlay's next look at its interface (every 2 s here).
        const handshakes = others.map((o) => new RegExp(`^jaco_agent_overlay_handshake_age_seconds\\{peer="${o}"\\} \\d+$`, 'm'));
        const said = [/^jaco_agent_overlay_up 1$/m, /^jaco_agent_overlay_peers\{state="configured"\} 2$/m, ...handshakes];
        await eventually(async () => {
          const m = await (await fetch(`http://${c.node(n).address}:9465/metrics`)).text();
          for (const r of said) expect(m).toMatch(r);
          return true;
        }, { what: `${n}'s metrics: overlay up, both peers configured, a handshake age per peer`, timeoutMs: 15_000 });
      }
    }));

  it("traffic between node-1's subnet and node-2's crosses the tunnel: counted by WireGuard, never on the link in the clear", () =>
    c.withLogs(async () => {
      for (const n of ['node-1', 'node-2', 'node-3']) await serveOn(n, n === 'node-2');
      expect(await answered('node-1', 'node-2')).toMatchObject({ status: 200, body: 'hello from node-2' });
      expect(await answered('node-2', 'node-1', '/', 6)).toMatchObject({ status: 200, body: 'hello from node-1' });

      /**
   * Captures both nodes' links on the router while `fn` runs; the capture files. In immediate mode:
   * otherwise packets wait in the kernel's buffer up to a second and those still there when
   * tcpdump is stopped never reach the file; with a 64 MiB buffer, so that a burst of a loaded
   * machine loses nothing (checked: none dropped by the kernel). In immediate mode the buffer is a
   * ring of one slot per packet, each as large as the snapshot length: at tcpdump's default
   * (262,144 bytes) 64 MiB held 256 packets, and a loaded machine dropped some of the 4,300 of the
   * tunnel's 4 MiB. 4 KiB slots hold every packet on these 1,500-byte links whole (16,384 of them);
   * a packet the kernel merged past that is cut after its first 4 KiB, its headers (the port
   * checks) and its start (the payload is the 30-byte marker over and over) still read.
   */
      const capture = async (name: string, fn: () => Promise<void>) => {
        const files = ['n1', 'n2'].map((l) => join(scratch, `${name}-${l}.pcap`));
        const dumps = files.map((f, i) => spawn('nsenter', [`--net=${NETNS_DIR}/${c.net.router}`, '--', 'tcpdump', '-i', c.node(`node-${i + 1}`).link, '--immediate-mode', '-B', '65536', '-s', '4096', '-U', '-nn', '-Z', 'root', '-w', f], { stdio: ['ignore', 'ignore', 'pipe'] }));
        const said = dumps.map((d) => {
          let text = '';
          d.stderr!.on('data', (b: Buffer) => (text += b.toString()));
          return () => text;
        });
        await eventually(() => said.every((s) => s().includes('listening on')), { what: 'tcpdump listening on both links' });
        await fn();
        await sleep(300);
        await Promise.all(dumps.map((d) => new Promise((r) => (d.once('close', r), d.kill('SIGINT')))));
        for (const s of said) expect(s(), `tcpdump said: ${s()}`).toMatch(/^0 packets dropped by kernel$/m);
        return files;
      };
      const read = (f: string, filter: string) => spawnSync('tcpdump', ['-r', f, '-nn', filter], { encoding: 'utf8', maxBuffer: 64 << 20 }).stdout.split('\n').filter(Boolean);

      // The control: the same server reached at node-2's own address goes over the link in the clear, and the capture shows it.
      const plain = await capture('plain', async () => {
        const r = JSON.parse((await inNs('node-1', process.execPath, ['-e', CLIENT, `http://${c.node('node-2').address}:${HTTP_PORT}/bytes?n=65536`, c.node('node-1').address])).trim()) as Got;
        expect(r).toMatchObject({ status: 200, bytes: 65536, marker: true });
      });
      for (const f of plain) {
        expect(read(f, `tcp port ${HTTP_PORT}`).length, `${f}: the plain connection`).toBeGreaterThan(0);
        expect(readFileSync(f).includes(MARKER), `${f}: the plain payload`).toBe(true);
      }

      // Through the tunnel: 4 MiB from node-2's subnet to node-1's.
      const [rx0, tx0] = [(await peerOf('node-1', 'node-2'))!.rxBytes, (await peerOf('node-2', 'node-1'))!.txBytes];
      const size = 4 << 20;
      const files = await capture('tunnel', async () => {
        expect(await answered('node-1', 'node-2', `/bytes?n=${size}`)).toMatchObject({ status: 200, bytes: size, marker: true });
      });
      const [rx1, tx1] = [(await peerOf('node-1', 'node-2'))!.rxBytes, (await peerOf('node-2', 'node-1'))!.txBytes];
      expect(rx1 - rx0).toBeGreaterThan(size);
      expect(tx1 - tx0).toBeGreaterThan(size);
      for (const f of files) {
        // Every byte of the payload crossed as WireGuard's UDP (its length is the encrypted payload's and more).
        const wgBytes = read(f, 'udp port 51820').reduce((sum, l) => sum + Number(/length (\d+)$/.exec(l)?.[1] ?? 0), 0);
        expect(wgBytes, `${f}: WireGuard bytes`).toBeGreaterThan(size);
        expect(read(f, `tcp port ${HTTP_PORT}`), `${f}: the HTTP connection in the clear`).toEqual([]);
        expect(readFileSync(f).includes(MARKER), `${f}: the payload in the clear`).toBe(false);
      }
    }));

  it("node-3's link cut and restored: the tunnel works again", () =>
    c.withLogs(async () => {
      expect(await answered('node-1', 'node-3')).toMatchObject({ status: 200, body: 'hello from node-3' });
      await c.cut('node-3');
      try {
        expect((await get('node-1', 'node-3', '/', 4, 2500)).error).toMatch(/timeout/);
      } finally {
        await c.restore('node-3');
      }
      const t0 = Date.now();
      const rx0 = (await peerOf('node-3', 'node-1'))!.rxBytes;
      await eventually(async () => (await get('node-1', 'node-3')).status === 200 && (await get('node-3', 'node-2', '/', 6)).status === 200, { what: 'node-3 reachable over the tunnel again', timeoutMs: 60_000, intervalMs: 200 });
      console.log(`overlay: node-3 reachable again ${Date.now() - t0} ms after its link was restored`);
      expect((await peerOf('node-3', 'node-1'))!.rxBytes).toBeGreaterThan(rx0);
    }));

  it('an agent killed and restarted adopts the interface and its wireguard-go; one deleted behind its back is made again; a wireguard-go that keeps dying is started again after a back-off', () =>
    c.withLogs(async () => {
      const before = await wireguardGoPids('node-1');
      expect(before).toHaveLength(kernelWireGuard ? 0 : 1);
      const index = await ifindex('node-1');
      const agentPid = readUpState(c.dataDir)!.children.find((x) => x.name === 'node-1')!.pid!;
      process.kill(agentPid, 'SIGKILL');
      await eventually(async () => {
        const pid = readUpState(c.dataDir)!.children.find((x) => x.name === 'node-1')!.pid;
        return pid && pid !== agentPid && (await healthz('node-1').catch(() => undefined))?.overlay?.up === true;
      }, { what: "node-1's agent restarted with its overlay up", timeoutMs: 60_000 });
      expect(readFileSync(join(c.dataDir, 'logs', 'node-1.log'), 'utf8')).toContain('adopting the overlay interface already there');
      expect(await wireguardGoPids('node-1')).toEqual(before);
      expect(await ifindex('node-1')).toBe(index);
      expect((await dump('node-1')).peers).toHaveLength(2);
      expect(await answered('node-1', 'node-2')).toMatchObject({ status: 200 });

      await inNs('node-1', 'ip', ['link', 'del', 'dev', dev('node-1')]);
      await eventually(async () => (await get('node-1', 'node-2')).status === 200 && (await dump('node-1')).peers.length === 2, { what: "node-1's interface made again with its peers", timeoutMs: 30_000 });
      expect(await ifindex('node-1')).not.toBe(index);
      const after = await wireguardGoPids('node-1');
      expect(after).toHaveLength(kernelWireGuard ? 0 : 1);
      if (!kernelWireGuard) expect(after).not.toEqual(before);
      if (kernelWireGuard) return;

      // A wireguard-go that dies soon after it started is started again after a back-off (1 s,
      // doubling): never as fast as it can die (it once restarted ~15 times a second).
      const exits = () =>
        readFileSync(join(c.dataDir, 'logs', 'node-1.log'), 'utf8')
          .split('\n')
          .filter((l) => l.includes('wireguard-go exited'))
          .map((l) => JSON.parse(l) as { livedMs: number; restartInMs: number });
      const seen = exits().length;
      for (let i = 0; i < 2; i++) {
        const [pid] = await wireguardGoPids('node-1');
        // Up (its socket answers `wg`), and a moment for the agent to see it started.
        await eventually(async () => (await inNs('node-1', 'wg', ['show', dev('node-1'), 'listen-port']).then(() => true, () => false)), { what: "node-1's wireguard-go answering" });
        await sleep(300);
        process.kill(Number(pid), 'SIGKILL');
        await eventually(async () => {
          const now = await wireguardGoPids('node-1');
          return now.length === 1 && now[0] !== pid;
        }, { what: "node-1's wireguard-go started again", timeoutMs: 30_000 });
      }
      const killed = exits().slice(seen);
      expect(killed).toHaveLength(2);
      // The second had lived a moment: restarted after the back-off, not at once.
      expect(killed[1]!.livedMs).toBeLessThan(10_000);
      expect(killed[1]!.restartInMs).toBeGreaterThanOrEqual(1_000);
      await eventually(async () => (await get('node-1', 'node-2')).status === 200 && (await dump('node-1')).peers.length === 2, { what: "node-1's overlay back with its peers", timeoutMs: 30_000 });
      expect(exits().length - seen).toBe(2);
    }));

  // Issue 34: node eligibility on the same hosts. What a node's agent reports makes it degraded
  // (no new placements, `node_degraded`), and the node takes replicas again once the cause clears.
  const reasonOf = async (deployment: string, service: string) => (await c.store.get<DeploymentStatus>(keys.deploymentStatus(deployment)))?.value.status?.scheduling?.services[service]?.unschedulable;
  const placedOn = async (deployment: string) => (await c.store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value.spec).filter((d) => d.deployment === deployment).map((d) => d.node);
  const statusOf = async (node: string) => {
    const r = await c.jaco(['get', 'nodes', node]);
    return r.stdout.split('\n')[1]?.split(/\s+/)[1] ?? '';
  };
  const sleeper = (name: string, extra = '') => `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: ${name}}
spec:
  services:
    app:
      image: jaco-demo/busybox:1
      replicas: 1
      command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']
${extra}`;

  it("node-3 cut from its peers' overlay (its etcd link up) is degraded and takes no new replica; joined again, it does", () =>
    c.withLogs(async () => {
      // A peer is unreachable when nothing was heard from it for 15 s. A live but idle peer is heard
      // every 5 s (its keepalive with fast timings), seen within 2 s (the agent's wg observation):
      // 15 s leaves the idle pair node-1/node-2 8 s of margin that load cannot eat (with the 25 s
      // production keepalive, a max age of 30 s left 3 s, and they flapped).
      expect((await c.jaco(['node', 'settings', '--overlay-max-age', '15s'])).code).toBe(0);
      // The mesh is up: every node hears both of its peers (a new mesh waits for its first handshakes).
      await eventually(async () => (await Promise.all(['node-1', 'node-2', 'node-3'].map(statusOf))).every((x) => x === 'Ready'), { what: 'no node degraded before the cut', timeoutMs: 60_000, intervalMs: 500 });
      // Routes, not a firewall: packets between node-3 and the other nodes go nowhere, both ways;
      // etcd (at the machine's address) stays reachable from every node.
      const cuts = [...['node-1', 'node-2'].map((n) => ['node-3', c.node(n).address] as const), ...['node-1', 'node-2'].map((n) => [n, c.node('node-3').address] as const)];
      for (const [n, a] of cuts) await inNs(n, 'ip', ['route', 'add', 'blackhole', `${a}/32`]);
      const t0 = Date.now();
      try {
        await eventually(async () => (await statusOf('node-3')).includes('Degraded'), { what: 'node-3 degraded', timeoutMs: 60_000, intervalMs: 500 });
        console.log(`eligibility: node-3 degraded ${Date.now() - t0} ms after its overlay was cut`);
        expect(await c.ready('node-3')).toBe(true);
        // One of two peers lost is not more than half: the others stay eligible.
        for (const n of ['node-1', 'node-2']) expect(await statusOf(n)).toBe('Ready');
        const describe = await c.jaco(['describe', 'node', 'node-3']);
        // Its own view may lag its peers' (they stop hearing it first): the cause counts both.
        console.log(`eligibility: ${describe.stdout.split('\n').find((l) => l.startsWith('Overlay:')) ?? 'no Overlay line'}`);
        expect(describe.stdout).toContain('overlay_unreachable: 2 of 2 WireGuard peers unreachable');
        await c.apply(sleeper('pinned', '      placement: {mode: hosts, hosts: [node-3]}'));
        const u = await eventually(() => reasonOf('pinned', 'app'), { what: 'pinned/app unschedulable' });
        // A hosts service is all or nothing (its own reason); node-3's verdict says why it cannot take it.
        expect(u.reason).toBe('cannot_satisfy_host_placement');
        expect(u.nodes['node-3']).toMatch(/degraded: overlay_unreachable — 2 of 2 WireGuard peers unreachable/);
        expect(await placedOn('pinned')).toEqual([]);
      } finally {
        for (const [n, a] of cuts) await inNs(n, 'ip', ['route', 'del', 'blackhole', `${a}/32`]).catch(() => undefined);
      }
      const t1 = Date.now();
      await eventually(async () => (await placedOn('pinned')).length === 1, { what: 'pinned/app placed on node-3 once its peers are heard again', timeoutMs: 60_000, intervalMs: 500 });
      console.log(`eligibility: node-3 took the replica ${Date.now() - t1} ms after its overlay was joined again`);
      expect(await placedOn('pinned')).toEqual(['node-3']);
      await c.jaco(['delete', 'deployment', 'pinned']);
      await c.jaco(['node', 'settings', '--overlay-max-age', 'default']);
    }));

  it('a data root filled past the disk-pressure limit degrades its node: running replicas stay, new ones wait (or go to a trusted node), and freeing the space ends it', () =>
    c.withLogs(async () => {
      await c.apply(sleeper('kept', '      placement: {mode: hosts, hosts: [node-1]}'));
      await eventually(async () => (await c.store.list<ReplicaObserved>(keys.observedOf('node-1'))).items.some((i) => i.value.status.deployment === 'kept' && i.value.status.state === 'running'), { what: 'kept/app running on node-1', timeoutMs: 60_000 });
      // The nodes' engines keep their data roots under the cluster's directory: one filesystem, so
      // filling it fills all three. The limit goes just above what is used now and a file takes
      // the filesystem past it (at most about 2% of it, released at the end).
      const fs = await statfs(c.dataDir);
      const usable = (fs.blocks - fs.bfree + fs.bavail) * fs.bsize;
      const usedPercent = (100 * (fs.blocks - fs.bfree) * fs.bsize) / usable;
      const limit = Math.ceil(usedPercent + 0.5);
      const fill = Math.ceil(((limit + 0.5) / 100) * usable - (fs.blocks - fs.bfree) * fs.bsize);
      expect((await c.jaco(['node', 'settings', '--disk-pressure', String(limit)])).code).toBe(0);
      const filler = join(scratch, 'filler');
      await run('fallocate', ['-l', String(fill), filler]);
      try {
        const t0 = Date.now();
        await eventually(async () => (await Promise.all(['node-1', 'node-2', 'node-3'].map(statusOf))).every((s) => s.includes('Degraded')), { what: 'every node degraded (disk_pressure)', timeoutMs: 30_000, intervalMs: 300 });
        console.log(`eligibility: nodes degraded ${Date.now() - t0} ms after ${(fill / 2 ** 30).toFixed(1)} GiB filled their data root's filesystem past ${limit}%`);
        expect((await c.jaco(['describe', 'node', 'node-1'])).stdout).toMatch(/disk_pressure: .* is \d+% full .*limit \d+%/);
        await c.apply(sleeper('late'));
        const u = await eventually(() => reasonOf('late', 'app'), { what: 'late/app unschedulable' });
        expect(u.reason).toBe('node_degraded');
        // What runs there keeps running: degraded stops placements, it moves nothing.
        expect((await c.store.list<ReplicaObserved>(keys.observedOf('node-1'))).items.find((i) => i.value.status.deployment === 'kept')?.value.status.state).toBe('running');
        // An operator's trust lets node-2 take it (audited), though it is still degraded.
        expect((await c.jaco(['node', 'trust', 'node-2'])).stdout).toContain('trusted');
        await eventually(async () => (await placedOn('late')).join() === 'node-2', { what: 'late/app placed on the trusted node-2' });
        expect(await statusOf('node-2')).toContain('Degraded(trusted)');
        expect((await c.jaco(['node', 'distrust', 'node-2'])).code).toBe(0);
      } finally {
        rmSync(filler, { force: true });
      }
      const t1 = Date.now();
      await eventually(async () => (await Promise.all(['node-1', 'node-2', 'node-3'].map(statusOf))).every((s) => s === 'Ready'), { what: 'no node degraded once the space is freed', timeoutMs: 30_000, intervalMs: 300 });
      console.log(`eligibility: nodes eligible again ${Date.now() - t1} ms after the space was freed`);
      expect((await c.jaco(['scale', 'late/app=2'])).code).toBe(0);
      await eventually(async () => (await placedOn('late')).length === 2, { what: 'late/app scaled onto an eligible node' });
      await c.jaco(['node', 'settings', '--disk-pressure', 'default']);
      for (const d of ['kept', 'late']) await c.jaco(['delete', 'deployment', d]);
    }));

  it("a removed node's peer and routes go from the others; rejoining, it is a peer again", () =>
    c.withLogs(async () => {
      const gone = await testAddress('node-3');
      const key3 = (await overlayOf('node-3'))!.publicKey;
      const r = await c.jaco(['node', 'remove', 'node-3', '--wait', '--timeout', '60s'], undefined, 90_000);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      for (const n of ['node-1', 'node-2'])
        await eventually(
          async () => {
            const d = await dump(n);
            const routes = await inNs(n, 'ip', ['route', 'show', 'dev', dev(n), 'proto', '106']);
            return d.peers.length === 1 && !d.peers.some((p) => p.publicKey === key3) && !routes.includes(gone.ipv4.split('.').slice(0, 3).join('.'));
          },
          { what: `${n} without node-3's peer and routes`, timeoutMs: 30_000 },
        );
      // The removed node's agent deleted its own interface, and its wireguard-go went with it.
      await eventually(async () => (await wireguardGoPids('node-3')).length === 0, { what: "node-3's wireguard-go gone" });
      expect(await inNs('node-3', 'ip', ['-br', 'link'])).not.toContain(dev('node-3'));

      // Back with --rejoin (its key read again from its state directory): a peer again, its new subnets routed.
      const t0 = Date.now();
      const upState = readUpState(c.dataDir)!;
      const engine = enginesOf(c.dataDir, upState).find((e) => e.node === 'node-3')!;
      const agentArgs = [join(PACKAGE_ROOT, 'bin', 'jaco'), '--timings', 'fast', 'agent', '--node', 'node-3', '--capacity', 'cpu=1,memory=2Gi', '--metrics-addr', `${c.node('node-3').address}:9465`, '--pressure', 'containers', '--state-dir', agentStateDir(c.dataDir, 'node-3'), '--address', c.node('node-3').address, '--docker-host', `unix://${engine.socket}`, '--overlay', '--overlay-interface', dev('node-3'), '--rejoin'];
      rejoined = spawn('nsenter', [`--net=${NETNS_DIR}/${ns('node-3')}`, '--', process.execPath, ...agentArgs], { env: { ...process.env, JACO_ENDPOINTS: `https://${c.net.hostAddress}:${new URL(upState.endpoint).port}`, ...localProcessEnv(c.dataDir, 'agent-node-3.env') }, stdio: 'ignore' });
      const registered = await eventually(async () => (await c.store.get<Node>(keys.node('node-3')))?.value, { what: 'node-3 registered again', timeoutMs: 30_000 });
      expect(registered.status!.overlay!.publicKey).toBe(key3);
      const back = await eventually(async () => (await subnets()).get('node-3') && (await testAddress('node-3')), { what: 'node-3 given subnets again' });
      // Its subnets may be others than before: the test serves on its new addresses too.
      if (back.ipv4 !== gone.ipv4) await serveOn('node-3');
      await eventually(async () => (await get('node-1', 'node-3')).status === 200 && (await get('node-2', 'node-3', '/', 6)).status === 200, { what: 'node-3 reachable over the tunnel again', timeoutMs: 60_000, intervalMs: 100 });
      const reachable = Date.now();
      console.log(`overlay: a rejoining node reachable from the others ${reachable - Date.parse(registered.status!.registeredAt)} ms after it registered (${reachable - t0} ms after its agent started)`);
    }));
});
