// The runner reads its own writes: a pass waits until the cache holds the previous pass's last
// write (up to CATCH_UP_MAX_MS), so it never re-plans what already landed. The writer, reflector
// and cache are the runtime's own, on the simulation's etcd, whose watch events wait until the
// test delivers them (a lagging watch, on demand).
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { keys } from '../api/keys.js';
import { API_VERSION, type ReplicaCounter } from '../api/types.js';
import { FAST } from '../timings.js';
import { SimEtcd, type ClientFaults } from '../../test/sim/etcd.js';
import { testLogger } from '../../test/support/log.js';
import { Cache } from './cache.js';
import { CATCH_UP_MAX_MS, Runner } from './runner.js';

const counter = (name: string): ReplicaCounter => ({ apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name }, spec: { next: 1 } });

describe('Runner: read your writes', () => {
  let etcd: SimEtcd;
  let faults: ClientFaults;
  let runner: Runner<number, number>;
  let cache: Cache;
  const deliver = () => faults.watchers.forEach((w) => w.deliver());

  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
    etcd = new SimEtcd();
    faults = { watchers: new Set() };
    const store = etcd.client('p1', faults);
    cache = Cache.onStore(store, ['counters'], { log: testLogger() });
    await cache.start();
    await vi.advanceTimersByTimeAsync(0);
    // Each pass creates the next key after those its cache holds: a pass decided from a cache
    // without the last one would create it again, and conflict.
    runner = new Runner<number, number>(
      {
        name: 'counting',
        reads: ['counters'],
        elected: false,
        initialState: () => 0,
        snapshot: ({ cache: c }) => c.kind('counters').items.size,
        decide: (_s, held) => ({ acts: held < 3 ? [{ label: `create ${held}`, subject: 'x', ops: [{ op: 'create', key: keys.counter('d', `s${held}`), value: counter(`s${held}`) }] }] : [] }),
      },
      { store, cache, timings: FAST, log: testLogger(), identity: 'test' },
    );
  });

  afterEach(async () => {
    await runner.stop();
    await cache.stop();
    vi.useRealTimers();
  });

  const stored = () => etcd.keys('counters/').length;

  it('the next pass waits for the cache to show the last write, then decides from it', async () => {
    expect(cache.synced).toBe(true);
    runner.start();
    await vi.advanceTimersByTimeAsync(10);
    expect(stored()).toBe(1);
    const passes = runner.passes;
    // Something else changes (a trigger) while the watch still holds the write's event back.
    runner.trigger(0);
    await vi.advanceTimersByTimeAsync(CATCH_UP_MAX_MS / 2);
    expect(runner.passes).toBe(passes);
    expect(stored()).toBe(1);
    // The event arrives: the waiting pass runs at once and plans the next key, not the same one.
    deliver();
    await vi.advanceTimersByTimeAsync(10);
    expect(runner.passes).toBe(passes + 1);
    expect(etcd.keys('counters/')).toEqual([keys.counter('d', 's0'), keys.counter('d', 's1')]);
    expect(runner.failures.persistent()).toEqual([]);
  });

  it('a watch that lags longer than CATCH_UP_MAX_MS does not hold the controller: it decides anyway, and the precondition refuses the stale act', async () => {
    runner.start();
    await vi.advanceTimersByTimeAsync(10);
    const passes = runner.passes;
    runner.trigger(0);
    await vi.advanceTimersByTimeAsync(CATCH_UP_MAX_MS + 20);
    expect(runner.passes).toBe(passes + 1);
    // Decided from a cache without s0: the same create again, refused by etcd (nothing written twice).
    expect(stored()).toBe(1);
    // Once the watch keeps up, the rest follow one pass each.
    for (let i = 0; i < 20; i++) {
      deliver();
      await vi.advanceTimersByTimeAsync(50);
    }
    expect(etcd.keys('counters/')).toHaveLength(3);
  });
});
