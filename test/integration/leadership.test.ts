// Leader election against a real etcd under the faults that used to leave a controller without a
// leader for good or depose a healthy term: a lost reply to the election-key commit, a fence from
// an earlier term meeting FencedError, and a follower that never sees its predecessor's delete.
// The lost messages are lost for real, by the TCP proxy between the candidate and etcd.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { FencedError } from '../../src/store/errors.js';
import { Leadership } from '../../src/store/leadership.js';
import { Store } from '../../src/store/store.js';
import { commitActs } from '../../src/store/writer.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { testLogger } from '../support/log.js';
import { TcpProxy, type LoseReplyOptions } from '../support/proxy.js';
import { timersCreatedBy } from '../support/timers.js';
import { eventually, sleep } from '../support/wait.js';

const etcd = useTestEtcd();

const log = testLogger();
const marker = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `m${n}` }, spec: { next: n } });

/** Every election key of a controller, with the lease it is bound to. */
async function electionKeys(store: Store, controller: string): Promise<{ key: string; lease?: string; identity: string }[]> {
  const { kvs } = await store.listRaw(keys.leaders(controller));
  return kvs.map((kv) => ({ key: kv.key.toString('utf8').slice(store.prefix.length), lease: kv.lease === '0' ? undefined : kv.lease, identity: kv.value.toString('utf8') }));
}

async function leaseAlive(store: Store, id: string): Promise<boolean> {
  const res = await store.client.leaseClient.leaseTimeToLive({ ID: id });
  return Number(res.TTL) > 0;
}

/**
 * A watch response carrying the DELETE event of `key`, as protobuf lays it out: the event's
 * type (field 1 = DELETE, `08 01`), then its kv (field 2, `12 <len>`) whose key (field 1,
 * `0a <len>`) is `key`. A PUT event has no type bytes (PUT is the zero value), and range replies
 * have no event at all, so only the delete matches.
 */
function deleteEventOf(key: string): (payload: Buffer) => boolean {
  const k = Buffer.from(key);
  const tail = Buffer.concat([Buffer.from([0x0a, k.length]), k]);
  return (payload) => {
    for (let i = payload.indexOf(tail); i >= 4; i = payload.indexOf(tail, i + 1))
      if (payload[i - 4] === 0x08 && payload[i - 3] === 0x01 && payload[i - 2] === 0x12) return true;
    return false;
  };
}

describe('an election-key commit whose reply is lost', () => {
  /**
   * Candidate a campaigns through a proxy that loses the reply to its election-key commit, and
   * must lead anyway, on exactly one key bound to a live lease.
   */
  async function leadDespiteLostReply(what: string, ttlSec: number, lose: LoseReplyOptions) {
    const prefix = uniquePrefix();
    const { proxy, store: viaProxy, direct } = await etcd.viaProxy(prefix);
    const identity = `lost-reply-${randomBytes(4).toString('hex')}`;
    // The identity is the election key's value: it is on the wire only in the create txn.
    const replyLost = proxy.loseReplyTo(identity, lose);
    const a = new Leadership(viaProxy, { controller: 'c', identity, ttlSec, log });
    a.start();
    await replyLost;

    const fence = await eventually(() => a.fence(), { what, timeoutMs: 20_000 });
    const ks = await electionKeys(direct, 'c');
    expect(ks.map((k) => k.key)).toEqual([fence.key]);
    expect(await leaseAlive(direct, ks[0]!.lease!)).toBe(true);
    return {
      a,
      direct,
      async close() {
        viaProxy.close();
        await proxy.close();
      },
    };
  }

  it('re-sent by etcd3 on a new connection: the candidate takes its own key as its term and leaves no orphan', async () => {
    const { a, direct, close } = await leadDespiteLostReply('the candidate leads despite the lost reply', 3, {});
    // A second candidate takes over when the first resigns: nothing of the first is left to wait on.
    const b = new Leadership(direct, { controller: 'c', identity: 'b', ttlSec: 3, log });
    b.start();
    await a.stop();
    const fenceB = await eventually(() => b.fence(), { what: 'b takes over', timeoutMs: 15_000 });
    expect((await electionKeys(direct, 'c')).map((k) => k.key)).toEqual([fenceB.key]);
    await b.stop();
    await close();
  });

  it('failing for good (etcd away while etcd3 retries): the lease is given up and the next campaign leads', async () => {
    // The commit lands, its reply is lost, and every retry finds the proxy refusing connections.
    // The TTL outlasts the outage, so only giving the lease up can remove the landed key.
    const { a, direct, close } = await leadDespiteLostReply('the candidate leads once etcd is back', 5, { refuseMs: 1500 });
    await a.stop();
    expect(await electionKeys(direct, 'c')).toEqual([]);
    await close();
  });
});

describe('terms and fences', () => {
  it('a write refused under an earlier term’s fence does not depose the current term', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const a = new Leadership(store, { controller: 'c', identity: 'a', ttlSec: 2, log });
    const deposed: string[] = [];
    a.on('deposed', (why) => deposed.push(why));
    a.start();
    const first = await eventually(() => a.fence(), { what: 'a elected' });

    // The term ends under a pass that captured its fence (lease revoked: `etcdctl lease revoke`);
    // the same process is elected again before that pass commits.
    await etcd.store(prefix).revokeLease(first.key.slice(keys.leaders('c').length));
    const second = await eventually(() => a.fence()?.createRevision !== first.createRevision && a.fence(), { what: 'a re-elected', timeoutMs: 15_000 });
    expect(deposed).toHaveLength(1);

    // The stale pass commits under the first fence and is refused...
    const err = await commitActs(store, [{ ops: [{ op: 'put', key: 'owned', value: marker(1) }] }], first).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FencedError);
    // ...and reports it: the new term stands.
    const deposedByStale = a.depose((err as Error).message, first);
    expect(a.fence()).toEqual(second);
    expect(deposedByStale).toBe(false);
    expect(deposed).toHaveLength(1);
    const ok = await commitActs(store, [{ ops: [{ op: 'put', key: 'owned', value: marker(2) }] }], second);
    expect(ok.committed).toHaveLength(1);

    // The current term's own fence still deposes.
    expect(a.depose('refused under the current fence', second)).toBe(true);
    expect(a.fence()).toBeUndefined();
    await a.stop();
  });

  it('a follower that never receives its predecessor’s delete event still takes over', async () => {
    const prefix = uniquePrefix();
    const direct = etcd.store(prefix);
    const proxy = new TcpProxy(etcd.member.spec.clientPort, { http2: true });
    const viaProxy = new Store({ endpoints: await proxy.start(), prefix });
    const a = new Leadership(direct, { controller: 'c', identity: 'a', ttlSec: 2, log });
    a.start();
    const fenceA = await eventually(() => a.fence(), { what: 'a elected' });
    const aKey = prefix + fenceA.key;
    // Every delete event of a's key is lost on the way to b; replies that name a's key are counted.
    let dropped = 0;
    let naming = 0;
    const isDelete = deleteEventOf(aKey);
    proxy.dropFrames((p) => {
      if (p.includes(aKey)) naming++;
      return isDelete(p) && ++dropped > 0;
    });

    const timers = timersCreatedBy('src/store/leadership.ts');
    const b = new Leadership(viaProxy, { controller: 'c', identity: 'b', ttlSec: 2, log });
    b.start();
    // b waits on a's key once it has read it as its predecessor and has checked, with its watch in
    // place, that the key still exists: two replies naming it.
    await eventually(() => naming >= 2, { what: 'b waiting on a' });
    // Waiting is waiting: re-reads every half TTL (1 s), not a loop of reads.
    const before = naming;
    await sleep(2000);
    expect(naming - before).toBeLessThanOrEqual(6);
    expect(b.isLeader()).toBe(false);

    await a.stop();
    await eventually(async () => (await electionKeys(direct, 'c')).every((k) => k.identity === 'b'), { what: "a's key gone" });
    const fenceB = await eventually(() => b.fence(), { what: 'b leads without the delete event', timeoutMs: 15_000 });
    expect(fenceB.createRevision).toBeGreaterThan(fenceA.createRevision);
    expect(dropped).toBeGreaterThan(0);
    await b.stop();
    expect(timers.created()).toBeGreaterThan(0);
    await eventually(() => timers.live() === 0, { what: 'no timer left by the election' });
    timers.disable();
    viaProxy.close();
    await proxy.close();
  });
});

describe('an election key held by no live lease', () => {
  it('a key bound to no lease ahead of every candidate (copied without its lease) is removed, and a leader is elected', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    // As `etcdctl make-mirror` or a hand edit leaves it: the lowest create revision, no lease.
    await store.ns.put(`${keys.leaders('c')}7587`).value('copied by make-mirror').exec();
    const a = new Leadership(store, { controller: 'c', identity: 'a', ttlSec: 2, log });
    a.start();
    const fence = await eventually(() => a.fence(), { what: 'a elected past the lease-less key', timeoutMs: 10_000 });
    expect((await electionKeys(store, 'c')).map((k) => k.identity)).toEqual(['a']);
    expect(fence.key).not.toBe(`${keys.leaders('c')}7587`);
    expect(a.health().staleKeysRemoved).toMatchObject([{ key: `${keys.leaders('c')}7587`, why: 'bound to no lease' }]);
    await a.stop();
  });

  it('a follower whose predecessor turns lease-less (its leader gone, the key put back without a lease) takes over', async () => {
    const prefix = uniquePrefix();
    const store = etcd.store(prefix);
    const a = new Leadership(store, { controller: 'c', identity: 'a', ttlSec: 2, log, recheckMs: 250 });
    a.start();
    const fenceA = await eventually(() => a.fence(), { what: 'a elected' });
    const b = new Leadership(store, { controller: 'c', identity: 'b', ttlSec: 2, log, recheckMs: 250 });
    b.start();
    await eventually(async () => (await electionKeys(store, 'c')).length === 2, { what: 'b campaigning' });
    // a's key loses its lease but stays (a put without a lease keeps the create revision): b's
    // predecessor is now nobody's campaign. a, its lease still alive, is deposed by its own fence.
    await store.ns.put(fenceA.key).value('a').exec();
    await eventually(() => b.fence(), { what: 'b leads past the lease-less key', timeoutMs: 10_000 });
    expect(b.health().staleKeysRemoved).toMatchObject([{ key: fenceA.key, why: 'bound to no lease' }]);
    await Promise.all([a.stop(), b.stop()]);
  });
});
