// The act-level checks against a real etcd: what they read is etcd's revisions (create revisions,
// ranges at past revisions), so they are shown here on real etcd failing on what they must catch —
// a placement or a removal with no audit record in its transaction, a controller write with no term in force,
// one process writing under two leaders — and finding a record whose lease was revoked since.
import { describe, expect, it } from 'vitest';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { ActChecker, snapshot } from './invariants.js';

const etcd = useTestEtcd();

describe('the act-level checks on real etcd', () => {
  it('catch a placement without its audit record, a write with no term in force, a process writing under another leader', async () => {
    const store = etcd.store();
    try {
      /** One transaction of puts, each [key, value, lease?]: one revision. */
      const txn = async (...puts: [string, object, string?][]) => {
        const res = await store.client.kv.txn({ compare: [], success: puts.map(([k, v, lease]) => ({ request_put: { key: Buffer.from(store.prefix + k), value: Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)), ...(lease ? { lease } : {}) } })), failure: [] });
        return Number(res.header.revision);
      };
      const desired = (node: string, replica: string): [string, object] => [`desired/${node}/${replica}`, { spec: { node, replica } }];
      const audit = (nonce: string, seq: number, replica: string, lease?: string): [string, object, string?] => [`audit/000001764000000000-${nonce}-${String(seq).padStart(8, '0')}`, { spec: { type: 'replica_placed', actor: 'scheduler', payload: { replica } } }, lease];
      const checker = new ActChecker();
      const sample = async () => (await checker.check(store, await snapshot(store, async () => []))).map((v) => `${v.invariant}: ${v.detail}`);

      const leaseA = await store.grantLease(60);
      await store.client.kv.put({ key: Buffer.from(`${store.prefix}leaders/scheduler/${leaseA}`), value: Buffer.from('A'), lease: leaseA });
      // Placed with its record, by process p1 while A leads: nothing to report.
      await txn(desired('n1', 'd-s-0'), audit('p1', 0, 'd-s-0'));
      expect(await sample()).toEqual([]);
      // Placed without a record.
      await txn(desired('n1', 'd-s-1'));
      expect(await sample()).toEqual([expect.stringMatching(/^every act has its audit record: desired\/n1\/d-s-1 created at revision \d+ with no audit record/)]);
      // A's lease ends (its term too); p1 still writes. The record's own lease is revoked before the
      // sample: read at the placement's revision, it is still found.
      await store.client.leaseClient.leaseRevoke({ ID: leaseA });
      const leaseR = await store.grantLease(60);
      await txn(desired('n2', 'd-s-2'), audit('p1', 1, 'd-s-2', leaseR));
      await store.client.leaseClient.leaseRevoke({ ID: leaseR });
      expect(await sample()).toEqual([expect.stringMatching(/^no write from a deposed leader lands: replica_placed .* by scheduler landed at revision \d+, when no scheduler term was in force/)]);
      // B leads now; p1 (which wrote under A) writes again, and p2 writes as B would.
      const leaseB = await store.grantLease(60);
      await store.client.kv.put({ key: Buffer.from(`${store.prefix}leaders/scheduler/${leaseB}`), value: Buffer.from('B'), lease: leaseB });
      await txn(desired('n2', 'd-s-3'), audit('p2', 0, 'd-s-3'));
      await txn(desired('n3', 'd-s-4'), audit('p1', 2, 'd-s-4'));
      expect(await sample()).toEqual([expect.stringMatching(/^no write from a deposed leader lands: scheduler process p1 wrote under A's term \(revision \d+\) and replica_placed .* under B's/)]);
      // Removals: one recorded in its transaction, a move's source at cutover (exempt), one with no record.
      const del = async (key: string, ...puts: [string, object, string?][]) => {
        const res = await store.client.kv.txn({ compare: [], success: [{ request_delete_range: { key: Buffer.from(store.prefix + key) } }, ...puts.map(([k, v]) => ({ request_put: { key: Buffer.from(store.prefix + k), value: Buffer.from(JSON.stringify(v)) } }))], failure: [] });
        return Number(res.header.revision);
      };
      await txn(['desired/n1/d-s-1', { spec: { node: 'n1', replica: 'd-s-1', movingTo: { node: 'n2' } } }]);
      expect(await sample()).toEqual([]);
      await del('desired/n1/d-s-0', audit('p2', 1, 'd-s-0'));
      await del('desired/n1/d-s-1');
      const bare = await del('desired/n2/d-s-2');
      expect(await sample()).toEqual([expect.stringMatching(new RegExp(`^every act has its audit record: desired/n2/d-s-2 \\(created at revision \\d+\\) deleted at revision ${bare} with no audit record`))]);
      expect(checker.coverage).toMatchObject({ placements: 5, removals: 3, unverifiable: 0 });
    } finally {
      store.close();
    }
  });
});
