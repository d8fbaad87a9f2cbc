// Deployments as `jaco status` and the dashboard show them: per service desired/running,
// unschedulable reasons with what the rescheduler does about them, rollouts and moves; per replica
// its node, state, code, restarts and age — rows built from one cluster view, and their text.
import { unschedulableReasonOf } from '../api/reasons/scheduling.js';
import { canaryPhase, type CanaryPhase } from '../api/reasons/rollout.js';
import { nodeReady } from '../api/nodes.js';
import { isJob, placementMode } from '../api/spec.js';
import type { DeploymentStatus, JobResult, ServiceSchedulingStatus, Unschedulable } from '../api/types.js';
import { desiredCount, jobText, replicaState, runningCount, type ClusterView, type ReplicaRow } from './cluster-view.js';
import { age, table, toJson } from './output.js';
import { coalesceText, type CoalesceView } from './rebalance-plan.js';

export interface ReplicaStatusRow {
  replica: string;
  node: string;
  state: string;
  code?: string;
  restarts: number;
  revision: number;
  startedAt?: string;
  placedAt: string;
  age: string;
  move?: { from: string; by: string; deadline: string };
  /** A canary of a rollout (update.canary): scaled away when the rollout ends. */
  canary?: boolean;
}

export interface ServiceStatusRow {
  name: string;
  mode: string;
  desired: number;
  running: number;
  placed?: number;
  unschedulable?: Unschedulable;
  /** What the rescheduler (coalescing) does to make room for it: a move, or why none (attachRescheduler). */
  rescheduler?: string;
  restartExhausted?: string[];
  nodeLost?: string[];
  /** dependsOn not met yet: nothing new is placed. */
  waitingForDependency?: string[];
  /** A job's (mode: job) result at its current spec. */
  job?: JobResult;
  rollout?: { state: string; fromRevision: number; toRevision: number; currentStep: number; totalSteps: number; failureReason?: string; canary?: { replicas: number; phase: CanaryPhase } };
  moves: { replica: string; from: string; to: string; by: string }[];
  replicas: ReplicaStatusRow[];
}

export interface DeploymentStatusRow {
  name: string;
  revision: number;
  /** The generation the scheduler last reported on (behind revision while it catches up). */
  observedGeneration?: number;
  age: string;
  services: ServiceStatusRow[];
}

/** A replica's state as `jaco status` shows it: what the node-agent observed, corrected by what the control plane knows. */
function shownState(r: ReplicaRow, ready: boolean, nodeLost: boolean): { state: string; code?: string } {
  const s = replicaState(r);
  if (nodeLost) return { state: s.state === 'running' ? 'unknown' : s.state, code: 'node_lost' };
  if (!ready && s.code !== 'restart_exhausted' && !r.desired.spec.suspended) return { state: 'unknown', code: 'node_not_ready' };
  return s;
}

/** The status of every deployment (or one), computed from a cluster view. */
export function statusRows(v: ClusterView, name: string | undefined, now: number): DeploymentStatusRow[] {
  const ready = (n: string) => nodeReady(v.heartbeats.get(n));
  const readyNodes = [...v.nodes.keys()].filter(ready).length;
  const deps = [...v.deployments.values()].filter((d) => !name || d.value.metadata.name === name).sort((a, b) => (a.value.metadata.name < b.value.metadata.name ? -1 : 1));
  return deps.map(({ value: d }) => {
    const dep = d.metadata.name;
    const st: DeploymentStatus['status'] | undefined = v.statuses.get(dep)?.status;
    const services = Object.keys(d.spec.services)
      .sort()
      .map((svc): ServiceStatusRow => {
        const spec = d.spec.services[svc]!;
        const sch: ServiceSchedulingStatus | undefined = st?.scheduling?.services[svc];
        const rows = v.replicas.filter((r) => r.desired.spec.deployment === dep && r.desired.spec.service === svc);
        const plan = v.rollouts.find((p) => p.spec.deployment === dep && p.spec.service === svc)?.spec;
        const lost = new Set(sch?.nodeLost ?? []);
        const moves = rows
          .filter((r) => r.desired.spec.move)
          .map((r) => ({ replica: r.id, from: r.desired.spec.move!.from, to: r.node, by: r.desired.spec.move!.by }));
        return {
          name: svc,
          // A job's placement matters less than that it runs to completion.
          mode: isJob(spec) ? 'job' : placementMode(spec),
          desired: sch?.desired ?? desiredCount(d, svc, readyNodes),
          // What a NotReady node last reported is stale: its replicas do not count as running.
          running: runningCount(rows.filter((r) => ready(r.node))),
          ...(sch ? { placed: sch.placed } : {}),
          ...(sch?.unschedulable ? { unschedulable: sch.unschedulable } : {}),
          ...(sch?.restartExhausted ? { restartExhausted: sch.restartExhausted } : {}),
          ...(sch?.nodeLost ? { nodeLost: sch.nodeLost } : {}),
          ...(sch?.waitingForDependency ? { waitingForDependency: sch.waitingForDependency } : {}),
          ...(sch?.job ? { job: sch.job } : {}),
          ...(plan
            ? {
                rollout: {
                  state: plan.state,
                  fromRevision: plan.fromRevision,
                  toRevision: plan.toRevision,
                  currentStep: plan.currentStep,
                  totalSteps: plan.totalSteps,
                  ...(plan.failureReason ? { failureReason: plan.failureReason } : {}),
                  ...(plan.canary ? { canary: { replicas: plan.canary.replicas, phase: canaryPhase(plan.canary) } } : {}),
                },
              }
            : {}),
          moves,
          replicas: rows.map((r) => {
            const s = shownState(r, ready(r.node), lost.has(r.id));
            const startedAt = r.observed?.status?.startedAt;
            const m = r.desired.spec.move;
            return {
              replica: r.id,
              node: r.node,
              state: s.state,
              ...(s.code ? { code: s.code } : {}),
              restarts: r.command?.status?.restarts ?? 0,
              revision: r.desired.spec.revision,
              ...(startedAt ? { startedAt } : {}),
              placedAt: r.desired.spec.placedAt,
              age: age(startedAt ?? r.desired.spec.placedAt, now),
              ...(m ? { move: { from: m.from, by: m.by, deadline: m.deadline } } : {}),
              ...(r.desired.spec.canary ? { canary: true } : {}),
            };
          }),
        };
      });
    return {
      name: dep,
      revision: d.metadata.generation ?? 1,
      ...(st?.scheduling ? { observedGeneration: st.scheduling.observedGeneration } : {}),
      age: age(d.metadata.creationTimestamp, now),
      services,
    };
  });
}

function rolloutText(r: ServiceStatusRow['rollout']): string {
  if (!r) return '-';
  const canary = r.canary && r.state !== 'completed' && r.state !== 'aborted' ? ` canary×${r.canary.replicas} ${r.canary.phase === 'waiting' ? 'waiting for promote' : r.canary.phase}` : '';
  return `${r.state} r${r.fromRevision}→r${r.toRevision} ${r.currentStep}/${r.totalSteps}${r.failureReason ? ` (${r.failureReason})` : ''}${canary}`;
}

/** The table form of one deployment's status. */
export function renderDeployment(d: DeploymentStatusRow): string {
  let out = `Deployment ${d.name}: revision ${d.revision}${d.observedGeneration !== undefined && d.observedGeneration !== d.revision ? ` (scheduler at ${d.observedGeneration})` : ''}, age ${d.age}\n`;
  out += table(
    ['SERVICE', 'MODE', 'DESIRED', 'RUNNING', 'ROLLOUT', 'MOVES', 'UNSCHEDULABLE'],
    d.services.map((s) => [
      s.name,
      s.mode,
      s.desired,
      s.running,
      rolloutText(s.rollout),
      s.moves.length ? s.moves.map((m) => `${m.replica} ${m.from}→${m.to} (${m.by})`).join(', ') : '-',
      s.unschedulable ? `${s.unschedulable.count} ${unschedulableReasonOf(s.unschedulable.reason)}` : s.waitingForDependency ? `waiting_for_dependency: ${s.waitingForDependency.join(', ')}` : '-',
    ]),
  );
  const replicas = d.services.flatMap((s) => s.replicas.map((r) => ({ s, r })));
  if (replicas.length)
    out +=
      '\n' +
      table(
        ['REPLICA', 'SERVICE', 'NODE', 'STATE', 'CODE', 'RESTARTS', 'REVISION', 'AGE', 'MOVE'],
        replicas.map(({ s, r }) => [r.replica, s.name, r.node, r.state, r.code ?? '-', r.restarts, r.canary ? `${r.revision} (canary)` : r.revision, r.age, r.move ? `from ${r.move.from} (${r.move.by})` : '-']),
      );
  for (const s of d.services) {
    const u = s.unschedulable;
    if (!u) continue;
    out += `\n${s.name}: ${u.count} replica(s) unschedulable: ${unschedulableReasonOf(u.reason)}\n  ${u.message}\n`;
    if (u.missing?.length) out += `  missing hosts: ${u.missing.join(', ')}\n`;
    for (const [node, why] of Object.entries(u.nodes)) out += `  ${node}: ${why}\n`;
    if (s.rescheduler) out += `  rescheduler: ${s.rescheduler}\n`;
  }
  for (const s of d.services) {
    if (s.restartExhausted?.length) out += `\n${s.name}: restart_exhausted (no more restarts until the next apply): ${s.restartExhausted.join(', ')}\n`;
    if (s.nodeLost?.length) out += `\n${s.name}: node_lost (stateful, kept on their node): ${s.nodeLost.join(', ')}\n`;
    if (s.job) out += `\n${s.name}: job ${jobText(s.job)}\n`;
  }
  return out;
}

/** Adds, to every unschedulable service, what the rescheduler's current plan does about it. */
export function attachRescheduler(rows: DeploymentStatusRow[], coalesce: readonly CoalesceView[]): void {
  for (const d of rows)
    for (const s of d.services) {
      const v = s.unschedulable && coalesce.find((c) => c.deployment === d.name && c.service === s.name);
      if (v) s.rescheduler = coalesceText(v);
    }
}

export function renderStatus(rows: DeploymentStatusRow[], format: string): string {
  if (format === 'json') return toJson({ deployments: rows });
  if (!rows.length) return 'No deployments.\n';
  return rows.map(renderDeployment).join('\n');
}
