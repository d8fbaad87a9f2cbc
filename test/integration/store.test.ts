// The store layer against a real etcd: CAS, batching, fencing, informers across compaction,
// partitions and restarts.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { ConflictError, FencedError } from '../../src/store/errors.js';
import { Informer } from '../../src/store/informer.js';
import { Leadership } from '../../src/store/leadership.js';
import { LIST_PAGE, Store } from '../../src/store/store.js';
import { commitActs, commitAtomic, commitEach, Committer, type OpGroup } from '../../src/store/writer.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { testLogger } from '../support/log.js';
import { eventually, sleep } from '../support/wait.js';

const etcd = useTestEtcd();

const counter = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `c${n}` }, spec: { next: n } });

describe('compare-and-swap', () => {
  it('a create of an existing key and an update at a stale revision both conflict, writing nothing', async () => {
    const store = etcd.store();
    await commitAtomic(store, [{ ops: [{ op: 'create', key: 'counters/a/b', value: counter(1) }] }]);
    await expect(commitAtomic(store, [{ ops: [{ op: 'create', key: 'counters/a/b', value: counter(2) }] }])).rejects.toBeInstanceOf(ConflictError);
    const cur = await store.mustGet<ReturnType<typeof counter>>('counters/a/b');
    expect(cur.value.metadata).toMatchObject({ resourceVersion: String(cur.modRevision) });
    await commitAtomic(store, [{ ops: [{ op: 'update', key: 'counters/a/b', value: counter(3), modRevision: cur.modRevision }] }]);
    // The old revision is stale now; the write and the unrelated create in the same txn are refused.
    await expect(
      commitAtomic(store, [{ ops: [{ op: 'update', key: 'counters/a/b', value: counter(4), modRevision: cur.modRevision }, { op: 'create', key: 'counters/a/c', value: counter(5) }] }]),
    ).rejects.toBeInstanceOf(ConflictError);
    expect((await store.mustGet<ReturnType<typeof counter>>('counters/a/b')).value.spec.next).toBe(3);
    expect(await store.get('counters/a/c')).toBeUndefined();
  });

  it('never stores resourceVersion: it is the mod revision of the key', async () => {
    const store = etcd.store();
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'x', value: { ...counter(1), metadata: { name: 'x', resourceVersion: '999' } } }] }]);
    const raw = await store.ns.get('x').string();
    expect(JSON.parse(raw!).metadata.resourceVersion).toBeUndefined();
  });
});

describe('batched writer', () => {
  it('lands 1,000 writes in transactions of at most 128 operations', async () => {
    const store = etcd.store();
    const acts: OpGroup[] = Array.from({ length: 1000 }, (_, i) => ({ ops: [{ op: 'create', key: `desired/n/r${String(i).padStart(4, '0')}`, value: counter(i) }] }));
    const res = await commitActs(store, acts);
    expect(res.committed).toHaveLength(1000);
    expect(res.transactions).toBe(Math.ceil(1000 / 128));
    const { items } = await store.list('desired/n/');
    expect(items).toHaveLength(1000);
    // Every key written by one transaction shares its mod revision: count per revision.
    const perTxn = new Map<number, number>();
    for (const i of items) perTxn.set(i.modRevision, (perTxn.get(i.modRevision) ?? 0) + 1);
    expect(perTxn.size).toBe(res.transactions);
    expect(Math.max(...perTxn.values())).toBeLessThanOrEqual(128);
  });

  it('never splits an act across transactions, and a fenced batch leaves room for the fence', async () => {
    const store = etcd.store();
    const acts: OpGroup[] = Array.from({ length: 100 }, (_, i) => ({ ops: [0, 1, 2].map((j) => ({ op: 'create' as const, key: `a/${i}/${j}`, value: counter(j) })) }));
    await commitActs(store, acts);
    const { items } = await store.list('a/');
    for (let i = 0; i < 100; i++) expect(new Set(items.filter((x) => x.key.startsWith(`a/${i}/`)).map((x) => x.modRevision)).size).toBe(1);
  });

  it('an act that cannot land does not hold back the others, not even those batched with it', async () => {
    const store = etcd.store();
    await commitAtomic(store, [{ ops: [{ op: 'create', key: 'k/000', value: counter(0) }] }]);
    const acts: OpGroup[] = Array.from({ length: 200 }, (_, i) => ({ label: `k${i}`, ops: [{ op: 'create', key: `k/${String(i).padStart(3, '0')}`, value: counter(i) }] }));
    const res = await commitEach(store, acts);
    // The first transaction held k/000: it failed, and its other 127 acts were retried one by one.
    expect(res.conflicted.map((a) => a.label)).toEqual(['k0']);
    expect(res.committed).toHaveLength(199);
    expect(await store.countPrefix('k/')).toBe(200);
  });

  it('an act too large for one request is refused before sending; the others land', async () => {
    const store = etcd.store();
    const big = { ...counter(1), metadata: { name: 'big', annotations: { blob: 'x'.repeat(2 * 1024 * 1024) } } };
    const res = await commitEach(store, [
      { label: 'small', ops: [{ op: 'create', key: 'k/small', value: counter(1) }] },
      { label: 'big', ops: [{ op: 'create', key: 'k/big', value: big }] },
    ]);
    expect(res.committed.map((a) => a.label)).toEqual(['small']);
    expect(res.refused).toMatchObject([{ act: { label: 'big' }, reason: 'too_large' }]);
    expect(await store.get('k/big')).toBeUndefined();
  });

  it('acts chained on a key by its version land in order, and the chain breaks where one fails', async () => {
    const store = etcd.store();
    const chain = (k: number): OpGroup => ({
      label: `c${k}`,
      ops: [...(k === 0 ? [{ op: 'create' as const, key: 'seq', value: counter(0) }] : [{ op: 'check' as const, key: 'seq', version: k }, { op: 'put' as const, key: 'seq', value: counter(k) }])],
    });
    const ok = await commitEach(store, [chain(0), chain(1), chain(2)]);
    expect(ok.committed.map((a) => a.label)).toEqual(['c0', 'c1', 'c2']);
    const broken = await commitEach(store, [chain(5), chain(3)]);
    expect(broken.committed.map((a) => a.label)).toEqual(['c3']);
    expect(broken.conflicted.map((a) => a.label)).toEqual(['c5']);
  });

  it('a commit fed while its pass decides sends what it has at once; a chain spread over its steps still lands in order', async () => {
    const store = etcd.store();
    const chain = (k: number): OpGroup => ({
      label: `c${k}`,
      ops: [...(k === 0 ? [{ op: 'create' as const, key: 'seq', value: counter(0) }] : [{ op: 'check' as const, key: 'seq', version: k }, { op: 'put' as const, key: 'seq', value: counter(k) }]), { op: 'create', key: `step/${k}`, value: counter(k) }],
    });
    const c = new Committer<OpGroup>(store);
    c.add([chain(0), chain(1)]);
    c.flush();
    // Sent before the rest is even decided: the first step is in etcd while the commit is open.
    await eventually(async () => (await store.get('step/1')) !== undefined, { what: 'the first step landed before finish' });
    c.add([chain(2)]);
    c.flush();
    c.add([chain(3), chain(5)]);
    const res = await c.finish();
    expect(res.committed.map((a) => a.label)).toEqual(['c0', 'c1', 'c2', 'c3']);
    expect(res.conflicted.map((a) => a.label)).toEqual(['c5']);
    expect((await store.get<{ spec: { next: number } }>('seq'))!.value.spec.next).toBe(3);
  });

  it('a fenced commit fed in steps sends nothing after the fence failed', async () => {
    const store = etcd.store();
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'leaders/x/1', value: counter(0) }] }]);
    const held = (await store.get('leaders/x/1'))!;
    const fence = { controller: 'x', key: 'leaders/x/1', createRevision: held.createRevision + 1 }; // not the key's: refused
    const c = new Committer<OpGroup>(store, fence);
    c.add([{ label: 'a', ops: [{ op: 'create', key: 'f/a', value: counter(1) }] }]);
    c.flush();
    await eventually(() => c.broken, { what: 'the fence refused the first transaction' });
    c.add([{ label: 'b', ops: [{ op: 'create', key: 'f/b', value: counter(2) }] }]);
    await expect(c.finish()).rejects.toThrow(FencedError);
    expect(await store.countPrefix('f/')).toBe(0);
  });
});

describe('paged list', () => {
  const many = (n: number): OpGroup[] => Array.from({ length: n }, (_, i) => ({ ops: [{ op: 'create', key: `desired/p/r${String(i).padStart(5, '0')}`, value: counter(i) }] }));

  it("lists a prefix of several pages at its first page's revision: every key once, in order; a key written meanwhile is not in it", async () => {
    const store = etcd.store();
    const n = 2 * LIST_PAGE + 234;
    await commitActs(store, many(n));
    const seen: string[] = [];
    const pages: number[] = [];
    let written: Promise<unknown> | undefined;
    const { kvs, revision } = await store.listRaw('desired/p/', undefined, {
      onPage: (page) => {
        pages.push(page.length);
        seen.push(...page.map((kv) => kv.key.toString().slice(store.prefix.length)));
        // Written while the next page is already asked for: it sorts last, and is newer than the list.
        written ??= commitActs(store, [{ ops: [{ op: 'create', key: 'desired/p/r99999', value: counter(0) }] }]);
      },
    });
    await written;
    expect(kvs).toEqual([]);
    expect(pages).toEqual([LIST_PAGE, LIST_PAGE, 234]);
    expect(seen).toEqual(many(n).map((g) => g.ops[0]!.key));
    expect((await store.mustGet('desired/p/r99999')).modRevision).toBeGreaterThan(revision);
    // Without a page handler the same list is returned whole.
    expect((await store.listRaw('desired/p/', revision)).kvs.map((kv) => kv.key.toString().slice(store.prefix.length))).toEqual(seen);
  });

  it('a page handler that throws fails the list with its error; the page asked for ahead, failed meanwhile, is no unhandled rejection', async () => {
    const store = etcd.store();
    await commitActs(store, many(2 * LIST_PAGE));
    const own = etcd.store(store.prefix);
    await expect(
      own.listRaw('desired/p/', undefined, {
        // Closed once the first page is in: the second page's call fails at once.
        onHeader: () => own.close(),
        onPage: () => {
          throw new Error('a bad page');
        },
      }),
    ).rejects.toThrow('a bad page');
    // vitest fails the file on an unhandled rejection: let the event loop turn once more.
    await sleep(100);
  });
});

describe('leadership and fencing', () => {
  it('a deposed leader (lease expired while partitioned) cannot write; the new leader can', async () => {
    const prefix = uniquePrefix();
    const { proxy, store: viaProxy, direct } = await etcd.viaProxy(prefix);
    const log = testLogger();
    const a = new Leadership(viaProxy, { controller: 'test', identity: 'a', ttlSec: 1, log });
    a.start();
    const fenceA = await eventually(() => a.fence(), { what: 'a elected' });
    const b = new Leadership(direct, { controller: 'test', identity: 'b', ttlSec: 1, log });
    b.start();
    await sleep(300);
    expect(b.fence()).toBeUndefined(); // a still leads

    // Partition a from etcd: its keepalives stop, its lease expires, b wins.
    proxy.pause();
    const fenceB = await eventually(() => b.fence(), { what: 'b elected after a lease expired', timeoutMs: 15_000 });
    expect(fenceB.createRevision).toBeGreaterThan(fenceA.createRevision);
    // a noticed on its own that it may no longer write.
    await eventually(() => a.fence() === undefined, { what: 'a stops writing' });

    // Heal the partition: a write a prepared as leader is refused by the fence.
    proxy.resume();
    await eventually(() => viaProxy.ping(1000), { what: 'the partition healed' });
    await expect(commitActs(viaProxy, [{ ops: [{ op: 'put', key: 'owned', value: counter(1) }] }], fenceA)).rejects.toBeInstanceOf(FencedError);
    expect(await direct.get('owned')).toBeUndefined();
    const ok = await commitActs(direct, [{ ops: [{ op: 'put', key: 'owned', value: counter(2) }] }], fenceB);
    expect(ok.committed).toHaveLength(1);

    await a.stop();
    await b.stop();
    viaProxy.close();
    await proxy.close();
  });

  it('a standby takes over when the leader resigns', async () => {
    const prefix = uniquePrefix();
    const log = testLogger();
    const a = new Leadership(etcd.store(prefix), { controller: 'c', identity: 'a', ttlSec: 2, log });
    const b = new Leadership(etcd.store(prefix), { controller: 'c', identity: 'b', ttlSec: 2, log });
    a.start();
    await eventually(() => a.fence());
    b.start();
    await sleep(200);
    expect(b.isLeader()).toBe(false);
    await a.stop();
    await eventually(() => b.fence(), { what: 'b takes over' });
    const store = etcd.store(prefix);
    expect(await store.countPrefix(keys.leaders('c'))).toBe(1);
    await b.stop();
  });
});

describe('informer', () => {
  it('lists, then follows puts and deletes', async () => {
    const store = etcd.store();
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'counters/d/s1', value: counter(1) }] }]);
    const inf = new Informer(store, 'counters/', { kind: 'ReplicaCounter', log: testLogger() });
    await inf.start();
    expect(inf.synced).toBe(true);
    expect([...inf.items.keys()]).toEqual(['counters/d/s1']);
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'counters/d/s2', value: counter(2) }, { op: 'delete', key: 'counters/d/s1' }] }]);
    await eventually(() => inf.items.has('counters/d/s2') && !inf.items.has('counters/d/s1'));
    await inf.stop();
  });

  it('logs, counts and skips a malformed value, and carries on', async () => {
    const store = etcd.store();
    await store.ns.put('counters/d/bad').value('{not json');
    await store.ns.put('counters/d/wrongkind').value(JSON.stringify({ ...counter(1), kind: 'Node' }));
    await store.ns.put('counters/d/invalid').value(JSON.stringify({ ...counter(1), spec: { next: 'x' } }));
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'counters/d/good', value: counter(1) }] }]);
    const inf = new Informer(store, 'counters/', { kind: 'ReplicaCounter', log: testLogger() });
    await inf.start();
    expect([...inf.items.keys()]).toEqual(['counters/d/good']);
    expect([...inf.malformed.keys()].sort()).toEqual(['counters/d/bad', 'counters/d/invalid', 'counters/d/wrongkind']);
    expect(inf.malformed.get('counters/d/invalid')).toContain('spec.next: must be integer');
    // Fixing the value brings it back.
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'counters/d/invalid', value: counter(7) }] }]);
    await eventually(() => inf.items.has('counters/d/invalid') && !inf.malformed.has('counters/d/invalid'));
    await inf.stop();
  });

  it('relists after its watch start revision is compacted, converging to the store', async () => {
    const prefix = uniquePrefix();
    const { proxy, store: viaProxy, direct } = await etcd.viaProxy(prefix);
    for (let i = 0; i < 5; i++) await commitAtomic(direct, [{ ops: [{ op: 'put', key: `counters/d/${i}`, value: counter(i) }] }]);
    const inf = new Informer(viaProxy, 'counters/', { kind: 'ReplicaCounter', log: testLogger() });
    let relisted = 0;
    inf.on('relisted', () => relisted++);
    await inf.start();
    expect(inf.items.size).toBe(5);

    proxy.pause();
    // While the informer is cut off: changes, then a compaction past them.
    await commitAtomic(direct, [{ ops: [{ op: 'delete', key: 'counters/d/0' }, { op: 'put', key: 'counters/d/1', value: counter(100) }, { op: 'put', key: 'counters/d/9', value: counter(9) }] }]);
    // One more write elsewhere, so compacting at the newest revision removes the revision the
    // informer's watch would resume from.
    await commitAtomic(direct, [{ ops: [{ op: 'put', key: 'elsewhere', value: counter(0) }] }]);
    const rev = await direct.ping();
    await direct.compact(rev);
    proxy.resume();

    await eventually(() => relisted > 0, { what: 'a relist', timeoutMs: 20_000 });
    await eventually(() => !inf.items.has('counters/d/0') && inf.items.has('counters/d/9') && (inf.items.get('counters/d/1')?.value as ReturnType<typeof counter>).spec.next === 100, { what: 'convergence' });
    expect([...inf.items.keys()].sort()).toEqual(['counters/d/1', 'counters/d/2', 'counters/d/3', 'counters/d/4', 'counters/d/9']);
    await inf.stop();
    viaProxy.close();
    await proxy.close();
  });

  it('converges after an etcd restart', async () => {
    const prefix = uniquePrefix();
    const store = new Store({ endpoints: etcd.endpoint, prefix });
    await commitAtomic(store, [{ ops: [{ op: 'put', key: 'counters/d/a', value: counter(1) }] }]);
    const inf = new Informer(store, 'counters/', { kind: 'ReplicaCounter', log: testLogger() });
    await inf.start();
    await etcd.restart(500);
    const writer = etcd.store(prefix);
    await eventually(async () => {
      await commitAtomic(writer, [{ ops: [{ op: 'put', key: 'counters/d/b', value: counter(2) }] }]);
      return true;
    });
    await eventually(() => inf.items.has('counters/d/b'), { what: 'informer sees a write made after the restart', timeoutMs: 20_000 });
    expect(inf.items.has('counters/d/a')).toBe(true);
    await inf.stop();
    store.close();
  });
});
