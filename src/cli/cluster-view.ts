// A read-only view of the cluster for the CLI: one consistent read of the prefixes a command
// needs, joined (desired + observed per replica, node + heartbeat + drain per node).
import { keys } from '../api/keys.js';
import { placementMode } from '../api/spec.js';
import type {
  Deployment,
  DeploymentStatus,
  Heartbeat,
  Node,
  NodeDrain,
  ReplicaCommand,
  ReplicaDesired,
  ReplicaObserved,
  RolloutPlan,
} from '../api/types.js';
import type { Store, Versioned } from '../store/store.js';

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
}

const lastPart = (k: string) => k.slice(k.lastIndexOf('/') + 1);

export async function readClusterView(store: Store): Promise<ClusterView> {
  const [deps, statuses, nodes, hbs, drains, desired, observed, commands, rollouts] = await Promise.all([
    store.list<Deployment>(keys.deployments()),
    store.list<DeploymentStatus>(keys.deploymentStatuses()),
    store.list<Node>(keys.nodes()),
    store.list<Heartbeat>(keys.heartbeats()),
    store.list<NodeDrain>(keys.drains()),
    store.list<ReplicaDesired>(keys.desiredOf()),
    store.list<ReplicaObserved>(keys.observedOf()),
    store.list<ReplicaCommand>(keys.commandsOf()),
    store.list<RolloutPlan>(keys.rollouts()),
  ]);
  const obs = new Map(observed.items.map((o) => [o.key.slice('observed/'.length), o.value]));
  const cmds = new Map(commands.items.map((c) => [c.key.slice('commands/'.length), c.value]));
  const replicas = desired.items
    .map((d) => {
      const rel = d.key.slice('desired/'.length);
      return { id: d.value.spec.replica, node: d.value.spec.node, desired: d.value, observed: obs.get(rel), command: cmds.get(rel) };
    })
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.node < b.node ? -1 : 1));
  return {
    revision: Math.max(deps.revision, desired.revision),
    deployments: new Map(deps.items.map((d) => [lastPart(d.key), d])),
    statuses: new Map(statuses.items.map((s) => [lastPart(s.key), s.value])),
    nodes: new Map(nodes.items.map((n) => [lastPart(n.key), n])),
    heartbeats: new Map(hbs.items.map((h) => [lastPart(h.key), h.value])),
    drains: new Map(drains.items.map((d) => [lastPart(d.key), d.value])),
    replicas,
    rollouts: rollouts.items.map((r) => r.value),
  };
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
