// Benchmark: the node's DNS server (controllers/node-agent/dns.ts) answering from its table, and
// forwarding to an upstream (a second instance: never a real resolver). Each server runs in a
// process of its own, the load generator in this one: closed-loop clients over UDP (one socket
// each, one query in flight), for a fixed time per row; loopback only (127.0.53.x).
//
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/dns.bench.ts [--seconds 3]
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import net from 'node:net';
import { loadavg } from 'node:os';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import dnsPacket from 'dns-packet';

const arg = (name: string, dflt: number) => Number(process.argv[process.argv.indexOf(name) + 1] ?? dflt) || dflt;

// ---- the server side: `--serve ADDRESS [--upstream ADDRESS:PORT]` prints its port and serves ----
if (process.argv.includes('--serve')) {
  const { DnsServer } = await import('../../controllers/node-agent/dns.js');
  const { setRootLogger } = await import('../../src/observability/log.js');
  const { pino } = await import('pino');
  setRootLogger(pino({ level: 'warn' }));
  const address = process.argv[process.argv.indexOf('--serve') + 1]!;
  const up = process.argv.includes('--upstream') ? process.argv[process.argv.indexOf('--upstream') + 1]!.split(':') : undefined;
  const s = new DnsServer({ listen: [{ address, port: 0 }], upstreams: up ? [{ address: up[0]!, port: Number(up[1]) }] : [] });
  await s.start();
  const names: Record<string, { ipv4: string[]; ipv6: string[] }> = {};
  if (up) {
    // The front: a cluster's worth of names, 200 deployments × 5 services.
    for (let d = 0; d < 200; d++) for (let v = 0; v < 5; v++) names[`svc${v}.dep${d}`] = { ipv4: [`10.208.${d}.${v + 1}`], ipv6: [`fd12:3456:789a:${d.toString(16)}::${v + 1}`] };
    s.setNames({ names, zones: Array.from({ length: 200 }, (_, d) => `dep${d}`) });
  } else {
    // The upstream: the name forwarded to it.
    s.setNames({ names: { 'example.org': { ipv4: ['192.0.2.10'], ipv6: [] } }, zones: [] });
  }
  console.log(JSON.stringify({ port: s.addresses[0]!.port }));
  process.on('SIGTERM', () => void s.stop().then(() => process.exit(0)));
} else {
  await bench();
}

async function startServer(address: string, upstream?: string): Promise<{ child: ChildProcess; port: number }> {
  const args = ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve', address, ...(upstream ? ['--upstream', upstream] : [])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('exit', (code) => reject(new Error(`server exited ${code}`)));
  });
  return { child, port: (JSON.parse(line) as { port: number }).port };
}

interface Row {
  qps: number;
  p50: number;
  p99: number;
  /** Answers with another rcode than the one wanted, and queries unanswered in 2 s. */
  errors: number;
}

/** `clients` closed loops, each asking `names` in turn for `seconds`. */
async function load(to: { address: string; port: number }, clients: number, seconds: number, names: string[], rcodeWanted = 0): Promise<Row> {
  const latencies: number[] = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: clients }, (_, c) => {
      const socket = dgram.createSocket(net.isIPv6(to.address) ? 'udp6' : 'udp4');
      return new Promise<void>((resolve) => {
        let id = 0;
        let t0 = 0;
        let timer: NodeJS.Timeout | undefined;
        const next = () => {
          clearTimeout(timer);
          if (performance.now() >= end) {
            socket.close();
            resolve();
            return;
          }
          id = (id + 1) & 0xffff;
          const name = names[(c * 7919 + id) % names.length]!;
          t0 = performance.now();
          socket.send(dnsPacket.encode({ type: 'query', id, flags: dnsPacket.RECURSION_DESIRED, questions: [{ name, type: 'A' }] }), to.port, to.address);
          timer = setTimeout(() => {
            errors++;
            next();
          }, 2000);
        };
        socket.on('message', (m) => {
          if (m.readUInt16BE(0) !== id) return;
          const rcode = m.readUInt16BE(2) & 0xf;
          if (rcode !== rcodeWanted) errors++;
          latencies.push(performance.now() - t0);
          next();
        });
        next();
      });
    }),
  );
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))] ?? NaN;
  return { qps: latencies.length / seconds, p50: pct(50), p99: pct(99), errors };
}

async function bench(): Promise<void> {
  const seconds = arg('--seconds', 3);
  const upstream = await startServer('127.0.53.101');
  const front = await startServer('127.0.53.100', `127.0.53.101:${upstream.port}`);
  const at = { address: '127.0.53.100', port: front.port };
  try {
    const table = Array.from({ length: 1000 }, (_, i) => `svc${i % 5}.dep${Math.floor(i / 5)}`);
    const nx = Array.from({ length: 1000 }, (_, i) => `nope${i % 5}.dep${Math.floor(i / 5)}`);
    // Warm-up: JIT and sockets, not measured.
    await load(at, 4, 1, table);
    await load(at, 4, 1, ['example.org']);
    const fmt = (what: string, clients: number, r: Row) =>
      console.log(`${what.padEnd(34)} clients ${String(clients).padStart(2)}: ${Math.round(r.qps).toString().padStart(6)} q/s, p50 ${r.p50.toFixed(3)} ms, p99 ${r.p99.toFixed(3)} ms${r.errors ? `, ${r.errors} errors` : ''}`);
    for (const clients of [1, 16]) fmt('A from the table (1,000 names)', clients, await load(at, clients, seconds, table));
    fmt('NXDOMAIN under a deployment', 16, await load(at, 16, seconds, nx, 3));
    for (const clients of [1, 16]) fmt('forwarded to an upstream instance', clients, await load(at, clients, seconds, ['example.org']));
    fmt('the upstream instance asked directly', 16, await load({ address: '127.0.53.101', port: upstream.port }, 16, seconds, ['example.org']));
  } finally {
    front.child.kill('SIGTERM');
    upstream.child.kill('SIGTERM');
  }
  console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} (2 cores); node ${process.version}`);
}
