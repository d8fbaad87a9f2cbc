// Preempted replicas (issue 17): a replica the rebalancer stopped for a higher-priority pending one
// stays a member of its service — suspended with reason `preempted`, it is not replaced by a new
// index and occupies nothing. In its service's priority turn of every pass it is placed again as
// soon as a node takes it (same id and revision: its desired key moves there, or is un-suspended
// where it is), never into a hole held for another service. Until then its service reports it
// unschedulable with reason `preempted`, naming who took its room.
import { keys } from '../../src/api/keys.js';
import type { ReplicaDesired, ServiceSchedulingStatus, ServiceSpec } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { Op } from '../../src/store/writer.js';
import type { PlacementRequest } from '../placement/placer.js';
import { decisionValue } from '../placement/decision.js';
import type { SchedulerPass } from './pass.js';
import { addUnschedulable, unschedulableOf } from './unschedulable.js';

/** The suspension reason the rebalancer stops a victim of preemption with. */
export const PREEMPTED = 'preempted';

/** Every copy of the replica is stopped by preemption (a replica is preempted whole: it has one copy). */
export function isPreempted(e: ReplicaEntry): boolean {
  return e.copies.length > 0 && e.copies.every((c) => c.desired.spec.suspended?.reason === PREEMPTED);
}

/** Places the service's preempted replicas again where capacity exists; returns how many stay preempted. */
export function returnPreempted(pass: SchedulerPass, spec: ServiceSpec, kept: readonly ReplicaEntry[], st: ServiceSchedulingStatus): number {
  let still = 0;
  for (const e of kept) {
    if (!isPreempted(e)) continue;
    const c = e.copies[0]!;
    const s = c.desired.spec;
    const held = pass.heldAgainst(e.deployment, e.service);
    // Its own revision and resources (the rollout owns those), today's placement constraints.
    const req: PlacementRequest = { replica: e.id, deployment: e.deployment, service: e.service, index: e.index, spec: { ...s.template, placement: spec.placement }, ...(held ? { held } : {}) };
    const decision = pass.placer.place(req);
    const by = s.preempted ? `${s.preempted.for.deployment}/${s.preempted.for.service} (priority ${s.preempted.forPriority} over ${s.preempted.priority})` : 'a higher-priority service';
    if (!decision.chosen) {
      still++;
      addUnschedulable(st, { ...unschedulableOf(decision, 1), reason: 'preempted', message: `${e.id} was stopped on ${s.node} for ${by}; placed again as soon as capacity exists — now: ${decision.why}` });
      continue;
    }
    const to = decision.chosen;
    const { suspended: _s, preempted: _p, hostPorts: _h, ...rest } = s;
    // Dynamic host ports are per node and its old ones were given up with its room: fresh ones.
    const hostPorts = pass.placer.assignPorts(e.id, to, req.spec);
    const value: ReplicaDesired = { ...c.desired, metadata: { name: e.id }, spec: { ...rest, node: to, placedAt: pass.iso, ...(Object.keys(hostPorts).length ? { hostPorts } : {}) } };
    const why = `preempted on ${s.node} for ${by}; capacity returned: ${decision.why}`;
    const ops: Op[] = [pass.deploymentGuard(e.deployment), ...pass.guard(to)];
    // Back where it was, it keeps its address (its claim never went); elsewhere it gets one of its new node.
    if (to === s.node) ops.push({ op: 'update', key: c.key, value, modRevision: c.modRevision });
    else ops.push(...pass.deleteCopies(e), { op: 'create', key: keys.desired(to, e.id), value }, ...pass.addressOps(value));
    ops.push({ op: 'put', key: keys.decision(e.deployment, e.id), value: decisionValue({ ...decision, why }, 'preempted', pass.now, pass.cfg.actor) });
    pass.plan.place.push({ replica: e.id, deployment: e.deployment, service: e.service, node: to, ...(e.index !== undefined ? { index: e.index } : {}), trigger: 'preempted', why });
    pass.replicaAct(e, 'return', ops, 'replica_placed', { node: to, from: s.node, trigger: 'preempted', why }, [{ placements: { trigger: 'preempted', count: 1 } }]);
  }
  return still;
}
