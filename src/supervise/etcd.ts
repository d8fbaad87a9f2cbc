// Starting real etcd members as child processes: the embedded single member of `jaco up`, and
// the members tests start on free loopback ports (one, or three for fault tests).
import { spawn, type ChildProcess } from 'node:child_process';
import { binaryAnswers, spawnLogged, stopProcess } from '../child.js';
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { Store, type StoreOptions } from '../store/store.js';

export interface EtcdMemberSpec {
  name: string;
  dataDir: string;
  clientPort: number;
  peerPort: number;
  /** The peer port the other members dial, if not peerPort (a proxy in front of it, which a test can cut). */
  advertisePeerPort?: number;
  /** name=peerURL,… for a multi-member cluster; defaults to this member alone. */
  initialCluster?: string;
  logFile?: string;
  /** Extra flags, e.g. ['--auto-compaction-retention', '1h']. */
  extraArgs?: string[];
  /** Addresses besides 127.0.0.1 to serve clients on (the local cluster's nodes reach it at the machine's link address). */
  extraClientHosts?: string[];
  /** Serve clients over TLS (https://), requiring client certificates signed by `ca`. */
  tls?: { cert: string; key: string; ca: string };
}

export interface EtcdMember {
  spec: EtcdMemberSpec;
  endpoint: string;
  process: ChildProcess;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export class EtcdNotInstalledError extends Error {
  override name = 'EtcdNotInstalledError';
  constructor() {
    super('etcd is not installed (no `etcd` on PATH). Install it with `apt-get install -y etcd-server etcd-client` or run `make up`, which does.');
  }
}

export function etcdBinary(): string {
  const bin = process.env.JACO_ETCD_BIN ?? 'etcd';
  if (!binaryAnswers(bin)) throw new EtcdNotInstalledError();
  return bin;
}

/**
 * Where freePort draws from: below the kernel's ephemeral range (32768-60999 on Linux), from which
 * every outgoing connection takes its local port — a port found free there can be taken by one
 * before the server meant for it binds it (a test etcd exited at start so in a clean run) — and
 * apart from jaco's dynamic host ports (20000-32767) and the fixed ports the tests publish (18xxx).
 */
export const FREE_PORTS = { min: 12400, max: 14999 };

/** A free TCP port on 127.0.0.1 (FREE_PORTS; the kernel's choice when none is found there). */
export async function freePort(random: () => number = Math.random): Promise<number> {
  for (let i = 0; i < 50; i++) {
    const port = FREE_PORTS.min + Math.floor(random() * (FREE_PORTS.max - FREE_PORTS.min + 1));
    if (!(await portInUse(port))) return port;
  }
  return anyFreePort();
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const a = srv.address();
      srv.close(() => (typeof a === 'object' && a ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

export function portInUse(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(true));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(false)));
  });
}

export function etcdArgs(s: EtcdMemberSpec): string[] {
  const peer = `http://127.0.0.1:${s.peerPort}`;
  const advertisedPeer = `http://127.0.0.1:${s.advertisePeerPort ?? s.peerPort}`;
  const client = ['127.0.0.1', ...(s.extraClientHosts ?? [])].map((h) => `${s.tls ? 'https' : 'http'}://${h}:${s.clientPort}`).join(',');
  const tls = s.tls ? ['--cert-file', s.tls.cert, '--key-file', s.tls.key, '--trusted-ca-file', s.tls.ca, '--client-cert-auth'] : [];
  return [
    '--name', s.name,
    '--data-dir', s.dataDir,
    '--listen-client-urls', client,
    '--advertise-client-urls', client,
    '--listen-peer-urls', peer,
    '--initial-advertise-peer-urls', advertisedPeer,
    '--initial-cluster', s.initialCluster ?? `${s.name}=${advertisedPeer}`,
    '--initial-cluster-state', 'new',
    // One token per cluster (every member must agree), derived from its member list.
    '--initial-cluster-token', `jaco-${createHash('sha256').update(s.initialCluster ?? s.name).digest('hex').slice(0, 12)}`,
    '--log-level', 'warn',
    '--logger', 'zap',
    ...tls,
    ...(s.extraArgs ?? []),
  ];
}

/** Starts one member; does not wait for it to answer (see waitForEtcd). */
export function startEtcdMember(s: EtcdMemberSpec, opts: { detached?: boolean } = {}): EtcdMember {
  const bin = etcdBinary();
  mkdirSync(s.dataDir, { recursive: true });
  const child = s.logFile ? spawnLogged(bin, etcdArgs(s), s.logFile, { detached: opts.detached }) : spawn(bin, etcdArgs(s), { stdio: 'ignore', detached: opts.detached });
  return {
    spec: s,
    endpoint: `${s.tls ? 'https' : 'http'}://127.0.0.1:${s.clientPort}`,
    process: child,
    stop: (signal: NodeJS.Signals = 'SIGTERM') => stopProcess(child, { signal }),
  };
}

/** Waits until etcd at the endpoints answers (or the deadline passes). */
export async function waitForEtcd(endpoints: string[], timeoutMs = 20_000, child?: ChildProcess, storeOpts: StoreOptions = {}): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const store = new Store({ ...storeOpts, endpoints, dialTimeoutMs: 1000 });
  try {
    for (;;) {
      if (child && (child.exitCode !== null || child.signalCode !== null)) throw new Error(`etcd exited (code ${child.exitCode ?? child.signalCode}) before answering`);
      try {
        await store.ping(1000);
        return;
      } catch (e) {
        if (Date.now() > deadline) throw new Error(`etcd at ${endpoints.join(',')} did not answer within ${timeoutMs} ms: ${(e as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    store.close();
  }
}

