// The local cluster of `jaco up`: an embedded single-member etcd under .jaco/, one process
// running every controller, and N simulated node-agents sharing the local Docker engine. A
// supervisor process owns them all, restarts a child that dies, and on SIGTERM (jaco down) stops
// them, removes the cluster's containers and stops etcd. State is in .jaco/up.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LABELS } from '../api/labels.js';
import { keys } from '../api/keys.js';
import { nodeReady } from '../api/nodes.js';
import type { Heartbeat } from '../api/types.js';
import type { Logger } from '../observability/log.js';
import { PACKAGE_ROOT } from '../paths.js';
import { clusterInfo } from '../store/cluster.js';
import { Store } from '../store/store.js';
import type { Timings } from '../timings.js';
import { dockerode } from './dockerode.js';
import { portInUse, startEtcdMember, waitForEtcd, type EtcdMember } from './etcd.js';

export interface UpOptions {
  dataDir: string;
  nodes: number;
  capacity: string;
  timings: Timings;
  etcdPort: number;
  metricsPort: number;
  /** Start node-agents (false until the agent command exists). */
  withAgents: boolean;
  /** Start one ingress (HAProxy) per simulated node, beside its agent. */
  withIngress?: boolean;
  controllers: string[];
  /** Start `jaco dashboard` on 127.0.0.1 at this port, or the next free one (0: no dashboard). */
  dashboardPort?: number;
}

export interface ChildInfo {
  name: string;
  pid?: number;
  metrics: string;
  log: string;
}

export interface UpState {
  supervisorPid: number;
  endpoint: string;
  etcdPid?: number;
  clusterUid?: string;
  nodes: string[];
  children: ChildInfo[];
  timings: string;
  ready: boolean;
  startedAt: string;
  /** The dashboard's URL, when one was started. */
  dashboard?: string;
  error?: string;
}

export const stateFile = (dataDir: string) => join(dataDir, 'up.json');

export function readUpState(dataDir: string): UpState | undefined {
  const f = stateFile(dataDir);
  if (!existsSync(f)) return undefined;
  try {
    return JSON.parse(readFileSync(f, 'utf8')) as UpState;
  } catch {
    return undefined;
  }
}

export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const jacoBin = () => join(PACKAGE_ROOT, 'bin', 'jaco');

interface Supervised {
  info: ChildInfo;
  args: string[];
  proc?: ChildProcess;
  restarts: number;
}

/** Runs the local cluster in this process until `stop()`; writes up.json as it goes. */
export class LocalCluster {
  private etcd?: EtcdMember;
  private children: Supervised[] = [];
  private stopping = false;
  private state: UpState;
  readonly endpoint: string;

  constructor(private readonly opts: UpOptions, private readonly log: Logger) {
    this.endpoint = `http://127.0.0.1:${opts.etcdPort}`;
    this.state = {
      supervisorPid: process.pid,
      endpoint: this.endpoint,
      nodes: [],
      children: [],
      timings: opts.timings.name,
      ready: false,
      startedAt: new Date().toISOString(),
    };
  }

  private save(): void {
    this.state.children = this.children.map((c) => c.info);
    writeFileSync(stateFile(this.opts.dataDir), JSON.stringify(this.state, null, 2));
  }

  async start(): Promise<void> {
    const { dataDir } = this.opts;
    mkdirSync(join(dataDir, 'logs'), { recursive: true });
    this.save();
    if (await portInUse(this.opts.etcdPort))
      throw new Error(`port ${this.opts.etcdPort} is in use: is a cluster already up (jaco down), or another etcd running? Choose another with --etcd-port.`);
    this.etcd = startEtcdMember(
      {
        name: 'jaco',
        dataDir: join(dataDir, 'etcd'),
        clientPort: this.opts.etcdPort,
        peerPort: this.opts.etcdPort + 1,
        logFile: join(dataDir, 'logs', 'etcd.log'),
        extraArgs: ['--auto-compaction-mode', 'periodic', '--auto-compaction-retention', '1h'],
      },
      {},
    );
    this.state.etcdPid = this.etcd.process.pid;
    this.save();
    await waitForEtcd([this.endpoint], 30_000, this.etcd.process);
    const store = new Store({ endpoints: this.endpoint });
    try {
      this.state.clusterUid = (await clusterInfo(store)).uid;
    } finally {
      store.close();
    }
    let port = this.opts.metricsPort;
    const nextMetrics = async () => {
      while (await portInUse(port)) port++;
      return `127.0.0.1:${port++}`;
    };
    if (this.opts.controllers.length) {
      const metrics = await nextMetrics();
      this.children.push({ info: { name: 'controllers', metrics, log: join(dataDir, 'logs', 'controllers.log') }, args: ['controller', 'all', '--metrics-addr', metrics], restarts: 0 });
    }
    if (this.opts.withAgents)
      for (let i = 1; i <= this.opts.nodes; i++) {
        const node = `node-${i}`;
        const metrics = await nextMetrics();
        this.state.nodes.push(node);
        this.children.push({
          info: { name: node, metrics, log: join(dataDir, 'logs', `${node}.log`) },
          // Each simulated node its own loopback address (all of 127/8 is loopback on Linux).
          args: ['agent', '--node', node, '--capacity', this.opts.capacity, '--metrics-addr', metrics, '--address', simulatedAddress(i), '--pressure', 'containers'],
          restarts: 0,
        });
        if (this.opts.withIngress) {
          const im = await nextMetrics();
          this.children.push({
            info: { name: `ingress-${i}`, metrics: im, log: join(dataDir, 'logs', `ingress-${node}.log`) },
            args: ['ingress', '--node', node, '--data-dir', join(dataDir, 'ingress'), '--metrics-addr', im],
            restarts: 0,
          });
        }
      }
    if (this.opts.dashboardPort) {
      let dp = this.opts.dashboardPort;
      while (await portInUse(dp)) dp++;
      this.state.dashboard = `http://127.0.0.1:${dp}/`;
      this.children.push({ info: { name: 'dashboard', metrics: `127.0.0.1:${dp}`, log: join(dataDir, 'logs', 'dashboard.log') }, args: ['dashboard', '--addr', `127.0.0.1:${dp}`], restarts: 0 });
    }
    for (const c of this.children) this.spawnChild(c);
    this.save();
    await this.waitReady(60_000);
    this.state.ready = true;
    this.save();
  }

  private spawnChild(c: Supervised): void {
    const out = createWriteStream(c.info.log, { flags: 'a' });
    const proc = spawn(process.execPath, [jacoBin(), ...c.args], {
      env: { ...process.env, JACO_ENDPOINTS: this.endpoint, JACO_TIMINGS: this.opts.timings.name, JACO_PREFIX: process.env.JACO_PREFIX ?? '/jaco/' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    proc.stdout.pipe(out);
    proc.stderr.pipe(out);
    c.proc = proc;
    c.info.pid = proc.pid;
    proc.once('exit', (code, signal) => {
      if (this.stopping) return;
      // Exit 0 is a decision (an agent whose node was removed), not a crash: leave it down.
      if (code === 0) {
        this.log.info({ child: c.info.name }, 'child exited cleanly; not restarting it');
        c.info.pid = undefined;
        this.save();
        return;
      }
      c.restarts++;
      const delay = Math.min(1000 * c.restarts, 10_000);
      this.log.warn({ child: c.info.name, code, signal, restartInMs: delay }, 'child exited; restarting it');
      setTimeout(() => {
        if (!this.stopping) {
          this.spawnChild(c);
          this.save();
        }
      }, delay);
    });
  }

  private async waitReady(timeoutMs: number): Promise<void> {
    const store = new Store({ endpoints: this.endpoint });
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        const now = Date.now();
        const hbs = await store.list<Heartbeat>(keys.heartbeats());
        const ready = new Set(hbs.items.filter((h) => nodeReady(h.value, now)).map((h) => h.value.spec.node));
        const leaders = await Promise.all(this.opts.controllers.map((c) => store.countPrefix(keys.leaders(c))));
        const nodesOk = this.state.nodes.every((n) => ready.has(n));
        const leadersOk = leaders.every((n) => n > 0);
        if (nodesOk && leadersOk) return;
        if (now > deadline) {
          const missing = [...this.state.nodes.filter((n) => !ready.has(n)), ...this.opts.controllers.filter((_, i) => !leaders[i])];
          throw new Error(`the cluster was not ready within ${timeoutMs / 1000}s; not ready: ${missing.join(', ')} (see ${join(this.opts.dataDir, 'logs')})`);
        }
        await new Promise((r) => setTimeout(r, 250));
      }
    } finally {
      store.close();
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.children.map(
        (c) =>
          new Promise<void>((resolveStop) => {
            const p = c.proc;
            if (!p || p.exitCode !== null || p.signalCode !== null) return resolveStop();
            const t = setTimeout(() => p.kill('SIGKILL'), 15_000);
            p.once('exit', () => {
              clearTimeout(t);
              resolveStop();
            });
            p.kill('SIGTERM');
          }),
      ),
    );
    if (this.state.clusterUid) await removeClusterContainers(this.state.clusterUid, this.log);
    await this.etcd?.stop();
    rmSync(stateFile(this.opts.dataDir), { force: true });
  }
}

/** Removes every container labelled with the cluster uid (the local cluster's workloads). */
export async function removeClusterContainers(uid: string, log: Logger): Promise<number> {
  const docker = new (dockerode())();
  try {
    const list = await docker.listContainers({ all: true, filters: { label: [`${LABELS.cluster}=${uid}`] } });
    await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    return list.length;
  } catch (e) {
    log.warn({ err: (e as Error).message }, 'could not remove the cluster containers (is Docker running?)');
    return 0;
  }
}

/** The address of simulated node i (1-based): 127.0.1.i, then 127.0.2.x past 254 nodes. */
export function simulatedAddress(i: number): string {
  return `127.0.${1 + Math.floor((i - 1) / 254)}.${((i - 1) % 254) + 1}`;
}

/** Whether an haproxy binary is on PATH (or named by JACO_HAPROXY): `jaco up` then starts the ingresses. */
export function haproxyAvailable(): boolean {
  const bin = process.env.JACO_HAPROXY;
  if (bin) return existsSync(bin);
  return (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, 'haproxy')));
}

export function resolveDataDir(d: string): string {
  return resolve(d);
}
