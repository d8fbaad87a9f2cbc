// claimKey (src/store/claim.ts), the one way jaco claims a key, on a real etcd: created once,
// held by another, found again by its own lease (a commit whose reply was lost), and claimed again
// once its holder's lease is gone.
import { describe, expect, it } from 'vitest';
import { claimKey } from '../../src/store/claim.js';
import { useTestEtcd } from '../support/etcd-fixture.js';

const etcd = useTestEtcd();

describe('claimKey on real etcd', () => {
  it('creates the key once; another claimer finds the holder; the first finds its own key by its lease', async () => {
    const store = etcd.store();
    try {
      const [a, b] = [await store.grantLease(30), await store.grantLease(30)];
      const first = await claimKey(store, 'claims/x', 'A', a);
      expect(first).toMatchObject({ ours: true, adopted: false });
      const created = first.ours ? first.createRevision : 0;
      const other = await claimKey(store, 'claims/x', 'B', b);
      expect(other.ours).toBe(false);
      if (!other.ours) {
        expect(other.holder.lease).toBe(a);
        expect(other.holder.value.toString()).toBe('A');
        expect(Number(other.holder.create_revision)).toBe(created);
      }
      // The same claim again, as after a reply that was lost: its own key, at the same fence.
      expect(await claimKey(store, 'claims/x', 'A', a)).toEqual({ ours: true, createRevision: created, adopted: true });
      // The holder's lease ends: the key goes with it, and the other claims it at a new revision.
      await store.revokeLease(a);
      const next = await claimKey(store, 'claims/x', 'B', b);
      expect(next.ours).toBe(true);
      if (next.ours) expect(next.createRevision).toBeGreaterThan(created);
    } finally {
      store.close();
    }
  });

  it('without a lease: the first value stays, every later claimer reads it', async () => {
    const store = etcd.store();
    try {
      expect(await claimKey(store, 'claims/y', 'first')).toMatchObject({ ours: true, adopted: false });
      const again = await claimKey(store, 'claims/y', 'second');
      expect(again.ours).toBe(false);
      if (!again.ours) expect(again.holder.value.toString()).toBe('first');
      expect((await store.client.get(`${store.prefix}claims/y`).string())).toBe('first');
    } finally {
      store.close();
    }
  });
});
