// Leases against a real etcd: the audit log's cached lease revoked under it, and a kept lease
// (liveness) that comes back by itself after a revoke or a partition longer than its TTL.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { AuditLog, type AuditRecord } from '../../src/store/audit.js';
import { isLeaseNotFound } from '../../src/store/errors.js';
import { KeptLease } from '../../src/store/kept-lease.js';
import { Store } from '../../src/store/store.js';
import { commitActs, type OpGroup } from '../../src/store/writer.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { testLogger } from '../support/log.js';
import { TcpProxy } from '../support/proxy.js';
import { timersCreatedBy } from '../support/timers.js';
import { eventually, sleep } from '../support/wait.js';

const etcd = useTestEtcd();

const marker = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `m${n}` }, spec: { next: n } });

describe('the audit log’s lease', () => {
  const record = (n: number): AuditRecord => ({ type: 'replica_placed', time: Date.now(), deployment: 'd', payload: { n } });
  /** An act and its audit record, as a controller commits them. */
  const audited = async (audit: AuditLog, n: number): Promise<OpGroup> => ({ label: `act ${n}`, ops: [{ op: 'put', key: `counters/d/${n}`, value: marker(n) }, ...(await audit.ops([record(n)]))] });
  const leaseOf = (act: OpGroup) => act.ops.flatMap((o) => ('lease' in o && o.lease ? [o.lease] : []))[0]!;

  it('revoked under the log (etcdctl lease revoke, a snapshot restore): one leaseLost call and the next audited act lands', async () => {
    const store = etcd.store();
    const audit = new AuditLog(store, 'test', 3_600_000);
    const first = await audited(audit, 1);
    expect((await commitActs(store, [first])).committed).toHaveLength(1);
    const lease = leaseOf(first);

    await etcd.store().revokeLease(lease);
    // Every act carrying a record on the cached lease is refused, for as long as it stays cached.
    for (const n of [2, 3]) {
      const act = await audited(audit, n);
      expect(leaseOf(act)).toBe(lease);
      const err = await commitActs(store, [act]).catch((e: unknown) => e);
      expect(isLeaseNotFound(err)).toBe(true);
      expect(await store.get(`counters/d/${n}`)).toBeUndefined();
    }

    // What the runtime does when a commit fails that way.
    expect(audit.leaseLost(lease)).toBe(true);
    const next = await audited(audit, 4);
    expect(leaseOf(next)).not.toBe(lease);
    expect((await commitActs(store, [next])).committed).toHaveLength(1);
    // Record 1 went with its lease; record 4 is on the new one.
    const { items } = await store.list(keys.audits());
    expect(items.map((i) => [(i.value as { spec: { payload: { n: number } } }).spec.payload.n, i.lease])).toEqual([[4, leaseOf(next)]]);
  });

  it('a report about another lease keeps the cached one, and records asked for together share one lease', async () => {
    const store = etcd.store();
    const audit = new AuditLog(store, 'test', 3_600_000);
    const ops = await audit.ops([record(1), record(2), record(3)]);
    const leases = new Set(ops.map((o) => ('lease' in o ? o.lease : undefined)));
    expect(leases.size).toBe(1);
    const [lease] = [...leases];
    expect(audit.leaseLost('12345')).toBe(false);
    expect(leaseOf(await audited(audit, 4))).toBe(lease);
    // Without an id (the runtime cannot tell which lease was missing) the cached one goes.
    expect(audit.leaseLost()).toBe(true);
    expect(leaseOf(await audited(audit, 5))).not.toBe(lease);
  });

  it('isLeaseNotFound tells a missing lease from other failures', () => {
    expect(isLeaseNotFound(new Error('etcdserver: requested lease not found'))).toBe(true);
    expect(isLeaseNotFound(new Error('14 UNAVAILABLE: No connection established'))).toBe(false);
    expect(isLeaseNotFound(undefined)).toBe(false);
  });
});

describe('a kept lease', () => {
  const log = testLogger();
  const heartbeat = 'heartbeats/n1';

  /** An owner as the node-agent is one: its heartbeat is bound to the lease, and put again on a new one. */
  async function owner(store: Store, kept: KeptLease): Promise<{ renewed: string[]; lost: string[] }> {
    const seen = { renewed: [] as string[], lost: [] as string[] };
    const put = (lease: string) => commitActs(store, [{ ops: [{ op: 'put', key: heartbeat, value: marker(1), lease }] }]);
    kept.on('lost', (_id, why) => seen.lost.push(why));
    kept.on('renewed', (id) => {
      seen.renewed.push(id);
      void put(id).catch(() => undefined); // a failed put is retried by the owner's own loop in real life
    });
    await put(await kept.start());
    return seen;
  }

  const boundTo = async (store: Store) => (await store.get(heartbeat))?.lease;
  const alive = async (store: Store, id: string) => Number((await store.client.leaseClient.leaseTimeToLive({ ID: id })).TTL) > 0;

  it('revoked under its owner: a new lease within about one keepalive, and the bound key is back', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    // A TTL far beyond the test's bounds: only the keepalive can have noticed the revoke.
    const kept = new KeptLease(store, { ttlSec: 60, keepAliveMs: 500, log });
    const seen = await owner(store, kept);
    const first = kept.id!;
    expect(await boundTo(store)).toBe(first);

    try {
      await etcd.store(prefix).revokeLease(first);
      // A new lease, and the key on it (between the loss and the grant both are absent: not that).
      await eventually(async () => kept.id !== undefined && kept.id !== first && (await boundTo(store)) === kept.id, { what: 'the heartbeat back on a new lease', timeoutMs: 10_000 });
      expect(seen.lost).toEqual(['etcd no longer has the lease']);
      expect(seen.renewed).toEqual([kept.id]);
      expect(await alive(store, kept.id!)).toBe(true);
    } finally {
      // Stopped even when the case fails: a lease kept alive on would be counted by the next case's timers.
      await kept.stop({ revoke: true });
    }
    expect(await store.get(heartbeat)).toBeUndefined();
  });

  it('cut off from etcd for longer than its TTL: regained once the partition heals', async () => {
    const prefix = uniquePrefix();
    const { proxy, store: viaProxy, direct } = await etcd.viaProxy(prefix);
    const kept = new KeptLease(viaProxy, { ttlSec: 2, keepAliveMs: 300, log });
    const seen = await owner(viaProxy, kept);
    const first = kept.id!;

    proxy.pause();
    // The server lets the lease expire: the node would read NotReady now.
    await eventually(async () => (await direct.get(heartbeat)) === undefined, { what: 'the heartbeat expired', timeoutMs: 15_000 });
    await eventually(() => kept.id === undefined, { what: 'the owner knows its lease is gone' });
    expect(seen.lost).toEqual(['no keepalive answered within the TTL']);
    proxy.resume();

    await eventually(async () => kept.id !== undefined && (await boundTo(direct)) === kept.id, { what: 'the heartbeat back after the partition', timeoutMs: 15_000 });
    expect(kept.id).not.toBe(first);
    expect(seen.renewed).toEqual([kept.id]);
    // Kept alive from then on: still there after more than a TTL.
    await sleep(2500);
    expect(await boundTo(direct)).toBe(kept.id);
    await kept.stop({ revoke: true });
    viaProxy.close();
    await proxy.close();
  });

  it('once stopped, leaves no timer running and grants nothing', async () => {
    const prefix = uniquePrefix();
    const store = new Store({ endpoints: etcd.endpoint, prefix });
    const timers = timersCreatedBy('src/store/kept-lease.ts');
    const kept = new KeptLease(store, { ttlSec: 2, keepAliveMs: 200, log });
    let renewed = 0;
    kept.on('renewed', () => renewed++);
    const id = await kept.start();
    await sleep(700); // a few keepalives
    expect(timers.created()).toBeGreaterThan(2);
    expect(timers.live()).toBeGreaterThan(0);
    const leasesAtStop = (await store.client.leaseClient.leaseLeases()).leases.map((l) => l.ID);
    await kept.stop();
    await eventually(() => timers.live() === 0, { what: 'no timer left by the lease' });
    timers.disable();
    expect(kept.id).toBeUndefined();

    // Not revoked: the lease lives out its TTL, unrenewed, and nothing replaces it.
    expect(await alive(store, id)).toBe(true);
    await eventually(async () => !(await alive(store, id)), { what: 'the lease expired', timeoutMs: 10_000 });
    await sleep(600);
    expect(renewed).toBe(0);
    const granted = (await store.client.leaseClient.leaseLeases()).leases.map((l) => l.ID).filter((l) => !leasesAtStop.includes(l));
    expect(granted).toEqual([]);
    store.close();
  });

  it('start() waits for etcd and stop() ends the wait', async () => {
    const proxy = new TcpProxy(etcd.member.spec.clientPort);
    const viaProxy = new Store({ endpoints: await proxy.start(), prefix: uniquePrefix() });
    proxy.pause();
    const kept = new KeptLease(viaProxy, { ttlSec: 2, keepAliveMs: 300, log });
    const started = kept.start();
    await sleep(500);
    proxy.resume();
    const id = await started;
    expect(await alive(etcd.store(), id)).toBe(true);
    await kept.stop({ revoke: true });
    expect(await alive(etcd.store(), id)).toBe(false);

    proxy.pause();
    const never = new KeptLease(viaProxy, { ttlSec: 2, log });
    const pending = never.start();
    await never.stop();
    await expect(pending).rejects.toThrow(/stopped before it was granted/);
    viaProxy.close();
    await proxy.close();
  });
});
