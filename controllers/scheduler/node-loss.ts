// Node loss: a stateless replica whose every copy is on a node NotReady past the grace period (or
// removed) is re-placed in one act — its desired key leaves the lost node and appears on the new
// one, same id, same revision; a stateful one stays and reports node_lost; a suspended one stays
// where its drain left it.
import { keys } from '../../src/api/keys.js';
import { isStateful } from '../../src/api/spec.js';
import type { ReplicaDesired, ServiceSchedulingStatus, ServiceSpec } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { PlacementRequest } from '../placement/placer.js';
import { addUnschedulable, decisionValue, unschedulableOf } from './decide.js';
import type { Op } from '../../src/store/writer.js';
import type { SchedulerPass } from './pass.js';

/**
 * Preconditions of a re-placement, and of a stateful replica's first node_lost report: the
 * evidence of loss is still what this pass judged — each
 * copy's node key still absent (a removed node), or its heartbeat key at the revision judged stale
 * (absent: 0). A cache that lags, or missed heartbeats until its consistency check, sees a live
 * node's heartbeat age; the newer heartbeat in the store refuses the act (the simulation, seed
 * 10737: a replica re-placed off a node whose heartbeat never lapsed; breadth seed 265: a stateful
 * replica reported node_lost off a node whose heartbeat never lapsed).
 */
function lossGuard(pass: SchedulerPass, e: ReplicaEntry): Op[] {
  const ops: Op[] = [];
  for (const host of new Set(e.copies.filter((c) => !c.desired.spec.suspended).map((c) => c.desired.spec.node))) {
    if (!pass.snap.nodes.has(host) && !pass.snap.frozenNodes.has(host)) ops.push({ op: 'check', key: keys.node(host), modRevision: 0 });
    else ops.push({ op: 'check', key: keys.heartbeat(host), modRevision: pass.snap.heartbeatRevisions.get(host) ?? 0 });
  }
  return ops;
}

export function replaceLost(pass: SchedulerPass, kept: ReplicaEntry[], spec: ServiceSpec, st: ServiceSchedulingStatus): ReplicaEntry[] {
  const out: ReplicaEntry[] = [];
  for (const e of kept) {
    if (pass.allReady(e)) {
      out.push(e); // the common case: nothing is lost
      continue;
    }
    const live = e.copies.filter((c) => !c.desired.spec.suspended);
    const lost = live.map((c) => pass.lostFor(c));
    if (!live.length || lost.some((l) => l === undefined)) {
      out.push(e);
      continue;
    }
    const base = live.find((c) => !c.desired.spec.move) ?? live[0]!;
    if (isStateful(base.desired.spec.template)) {
      pass.condition(e).nodeLost.push(e.id);
      pass.plan.stranded.push({ replica: e.id, node: base.desired.spec.node, guard: lossGuard(pass, e) });
      out.push(e);
      continue;
    }
    // Its own revision and resources (the rollout owns those), today's placement constraints.
    const req: PlacementRequest = { replica: e.id, deployment: e.deployment, service: e.service, index: e.index, spec: { ...base.desired.spec.template, placement: spec.placement } };
    const decision = pass.placer.place(req);
    if (!decision.chosen) {
      addUnschedulable(st, unschedulableOf(decision, 1));
      out.push(e);
      continue;
    }
    const notReadyForMs = Math.min(...(lost as number[]));
    const from = e.copies.map((c) => c.desired.spec.node);
    const { move: _m, suspended: _s, movingTo: _t, hostPorts: _p, ...rest } = base.desired.spec;
    // Dynamic host ports are per node: the replacement gets its own from the new node's range.
    const hostPorts = pass.placer.assignPorts(e.id, decision.chosen, req.spec);
    const moved: ReplicaDesired = { ...base.desired, metadata: { name: e.id }, spec: { ...rest, node: decision.chosen, placedAt: pass.iso, ...(Object.keys(hostPorts).length ? { hostPorts } : {}) } };
    const newKey = keys.desired(decision.chosen, e.id);
    const ops = pass.deleteCopies(e);
    ops.push(...lossGuard(pass, e), ...pass.guard(decision.chosen), pass.deploymentGuard(e.deployment), { op: 'create', key: newKey, value: moved }, ...pass.addressOps(moved), { op: 'put', key: keys.decision(e.deployment, e.id), value: decisionValue(decision, 'node_lost', pass.now, pass.cfg.actor) });
    pass.plan.replaceLost.push({ replica: e.id, deployment: e.deployment, service: e.service, from, to: decision.chosen, notReadyForMs, why: decision.why });
    pass.replicaAct(
      e,
      'replace',
      ops,
      'node_lost',
      { node: from.join(','), to: decision.chosen, notReadyForMs: Number.isFinite(notReadyForMs) ? notReadyForMs : null, why: decision.why },
      [{ placements: { trigger: 'node_lost', count: 1 } }],
    );
    // From here on the replica is its new copy (restarts and endpoints look at it there).
    out.push({ ...e, copies: [{ key: newKey, modRevision: 0, desired: moved }] });
  }
  return out;
}
