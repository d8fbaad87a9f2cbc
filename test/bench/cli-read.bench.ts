// Benchmark: the CLI's reads on a large cluster, the whole process as an operator runs it —
// `jaco get replicas` and `jaco status` over 10,000 running replicas (20 services × 500, on 1,000
// nodes: desired and observed keys as the scheduler and the agents write them) in a real etcd;
// `jaco version` beside them is the floor (Node's start and the command's own modules).
//   npm run build && node --import tsx test/bench/cli-read.bench.ts
// Each read three ways: with no kept reads (JACO_READ_CACHE=off: every value from etcd), from reads
// kept by the run before with nothing changed since, and with 100 replicas' observed keys
// rewritten before each run (a live cluster: what changed is read and kept again).
// RUNS=N runs each command N times (default 5); CLI_PROF=DIR writes each run's CPU profile there;
// CLI_NODE_ARGS="…" passes Node flags to each CLI process (to try one before building it in).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keys } from '../../src/api/keys.js';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { commitActs, type OpGroup } from '../../src/store/writer.js';
import { JACO_BIN } from '../support/cli.js';
import { startTestEtcd } from '../support/etcd.js';

const SERVICES = 20;
const PER_SERVICE = 500;
const NODES = 1_000;
const RUNS = Number(process.env.RUNS ?? 5);
const PROFILE = [...(process.env.CLI_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CLI_PROF}`] : []), ...(process.env.CLI_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];

const service = { image: 'jaco-demo/busybox:1', command: ['sleep', '100000'], replicas: PER_SERVICE, resources: { cpu: '10m', memory: '16Mi' } };
const manifest = JSON.stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'big' }, spec: { services: Object.fromEntries(Array.from({ length: SERVICES }, (_, s) => [`s${s}`, service])) } });
const template = withDefaults(service);
const hash = specHash(template);

const etcd = await startTestEtcd();
const keptDir = mkdtempSync(join(tmpdir(), 'jaco-kept-'));
try {
  const prefix = '/bench-cli/';
  let env: NodeJS.ProcessEnv = { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: prefix, JACO_READ_CACHE: 'off' };
  const jaco = (args: string[], input?: string) => {
    const t = performance.now();
    const r = spawnSync(process.execPath, [...PROFILE, JACO_BIN, ...args], { env, input, encoding: 'utf8', maxBuffer: 256 << 20 });
    if (r.status !== 0) throw new Error(`jaco ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
    return { ms: performance.now() - t, out: r.stdout };
  };
  jaco(['apply', '-f', '-'], manifest);
  const store = etcd.store(prefix);
  const acts: OpGroup[] = [];
  const someObserved: { key: string; value: ReplicaObserved }[] = [];
  const now = new Date().toISOString();
  for (let s = 0; s < SERVICES; s++)
    for (let i = 0; i < PER_SERVICE; i++) {
      const replica = `big-s${s}-${i}`;
      const node = `node-${String((s * PER_SERVICE + i) % NODES).padStart(4, '0')}`;
      const d: ReplicaDesired = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: replica }, spec: { replica, deployment: 'big', service: `s${s}`, node, index: i, revision: 1, specHash: hash, template, placedAt: now } };
      const o: ReplicaObserved = { apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: replica }, status: { replica, node, deployment: 'big', service: `s${s}`, state: 'running', revision: 1, specHash: hash, containerId: `c${s}x${i}`, startedAt: now, observedAt: now } };
      acts.push({ ops: [{ op: 'put', key: keys.desired(node, replica), value: d }, { op: 'put', key: keys.observed(node, replica), value: o }] });
      if (someObserved.length < 100) someObserved.push({ key: keys.observed(node, replica), value: o });
    }
  await commitActs(store, acts);
  await clusterInfo(store); // a cluster's uid, as its first agent or `jaco up` writes it
  // Before each run of the third way: 100 replicas' observed keys rewritten, as agents do.
  let turn = 0;
  const change = async () => {
    turn++;
    const observedAt = new Date(Date.now() + turn).toISOString();
    await commitActs(store, someObserved.map(({ key, value }) => ({ ops: [{ op: 'put', key, value: { ...value, status: { ...value.status, observedAt } } }] })));
  };

  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const measure = async (args: string[], check: (out: string) => void, before?: () => Promise<void>) => {
    const times: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      await before?.();
      const r = jaco(args);
      check(r.out);
      times.push(r.ms);
    }
    return `${median(times).toFixed(0)} ms (median of ${RUNS}; ${Math.min(...times).toFixed(0)}–${Math.max(...times).toFixed(0)})`;
  };
  const replicas = (o: string) => {
    const n = o.trim().split('\n').length - 1;
    if (n !== SERVICES * PER_SERVICE) throw new Error(`get replicas listed ${n}`);
  };
  const status = (o: string) => {
    if (!o.includes('s19')) throw new Error(o.slice(0, 500));
  };
  console.log(`${SERVICES * PER_SERVICE} running replicas of ${SERVICES} services on ${NODES} nodes; the whole CLI process:`);
  console.log(`  jaco version:       ${await measure(['version'], (o) => { if (!o.startsWith('jaco ')) throw new Error(o); })}`);
  console.log('every value from etcd (JACO_READ_CACHE=off):');
  console.log(`  jaco get replicas:  ${await measure(['get', 'replicas'], replicas)}`);
  console.log(`  jaco status big:    ${await measure(['status', 'big'], status)}`);
  env = { ...env, JACO_READ_CACHE: keptDir };
  jaco(['get', 'replicas']);
  jaco(['status', 'big']);
  console.log('from the reads kept by the run before, nothing changed since:');
  console.log(`  jaco get replicas:  ${await measure(['get', 'replicas'], replicas)}`);
  console.log(`  jaco status big:    ${await measure(['status', 'big'], status)}`);
  console.log('100 observed keys rewritten before each run:');
  console.log(`  jaco get replicas:  ${await measure(['get', 'replicas'], replicas, change)}`);
  console.log(`  jaco status big:    ${await measure(['status', 'big'], status, change)}`);
  store.close();
} finally {
  rmSync(keptDir, { recursive: true, force: true });
  await etcd.stop();
}
