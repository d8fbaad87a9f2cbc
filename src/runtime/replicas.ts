// The replica view: every replica id with its desired copies (two while a move is in flight),
// each joined with what its node's agent observes — the one grouping every controller reads,
// built once per process and kept up to date from desired/ and observed/ changes.
import type { ReplicaDesired, ReplicaObserved } from '../api/types.js';
import type { Change, Unreadable } from '../store/reflector.js';
import type { Versioned } from '../store/store.js';
import type { Cache, IndexDef } from './cache.js';

/** One desired key of a replica, with what its node observes of it. */
export interface Copy {
  key: string;
  modRevision: number;
  desired: ReplicaDesired;
  observed?: ReplicaObserved;
}

/** A replica id and its copies, sorted by node. `copies` is replaced on change, never mutated. */
export interface ReplicaEntry {
  readonly id: string;
  readonly deployment: string;
  readonly service: string;
  readonly index?: number;
  copies: readonly Copy[];
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** Replica order within a service: by index, global ones (no index) by id. */
export const byPosition = (a: ReplicaEntry, b: ReplicaEntry) => (a.index ?? -1) - (b.index ?? -1) || cmp(a.id, b.id);

interface ServiceReplicas {
  ids: Set<string>;
  /** Sorted on first use after a membership change. */
  sorted?: ReplicaEntry[];
}

export class ReplicaIndex {
  readonly byId = new Map<string, ReplicaEntry>();
  private readonly services = new Map<string, ServiceReplicas>();
  /** Replica ids with a desired copy on each node. */
  private readonly nodes = new Map<string, Set<string>>();
  /** Each node's ids sorted, on first use after its membership changed (every planner asks, per node, per cycle). */
  private readonly nodeSorted = new Map<string, string[]>();
  /** observed/<node>/<replica>, by node then replica — including replicas no longer desired there. */
  private readonly observedByNode = new Map<string, Map<string, Versioned<ReplicaObserved>>>();
  /** Cluster-network addresses carried by desired copies, by node then IPv4 (with how many carry it). */
  private readonly addressesByNode = new Map<string, Map<string, number>>();
  /** Replica ids with a move in flight (a copy carries a move marker). */
  readonly moving = new Set<string>();
  /** desired keys with no readable version (frozen): nothing may act on their replica's service. */
  readonly frozen = new Map<string, Unreadable & { deployment?: string; service?: string }>();

  /** The replicas of a service, by position (index, then id). */
  service(deployment: string, service: string): readonly ReplicaEntry[] {
    const s = this.services.get(`${deployment}/${service}`);
    if (!s) return [];
    s.sorted ??= [...s.ids].map((id) => this.byId.get(id)!).sort(byPosition);
    return s.sorted;
  }

  /** Replicas with a desired copy on a node, by id. */
  onNode(node: string): ReplicaEntry[] {
    let ids = this.nodeSorted.get(node);
    if (!ids) {
      const set = this.nodes.get(node);
      if (!set) return [];
      this.nodeSorted.set(node, (ids = [...set].sort()));
    }
    return ids.map((id) => this.byId.get(id)!);
  }

  /** Nodes with at least one desired copy. */
  desiredNodes(): IterableIterator<string> {
    return this.nodes.keys();
  }

  /** `<deployment>/<service>` of every service with at least one replica. */
  serviceKeys(): IterableIterator<string> {
    return this.services.keys();
  }

  /** What an agent reports about a replica on a node (whether or not it is still desired there). */
  observed(node: string, replica: string): ReplicaObserved | undefined {
    return this.observedByNode.get(node)?.get(replica)?.value;
  }

  /** Whether a desired copy on the node carries this cluster-network address (IPAM: the claim is held). */
  carriesAddress(node: string, ipv4: string): boolean {
    return this.addressesByNode.get(node)?.has(ipv4) ?? false;
  }

  /** Every observed key of a node (what its agent still reports: running, stopping, or failed). */
  observedOn(node: string): ReadonlyMap<string, Versioned<ReplicaObserved>> {
    return this.observedByNode.get(node) ?? EMPTY;
  }

  /** Nodes with observed keys. */
  observedNodes(): IterableIterator<string> {
    return this.observedByNode.keys();
  }

  // ------------------------------------------------------------------ upkeep

  putDesired(v: Versioned<ReplicaDesired>): void {
    const s = v.value.spec;
    let onNode = this.nodes.get(s.node);
    if (!onNode) this.nodes.set(s.node, (onNode = new Set()));
    if (!onNode.has(s.replica)) {
      onNode.add(s.replica);
      this.nodeSorted.delete(s.node);
    }
    const copy: Copy = { key: v.key, modRevision: v.modRevision, desired: v.value, observed: this.observed(s.node, s.replica) };
    const e = this.byId.get(s.replica);
    const before = e?.copies.find((c) => c.key === v.key);
    if (before) this.countAddress(before.desired, -1);
    this.countAddress(v.value, 1);
    if (!e) {
      this.byId.set(s.replica, { id: s.replica, deployment: s.deployment, service: s.service, ...(s.index !== undefined ? { index: s.index } : {}), copies: [copy] });
      const k = `${s.deployment}/${s.service}`;
      let svc = this.services.get(k);
      if (!svc) this.services.set(k, (svc = { ids: new Set() }));
      svc.ids.add(s.replica);
      svc.sorted = undefined;
      this.noteMoving(s.replica, [copy]);
      return;
    }
    e.copies = [...e.copies.filter((c) => c.key !== v.key), copy].sort((a, b) => cmp(a.desired.spec.node, b.desired.spec.node));
    this.noteMoving(s.replica, e.copies);
  }

  private countAddress(d: ReplicaDesired, by: 1 | -1): void {
    const ipv4 = d.spec.address?.ipv4;
    if (!ipv4) return;
    const node = d.spec.node;
    let m = this.addressesByNode.get(node);
    if (!m) this.addressesByNode.set(node, (m = new Map()));
    const n = (m.get(ipv4) ?? 0) + by;
    if (n > 0) m.set(ipv4, n);
    else m.delete(ipv4);
    if (!m.size) this.addressesByNode.delete(node);
  }

  private noteMoving(id: string, copies: readonly Copy[]): void {
    if (copies.some((c) => c.desired.spec.move)) this.moving.add(id);
    else this.moving.delete(id);
  }

  deleteDesired(prev: Versioned<ReplicaDesired>): void {
    const s = prev.value.spec;
    const onNode = this.nodes.get(s.node);
    if (onNode?.delete(s.replica)) this.nodeSorted.delete(s.node);
    if (onNode && !onNode.size) this.nodes.delete(s.node);
    const e = this.byId.get(s.replica);
    if (!e) return;
    const before = e.copies.find((c) => c.key === prev.key);
    if (before) this.countAddress(before.desired, -1);
    e.copies = e.copies.filter((c) => c.key !== prev.key);
    this.noteMoving(s.replica, e.copies);
    if (e.copies.length) return;
    this.byId.delete(s.replica);
    const k = `${e.deployment}/${e.service}`;
    const svc = this.services.get(k);
    if (!svc) return;
    svc.ids.delete(s.replica);
    svc.sorted = undefined;
    if (!svc.ids.size) this.services.delete(k);
  }

  putObserved(node: string, replica: string, v: Versioned<ReplicaObserved> | undefined): void {
    let m = this.observedByNode.get(node);
    if (v) {
      if (!m) this.observedByNode.set(node, (m = new Map()));
      m.set(replica, v);
    } else if (m) {
      m.delete(replica);
      if (!m.size) this.observedByNode.delete(node);
    }
    const e = this.byId.get(replica);
    if (!e || !e.copies.some((c) => c.desired.spec.node === node)) return;
    e.copies = e.copies.map((c) => (c.desired.spec.node === node ? { ...c, observed: v?.value } : c));
  }
}

const EMPTY: ReadonlyMap<string, Versioned<ReplicaObserved>> = new Map();

/** `desired/<node>/<replica>` or `observed/<node>/<replica>` → [node, replica]. */
function nodeAndReplica(key: string): [string, string] {
  const [, node, replica] = key.split('/');
  return [node ?? '', replica ?? ''];
}

function frozenEntry(u: Unreadable): Unreadable & { deployment?: string; service?: string } {
  const spec = (u.raw as { spec?: { deployment?: unknown; service?: unknown } } | undefined)?.spec;
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return { ...u, deployment: str(spec?.deployment), service: str(spec?.service) };
}

/** The index of the given desired and observed values (what REPLICAS builds from a cache's). */
export function replicaIndexOf(desired: Iterable<Versioned<ReplicaDesired>>, observed: Iterable<Versioned<ReplicaObserved>>): ReplicaIndex {
  const idx = new ReplicaIndex();
  for (const v of observed) {
    const [node, replica] = nodeAndReplica(v.key);
    idx.putObserved(node, replica, v);
  }
  for (const v of desired) idx.putDesired(v);
  return idx;
}

/** The named index of replicas: every controller of a process shares this one. */
export const REPLICAS: IndexDef<ReplicaIndex> = {
  name: 'replicas',
  sources: ['desired', 'observed'],
  build(cache: Cache): ReplicaIndex {
    const desired = cache.kind<ReplicaDesired>('desired');
    const idx = replicaIndexOf(desired.items.values(), cache.kind<ReplicaObserved>('observed').items.values());
    for (const u of desired.unreadable.values()) if (!desired.items.has(u.key)) idx.frozen.set(u.key, frozenEntry(u));
    return idx;
  },
  apply(idx: ReplicaIndex, changes: readonly Change[], cache: Cache): void {
    const desired = cache.kind<ReplicaDesired>('desired');
    for (const c of changes) {
      if (c.source === 'observed') {
        const [node, replica] = nodeAndReplica(c.key);
        if (c.type !== 'unreadable') idx.putObserved(node, replica, c.type === 'put' ? (c.value as Versioned<ReplicaObserved>) : undefined);
        continue;
      }
      const u = desired.unreadable.get(c.key);
      if (u && !c.value) idx.frozen.set(c.key, frozenEntry(u));
      else idx.frozen.delete(c.key);
      if (c.type === 'unreadable') continue; // the last readable version stays in effect
      const prev = c.prev as Versioned<ReplicaDesired> | undefined;
      const next = c.value as Versioned<ReplicaDesired> | undefined;
      // A put names the same replica unless edited by hand: only then is the old entry left.
      if (prev && (!next || prev.value.spec.replica !== next.value.spec.replica || prev.value.spec.service !== next.value.spec.service)) idx.deleteDesired(prev);
      if (next) idx.putDesired(next);
    }
  },
};
