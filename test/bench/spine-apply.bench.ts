// Benchmark: `jaco apply` of a manifest with 1,000 services, against a real etcd.
// Reports the parse+validate time in process, the apply through the store, and the whole CLI
// command as an operator runs it (process start included).
//   npx tsx test/bench/spine-apply.bench.ts
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { parseManifests, readSources } from '../../src/api/manifest.js';
import type { Deployment } from '../../src/api/types.js';
import { applyDeployments } from '../../src/app/apply.js';
import { JACO_BIN } from '../support/cli.js';
import { startTestEtcd, uniquePrefix } from '../support/etcd.js';

const SERVICES = 1000;
const services: Record<string, unknown> = {};
for (let i = 0; i < SERVICES; i++)
  services[`svc-${i}`] = {
    image: 'jaco-demo/busybox:1',
    command: ['sh', '-c', 'sleep 100000'],
    replicas: 1 + (i % 3),
    resources: { cpu: '100m', memory: '64Mi' },
    env: { SERVICE: `svc-${i}` },
    placement: { mode: i % 5 === 0 ? 'pack' : 'spread' },
  };
const file = join(mkdtempSync(join(tmpdir(), 'jaco-bench-')), 'big.yaml');
writeFileSync(file, stringify({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name: 'big' }, spec: { services } }));

const etcd = await startTestEtcd();
try {
  const runs = 5;
  const parse: number[] = [];
  const apply: number[] = [];
  const cli: number[] = [];
  for (let r = 0; r < runs; r++) {
    let t = performance.now();
    const objs = parseManifests(readSources([file]), { kinds: ['Deployment'] });
    parse.push(performance.now() - t);
    const store = etcd.store(uniquePrefix());
    const d = objs[0]!.object as Deployment;
    t = performance.now();
    await applyDeployments(store, [{ name: d.metadata.name, spec: d.spec, cause: 'apply' }]);
    apply.push(performance.now() - t);
    t = performance.now();
    const res = spawnSync(process.execPath, [JACO_BIN, 'apply', '-f', file], { env: { ...process.env, JACO_ENDPOINTS: etcd.endpoint, JACO_PREFIX: uniquePrefix() } });
    cli.push(performance.now() - t);
    if (res.status !== 0) throw new Error(res.stderr.toString());
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(0);
  console.log(`apply of ${SERVICES} services (${(Buffer.byteLength(JSON.stringify(services)) / 1024).toFixed(0)} KiB of spec), median of ${runs}:`);
  console.log(`  parse + validate (in process):        ${med(parse)} ms`);
  console.log(`  apply through the store (in process): ${med(apply)} ms`);
  console.log(`  jaco apply -f (whole CLI process):    ${med(cli)} ms`);
} finally {
  await etcd.stop();
}
