// A read-only view of the cluster for the CLI: one consistent read of the prefixes a command
// needs, joined (desired + observed per replica, node + heartbeat + drain per node).
import { nodeConditions, resolveNodeSettings, type NodeCondition, type NodeSettingsResolved } from '../api/eligibility.js';
import { placementMode } from '../api/spec.js';
import { formatDuration } from '../api/units.js';
import type {
  Deployment,
  DeploymentStatus,
  Heartbeat,
  JobResult,
  Node,
  NodeDrain,
  NodeSettings,
  NodeSettingsSpec,
  ReplicaCommand,
  ReplicaDesired,
  ReplicaObserved,
  RolloutPlan,
} from '../api/types.js';
import type { Cache } from '../runtime/cache.js';
import { nodesOf } from '../runtime/nodes.js';
import { REPLICAS, replicaIndexOf, type ReplicaIndex } from '../runtime/replicas.js';
import type { Watchable } from '../runtime/watchable.js';
import type { Unreadable } from '../store/reflector.js';
import type { Store, Versioned } from '../store/store.js';
import { readCut, unreadableIn } from './read.js';

export interface ReplicaRow {
  id: string;
  node: string;
  desired: ReplicaDesired;
  observed?: ReplicaObserved;
  command?: ReplicaCommand;
}

export interface ClusterView {
  revision: number;
  deployments: Map<string, Versioned<Deployment>>;
  statuses: Map<string, DeploymentStatus>;
  nodes: Map<string, Versioned<Node>>;
  heartbeats: Map<string, Heartbeat>;
  drains: Map<string, NodeDrain>;
  replicas: ReplicaRow[];
  rollouts: RolloutPlan[];
  /**
   * Every restart record by store key (commands/<host>/<replica>), also those of replicas no
   * longer desired there: a node's recent failures count them (src/api/eligibility.ts).
   */
  commands: Map<string, Versioned<ReplicaCommand>>;
  /** Keys under the joined prefixes whose values cannot be read (left out of the rest). */
  unreadable: Unreadable[];
  /** The cluster's node-eligibility settings (config/nodes), defaults filled in. */
  settings: NodeSettingsResolved;
}

const lastPart = (k: string) => k.slice(k.lastIndexOf('/') + 1);

/** The stored objects a view is joined from (what readClusterView lists, or informers hold). */
export interface ClusterParts {
  revision: number;
  deployments: Versioned<Deployment>[];
  statuses: Versioned<DeploymentStatus>[];
  nodes: Versioned<Node>[];
  heartbeats: Versioned<Heartbeat>[];
  drains: Versioned<NodeDrain>[];
  desired: Versioned<ReplicaDesired>[];
  observed: Versioned<ReplicaObserved>[];
  commands: Versioned<ReplicaCommand>[];
  rollouts: Versioned<RolloutPlan>[];
  unreadable?: Unreadable[];
  settings?: NodeSettingsSpec;
  /** The replica index of `desired` and `observed` (a cache's REPLICAS), when one is kept already. */
  replicaIndex?: ReplicaIndex;
}

/** The prefixes a cluster view joins. */
export const CLUSTER_VIEW_READS = ['deployments', 'statuses', 'nodes', 'nodespecs', 'heartbeats', 'drains', 'desired', 'observed', 'commands', 'rollouts', 'nodeSettings'] as const satisfies readonly Watchable[];

/** A view joined from the cache's readable values (one cut of the store), with the keys it could not read. */
export function clusterViewOf(cache: Cache): ClusterView {
  const items = <T>(name: Watchable) => [...cache.kind<T>(name).items.values()];
  return joinClusterView({
    revision: cache.revision,
    deployments: items<Deployment>('deployments'),
    statuses: items<DeploymentStatus>('statuses'),
    nodes: [...nodesOf(cache).values()],
    heartbeats: items<Heartbeat>('heartbeats'),
    drains: items<NodeDrain>('drains'),
    desired: items<ReplicaDesired>('desired'),
    observed: items<ReplicaObserved>('observed'),
    commands: items<ReplicaCommand>('commands'),
    rollouts: items<RolloutPlan>('rollouts'),
    unreadable: unreadableIn(cache),
    replicaIndex: cache.index(REPLICAS),
    ...(cache.holds('nodeSettings') ? { settings: items<NodeSettings>('nodeSettings')[0]?.value.spec } : {}),
  });
}

/** One consistent read of the cluster; what cannot be read is left out and listed in `unreadable`. */
export async function readClusterView(store: Store): Promise<ClusterView> {
  return clusterViewOf(await readCut(store, CLUSTER_VIEW_READS));
}

/**
 * Joins stored objects into a view: each replica copy of the replica index (desired + observed,
 * the join every controller reads) with its restart command, by replica id then node.
 */
export function joinClusterView(p: ClusterParts): ClusterView {
  const index = p.replicaIndex ?? replicaIndexOf(p.desired, p.observed);
  const cmds = new Map(p.commands.map((c) => [c.key.slice('commands/'.length), c.value]));
  const replicas = [...index.byId.values()]
    .sort((a, b) => (a.id < b.id ? -1 : 1))
    .flatMap((e) => e.copies.map((c) => ({ id: e.id, node: c.desired.spec.node, desired: c.desired, observed: c.observed, command: cmds.get(c.key.slice('desired/'.length)) })));
  return {
    revision: p.revision,
    deployments: new Map(p.deployments.map((d) => [lastPart(d.key), d])),
    statuses: new Map(p.statuses.map((s) => [lastPart(s.key), s.value])),
    nodes: new Map(p.nodes.map((n) => [lastPart(n.key), n])),
    heartbeats: new Map(p.heartbeats.map((h) => [lastPart(h.key), h.value])),
    drains: new Map(p.drains.map((d) => [lastPart(d.key), d.value])),
    replicas,
    rollouts: p.rollouts.map((r) => r.value),
    commands: new Map(p.commands.map((c) => [c.key, c])),
    unreadable: p.unreadable ?? [],
    settings: settingsOrDefaults(p.settings),
  };
}

function settingsOrDefaults(s: NodeSettingsSpec | undefined): NodeSettingsResolved {
  try {
    return resolveNodeSettings(s);
  } catch {
    return resolveNodeSettings(undefined);
  }
}

/**
 * Each node's degraded condition, judged by the placer's own function (src/api/eligibility.ts
 * nodeConditions) from the same sources: its agent's disk and overlay samples, its peers' reports,
 * the services restarted on it, the operator's trust.
 */
export function nodeConditionsOf(v: ClusterView, now: number): Map<string, NodeCondition> {
  const services = new Map(v.replicas.map((r) => [r.id, `${r.desired.spec.deployment}/${r.desired.spec.service}`]));
  return nodeConditions({ nodes: [...v.nodes.values()].map((n) => n.value), heartbeats: v.heartbeats, commands: v.commands, serviceOf: (id) => services.get(id), settings: v.settings }, now);
}

/** The state a replica shows: observed, or what the control plane knows when nothing is observed. */
export function replicaState(r: ReplicaRow): { state: string; code?: string } {
  if (r.command?.status?.exhausted) return { state: 'failed', code: 'restart_exhausted' };
  if (r.desired.spec.suspended) return { state: 'stopped', code: r.desired.spec.suspended.reason };
  if (!r.observed) return { state: 'pending', code: 'not_observed' };
  const o = r.observed.status!;
  return { state: o.state, code: o.code };
}

/** Counts a replica id once even while a move has it on two nodes; running if any copy runs. */
export function runningCount(rows: ReplicaRow[]): number {
  const running = new Set<string>();
  for (const r of rows) {
    const s = r.observed?.status;
    if (s && (s.state === 'running' || s.replacing?.state === 'running')) running.add(r.id);
  }
  return running.size;
}

export function desiredCount(d: Deployment, svc: string, readyNodes: number): number {
  const s = d.spec.services[svc];
  if (!s) return 0;
  return placementMode(s) === 'global' ? readyNodes : (s.replicas ?? 1);
}

/** A job's result in one line (jaco status, describe): "succeeded after 1 attempt in 2s (revision 3)". */
export function jobText(r: JobResult): string {
  const took = r.durationMs !== undefined ? ` in ${formatDuration(r.durationMs)}` : '';
  if (r.state === 'succeeded') return `${r.reason ?? 'succeeded'}${took} (revision ${r.revision})`;
  if (r.state === 'failed') return `failed: ${r.reason ?? 'failed'}${took} (revision ${r.revision}); its dependents stay held until a changed spec is applied`;
  return `running${r.reason ? `: ${r.reason}` : ''} (revision ${r.revision})`;
}
