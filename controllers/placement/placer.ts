// The placement core: which node a replica goes to, and why. Pure and deterministic (nodes are
// ordered by name, ties broken by name; inputs in any order give the same answer). The scheduler
// places new replicas with it, the drain controller finds a move's destination with it, and the
// rebalancer checks destinations with its filters: one code path for placing and moving.
//
// Pipeline, per node, in this order (the first failing filter is the node's recorded reason):
//   eligibility      — NotReady/cordoned/draining nodes are out before anything is computed
//   excluded         — the caller's exclusions (a move's source)
//   hosts, node_selector — the operator's explicit constraints, cheapest first
//   runtime, devices — what the node's engine and host offer (its capacity's runtimes, devices
//                      and GPU ids): fixed facts of the node, so before anything it holds
//   volume_locality  — the node that holds the service's named volumes
//   degraded         — a node its agent's samples call degraded (src/api/eligibility.ts) takes no
//                      new placements unless an operator trusts it (seed 004); after the operator's
//                      constraints, so a service pinned to a degraded node says node_degraded
//   volume_in_use    — one writer per named volume (seed 004): no second replica attaches a volume
//                      another holds when either mount is read-write
//   memory, gpus     — hard capacity (seed 004: memory is never overcommitted)
//   disk             — scratch disk, booked like memory against the node's data-root filesystem
//                      (seed 004: resources.disk, else the cluster's default_instance_ephemeral_disk)
//   ports            — host ports are a per-node resource under host networking (fixed ones
//                      free, and enough of the dynamic range free for the rest)
//   ipam             — a cluster-network replica needs a free address of the node's subnets
//                      (seed 004 placement step 5; assignAddress takes it after the choice)
//   max_per_node     — placement.maxPerNode, a hard cap per node
//   anti_affinity    — one replica of a service per node: hard for hosts, for spread only while
//                      some node allows it (seed 004: "prefer unique nodes until capacity forces")
// Survivors are scored by mode: spread/hosts lexicographically by (fewest replicas of the service
// already there, fewest recent restarts on the node — seed 004's failure de-prioritization —, CPU
// headroom in quarter steps, rendezvous hash of deployment/service/index), pack by fewest
// replicas; the best total wins.
import { cpuMillis, formatBytes, memoryBytes } from '../../src/api/units.js';
import { DEFAULT_NODE_SETTINGS } from '../../src/api/eligibility.js';
import { namedVolumes, placementMode } from '../../src/api/spec.js';
import { assignHostPorts, DEFAULT_PORT_RANGE, dynamicPortNames, fixedHostPorts } from '../../src/api/ports.js';
import type { Capacity, NodeVerdict, PlacementMode, PortRange, ReplicaAddress, ServiceSpec } from '../../src/api/types.js';
import { hostNumbers } from '../../src/api/network.js';
import { chooseAddress } from './ipam.js';
import { FILTER_ORDER, FILTER_REASON, type FilterName, type UnschedulableReason } from '../../src/api/reasons/scheduling.js';

const MiB = 1024 * 1024;

/** The host side of a device mapping ("/dev/fuse", "/dev/sda:/dev/xvda:r" → "/dev/sda"). */
export const hostDevice = (mapping: string): string => mapping.split(':')[0]!;

export interface PlacementConfig {
  /** CPU is soft: a node's CPU is scored against capacity × this ratio (seed 004: 4.0). */
  cpuOvercommit: number;
  /** Memory accounted per replica on top of its request (runtime overhead; seed 004). */
  memoryOverheadBytes: number;
  /** Up to this many nodes every verdict is kept in a decision; beyond, a summary. */
  explainNodes: number;
}

export const DEFAULT_PLACEMENT_CONFIG: PlacementConfig = { cpuOvercommit: 4, memoryOverheadBytes: 32 * MiB, explainNodes: 64 };

export interface NodeInfo {
  name: string;
  capacity: Capacity;
  labels: Record<string, string>;
  /** Why the node takes no new placements (NotReady, cordoned, draining…); absent when eligible. */
  ineligible?: string;
  /** Why it is degraded and untrusted (eligibility.ts degradedBecause); absent when it is not. */
  degraded?: string;
  /** Where dynamic host ports are assigned from (default DEFAULT_PORT_RANGE). */
  portRange?: PortRange;
  /** Health restarts of replicas on the node within the recent-failure window (placement/input.ts). */
  recentFailures?: number;
  /** Its subnets of the cluster network (subnets/<node>); absent: none given yet. */
  subnets?: { ipv4: string; ipv6: string };
}

/** Recent failures on a node count against it up to this many (the score stays bounded). */
export const MAX_FAILURE_PENALTY = 4;

/** A replica that occupies a node (every desired key counts, both copies of a moving replica). */
export interface PlacedReplica {
  id: string;
  deployment: string;
  service: string;
  node: string;
  cpuMillis: number;
  memoryBytes: number;
  /** A count, or every GPU of the node ("all": needs at least one, and all of them free). */
  gpus: number | 'all';
  /** Scratch disk its service asks for (resources.disk); absent: the cluster's default, applied by the placer. */
  diskBytes?: number;
  ports: number[];
  /** Named volumes it mounts (scoped to its deployment), and whether read-only. */
  volumes?: { source: string; readOnly: boolean }[];
}

export interface PlacementInput {
  nodes: NodeInfo[];
  placed: PlacedReplica[];
  /** Host numbers of each node's subnets that are claimed (addresses/<node>/<n>): never given again while claimed. */
  claimed?: ReadonlyMap<string, ReadonlySet<number>>;
  /** Home node of each named volume, keyed "<deployment>/<volume>". */
  volumeHomes: Record<string, string>;
  /** Scratch disk booked for a replica whose service sets no resources.disk (default 4Gi; config/nodes). */
  defaultDiskBytes?: number;
}

export interface PlacementRequest {
  replica: string;
  deployment: string;
  service: string;
  /** The service spec (defaults applied or not). */
  spec: ServiceSpec;
  /** Position in the service: the rendezvous-hash key, so an index keeps choosing the same node. */
  index?: number;
  /** Nodes that must not be chosen (e.g. the source of a move). */
  exclude?: string[];
  /** Nodes held for another replica, with why (a hole coalescing made for a pending service): excluded too. */
  held?: Readonly<Record<string, string>>;
}

export interface Decision {
  replica: string;
  deployment: string;
  service: string;
  mode: PlacementMode;
  chosen?: string;
  reason?: UnschedulableReason;
  why: string;
  verdicts: NodeVerdict[];
  /** On large clusters: rejections not listed in verdicts, by filter. */
  omitted?: Record<string, number>;
}

export interface Rejection {
  filter: FilterName;
  reason: UnschedulableReason;
  detail: string;
}

type Footprint = Pick<PlacedReplica, 'cpuMillis' | 'memoryBytes' | 'gpus' | 'diskBytes' | 'ports' | 'volumes'>;
// Parsing quantities is most of a what-if's cost (coalescing orders every node's replicas by size):
// a spec stored in the cache never changes (informers replace objects), so its answer is kept.
const footprints = new WeakMap<ServiceSpec, Readonly<Footprint>>();

/** The resources a replica of this spec occupies (shared: never edit the result). GPUs asked for by id count as that many. */
export function footprintOf(spec: ServiceSpec): Readonly<Footprint> {
  let f = footprints.get(spec);
  if (!f) {
    const volumes = namedVolumes(spec).map((v) => ({ source: v.source, readOnly: !!v.readOnly }));
    const disk = spec.resources?.disk;
    footprints.set(spec, (f = { cpuMillis: cpuMillis(spec.resources?.cpu), memoryBytes: memoryBytes(spec.resources?.memory), gpus: spec.resources?.gpus ?? spec.resources?.gpuIds?.length ?? 0, ...(disk !== undefined ? { diskBytes: memoryBytes(disk) } : {}), ports: fixedHostPorts(spec), ...(volumes.length ? { volumes } : {}) }));
  }
  return f;
}

// 32-bit FNV-1a and a finalising mix: cheap enough to hash every (replica, node) pair of a
// 10,000 × 1,000 placement.
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
function mix(a: number, b: number): number {
  let h = (a ^ Math.imul(b, 0x9e3779b1)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 0x100000000;
}

/** Per-request constants, computed once per placement. */
interface Req {
  r: PlacementRequest;
  mode: PlacementMode;
  hosts?: Set<string>;
  selector: [string, string][];
  /** The Docker runtime it needs (container.runtime). */
  runtime?: string;
  /** Host devices it needs (the host side of container.devices). */
  devices: string[];
  /** GPUs it needs by id (resources.gpuIds). */
  gpuIds: string[];
  /** Node index every named volume lives on; -1 none yet; -2 the volumes live apart. */
  home: number;
  homeName?: string;
  mem: number;
  disk: number;
  cpu: number;
  gpus: number | 'all';
  ports: number[];
  /** Its named volumes, keyed "<deployment>/<volume>", and whether read-only. */
  volumes: { key: string; source: string; readOnly: boolean }[];
  /** How many host ports the scheduler assigns it from the node's range (assignPorts). */
  dynamicPorts: number;
  /** A cluster-network replica: it needs an address of the node's subnets (assignAddress). */
  needsAddress: boolean;
  maxPerNode: number;
  svc: string;
  svcCounts: Int32Array;
  excluded: Set<number>;
  /** Why an excluded node is held for another replica (the caller's own exclusions have no entry). */
  heldWhy: Map<number, string>;
  hashKey: number;
}

const round = (x: number) => Math.round(x * 1000) / 1000;
const sameCapacity = (a: Capacity, b: Capacity) => a.cpuMillis === b.cpuMillis && a.memoryBytes === b.memoryBytes && a.gpus === b.gpus && a.diskBytes === b.diskBytes;

export class Placer {
  readonly names: string[];
  private readonly index = new Map<string, number>();
  private nodes: NodeInfo[];
  private readonly memUsed: Float64Array;
  private readonly cpuUsed: Float64Array;
  private readonly gpuUsed: Float64Array;
  private readonly diskUsed: Float64Array;
  /** Scratch disk of a replica whose service sets none. */
  readonly defaultDiskBytes: number;
  private readonly count: Int32Array;
  private readonly ports: Map<number, number>[];
  /** Per node, the host numbers of its subnets that are claimed or given this pass. */
  private readonly addressesTaken: Set<number>[];
  /** Per node, how many addresses of its subnets are free (the ipam filter runs for every node of every request: O(1) here). */
  private readonly addressesFree: Int32Array;
  /** Replicas per node of each service ("<deployment>/<service>" → count by node index). */
  private readonly svcCount = new Map<string, Int32Array>();
  private readonly nodeHash: number[];
  private readonly placed = new Map<string, PlacedReplica[]>();
  /** Per node: the replicas attaching each named volume ("<deployment>/<volume>"), and how. */
  private readonly attached: Map<string, { id: string; readOnly: boolean }[]>[];
  private readonly volumeHomes: Record<string, string>;
  /** While a pass borrows a kept placer (kept.ts): how to undo each of its edits, newest last. */
  private journal?: (() => void)[];

  constructor(input: PlacementInput, readonly config: PlacementConfig = DEFAULT_PLACEMENT_CONFIG) {
    this.nodes = [...input.nodes].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.names = this.nodes.map((n) => n.name);
    this.names.forEach((n, i) => this.index.set(n, i));
    const n = this.nodes.length;
    this.memUsed = new Float64Array(n);
    this.cpuUsed = new Float64Array(n);
    this.gpuUsed = new Float64Array(n);
    this.diskUsed = new Float64Array(n);
    this.defaultDiskBytes = input.defaultDiskBytes ?? DEFAULT_NODE_SETTINGS.defaultDiskBytes;
    this.count = new Int32Array(n);
    this.ports = Array.from({ length: n }, () => new Map());
    this.addressesTaken = this.names.map((name) => new Set(input.claimed?.get(name) ?? []));
    this.addressesFree = Int32Array.from(this.nodes, (node, i) => {
      if (!node.subnets) return 0;
      const { first, last } = hostNumbers(node.subnets.ipv4);
      let held = 0;
      for (const x of this.addressesTaken[i]!) if (x >= first && x <= last) held++;
      return last - first + 1 - held;
    });
    this.attached = Array.from({ length: n }, () => new Map());
    this.nodeHash = this.names.map(fnv1a);
    this.volumeHomes = { ...input.volumeHomes };
    for (const p of input.placed) this.assume(p);
  }

  /** Counts a replica against its node (later placements in this pass see it). */
  assume(p: PlacedReplica): void {
    this.add(p);
    this.journal?.push(() => this.forget(p.id, p.node));
  }

  private add(p: PlacedReplica, at?: number): void {
    const i = this.index.get(p.node);
    if (i === undefined) return; // a replica on an unknown node occupies nothing we place on
    this.memUsed[i]! += p.memoryBytes + this.config.memoryOverheadBytes;
    this.cpuUsed[i]! += p.cpuMillis;
    this.gpuUsed[i]! += this.gpusOn(i, p.gpus);
    this.diskUsed[i]! += p.diskBytes ?? this.defaultDiskBytes;
    this.count[i]!++;
    for (const port of p.ports) this.ports[i]!.set(port, (this.ports[i]!.get(port) ?? 0) + 1);
    for (const v of p.volumes ?? []) {
      const k = `${p.deployment}/${v.source}`;
      this.attached[i]!.set(k, [...(this.attached[i]!.get(k) ?? []), { id: p.id, readOnly: v.readOnly }]);
    }
    this.serviceCounts(`${p.deployment}/${p.service}`)[i]!++;
    const list = this.placed.get(p.node) ?? [];
    if (at === undefined) list.push(p);
    else list.splice(at, 0, p);
    this.placed.set(p.node, list);
  }

  /** Takes a replica off its node (a removal planned in the same pass). */
  forget(id: string, node: string): void {
    const i = this.index.get(node);
    const list = this.placed.get(node);
    const at = list?.findIndex((p) => p.id === id) ?? -1;
    if (i === undefined || !list || at < 0) return;
    const [p] = list.splice(at, 1);
    // Undone where it was: the kept placer's state stays the one a fresh build gives.
    this.journal?.push(() => this.add(p!, at));
    this.memUsed[i]! -= p!.memoryBytes + this.config.memoryOverheadBytes;
    this.cpuUsed[i]! -= p!.cpuMillis;
    this.gpuUsed[i]! -= this.gpusOn(i, p!.gpus);
    this.diskUsed[i]! -= p!.diskBytes ?? this.defaultDiskBytes;
    this.count[i]!--;
    for (const port of p!.ports) {
      const c = (this.ports[i]!.get(port) ?? 1) - 1;
      if (c) this.ports[i]!.set(port, c);
      else this.ports[i]!.delete(port);
    }
    for (const v of p!.volumes ?? []) {
      const k = `${p!.deployment}/${v.source}`;
      const left = (this.attached[i]!.get(k) ?? []).filter((a) => a.id !== p!.id);
      if (left.length) this.attached[i]!.set(k, left);
      else this.attached[i]!.delete(k);
    }
    this.serviceCounts(`${p!.deployment}/${p!.service}`)[i]!--;
  }

  /**
   * Starts recording this placer's edits (a pass borrowing a kept placer: assume, forget, ports,
   * addresses, volume homes), so that rollback() gives back the placer as it was lent.
   */
  mark(): void {
    this.journal = [];
  }

  /** Undoes every edit since mark(), newest first, and stops recording. */
  rollback(): void {
    const journal = this.journal;
    this.journal = undefined;
    for (let k = (journal?.length ?? 0) - 1; k >= 0; k--) journal![k]!();
  }

  /**
   * Takes fresh facts about the same nodes (eligibility, labels, recent failures, port range: what
   * changes with time and with nodes/, drains/, heartbeats/ and commands/). False when the nodes
   * differ in what the occupancy was counted against (names, capacity, subnets): build afresh then.
   */
  refreshNodes(infos: readonly NodeInfo[]): boolean {
    if (infos.length !== this.nodes.length) return false;
    const sorted = [...infos].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (let i = 0; i < sorted.length; i++) {
      const [a, b] = [sorted[i]!, this.nodes[i]!];
      if (a.name !== b.name || !sameCapacity(a.capacity, b.capacity) || a.subnets?.ipv4 !== b.subnets?.ipv4 || a.subnets?.ipv6 !== b.subnets?.ipv6) return false;
    }
    for (let i = 0; i < sorted.length; i++) this.nodes[i] = sorted[i]!;
    return true;
  }

  /** An address claim of a node's subnets appeared or went (addresses/<node>/<n>), as a fresh build would count it. */
  setClaimed(node: string, hostNumber: number, claimed: boolean): void {
    const i = this.index.get(node);
    if (i === undefined || this.addressesTaken[i]!.has(hostNumber) === claimed) return;
    if (claimed) this.addressesTaken[i]!.add(hostNumber);
    else this.addressesTaken[i]!.delete(hostNumber);
    const subnets = this.nodes[i]!.subnets;
    if (!subnets) return;
    const { first, last } = hostNumbers(subnets.ipv4);
    if (hostNumber >= first && hostNumber <= last) this.addressesFree[i]! += claimed ? -1 : 1;
  }

  /** Everything the placer accounts, in a canonical form (a kept placer is proved equal to a fresh build with it). */
  state(): unknown {
    const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
    return {
      nodes: this.nodes.map((n, i) => ({
        ...n,
        mem: this.memUsed[i],
        cpu: this.cpuUsed[i],
        gpu: this.gpuUsed[i],
        count: this.count[i],
        ports: [...this.ports[i]!].sort((a, b) => a[0] - b[0]),
        addressesTaken: [...this.addressesTaken[i]!].sort((a, b) => a - b),
        addressesFree: this.addressesFree[i],
        attached: [...this.attached[i]!].map(([k, v]) => [k, [...v].sort((a, b) => byName(a.id, b.id))] as const).sort((a, b) => byName(a[0], b[0])),
        placed: (this.placed.get(n.name) ?? []).map((p) => JSON.stringify(p)).sort(),
      })),
      services: [...this.svcCount].filter(([, c]) => c.some((x) => x !== 0)).map(([k, c]) => [k, [...c]] as const).sort((a, b) => byName(a[0], b[0])),
      volumeHomes: Object.entries(this.volumeHomes).sort((a, b) => byName(a[0], b[0])),
    };
  }

  private serviceCounts(key: string): Int32Array {
    let m = this.svcCount.get(key);
    if (!m) this.svcCount.set(key, (m = new Int32Array(this.names.length)));
    return m;
  }

  /**
   * Records the home node of a named volume chosen in this pass (the first placement of a service
   * with volumes), so later requests of the same pass are held to it.
   */
  recordVolumeHome(deployment: string, volume: string, node: string): void {
    const k = `${deployment}/${volume}`;
    const was = this.volumeHomes[k];
    this.journal?.push(() => (was === undefined ? delete this.volumeHomes[k] : (this.volumeHomes[k] = was)));
    this.volumeHomes[k] = node;
  }

  /** Replicas of a service per node (names), as the placer currently accounts them. */
  serviceCount(deployment: string, service: string, node: string): number {
    const i = this.index.get(node);
    return i === undefined ? 0 : (this.svcCount.get(`${deployment}/${service}`)?.[i] ?? 0);
  }

  replicaCount(node: string): number {
    const i = this.index.get(node);
    return i === undefined ? 0 : this.count[i]!;
  }

  /** GPUs a replica takes on node i: its count, or every GPU of the node. */
  private gpusOn(i: number, gpus: number | 'all'): number {
    return gpus === 'all' ? this.nodes[i]!.capacity.gpus : gpus;
  }

  /** Memory (with overhead counted) and GPUs left on a node, as the placer accounts them now. */
  headroom(node: string): { memoryBytes: number; gpus: number } {
    const i = this.index.get(node);
    if (i === undefined) return { memoryBytes: 0, gpus: 0 };
    const c = this.nodes[i]!.capacity;
    return { memoryBytes: c.memoryBytes - this.memUsed[i]!, gpus: c.gpus - this.gpuUsed[i]! };
  }

  /** What one replica of this spec takes on a node, overhead included. */
  needs(spec: ServiceSpec, node: string): { memoryBytes: number; gpus: number } {
    const f = footprintOf(spec);
    const i = this.index.get(node);
    return { memoryBytes: f.memoryBytes + this.config.memoryOverheadBytes, gpus: i === undefined ? 0 : this.gpusOn(i, f.gpus) };
  }

  private prepare(r: PlacementRequest): Req {
    const mode = placementMode(r.spec);
    const f = footprintOf(r.spec);
    let home = -1;
    let homeName: string | undefined;
    for (const v of r.spec.volumes ?? []) {
      if (v.type !== 'volume') continue;
      const h = this.volumeHomes[`${r.deployment}/${v.source}`];
      if (h === undefined) continue;
      const hi = this.index.get(h) ?? -3;
      if (home === -1) {
        home = hi;
        homeName = h;
      } else if (home !== hi) home = -2;
    }
    return {
      r,
      mode,
      hosts: mode === 'hosts' ? new Set(r.spec.placement?.hosts ?? []) : undefined,
      selector: Object.entries(r.spec.placement?.nodeSelector ?? {}),
      runtime: r.spec.container?.runtime,
      devices: (r.spec.container?.devices ?? []).map(hostDevice),
      gpuIds: r.spec.resources?.gpuIds ?? [],
      home,
      homeName,
      mem: f.memoryBytes + this.config.memoryOverheadBytes,
      disk: f.diskBytes ?? this.defaultDiskBytes,
      cpu: f.cpuMillis,
      gpus: f.gpus,
      ports: f.ports,
      volumes: (f.volumes ?? []).map((v) => ({ key: `${r.deployment}/${v.source}`, ...v })),
      dynamicPorts: dynamicPortNames(r.spec).length,
      needsAddress: r.spec.network === 'cluster',
      maxPerNode: r.spec.placement?.maxPerNode ?? Infinity,
      svc: `${r.deployment}/${r.service}`,
      svcCounts: this.serviceCounts(`${r.deployment}/${r.service}`),
      excluded: new Set([...(r.exclude ?? []), ...Object.keys(r.held ?? {})].map((x) => this.index.get(x)).filter((x): x is number => x !== undefined)),
      heldWhy: new Map(Object.entries(r.held ?? {}).flatMap(([n, why]) => (this.index.has(n) ? [[this.index.get(n)!, why] as const] : []))),
      hashKey: fnv1a(`${r.deployment}/${r.service}/${r.index ?? r.replica}`),
    };
  }

  /** The first hard filter node i fails, or undefined. */
  private failing(q: Req, i: number, antiAffinity: boolean): FilterName | undefined {
    const node = this.nodes[i]!;
    if (node.ineligible) return 'eligibility';
    if (q.excluded.size && q.excluded.has(i)) return 'excluded';
    if (q.hosts && !q.hosts.has(node.name)) return 'hosts';
    // Indexed loops: this runs for every (request, node) pair, and most requests have no selector or ports.
    for (let s = 0; s < q.selector.length; s++) if (node.labels[q.selector[s]![0]] !== q.selector[s]![1]) return 'node_selector';
    if (q.runtime !== undefined && !node.capacity.runtimes?.includes(q.runtime)) return 'runtime';
    if ((q.devices.length || q.gpuIds.length) && this.missingDevice(q, node) !== undefined) return 'devices';
    if (q.home !== -1 && q.home !== i) return 'volume_locality';
    // After the operator's constraints: a service pinned to a degraded node is told node_degraded.
    if (node.degraded) return 'degraded';
    if (q.volumes.length && this.volumeHolder(q, i)) return 'volume_in_use';
    if (this.memUsed[i]! + q.mem > node.capacity.memoryBytes) return 'memory';
    if (q.gpus === 'all' ? node.capacity.gpus < 1 || this.gpuUsed[i]! > 0 : q.gpus > 0 && this.gpuUsed[i]! + q.gpus > node.capacity.gpus) return 'gpus';
    // An agent older than disk booking reports no diskBytes: its disk is not booked.
    if (node.capacity.diskBytes !== undefined && this.diskUsed[i]! + q.disk > node.capacity.diskBytes) return 'disk';
    if (q.ports.length) {
      const taken = this.ports[i]!;
      if (taken.size) for (let p = 0; p < q.ports.length; p++) if (taken.has(q.ports[p]!)) return 'ports';
    }
    // Dynamic host ports: the range must have enough free ones (assignPorts takes them after the choice).
    if (q.dynamicPorts && this.freeInRange(i) < q.dynamicPorts) return 'ports';
    if (q.needsAddress && this.freeAddresses(i) === 0) return 'ipam';
    if (q.svcCounts[i]! >= q.maxPerNode) return 'max_per_node';
    if (antiAffinity && q.mode !== 'pack' && q.svcCounts[i]! > 0) return 'anti_affinity';
    return undefined;
  }

  private detail(q: Req, i: number, f: FilterName): string {
    const node = this.nodes[i]!;
    switch (f) {
      case 'eligibility':
        return node.ineligible!;
      case 'degraded':
        return node.degraded!;
      case 'disk': {
        const total = node.capacity.diskBytes ?? 0;
        return `needs ${formatBytes(q.disk)} of scratch disk; ${formatBytes(Math.max(0, total - this.diskUsed[i]!))} of ${formatBytes(total)} unbooked`;
      }
      case 'excluded':
        return q.heldWhy.get(i) ?? 'excluded by the caller (source of the move)';
      case 'hosts':
        return `not in placement.hosts [${[...(q.hosts ?? [])].join(', ')}]`;
      case 'node_selector': {
        const miss = q.selector.find(([k, v]) => node.labels[k] !== v)!;
        return `label ${miss[0]}=${miss[1]} missing${node.labels[miss[0]] !== undefined ? ` (has ${miss[0]}=${node.labels[miss[0]]})` : ''}`;
      }
      case 'runtime':
        return node.capacity.runtimes ? `its engine has no runtime ${q.runtime} (it has ${node.capacity.runtimes.join(', ') || 'none'})` : `its engine's runtimes are not known (its agent reported none), so not ${q.runtime}`;
      case 'devices': {
        const miss = this.missingDevice(q, node)!;
        return miss.gpu
          ? `it has no GPU ${miss.id} (its GPUs: ${node.capacity.gpuIds?.join(', ') || 'none known'})`
          : `it does not offer device ${miss.id} (jaco agent --device; it offers ${node.capacity.devices?.join(', ') || 'none'})`;
      }
      case 'volume_locality':
        return q.home === -2 ? 'the service\'s volumes live on different nodes' : `the service's volumes live on ${q.homeName}`;
      case 'volume_in_use': {
        const h = this.volumeHolder(q, i)!;
        return `volume "${h.source}" is attached ${h.readOnly ? 'read-only' : 'read-write'} by ${h.id}${h.readOnly ? '; this replica mounts it read-write' : ''} (one writer per volume)`;
      }
      case 'memory': {
        const free = Math.max(0, node.capacity.memoryBytes - this.memUsed[i]!);
        return `needs ${formatBytes(q.mem)} (with ${formatBytes(this.config.memoryOverheadBytes)} overhead); ${formatBytes(free)} of ${formatBytes(node.capacity.memoryBytes)} free`;
      }
      case 'gpus':
        return q.gpus === 'all'
          ? `needs every GPU of the node free (gpus: all); ${node.capacity.gpus - this.gpuUsed[i]!} of ${node.capacity.gpus} free`
          : `needs ${q.gpus} GPU(s); ${node.capacity.gpus - this.gpuUsed[i]!} of ${node.capacity.gpus} free`;
      case 'max_per_node':
        return `already runs ${q.svcCounts[i]} replica(s) of ${q.r.service}; placement.maxPerNode is ${q.maxPerNode}`;
      case 'ports': {
        const fixed = q.ports.find((p) => this.ports[i]!.has(p));
        if (fixed !== undefined) return `host port ${fixed} is taken`;
        const { min, max } = this.rangeOf(i);
        return `needs ${q.dynamicPorts} dynamic host port(s); ${this.freeInRange(i)} of ${min}-${max} free`;
      }
      case 'anti_affinity':
        return `already runs ${q.svcCounts[i]} replica(s) of ${q.r.service}`;
      case 'ipam': {
        const s = node.subnets;
        if (!s) return 'no subnets of the cluster network given to it yet';
        const { first, last } = hostNumbers(s.ipv4);
        return `all ${last - first + 1} addresses of ${s.ipv4} and ${s.ipv6} are held`;
      }
    }
  }

  /** The first device (host device or GPU id) the request needs that the node does not offer. */
  private missingDevice(q: Req, node: NodeInfo): { id: string; gpu: boolean } | undefined {
    const device = q.devices.find((d) => !node.capacity.devices?.includes(d));
    if (device !== undefined) return { id: device, gpu: false };
    const gpu = q.gpuIds.find((g) => !node.capacity.gpuIds?.includes(g));
    return gpu === undefined ? undefined : { id: gpu, gpu: true };
  }

  /** Another replica attaching one of the request's volumes on node i where either mount writes, or undefined. */
  private volumeHolder(q: Req, i: number): { id: string; source: string; readOnly: boolean } | undefined {
    for (const v of q.volumes) {
      const other = this.attached[i]!.get(v.key)?.find((a) => a.id !== q.r.replica && (!a.readOnly || !v.readOnly));
      if (other) return { id: other.id, source: v.source, readOnly: other.readOnly };
    }
    return undefined;
  }

  /** Why node fails a hard filter for this request, or undefined when it passes them all. */
  check(r: PlacementRequest, node: string, opts: { antiAffinity?: boolean } = {}): Rejection | undefined {
    const i = this.index.get(node);
    if (i === undefined) return { filter: 'eligibility', reason: 'no_nodes_active', detail: 'unknown node' };
    const q = this.prepare(r);
    const f = this.failing(q, i, opts.antiAffinity ?? true);
    return f ? { filter: f, reason: FILTER_REASON[f], detail: this.detail(q, i, f) } : undefined;
  }

  /**
   * The first hard filter each node fails for one request, prepared once (a what-if looping over
   * every node calls this rather than check, and needs no detail strings). The placer's
   * accounting is read live, so assume/forget between calls count.
   */
  checker(r: PlacementRequest, opts: { antiAffinity?: boolean } = {}): (node: string) => FilterName | undefined {
    const q = this.prepare(r);
    const anti = opts.antiAffinity ?? true;
    return (node) => {
      const i = this.index.get(node);
      return i === undefined ? 'eligibility' : this.failing(q, i, anti);
    };
  }

  /** Nodes passing every hard filter (anti-affinity included), by name. */
  candidates(r: PlacementRequest): string[] {
    const q = this.prepare(r);
    return this.names.filter((_, i) => !this.failing(q, i, true));
  }

  /**
   * The part of a node's score a mover that ranks by measured load keeps (seed 003: compatible
   * priority functions, so the scheduler and a rescheduler never fight): replicas of the service
   * already there and recent failures, without requested CPU and the hash (the mover's own
   * measure of load replaces them). Pack placement prefers nothing among fitting nodes here.
   */
  standing(r: PlacementRequest): (node: string) => number {
    const q = this.prepare(r);
    return (node) => {
      const i = this.index.get(node);
      return i === undefined || q.mode === 'pack' ? 0 : -q.svcCounts[i]! * 100 - this.failures(i) * 12;
    };
  }

  /** A node's score: hot path, no allocation. */
  private total(q: Req, i: number): number {
    if (q.mode === 'pack') return -this.count[i]!;
    // Each replica of the service already on the node costs more than any failure, CPU or hash
    // difference can make up (failures ≤ 4 × 12, cpu ≤ 10, hash < 1): spread stays even at any
    // count. A recent restart costs more than CPU and hash can make up: a node where replicas keep
    // failing is chosen last among equals.
    return -q.svcCounts[i]! * 100 - this.failures(i) * 12 + this.cpuScore(q, i) * 10 + mix(q.hashKey, this.nodeHash[i]!);
  }

  private failures(i: number): number {
    return Math.min(this.nodes[i]!.recentFailures ?? 0, MAX_FAILURE_PENALTY);
  }

  /** CPU headroom against capacity × overcommit, in quarter steps: small load differences must not move a replica's choice (stability). */
  private cpuScore(q: Req, i: number): number {
    const alloc = this.nodes[i]!.capacity.cpuMillis * this.config.cpuOvercommit;
    const raw = alloc > 0 ? 1 - Math.min(1, (this.cpuUsed[i]! + q.cpu) / alloc) : 0;
    return Math.floor(raw * 4) / 4;
  }

  /** The same score with its parts, for explanations. */
  private score(q: Req, i: number): { total: number; parts: Record<string, number> } {
    if (q.mode === 'pack') return { total: -this.count[i]!, parts: { replicas: this.count[i]! } };
    const failures = this.failures(i);
    const parts = { peers: q.svcCounts[i]!, ...(failures ? { failures } : {}), cpu: this.cpuScore(q, i), hash: round(mix(q.hashKey, this.nodeHash[i]!)) };
    return { total: round(this.total(q, i)), parts };
  }

  /**
   * Chooses a node for the request and accounts the replica there (later placements in the
   * same pass see it). An unschedulable request changes nothing.
   */
  place(r: PlacementRequest): Decision {
    const d = this.decide(r);
    if (d.chosen) this.assume({ id: r.replica, deployment: r.deployment, service: r.service, node: d.chosen, ...footprintOf(r.spec) });
    return d;
  }

  /**
   * Dynamic host ports for a replica placed on `node` in this pass (after place or assume): free
   * ones from the node's range, accounted against the node at once so no later placement of the
   * pass gets them. Empty when the service has no port without a fixed host port.
   */
  assignPorts(replica: string, node: string, spec: ServiceSpec): Record<string, number> {
    const names = dynamicPortNames(spec);
    const i = this.index.get(node);
    if (!names.length || i === undefined) return {};
    const taken = new Set(this.ports[i]!.keys());
    const assigned = assignHostPorts(replica, names, taken, this.rangeOf(i));
    const ports = Object.values(assigned);
    for (const port of ports) this.ports[i]!.set(port, (this.ports[i]!.get(port) ?? 0) + 1);
    // Replaced, not edited: a placed entry may be the cached one of a stored desired key.
    const list = this.placed.get(node);
    const at = list?.findIndex((x) => x.id === replica) ?? -1;
    const was = list?.[at];
    if (list && at >= 0) list[at] = { ...list[at]!, ports: [...list[at]!.ports, ...ports] };
    this.journal?.push(() => {
      for (const port of ports) {
        const c = (this.ports[i]!.get(port) ?? 1) - 1;
        if (c) this.ports[i]!.set(port, c);
        else this.ports[i]!.delete(port);
      }
      const j = list?.findIndex((x) => x.id === replica) ?? -1;
      if (list && was && j >= 0) list[j] = was;
    });
    return assigned;
  }

  /**
   * Gives a cluster-network replica placed on `node` an address of the node's subnets (ipam.ts
   * chooseAddress). Undefined for a host-network spec, or when the node has none free (the ipam
   * filter keeps that from happening).
   */
  assignAddress(replica: string, node: string, spec: ServiceSpec): { address: ReplicaAddress; hostNumber: number } | undefined {
    const i = this.index.get(node);
    const subnets = i === undefined ? undefined : this.nodes[i]!.subnets;
    if (spec.network !== 'cluster' || i === undefined || !subnets) return undefined;
    const given = chooseAddress(replica, subnets, this.addressesTaken[i]!);
    if (given) {
      this.addressesTaken[i]!.add(given.hostNumber);
      this.addressesFree[i]!--;
      this.journal?.push(() => {
        this.addressesTaken[i]!.delete(given.hostNumber);
        this.addressesFree[i]!++;
      });
    }
    return given;
  }

  /** Host numbers of node i's subnets nobody holds (0 without subnets). */
  private freeAddresses(i: number): number {
    return this.addressesFree[i]!;
  }

  private rangeOf(i: number): PortRange {
    return this.nodes[i]!.portRange ?? DEFAULT_PORT_RANGE;
  }

  /** Ports of node i's dynamic range that no replica holds. */
  private freeInRange(i: number): number {
    const { min, max } = this.rangeOf(i);
    let used = 0;
    for (const p of this.ports[i]!.keys()) if (p >= min && p <= max) used++;
    return max - min + 1 - used;
  }

  /** Chooses without accounting (explain, what-if). */
  decide(r: PlacementRequest): Decision {
    const q = this.prepare(r);
    const n = this.nodes.length;
    const full = n <= this.config.explainNodes;
    const rejected: (FilterName | undefined)[] = new Array(n);
    const totals = new Float64Array(n);
    // The best five, best first (ties keep the earlier name): the winner, its runner-up and, on
    // large clusters, the few others an explanation shows. No sort of every node.
    let top: number[] = [];
    let passed = 0;
    const run = (antiAffinity: boolean) => {
      top = [];
      passed = 0;
      for (let i = 0; i < n; i++) {
        const f = this.failing(q, i, antiAffinity);
        rejected[i] = f;
        if (f) continue;
        passed++;
        const t = this.total(q, i);
        totals[i] = t;
        if (top.length < 5 || t > totals[top[4]!]!) {
          let at = top.length < 5 ? top.length : 4;
          if (top.length === 5) top.pop();
          while (at > 0 && totals[top[at - 1]!]! < t) at--;
          top.splice(at, 0, i);
        }
      }
    };
    run(true);
    let relaxed = false;
    if (!top.length && q.mode === 'spread' && rejected.includes('anti_affinity')) {
      // Every node that fits already runs this service: spread as evenly as capacity allows.
      run(false);
      relaxed = top.length > 0;
    }
    const best = top[0] ?? -1;
    const runnerUp = top[1] ?? -1;
    const shown = full ? [] : top.slice(1);

    const verdicts: NodeVerdict[] = [];
    const omitted: Record<string, number> = {};
    let listed = 0;
    for (let i = 0; i < n; i++) {
      const f = rejected[i];
      if (f) {
        if (full || listed++ < 10) verdicts.push({ node: this.names[i]!, rejected: { filter: f, reason: FILTER_REASON[f], detail: this.detail(q, i, f) } });
        else omitted[f] = (omitted[f] ?? 0) + 1;
      } else if (full || i === best || shown.includes(i)) verdicts.push({ node: this.names[i]!, score: this.score(q, i) });
    }
    if (!full && passed > 1 + shown.length) omitted.scored = passed - 1 - shown.length;
    const base = { replica: r.replica, deployment: r.deployment, service: r.service, mode: q.mode, verdicts, ...(Object.keys(omitted).length ? { omitted } : {}) };
    if (best >= 0) return { ...base, chosen: this.names[best], why: this.whyChosen(q, best, runnerUp, passed, relaxed) };
    const reason = this.unschedulableReason(rejected);
    return { ...base, reason, why: `no node can take it (${reason}): ${summarize(rejected)}` };
  }

  private whyChosen(q: Req, best: number, runnerUp: number, passed: number, relaxed: boolean): string {
    const s = this.score(q, best);
    const parts = Object.entries(s.parts)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    const how = q.mode === 'pack' ? `fewest replicas (${s.parts.replicas})` : `highest score ${s.total} (${parts})`;
    const f = runnerUp >= 0 && q.mode !== 'pack' ? this.failures(runnerUp) : 0;
    const next = runnerUp >= 0 ? `; runner-up ${this.names[runnerUp]} (${this.score(q, runnerUp).total}${f ? `: ${f} recent failure(s) there` : ''})` : '';
    const tie = runnerUp >= 0 && this.total(q, runnerUp) === this.total(q, best) ? ', tie broken by name' : '';
    return `${this.names[best]}: ${how} among ${passed} candidate(s)${tie}${next}${relaxed ? '; every fitting node already ran the service, so spread was relaxed' : ''}`;
  }

  /** The reason of the filter that stopped the nodes which got furthest down the pipeline. */
  private unschedulableReason(rejected: (FilterName | undefined)[]): UnschedulableReason {
    let furthest = -1;
    for (const f of rejected) if (f) furthest = Math.max(furthest, FILTER_ORDER.indexOf(f));
    return furthest < 0 ? 'no_nodes_active' : FILTER_REASON[FILTER_ORDER[furthest]!];
  }
}

function summarize(rejected: (FilterName | undefined)[]): string {
  if (!rejected.length) return 'there are no nodes';
  const counts = new Map<string, number>();
  for (const f of rejected) if (f) counts.set(f, (counts.get(f) ?? 0) + 1);
  return [...counts].map(([f, c]) => `${c} node(s) rejected by ${f}`).join(', ');
}
