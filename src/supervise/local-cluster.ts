// The local cluster of `jaco up`: an embedded single-member etcd under .jaco/, one process
// running every controller, and N nodes. By default the nodes are separate hosts on this machine:
// each its own network namespace (joined by routed links, local-network.ts) and its own Docker
// engine (node-engine.ts), with its agent and ingress inside. `--shared-engine` keeps the older,
// faster tier: simulated nodes sharing this machine's namespace and engine. A supervisor process
// owns everything, restarts a child that dies, and on SIGTERM (jaco down) stops it all and
// removes what it made (tearDown, which `jaco down` also runs after a crash). State is in
// .jaco/up.json.
import type { ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LABELS } from '../api/labels.js';
import { keys } from '../api/keys.js';
import { nodeReady } from '../api/nodes.js';
import type { Heartbeat } from '../api/types.js';
import type { Logger } from '../observability/log.js';
import { PACKAGE_ROOT } from '../paths.js';
import { clusterInfo } from '../store/cluster.js';
import { Store, type StoreOptions } from '../store/store.js';
import { allocatorEnv } from './allocator.js';
import { etcdAuthArgs, issueEtcdCertificates, localProcessEnv, localStoreOptions, provisionLocalUsers } from './local-credentials.js';
import { commitActs, type OpGroup } from '../store/writer.js';
import type { Timings } from '../timings.js';
import { dockerode } from '../dockerode.js';
import { portInUse, startEtcdMember, waitForEtcd, type EtcdMember } from './etcd.js';
import { claimNetwork, createNetwork, destroyNetwork, inNetns, namespacesWith, networkTag, overlayInterface, planNetwork, type LocalNetwork } from './local-network.js';
import { engineCommand, engineSpec, engineUrl, purgeEngine, removeEngineContainers, stopEngine, subdirectories, waitForEngine, type NodeEngineSpec } from './node-engine.js';
import { spawnLogged, stopProcess } from '../child.js';
import { ensureClusterCa, issueCertificate } from '../pki/ca.js';
import { issueClientTls, issueNodeTls } from '../pki/identity.js';
import { startRegistry, waitForRegistry, type RegistryServer } from './registry.js';
import { changeImageSettings, storeRegistryLogin } from '../app/registries.js';
import { ensureClusterKeyFile } from '../secrets/keyfile.js';
import { releaseAllFiles } from '../secrets/tmpfs.js';

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
  /** The cluster registry's port (isolated: on the machine's cluster address; shared: 127.0.0.1, the next free one if taken). */
  registryPort: number;
  /**
   * Every node a separate host: its own network namespace and Docker engine (the default of
   * `jaco up`). False: simulated nodes sharing this machine's namespace and engine.
   */
  isolated: boolean;
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
  mode: 'isolated' | 'shared';
  /** The isolated nodes' network (their namespaces, addresses and links). */
  network?: LocalNetwork;
  /** The cluster registry: host:port as images name it, and the engines' trust of its CA (isolated). */
  registry?: { host: string; pid?: number; certsDir?: string };
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
/** The cluster key file of a local cluster, and each node's agent state directory. */
export const clusterKeyFile = (dataDir: string) => join(dataDir, 'secrets.key');
export const agentStateDir = (dataDir: string, node: string) => join(dataDir, 'nodes', node, 'agent');
/** The local operator's certificate for `jaco logs` and `jaco exec` (the CLI's default under .jaco/). */
export const operatorTlsDir = (dataDir: string) => join(dataDir, 'pki', 'operator');

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
  cmd: string;
  args: string[];
  /** Engines stop last, after the cluster's containers are removed from them. */
  kind: 'process' | 'engine';
  env?: Record<string, string>;
  proc?: ChildProcess;
  restarts: number;
}

/** A `jaco …` child, in node namespace `netns` when given. */
function jacoChild(args: string[], netns?: string): { cmd: string; args: string[] } {
  const argv = [jacoBin(), ...args];
  return netns ? inNetns(netns, process.execPath, argv) : { cmd: process.execPath, args: argv };
}

/** Metrics ports of a node's agent and ingress in its own namespace (each node has its own port space). */
export const NODE_METRICS_PORT = { agent: 9465, ingress: 9466 } as const;

/** Where the network index a data directory used last is kept, so a cluster restarted from it keeps its addresses. */
const networkFile = (dataDir: string) => join(dataDir, 'network.json');

/** Runs the local cluster in this process until `stop()`; writes up.json as it goes. */
export class LocalCluster {
  private etcd?: EtcdMember;
  private registry?: RegistryServer;
  private children: Supervised[] = [];
  private stopping = false;
  private state: UpState;
  readonly endpoint: string;

  constructor(private readonly opts: UpOptions, private readonly log: Logger) {
    // TLS with client certificates and authentication, as production runs etcd.
    this.endpoint = `https://127.0.0.1:${opts.etcdPort}`;
    this.state = {
      supervisorPid: process.pid,
      endpoint: this.endpoint,
      nodes: [],
      children: [],
      mode: opts.isolated ? 'isolated' : 'shared',
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
    const nodeNames = this.opts.withAgents ? Array.from({ length: this.opts.nodes }, (_, i) => `node-${i + 1}`) : [];
    const net = this.opts.isolated ? await this.startNetwork(nodeNames) : undefined;
    const tls = issueEtcdCertificates(dataDir, net ? [net.hostAddress] : []);
    this.etcd = startEtcdMember(
      {
        name: 'jaco',
        dataDir: join(dataDir, 'etcd'),
        clientPort: this.opts.etcdPort,
        peerPort: this.opts.etcdPort + 1,
        logFile: join(dataDir, 'logs', 'etcd.log'),
        // The nodes reach etcd over their links, at the machine's address on the cluster network.
        ...(net ? { extraClientHosts: [net.hostAddress] } : {}),
        extraArgs: ['--auto-compaction-mode', 'periodic', '--auto-compaction-retention', '1h', ...etcdAuthArgs(dataDir)],
        tls,
      },
      {},
    );
    this.state.etcdPid = this.etcd.process.pid;
    this.save();
    await waitForEtcd([this.endpoint], 30_000, this.etcd.process, localStoreOptions(dataDir, false));
    await provisionLocalUsers([this.endpoint], dataDir, nodeNames);
    const store = this.rootStore();
    try {
      this.state.clusterUid = (await clusterInfo(store)).uid;
    } finally {
      store.close();
    }
    await this.startRegistry(net);
    await this.configureImages();
    let port = this.opts.metricsPort;
    const nextMetrics = async () => {
      while (await portInUse(port)) port++;
      return `127.0.0.1:${port++}`;
    };
    const log = (name: string) => join(dataDir, 'logs', `${name}.log`);
    if (this.opts.controllers.length) {
      const metrics = await nextMetrics();
      // The cluster key file (docs/secrets.md): made once under the data directory, kept across jaco down.
      ensureClusterKeyFile(clusterKeyFile(dataDir));
      this.supervise({ name: 'controllers', metrics, log: log('controllers') }, jacoChild(['controller', 'all', '--metrics-addr', metrics, '--secrets-key-file', clusterKeyFile(dataDir)]), { ...allocatorEnv(), ...this.userEnv('controller.env') });
    }
    if (net) await this.startEngines(net);
    // The logs and exec endpoint's certificates (docs/operate.md): each node's, and the local operator's.
    if (nodeNames.length) issueClientTls(ensureClusterCa(join(dataDir, 'pki')), 'operator', 'local', operatorTlsDir(dataDir));
    for (const [i, node] of nodeNames.entries()) {
      this.state.nodes.push(node);
      const host = net?.nodes[i];
      issueNodeTls(ensureClusterCa(join(dataDir, 'pki')), node, [host?.address ?? simulatedAddress(i + 1)], join(agentStateDir(dataDir, node), 'tls'));
      const metrics = host ? `${host.address}:${NODE_METRICS_PORT.agent}` : await nextMetrics();
      const agentArgs = ['agent', '--node', node, '--capacity', this.opts.capacity, '--metrics-addr', metrics, '--pressure', 'containers', '--state-dir', agentStateDir(dataDir, node)];
      // Separate hosts are joined by the WireGuard mesh over their links (docs/networking.md).
      if (host) agentArgs.push('--address', host.address, '--docker-host', engineUrl(engineSpec(net!.tag, node, host.netns, dataDir)), '--overlay', '--overlay-interface', overlayInterface(net!, host));
      // Simulated nodes each have a loopback address of their own (all of 127/8 is loopback on Linux).
      else agentArgs.push('--address', simulatedAddress(i + 1));
      this.supervise({ name: node, metrics, log: log(node) }, jacoChild(agentArgs, host?.netns), { ...this.nodeEnv(net), ...this.userEnv(`agent-${node}.env`) });
      if (this.opts.withIngress) {
        const im = host ? `${host.address}:${NODE_METRICS_PORT.ingress}` : await nextMetrics();
        this.supervise(
          { name: `ingress-${i + 1}`, metrics: im, log: log(`ingress-${node}`) },
          // Simulated nodes share one namespace: their ingresses cannot each answer the services' addresses.
          jacoChild(['ingress', '--node', node, '--data-dir', join(dataDir, 'ingress'), '--metrics-addr', im, ...(host ? [] : ['--no-service-addresses'])], host?.netns),
          { ...this.nodeEnv(net), ...this.userEnv(`ingress-${node}.env`) },
        );
      }
    }
    if (this.opts.dashboardPort) {
      let dp = this.opts.dashboardPort;
      while (await portInUse(dp)) dp++;
      this.state.dashboard = `http://127.0.0.1:${dp}/`;
      this.supervise({ name: 'dashboard', metrics: `127.0.0.1:${dp}`, log: log('dashboard') }, jacoChild(['dashboard', '--addr', `127.0.0.1:${dp}`]), this.userEnv('viewer.env'));
    }
    this.save();
    await this.waitReady(60_000);
    this.state.ready = true;
    this.save();
  }

  /** Claims a network (the one this data directory used last, when free) and builds it. */
  private async startNetwork(nodeNames: string[]): Promise<LocalNetwork> {
    let preferred: number | undefined;
    try {
      preferred = (JSON.parse(readFileSync(networkFile(this.opts.dataDir), 'utf8')) as { index?: number }).index;
    } catch {
      // first start from this data directory
    }
    const net = await claimNetwork(nodeNames, preferred);
    // Recorded before anything is built, so a start that fails half-way is torn down whole; the
    // owner file keeps `jaco down` of another data directory off it.
    this.state.network = net;
    this.save();
    mkdirSync(runDirOf(net.tag), { recursive: true });
    writeFileSync(ownerFile(net.tag), this.opts.dataDir);
    writeFileSync(networkFile(this.opts.dataDir), JSON.stringify({ index: net.index, tag: net.tag }));
    await createNetwork(net);
    return net;
  }

  /**
   * The cluster registry (Debian's docker-registry), its images under the data dir (kept across
   * `jaco down`). Isolated nodes reach it at the machine's cluster address over TLS from the
   * cluster CA, which every engine on this machine trusts through /etc/docker/certs.d; the shared
   * engine reaches it on loopback (Docker's default insecure range).
   */
  private async startRegistry(net: LocalNetwork | undefined): Promise<void> {
    const dir = join(this.opts.dataDir, 'registry');
    let port = this.opts.registryPort;
    let tls: { certFile: string; keyFile: string } | undefined;
    let address = '127.0.0.1';
    if (net) {
      address = net.hostAddress;
      const pki = join(this.opts.dataDir, 'pki');
      const ca = ensureClusterCa(pki);
      const cert = issueCertificate(ca, { commonName: 'jaco registry', ips: [net.hostAddress], usage: 'server' }, { dir: pki, name: 'registry' });
      tls = { certFile: cert.certFile, keyFile: cert.keyFile };
      const certsDir = join(DOCKER_CERTS_DIR, `${net.hostAddress}:${port}`);
      mkdirSync(certsDir, { recursive: true });
      writeFileSync(join(certsDir, 'ca.crt'), ca.certPem);
      this.state.registry = { host: `${net.hostAddress}:${port}`, certsDir };
    } else {
      while (await portInUse(port)) port++;
      this.state.registry = { host: `127.0.0.1:${port}` };
    }
    this.save();
    this.registry = startRegistry({ dir, address, port, ...(tls ? { tls } : {}), logFile: join(this.opts.dataDir, 'logs', 'registry.log') });
    this.state.registry.pid = this.registry.process.pid;
    this.save();
    await waitForRegistry(this.registry, 30_000);
  }

  /**
   * The cluster registry is the cluster's default (short names resolve there, builds go there) and
   * its CA is stored with it, so `jaco apply` trusts it too. No Docker Hub: this machine's nodes
   * reach nothing outside it.
   */
  private async configureImages(): Promise<void> {
    const host = this.state.registry!.host;
    const pki = join(this.opts.dataDir, 'pki');
    const store = this.rootStore();
    try {
      await storeRegistryLogin(store, { host, ...(this.state.network ? { caPem: ensureClusterCa(pki).certPem } : { insecure: true }) });
      await changeImageSettings(store, { defaultRegistry: host, hub: false });
    } finally {
      store.close();
    }
  }

  /** One Docker engine per node, inside its namespace; waits until each answers. */
  private async startEngines(net: LocalNetwork): Promise<void> {
    const specs = net.nodes.map((n) => engineSpec(net.tag, n.name, n.netns, this.opts.dataDir));
    for (const s of specs) {
      mkdirSync(join(s.execRoot, '..'), { recursive: true });
      mkdirSync(s.dataRoot, { recursive: true });
      this.supervise({ name: `docker-${s.node}`, metrics: engineUrl(s), log: join(this.opts.dataDir, 'logs', `docker-${s.node}.log`) }, engineCommand(s), undefined, 'engine');
    }
    await Promise.all(
      specs.map((s) => {
        const c = this.children.find((x) => x.info.name === `docker-${s.node}`)!;
        return waitForEngine(s, 60_000, () => !c.proc || c.proc.exitCode !== null || c.proc.signalCode !== null);
      }),
    );
  }

  /** What a node's processes are told: etcd at the machine's address on the cluster network, when nodes are isolated. */
  private nodeEnv(net: LocalNetwork | undefined): Record<string, string> | undefined {
    return net ? { JACO_ENDPOINTS: `https://${net.hostAddress}:${this.opts.etcdPort}` } : undefined;
  }

  /** A store as this cluster's root user (up itself: the cluster's uid, the image settings, readiness). */
  private rootStore(): Store {
    return new Store({ endpoints: this.endpoint, ...localStoreOptions(this.opts.dataDir) });
  }

  /** A child's environment: the TLS files and the credentials of its own etcd user. */
  private userEnv(envFile: string): Record<string, string> {
    return localProcessEnv(this.opts.dataDir, envFile);
  }

  private supervise(info: ChildInfo, how: { cmd: string; args: string[] }, env?: Record<string, string>, kind: Supervised['kind'] = 'process'): void {
    const c: Supervised = { info, cmd: how.cmd, args: how.args, kind, ...(env ? { env } : {}), restarts: 0 };
    this.children.push(c);
    this.spawnChild(c);
    this.save();
  }

  private spawnChild(c: Supervised): void {
    const proc = spawnLogged(c.cmd, c.args, c.info.log, {
      env: { ...process.env, JACO_ENDPOINTS: this.endpoint, JACO_TIMINGS: this.opts.timings.name, JACO_PREFIX: process.env.JACO_PREFIX ?? '/jaco/', ...c.env },
    });
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
    const store = this.rootStore();
    const deadline = Date.now() + timeoutMs;
    try {
      for (;;) {
        const now = Date.now();
        const hbs = await store.list<Heartbeat>(keys.heartbeats());
        const ready = new Set(hbs.items.filter((h) => nodeReady(h.value)).map((h) => h.value.spec.node));
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

  private async forgetReports(): Promise<void> {
    if (this.etcd) this.log.info({ reports: await forgetObserved({ endpoints: [this.endpoint], ...localStoreOptions(this.opts.dataDir) }) }, "deleted the agents' reports of the removed containers");
  }

  async stop(): Promise<void> {
    this.stopping = true;
    // Engines last: the cluster's containers are removed from them first.
    await Promise.all(this.children.filter((c) => c.kind === 'process').map(stopChild));
    await tearDown(this.opts.dataDir, this.state, this.log, { purge: false, stopEngines: () => Promise.all(this.children.filter((c) => c.kind === 'engine').map(stopChild)) });
    await this.forgetReports().catch((err: Error) => this.log.warn({ err: err.message }, "could not delete the agents' reports of the removed containers"));
    await this.registry?.stop();
    await this.etcd?.stop();
    rmSync(stateFile(this.opts.dataDir), { force: true });
  }
}

const stopChild = (c: Supervised) => stopProcess(c.proc, { graceMs: 15_000 });

/**
 * Deletes every agent's report of a replica copy (observed/), as each agent does once it has
 * removed a container itself: `jaco down` removed them all, so the next `jaco up` starts each
 * replica afresh instead of finding containers "removed outside jaco" and counting restarts.
 */
async function forgetObserved(opts: StoreOptions): Promise<number> {
  const store = new Store(opts);
  try {
    const { items } = await store.list(keys.observedOf());
    const ops = items.map((i) => ({ op: 'delete' as const, key: i.key, modRevision: i.modRevision }));
    const acts: OpGroup[] = [];
    for (let i = 0; i < ops.length; i += 100) acts.push({ label: 'jaco down: forget removed containers', ops: ops.slice(i, i + 100) });
    await commitActs(store, acts);
    return ops.length;
  } finally {
    store.close();
  }
}

/** The engine of each isolated node of a cluster's state. */
export function enginesOf(dataDir: string, st: Pick<UpState, 'network'>): NodeEngineSpec[] {
  const net = st.network;
  return net ? net.nodes.map((n) => engineSpec(net.tag, n.name, n.netns, dataDir)) : [];
}

/**
 * Removes what a local cluster made, whether its supervisor stopped cleanly or crashed: the
 * cluster's containers (from the shared engine, or from each node's engine), the node engines
 * (stopped; their leftovers — container processes, mounts, run files — purged, and their image
 * stores too with `purge`), and the network. Safe to run twice.
 */
export async function tearDown(dataDir: string, st: Pick<UpState, 'network' | 'clusterUid' | 'registry'>, log: Logger, opts: { purge: boolean; stopEngines?: () => Promise<unknown> }): Promise<void> {
  const engines = enginesOf(dataDir, st);
  if (st.clusterUid) {
    const label = `${LABELS.cluster}=${st.clusterUid}`;
    if (engines.length) await Promise.all(engines.map((e) => removeEngineContainers(e, label)));
    else await removeClusterContainers(st.clusterUid, log);
  }
  // Their secrets' tmpfs, mounted by the agents under their state directories.
  for (const n of subdirectories(join(dataDir, 'nodes'))) await releaseAllFiles(agentStateDir(dataDir, n), log).catch((err: Error) => log.warn({ node: n, err: err.message }, "could not unmount a node's secrets"));
  // The supervisor stops its engine children itself; after a crash they are found by pid file.
  await opts.stopEngines?.();
  await Promise.all(engines.map((e) => stopEngine(e)));
  for (const e of engines) await purgeEngine(e, { data: opts.purge }).catch((err: Error) => log.warn({ node: e.node, err: err.message }, 'could not purge a node engine'));
  if (st.network) {
    await destroyNetwork(st.network.tag);
    rmSync(runDirOf(st.network.tag), { recursive: true, force: true });
  }
  // The engines' trust of the registry's CA goes with the network whose address it names (found
  // by that address when the state that recorded it is lost).
  const certsDirs = st.registry?.certsDir ? [st.registry.certsDir] : st.network ? subdirectories(DOCKER_CERTS_DIR).filter((d) => d.startsWith(`${st.network!.hostAddress}:`)).map((d) => join(DOCKER_CERTS_DIR, d)) : [];
  for (const d of certsDirs) rmSync(d, { recursive: true, force: true });
  // Purged, the names this machine's engine holds under the registry's host go too (`jaco registry
  // push` tags an image so, a compose build names its image so): a later cluster gets the same host
  // (198.18.1.1:5000 for the first), so they would only pile up, each build a whole image.
  const registryNames = st.registry?.host ? `${st.registry.host}/` : st.network ? `${st.network.hostAddress}:` : undefined;
  if (opts.purge && registryNames) await untagImages(registryNames, log);
}

/**
 * Takes off this machine's engine every image name (tag or digest) starting with `prefix`. Names
 * only: an image that has another name (jaco-demo/busybox:1) stays, and so does one a container
 * still runs from. Returns how many names went.
 */
export async function untagImages(prefix: string, log: Logger): Promise<number> {
  const docker = new (dockerode())();
  let removed = 0;
  try {
    for (const image of await docker.listImages()) {
      for (const ref of [...(image.RepoTags ?? []), ...(image.RepoDigests ?? [])].filter((r) => r.startsWith(prefix))) {
        // A 409 (a container uses it and it is its last name) or a 404 (gone meanwhile) leaves it be.
        if (await docker.getImage(ref).remove().then(() => true, () => false)) removed++;
      }
    }
  } catch (e) {
    log.warn({ err: (e as Error).message, prefix }, "could not take the registry's image names off this machine's engine (is Docker running?)");
  }
  return removed;
}

/** Where every Docker engine of this machine looks for a registry's CA (ca.crt under <host:port>/). */
export const DOCKER_CERTS_DIR = '/etc/docker/certs.d';

const runDirOf = (tag: string) => join('/run/jaco', tag);
const ownerFile = (tag: string) => join(runDirOf(tag), 'owner');

/**
 * The network a data directory's cluster last had, when its up.json is gone (a crash before it
 * was written, or removed by hand): the index in network.json, its nodes from the namespaces
 * and node directories still there. Only while that network still belongs to this directory.
 */
export async function recordedNetwork(dataDir: string): Promise<LocalNetwork | undefined> {
  let index: number | undefined;
  try {
    index = (JSON.parse(readFileSync(networkFile(dataDir), 'utf8')) as { index?: number }).index;
  } catch {
    return undefined;
  }
  if (!index) return undefined;
  const tag = networkTag(index);
  let owner: string | undefined;
  try {
    owner = readFileSync(ownerFile(tag), 'utf8');
  } catch {
    // no run directory: nothing of it is running (or /run was wiped, and the namespaces with it)
  }
  if (owner !== undefined && owner !== dataDir) return undefined;
  const names = new Set([...(await namespacesWith(`${tag}-`)).map((ns) => ns.slice(tag.length + 1)).filter((n) => n !== 'router'), ...subdirectories(join(dataDir, 'nodes'))]);
  const net = planNetwork(index, [...names].sort());
  return net;
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
