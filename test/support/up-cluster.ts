// A local cluster of separate hosts started the way an operator starts one: `jaco up` (fast
// timings) on a throwaway data directory and free ports, each node its own network namespace and
// Docker engine. stop() is `jaco down --purge`; the e2e global teardown purges any the run left.
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { Heartbeat } from '../../src/api/types.js';
import { freePort } from '../../src/supervise/etcd.js';
import { enginesOf, readUpState, type UpState } from '../../src/supervise/local-cluster.js';
import { cutLink, restoreLink, type LocalNode } from '../../src/supervise/local-network.js';
import { localProcessEnv, localStoreOptions } from '../../src/supervise/local-credentials.js';
import { Store } from '../../src/store/store.js';
import { jaco, type CliResult } from './cli.js';
import { note, takeNotes } from './leaks.js';
import { failureWithLogs } from './log.js';

/** Notes a data directory holding an up.json, so an interrupted run's cluster is purged (`jaco down --purge`) by the next. */
export const noteUpDir = (dir: string) => note('up-dirs', dir);

export class UpCluster {
  readonly dataDir = mkdtempSync(join(tmpdir(), 'jaco-up-'));
  state!: UpState;
  store!: Store;
  endpoint = '';

  constructor(readonly opts: { nodes?: number; extraArgs?: string[]; timings?: 'fast' | 'production' } = {}) {}

  /** `jaco up`'s arguments, kept for up() after a `jaco down` of the same data directory. */
  private upArgs: string[] = [];

  async start(): Promise<this> {
    noteUpDir(this.dataDir);
    const etcdPort = await freePort();
    this.upArgs = ['up', '--nodes', String(this.opts.nodes ?? 3), '--detach', '--data-dir', this.dataDir, '--etcd-port', String(etcdPort), '--metrics-port', String(await freePort()), '--dashboard-port', '0', ...(this.opts.extraArgs ?? [])];
    return this.up();
  }

  /** `jaco up` (again, after a `jaco down` without --purge: the same store, engines and ports). */
  async up(): Promise<this> {
    this.store?.close();
    this.endpoint = '';
    const r = await this.jaco(this.upArgs, undefined, 180_000);
    if (r.code !== 0) throw new Error(`jaco up failed (${r.code}): ${r.stderr}\n${this.logs()}`);
    this.state = readUpState(this.dataDir)!;
    this.endpoint = this.state.endpoint;
    // TLS and authentication on, as production: the store and the CLI of this test act as its root user.
    this.store = new Store({ endpoints: this.endpoint, ...localStoreOptions(this.dataDir) });
    return this;
  }

  get net() {
    return this.state.network!;
  }

  node(name: string): LocalNode {
    return this.net.nodes.find((n) => n.name === name)!;
  }

  /** A dockerode client of node `name`'s own engine. */
  engine(name: string): Docker {
    const spec = enginesOf(this.dataDir, this.state).find((e) => e.node === name)!;
    return new Docker({ socketPath: spec.socket });
  }

  jaco(args: string[], input?: string, timeoutMs?: number, env?: Record<string, string>): Promise<CliResult> {
    return jaco(['--timings', this.opts.timings ?? 'fast', ...args], { ...(this.endpoint ? { endpoint: this.endpoint } : {}), input, timeoutMs, env: { ...(this.endpoint ? localProcessEnv(this.dataDir, 'root.env') : {}), ...env } });
  }

  async apply(yaml: string): Promise<string> {
    const r = await this.jaco(['apply', '-f', '-'], yaml, 120_000);
    if (r.code !== 0) throw new Error(`apply failed (${r.code}): ${r.stderr}`);
    return r.stdout;
  }

  async ready(node: string): Promise<boolean> {
    return nodeReady((await this.store.get<Heartbeat>(keys.heartbeat(node)))?.value);
  }

  cut(node: string): Promise<void> {
    return cutLink(this.net, node);
  }

  restore(node: string): Promise<void> {
    return restoreLink(this.net, node);
  }

  /** Tails of the cluster's logs (each child's, and the supervisor's). */
  logs(lines = 30): string {
    const dir = join(this.dataDir, 'logs');
    if (!existsSync(dir)) return '';
    const names = ['up', 'controllers', ...(this.state?.children.map((c) => c.log.slice(dir.length + 1, -'.log'.length)) ?? [])];
    return [...new Set(names)]
      .map((n) => {
        try {
          return `---- ${n}\n${readFileSync(join(dir, `${n}.log`), 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`;
        } catch {
          return '';
        }
      })
      .join('\n');
  }

  async withLogs<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      // The whole logs outlive the cluster's purge, for reading beside the failure's times.
      const kept = join(tmpdir(), `jaco-up-logs-${Date.now()}`);
      try {
        cpSync(join(this.dataDir, 'logs'), kept, { recursive: true });
        // And each node's wireguard-go log (beside its agent's state, not under logs/).
        for (const n of this.state?.network?.nodes ?? []) {
          const wg = join(this.dataDir, 'nodes', n.name, 'agent', 'wireguard-go.log');
          if (existsSync(wg)) cpSync(wg, join(kept, `wireguard-go-${n.name}.log`));
        }
      } catch {
        /* no logs yet */
      }
      throw failureWithLogs(e, `(whole logs kept in ${kept})\n${this.logs()}`);
    }
  }

  async stop(): Promise<void> {
    this.store?.close();
    // Purged, the cluster also takes its registry's image names off this machine's engine.
    await jaco(['down', '--purge', '--data-dir', this.dataDir], { timeoutMs: 120_000 });
    rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** `jaco down --purge` of every cluster a finished test process started and did not stop (an interrupted run). */
export async function purgeNotedUpClusters(): Promise<number> {
  const dirs = takeNotes('up-dirs').filter((d) => existsSync(d));
  for (const d of dirs) await jaco(['down', '--purge', '--data-dir', d], { timeoutMs: 120_000 });
  return dirs.length;
}
