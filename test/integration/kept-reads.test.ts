// Reads kept between the CLI's runs (src/store/kept-reads.ts) against a real etcd: a read from a
// kept file answers exactly what a whole read answers, whatever changed in between, and a kept
// file is never used for another store or another history of it (wiped, restored).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deserialize, serialize } from 'node:v8';
import { afterAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { specHash, withDefaults } from '../../src/api/spec.js';
import type { ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { silentLogger } from '../../src/observability/log.js';
import { Cache } from '../../src/runtime/cache.js';
import type { Watchable } from '../../src/runtime/watchable.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { KeptReads, otherHistory, storeHistory, type StoreHistory } from '../../src/store/kept-reads.js';
import { Store } from '../../src/store/store.js';
import { commitActs, type Op } from '../../src/store/writer.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const etcd = useTestEtcd();
// Every root of kept reads the tests make is under one directory, removed at the end.
const roots = mkdtempSync(join(tmpdir(), 'jaco-kept-test-'));
afterAll(() => rmSync(roots, { recursive: true, force: true }));
const STORE = 'a'.repeat(24);
const keptReads = (minKeys = 0) => new KeptReads(mkdtempSync(join(roots, 'root-')), STORE, minKeys);
const SOURCES: Watchable[] = ['desired', 'observed'];
const template = withDefaults({ image: 'jaco-demo/busybox:1', command: ['sleep', '1000'] });
const hash = specHash(template);

function desired(node: string, replica: string, revision = 1): ReplicaDesired {
  return { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: replica }, spec: { replica, deployment: 'd', service: 's', node, index: 0, revision, specHash: hash, template, placedAt: '2026-11-30T00:00:00.000Z' } } as ReplicaDesired;
}
function observed(node: string, replica: string, containerId: string): ReplicaObserved {
  return { apiVersion: 'jaco.dev/v1', kind: 'ReplicaObserved', metadata: { name: replica }, status: { replica, node, deployment: 'd', service: 's', state: 'running', revision: 1, specHash: hash, containerId, observedAt: '2026-11-30T00:00:00.000Z' } } as ReplicaObserved;
}
const put = (key: string, value: unknown): Op => ({ op: 'put', key, value });

/** What a read holds, source by source: every key with its revision and value or why it cannot be read. */
function held(cache: Cache): unknown {
  return Object.fromEntries(
    Object.entries(cache.feed.sources).map(([name, s]) => [
      name,
      {
        items: [...s.items.values()].map((v) => [v.key, v.modRevision, v.createRevision, v.version, v.value]).sort(),
        unreadable: [...s.unreadable.values()].map((u) => [u.key, u.modRevision, u.reason]).sort(),
      },
    ]),
  );
}

const unreadableCount = (cache: Cache) => Object.values(cache.feed.sources).reduce((n, s) => n + s.unreadable.size, 0);

/** A store with ten replicas' keys and a cluster uid, and reads kept in a directory of their own. */
async function setUp(prefix = uniquePrefix()): Promise<{ store: Store; kept: KeptReads; read: () => Promise<Cache>; whole: () => Promise<Cache> }> {
  const store = etcd.store(prefix);
  await clusterInfo(store);
  const ops: Op[] = [];
  for (let i = 0; i < 10; i++) ops.push(put(keys.desired('n1', `r${i}`), desired('n1', `r${i}`)), put(keys.observed('n1', `r${i}`), observed('n1', `r${i}`, `c${i}`)));
  await commitActs(store, [{ ops }]);
  const kept = keptReads();
  return { store, kept, read: () => Cache.read(store, SOURCES, silentLogger(), kept), whole: () => Cache.read(store, SOURCES, silentLogger()) };
}

/** Rewrites the kept file of `observed` (the test's own way to tell whether a read used it). */
function alterKept(kept: KeptReads, fn: (file: { history: StoreHistory; revision: number; items: { key: string; value: ReplicaObserved }[] }) => void): void {
  const path = join(kept.dir, 'observed.v8');
  const file = deserialize(readFileSync(path)) as Parameters<typeof fn>[0];
  fn(file);
  writeFileSync(path, serialize(file));
}
/** Marks the kept value of r0's observed key: a read that shows the mark used the kept file. */
const mark = (kept: KeptReads) => alterKept(kept, (f) => (f.items.find((i) => i.key === keys.observed('n1', 'r0'))!.value.status.containerId = 'from-the-kept-file'));
const marked = (cache: Cache) => cache.kind<ReplicaObserved>('observed').items.get(keys.observed('n1', 'r0'))?.value.status.containerId === 'from-the-kept-file';

describe('reads kept between runs', () => {
  it('answer what a whole read answers, through every kind of change since', async () => {
    const { store, kept, read, whole } = await setUp();
    const first = await read();
    // Every value of the fixture is readable (else the comparisons below prove less).
    expect([first.kind('desired').items.size, first.kind('observed').items.size, unreadableCount(first)]).toEqual([10, 10, 0]);
    expect(held(first)).toEqual(held(await whole()));
    expect(existsSync(join(kept.dir, 'observed.v8'))).toBe(true);
    mark(kept);
    // Nothing changed: the kept file answers (the proof it is used at all).
    expect(marked(await read())).toBe(true);
    // Unmarked again: a whole read keeps the store's own values.
    writeFileSync(join(kept.dir, 'observed.v8'), '');
    await read();
    expect(held(await read())).toEqual(held(await whole()));

    const changes: [string, Op[]][] = [
      ['a key changed', [put(keys.observed('n1', 'r1'), observed('n1', 'r1', 'changed'))]],
      ['a key created', [put(keys.observed('n1', 'r10'), observed('n1', 'r10', 'new'))]],
      ['a key deleted', [{ op: 'delete', key: keys.observed('n1', 'r2') }]],
      ['one key deleted, another created (the count unchanged)', [{ op: 'delete', key: keys.observed('n1', 'r3') }, put(keys.observed('n1', 'r11'), observed('n1', 'r11', 'new'))]],
      ['a key deleted and created again', [{ op: 'delete', key: keys.observed('n1', 'r4') }]],
      ['', [put(keys.observed('n1', 'r4'), observed('n1', 'r4', 'again'))]],
      ['a value that cannot be read over a readable one', [put(keys.observed('n1', 'r5'), { kind: 'ReplicaObserved', status: 'not an object' })]],
      ['the unreadable value fixed', [put(keys.observed('n1', 'r5'), observed('n1', 'r5', 'fixed'))]],
      ['a key that cannot be read created', [put(keys.observed('n1', 'r12'), { nonsense: true })]],
      ['the unreadable key deleted', [{ op: 'delete', key: keys.observed('n1', 'r12') }]],
      ['a shared template changed', [put(keys.desired('n1', 'r6'), { ...desired('n1', 'r6', 2), spec: { ...desired('n1', 'r6', 2).spec, template: withDefaults({ ...template, command: ['sleep', '2000'] }) } })]],
      ['every key deleted', [...Array.from({ length: 12 }, (_, i) => ({ op: 'delete' as const, key: keys.observed('n1', `r${i}`) }))]],
    ];
    for (const [what, ops] of changes) {
      // A read between the two writes of a pair would keep the state between them; so only the
      // named steps are read after.
      await commitActs(store, [{ ops }]);
      if (!what) continue;
      const fromKept = held(await read());
      expect(fromKept, what).toEqual(held(await whole()));
    }
    // The shared template is held frozen, as a reflector holds it.
    const again = await read();
    expect(unreadableCount(again)).toBe(0);
    expect(Object.isFrozen(again.kind<ReplicaDesired>('desired').items.get(keys.desired('n1', 'r0'))!.value.spec.template)).toBe(true);
    store.close();
  });

  it('is not used for another cluster: another uid, or the same uid written again', async () => {
    const { store, kept, read, whole } = await setUp();
    await read();
    mark(kept);
    // The store wiped and its uid put back by an agent (src/store/cluster.ts): created again.
    const info = await clusterInfo(store);
    await commitActs(store, [{ ops: [{ op: 'delete', key: keys.cluster() }] }]);
    await clusterInfo(store, info);
    const after = await read();
    expect(marked(after)).toBe(false);
    expect(held(after)).toEqual(held(await whole()));
    store.close();
  });

  it('is not used when its revision is ahead of the store or its history is another', async () => {
    const { store, kept, read } = await setUp();
    await read();
    mark(kept);
    alterKept(kept, (f) => (f.history = { ...f.history, revision: f.history.revision + 1000 }));
    expect(marked(await read())).toBe(false);
    mark(kept);
    alterKept(kept, (f) => (f.history = { ...f.history, lead: f.history.lead + 100 }));
    expect(marked(await read())).toBe(false);
    store.close();
  });

  it('is read whole again when the file cannot be read, and kept again', async () => {
    const { store, kept, read, whole } = await setUp();
    await read();
    writeFileSync(join(kept.dir, 'observed.v8'), 'not a kept read');
    expect(held(await read())).toEqual(held(await whole()));
    // The right format, the wrong shape: read whole too, never a failed command.
    alterKept(kept, (f) => ((f as unknown as { items: unknown }).items = 'not a list'));
    expect(held(await read())).toEqual(held(await whole()));
    alterKept(kept, (f) => f.items.push({ key: 42 } as never));
    expect(held(await read())).toEqual(held(await whole()));
    mark(kept);
    expect(marked(await read())).toBe(true);
    store.close();
  });

  it('keeps no source smaller than its minimum', async () => {
    const { store } = await setUp();
    const kept = keptReads(11);
    await commitActs(store, [{ ops: [put(keys.desired('n1', 'r10'), desired('n1', 'r10'))] }]);
    await Cache.read(store, SOURCES, silentLogger(), kept);
    expect(existsSync(join(kept.dir, 'desired.v8'))).toBe(true);
    expect(existsSync(join(kept.dir, 'observed.v8'))).toBe(false);
    store.close();
  });

  it("a member's raft index less its revision holds through writes and leases, and falls when a snapshot is restored", async () => {
    const { store, kept, read } = await setUp();
    const first = (await storeHistory(store))!;
    const lease = store.client.lease(10);
    await lease.grant();
    await lease.revoke();
    for (let i = 0; i < 5; i++) await commitActs(store, [{ ops: [put(keys.observed('n1', 'r1'), observed('n1', 'r1', `w${i}`))] }]);
    const later = (await storeHistory(store))!;
    expect(later.revision).toBeGreaterThan(first.revision);
    expect(later.lead).toBeGreaterThanOrEqual(first.lead);
    expect(otherHistory(first, later)).toBeUndefined();

    // A snapshot, then writes kept by a read, then the snapshot restored and written past the
    // kept revision: the restored store reuses the revisions the kept read saw, for other values.
    const snapshot = await etcd.snapshot!();
    for (let i = 0; i < 5; i++) await commitActs(store, [{ ops: [put(keys.observed('n1', 'r2'), observed('n1', 'r2', `lost${i}`))] }]);
    await read();
    const keptAt = (await storeHistory(store))!;
    store.close();
    await etcd.replace!({ snapshot });
    const restored = etcd.store(store.prefix);
    for (let i = 0; i < 5; i++) await commitActs(restored, [{ ops: [put(keys.observed('n1', 'r2'), observed('n1', 'r2', `restored${i}`))] }]);
    for (let i = 0; i < 10; i++) await commitActs(restored, [{ ops: [put('padding', { i })] }]);
    const now = (await storeHistory(restored))!;
    expect(now.revision).toBeGreaterThan(keptAt.revision);
    expect(now.lead).toBeLessThan(keptAt.lead - 2);
    expect(otherHistory({ ...keptAt, clusterId: now.clusterId }, now)).toMatch(/a snapshot was restored/);
    const after = await Cache.read(restored, SOURCES, silentLogger(), kept);
    expect(after.kind<ReplicaObserved>('observed').items.get(keys.observed('n1', 'r2'))?.value.status.containerId).toBe('restored4');
    expect(held(after)).toEqual(held(await Cache.read(restored, SOURCES, silentLogger())));
    restored.close();
  });
});

describe('the kept reads of stores not used lately', () => {
  it('go, the oldest first, and nothing else in their root does', async () => {
    const { store, kept, read } = await setUp();
    // Seventeen other stores' directories, older than this one's, and what is not jaco's beside them.
    const old = (name: string, minutesAgo: number, foreignFile?: string) => {
      const dir = join(kept.root, name);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'observed.v8'), 'kept');
      if (foreignFile) writeFileSync(join(dir, foreignFile), 'the user’s');
      const t = new Date(Date.now() - minutesAgo * 60_000);
      utimesSync(dir, t, t);
      return dir;
    };
    const stores = Array.from({ length: 17 }, (_, i) => old(i.toString(16).padStart(24, '0'), 10 + i));
    writeFileSync(join(kept.root, 'notes.txt'), 'the user’s');
    mkdirSync(join(kept.root, 'photos'));
    const foreign = old('f'.repeat(24), 1000, 'thesis.tex');
    await read();
    const left = readdirSync(kept.root).sort();
    // This store, the 15 others used last; the two oldest of jaco's gone; the rest untouched.
    expect(left).toEqual([...stores.slice(0, 15).map((d) => d.slice(kept.root.length + 1)), STORE, 'f'.repeat(24), 'notes.txt', 'photos'].sort());
    expect(readdirSync(foreign).sort()).toEqual(['observed.v8', 'thesis.tex']);
    store.close();
  });

  it("lose what a writer killed mid-write left, not what one writes now", async () => {
    const { store, kept, read } = await setUp();
    await read();
    const stale = join(kept.dir, 'observed.v8.4242.part');
    const fresh = join(kept.dir, 'desired.v8.4343.part');
    writeFileSync(stale, 'half');
    writeFileSync(fresh, 'half');
    const t = new Date(Date.now() - 3_600_000);
    utimesSync(stale, t, t);
    await commitActs(store, [{ ops: [put(keys.observed('n1', 'r1'), observed('n1', 'r1', 'changed'))] }]);
    await read(); // observed changed: kept again
    expect([existsSync(stale), existsSync(fresh)]).toEqual([false, true]);
    store.close();
  });

  it('refuse a store directory not named as jaco names them', () => {
    expect(() => new KeptReads(roots, '..', 0)).toThrow(/24 hex digits/);
  });
});

describe('otherHistory', () => {
  const base: StoreHistory = { clusterId: '1', uid: 'u', uidCreated: 5, lead: 10, revision: 100 };
  it.each([
    ['the same history, moved on', { revision: 200, lead: 30 }, undefined],
    ['the applied index read a moment after the revision', { revision: 200, lead: 8 }, undefined],
    ['another etcd cluster', { clusterId: '2' }, /another etcd cluster/],
    ['another uid', { uid: 'v' }, /another cluster/],
    ['the uid created again', { uidCreated: 6 }, /another cluster/],
    ['the revision behind', { revision: 99 }, /went back/],
    ['a snapshot restored', { revision: 200, lead: -150 }, /a snapshot was restored/],
  ] as const)('%s', (_what, change, expected) => {
    const found = otherHistory(base, { ...base, ...change });
    if (expected === undefined) expect(found).toBeUndefined();
    else expect(found).toMatch(expected);
  });
});
