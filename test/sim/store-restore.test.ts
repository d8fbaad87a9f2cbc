// The simulation's etcd restored from a snapshot under the runtime's real Reflector (issue 29,
// item 1): its revision goes backwards, every watch is cut, and a key written after the restore
// takes a revision the reflector already holds another value at. The reflector must notice when
// its watch comes back, list again from scratch and follow the restored store from there.
import { describe, expect, it } from 'vitest';
import { Reflector } from '../../src/store/reflector.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';
import { SimEtcd, type ClientFaults } from './etcd.js';

const counter = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `c${n}` }, spec: { next: n } });

describe('the simulated store restored from a snapshot', () => {
  it('the reflector notices the revision going back, relists from scratch and follows the restored store', async () => {
    const etcd = new SimEtcd();
    etcd.kv.put('counters/a', counter(1));
    const faults: ClientFaults = { watchers: new Set() };
    const r = new Reflector(etcd.client('p', faults), { counters: { prefix: 'counters/', kind: 'ReplicaCounter' } }, { log: testLogger() });
    const replaced: string[] = [];
    r.on('replaced', (reason) => replaced.push(reason));
    await r.start();
    const held = () => Object.fromEntries([...r.source<{ spec: { next: number } }>('counters').items].map(([k, v]) => [k, v.value.spec.next]));
    const deliver = () => [...faults.watchers].forEach((w) => w.deliver());

    const snap = etcd.snapshot();
    etcd.kv.put('counters/b', counter(2)); // the revision after the snapshot
    etcd.kv.put('counters/c', counter(3));
    deliver();
    expect(held()).toEqual({ 'counters/a': 1, 'counters/b': 2, 'counters/c': 3 });
    const bRev = r.source('counters').items.get('counters/b')!.modRevision;

    etcd.restore(snap);
    // After the restore, b is written again at the very revision held for it, with another value.
    etcd.kv.put('counters/b', counter(20));
    expect(etcd.get('counters/b')!.modRevision).toBe(bRev);
    await eventually(() => r.synced && held()['counters/b'] === 20, { what: 'the reflector holding the restored store', timeoutMs: 5_000, intervalMs: 20 });
    expect(held()).toEqual({ 'counters/a': 1, 'counters/b': 20 });
    expect(replaced).toEqual(['revision_backwards']);
    expect(r.storeHealth()).toMatchObject({ count: 1, last: { reason: 'revision_backwards' } });

    // And from there on it follows the store.
    etcd.kv.put('counters/d', counter(4));
    deliver();
    expect(held()['counters/d']).toBe(4);
    await r.stop();
  });

  it('a consistency check at a revision the restored store has not reached relists (future revision)', async () => {
    const etcd = new SimEtcd();
    etcd.kv.put('counters/a', counter(1));
    const faults: ClientFaults = { watchers: new Set() };
    const r = new Reflector(etcd.client('p', faults), { counters: { prefix: 'counters/', kind: 'ReplicaCounter' } }, { log: testLogger() });
    await r.start();
    const snap = etcd.snapshot();
    etcd.kv.put('counters/b', counter(2));
    [...faults.watchers].forEach((w) => w.deliver());
    // Restored while the watch stays up (as if its cut went unnoticed): only the check can tell.
    etcd.kv.restore(snap.kv);
    expect(await r.check()).toBe(false);
    expect(r.storeHealth()).toMatchObject({ count: 1, last: { reason: 'future_revision' } });
    await eventually(() => r.synced && !r.source('counters').items.has('counters/b'), { what: 'relisted', timeoutMs: 5_000, intervalMs: 20 });
    await r.stop();
  });
});
