// A call whose connection goes silent (no reply, no reset: a partition, a stalled member) must end,
// and the store must come back on a new connection. Without a deadline a unary call on such a
// connection waits for ever; as the circuit breaker's half-open trial it also holds every later
// call to that host behind it (cockatiel awaits the trial). A chaos run once took no sample for
// 60 s while its etcd was healthy (issue 11); this is that class of stall, on real etcd.
import { describe, expect, it } from 'vitest';
import { isUnavailable } from '../../src/store/errors.js';
import { Store, withTimeout } from '../../src/store/store.js';
import { uniquePrefix } from '../support/etcd.js';
import { useTestEtcd } from '../support/etcd-fixture.js';
import { TcpProxy } from '../support/proxy.js';
import { eventually, sleep } from '../support/wait.js';

const etcd = useTestEtcd();

describe('a call on a connection that went silent', () => {
  it('ends at the call deadline, and the next calls answer on a new connection', async () => {
    const proxy = new TcpProxy(etcd.member.spec.clientPort);
    const store = new Store({ endpoints: await proxy.start(), prefix: uniquePrefix(), callTimeoutMs: 1500 });
    try {
      await store.ping(); // the connection is up
      // The connection carrying the next read of `silent` stops delivering anything, and is not cut.
      void proxy.loseReplyTo('silent', { settleMs: 120_000 });
      const t = Date.now();
      const outcome = await withTimeout(
        store.get('silent').then(
          () => 'answered',
          (e: unknown) => (isUnavailable(e) ? 'failed as unavailable' : `failed: ${String(e)}`),
        ),
        10_000,
        'still waiting after 10 s',
      ).catch((e: Error) => e.message);
      // Ended by its deadline: retried on a new connection (etcd3 retries a recoverable error) or failed.
      expect(['answered', 'failed as unavailable']).toContain(outcome);
      expect(Date.now() - t).toBeLessThan(6000);
      // Later calls do not queue behind it on the silent connection: the store reconnects.
      await eventually(async () => (await withTimeout(store.get('other'), 2500, 'no answer').then(() => true, () => false)), { what: 'a call answered after the silent one', timeoutMs: 10_000 });
    } finally {
      store.close();
      await proxy.close();
    }
  }, 30_000);

  it('as the circuit breaker’s half-open trial, does not hold later calls to the host behind it', async () => {
    const proxy = new TcpProxy(etcd.member.spec.clientPort);
    const store = new Store({ endpoints: await proxy.start(), prefix: uniquePrefix(), callTimeoutMs: 1500 });
    try {
      await store.ping();
      // Three refused calls open the host's breaker (ConsecutiveBreaker(3)).
      proxy.pause();
      for (let i = 0; i < 3; i++) await store.get('refused').catch(() => undefined);
      proxy.resume();
      await sleep(1200); // halfOpenAfter: the next call is the trial
      void proxy.loseReplyTo('trial', { settleMs: 120_000 });
      const trial = store.get('trial').catch(() => undefined);
      await sleep(100);
      // Every call after it awaits the trial first; with a deadline the trial ends and they answer.
      const t = Date.now();
      await eventually(async () => withTimeout(store.get('after'), 3000, 'no answer').then(() => true, () => false), { what: 'a call after the trial answered', timeoutMs: 10_000 });
      expect(Date.now() - t).toBeLessThan(8000);
      await trial;
    } finally {
      store.close();
      await proxy.close();
    }
  }, 30_000);
});

