// Node loss: a stateless replica whose every copy is on a node NotReady past the grace period (or
// removed) is re-placed in one act — its desired key leaves the lost node and appears on the new
// one, same id, same revision; a stateful one stays and reports node_lost; a suspended one stays
// where its drain left it. A node is lost by the NotReady clock the leader keeps (trackNotReady).
import { keys } from '../../src/api/keys.js';
import { nodeReady } from '../../src/api/nodes.js';
import { isStateful } from '../../src/api/spec.js';
import type { Heartbeat, ReplicaDesired, ServiceSchedulingStatus, ServiceSpec } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { PlacementRequest } from '../placement/placer.js';
import { decisionValue } from '../placement/decision.js';
import type { Op } from '../../src/store/writer.js';
import type { SchedulerPass } from './pass.js';
import { addUnschedulable, unschedulableOf } from './unschedulable.js';

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

/**
 * Leader-local memory of NotReady nodes: a node is NotReady "since" the first pass that saw it so
 * (a new leader starts the clocks again, so a node is never declared lost on a stale memory).
 * Each clock remembers the node's last Ready heartbeat as it judged it (`judged`: its revision
 * from LAST_READY, 0 for none): a newer one means the node was Ready in between — even if no pass
 * saw it so — and this lapse is a new one, its clock starts now. Kept by name alone, the clock of
 * an earlier lapse outlived the node's return, and a fresh lapse was judged past the grace at once
 * (the simulation, seeds 55069 and 61211).
 */
export function trackNotReady(
  since: Map<string, number>,
  judged: Map<string, number>,
  hosts: Iterable<string>,
  heartbeats: ReadonlyMap<string, Heartbeat>,
  lastReady: ReadonlyMap<string, number>,
  now: number,
): void {
  const all = new Set(hosts);
  for (const h of [...since.keys()]) if (!all.has(h)) since.delete(h);
  for (const h of [...judged.keys()]) if (!since.has(h)) judged.delete(h);
  for (const h of all) {
    if (nodeReady(heartbeats.get(h))) {
      since.delete(h);
      judged.delete(h);
      continue;
    }
    const ready = lastReady.get(h) ?? 0;
    // Ready since the clock last judged it (its heartbeat gone, or rewritten with Docker down, since).
    const returned = judged.has(h) && judged.get(h) !== ready;
    if (!since.has(h) || returned) since.set(h, now);
    judged.set(h, ready);
  }
}
