// The chaos cluster: a real 3-member etcd, two `jaco controller all` processes (one leads each
// controller, one stands by), three `jaco agent` processes sharing the local Docker engine, and
// every etcd3 client of those processes reaching etcd only through TCP proxies on 127.0.0.1 (one
// proxy per component and member), so a cut between one component and etcd is a real one. The
// members reach each other through proxies too (one in front of each member's peer port), so one
// member can be cut from its peers (`isolateEtcd`). etcd serves clients over TLS with client
// certificates and authentication on, each process under its own etcd user, made by `jaco up`'s
// code (src/supervise/local-credentials.ts), as production runs it.
// Everything it starts is noted in a pid file; the next run ends what an aborted run left behind
// (and test/support/e2e-global.ts removes its containers).
import { execFile, type ChildProcess } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import type { Socket } from 'node:net';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { Heartbeat } from '../../src/api/types.js';
import { freePort, startEtcdMember, waitForEtcd, type EtcdMember, type EtcdMemberSpec } from '../../src/supervise/etcd.js';
import { spawnLogged } from '../../src/child.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { Store, withTimeout, type StoreOptions } from '../../src/store/store.js';
import { jaco, JACO_BIN, type CliResult } from '../support/cli.js';
import { envFileOf, requireDocker } from '../support/cluster.js';
import { noteCluster } from '../support/leaks.js';
import { TcpProxy } from '../support/proxy.js';
import { etcdAuthArgs, issueEtcdCertificates, localProcessEnv, localStoreOptions, provisionLocalUsers } from '../../src/supervise/local-credentials.js';
import { eventually, sleep } from '../support/wait.js';

const SHM = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();
/** Processes of chaos runs, "pid" per line: a run that was killed halfway leaves them behind. */
const PID_FILE = join(tmpdir(), 'jaco-chaos-pids.txt');
/** Every process a chaos run starts carries this in its environment or command line. */
const MARK = 'jaco-chaos';
const execFileP = promisify(execFile);

/** Ends the processes an earlier, aborted chaos run left (only those carrying the chaos mark). */
export function endLeftovers(): number {
  if (!existsSync(PID_FILE)) return 0;
  let ended = 0;
  for (const pid of new Set(readFileSync(PID_FILE, 'utf8').split('\n').filter(Boolean).map(Number))) {
    let ours = false;
    try {
      ours = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(MARK) || readFileSync(`/proc/${pid}/environ`, 'utf8').includes(`JACO_CHAOS=${MARK}`);
    } catch {
      continue; // gone
    }
    if (!ours) continue;
    try {
      process.kill(pid, 'SIGCONT');
      process.kill(pid, 'SIGKILL');
      ended++;
    } catch {
      // already gone
    }
  }
  rmSync(PID_FILE, { force: true });
  // Their etcd data too (chaos runs never overlap: they run under the heavy-suite lock).
  for (const d of readdirSync(SHM)) if (d.startsWith(`${MARK}-etcd-`)) rmSync(join(SHM, d), { recursive: true, force: true });
  return ended;
}

/** Every child of this process, ended with it however the test process goes (a timeout, a crash). */
const children = new Set<ChildProcess>();
let exitHook = false;

function notePid(child: ChildProcess): void {
  if (child.pid) appendFileSync(PID_FILE, `${child.pid}\n`);
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (!exitHook) {
    exitHook = true;
    process.once('exit', () => {
      for (const c of children) {
        try {
          c.kill('SIGCONT');
          c.kill('SIGKILL');
        } catch {
          // gone
        }
      }
    });
  }
}

/** Test-side etcd calls never hang the run: a member may be stopped or gone. */
export function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return withTimeout(p, ms, `${what}: no answer within ${ms} ms`);
}

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

async function ended(child: ChildProcess, signal: NodeJS.Signals): Promise<void> {
  if (!alive(child)) return;
  const exit = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGCONT'); // a stopped process cannot act on SIGTERM
  child.kill(signal);
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exit;
  clearTimeout(t);
}

const BREAKER = ['closed', 'open', 'half-open', 'isolated'];
const CHANNEL = ['idle', 'connecting', 'ready', 'transient-failure', 'shutdown'];

/**
 * The state etcd3 keeps per host of a client (its connection pool is not public API: read here for
 * diagnosis only): the circuit breaker, and the connectivity of each gRPC channel it holds.
 */
export function clientHosts(store: Store, etcd: EtcdNode[]): string {
  interface Host {
    host: string;
    faultHandling?: { state?: number };
    cachedServices: Record<string, { getChannel(): { getConnectivityState(connect: boolean): number } }>;
  }
  const hosts = (store.client as unknown as { pool?: { hosts?: Host[] } }).pool?.hosts ?? [];
  return hosts
    .map((h) => {
      const name = etcd.find((e) => h.host.endsWith(`:${e.spec.clientPort}`))?.spec.name ?? h.host;
      const state = h.faultHandling?.state;
      const channels = Object.entries(h.cachedServices).map(([svc, c]) => `${svc} ${CHANNEL[c.getChannel().getConnectivityState(false)] ?? '?'}`);
      return `${name} breaker ${state === undefined ? '?' : BREAKER[state]}${channels.length ? ` (${channels.join(', ')})` : ''}`;
    })
    .join(', ');
}

/** One etcd member: killed, paused, restarted on its data, or removed and added back empty. */
export class EtcdNode {
  member!: EtcdMember;
  stopped = false;
  constructor(
    public spec: EtcdMemberSpec,
    readonly logDir: string,
    /** In front of the member's peer port: the URL the other members dial (cut to isolate it). */
    readonly peerProxy: TcpProxy,
  ) {}

  get endpoint(): string {
    return `${this.spec.tls ? 'https' : 'http'}://127.0.0.1:${this.spec.clientPort}`;
  }

  /** The peer URL the cluster knows this member by (its proxy's). */
  get peerUrl(): string {
    return `http://127.0.0.1:${this.spec.advertisePeerPort ?? this.spec.peerPort}`;
  }

  get running(): boolean {
    return !!this.member && alive(this.member.process);
  }

  start(extra: string[] = []): void {
    this.member = startEtcdMember({ ...this.spec, logFile: join(this.logDir, `${this.spec.name}.log`), extraArgs: [...(this.spec.extraArgs ?? []), ...extra] });
    notePid(this.member.process);
    this.stopped = false;
  }

  signal(s: NodeJS.Signals): void {
    if (this.running) this.member.process.kill(s);
  }

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    if (this.member) await ended(this.member.process, signal);
  }
}

/** A jaco process (controller or agent) and its own proxies to the etcd members. */
export class Component {
  child?: ChildProcess;
  logFile: string;
  starts = 0;
  paused = false;
  constructor(
    readonly name: string,
    readonly args: string[],
    readonly proxies: TcpProxy[],
    logDir: string,
  ) {
    this.logFile = join(logDir, `${name}.log`);
  }

  get running(): boolean {
    return !!this.child && alive(this.child);
  }

  get pid(): number | undefined {
    return this.running ? this.child!.pid : undefined;
  }

  /** Its endpoints (its proxies), http or https as etcd serves. */
  scheme = 'http';

  get endpoints(): string {
    return this.proxies.map((p) => `${this.scheme}://127.0.0.1:${p.port}`).join(',');
  }

  cut(): void {
    for (const p of this.proxies) p.pause();
  }

  mend(): void {
    for (const p of this.proxies) p.resume();
  }

  signal(s: NodeJS.Signals): void {
    if (this.running) this.child!.kill(s);
  }

  /** The harness is ending this process (an exit now is not the process's own). */
  killing = false;

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.killing = true;
    if (this.child) await ended(this.child, signal);
    this.paused = false;
  }

  tail(lines = 30): string {
    try {
      return readFileSync(this.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }
}

export interface ChaosClusterOptions {
  nodes?: number;
  controllers?: number;
  timings?: 'fast' | 'production';
  /**
   * etcd serves clients over TLS with client certificates and authentication on, each process
   * under its own user (src/store/rbac.ts), made by `jaco up`'s code (default true).
   */
  tls?: boolean;
}

/** A snapshot of the store taken during the run (etcdctl snapshot save), and the revision it holds. */
export interface StoreSnapshot {
  file: string;
  revision: number;
  takenAt: number;
}

/** Whether a loopback connection's client end (local port `port`, dialled to `toPort`) belongs to process `pid`. */
export function connectionOf(pid: number, port: number, toPort: number): boolean {
  const hex = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length > 9 && f[1]!.endsWith(`:${hex(port)}`) && f[2]!.endsWith(`:${hex(toPort)}`)) inodes.add(f[9]!);
    }
  }
  if (!inodes.size) return false;
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m && inodes.has(m[1]!)) return true;
      } catch {
        // closed meanwhile
      }
    }
  } catch {
    // process gone
  }
  return false;
}

export class ChaosCluster {
  readonly logDir = mkdtempSync(join(tmpdir(), `${MARK}-logs-`));
  readonly etcd: EtcdNode[] = [];
  readonly controllers: Component[] = [];
  readonly agents: Component[] = [];
  readonly prefix = '/jaco/';
  /** The test's own view: straight to the members, never cut. */
  store!: Store;
  /**
   * The faults' own client (membership changes, lease revocations), apart from the checker's: a
   * member add or remove sent while the cluster has no leader can go unanswered for ever (seen on
   * this etcd, tests of 2026-11-25), and on the checker's client such a call, as a host's
   * half-open breaker trial, would hold every later read of that host behind it (until the call
   * deadline src/store added for it).
   */
  admin!: Store;
  docker!: Docker;
  uid = '';
  private proxies: TcpProxy[] = [];
  private initialCluster = '';
  /**
   * With TLS: the run's pki/ (CA, etcd's server certificate, the client certificate every process
   * presents) and credentials/ (one env file per etcd user), laid out as `jaco up`'s .jaco.
   */
  secureDir?: string;

  constructor(readonly opts: ChaosClusterOptions = {}) {}

  /** How a client of this etcd connects: TLS files and the root user (`user` 'none': TLS only, before auth is on). */
  private clientOptions(user: 'root' | 'none' = 'root'): StoreOptions {
    return this.secureDir ? localStoreOptions(this.secureDir, user === 'root' ? 'root.env' : false) : {};
  }

  get clientTls(): StoreOptions {
    return this.clientOptions();
  }

  /**
   * The connection environment of a jaco process (`component` undefined: the operator's CLI, as
   * root): the TLS files and the credentials of its own etcd user, picked from its command line as
   * the e2e fixture picks them (envFileOf).
   */
  credentials(component?: Component): Record<string, string> {
    return this.secureDir ? localProcessEnv(this.secureDir, component ? envFileOf(component.args) : 'root.env') : {};
  }

  /** etcdctl's connection flags for this etcd (TLS files, root user). */
  private etcdctlTls(): string[] {
    const o = this.clientOptions();
    return this.secureDir ? ['--cacert', o.caFile!, '--cert', o.certFile!, '--key', o.keyFile!, '--user', `${o.user}:${o.password}`] : [];
  }

  get timings(): 'fast' | 'production' {
    return this.opts.timings ?? 'fast';
  }

  get endpoints(): string[] {
    return this.etcd.map((e) => e.endpoint);
  }

  get components(): Component[] {
    return [...this.controllers, ...this.agents];
  }

  async start(): Promise<this> {
    const left = endLeftovers();
    if (left) console.warn(`ended ${left} process(es) left by an aborted chaos run`);
    this.docker = await requireDocker();
    if (this.opts.tls ?? true) this.secureDir = mkdtempSync(join(tmpdir(), `${MARK}-pki-`));
    const tls = this.secureDir ? issueEtcdCertificates(this.secureDir) : undefined;
    const n = 3;
    const specs: EtcdMemberSpec[] = [];
    const peerProxies: TcpProxy[] = [];
    for (let i = 0; i < n; i++) {
      const peerPort = await freePort();
      const proxy = new TcpProxy(peerPort);
      await proxy.start();
      this.proxies.push(proxy);
      peerProxies.push(proxy);
      specs.push({ name: `m${i}`, dataDir: mkdtempSync(join(SHM, `${MARK}-etcd-m${i}-`)), clientPort: await freePort(), peerPort, advertisePeerPort: proxy.port, ...(tls ? { tls, extraArgs: etcdAuthArgs(this.secureDir!) } : {}) });
    }
    this.initialCluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.advertisePeerPort}`).join(',');
    specs.forEach((s, i) => {
      const node = new EtcdNode({ ...s, initialCluster: this.initialCluster }, this.logDir, peerProxies[i]!);
      node.start();
      this.etcd.push(node);
    });
    await waitForEtcd(this.endpoints, 30_000, undefined, this.clientOptions('none'));
    const nodes = this.opts.nodes ?? 3;
    if (this.secureDir) await provisionLocalUsers(this.endpoints, this.secureDir, Array.from({ length: nodes }, (_, i) => `node-${i + 1}`));
    this.store = new Store({ endpoints: this.endpoints, prefix: this.prefix, ...this.clientTls });
    this.admin = new Store({ endpoints: this.endpoints, prefix: this.prefix, ...this.clientTls });
    this.uid = (await clusterInfo(this.store)).uid;
    noteCluster(this.uid);
    for (let i = 1; i <= nodes; i++) {
      const name = `node-${i}`;
      this.agents.push(await this.component(name, ['agent', '--node', name, '--capacity', 'cpu=2,memory=4Gi', '--metrics-addr', '127.0.0.1:0']));
    }
    for (let i = 1; i <= (this.opts.controllers ?? 2); i++) this.controllers.push(await this.component(`controllers-${i}`, ['controller', 'all', '--metrics-addr', '127.0.0.1:0']));
    await Promise.all(this.agents.map((a) => this.launch(a)));
    await Promise.all(this.agents.map((a) => this.waitReady(a.name)));
    for (const c of this.controllers) this.launch(c);
    await eventually(async () => (await this.store.countPrefix(keys.leaders('scheduler'))) === this.controllers.length, { what: 'every controller copy campaigning', timeoutMs: 30_000 });
    return this;
  }

  private async component(name: string, args: string[]): Promise<Component> {
    const proxies = await Promise.all(
      this.etcd.map(async (e) => {
        const p = new TcpProxy(e.spec.clientPort);
        await p.start();
        this.proxies.push(p);
        return p;
      }),
    );
    const c = new Component(name, args, proxies, this.logDir);
    if (this.secureDir) c.scheme = 'https';
    return c;
  }

  /** Starts (or starts again) a component's process. */
  launch(c: Component): void {
    const child = spawnLogged(process.execPath, [JACO_BIN, '--timings', this.timings, ...c.args], c.logFile, {
      env: { ...process.env, ...this.credentials(c), JACO_ENDPOINTS: c.endpoints, JACO_PREFIX: this.prefix, JACO_LOG_LEVEL: process.env.JACO_LOG_LEVEL ?? 'info', JACO_CHAOS: MARK },
    });
    notePid(child);
    c.child = child;
    c.starts++;
    c.paused = false;
    c.killing = false;
    // A process that ends on its own (a controller copy whose start found no etcd quorum exits 2)
    // leaves the run one copy short without a word: say so (run 3 of 2026-11-25 lost a copy so).
    child.once('exit', (code, signal) => {
      if (!c.killing && c.child === child && !this.stopping) this.onExit?.(c, code, signal);
    });
  }

  /** Called when a component's process exits without the harness ending it. */
  onExit?: (c: Component, code: number | null, signal: NodeJS.Signals | null) => void;

  async waitReady(node: string, timeoutMs = 30_000): Promise<void> {
    await eventually(async () => nodeReady((await bounded(this.store.get<Heartbeat>(keys.heartbeat(node)), 3000, 'heartbeat'))?.value), { what: `node ${node} Ready`, timeoutMs });
  }

  /** The component leading `controller` (the oldest election key), if one of ours. */
  async leaderOf(controller = 'scheduler'): Promise<Component | undefined> {
    const { kvs } = await bounded(this.store.listRaw(keys.leaders(controller)), 3000, 'leaders');
    const first = [...kvs].sort((a, b) => Number(a.create_revision) - Number(b.create_revision))[0];
    if (!first) return undefined;
    const pid = Number(first.value.toString().split('/')[1]);
    return this.controllers.find((c) => c.pid === pid);
  }

  /** A store straight to one member (for its status and member list). */
  private async onMember<T>(e: EtcdNode, fn: (s: Store) => Promise<T>): Promise<T> {
    const s = new Store({ endpoints: e.endpoint, dialTimeoutMs: 2000, ...this.clientTls });
    try {
      return await fn(s);
    } finally {
      s.close();
    }
  }

  async raftLeader(): Promise<EtcdNode | undefined> {
    for (const e of this.etcd) {
      if (!e.running || e.stopped) continue;
      try {
        const st = await this.onMember(e, (s) => bounded(s.client.maintenance.status(), 2000, 'status'));
        if (st.leader === st.header.member_id) return e;
      } catch {
        // not answering
      }
    }
    return undefined;
  }

  /**
   * What answers right now, for a streak of failed samples: each etcd member through a fresh
   * client (its raft view), Docker, and the checker's own etcd client — one call through it, and
   * each of its hosts' circuit breaker and gRPC channel. All members answering a fresh client
   * while the checker's client fails is a client stuck behind its breaker or its channel's back-off.
   */
  async probe(): Promise<string> {
    const members = await Promise.all(
      this.etcd.map(async (e) => {
        if (!e.running) return `${e.spec.name} down`;
        try {
          const st = await this.onMember(e, (s) => bounded(s.client.maintenance.status(), 2000, 'status'));
          return `${e.spec.name} ok${st.leader === st.header.member_id ? ' (raft leader)' : st.leader === '0' ? ' (no leader)' : ''}`;
        } catch (err) {
          return `${e.spec.name} no answer (${(err as Error).message.split('\n')[0]!.slice(0, 80)})`;
        }
      }),
    );
    const docker = await bounded(this.docker.ping(), 3000, 'docker ping').then(
      () => 'docker ok',
      (err: Error) => `docker: ${err.message.slice(0, 80)}`,
    );
    const own = await bounded(this.store.client.maintenance.status(), 3000, 'status').then(
      () => 'answers',
      (err: Error) => `fails (${err.message.split('\n')[0]!.slice(0, 80)})`,
    );
    return `${members.join(', ')}; ${docker}; checker's client ${own}: ${clientHosts(this.store, this.etcd)}`;
  }

  async restartEtcd(e: EtcdNode): Promise<void> {
    await e.kill('SIGKILL');
    e.start();
    await waitForEtcd([e.endpoint], 30_000, e.member.process, this.clientTls);
  }

  /**
   * A member restored from nothing: removed from the cluster, its data wiped, added back and
   * started empty (--initial-cluster-state existing); it catches up from the others.
   */
  async rejoinEtcd(e: EtcdNode): Promise<void> {
    const members = (await bounded(this.admin.client.cluster.memberList({}), 5000, 'member list')).members;
    const me = members.find((m) => m.name === e.spec.name || m.peerURLs.includes(e.peerUrl));
    if (!me) throw new Error(`member ${e.spec.name} is not in the member list`);
    // etcd refuses a reconfiguration while a member is still catching up (strict reconfig check).
    await eventually(
      async () => {
        await bounded(this.admin.client.cluster.memberRemove({ ID: me.ID }), 5000, 'member remove');
        return true;
      },
      { what: `member ${e.spec.name} removed`, timeoutMs: 30_000, intervalMs: 500 },
    );
    await e.kill('SIGKILL');
    rmSync(e.spec.dataDir, { recursive: true, force: true });
    const peer = e.peerUrl;
    // A removed member's peer URL can be added back once the removal is applied everywhere.
    await eventually(
      async () => {
        await bounded(this.admin.client.cluster.memberAdd({ peerURLs: [peer] }), 5000, 'member add');
        return true;
      },
      { what: `member ${e.spec.name} added back`, timeoutMs: 30_000, intervalMs: 500 },
    );
    const now = (await bounded(this.admin.client.cluster.memberList({}), 5000, 'member list')).members;
    const initial = now.map((m) => `${m.name || e.spec.name}=${m.peerURLs[0]}`).join(',');
    e.spec = { ...e.spec, initialCluster: initial };
    e.start(['--initial-cluster-state', 'existing']);
    await waitForEtcd([e.endpoint], 30_000, e.member.process, this.clientTls);
  }

  /** Snapshot directories, removed with the cluster. */
  private scratch: string[] = [];

  private etcdctl(args: string[], timeoutMs = 30_000): Promise<{ stdout: string }> {
    return execFileP('etcdctl', [...this.etcdctlTls(), ...args], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: timeoutMs });
  }

  /** A snapshot of the store (etcdctl snapshot save, from a member that answers), and its revision. */
  async saveSnapshot(): Promise<StoreSnapshot> {
    const dir = mkdtempSync(join(SHM, `${MARK}-etcd-snap-`));
    this.scratch.push(dir);
    const file = join(dir, 'snapshot.db');
    const from = (await this.raftLeader()) ?? this.etcd.find((e) => e.running);
    if (!from) throw new Error('no etcd member running to take a snapshot from');
    await this.etcdctl(['--endpoints', from.endpoint, 'snapshot', 'save', file]);
    const { stdout } = await this.etcdctl(['snapshot', 'status', file, '-w', 'json']);
    return { file, revision: Number((JSON.parse(stdout) as { revision: number }).revision), takenAt: Date.now() };
  }

  /**
   * Every member restored from one snapshot, as docs/store.md's procedure says: all stopped, each
   * restored into a new data directory under a new cluster token (a new cluster id), started
   * again. The components are not touched: they keep running and reconnect.
   */
  async restoreAll(snap: StoreSnapshot): Promise<void> {
    await Promise.all(this.etcd.map((e) => e.kill('SIGTERM')));
    const token = `jaco-chaos-restore-${Date.now()}`;
    const cluster = this.etcd.map((e) => `${e.spec.name}=${e.peerUrl}`).join(',');
    for (const e of this.etcd) {
      const dataDir = join(SHM, `${MARK}-etcd-${e.spec.name}-restored-${Date.now()}`);
      await this.etcdctl(['snapshot', 'restore', snap.file, '--data-dir', dataDir, '--name', e.spec.name, '--initial-cluster', cluster, '--initial-cluster-token', token, '--initial-advertise-peer-urls', e.peerUrl]);
      rmSync(e.spec.dataDir, { recursive: true, force: true });
      e.spec = { ...e.spec, dataDir, initialCluster: cluster };
    }
    for (const e of this.etcd) e.start();
    // Every member answering, and one of them leading: the cluster is whole again.
    await Promise.all(this.etcd.map((e) => waitForEtcd([e.endpoint], 30_000, e.member.process, this.clientTls)));
    await eventually(async () => !!(await this.raftLeader()), { what: 'a raft leader after the restore', timeoutMs: 30_000, intervalMs: 200 });
  }

  /** What one member says of raft: its id and the leader it knows ('0': none). */
  async raftView(e: EtcdNode): Promise<string> {
    try {
      const st = await this.onMember(e, (s) => bounded(s.client.maintenance.status(), 2000, 'status'));
      return st.leader === '0' ? 'no leader' : st.leader === st.header.member_id ? 'leads' : 'follows';
    } catch (err) {
      return `no answer (${(err as Error).message.split('\n')[0]!.slice(0, 60)})`;
    }
  }

  /**
   * One member cut from its peers, both ways: its peer proxy refuses everyone, and the others'
   * refuse the connections it dials (found by the owning process). Its clients still reach it.
   */
  isolateEtcd(e: EtcdNode): void {
    const pid = e.member.process.pid!;
    e.peerProxy.pause();
    for (const o of this.etcd) if (o !== e) o.peerProxy.refuseFrom((client: Socket) => connectionOf(pid, client.remotePort!, o.peerProxy.port));
  }

  healEtcd(e: EtcdNode): void {
    e.peerProxy.resume();
    for (const o of this.etcd) o.peerProxy.refuseFrom(undefined);
  }

  /** A client straight to the given members only (the caller closes it). */
  storeOn(members: EtcdNode[]): Store {
    return new Store({ endpoints: members.map((m) => m.endpoint), dialTimeoutMs: 2000, ...this.clientTls });
  }

  /** Revokes every lease in etcd at once (what a snapshot restore or an operator's mistake does). */
  async revokeAllLeases(): Promise<number> {
    const { leases } = await bounded(this.admin.client.leaseClient.leaseLeases(), 5000, 'lease list');
    await Promise.all(leases.map((l) => bounded(this.admin.client.leaseClient.leaseRevoke({ ID: l.ID }), 5000, 'revoke').catch(() => undefined)));
    return leases.length;
  }

  /** `jaco` as an operator runs it, straight to the members. */
  jaco(args: string[], input?: string, timeoutMs = 30_000): Promise<CliResult> {
    return jaco(['--timings', this.timings, ...args], { endpoint: this.endpoints.join(','), prefix: this.prefix, input, timeoutMs, env: this.credentials() });
  }

  /** Running containers of this cluster. */
  async containers(): Promise<Docker.ContainerInfo[]> {
    return bounded(this.docker.listContainers({ all: false, filters: { label: [`${LABELS.cluster}=${this.uid}`] } }), 10_000, 'docker ps');
  }

  logs(lines = 25): string {
    return this.components.map((c) => `---- ${c.name} (${c.logFile})\n${c.tail(lines)}`).join('\n');
  }

  private stopping?: Promise<void>;

  get isStopping(): boolean {
    return !!this.stopping;
  }

  /** Ends every process, proxy and container of the cluster; safe to call twice. Logs are kept only when asked (a failed run). */
  stop(opts: { keepLogs?: boolean } = {}): Promise<void> {
    this.stopping ??= this.stopNow(!!opts.keepLogs);
    return this.stopping;
  }

  private async stopNow(keepLogs: boolean): Promise<void> {
    await Promise.all(this.components.map((c) => c.kill('SIGTERM')));
    for (const p of this.proxies) await p.close().catch(() => undefined);
    this.store?.close();
    this.admin?.close();
    if (this.docker && this.uid) {
      const list = await this.docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${this.uid}`] } }).catch(() => []);
      await Promise.all(list.map((c) => this.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    }
    await Promise.all(this.etcd.map((e) => e.kill('SIGTERM')));
    for (const e of this.etcd) rmSync(e.spec.dataDir, { recursive: true, force: true });
    if (this.secureDir) rmSync(this.secureDir, { recursive: true, force: true });
    for (const d of this.scratch) rmSync(d, { recursive: true, force: true });
    if (!keepLogs) rmSync(this.logDir, { recursive: true, force: true });
    else console.warn(`chaos logs kept in ${this.logDir}`);
    await sleep(0);
  }
}
