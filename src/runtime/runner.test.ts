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
import { CATCH_UP_MAX_MS, Runner, STEP_SLICE_MS } from './runner.js';

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

describe('Runner: a pass decided in steps', () => {
  // A controller that creates one counter per step. Each step takes a slice (the fake clock moves
  // STEP_SLICE_MS inside it), so its act goes out before the next step is decided; meanwhile the
  // test writes a key of its own and delivers every watch event, which the held cache must not show.
  let etcd: SimEtcd;
  let faults: ClientFaults;
  let cache: Cache;
  let runner: Runner<number, number>;
  const deliver = () => faults.watchers.forEach((w) => w.deliver());
  const create = (name: string) => ({ label: `create ${name}`, subject: 'x', ops: [{ op: 'create' as const, key: keys.counter('d', name), value: counter(name) }] });

  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'performance'] });
    etcd = new SimEtcd();
    faults = { watchers: new Set() };
    cache = Cache.onStore(etcd.client('p1', faults), ['counters'], { log: testLogger() });
    await cache.start();
    await vi.advanceTimersByTimeAsync(0);
  });

  afterEach(async () => {
    await runner.stop();
    await cache.stop();
    vi.useRealTimers();
  });

  function start(log: { seen: number[]; stored: number[]; batches: string[][] }, opts: { stepCommits?: boolean; manual?: boolean } = {}) {
    const store = etcd.client('p1', faults);
    runner = new Runner<number, number>(
      {
        name: 'stepping',
        reads: ['counters'],
        elected: false,
        initialState: () => 0,
        snapshot: () => 0,
        decide: () => ({ acts: [] }),
        *decideSteps() {
          const acts = [];
          for (let k = 0; k < 3; k++) {
            // What this step reads (the held cache) and what etcd holds by now.
            log.seen.push(cache.kind('counters').items.size);
            log.stored.push(etcd.keys('counters/').length);
            vi.advanceTimersByTime(STEP_SLICE_MS);
            const act = create(`s${k}`);
            acts.push(act);
            yield [act];
          }
          // The whole result: every act yielded, then one more decided at the end.
          return { acts: [...acts, create('last')] };
        },
      },
      { store, cache, timings: FAST, log: testLogger(), identity: 'test', ...opts, beforeCommit: async (acts) => void log.batches.push(acts.map((a) => a.label)) },
    );
  }

  it('sends each step\u2019s acts while the next is decided, from a cache held still until the pass has decided', async () => {
    const log = { seen: [] as number[], stored: [] as number[], batches: [] as string[][] };
    start(log);
    // Another writer's key, and every event, arrive while the pass decides.
    etcd.kv.put(keys.counter('other', 'x'), counter('x'));
    const pass = runner.passNow();
    deliver();
    await pass;
    // The steps read one unchanging cut (nothing: the other key came after the pass started)...
    expect(log.seen).toEqual([0, 0, 0]);
    // ...while their acts landed one by one: s0 was in etcd when step 1 was decided.
    expect(log.stored).toEqual([1, 2, 3]);
    expect(log.batches).toEqual([['create s0'], ['create s1'], ['create s2'], ['create last']]);
    expect(etcd.keys('counters/d/')).toHaveLength(4);
    // Released: what arrived meanwhile is applied, in order.
    deliver();
    await vi.advanceTimersByTimeAsync(0);
    expect([...cache.kind('counters').items.keys()].sort()).toEqual([keys.counter('d', 'last'), keys.counter('d', 's0'), keys.counter('d', 's1'), keys.counter('d', 's2'), keys.counter('other', 'x')].sort());
  });

  it('the simulation decides every step before any write, unless it asks for step commits', async () => {
    const whole = { seen: [] as number[], stored: [] as number[], batches: [] as string[][] };
    start(whole, { manual: true });
    await runner.passNow();
    expect(whole.stored).toEqual([0, 0, 0]);
    expect(whole.batches).toEqual([['create s0', 'create s1', 'create s2', 'create last']]);
    await runner.stop();
    etcd = new SimEtcd();
    const stepped = { seen: [] as number[], stored: [] as number[], batches: [] as string[][] };
    start(stepped, { manual: true, stepCommits: true });
    await runner.passNow();
    expect(stepped.batches).toEqual([['create s0'], ['create s1'], ['create s2'], ['create last']]);
  });
});
