// The one real etcd a test file shares: started before its first test, stopped after its last.
// Kept apart from etcd.ts because it registers vitest hooks (benchmarks import etcd.ts too).
import { afterAll, beforeAll } from 'vitest';
import { startTestEtcd, type TestEtcd, type TestEtcdOptions } from './etcd.js';

/** A single-member etcd for the calling test file; use it inside tests and hooks. */
export function useTestEtcd(opts: TestEtcdOptions = {}): TestEtcd {
  let etcd: TestEtcd | undefined;
  beforeAll(async () => {
    etcd = await startTestEtcd(opts);
  });
  afterAll(async () => {
    await etcd?.stop();
  });
  const started = (): TestEtcd => {
    if (!etcd) throw new Error('useTestEtcd: etcd starts in beforeAll; use it inside a test or hook');
    return etcd;
  };
  return {
    get endpoint() {
      return started().endpoint;
    },
    get member() {
      return started().member;
    },
    get secureDir() {
      return started().secureDir;
    },
    store: (prefix) => started().store(prefix),
    env: (envFile) => started().env?.(envFile) ?? {},
    etcdctlArgs: () => started().etcdctlArgs?.() ?? [],
    addNodes: async (nodes) => started().addNodes?.(nodes),
    viaProxy: (prefix) => started().viaProxy(prefix),
    restart: (downMs) => started().restart(downMs),
    snapshot: () => started().snapshot!(),
    replace: (opts) => started().replace!(opts),
    stop: () => started().stop(),
  };
}
