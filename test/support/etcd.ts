// Real etcd for tests: single members (or a 3-member cluster) on free loopback ports, data under
// /dev/shm. Starting fails loudly when etcd is not installed: nothing is skipped.
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { freePort, startEtcdMember, waitForEtcd, type EtcdMember, type EtcdMemberSpec } from '../../src/supervise/etcd.js';
import { credentialsDir, etcdAuthArgs, issueEtcdCertificates, localProcessEnv, localStoreOptions, provisionLocalRoles, provisionLocalUsers, readEnvFile } from '../../src/supervise/local-credentials.js';
import { agentRole, ingressRole, provisionRbac } from '../../src/store/rbac.js';
import { Store, type StoreOptions } from '../../src/store/store.js';
import { TcpProxy } from './proxy.js';

const execFileP = promisify(execFile);
const base = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

export interface TestEtcd {
  endpoint: string;
  member: EtcdMember;
  /** A store on this etcd under a fresh prefix (or the given one); as root when it is secure. */
  store(prefix?: string): Store;
  /**
   * When started `secure`: the directory holding its pki/ and credentials/ (as `jaco up`'s .jaco),
   * else undefined.
   */
  secureDir?: string;
  /**
   * The connection environment of a jaco process under the user of `envFile` (root.env,
   * controller.env, agent-node-1.env…, as src/store/rbac.ts names them): the TLS files and its
   * credentials. Empty for a plaintext etcd.
   */
  env?(envFile?: string): Record<string, string>;
  /** etcdctl's flags for this etcd (TLS files, root user). */
  etcdctlArgs?(): string[];
  /** Makes the agent's and ingress's users of nodes joining now (a secure etcd; nothing otherwise). */
  addNodes?(nodes: readonly string[]): Promise<void>;
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
  replace?(opts?: { snapshot?: string; seed?: (endpoint: string, opts: StoreOptions) => Promise<void> }): Promise<void>;
  stop(): Promise<void>;
}

export function uniquePrefix(): string {
  return `/t-${randomBytes(4).toString('hex')}/`;
}

export interface TestEtcdOptions {
  /**
   * Serve over TLS with authentication on, one user per process (src/store/rbac.ts) for these
   * nodes' agents and ingresses, every controller and the operator (root): as `jaco up` and
   * production run etcd, made by the same code (src/supervise/local-credentials.ts).
   */
  secure?: { nodes: readonly string[] };
}

export async function startTestEtcd(opts: TestEtcdOptions = {}): Promise<TestEtcd> {
  const dataDir = mkdtempSync(join(base, 'jaco-etcd-'));
  const secureDir = opts.secure ? mkdtempSync(join(tmpdir(), 'jaco-etcd-pki-')) : undefined;
  const nodes = new Set(opts.secure?.nodes ?? []);
  // JACO_TEST_ETCD_ARGS: extra etcd flags for a look inside (e.g. --enable-pprof for the scale bench).
  const extraArgs = [...(secureDir ? etcdAuthArgs(secureDir) : []), ...(process.env.JACO_TEST_ETCD_ARGS?.split(' ').filter(Boolean) ?? [])];
  const tls = secureDir ? issueEtcdCertificates(secureDir) : undefined;
  /** How a client connects: as root (the test's own reads and writes), or with TLS only (before auth is on). */
  const storeOptions = (user: 'root' | 'none' = 'root'): StoreOptions => (secureDir ? localStoreOptions(secureDir, user === 'root' ? 'root.env' : false) : {});
  const started = async (m: EtcdMember) => {
    await waitForEtcd([m.endpoint], 20_000, m.process, storeOptions('none'));
  };
  // Its ports are found free, then bound by etcd a moment later: meanwhile another process may take
  // one, and etcd exits at once. A clean run lost an integration file so, when the ports came from
  // the ephemeral range every outgoing connection draws from (freePort now draws from outside it).
  // Such a start is tried again on fresh ports and a fresh data directory, up to three times; any
  // other failure is not.
  let spec!: EtcdMemberSpec;
  let member!: EtcdMember;
  for (let attempt = 1; ; attempt++) {
    spec = { name: 't', dataDir: attempt === 1 ? dataDir : mkdtempSync(join(base, 'jaco-etcd-')), clientPort: await freePort(), peerPort: await freePort(), ...(extraArgs.length ? { extraArgs } : {}), ...(tls ? { tls } : {}) };
    member = startEtcdMember(spec);
    try {
      await started(member);
      break;
    } catch (e) {
      await member.stop();
      rmSync(spec.dataDir, { recursive: true, force: true });
      if (attempt >= 3 || !/exited .*before answering/.test((e as Error).message)) throw e;
    }
  }
  if (secureDir) await provisionLocalUsers([member.endpoint], secureDir, [...nodes]);
  const etcdctlArgs = (): string[] => {
    if (!secureDir) return [];
    const o = storeOptions();
    return ['--cacert', o.caFile!, '--cert', o.certFile!, '--key', o.keyFile!, '--user', `${o.user}:${o.password}`];
  };
  const stores: Store[] = [];
  const t: TestEtcd = {
    endpoint: member.endpoint,
    get member() {
      return member;
    },
    ...(secureDir ? { secureDir } : {}),
    store(prefix = uniquePrefix()) {
      const s = new Store({ endpoints: member.endpoint, prefix, ...storeOptions() });
      stores.push(s);
      return s;
    },
    env: (envFile = 'root.env') => (secureDir ? localProcessEnv(secureDir, envFile) : {}),
    etcdctlArgs,
    async addNodes(more) {
      const fresh = more.filter((n) => !nodes.has(n));
      if (!secureDir || !fresh.length) return;
      for (const n of fresh) nodes.add(n);
      await provisionLocalRoles([member.endpoint], secureDir, fresh.flatMap((n) => [agentRole(n), ingressRole(n)]));
    },
    async viaProxy(prefix = uniquePrefix()) {
      const proxy = new TcpProxy(member.spec.clientPort);
      const store = new Store({ endpoints: `${secureDir ? 'https' : 'http'}://${(await proxy.start()).replace(/^\w+:\/\//, '')}`, prefix, ...storeOptions() });
      return { proxy, store, direct: t.store(prefix) };
    },
    async restart(downMs = 0) {
      await member.stop();
      if (downMs) await new Promise((r) => setTimeout(r, downMs));
      member = startEtcdMember(spec);
      await started(member);
    },
    async snapshot() {
      const file = join(mkdtempSync(join(base, 'jaco-snap-')), 'snapshot.db');
      await execFileP('etcdctl', [...etcdctlArgs(), '--endpoints', member.endpoint, 'snapshot', 'save', file], { env: { ...process.env, ETCDCTL_API: '3' } });
      return file;
    },
    async replace({ snapshot, seed }: { snapshot?: string; seed?: (endpoint: string, opts: StoreOptions) => Promise<void> } = {}) {
      await member.stop();
      rmSync(spec.dataDir, { recursive: true, force: true });
      spec = { ...spec, dataDir: mkdtempSync(join(base, 'jaco-etcd-')) };
      if (snapshot) {
        rmSync(spec.dataDir, { recursive: true, force: true });
        const peer = `http://127.0.0.1:${spec.peerPort}`;
        const args = ['snapshot', 'restore', snapshot, '--data-dir', spec.dataDir, '--name', spec.name, '--initial-cluster', `${spec.name}=${peer}`, '--initial-advertise-peer-urls', peer];
        await execFileP('etcdctl', args, { env: { ...process.env, ETCDCTL_API: '3' } });
      }
      // A wiped secure store gets its users back (with the passwords its processes hold), as an
      // operator re-running `jaco etcd rbac` would; a snapshot holds them already.
      const reprovision = !!secureDir && !snapshot;
      if (seed || reprovision) {
        const hidden = startEtcdMember({ ...spec, clientPort: await freePort() });
        try {
          await started(hidden);
          if (reprovision) {
            // Auth is off in an empty store: provisioned over TLS alone, root made again with its password.
            const s = new Store({ endpoints: hidden.endpoint, ...storeOptions('none') });
            try {
              await provisionRbac(s, [...nodes], { outDir: credentialsDir(secureDir), enableAuth: true, passwords: passwordsIn(secureDir) });
            } finally {
              s.close();
            }
          }
          await seed?.(hidden.endpoint, storeOptions());
        } finally {
          await hidden.stop();
        }
      }
      member = startEtcdMember(spec);
      await started(member);
    },
    async stop() {
      for (const s of stores) s.close();
      await member.stop();
      rmSync(spec.dataDir, { recursive: true, force: true });
      if (secureDir) rmSync(secureDir, { recursive: true, force: true });
    },
  };
  return t;
}

/** The passwords of a secure test etcd's users, by user, from their env files. */
function passwordsIn(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of readdirSync(credentialsDir(dir))) {
    const e = readEnvFile(join(credentialsDir(dir), f));
    if (e?.JACO_ETCD_USER && e.JACO_ETCD_PASSWORD) out[e.JACO_ETCD_USER] = e.JACO_ETCD_PASSWORD;
  }
  return out;
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
