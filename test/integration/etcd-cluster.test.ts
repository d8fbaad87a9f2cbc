// Production runs etcd with 3 members: losing one must lose nothing. A real 3-member cluster on
// loopback; one member is killed mid-stream; writes, informers and leadership carry on through
// the other two, and every acknowledged write is there.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Informer } from '../../src/store/informer.js';
import { Leadership } from '../../src/store/leadership.js';
import { Store } from '../../src/store/store.js';
import { commitActs, type OpGroup } from '../../src/store/writer.js';
import { startEtcdCluster } from '../support/etcd.js';
import { testLogger } from '../support/log.js';
import { eventually } from '../support/wait.js';

let cluster: Awaited<ReturnType<typeof startEtcdCluster>>;
beforeAll(async () => {
  cluster = await startEtcdCluster(3);
});
afterAll(async () => {
  await cluster?.stop();
});

const counter = (n: number) => ({ apiVersion: 'jaco.dev/v1', kind: 'ReplicaCounter', metadata: { name: `c${n}` }, spec: { next: n } });
const acts = (from: number, n: number): OpGroup[] => Array.from({ length: n }, (_, i) => ({ ops: [{ op: 'create', key: `counters/d/${String(from + i).padStart(4, '0')}`, value: counter(from + i) }] }));

/**
 * Retries a write through transient failures (a member going away), as every controller does. A
 * retried create that had landed before conflicts harmlessly.
 */
async function writeThrough(store: Store, a: OpGroup[]): Promise<void> {
  await eventually(
    async () => {
      await commitActs(store, a);
      return true;
    },
    { what: 'the write to land', timeoutMs: 30_000, intervalMs: 200 },
  );
}

/** The member that is the raft leader: losing it is the hard case. */
async function raftLeader(): Promise<number> {
  for (let i = 0; i < cluster.members.length; i++) {
    const s = new Store({ endpoints: cluster.members[i]!.endpoint });
    try {
      const st = await s.client.maintenance.status();
      if (st.leader === st.header.member_id) return i;
    } finally {
      s.close();
    }
  }
  throw new Error('no raft leader');
}

describe('a 3-member etcd cluster losing its raft leader', () => {
  it('keeps every acknowledged write, the informer converges, the leader keeps leading', async () => {
    const log = testLogger();
    const prefix = '/jaco/';
    const writer = new Store({ endpoints: cluster.endpoints, prefix });
    const reader = new Store({ endpoints: cluster.endpoints, prefix });
    const inf = new Informer(reader, 'counters/', { kind: 'ReplicaCounter', log });
    await inf.start();
    const leader = new Leadership(new Store({ endpoints: cluster.endpoints, prefix }), { controller: 'test', identity: 'a', ttlSec: 5, log });
    leader.start();
    const fence = await eventually(() => leader.fence(), { what: 'elected' });

    await writeThrough(writer, acts(0, 200));
    await cluster.members[await raftLeader()]!.stop('SIGKILL');
    for (let i = 200; i < 400; i += 20) await writeThrough(writer, acts(i, 20));
    // A fenced write by the leader still lands: its lease was kept alive by the other members.
    const fenced = await commitActs(writer, [{ ops: [{ op: 'put', key: 'counters/d/fenced', value: counter(999) }] }], fence);
    expect(fenced.committed).toHaveLength(1);
    expect(leader.fence()?.createRevision).toBe(fence.createRevision);

    const { items } = await writer.list('counters/d/');
    expect(items).toHaveLength(401);
    await eventually(() => inf.items.size === 401, { what: 'the informer sees all 401 keys', timeoutMs: 30_000 });

    await leader.stop();
    await inf.stop();
    writer.close();
    reader.close();
  });
});
