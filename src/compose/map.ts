// Mapping a Compose application (already interpolated and valid against the Compose
// Specification) onto a jaco Deployment, and the secrets and configs it declares onto objects apply
// creates. Every field of a service is mapped, refused with a reason, or ignored with a warning —
// never dropped silently (docs/compose.md is the table). A service runs on the cluster network, where
// services reach each other by name as on a compose network, unless it says `network_mode: host`;
// what its ports and network fields mean follows from that. Pure: the compose file's directory and the
// files it names (env_file, secrets, configs) are read by the caller's `readFile`, so tables can
// test it.
import { isAbsolute, resolve } from 'node:path';
import { parse as shellSplit } from 'shell-quote';
import type { Path } from '../api/schema.js';
import type { ContainerOptions, DeploymentSpec, FileRef, HealthCheck, NetworkMode, Placement, PortSpec, ServiceSpec, UpdatePolicy, VolumeMount } from '../api/types.js';
import { ALIAS_PATTERN, DEVICE_PATTERN, HOSTNAME_PATTERN } from '../api/crds.js';
import { fileTargetProblem } from '../api/files.js';
import { declaredFiles, filesReferred, type ComposeObject, type DeclaredFiles } from './files.js';
import { parseEnvFile, type Lookup } from './interpolate.js';

export type { ComposeObject } from './files.js';

export interface ComposeIssue {
  path: Path;
  message: string;
  /** refuse: nothing is written; warn: ignored, said once (an error under --strict). */
  severity: 'refuse' | 'warn';
}

export interface MapContext {
  /** The compose file's directory: relative paths resolve against it. */
  dir: string;
  /** The project (deployment) name: a built image without `image:` is named <project>-<service>, as compose names it. */
  project: string;
  /** Variables as compose sees them (the environment, then --env-file / .env). */
  lookup: Lookup;
  profiles: readonly string[];
  allowPrivileged: boolean;
  readFile(path: string): string;
  /** A file's bytes (secrets and configs are not always text); default: readFile's text. */
  readBytes?(path: string): Buffer;
  home?: string;
}

export interface Mapped {
  spec: DeploymentSpec;
  issues: ComposeIssue[];
  /** The secrets and configs apply creates (values read here; never printed). */
  objects: ComposeObject[];
  /** The compose name of each service, by its jaco name (where a problem about it is in the file). */
  composeNames: ReadonlyMap<string, string>;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Fields compose has that jaco deliberately does not honour, on either network: ignored with this warning. */
const IGNORED: Record<string, string> = {
  restart: 'jaco owns restarts (health-driven, with back-off; seed 001): restart is ignored',
  logging: 'containers log to Docker’s default driver on each node',
  platform: 'nodes run the image for their own platform',
  stdin_open: 'no attached stdin for a replicated service',
  tty: 'no terminal for a replicated service',
  oom_score_adj: 'ignored',
  scale: 'use deploy.replicas',
};

/**
 * Fields about a container's network, ignored with what is true of the service's network: a
 * host-network container has its node's (name, interfaces, resolver); a cluster-network replica has
 * a namespace of its own, which jaco plumbs and names (docs/networking.md).
 */
const IGNORED_BY_NETWORK: Record<string, Record<NetworkMode, string>> = {
  domainname: {
    host: 'host networking: a container has its node’s domain name',
    cluster: 'jaco sets no domain name: a replica is found by its service’s name (SERVICE, and SERVICE.DEPLOYMENT from other deployments)',
  },
  mac_address: {
    host: 'host networking: a container has its node’s interfaces',
    cluster: 'jaco plumbs each replica’s interface and addresses itself (docs/networking.md); its MAC address is not chosen',
  },
  dns: {
    host: 'host networking: a container uses its node’s resolver',
    cluster: 'a replica asks its node’s resolver, which answers the cluster’s names and forwards every other name to the node’s own resolvers (docs/networking.md)',
  },
  dns_search: {
    host: 'host networking: a container uses its node’s resolver',
    cluster: 'a replica’s search domain is its deployment, so a service’s bare name finds it (docs/networking.md)',
  },
  dns_opt: {
    host: 'host networking: a container uses its node’s resolver',
    cluster: 'a replica’s resolv.conf is jaco’s: its node’s resolver, its deployment as search domain (docs/networking.md)',
  },
};

/** Normalises a name as compose normalises project names, then to a jaco name (lowercase, [a-z0-9-]). */
export function normaliseName(raw: string): string {
  return raw
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '')
    .replace(/_/g, '-')
    .replace(/^[-]+|[-]+$/g, '');
}

/** Compose byte sizes ("512m", "1gb", "100k", 1024) → bytes. */
export function composeBytes(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return undefined;
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*([bkmg]?)b?$/i.exec(v.trim());
  if (!m) return undefined;
  const unit = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase()]!;
  return Math.round(Number(m[1]) * unit);
}

/** Bytes as the quantity a person would write ("256Mi"), or the number when it is not a whole unit. */
export function quantity(bytes: number): string | number {
  for (const [unit, size] of [['Gi', 1024 ** 3], ['Mi', 1024 ** 2], ['Ki', 1024]] as const) if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  return bytes;
}

/** Compose durations ("1m30s", "10s", "500ms") → jaco durations; `us`/`ns` or plain numbers are refused. */
export function composeDuration(v: unknown): string | undefined {
  if (typeof v !== 'string') return undefined;
  return /^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$/.test(v) ? v : undefined;
}

/** A command as compose takes it: a list as is, a string split as a shell would (no shell runs). */
function commandList(v: unknown, path: Path, issues: ComposeIssue[]): string[] | undefined {
  if (v === null || v === undefined) return undefined;
  if (Array.isArray(v)) return v.map(String);
  const parts = shellSplit(String(v));
  if (parts.some((p) => typeof p !== 'string')) {
    issues.push({ path, severity: 'refuse', message: 'a string command may not hold shell operators (|, &&, >, globs): no shell runs it; write it as a list, or as ["sh", "-c", "…"]' });
    return undefined;
  }
  return parts as string[];
}

/** `KEY=VALUE` list or map; a key without a value takes the variable's value (and is dropped when unset). */
function environment(v: unknown, lookup: Lookup): Record<string, string> {
  const out: Record<string, string> = {};
  const set = (k: string, val: unknown) => {
    if (val === null || val === undefined) {
      const from = lookup(k);
      if (from !== undefined) out[k] = from;
    } else out[k] = String(val);
  };
  if (Array.isArray(v))
    for (const e of v.map(String)) {
      const eq = e.indexOf('=');
      if (eq < 0) set(e, undefined);
      else out[e.slice(0, eq)] = e.slice(eq + 1);
    }
  else if (isObj(v)) for (const [k, val] of Object.entries(v)) set(k, val);
  return out;
}

function listOrMap(v: unknown): Record<string, string> {
  if (Array.isArray(v))
    return Object.fromEntries(
      v.map(String).map((e) => {
        const eq = e.indexOf('=');
        return eq < 0 ? [e, ''] : [e.slice(0, eq), e.slice(eq + 1)];
      }),
    );
  return isObj(v) ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, x === null ? '' : String(x)])) : {};
}

/**
 * The network a compose service gets: its own namespace on the cluster network, where services
 * reach each other by name as on a compose network, unless it asks for its node's (`host`).
 */
function composeNetwork(networkMode: unknown): NetworkMode {
  return networkMode === 'host' ? 'host' : 'cluster';
}

/** One entry of `ports` or `expose`, read: its container ports and, when published, the ports answered for them. */
interface PortEntry {
  at: Path;
  from: 'ports' | 'expose';
  targets: number[];
  published?: number[];
  protocol: 'tcp' | 'udp';
  named: Pick<PortSpec, 'name' | 'appProtocol'>;
}

/** "80" or "8000-8010" → its ports. */
function portRange(r: string): number[] {
  const [a, b] = r.split('-').map(Number);
  return b === undefined ? [a!] : Array.from({ length: b - a! + 1 }, (_, k) => a! + k);
}

class ServiceMapper {
  readonly out: ServiceSpec = { image: '' };
  private readonly container: ContainerOptions = {};
  /** Said before any field is read: what ports, names and network fields mean depends on it. */
  private readonly network: NetworkMode;

  constructor(
    readonly name: string,
    readonly svc: Obj,
    readonly top: Obj,
    readonly ctx: MapContext,
    readonly issues: ComposeIssue[],
    /** The application's top-level secrets and configs, resolved once for every service. */
    readonly declared: DeclaredFiles,
    /** Every active service's jaco name, by its compose name (jacoServiceName). */
    readonly names: ReadonlyMap<string, string>,
  ) {
    this.network = composeNetwork(svc.network_mode);
    this.out.network = this.network;
  }

  /** The service's name in the Deployment. */
  get jacoName(): string {
    return this.names.get(this.name)!;
  }
  /** One more name the service answers to inside its deployment, when the resolver can carry it. */
  private alias(name: string, at: Path): void {
    if (!new RegExp(ALIAS_PATTERN).test(name)) return this.warn(at, `${JSON.stringify(name)} cannot be a DNS name (labels of letters, digits, - and _): the service answers as ${this.jacoName} only`);
    if (name.toLowerCase() === this.jacoName || this.out.aliases?.some((a) => a.toLowerCase() === name.toLowerCase())) return;
    this.out.aliases = [...(this.out.aliases ?? []), name];
  }
  private at(...p: (string | number)[]): Path {
    return ['services', this.name, ...p];
  }
  /** A number compose may write as a string (interpolated): refused when it is not one. */
  private num(v: unknown, path: Path): number | undefined {
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?[0-9]+(\.[0-9]+)?$/.test(v.trim()) ? Number(v) : NaN;
    if (Number.isNaN(n)) {
      this.refuse(path, `must be a number, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return n;
  }
  private refuse(path: Path, message: string): void {
    this.issues.push({ path, message, severity: 'refuse' });
  }
  private warn(path: Path, message: string): void {
    this.issues.push({ path, message, severity: 'warn' });
  }
  private path(p: string): string {
    if (p.startsWith('~/') && this.ctx.home) return resolve(this.ctx.home, p.slice(2));
    return isAbsolute(p) ? p : resolve(this.ctx.dir, p);
  }

  map(): ServiceSpec {
    const s = this.svc;
    const handled = new Set<string>();
    const field = (k: string, fn: (v: unknown) => void) => {
      handled.add(k);
      // null is unset in compose (an empty `deploy:`), as undefined is.
      if (s[k] !== undefined && s[k] !== null) fn(s[k]);
    };
    field('image', (v) => (this.out.image = String(v)));
    field('build', (v) => this.build(v));
    field('pull_policy', (v) => this.pullPolicy(v));
    if (s.image === undefined && s.build === undefined) this.refuse(this.at(), `service "${this.name}" names no image`);
    // Its compose name stays a name of it where jaco's differs (web_app answers beside web-app).
    if (this.jacoName !== this.name) this.alias(this.name, this.at());
    field('entrypoint', (v) => (this.out.command = commandList(v, this.at('entrypoint'), this.issues)));
    field('command', (v) => (this.out.args = commandList(v, this.at('command'), this.issues)));
    field('env_file', (v) => this.envFiles(v));
    field('environment', (v) => (this.out.env = { ...this.out.env, ...environment(v, this.ctx.lookup) }));
    field('working_dir', (v) => (this.container.workingDir = String(v)));
    field('user', (v) => (this.container.user = String(v)));
    field('labels', (v) => (this.container.labels = listOrMap(v)));
    field('init', (v) => (this.container.init = !!v));
    field('read_only', (v) => (this.container.readOnly = !!v));
    field('cap_add', (v) => (this.container.capAdd = (v as unknown[]).map(String)));
    field('cap_drop', (v) => (this.container.capDrop = (v as unknown[]).map(String)));
    field('extra_hosts', (v) => (this.container.extraHosts = Array.isArray(v) ? v.map(String) : Object.entries(v as Obj).map(([h, ip]) => `${h}:${String(ip)}`)));
    field('tmpfs', (v) => (this.container.tmpfs = [...(this.container.tmpfs ?? []), ...(Array.isArray(v) ? v.map(String) : [String(v)])]));
    field('shm_size', (v) => {
      const b = composeBytes(v);
      if (b === undefined) this.refuse(this.at('shm_size'), `not a size: ${JSON.stringify(v)}`);
      else this.container.shmSize = b;
    });
    field('ulimits', (v) => {
      const out: NonNullable<ContainerOptions['ulimits']> = {};
      for (const [k, x] of Object.entries(v as Obj)) {
        const limit = typeof x === 'number' || typeof x === 'string' ? { soft: x, hard: x } : isObj(x) ? x : {};
        const soft = this.num(limit.soft, this.at('ulimits', k));
        const hard = this.num(limit.hard, this.at('ulimits', k));
        if (soft !== undefined && hard !== undefined) out[k] = { soft, hard };
      }
      this.container.ulimits = out;
    });
    field('privileged', (v) => {
      if (!v) return;
      if (this.ctx.allowPrivileged) this.container.privileged = true;
      else this.refuse(this.at('privileged'), 'privileged containers are refused unless you pass --allow-privileged');
    });
    field('sysctls', (v) => this.sysctls(listOrMap(v)));
    field('security_opt', (v) => this.securityOpt((v as unknown[]).map(String)));
    field('ipc', (v) => this.namespace('ipc', String(v)));
    field('pid', (v) => this.namespace('pid', String(v)));
    // Placement finds a node that has them: its engine's runtimes, the devices its agent offers.
    field('runtime', (v) => (this.container.runtime = String(v)));
    field('devices', (v) => this.hostDevices(v as unknown[]));
    field('healthcheck', (v) => this.healthcheck(v as Obj));
    field('stop_signal', (v) => (this.out.stopSignal = String(v)));
    field('stop_grace_period', (v) => {
      const d = composeDuration(v);
      if (d) this.out.stopGracePeriod = d;
      else this.refuse(this.at('stop_grace_period'), `jaco reads durations in h, m, s and ms: got ${JSON.stringify(v)}`);
    });
    const ports: PortEntry[] = [];
    field('ports', (v) => ports.push(...this.portEntries(v as unknown[])));
    field('expose', (v) => {
      if (this.network === 'host') this.warn(this.at('expose'), 'expose: host networking: every port a container listens on is reachable on its node; expose is documentation only');
      else ports.push(...this.exposeEntries(v as unknown[]));
    });
    if (ports.length) this.network === 'host' ? this.hostPorts(ports) : this.clusterPorts(ports);
    field('volumes', (v) => this.volumes(v as unknown[]));
    field('secrets', (v) => this.files(v as unknown[], 'secrets'));
    field('configs', (v) => this.files(v as unknown[], 'configs'));
    field('cpus', (v) => (this.out.resources = { ...this.out.resources, cpu: typeof v === 'number' ? v : String(v) }));
    field('mem_limit', (v) => this.memory(v, this.at('mem_limit')));
    field('mem_reservation', (v) => {
      if (s.mem_limit === undefined) this.memory(v, this.at('mem_reservation'));
      else this.warn(this.at('mem_reservation'), 'jaco books and enforces one memory figure: mem_limit is used');
    });
    field('gpus', (v) => this.gpus(v, this.at('gpus')));
    field('storage_opt', (v) => this.storageOpt(v as Obj));
    field('deploy', (v) => this.deploy(v as Obj));
    field('container_name', () => {
      if ((this.out.replicas ?? 1) > 1 || this.out.placement?.mode === 'global') this.refuse(this.at('container_name'), 'container_name names one container; this service runs several replicas (jaco names each container itself)');
      else this.warn(this.at('container_name'), 'jaco names each container itself (cluster, node, replica, revision): container_name is ignored');
    });
    field('network_mode', (v) => this.networkMode(String(v)));
    field('networks', (v) => this.networks(v));
    field('hostname', (v) => this.hostname(String(v)));
    field('links', (v) => this.links(v as unknown[]));
    field('depends_on', (v) => this.dependsOn(v));
    field('profiles', () => undefined); // chose whether the service is in at all (the caller)
    field('x-jaco', (v) => this.xJaco(v as Obj));
    for (const [k, msg] of Object.entries(IGNORED)) field(k, () => this.warn(this.at(k), `${k}: ${msg}`));
    for (const [k, msg] of Object.entries(IGNORED_BY_NETWORK)) field(k, () => this.warn(this.at(k), `${k}: ${msg[this.network]}`));
    for (const k of Object.keys(s)) {
      if (handled.has(k) || k.startsWith('x-')) continue;
      this.refuse(this.at(k), `${k} is not supported by jaco; remove it (docs/compose.md lists what jaco maps)`);
    }
    if (Object.keys(this.container).length) this.out.container = this.container;
    return this.out;
  }

  /**
   * sysctls: only namespaced ones, which touch the replica alone — net.* (its network namespace:
   * on the cluster network the sandbox's, which the container joins) and the IPC ones. Any other
   * would change the node's kernel under every container; under host networking net.* is the node's.
   */
  private sysctls(all: Record<string, string>): void {
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(all)) {
      const at = this.at('sysctls', k);
      if (k.startsWith('net.')) {
        if (this.network === 'host') this.refuse(at, `${k}: host networking: the network namespace is the node's, and setting it would change the node (use the cluster network, where it is the replica's own)`);
        else out[k] = v;
      } else if (/^kernel\.(shm(all|max|mni|_rmid_forced)|msg(max|mnb|mni)|sem)$/.test(k) || k.startsWith('fs.mqueue.')) out[k] = v;
      else this.refuse(at, `${k} is not namespaced: it would change the node's kernel under every container (namespaced ones are net.*, kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*); set it on the node`);
    }
    if (Object.keys(out).length) this.container.sysctls = out;
  }

  /** security_opt passes to Docker; an unconfined profile is refused unless --allow-privileged, like privileged. */
  private securityOpt(list: string[]): void {
    const unconfined = list.findIndex((o) => /(^|[=:])unconfined$/.test(o));
    if (unconfined >= 0 && !this.ctx.allowPrivileged) return this.refuse(this.at('security_opt', unconfined), `${list[unconfined]} lifts the container's confinement: refused unless you pass --allow-privileged`);
    this.container.securityOpt = list;
  }

  /**
   * ipc, pid: the container's own namespace, or the node's (host: unless --allow-privileged, refused,
   * as privileged is). Another container's or service's namespace has no counterpart: replicas of
   * two services are not on one node by rule.
   */
  private namespace(kind: 'ipc' | 'pid', v: string): void {
    const at = this.at(kind);
    if (v.startsWith('service:') || v.startsWith('container:')) return this.refuse(at, `${v}: jaco cannot make a replica join another container's ${kind} namespace (replicas of two services are not kept on one node)`);
    if (v === 'host') {
      if (!this.ctx.allowPrivileged) return this.refuse(at, `${kind}: host shares the node's ${kind === 'pid' ? 'processes' : 'IPC'} with the container: refused unless you pass --allow-privileged`);
      if (kind === 'pid') this.container.pid = 'host';
      else this.container.ipc = 'host';
      return;
    }
    if (kind === 'ipc' && (v === 'private' || v === 'shareable')) this.container.ipc = v;
    else if (kind === 'pid' && v === '') return;
    else this.refuse(at, `${kind} ${JSON.stringify(v)} is not one jaco knows (${kind === 'ipc' ? 'private, shareable, host' : 'host'})`);
  }

  /** depends_on: list (service_started) or long form; a dependency the profiles leave out is dropped, as compose drops it. */
  private dependsOn(v: unknown): void {
    const entries: [string, Obj][] = Array.isArray(v) ? v.map((n) => [String(n), {}]) : Object.entries(v as Obj).map(([n, x]) => [n, (x ?? {}) as Obj]);
    const out: NonNullable<ServiceSpec['dependsOn']> = {};
    for (const [name, opts] of entries) {
      const at = this.at('depends_on', ...(Array.isArray(v) ? [entries.findIndex(([n]) => n === name)] : [name]));
      const other = (this.top.services as Obj)[name] as Obj | undefined;
      if (other && !active(other, this.ctx.profiles)) {
        if (opts.required !== false) this.refuse(at, `depends on "${name}", which the chosen profiles leave out`);
        continue;
      }
      const condition = String(opts.condition ?? 'service_started');
      // restart: true — a recreated dependency rolls this service (its spec hash is folded in at apply).
      if (condition === 'service_started' || condition === 'service_healthy' || condition === 'service_completed_successfully') out[this.names.get(name) ?? name] = { condition, ...(opts.restart === true ? { restart: true } : {}) };
      else this.refuse([...at, 'condition'], `${condition} is not supported (service_started, service_healthy and service_completed_successfully are)`);
    }
    if (Object.keys(out).length) this.out.dependsOn = out;
  }

  private envFiles(v: unknown): void {
    const list = (Array.isArray(v) ? v : [v]).map((e) => (isObj(e) ? { path: String(e.path), required: e.required !== false } : { path: String(e), required: true }));
    list.forEach((f, i) => {
      let text: string;
      try {
        text = this.ctx.readFile(this.path(f.path));
      } catch (e) {
        if (f.required) this.refuse(this.at('env_file', ...(Array.isArray(v) ? [i] : [])), `cannot read env_file ${f.path}: ${(e as Error).message}`);
        return;
      }
      this.out.env = { ...this.out.env, ...Object.fromEntries(parseEnvFile(text)) };
    });
  }

  private memory(v: unknown, path: Path): void {
    const b = composeBytes(v);
    if (b === undefined) this.refuse(path, `not a memory size: ${JSON.stringify(v)}`);
    else this.out.resources = { ...this.out.resources, memory: quantity(b) };
  }

  /** storage_opt.size: the replica's scratch disk (resources.disk), booked by placement; other driver options are refused. */
  private storageOpt(o: Obj): void {
    for (const [k, v] of Object.entries(o)) {
      if (k !== 'size') {
        this.refuse(this.at('storage_opt', k), `storage_opt.${k} is not supported: jaco maps size alone (the replica's scratch disk)`);
        continue;
      }
      const b = composeBytes(v);
      if (b === undefined) this.refuse(this.at('storage_opt', 'size'), `not a size: ${JSON.stringify(v)}`);
      else this.out.resources = { ...this.out.resources, disk: quantity(b) };
    }
  }

  private gpus(v: unknown, path: Path): void {
    if (v === 'all') this.out.resources = { ...this.out.resources, gpus: 'all' };
    else if (typeof v === 'number' || /^[0-9]+$/.test(String(v))) this.out.resources = { ...this.out.resources, gpus: Number(v) };
    else if (Array.isArray(v)) this.devices(v, path);
  }

  private devices(list: unknown[], path: Path): void {
    let gpus = 0;
    let all = false;
    const ids: string[] = [];
    list.forEach((d, i) => {
      const dev = d as Obj;
      const caps = ((dev.capabilities as unknown[] | undefined) ?? []).map(String);
      if (!caps.includes('gpu')) return this.refuse([...path, i], `only GPU device requests (capabilities: [gpu]) are supported, got ${JSON.stringify(caps)}`);
      // GPUs by id: placed only on nodes that have each (device_missing), as Docker's DeviceIDs.
      if (dev.device_ids !== undefined) {
        if (dev.count !== undefined) return this.refuse([...path, i, 'count'], 'count and device_ids cannot both be set (Docker takes one or the other)');
        return void ids.push(...(dev.device_ids as unknown[]).map(String));
      }
      // No count means every GPU, as in Docker's device requests.
      if (dev.count === 'all' || dev.count === undefined) all = true;
      else gpus += Number(dev.count);
    });
    if (ids.length && (all || gpus)) return this.refuse(path, 'GPUs asked for both by count and by device_ids: use one');
    if (ids.length) this.out.resources = { ...this.out.resources, gpuIds: [...new Set(ids)] };
    else if (all) this.out.resources = { ...this.out.resources, gpus: 'all' };
    else if (gpus) this.out.resources = { ...this.out.resources, gpus };
  }

  /**
   * devices: host devices given to the container ("/dev/fuse", "/dev/sda:/dev/xvda:rwm", or
   * {source, target, permissions}); placed on nodes that offer each (jaco agent --device). A CDI
   * name (vendor.com/class=name) is refused: nodes offer device paths.
   */
  private hostDevices(list: unknown[]): void {
    const out: string[] = [];
    list.forEach((d, i) => {
      const spec = isObj(d) ? [d.source, d.target, d.permissions].filter((x) => x !== undefined).map(String).join(':') : String(d);
      if (!new RegExp(DEVICE_PATTERN).test(spec)) return this.refuse(this.at('devices', i), `${JSON.stringify(spec)} is not a device path (/dev/host[:/dev/container][:rwm]); a CDI device name is not supported: jaco places on the device paths a node offers (jaco agent --device)`);
      out.push(spec);
    });
    if (out.length) this.container.devices = out;
  }

  private healthcheck(h: Obj): void {
    if (h.disable === true) return;
    const t = h.test;
    let test: string[] | undefined;
    if (typeof t === 'string') test = ['CMD-SHELL', t];
    else if (Array.isArray(t)) {
      if (t[0] === 'NONE') return;
      test = t.map(String);
    }
    if (!test) return;
    const hc: HealthCheck = { test };
    for (const [from, to] of [['interval', 'interval'], ['timeout', 'timeout'], ['start_period', 'startPeriod']] as const) {
      if (h[from] === undefined) continue;
      const d = composeDuration(h[from]);
      if (d) hc[to] = d;
      else this.refuse(this.at('healthcheck', from), `jaco reads durations in h, m, s and ms: got ${JSON.stringify(h[from])}`);
    }
    if (h.retries !== undefined) hc.retries = this.num(h.retries, this.at('healthcheck', 'retries'));
    if (h.start_interval !== undefined) this.warn(this.at('healthcheck', 'start_interval'), 'start_interval is ignored: checks run every interval from the start');
    this.out.healthcheck = hc;
  }

  /**
   * network_mode: `host` is the node's own network; `bridge` (compose's default) is the cluster
   * network, where the service has its own namespace and name. Joining another container's
   * namespace has no counterpart: every replica has a namespace of its own.
   */
  private networkMode(m: string): void {
    const at = this.at('network_mode');
    if (m === 'host' || m === 'bridge' || m === 'default') return;
    if (m === 'none') this.warn(at, 'network_mode none: jaco has no network-less service; it gets the cluster network (a namespace of its own, reached at its name)');
    else if (m.startsWith('service:') || m.startsWith('container:'))
      this.refuse(at, `${m}: jaco cannot make one container join another’s network namespace (every replica has its own); reach ${m.slice(m.indexOf(':') + 1)} at its name instead`);
    else this.warn(at, `network_mode ${m} is not one jaco knows (host, bridge, none): the service gets the cluster network`);
  }

  /**
   * A service's networks: jaco has one cluster network on which every service reaches every other
   * by name, so one network means what it says, several are no isolation; a network's aliases are
   * more names of the service (in its deployment); addresses are jaco's to give.
   */
  private networks(v: unknown): void {
    const at = (...p: (string | number)[]) => this.at('networks', ...p);
    if (this.network === 'host') return this.warn(at(), 'networks: host networking: the service shares its node’s network; services reach each other at their node address and port (docs/compose.md)');
    const entries: [string, Obj][] = Array.isArray(v) ? v.map((n) => [String(n), {}]) : Object.entries(v as Obj).map(([n, x]) => [n, isObj(x) ? x : {}]);
    if (entries.length > 1) this.warn(at(), `networks: jaco does not isolate networks: on the one cluster network every service reaches every other by name (${entries.map(([n]) => n).join(', ')} are one)`);
    for (const [n, opts] of entries)
      for (const k of Object.keys(opts)) {
        if (k === 'aliases') (Array.isArray(opts.aliases) ? opts.aliases : []).forEach((a, i) => this.alias(String(a), at(n, k, i)));
        else if (k === 'ipv4_address' || k === 'ipv6_address') this.warn(at(n, k), `${k} is ignored: jaco allocates each replica’s addresses (docs/networking.md)`);
        else this.warn(at(n, k), `${k} is ignored: jaco has one cluster network`);
      }
  }

  /** hostname: the name a cluster-network replica's namespace has (every replica of the service alike). */
  private hostname(h: string): void {
    const at = this.at('hostname');
    if (this.network === 'host') return this.warn(at, 'hostname: host networking: a container has its node’s host name');
    if (!new RegExp(HOSTNAME_PATTERN).test(h))
      return this.refuse(at, `${JSON.stringify(h)} is not a host name jaco can give a replica: one RFC 1123 label (letters, digits and -, at most 63, not starting or ending with -; no dots)`);
    this.container.hostname = h;
  }

  /** links: on the cluster network a service is found by its name already; an alias is another name, which jaco does not give. */
  private links(list: unknown[]): void {
    if (this.network === 'host') return this.warn(this.at('links'), 'links: host networking: no links; services reach each other at their node address and port');
    list.forEach((l, i) => {
      const [service, alias] = String(l).split(':');
      if (alias !== undefined && alias !== service)
        this.warn(this.at('links', i), `alias ${alias} is not supported: a service is found by its name only (${service}, and ${service}.${this.ctx.project} from other deployments)`);
    });
  }

  /** `ports`, short ("[host_ip:][published:]target[/protocol]", ranges) and long syntax, read. */
  private portEntries(list: unknown[]): PortEntry[] {
    const out: PortEntry[] = [];
    list.forEach((p, i) => {
      const at = this.at('ports', i);
      let target: string;
      let pub: string | undefined;
      let protocol: 'tcp' | 'udp' = 'tcp';
      // The long syntax may name the port and say what it speaks (app_protocol: http makes the
      // ingress proxy requests rather than connections).
      let named: Pick<PortSpec, 'name' | 'appProtocol'> = {};
      let hostIp: Path | undefined;
      if (isObj(p)) {
        target = String(p.target);
        pub = p.published === undefined || p.published === '' ? undefined : String(p.published);
        if (p.protocol === 'udp') protocol = 'udp';
        if (typeof p.name === 'string' && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(p.name)) named = { ...named, name: p.name };
        else if (p.name !== undefined) this.warn([...at, 'name'], `port name ${JSON.stringify(p.name)} is not a jaco name (lowercase letters, digits, -): p<port> is used`);
        if (p.app_protocol !== undefined) named = { ...named, appProtocol: String(p.app_protocol) };
        if (p.host_ip !== undefined) hostIp = [...at, 'host_ip'];
        if (p.mode === 'host') this.warn([...at, 'mode'], 'mode host is ignored: a published port answers on every node’s ingress (mode ingress)');
      } else {
        if (/\/udp$/.test(String(p))) protocol = 'udp';
        const spec = String(p).replace(/\/(tcp|udp|sctp)$/, '');
        const parts = spec.split(':');
        target = parts[parts.length - 1]!;
        pub = parts.length >= 2 && parts[parts.length - 2] !== '' ? parts[parts.length - 2] : undefined;
        if (parts.length === 3) hostIp = at;
      }
      if (hostIp)
        this.warn(hostIp, this.network === 'host' ? 'host networking: a container binds the addresses it chooses; the host IP is ignored' : 'the host IP is ignored: a published port answers on every node’s ingress, at every node’s address');
      const targets = portRange(target);
      const published = pub === undefined ? undefined : portRange(pub);
      if (published && published.length !== targets.length) return this.refuse(at, `${pub}:${target}: the published and container ranges differ in length`);
      // Under host networking `53:53/udp` is the host port 53 itself, not published.
      const routed = this.network === 'cluster' ? published : published?.some((x, k) => x !== targets[k]) ? published : undefined;
      if (routed && protocol === 'udp') return this.refuse(at, `${pub}:${target}/udp: a UDP port cannot be published: the ingress forwards TCP only`);
      out.push({ at, from: 'ports', targets, ...(published ? { published } : {}), protocol, named });
    });
    return out;
  }

  /** `expose` ("80", "8000-8010", "53/udp"): container ports, published nowhere. */
  private exposeEntries(list: unknown[]): PortEntry[] {
    return list.map((e, i) => {
      const s = String(e);
      return { at: this.at('expose', i), from: 'expose', targets: portRange(s.replace(/\/(tcp|udp|sctp)$/, '')), protocol: /\/udp$/.test(s) ? 'udp' : 'tcp', named: {} };
    });
  }

  /**
   * Host networking: the container binds its own port on its node, so `80` and `80:80` are the
   * fixed host port 80 (`53:53/udp` the UDP one). `8080:80` is the routing mesh's contract (Swarm's,
   * and jaco's ingress): port 8080 answers on every node and reaches the replicas, which bind 80 on
   * theirs.
   */
  private hostPorts(entries: PortEntry[]): void {
    const fixed: number[] = [];
    const objects: PortSpec[] = [];
    for (const { targets, published, protocol, named } of entries) {
      const single = targets.length === 1;
      const same = !published || published.every((x, k) => x === targets[k]);
      if (same && protocol === 'tcp' && !Object.keys(named).length) {
        fixed.push(...targets);
        continue;
      }
      targets.forEach((t, k) =>
        objects.push({
          name: (single && named.name) || `p${t}`,
          containerPort: t,
          hostPort: t,
          ...(!same ? { published: published![k]! } : {}),
          ...(protocol === 'udp' ? { protocol } : {}),
          ...(named.appProtocol ? { appProtocol: named.appProtocol } : {}),
        }),
      );
    }
    // `80` beside `8080:80` is the same host port, said twice.
    const numbers = [...new Set(fixed)].filter((n) => !objects.some((q) => q.containerPort === n && q.protocol === undefined));
    this.out.ports = [...numbers, ...objects];
  }

  /**
   * The cluster network: a replica's ports are its own namespace's, so no port is a host port.
   * Every port is a container port, answered at the service's name; `8080:80` also publishes it on
   * every node's ingress (`published`). compose publishes a bare `80` on a random host port: jaco
   * does not (it has no host ports here), and says so. `expose` adds container ports; a port said
   * twice is one.
   */
  private clusterPorts(entries: PortEntry[]): void {
    const out: PortSpec[] = [];
    const tcpOnly = 'the service’s name answers TCP only (its address is the ingress’s); a UDP port is reached at each replica’s own address';
    for (const { at, from, targets, published, protocol, named } of entries) {
      const single = targets.length === 1;
      const said = `${targets[0]}${single ? '' : `-${targets[targets.length - 1]}`}${protocol === 'udp' ? '/udp' : ''}`;
      if (from === 'ports' && !published)
        this.warn(at, `${said}: docker compose would publish it on a random host port, and jaco does not: it is reachable at the service’s name (${this.name}:${targets[0]}); write "P:${targets[0]}" to publish it on every node’s ingress`);
      if (protocol === 'udp') this.warn(at, `${said}: ${tcpOnly}`);
      targets.forEach((t, k) => {
        const pub = published?.[k];
        const i = out.findIndex((q) => q.containerPort === t && (q.protocol ?? 'tcp') === protocol);
        const have = i < 0 ? undefined : out[i]!;
        if (have && (pub === undefined || have.published === pub)) return; // said already
        const port: PortSpec = {
          name: (single && named.name) || (have?.published !== undefined ? `p${t}-${pub}` : `p${t}`),
          containerPort: t,
          ...(pub !== undefined ? { published: pub } : {}),
          ...(protocol === 'udp' ? { protocol } : {}),
          ...(named.appProtocol ? { appProtocol: named.appProtocol } : {}),
        };
        // A container port said bare, then published: one port, published.
        if (have && have.published === undefined) out[i] = { ...port, name: (single && named.name) || have.name };
        else out.push(port);
      });
    }
    // A UDP port beside the TCP port of its number ("53/udp", "53/tcp") needs a name of its own.
    for (const q of out) if (q.protocol === 'udp' && q.name === `p${q.containerPort}` && out.some((o) => o !== q && o.name === q.name)) q.name = `p${q.containerPort}-udp`;
    this.out.ports = out;
  }

  private volumes(list: unknown[]): void {
    const mounts: VolumeMount[] = [];
    const declared = isObj(this.top.volumes) ? this.top.volumes : {};
    list.forEach((v, i) => {
      const at = this.at('volumes', i);
      let type: string;
      let source: string | undefined;
      let target: string;
      let readOnly = false;
      if (isObj(v)) {
        type = String(v.type);
        source = v.source === undefined ? undefined : String(v.source);
        target = String(v.target);
        readOnly = v.read_only === true;
      } else {
        const parts = String(v).split(':');
        if (parts.length === 1) [target] = parts as [string];
        else [source, target] = parts as [string, string];
        const mode = parts[2];
        if (mode) for (const m of mode.split(',')) {
          if (m === 'ro') readOnly = true;
          else if (m !== 'rw') this.warn(at, `volume option ${m} is ignored`);
        }
        type = source && /^[./~]/.test(source) ? 'bind' : 'volume';
      }
      if (type === 'tmpfs') {
        this.container.tmpfs = [...(this.container.tmpfs ?? []), target];
        return;
      }
      // An anonymous volume is the container's own, made and removed with it, as Docker does.
      if (!source && type === 'volume') return void mounts.push({ type: 'anonymous', target, ...(readOnly ? { readOnly } : {}) });
      if (!source) return this.refuse(at, `a ${type} mount needs a source`);
      if (type === 'bind') mounts.push({ type: 'bind', source: this.path(source), target, ...(readOnly ? { readOnly } : {}) });
      else if (type === 'volume') {
        const decl = declared[source];
        if (decl === undefined) return this.refuse(at, `volume "${source}" is not declared under the top-level volumes`);
        if (isObj(decl) && (decl.external === true || (decl.driver !== undefined && decl.driver !== 'local') || decl.driver_opts !== undefined))
          return this.refuse(['volumes', source], 'jaco keeps named volumes on the node that runs the service (local driver); external volumes, other drivers and driver_opts are refused');
        mounts.push({ type: 'volume', source, target, ...(readOnly ? { readOnly } : {}) });
      } else this.refuse(at, `volume type ${type} is not supported (volume, bind and tmpfs are)`);
    });
    if (mounts.length) this.out.volumes = [...(this.out.volumes ?? []), ...mounts];
  }

  /**
   * A service's secrets and configs (short or long syntax) → references to the cluster's objects:
   * to the one a top-level file:, environment: or content: makes (content-derived name), or to an
   * external one by its name. The file appears where compose puts it: /run/secrets/<name> (configs
   * /<name>), or at `target`, with `uid`, `gid` and `mode` (octal).
   */
  private files(list: unknown[], kind: 'secrets' | 'configs'): void {
    const one = kind === 'secrets' ? 'secret' : 'config';
    const refs: FileRef[] = [];
    list.forEach((e, i) => {
      const at = (...x: string[]) => this.at(kind, i, ...x);
      const name = isObj(e) ? String(e.source) : String(e);
      const decl = this.declared[kind].get(name);
      if (!decl) return this.refuse(at(), `${one} "${name}" is not declared under the top-level ${kind}`);
      if (!decl.source) return; // refused where it is declared
      const ref: FileRef = { source: decl.source, target: isObj(e) && e.target !== undefined ? String(e.target) : one === 'secret' ? name : `/${name}` };
      if (isObj(e)) {
        for (const k of ['uid', 'gid'] as const) {
          if (e[k] === undefined) continue;
          const v = String(e[k]);
          if (/^[0-9]+$/.test(v)) ref[k] = Number(v);
          else this.refuse(at(k), `${k} must be a number: jaco does not look ${JSON.stringify(v)} up in the image`);
        }
        if (e.mode !== undefined) {
          const m = typeof e.mode === 'number' ? e.mode : /^0?[0-7]{1,3}$/.test(String(e.mode)) ? parseInt(String(e.mode), 8) : NaN;
          if (Number.isInteger(m) && m >= 0 && m <= 0o777) ref.mode = m;
          else this.refuse(at('mode'), `mode must be octal permission bits (0440, 0400), got ${JSON.stringify(e.mode)}`);
        }
      }
      const bad = fileTargetProblem(one, ref);
      if (bad) return this.refuse(at('target'), bad);
      refs.push(ref);
    });
    if (refs.length) this.out[kind] = [...(this.out[kind] ?? []), ...refs];
  }

  private deploy(d: Obj): void {
    const at = (...p: (string | number)[]) => this.at('deploy', ...p);
    for (const k of Object.keys(d)) {
      if (d[k] === null || d[k] === undefined) continue;
      switch (k) {
        case 'mode':
          if (d.mode === 'global') this.out.placement = { ...this.out.placement, mode: 'global' };
          else if (d.mode === 'replicated-job') this.out.mode = 'job';
          else if (d.mode !== 'replicated') this.refuse(at('mode'), `mode ${String(d.mode)} is not supported (replicated, global and replicated-job are)`);
          break;
        case 'replicas':
          this.out.replicas = this.num(d.replicas, at('replicas'));
          break;
        case 'resources':
          this.resources(d.resources as Obj);
          break;
        case 'placement':
          this.placement(d.placement as Obj);
          break;
        case 'update_config':
          this.update(d.update_config as Obj);
          break;
        case 'restart_policy':
          break; // below: it means something for a job only

        case 'rollback_config':
          this.rollback(d.rollback_config as Obj);
          break;
        case 'labels':
        case 'endpoint_mode':
          this.warn(at(k), `${k} is ignored`);
          break;
        default:
          if (!k.startsWith('x-')) this.refuse(at(k), `deploy.${k} is not supported by jaco`);
      }
    }
    if (this.out.placement?.mode === 'global') delete this.out.replicas;
    if (d.restart_policy !== null && d.restart_policy !== undefined) this.restartPolicy(d.restart_policy as Obj, at('restart_policy'));
  }

  /** A job's retries (max_attempts restarts after the first run, delay before the first); other services: jaco owns restarts. */
  private restartPolicy(r: Obj, at: Path): void {
    if (this.out.mode !== 'job') return this.warn(at, 'jaco owns restarts (health-driven, with back-off; seed 001): restart_policy is ignored');
    const job: NonNullable<ServiceSpec['job']> = {};
    if (r.max_attempts !== undefined) {
      const n = this.num(r.max_attempts, [...at, 'max_attempts']);
      if (n !== undefined) job.attempts = n + 1;
    }
    if (r.delay !== undefined) job.backoff = this.duration(r.delay, [...at, 'delay']);
    if (r.condition !== undefined && r.condition !== 'on-failure') this.warn([...at, 'condition'], `condition ${String(r.condition)} is ignored: a job runs again on failure only`);
    if (r.window !== undefined) this.warn([...at, 'window'], 'window is ignored');
    if (job.attempts !== undefined || job.backoff !== undefined) this.out.job = job;
  }

  private resources(r: Obj): void {
    const limits = (r.limits ?? {}) as Obj;
    const reservations = (r.reservations ?? {}) as Obj;
    const at = (...p: string[]) => this.at('deploy', 'resources', ...p);
    const cpus = limits.cpus ?? reservations.cpus;
    if (cpus !== undefined) this.out.resources = { ...this.out.resources, cpu: typeof cpus === 'number' ? cpus : String(cpus) };
    if (limits.cpus !== undefined && reservations.cpus !== undefined && String(limits.cpus) !== String(reservations.cpus))
      this.warn(at('reservations', 'cpus'), 'jaco books and caps one CPU figure: limits.cpus is used');
    if (limits.memory !== undefined) this.memory(limits.memory, at('limits', 'memory'));
    else if (reservations.memory !== undefined) this.memory(reservations.memory, at('reservations', 'memory'));
    if (limits.memory !== undefined && reservations.memory !== undefined) this.warn(at('reservations', 'memory'), 'jaco books and enforces one memory figure: limits.memory is used');
    if (limits.pids !== undefined) this.warn(at('limits', 'pids'), 'pids limits are ignored');
    if (reservations.devices !== undefined) this.devices(reservations.devices as unknown[], at('reservations', 'devices'));
    if (reservations.generic_resources !== undefined) this.refuse(at('reservations', 'generic_resources'), 'generic_resources are not supported');
  }

  private placement(p: Obj): void {
    const at = (...x: (string | number)[]) => this.at('deploy', 'placement', ...x);
    const placement: Placement = { ...this.out.placement };
    ((p.constraints as unknown[] | undefined) ?? []).forEach((c, i) => {
      const m = /^\s*node\.(hostname|labels\.([^\s=!]+)|role|platform\.\S+|id)\s*(==|!=)\s*(\S+)\s*$/.exec(String(c));
      if (!m) return this.refuse(at('constraints', i), `cannot read the constraint ${JSON.stringify(c)}`);
      const [, what, label, op, value] = m;
      if (op === '!=') return this.refuse(at('constraints', i), `${String(c)}: jaco selects nodes by equality only (node.hostname == X, node.labels.K == V)`);
      if (what === 'hostname') placement.hosts = [...(placement.hosts ?? []), value!];
      else if (label) placement.nodeSelector = { ...placement.nodeSelector, [label]: value! };
      else this.refuse(at('constraints', i), `${String(c)}: jaco has no node ${what}; use node.labels`);
    });
    if (placement.hosts?.length && placement.mode !== 'global') placement.mode = 'hosts';
    if (p.max_replicas_per_node !== undefined) placement.maxPerNode = Number(p.max_replicas_per_node);
    if (p.preferences !== undefined) this.warn(at('preferences'), 'placement preferences are ignored: spread balances replicas over nodes');
    if (Object.keys(placement).length) this.out.placement = placement;
  }

  /** A compose duration field, or a refusal naming it. */
  private duration(v: unknown, path: Path): string | undefined {
    const d = composeDuration(v);
    if (!d) this.refuse(path, `must be a duration such as 10s or 1m30s, got ${JSON.stringify(v)}`);
    return d;
  }

  /** What update_config and rollback_config share (Swarm's pace of steps): parallelism, delay, order. */
  private pace(o: Obj, at: (...x: string[]) => Path): NonNullable<UpdatePolicy['rollback']> {
    const out: NonNullable<UpdatePolicy['rollback']> = {};
    if (o.parallelism !== undefined) {
      const n = this.num(o.parallelism, at('parallelism'));
      if (n !== undefined) out.parallelism = n;
    }
    if (o.delay !== undefined) {
      const d = this.duration(o.delay, at('delay'));
      if (d) out.delay = d;
    }
    if (o.order !== undefined) out.order = o.order === 'start-first' ? 'start-first' : 'stop-first';
    return out;
  }

  /** deploy.update_config → update (docs/rollout.md). Swarm steps `parallelism` tasks at once; in
   *  jaco every replica mid-step counts against the one disruption budget, so maxUnavailable follows. */
  private update(u: Obj): void {
    const at = (...x: string[]) => this.at('deploy', 'update_config', ...x);
    const update: UpdatePolicy = { ...this.out.update };
    const { parallelism: n, delay, order } = this.pace(u, at);
    if (order) update.order = order;
    if (n !== undefined) {
      update.parallelism = n;
      if (n !== 1) update.maxUnavailable = n === 0 ? '100%' : n;
    }
    if (delay) update.delay = delay;
    if (u.monitor !== undefined) {
      const d = this.duration(u.monitor, at('monitor'));
      if (d) update.monitor = d;
    }
    if (u.failure_action !== undefined) {
      const a = String(u.failure_action);
      if (a === 'rollback' || a === 'pause' || a === 'continue') update.failureAction = a;
      else this.refuse(at('failure_action'), `failure_action ${a} is not one of rollback, pause, continue`);
    }
    if (u.max_failure_ratio !== undefined) {
      const r = this.num(u.max_failure_ratio, at('max_failure_ratio'));
      if (r !== undefined) update.maxFailureRatio = r;
    }
    if (Object.keys(update).length) this.out.update = update;
  }

  /** deploy.rollback_config → update.rollback: how the revert after a failed rollout goes. */
  private rollback(r: Obj): void {
    const at = (...x: string[]) => this.at('deploy', 'rollback_config', ...x);
    const rollback = this.pace(r, at);
    for (const k of ['failure_action', 'monitor', 'max_failure_ratio'])
      if (r[k] !== undefined) this.warn(at(k), `${k} is ignored: a reverted replica that does not come back within the step timeout is left and the revert goes on`);
    if (Object.keys(rollback).length) this.out.update = { ...this.out.update, rollback };
  }

  /**
   * build → build: jaco apply builds it with the operator's engine and pushes it to the cluster's
   * registry (docs/images.md). Without `image:` the image is named <project>-<service>, as compose
   * names it. What the engine's build API takes is mapped; the rest is said.
   */
  private build(v: unknown): void {
    const b: Obj = typeof v === 'string' ? { context: v } : isObj(v) ? v : {};
    const at = (...x: string[]) => this.at('build', ...x);
    const build: NonNullable<ServiceSpec['build']> = { context: this.path(String(b.context ?? '.')) };
    if (b.dockerfile !== undefined) build.dockerfile = String(b.dockerfile);
    if (b.args !== undefined) build.args = listOrMap(b.args);
    if (b.target !== undefined) build.target = String(b.target);
    if (b.labels !== undefined) build.labels = listOrMap(b.labels);
    if (b.no_cache !== undefined) build.noCache = !!b.no_cache;
    if (b.pull !== undefined) build.pull = !!b.pull;
    if (b.dockerfile_inline !== undefined) this.refuse(at('dockerfile_inline'), 'write the Dockerfile into the build context and name it with dockerfile:');
    if (typeof b.context === 'string' && /^[a-z]+:\/\//.test(b.context)) this.refuse(at('context'), 'a remote build context (URL) is not supported: clone it and give its directory');
    for (const k of Object.keys(b)) {
      if (['context', 'dockerfile', 'args', 'target', 'labels', 'no_cache', 'pull', 'dockerfile_inline'].includes(k)) continue;
      this.warn(at(k), `build.${k} is ignored: jaco builds with the operator's engine from context, dockerfile, args, target, labels, no_cache and pull`);
    }
    // x-jaco.registry (the service's, else the file's top-level one): where this build is pushed.
    const xs = isObj(this.svc['x-jaco']) ? this.svc['x-jaco'] : {};
    const xt = isObj(this.top['x-jaco']) ? this.top['x-jaco'] : {};
    const registry = xs.registry ?? xt.registry;
    if (registry !== undefined) build.registry = String(registry);
    this.out.build = build;
    if (this.svc.image === undefined) this.out.image = `${this.ctx.project}-${this.jacoName}`;
  }

  /** pull_policy → pullPolicy (if_not_present is compose's older word for missing). */
  private pullPolicy(v: unknown): void {
    const p = String(v);
    if (p === 'always' || p === 'never' || p === 'missing' || p === 'build') this.out.pullPolicy = p;
    else if (p === 'if_not_present') this.out.pullPolicy = 'missing';
    else if (/^(daily|weekly|every_)/.test(p)) {
      this.out.pullPolicy = 'always';
      this.warn(this.at('pull_policy'), `${p}: jaco resolves images at apply, so it is taken as always (resolved at every apply and rollout restart)`);
    } else this.refuse(this.at('pull_policy'), `${p} is not one of always, never, missing, build`);
    if (this.out.pullPolicy === 'build' && this.svc.build === undefined) this.refuse(this.at('pull_policy'), 'pull_policy build needs a build: section');
  }

  private xJaco(x: Obj): void {
    if (isObj(x.placement)) this.out.placement = { ...this.out.placement, ...(x.placement as Placement) };
    if (x.priority !== undefined) this.out.priority = this.num(x.priority, this.at('x-jaco', 'priority'));
    if (x.rebalance !== undefined) this.out.rebalance = x.rebalance === 'disabled' ? 'disabled' : 'enabled';
    if (isObj(x.update)) this.out.update = { ...this.out.update, ...(x.update as UpdatePolicy) };
    if (x.registry !== undefined && this.svc.build === undefined) this.warn(this.at('x-jaco', 'registry'), 'x-jaco.registry is where a build is pushed, and this service builds nothing: it is ignored');
  }
}

/** Whether a service is part of the application under the chosen profiles (compose's rule). */
function active(svc: Obj, profiles: readonly string[]): boolean {
  const p = svc.profiles;
  return !Array.isArray(p) || p.length === 0 || p.some((x) => profiles.includes(String(x)) || profiles.includes('*'));
}

/** Why top-level networks are ignored: one cluster network without isolation, or none at all (every service on its node's). */
function topLevelNetworks(services: ServiceSpec[]): string {
  return services.some((s) => s.network === 'cluster')
    ? 'networks: jaco does not isolate networks: every service on the cluster network reaches every other by name; top-level networks (external ones too) are ignored'
    : 'networks: every service runs with host networking (network_mode: host): top-level networks are ignored';
}

/** Maps a compose application (interpolated, schema-valid) to a Deployment spec. */
export function mapCompose(app: Obj, ctx: MapContext): Mapped {
  const issues: ComposeIssue[] = [];
  const services: Record<string, ServiceSpec> = {};
  const objects: ComposeObject[] = [];
  const activeServices = Object.entries((app.services ?? {}) as Obj)
    .map(([n, raw]): [string, Obj] => [n, (raw ?? {}) as Obj])
    .filter(([, svc]) => active(svc, ctx.profiles));
  const declared = declaredFiles(app, ctx, filesReferred(activeServices), issues, objects);
  const names = serviceNames(activeServices.map(([n]) => n), issues);
  for (const [name, svc] of activeServices) {
    if (!names.has(name)) continue;
    services[names.get(name)!] = new ServiceMapper(name, svc, app, ctx, issues, declared, names).map();
  }
  // A service others wait on with service_completed_successfully runs to completion: a job, as in compose.
  for (const svc of Object.values(services))
    for (const [dep, { condition }] of Object.entries(svc.dependsOn ?? {})) if (condition === 'service_completed_successfully' && services[dep]) services[dep].mode = 'job';
  if (!Object.keys(services).length && !issues.some((i) => i.severity === 'refuse'))
    issues.push({ path: ['services'], severity: 'refuse', message: `no service is active${ctx.profiles.length ? ` with profile(s) ${ctx.profiles.join(', ')}` : ' (every service has profiles: name one with --profile)'}` });
  for (const k of Object.keys(app)) {
    if (['services', 'name', 'version', 'volumes', 'secrets', 'configs'].includes(k) || k.startsWith('x-')) continue;
    if (k === 'networks') issues.push({ path: [k], severity: 'warn', message: topLevelNetworks(Object.values(services)) });
    else issues.push({ path: [k], severity: 'refuse', message: `${k} is not supported by jaco` });
  }
  if (app.version !== undefined) issues.push({ path: ['version'], severity: 'warn', message: 'version is obsolete (the Compose Specification ignores it)' });
  return { spec: { services }, issues, objects, composeNames: new Map([...names].map(([c, j]) => [j, c])) };
}

/**
 * A compose service name as a jaco name: lowercase, every run of characters jaco names do not
 * have (`_`, `.`) one `-`, none at either end: `web_app` and `Web.App` are `web-app`.
 */
export function jacoServiceName(compose: string): string {
  return compose
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** Each service's jaco name; a name that maps to nothing, or to another's, is refused (naming both). */
function serviceNames(list: string[], issues: ComposeIssue[]): Map<string, string> {
  const out = new Map<string, string>();
  const taken = new Map<string, string>();
  for (const name of list) {
    const jaco = jacoServiceName(name);
    if (!jaco) {
      issues.push({ path: ['services', name], severity: 'refuse', message: `service name "${name}" has no letter or digit to make a jaco name of: rename it` });
      continue;
    }
    const other = taken.get(jaco);
    if (other !== undefined) {
      issues.push({ path: ['services', name], severity: 'refuse', message: `services "${other}" and "${name}" are both "${jaco}" as jaco names (lowercase letters, digits and -): rename one` });
      out.delete(other);
      continue;
    }
    taken.set(jaco, name);
    out.set(name, jaco);
  }
  return out;
}
