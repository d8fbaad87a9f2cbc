// The dashboard's picture of the cluster, computed from the process's cache with the functions the
// CLI prints from: joinClusterView + statusRows (jaco status), nodeStatusText and
// unschedulableBecause (jaco get nodes), placedReplicaOf (what the placer books), rolloutProgress
// (jaco rollout status). Pure: cache contents, pressure history, plan and clock in; JSON out.
import { placedReplicaOf, rolloutProgress } from '../app/controllers.js';
import { drainActive, nodeReady, nodeStatusText, unschedulableBecause } from '../api/nodes.js';
import { clusterViewOf, nodeConditionsOf, replicaState, type ClusterView } from '../app/cluster-view.js';
import { degradedBecause, statusWithCondition } from '../api/eligibility.js';
import type { PlanReport } from '../app/rebalance-plan.js';
import { statusRows } from '../app/status.js';
import type { Cache } from '../runtime/cache.js';
import type { Watchable } from '../runtime/watchable.js';
import type { PressureHistory } from './pressure-history.js';
import type { DashboardState, NodeView, RolloutView } from './wire.js';

/** The prefixes the dashboard holds in its cache: one cut of the store, the audit log's newest records with it. */
export const DASHBOARD_READS = ['deployments', 'revisions', 'statuses', 'rollouts', 'nodes', 'nodespecs', 'heartbeats', 'drains', 'desired', 'observed', 'commands', 'nodeSettings', 'audit'] as const satisfies readonly Watchable[];

function nodeViews(v: ClusterView, history: PressureHistory, plan: PlanReport | undefined, now: number): NodeView[] {
  const planned = new Map(plan?.plan.nodes.map((n) => [n.node, n]));
  const byNode = new Map<string, ClusterView['replicas']>();
  for (const r of v.replicas) byNode.set(r.node, [...(byNode.get(r.node) ?? []), r]);
  const conditions = nodeConditionsOf(v, now);
  return [...v.nodes.values()]
    .map(({ value: n }): NodeView => {
      const name = n.metadata.name;
      const hb = v.heartbeats.get(name);
      const drain = v.drains.get(name);
      const rows = byNode.get(name) ?? [];
      const booked = { cpuMillis: 0, memoryBytes: 0, gpus: 0, diskBytes: 0, ports: [] as number[] };
      for (const r of rows) {
        const p = placedReplicaOf(r.desired);
        if (!p) continue;
        booked.cpuMillis += p.cpuMillis;
        booked.memoryBytes += p.memoryBytes;
        booked.diskBytes += p.diskBytes ?? v.settings.defaultDiskBytes;
        // "all" books every GPU of the node.
        booked.gpus += p.gpus === 'all' ? (n.status?.capacity.gpus ?? 0) : p.gpus;
        booked.ports.push(...p.ports);
      }
      const s = hb?.spec.pressure;
      const e = history.current(name);
      const pn = planned.get(name);
      const condition = conditions.get(name);
      const why = unschedulableBecause(n, hb, drain) ?? (condition && degradedBecause(condition));
      const d = hb?.spec.disk;
      return {
        name,
        status: statusWithCondition(nodeStatusText(n, hb, drain), condition),
        ...(condition?.causes.length ? { degraded: { causes: condition.causes, trusted: condition.trusted } } : {}),
        ...(d ? { disk: { usedBytes: d.usedBytes, totalBytes: d.usedBytes + d.availableBytes, capped: d.capped } } : {}),
        ready: nodeReady(hb),
        cordoned: !!n.spec?.unschedulable,
        draining: drainActive(drain),
        ...(why ? { unschedulable: why } : {}),
        ...(n.status?.address ? { address: n.status.address } : {}),
        ...(n.status?.capacity ? { capacity: n.status.capacity } : {}),
        booked,
        ...(s ? { sample: { time: s.time, cpu: s.cpuUtil, memory: s.memoryUtil } } : {}),
        ...(e ? { ewma: e } : {}),
        ...(pn ? { rebalancer: { pressure: pn.pressure, over: pn.over, ...(pn.cooldownMs !== undefined ? { cooldownMs: pn.cooldownMs } : {}), ...(pn.ineligible ? { ineligible: pn.ineligible } : {}) } } : {}),
        replicas: rows.map((r) => ({ id: r.id, deployment: r.desired.spec.deployment, service: r.desired.spec.service, state: replicaState(r).state })),
        ...(drain
          ? { drain: { state: drain.status?.state ?? 'pending', ...(drain.status?.reason ? { reason: drain.status.reason } : {}), requestedAt: drain.spec.requestedAt, remaining: Object.values(drain.status?.replicas ?? {}).filter((x) => x.state === 'pending' || x.state === 'moving' || x.state === 'blocked').length } }
          : {}),
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : 1));
}

function rolloutViews(v: ClusterView): RolloutView[] {
  return v.rollouts
    .map(({ spec: p }) => ({
      ...p,
      steps: p.steps.map((s) => ({
        replica: s.replica,
        node: s.node,
        startedAt: s.startedAt,
        ...(s.result ? { result: s.result } : {}),
        ...(s.canary ? { canary: true } : {}),
        ...(s.finishedAt ? { finishedAt: s.finishedAt, durationMs: Date.parse(s.finishedAt) - Date.parse(s.startedAt) } : {}),
      })),
    }))
    .sort((a, b) => (`${a.deployment}/${a.service}` < `${b.deployment}/${b.service}` ? -1 : 1));
}

export interface StateInput {
  cache: Cache;
  history: PressureHistory;
  plan?: PlanReport;
  allowActions: boolean;
  thresholds: { trigger: number; dstCap: number };
  now: number;
}

export function dashboardState(i: StateInput): DashboardState {
  const v = clusterViewOf(i.cache);
  const progress: DashboardState['progress'] = {};
  for (const [name, d] of v.deployments) {
    const p = rolloutProgress({
      deployment: d.value,
      status: v.statuses.get(name),
      plans: v.rollouts.filter((r) => r.spec.deployment === name),
      replicas: v.replicas.filter((r) => r.desired.spec.deployment === name),
      now: i.now,
    });
    progress[name] = { phase: p.phase, lines: p.lines };
  }
  return {
    revision: v.revision,
    at: new Date(i.now).toISOString(),
    allowActions: i.allowActions,
    thresholds: i.thresholds,
    nodes: nodeViews(v, i.history, i.plan, i.now),
    deployments: statusRows(v, undefined, i.now),
    progress,
    rollouts: rolloutViews(v),
    ...(i.plan ? { plan: i.plan } : {}),
  };
}
