// A store replaced under a running cache (issue 29, item 1), against a real etcd: restarted empty
// on a new data directory, and restored from a snapshot taken earlier. Either way the store's
// revision is behind what the cache holds; resuming its watch from there would wait for ever, in
// silence. The cache must notice, go unsynced, list again from scratch (a key at a revision it
// already holds may now hold another value) and be synced on the new store's state.
import { describe, expect, it } from 'vitest';
import { Informer } from '../../src/store/informer.js';
import type { Reflector } from '../../src/store/reflector.js';
import { Store } from '../../src/store/store.js';
import { commitAtomic } from '../../src/store/writer.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

const etcd = useTestEtcd();

interface Counter {
  spec: { next: number };
}
const counter = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `c${n}` }, spec: { next: n } });
const put = (store: Store, key: string, n: number) => commitAtomic(store, [{ ops: [{ op: 'put', key, value: counter(n) }] }]);
const held = (inf: Informer<Counter>) => Object.fromEntries([...inf.items].map(([k, v]) => [k, v.value.spec.next]));
const reflectorOf = (inf: Informer<Counter>) => (inf as unknown as { reflector: Reflector }).reflector;

/** An informer on counters/ that records every time it went unsynced. */
async function informer(store: Store): Promise<{ inf: Informer<Counter>; unsynced: string[] }> {
  const inf = new Informer<Counter>(store, 'counters/', { kind: 'ReplicaCounter', log: testLogger(), checkEveryMs: 500 });
  const unsynced: string[] = [];
  inf.on('unsynced', (why) => unsynced.push(why));
  await inf.start();
  return { inf, unsynced };
}

describe('a store replaced under a running cache', () => {
  it('restarted empty: noticed, listed again from scratch (a key at a revision held before holds another value now)', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    await put(store, 'counters/a', 1);
    const aRev = (await store.get('counters/a'))!.modRevision;
    for (let i = 0; i < 20; i++) await put(store, 'counters/b', i);
    const { inf, unsynced } = await informer(store);
    expect(held(inf)).toEqual({ 'counters/a': 1, 'counters/b': 19 });

    // The new store has counters/a at the very revision the cache holds it at, with another value.
    await etcd.replace!({
      seed: async (endpoint) => {
        const s = new Store({ endpoints: endpoint, prefix });
        try {
          for (;;) {
            const { revision } = await s.listRaw('counters/');
            if (revision >= aRev - 1) break;
            await put(s, 'padding', revision);
          }
          await put(s, 'counters/a', 99);
          expect((await s.get('counters/a'))!.modRevision).toBe(aRev);
        } finally {
          s.close();
        }
      },
    });
    await eventually(() => inf.synced && held(inf)['counters/a'] === 99 && !('counters/b' in held(inf)), { what: 'the cache holding the new store', timeoutMs: 20_000 });
    expect(held(inf)).toEqual({ 'counters/a': 99 });
    expect(unsynced.length).toBeGreaterThan(0);
    // The same name, peer address and token: the same cluster id; only the revision tells.
    expect(reflectorOf(inf).storeHealth()).toMatchObject({ count: 1, last: { reason: 'revision_backwards' } });
    // And it follows the new store from there.
    await put(store, 'counters/c', 3);
    await eventually(() => held(inf)['counters/c'] === 3, { what: 'a write after the wipe seen' });
    await inf.stop();
  });

  it('restored from a snapshot taken earlier: holds what the snapshot holds', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    await put(store, 'counters/a', 1);
    await put(store, 'counters/b', 2);
    const { inf } = await informer(store);
    const snapshot = await etcd.snapshot!();
    // After the snapshot: a deleted, b changed, c created — all undone by the restore.
    await commitAtomic(store, [{ ops: [{ op: 'delete', key: 'counters/a' }] }]);
    for (let i = 0; i < 5; i++) await put(store, 'counters/b', 20 + i);
    await put(store, 'counters/c', 3);
    await eventually(() => held(inf)['counters/c'] === 3, { what: 'the writes after the snapshot held' });
    expect(held(inf)).toEqual({ 'counters/b': 24, 'counters/c': 3 });

    await etcd.replace!({ snapshot });
    await eventually(() => inf.synced && held(inf)['counters/a'] === 1, { what: 'the cache holding the restored store', timeoutMs: 20_000 });
    expect(held(inf)).toEqual({ 'counters/a': 1, 'counters/b': 2 });
    // etcdctl snapshot restore gives the cluster a new id (its token differs from the member's).
    expect(reflectorOf(inf).storeHealth()).toMatchObject({ count: 1, last: { reason: 'cluster_changed' } });
    await inf.stop();
  });
});
