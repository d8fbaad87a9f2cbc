// The long chaos run (test/chaos/chaos.ts): a real 3-member etcd, two `jaco controller all`
// copies, three agents on the local Docker engine, three deployments rolled out, scaled and
// drained, under seeded faults for CHAOS_MS (default 5 min, up to CHAOS_FAULTS faults, default
// 400). Run with
//   npm run build && scripts/build-images.sh && npx tsx test/bench/chaos.bench.ts
//   CHAOS_SEED=7 CHAOS_MS=600000 npx tsx test/bench/chaos.bench.ts      # another seed, longer
// Prints the faults by kind, the invariant violations (must be 0) and the time to converge once
// the faults stop (must be ≤ 60 s); exits 1 otherwise.
import { loadavg } from 'node:os';
import { formatReport, runChaos } from '../chaos/chaos.js';

const seed = Number(process.env.CHAOS_SEED ?? 1);
const chaosMs = Number(process.env.CHAOS_MS ?? 300_000);
const maxFaults = Number(process.env.CHAOS_FAULTS ?? 400);
const loads: number[] = [];
const sampler = setInterval(() => loads.push(loadavg()[0]!), 10_000);
const report = await runChaos({ seed, chaosMs, maxFaults, convergeMs: 60_000, log: process.env.CHAOS_TRACE ? (l) => console.log(l) : undefined });
clearInterval(sampler);
console.log(formatReport(report));
console.log(`  load average during the run: ${Math.min(...loads).toFixed(2)}–${Math.max(...loads).toFixed(2)}`);
const ok = report.violations.length === 0 && report.convergeMs !== undefined;
if (!ok) console.log(report.trace.join('\n'));
process.exit(ok ? 0 : 1);
