// `jaco top`: what the agents already report, as tables. A node's figures are its latest pressure
// sample (heartbeats/<host>: CPU and memory over its capacity, whole host or sum of its containers);
// a replica's are its footprint in that sample (cgroup CPU over the sampling interval, memory less
// inactive file cache). Pressure is the rebalancer's composite: max(cpu, memory) and the dimension
// that sets it. Nothing is measured here: a node without a fresh sample shows none.
import { composite } from '../app/controllers.js';
import { heartbeatAlive, sampleFresh } from '../api/nodes.js';
import { cpuMillis, formatBytes, memoryBytes } from '../api/units.js';
import type { ClusterView } from '../app/cluster-view.js';
import { age } from '../app/output.js';

export const TOP_SORTS = ['cpu', 'memory', 'name'] as const;
export type TopSort = (typeof TOP_SORTS)[number];

export interface NodeUsageRow {
  node: string;
  /** Millicores in use (utilisation × capacity), undefined without a fresh sample. */
  cpuMillis?: number;
  cpuUtil?: number;
  memoryBytes?: number;
  memoryUtil?: number;
  pressure?: { value: number; dominant: 'cpu' | 'memory' };
  /** Its Docker data root's filesystem: bytes used and the fraction used (the heartbeat's disk sample; degraded past the cluster's limit). */
  diskBytes?: number;
  diskUtil?: number;
  /** What the figures measure: the whole host, or the sum of the agent's containers. */
  mode?: 'node' | 'containers';
  sampledAt?: string;
  /** Why there are no figures. */
  missing?: string;
}

export interface ReplicaUsageRow {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  cpuMillis?: number;
  memoryBytes?: number;
  /** Of the service's resources (cpu, memory) when it sets them. */
  cpuOfLimit?: number;
  memoryOfLimit?: number;
  sampledAt?: string;
  missing?: string;
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Largest first by the key (rows without figures last), ties by name: the order is total. */
function sortRows<T>(rows: T[], sort: TopSort, name: (r: T) => string, value: (r: T, k: 'cpu' | 'memory') => number | undefined): T[] {
  return rows.sort((a, b) => {
    if (sort !== 'name') {
      const [x, y] = [value(a, sort), value(b, sort)];
      if (x !== y) return x === undefined ? 1 : y === undefined ? -1 : y - x;
    }
    return byName(name(a), name(b));
  });
}

export function nodeUsage(view: ClusterView, sort: TopSort = 'cpu'): NodeUsageRow[] {
  const rows = [...view.nodes.values()].map(({ value: n }): NodeUsageRow => {
    const node = n.metadata.name;
    const hb = view.heartbeats.get(node);
    const p = hb?.spec.pressure;
    if (!hb || !heartbeatAlive(hb)) return { node, missing: 'no heartbeat' };
    if (!p) return { node, missing: 'no sample (Docker down?)' };
    if (!sampleFresh(p, hb)) return { node, missing: 'stale sample (the agent samples no more)' };
    const cap = n.status?.capacity;
    const d = hb.spec.disk;
    const c = composite({ cpu: p.cpuUtil, memory: p.memoryUtil });
    return {
      node,
      cpuUtil: p.cpuUtil,
      memoryUtil: p.memoryUtil,
      ...(cap ? { cpuMillis: p.cpuUtil * cap.cpuMillis, memoryBytes: p.memoryUtil * cap.memoryBytes } : {}),
      pressure: { value: c.pressure, dominant: c.dominant },
      ...(d && d.usedBytes + d.availableBytes > 0 ? { diskBytes: d.usedBytes, diskUtil: d.usedBytes / (d.usedBytes + d.availableBytes) } : {}),
      mode: p.mode ?? 'containers',
      sampledAt: p.time,
    };
  });
  return sortRows(rows, sort, (r) => r.node, (r, k) => (k === 'cpu' ? r.cpuUtil : r.memoryUtil));
}

export function replicaUsage(view: ClusterView, opts: { deployment?: string; sort?: TopSort } = {}): ReplicaUsageRow[] {
  const rows = view.replicas
    .filter((r) => !opts.deployment || r.desired.spec.deployment === opts.deployment)
    .map((r): ReplicaUsageRow => {
      const { deployment, service, template } = r.desired.spec;
      const base = { replica: r.id, deployment, service, node: r.node };
      const hb = view.heartbeats.get(r.node);
      if (!hb || !heartbeatAlive(hb)) return { ...base, missing: 'no heartbeat from its node' };
      const f = hb.spec.pressure?.replicas[r.id];
      if (!f) return { ...base, missing: r.observed?.status?.state === 'running' ? 'not in its node\'s sample yet' : 'not running' };
      const cpuLimit = template.resources?.cpu !== undefined ? cpuMillis(template.resources.cpu) : 0;
      const memLimit = template.resources?.memory !== undefined ? memoryBytes(template.resources.memory) : 0;
      return {
        ...base,
        cpuMillis: f.cpuMillis,
        memoryBytes: f.memoryBytes,
        ...(cpuLimit > 0 ? { cpuOfLimit: f.cpuMillis / cpuLimit } : {}),
        ...(memLimit > 0 ? { memoryOfLimit: f.memoryBytes / memLimit } : {}),
        sampledAt: hb.spec.pressure!.time,
      };
    });
  return sortRows(rows, opts.sort ?? 'cpu', (r) => `${r.replica}@${r.node}`, (r, k) => (k === 'cpu' ? r.cpuMillis : r.memoryBytes));
}

const pct = (v: number | undefined) => (v === undefined ? '-' : `${(v * 100).toFixed(0)}%`);
const millis = (v: number | undefined) => (v === undefined ? '-' : `${Math.round(v)}m`);
const bytes = (v: number | undefined) => (v === undefined ? '-' : formatBytes(Math.round(v)));

export const NODE_HEADERS = ['NAME', 'CPU(cores)', 'CPU%', 'MEMORY(bytes)', 'MEMORY%', 'DISK(bytes)', 'DISK%', 'PRESSURE', 'MEASURES', 'SAMPLED'];
export const REPLICA_HEADERS = ['NAME', 'SERVICE', 'NODE', 'CPU(cores)', 'CPU/LIMIT', 'MEMORY(bytes)', 'MEMORY/LIMIT', 'SAMPLED'];

export function nodeTableRows(rows: NodeUsageRow[], now: number): string[][] {
  return rows.map((r) =>
    r.missing
      ? [r.node, '-', '-', '-', '-', '-', '-', '-', '-', r.missing]
      : [r.node, millis(r.cpuMillis), pct(r.cpuUtil), bytes(r.memoryBytes), pct(r.memoryUtil), bytes(r.diskBytes), pct(r.diskUtil), `${r.pressure!.value.toFixed(2)} (${r.pressure!.dominant})`, r.mode === 'node' ? 'host' : 'containers', `${age(r.sampledAt, now)} ago`],
  );
}

export function replicaTableRows(rows: ReplicaUsageRow[], now: number): string[][] {
  return rows.map((r) => [
    r.replica,
    `${r.deployment}/${r.service}`,
    r.node,
    millis(r.cpuMillis),
    pct(r.cpuOfLimit),
    bytes(r.memoryBytes),
    pct(r.memoryOfLimit),
    r.missing ?? `${age(r.sampledAt, now)} ago`,
  ]);
}
