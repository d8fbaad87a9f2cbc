// Bookkeeping: deleting what no longer belongs to anything (restart commands of copies that are
// gone, decisions of removed replicas, counters and endpoints of removed services, statuses of
// deleted deployments, the last reports of removed nodes), and writing deploymentstatus/<name>.status.scheduling when it changed.
import { nodeRemoved } from '../../src/api/nodes.js';
import { keys } from '../../src/api/keys.js';
import { canonicalJson } from '../../src/api/spec.js';
import { API_VERSION, type DeploymentStatus, type FailingAct } from '../../src/api/types.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import { cmp, iso, type SchedulerPass } from './pass.js';

export function cleanup(pass: SchedulerPass): void {
  const { snap } = pass;
  const orphans: [{ key: string; modRevision: number }, string, string?, string?][] = [];
  // Commands whose copy is gone (a finished move, a removal another controller made).
  for (const cmd of snap.commands.values()) {
    const s = cmd.value.spec;
    const copies = snap.replicas.byId.get(s.replica)?.copies ?? [];
    if (!copies.some((c) => keys.command(c.desired.spec.node, s.replica) === cmd.key)) orphans.push([cmd, 'its replica has no desired key on that node']);
  }
  for (const dec of snap.decisions.values()) {
    const replica = dec.key.slice(dec.key.lastIndexOf('/') + 1);
    if (!snap.replicas.byId.has(replica)) orphans.push([dec, `replica ${replica} no longer exists`]);
  }
  // A deployment whose key cannot be read still exists: nothing of it is cleaned up.
  const serviceGone = (dep: string, svc: string) => !snap.frozenDeployments.has(dep) && !snap.deployments.get(dep)?.value.spec.services[svc];
  // A counter outlives its service while any replica of it is still desired or reported by an
  // agent: a service re-created meanwhile numbers on, so no new replica takes the id of an old
  // container still there (the simulation, seed 10857: a re-created service's replica was matched
  // to the observed key of the deleted one's container, and its rollout reported complete over it).
  // Its delete compares the deployment key, so a re-create landing meanwhile refuses it.
  let remaining: Set<string> | undefined;
  for (const [k, v] of snap.counters) {
    const [dep, svc] = k.split('/') as [string, string];
    if (!serviceGone(dep, svc)) continue;
    remaining ??= servicesWithReplicas(pass);
    if (!remaining.has(k)) orphans.push([v, `service ${k} no longer exists`, dep]);
  }
  for (const [k, v] of snap.endpoints) if (serviceGone(v.value.spec.deployment, v.value.spec.service)) orphans.push([v, `service ${k} no longer exists`]);
  for (const [dep, v] of snap.statuses) if (!snap.deployments.has(dep) && !snap.frozenDeployments.has(dep)) orphans.push([v, `deployment ${dep} no longer exists`]);
  // What a removed node's agent last reported (its removal recorded, so no agent will): nothing of
  // it runs any more that the cluster knows of. The delete compares the node key absent, so a node
  // registering again under the name meanwhile refuses it. A lost node keeps its reports — still
  // registered, or its key lost by the store with no removal recorded: its agent comes back and
  // settles them (api/nodes.ts nodeRemoved).
  const removedNodes: string[] = [];
  for (const host of snap.replicas.observedNodes()) if (nodeRemoved(snap.nodes.has(host) || snap.frozenNodes.has(host), snap.drains.get(host)) && !snap.replicas.onNode(host).length) removedNodes.push(host);
  for (const host of removedNodes) for (const v of snap.replicas.observedOn(host).values()) orphans.push([v, `node ${host} was removed`, undefined, host]);
  for (const [v, why, dep, removedNode] of orphans.sort(([a], [b]) => cmp(a.key, b.key))) {
    if (pass.deleted.has(v.key)) continue;
    pass.plan.cleanup.push({ key: v.key, why });
    const guard = [...(dep ? [pass.deploymentGuard(dep)] : []), ...(removedNode ? [{ op: 'check' as const, key: keys.node(removedNode), modRevision: 0 }] : [])];
    pass.plan.acts.push({ label: `cleanup ${v.key}`, ops: [...guard, pass.deleteOp(v)], audit: [] });
  }
}

/** `<deployment>/<service>` of every service with a desired copy, or a container an agent still reports. */
function servicesWithReplicas(pass: SchedulerPass): Set<string> {
  const { replicas } = pass.snap;
  const out = new Set(replicas.serviceKeys());
  for (const node of replicas.observedNodes()) for (const o of replicas.observedOn(node).values()) out.add(`${o.value.status.deployment}/${o.value.status.service}`);
  return out;
}

/** The failing acts of one deployment, as its status shows them. */
function failingActsOf(pass: SchedulerPass, dep: string): FailingAct[] {
  return pass.snap.failing
    .filter((f) => f.subject === `deployment/${dep}` && !f.label.startsWith('status '))
    .map((f) => ({ act: f.label, reason: f.reason, detail: f.detail, since: iso(f.since), attempts: f.attempts }));
}

/**
 * deploymentstatus/<name>.status.scheduling, written only when it changed (an idle cluster sees
 * no writes), read-modify-write with CAS so the rollout controller's field is kept.
 */
export function writeStatuses(pass: SchedulerPass): void {
  const { snap } = pass;
  for (const [dep, services] of [...pass.plan.status].sort(([a], [b]) => cmp(a, b))) {
    const d = snap.deployments.get(dep)!.value;
    const cur: Versioned<DeploymentStatus> | undefined = snap.statuses.get(dep);
    const prev = cur?.value.status?.scheduling;
    const failingActs = failingActsOf(pass, dep);
    const scheduling = { observedGeneration: d.metadata.generation ?? 1, updatedAt: pass.iso, services, ...(failingActs.length ? { failingActs } : {}) };
    // Attempts and times move on every failure: only which acts fail, and why, is a change worth a write.
    const comparable = (s: typeof scheduling) => canonicalJson({ ...s, updatedAt: '', failingActs: s.failingActs?.map((f) => [f.act, f.reason]) });
    if (prev && comparable(prev) === comparable(scheduling)) continue;
    const audit: AuditRecord[] = [];
    // A stateful replica newly reported lost: the status compares the evidence of loss it judged
    // (its node's heartbeat, or the node key absent), as a re-placement does — a cache that lags
    // must not report a live node's replica node_lost (the breadth simulation, seed 265).
    const guards = new Map<string, Op>();
    for (const [svc, s] of Object.entries(services)) {
      const before = prev?.services[svc];
      const u = s.unschedulable;
      if (u && u.reason !== before?.unschedulable?.reason)
        audit.push({ type: 'placement_failed', time: pass.now, deployment: dep, payload: { service: svc, reason: u.reason, count: u.count, message: u.message, nodes: u.nodes, ...(u.missing ? { missing: u.missing } : {}) } });
      const job = s.job;
      if (job && job.state !== 'running' && (before?.job?.state !== job.state || before.job.specHash !== job.specHash))
        audit.push({ type: job.state === 'succeeded' ? 'job_succeeded' : 'job_failed', time: pass.now, deployment: dep, payload: { service: svc, revision: job.revision, specHash: job.specHash, attempts: job.attempts, exitCode: job.exitCode, durationMs: job.durationMs, reason: job.reason } });
      const newlyLost = (s.nodeLost ?? []).filter((r) => !before?.nodeLost?.includes(r));
      for (const r of newlyLost) {
        const stranded = pass.plan.stranded.find((x) => x.replica === r);
        const node = stranded?.node;
        for (const g of stranded?.guard ?? []) guards.set(g.key, g);
        audit.push({ type: 'node_lost', time: pass.now, deployment: dep, payload: { replica: r, service: svc, node, stranded: true, why: 'the replica has volumes: its data is on that node, so it stays (node_lost)' } });
      }
    }
    const key = keys.deploymentStatus(dep);
    const value: DeploymentStatus = cur
      ? { ...cur.value, status: { ...cur.value.status, scheduling } }
      : { apiVersion: API_VERSION, kind: 'DeploymentStatus', metadata: { name: dep }, status: { scheduling } };
    pass.plan.acts.push({ label: `status ${dep}`, subject: `deployment/${dep}`, ops: [cur ? { op: 'update', key, value, modRevision: cur.modRevision } : { op: 'create', key, value }, ...guards.values()], audit });
  }
}
