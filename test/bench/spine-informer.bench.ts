// Benchmark: an informer's initial sync of 100,000 keys (ReplicaDesired objects, as a scheduler
// of a large cluster would list) from a real etcd: time and resident memory, with and without
// schema validation.
//   node --expose-gc --import tsx test/bench/spine-informer.bench.ts
import { keys } from '../../src/api/keys.js';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { ReplicaDesired } from '../../src/api/types.js';
import { Informer } from '../../src/store/informer.js';
import { commitActs, type OpGroup } from '../../src/store/writer.js';
import { startTestEtcd } from '../support/etcd.js';
import { testLogger } from '../support/log.js';

const N = 100_000;
const template = withDefaults({ image: 'jaco-demo/busybox:1', command: ['sh', '-c', 'sleep 100000'], resources: { cpu: '100m', memory: '64Mi' }, env: { A: '1' } });
const hash = specHash(template);
const etcd = await startTestEtcd();
try {
  const store = etcd.store('/bench/');
  const t0 = performance.now();
  const acts: OpGroup[] = [];
  for (let i = 0; i < N; i++) {
    const node = `node-${String(i % 1000).padStart(4, '0')}`;
    const replica = `app-s${i % 500}-${i}`;
    const d: ReplicaDesired = {
      apiVersion: 'jaco.dev/v1',
      kind: 'ReplicaDesired',
      metadata: { name: replica },
      spec: { replica, deployment: 'app', service: `s${i % 500}`, node, index: i, revision: 1, specHash: hash, template, placedAt: new Date().toISOString() },
    };
    acts.push({ ops: [{ op: 'put', key: keys.desired(node, replica), value: d }] });
  }
  const res = await commitActs(store, acts);
  const bytes = JSON.stringify((acts[0]!.ops[0] as { value: unknown }).value).length;
  console.log(`wrote ${N} keys (~${bytes} bytes each) in ${res.transactions} transactions, ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
  for (const validate of [false, true]) {
    gc();
    const heap0 = process.memoryUsage().heapUsed;
    const t = performance.now();
    const inf = new Informer<ReplicaDesired>(store, keys.desiredOf(), { kind: 'ReplicaDesired', validate, log: testLogger() });
    await inf.start();
    const ms = performance.now() - t;
    gc();
    const { heapUsed, rss } = process.memoryUsage();
    if (inf.items.size !== N) throw new Error(`synced ${inf.items.size} of ${N}`);
    console.log(`initial sync of ${N} keys, validation ${validate ? 'on ' : 'off'}: ${(ms / 1000).toFixed(2)} s; heap held ${((heapUsed - heap0) / 1048576).toFixed(0)} MiB, process RSS ${(rss / 1048576).toFixed(0)} MiB`);
    await inf.stop();
    inf.items.clear(); // release it before the next measurement
  }
} finally {
  await etcd.stop();
}
