// Real etcd for tests: single members (or a 3-member cluster) on free loopback ports, data under
// /dev/shm. Starting fails loudly when etcd is not installed: nothing is skipped.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort, startEtcdMember, waitForEtcd, type EtcdMember, type EtcdMemberSpec } from '../../src/supervise/etcd.js';
import { Store } from '../../src/store/store.js';
import { TcpProxy } from './proxy.js';

const execFileP = promisify(execFile);
const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

export interface TestEtcd {
  endpoint: string;
  member: EtcdMember;
  /** A store on this etcd under a fresh prefix (or the given one). */
  store(prefix?: string): Store;
  /**
   * A store that reaches etcd only through a TCP proxy the test can cut, and a direct store on the
   * same prefix to look at what really landed. The caller closes both when done.
   */
  viaProxy(prefix?: string): Promise<{ proxy: TcpProxy; store: Store; direct: Store }>;
  /** Stops etcd (data kept) and starts it again on the same ports. */
  restart(downMs?: number): Promise<void>;
  /** Saves a snapshot of the store to a file (etcdctl snapshot save) and returns its path. */
  snapshot?(): Promise<string>;
  /**
   * Stops etcd and starts it again on the same ports over a new data directory: empty (a wipe), or
   * restored from a snapshot (etcdctl snapshot restore) — the two ways a store goes back in time.
   * `seed` writes to the new store before any client can reach it (it is served on another port first).
   */
  replace?(opts?: { snapshot?: string; seed?: (endpoint: string) => Promise<void> }): Promise<void>;
  stop(): Promise<void>;
}

export function uniquePrefix(): string {
  return `/t-${randomBytes(4).toString('hex')}/`;
}

export async function startTestEtcd(): Promise<TestEtcd> {
  const dataDir = mkdtempSync(join(base, 'jaco-etcd-'));
  // JACO_TEST_ETCD_ARGS: extra etcd flags for a look inside (e.g. --enable-pprof for the scale bench).
  const extraArgs = process.env.JACO_TEST_ETCD_ARGS?.split(' ').filter(Boolean);
  let spec: EtcdMemberSpec = { name: 't', dataDir, clientPort: await freePort(), peerPort: await freePort(), ...(extraArgs ? { extraArgs } : {}) };
  let member = startEtcdMember(spec);
  await waitForEtcd([member.endpoint], 20_000, member.process).catch(async (e: unknown) => {
    await member.stop();
    throw e;
  });
  const stores: Store[] = [];
  const t: TestEtcd = {
    endpoint: member.endpoint,
    get member() {
      return member;
    },
    store(prefix = uniquePrefix()) {
      const s = new Store({ endpoints: member.endpoint, prefix });
      stores.push(s);
      return s;
    },
    async viaProxy(prefix = uniquePrefix()) {
      const proxy = new TcpProxy(member.spec.clientPort);
      const store = new Store({ endpoints: await proxy.start(), prefix });
      return { proxy, store, direct: t.store(prefix) };
    },
    async restart(downMs = 0) {
      await member.stop();
      if (downMs) await new Promise((r) => setTimeout(r, downMs));
      member = startEtcdMember(spec);
      await waitForEtcd([member.endpoint], 20_000, member.process);
    },
    async snapshot() {
      const file = join(mkdtempSync(join(base, 'jaco-snap-')), 'snapshot.db');
      await execFileP('etcdctl', ['--endpoints', member.endpoint, 'snapshot', 'save', file], { env: { ...process.env, ETCDCTL_API: '3' } });
      return file;
    },
    async replace({ snapshot, seed }: { snapshot?: string; seed?: (endpoint: string) => Promise<void> } = {}) {
      await member.stop();
      rmSync(spec.dataDir, { recursive: true, force: true });
      spec = { ...spec, dataDir: mkdtempSync(join(base, 'jaco-etcd-')) };
      if (snapshot) {
        rmSync(spec.dataDir, { recursive: true, force: true });
        const peer = `http://127.0.0.1:${spec.peerPort}`;
        const args = ['snapshot', 'restore', snapshot, '--data-dir', spec.dataDir, '--name', spec.name, '--initial-cluster', `${spec.name}=${peer}`, '--initial-advertise-peer-urls', peer];
        await execFileP('etcdctl', args, { env: { ...process.env, ETCDCTL_API: '3' } });
      }
      if (seed) {
        const hidden = startEtcdMember({ ...spec, clientPort: await freePort() });
        try {
          await waitForEtcd([hidden.endpoint], 20_000, hidden.process);
          await seed(hidden.endpoint);
        } finally {
          await hidden.stop();
        }
      }
      member = startEtcdMember(spec);
      await waitForEtcd([member.endpoint], 20_000, member.process);
    },
    async stop() {
      for (const s of stores) s.close();
      await member.stop();
      rmSync(spec.dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

/** A real 3-member cluster on loopback, for fault tests. */
export async function startEtcdCluster(n = 3): Promise<{ members: EtcdMember[]; endpoints: string[]; stop(): Promise<void> }> {
  const specs: EtcdMemberSpec[] = [];
  for (let i = 0; i < n; i++)
    specs.push({ name: `m${i}`, dataDir: mkdtempSync(join(base, `jaco-etcd-m${i}-`)), clientPort: await freePort(), peerPort: await freePort() });
  const initialCluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.peerPort}`).join(',');
  const members = specs.map((s) => startEtcdMember({ ...s, initialCluster }));
  const endpoints = members.map((m) => m.endpoint);
  const cleanup = async () => {
    await Promise.all(members.map((m) => m.stop()));
    for (const s of specs) rmSync(s.dataDir, { recursive: true, force: true });
  };
  try {
    await waitForEtcd(endpoints, 30_000);
  } catch (e) {
    await cleanup(); // a cluster that never formed must not outlive the test
    throw e;
  }
  return {
    members,
    endpoints,
    stop: cleanup,
  };
}
