// Benchmark: what resolving a tag to its digest costs (the pinning apply will do for every image),
// against a real distribution registry on 127.0.0.1 — plain HTTP, with htpasswd users (bcrypt on
// every request), and over TLS from the cluster CA with users — plus starting a registry and
// making the cluster CA and a certificate.
//
//   flock /tmp/jaco-heavy.lock npx tsx test/bench/images-resolve.bench.ts [--n 200]
import { loadavg } from 'node:os';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveDigest, type RegistryAccess } from '../../src/images/registry.js';
import { ensureClusterCa, issueCertificate } from '../../src/pki/ca.js';
import { startTestRegistry } from '../support/registry.js';

const n = Number(process.argv[process.argv.indexOf('--n') + 1] ?? 200) || 200;
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const ms = (x: number) => `${x.toFixed(2)} ms`;

async function timed<T>(fn: () => Promise<T> | T): Promise<[T, number]> {
  const t0 = performance.now();
  const v = await fn();
  return [v, performance.now() - t0];
}

const user = { username: 'bench', password: 'bench-pw' };
const dir = mkdtempSync(join(tmpdir(), 'jaco-bench-pki-'));
const [ca, caMs] = await timed(() => ensureClusterCa(join(dir, 'ca')));
const [, certMs] = await timed(() => issueCertificate(ca, { commonName: 'r', ips: ['127.0.0.1'], usage: 'server' }, { dir }));
console.log(`cluster CA made in ${ms(caMs)}; a server certificate issued in ${ms(certMs)}`);

for (const [name, opts, access] of [
  ['plain HTTP', {}, { insecure: true }],
  ['htpasswd', { users: { bench: user.password } }, { insecure: true, credentials: user }],
  ['TLS + htpasswd', { tls: ca, users: { bench: user.password } }, { caPem: ca.certPem, credentials: user }],
] as const) {
  const [reg, startMs] = await timed(() => startTestRegistry(opts));
  try {
    const digest = await reg.pushTinyImage('bench/app', '1', 'credentials' in access ? user : undefined);
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const [got, t] = await timed(() => resolveDigest(`${reg.host}/bench/app:1`, access as Omit<RegistryAccess, 'registry'>));
      if (got !== digest) throw new Error(`resolved ${got}, pushed ${digest}`);
      times.push(t);
    }
    const mean = times.reduce((a, b) => a + b, 0) / n;
    console.log(`${name.padEnd(15)} registry up in ${ms(startMs)}; resolve ×${n}: p50 ${ms(pct(times, 50))}, p95 ${ms(pct(times, 95))}, mean ${ms(mean)}`);
  } finally {
    await reg.stop();
  }
}
console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} (2 cores)`);
rmSync(dir, { recursive: true, force: true });
