// Hollow clusters for the scale test and benchmark: a real etcd, real `jaco controller all` and
// `jaco hollow-nodes` processes (no Docker), and the census every scale scenario asserts with —
// all replicas running, none on two nodes.
import { readFileSync } from 'node:fs';
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import type { Heartbeat, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { clusterInfo } from '../../src/store/cluster.js';
import { Store } from '../../src/store/store.js';
import { startCluster, TestCluster, type ClusterOptions, type Proc } from './cluster.js';
import { startEtcdCluster, startTestEtcd, type TestEtcd } from './etcd.js';
import { eventually } from './wait.js';

export interface HollowProcOptions {
  count: number;
  first?: number;
  namePrefix?: string;
  startLatency?: string;
  failRate?: number;
  /** Extra flags (e.g. --status-interval). */
  extra?: string[];
  /** How long the fleet may take to report itself running. */
  timeoutMs?: number;
}

export interface HollowClusterOptions extends ClusterOptions {
  /** etcd members: 1 (default) or a real 3-member cluster. */
  etcdMembers?: 1 | 3;
}

/** A 3-member etcd as a TestEtcd (endpoint: all three, comma-separated): enough for a cluster's processes and stores. */
async function threeMembers(): Promise<TestEtcd> {
  const cl = await startEtcdCluster(3);
  const stores: Store[] = [];
  return {
    endpoint: cl.endpoints.join(','),
    member: cl.members[0]!,
    store(prefix = '/jaco/') {
      const st = new Store({ endpoints: cl.endpoints, prefix });
      stores.push(st);
      return st;
    },
    viaProxy: () => Promise.reject(new Error('no proxy in front of a 3-member cluster')),
    restart: () => Promise.reject(new Error('restart a member of the cluster instead')),
    async stop() {
      for (const st of stores) st.close();
      await cl.stop();
    },
  };
}

/** A TestCluster whose nodes are hollow: no Docker, no per-node processes. */
export class HollowCluster extends TestCluster {
  constructor(readonly hollowOpts: HollowClusterOptions = {}) {
    super(hollowOpts);
  }

  override async start(): Promise<this> {
    this.etcd = this.hollowOpts.etcdMembers === 3 ? await threeMembers() : await startTestEtcd();
    this.store = this.etcd.store(this.prefix);
    this.uid = (await clusterInfo(this.store)).uid;
    if (this.opts.controllers !== false) await this.startControllers(this.opts.controllers ?? 'all');
    return this;
  }

  /** Starts one `jaco hollow-nodes` process and waits until it says its nodes run. */
  async startHollow(name: string, o: HollowProcOptions): Promise<Proc> {
    const args = ['hollow-nodes', '--count', String(o.count), '--first', String(o.first ?? 1), '--name-prefix', o.namePrefix ?? 'hollow-'];
    args.push('--start-latency', o.startLatency ?? '50ms', '--fail-rate', String(o.failRate ?? 0), '--log-level', 'warn', ...(o.extra ?? []));
    const p = this.spawn(name, args);
    await eventually(
      () => {
        if (p.exited()) throw new Error(`${name} exited:\n${this.tail(p)}`);
        return readFileSync(p.logFile, 'utf8').includes('"hollow nodes running"');
      },
      { what: `${o.count} hollow nodes running (${name})`, timeoutMs: o.timeoutMs ?? 60_000, intervalMs: 50 },
    );
    return p;
  }
}

export function startHollowCluster(opts: HollowClusterOptions = {}): Promise<HollowCluster> {
  return startCluster(opts, new HollowCluster(opts));
}

/** CPU seconds (user + system) and RSS of a process, from /proc. */
export function usage(pid: number): { cpuS: number; rss: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
  return { cpuS: (Number(f[11]) + Number(f[12])) / 100, rss };
}

/** Ready nodes, as the scheduler judges them (a heartbeat — its lease alive — saying the runtime is up). */
export async function readyNodes(store: Store): Promise<string[]> {
  const { items } = await store.list<Heartbeat>(keys.heartbeat(''));
  return items.filter((h) => nodeReady(h.value)).map((h) => h.value.spec.node);
}

export interface Census {
  /** Distinct replica ids with a desired key. */
  replicas: number;
  /** Replicas whose desired copy is observed running at its desired revision and spec. */
  running: number;
  /** Replica ids desired on more than one node. */
  desiredTwice: string[];
  /** Replica ids observed running on more than one of the given live nodes. */
  runningTwice: string[];
  /** Desired replicas per node. */
  perNode: Map<string, number>;
  notRunning: string[];
}

/** One consistent look at desired and observed state: how many replicas run, and where any is twice. */
export async function census(store: Store, liveNodes?: ReadonlySet<string>): Promise<Census> {
  const [desired, observed] = await Promise.all([store.list<ReplicaDesired>(keys.desiredOf()), store.list<ReplicaObserved>(keys.observedOf())]);
  const obs = new Map(observed.items.map((o) => [o.key.slice(keys.observedOf().length), o.value.status]));
  const where = new Map<string, string[]>();
  const perNode = new Map<string, number>();
  const notRunning: string[] = [];
  let running = 0;
  for (const { value: d } of desired.items) {
    const { replica, node, revision, specHash } = d.spec;
    where.set(replica, [...(where.get(replica) ?? []), node]);
    perNode.set(node, (perNode.get(node) ?? 0) + 1);
    const s = obs.get(`${node}/${replica}`);
    if (s?.state === 'running' && s.revision === revision && s.specHash === specHash) running++;
    else notRunning.push(`${node}/${replica}`);
  }
  const runningOn = new Map<string, number>();
  for (const [k, s] of obs) {
    const [node, replica] = k.split('/') as [string, string];
    if (s?.state === 'running' && (!liveNodes || liveNodes.has(node))) runningOn.set(replica, (runningOn.get(replica) ?? 0) + 1);
  }
  return {
    replicas: where.size,
    running,
    desiredTwice: [...where].filter(([, n]) => n.length > 1).map(([r]) => r),
    runningTwice: [...runningOn].filter(([, n]) => n > 1).map(([r]) => r),
    perNode,
    notRunning,
  };
}

export interface RunningWatch {
  /** Copies (node/replica) observed running now, as `match` judges them. */
  count(): number;
  /** The fewest seen after any one etcd revision since the watch began (a dip inside one transaction is not one). */
  min(): number;
  stop(): Promise<void>;
}

/**
 * Copies observed running that `match` accepts, from one list of observed/ and a watch from its
 * revision (a poll of 10,000 keys would be the heaviest client of all). Counted after each watch
 * response, so the minimum is over states the store really passed through.
 */
export async function watchRunning(c: HollowCluster, match: (node: string, replica: string, status: { state?: string; revision?: number }) => boolean): Promise<RunningWatch> {
  const running = new Set<string>();
  // A list gives keys with the store prefix, a watch of the namespace without it: node/replica either way.
  const on = (key: string, value?: Buffer) => {
    const id = (key.startsWith(c.prefix) ? key.slice(c.prefix.length) : key).slice(keys.observedOf().length);
    const [node, replica] = id.split('/') as [string, string];
    const status = value ? ((JSON.parse(value.toString()) as { status?: { state?: string; revision?: number } }).status ?? {}) : undefined;
    if (status && match(node, replica, status)) running.add(id);
    else running.delete(id);
  };
  const { kvs, revision } = await c.store.listRaw(keys.observedOf());
  for (const kv of kvs) on(kv.key.toString(), kv.value);
  let min = running.size;
  const w = await c.store.ns.watch().prefix(keys.observedOf()).startRevision(String(revision + 1)).create();
  w.on('data', (res) => {
    for (const e of res.events ?? []) if (e.kv) on(e.kv.key.toString(), e.type === 'Delete' ? undefined : e.kv.value);
    min = Math.min(min, running.size);
  });
  return { count: () => running.size, min: () => min, stop: () => w.cancel() };
}

/** n deployments of one service each, `replicas` apiece, on the hollow runtime's image. */
export function hollowManifest(n: number, replicas: number, opts: { prefix?: string; minReadyTime?: string; parallelism?: number; first?: number; network?: 'cluster' } = {}): string {
  return Array.from({ length: n }, (_, k) => {
    const i = (opts.first ?? 0) + k;
    const update = `{minReadyTime: ${opts.minReadyTime ?? '1s'}${opts.parallelism ? `, parallelism: ${opts.parallelism}, maxUnavailable: ${opts.parallelism}` : ''}}`;
    return `apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: ${opts.prefix ?? 'scale'}-${i}}
spec:
  services:
    app: {image: hollow/app:1, replicas: ${replicas}, resources: {cpu: 100m, memory: 64Mi}, update: ${update}${opts.network ? `, network: ${opts.network}` : ''}}
`;
  }).join('---\n');
}
