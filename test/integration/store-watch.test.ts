// Watches against a real etcd while they are cancelled, compacted and cut at once: the late answers
// etcd sends then must neither end the process (the etcd3 client threw them from its stream,
// src/store/watch-guard.ts) nor leave a cancel waiting, and no watch may see another's events.
import { describe, expect, it } from 'vitest';
import type { Watcher } from '../../src/store/wire.js';
import { withTimeout, type Store } from '../../src/store/store.js';
import { metrics } from '../../src/observability/metrics.js';
import { droppedWatchResponses } from '../../src/store/watch-guard.js';
import { startTestEtcd } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { eventually, sleep } from '../support/wait.js';

const etcd = useTestEtcd();

/** Compacts the store at its current revision and returns that revision. */
async function compactNow(store: Store): Promise<number> {
  const rev = Number((await store.header()).revision);
  await store.compact(rev);
  return rev;
}

describe('a watch ended by compaction', () => {
  /** A watch from a revision compaction has removed: etcd creates it, then cancels it. */
  async function compactedWatch(store: Store) {
    await store.ns.put('w/a').value('1').exec();
    await store.ns.put('w/a').value('2').exec();
    const rev = await compactNow(store);
    const w = await store.client.watch().prefix(`${store.prefix}w/`).startRevision(String(rev - 1)).create();
    const ended = await new Promise<Error>((resolve) => w.once('error', resolve));
    expect(ended.message).toMatch(/canceled/i);
    return w;
  }
  const completes = (p: Promise<void>) => withTimeout(p, 5000, 'the cancel never completed');

  it('can still be cancelled when it was the last watch of its client (the stream is gone)', async () => {
    const store = etcd.store();
    await completes((await compactedWatch(store)).cancel());
    store.close();
  });

  it("can still be cancelled beside other watches, and etcd's answer to that cancel is dropped", async () => {
    const store = etcd.store();
    const other = await store.client.watch().prefix(`${store.prefix}other/`).create();
    const w = await compactedWatch(store);
    const before = droppedWatchResponses();
    const counted = async () => (await metrics.droppedWatchResponses.get()).values.find((v) => v.labels.reason === 'late_answer')?.value ?? 0;
    const countedBefore = await counted();
    // etcd still holds the compacted watch's id: the cancel frees it, and etcd answers it.
    await completes(w.cancel());
    await eventually(() => droppedWatchResponses() === before + 1, { what: "etcd's answer to the cancel, dropped" });
    // And a process serving metrics shows it.
    expect(await counted()).toBe(countedBefore + 1);
    await other.cancel();
    store.close();
  });
});

describe('watches cancelled and reopened while writes flow, the connection is cut and etcd compacts', () => {
  it('end no process, every cancel completes, and each watch sees only its own prefix', async () => {
    const { proxy, store, direct } = await etcd.viaProxy();
    const PREFIXES = 8;
    const foreign: string[] = [];
    const open = (i: number) => {
      const w = store.client.watch().prefix(`${store.prefix}p${i}/`).watcher();
      w.on('put', (kv) => {
        if (!kv.key.toString().startsWith(`${store.prefix}p${i}/`)) foreign.push(`p${i} saw ${kv.key.toString()}`);
      });
      // Ended by compaction, or by a cut: replaced, as the reflector replaces its watches.
      w.on('error', () => watchers[i] === w && (watchers[i] = open(i)));
      w.on('disconnected', () => {
        if (watchers[i] !== w) return;
        watchers[i] = open(i);
        cancels.push(w.cancel());
      });
      return w;
    };
    const watchers = Array.from({ length: PREFIXES }, (_, i) => open(i));
    const cancels: Promise<void>[] = [];
    let writing = true;
    const writer = (async () => {
      for (let n = 0; writing; n++) await direct.ns.put(`p${n % PREFIXES}/k${n % 50}`).value(String(n)).exec();
    })();
    // A fixed, seeded schedule of faults: bounded in count, stops by itself.
    let seed = 7;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let round = 1; round <= 150; round++) {
      for (let j = 0; j < 3; j++) {
        const i = Math.floor(random() * PREFIXES);
        const old = watchers[i]!;
        watchers[i] = open(i);
        cancels.push(old.cancel());
      }
      await sleep(random() * 20);
      if (round % 10 === 0) {
        proxy.pause();
        await sleep(random() * 80);
        proxy.resume();
      }
      if (round % 7 === 0) await compactNow(direct);
      await sleep(random() * 20);
    }
    writing = false;
    await writer;
    // Every cancel completes (etcd answered it, or the connection it was on is gone).
    await withTimeout(Promise.allSettled(cancels), 10_000, 'a cancel never completed');
    expect(foreign).toEqual([]);
    // And every watch left open still sees its prefix.
    const seen = new Set<number>();
    watchers.forEach((w, i) => w.on('put', () => seen.add(i)));
    await eventually(
      async () => {
        for (let i = 0; i < PREFIXES; i++) if (!seen.has(i)) await direct.ns.put(`p${i}/last`).value('x').exec();
        return seen.size === PREFIXES;
      },
      { what: 'every open watch sees a new write', timeoutMs: 15_000 },
    );
    await Promise.allSettled(watchers.map((w) => w.cancel()));
    store.close();
    direct.close();
    await proxy.close();
  });
});

describe('a watch reopened with a token older than the latest change of users', () => {
  it('logs in again and resumes, where etcd refuses the old token for ever', async () => {
    const secure = await startTestEtcd({ secure: { nodes: [] } });
    try {
      const { proxy, store, direct } = await secure.viaProxy();
      const seen: string[] = [];
      const open = (): Watcher => {
        const w = store.client.watch().prefix(`${store.prefix}a/`).watcher();
        w.on('put', (kv) => seen.push(kv.value.toString()));
        // Refused: ended with an error; opened again, as the reflector does.
        w.on('error', () => (watcher = open()));
        return w;
      };
      let watcher = open();
      await eventually(async () => {
        await direct.ns.put('a/k').value('before').exec();
        return seen.includes('before');
      }, { what: 'the watch up' });
      // Cut; a user is added meanwhile (etcd's auth revision moves on); the stream comes back with
      // the token it had.
      proxy.pause();
      await direct.client.user('someone').create('pw');
      proxy.resume();
      await eventually(async () => {
        await direct.ns.put('a/k').value('after').exec();
        return seen.includes('after');
      }, { what: 'the watch resumed after the change of users', timeoutMs: 20_000 });
      await watcher.cancel();
      store.close();
      direct.close();
      await proxy.close();
    } finally {
      await secure.stop();
    }
  });
});
