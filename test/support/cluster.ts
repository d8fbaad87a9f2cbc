// End-to-end test clusters: a real etcd, real `jaco controller` and `jaco agent` processes (fast
// timings) and the real local Docker engine. Each cluster has its own etcd and cluster uid, so its
// containers are labelled apart from any other cluster's; stop() removes them all.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { spawnLogged } from '../../src/child.js';
import { nodeReady } from '../../src/api/nodes.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { Heartbeat, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { credentialsDir } from '../../src/supervise/local-credentials.js';
import { clusterInfo } from '../../src/store/cluster.js';
import type { Store } from '../../src/store/store.js';
import { jaco, JACO_BIN, type CliResult } from './cli.js';
import { startTestEtcd, type TestEtcd } from './etcd.js';
import { noteCluster, releaseStateDirs } from './leaks.js';
import { failureWithLogs } from './log.js';
import { ensureClusterKeyFile } from '../../src/secrets/keyfile.js';
import { eventually } from './wait.js';

export interface Proc {
  name: string;
  args: string[];
  /** The jaco it runs (TestCluster.bin when it started). */
  bin: string;
  child: ChildProcess;
  logFile: string;
  /** Its exit code (null when a signal ended it), once it has exited (all it printed is then in logFile). */
  done: Promise<number | null>;
  /** Sends a signal and waits for the exit. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  exited(): boolean;
}

export interface ClusterOptions {
  nodes?: number;
  capacity?: string;
  /** Controllers to run in one process ('all'), a list, or none (false). */
  controllers?: 'all' | string[] | false;
  timings?: 'fast' | 'production';
  /**
   * etcd over TLS with authentication, each process under its own user (default true), as `jaco
   * up` and production run it. false: plaintext and no users, as a release before them ran (the
   * upgrade test).
   */
  secure?: boolean;
}

/**
 * The etcd user a jaco process runs as, by its command line, as `jaco up` gives each its own
 * (src/store/rbac.ts): an agent or ingress its node's, a controller process its controller's (or
 * every controller's for `all`), the dashboard the viewer's unless it may act; anything else (the
 * operator's CLI, hollow nodes: many nodes in one process) root.
 */
export function envFileOf(args: readonly string[]): string {
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const node = flag('--node');
  switch (args[0]) {
    case 'agent':
      return node ? `agent-${node}.env` : 'root.env';
    case 'ingress':
      return node ? `ingress-${node}.env` : 'root.env';
    case 'controller':
      return args[1] === 'all' || !args[1] ? 'controller.env' : `controller-${args[1]}.env`;
    case 'dashboard':
      return args.includes('--allow-actions') ? 'root.env' : 'viewer.env';
    default:
      return 'root.env';
  }
}

/** Throws (never skips) when the Docker engine does not answer. */
export async function requireDocker(): Promise<Docker> {
  const docker = new Docker();
  try {
    await docker.ping();
  } catch (e) {
    throw new Error(`Docker is not reachable at /var/run/docker.sock (${(e as Error).message}); make test starts dockerd with scripts/ensure-system.sh`);
  }
  return docker;
}

export class TestCluster {
  readonly procs: Proc[] = [];
  readonly logDir = mkdtempSync(join(tmpdir(), 'jaco-e2e-'));
  uid = '';
  store!: Store;
  docker!: Docker;
  etcd!: TestEtcd;
  readonly prefix = '/jaco/';
  /** The cluster key file the controllers are given (--secrets-key-file). */
  readonly keyFile = join(this.logDir, 'secrets.key');
  /** The jaco the next process starts from (the upgrade test starts an older build's first). */
  bin = JACO_BIN;

  constructor(readonly opts: ClusterOptions = {}) {}

  /** A node's agent state directory (its key, its containers' secrets' tmpfs). */
  stateDir(node: string): string {
    return join(this.logDir, 'state', node);
  }

  get endpoint(): string {
    return this.etcd.endpoint;
  }

  get timings(): string {
    return this.opts.timings ?? 'fast';
  }

  async start(): Promise<this> {
    this.docker = await requireDocker();
    const n = this.opts.nodes ?? 3;
    this.etcd = await startTestEtcd(this.opts.secure === false ? {} : { secure: { nodes: Array.from({ length: n }, (_, i) => `node-${i + 1}`) } });
    this.store = this.etcd.store(this.prefix);
    this.uid = (await clusterInfo(this.store)).uid;
    noteCluster(this.uid, join(this.logDir, 'state'));
    await Promise.all(Array.from({ length: n }, (_, i) => this.startAgent(`node-${i + 1}`)));
    if (this.opts.controllers !== false) await this.startControllers(this.opts.controllers ?? 'all');
    return this;
  }

  /**
   * The connection environment of a jaco process under the etcd user of `envFile` (root.env,
   * agent-node-1.env…; envFileOf picks it from a command line): etcd's endpoint, the cluster's
   * prefix, the TLS files and the user's credentials.
   */
  env(envFile = 'root.env'): Record<string, string> {
    return { JACO_ENDPOINTS: this.endpoint, JACO_PREFIX: this.prefix, ...this.etcd.env?.(envFile) };
  }

  /** etcdctl's environment for this cluster's etcd (its endpoint, TLS files and root user). */
  etcdctlEnv(): Record<string, string> {
    const a = this.etcd.etcdctlArgs?.() ?? [];
    const flag = (name: string) => a[a.indexOf(name) + 1]!;
    return { ETCDCTL_API: '3', ETCDCTL_ENDPOINTS: this.endpoint, ...(a.length ? { ETCDCTL_CACERT: flag('--cacert'), ETCDCTL_CERT: flag('--cert'), ETCDCTL_KEY: flag('--key'), ETCDCTL_USER: flag('--user') } : {}) };
  }

  /**
   * Starts `jaco ARGS` as a process of the cluster, under its own etcd user (envFileOf); a node
   * first seen here gets its users. A previous release's build (the upgrade test) runs as root: it
   * predates the per-process users.
   */
  spawn(name: string, args: string[]): Proc {
    const logFile = join(this.logDir, `${name}.log`);
    const envFile = this.bin === JACO_BIN ? envFileOf(args) : 'root.env';
    const secure = this.etcd.secureDir;
    if (secure && !existsSync(join(credentialsDir(secure), envFile))) throw new Error(`${name}: no etcd user of ${envFile} yet — a node joining later needs \`await cluster.etcd.addNodes([node])\` first (startAgent does it)`);
    const child = spawnLogged(process.execPath, [this.bin, '--timings', this.timings, ...args], logFile, {
      env: { ...process.env, ...this.env(envFile), JACO_LOG_LEVEL: process.env.JACO_LOG_LEVEL ?? 'debug' },
    });
    const done = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const proc: Proc = {
      name,
      args,
      bin: this.bin,
      child,
      logFile,
      done,
      exited: () => child.exitCode !== null || child.signalCode !== null,
      async kill(signal: NodeJS.Signals = 'SIGTERM') {
        if (proc.exited()) return;
        child.kill(signal);
        const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await done;
        clearTimeout(t);
      },
    };
    this.procs.push(proc);
    return proc;
  }

  /** Starts `jaco agent --node NAME` and waits until its node is Ready. */
  async startAgent(node: string, extra: string[] = []): Promise<Proc> {
    const state = extra.includes('--state-dir') ? [] : ['--state-dir', this.stateDir(node)];
    await this.etcd.addNodes?.([node]);
    const p = this.spawn(node, ['agent', '--node', node, '--capacity', this.opts.capacity ?? 'cpu=1,memory=2Gi', '--metrics-addr', '127.0.0.1:0', '--pressure', 'containers', ...state, ...extra]);
    await eventually(async () => nodeReady((await this.store.get<Heartbeat>(keys.heartbeat(node)))?.value) || (p.exited() ? Promise.reject(new Error(`agent ${node} exited:\n${this.tail(p)}`)) : false), {
      what: `node ${node} Ready`,
      timeoutMs: 30_000,
    });
    return p;
  }

  agent(node: string): Proc | undefined {
    return [...this.procs].reverse().find((p) => p.name === node && !p.exited());
  }

  /** Starts one `jaco controller` process and waits until each of its controllers has a candidate. */
  async startControllers(which: 'all' | string[] = 'all', name = `controllers-${this.procs.filter((p) => p.name.startsWith('controllers')).length + 1}`): Promise<Proc> {
    // Made here, not in start(): a subclass's start (HollowCluster's) runs controllers too.
    ensureClusterKeyFile(this.keyFile);
    const list = which === 'all' ? ['all'] : which;
    const procs = list.map((c, i) => this.spawn(list.length > 1 ? `${name}-${i}` : name, ['controller', c, '--metrics-addr', '127.0.0.1:0', '--secrets-key-file', this.keyFile]));
    await eventually(async () => {
      for (const p of procs) if (p.exited()) throw new Error(`${p.name} exited:\n${this.tail(p)}`);
      return (await this.store.countPrefix('leaders/')) > 0;
    }, { what: 'a controller campaigning', timeoutMs: 30_000 });
    return procs[0]!;
  }

  jaco(args: string[], input?: string): Promise<CliResult> {
    return jaco(['--timings', this.timings, ...args], { endpoint: this.endpoint, prefix: this.prefix, input, env: this.etcd.env?.() ?? {} });
  }

  /** Applies a manifest given as YAML text. */
  async apply(yaml: string): Promise<string> {
    const r = await this.jaco(['apply', '-f', '-'], yaml);
    if (r.code !== 0) throw new Error(`apply failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  }

  async desired(): Promise<ReplicaDesired[]> {
    return (await this.store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value);
  }

  async observed(): Promise<ReplicaObserved[]> {
    return (await this.store.list<ReplicaObserved>(keys.observedOf())).items.map((i) => i.value);
  }

  /** Replicas of a deployment (by desired key) without any running copy, as etcd's observed state says. */
  async replicasNotRunning(deployment: string): Promise<string[]> {
    const [desired, observed] = await Promise.all([this.store.list<ReplicaDesired>(keys.desiredOf()), this.store.list<ReplicaObserved>(keys.observedOf())]);
    const obs = new Map(observed.items.map((o) => [o.key.slice('observed/'.length), o.value]));
    const running = new Map<string, boolean>();
    for (const { value: d } of desired.items) {
      if (d.spec.deployment !== deployment) continue;
      running.set(d.spec.replica, (running.get(d.spec.replica) ?? false) || replicaRunning(obs.get(`${d.spec.node}/${d.spec.replica}`)));
    }
    return [...running].filter(([, r]) => !r).map(([id]) => id);
  }

  /** Containers of this cluster, optionally on one simulated node. */
  async containers(node?: string): Promise<Docker.ContainerInfo[]> {
    const label = [`${LABELS.cluster}=${this.uid}`, ...(node ? [`${LABELS.node}=${node}`] : [])];
    return this.docker.listContainers({ all: true, filters: { label } });
  }

  tail(p: Proc, lines = 40): string {
    try {
      return readFileSync(p.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    } catch {
      return '';
    }
  }

  /** Runs a test body; a failure carries the tail of every process log, so it says what they did. */
  async withLogs<T>(fn: () => Promise<T>, lines = 50): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${this.logs(lines)}`);
    }
  }

  /** Log tails of every process: print them when a test fails. */
  logs(lines = 30): string {
    return this.procs.map((p) => `---- ${p.name} (${p.logFile})\n${this.tail(p, lines)}`).join('\n');
  }

  async stop(): Promise<void> {
    await Promise.all(this.procs.map((p) => p.kill('SIGTERM')));
    if (this.docker && this.uid) {
      const list = await this.docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${this.uid}`] } });
      await Promise.all(list.map((c) => this.docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    }
    // The tmpfs of their secrets go with them.
    await releaseStateDirs(join(this.logDir, 'state'));
    await this.etcd?.stop();
  }
}

/** Starts a cluster (a TestCluster, or a subclass's instance); a failed start stops it and carries its logs. */
export async function startCluster<C extends TestCluster = TestCluster>(opts: ClusterOptions = {}, c: C = new TestCluster(opts) as C): Promise<C> {
  try {
    return await c.start();
  } catch (e) {
    const logs = c.logs();
    await c.stop().catch(() => undefined);
    throw failureWithLogs(e, logs);
  }
}

/**
 * Samples a value every intervalMs until stopped: for invariants that must hold throughout
 * (e.g. "never more than one replica not running").
 */
export function sampler<T>(fn: () => Promise<T>, intervalMs = 100): { stop(): Promise<T[]> } {
  const samples: T[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        samples.push(await fn());
      } catch {
        // a failed read is not a sample
      }
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}
