// Crash-loop escalation (issue 17, after seed 004's "avoid recent-failure nodes"): a replica that
// exhausts its restart budget on one node may be failing because of the node — a full disk, a
// broken driver, a port some host process holds. Before restart_exhausted becomes final, the
// replica is re-placed once on another node: same id and revision, a fresh restart budget, in the
// act that would have marked it exhausted. It relocates only when
//   - its container is not running (it exited or failed): the new copy never runs beside the old
//     one (a degraded replica — running, health failing — is left to the budget as before);
//   - the node may be the cause: not a container removed or paused outside jaco (docker rm,
//     docker pause), which another node would not help;
//   - it is stateless and not global (its data, or its node, is the point);
//   - it was not relocated already at this generation (exhausting again is final);
//   - the service is not rolling out toward its spec (a new spec that crashes is the rollout's to
//     abort, at once, as seed 001 says);
//   - another node takes it (the placer, the failing node excluded; its recent failures also
//     count against it everywhere else).
import { keys } from '../../src/api/keys.js';
import { OUTSIDE_RESTART_CAUSES, type RestartCause } from '../../src/api/reasons/scheduling.js';
import { isStateful, placementMode } from '../../src/api/spec.js';
import type { ReplicaDesired, ReplicaCommandStatus } from '../../src/api/types.js';
import type { Copy, ReplicaEntry } from '../../src/runtime/replicas.js';
import type { PlacementRequest } from '../placement/placer.js';
import { decisionValue } from '../placement/decision.js';
import type { SchedulerPass } from './pass.js';

/** Re-places an exhausted replica once on another node, if it should and can; true when it did. */
export function relocate(pass: SchedulerPass, e: ReplicaEntry, c: Copy, cause: RestartCause, status: ReplicaCommandStatus, generation: number): boolean {
  const s = c.desired.spec;
  if (cause === 'degraded' || OUTSIDE_RESTART_CAUSES.has(cause) || isStateful(s.template) || placementMode(s.template) === 'global') return false;
  if (s.relocated?.generation === generation) return false;
  const plan = pass.rolloutPlan(e.deployment, e.service)?.spec;
  if (plan && (plan.state === 'in_progress' || plan.state === 'paused') && plan.toHash === s.specHash) return false;
  const placement = pass.snap.deployments.get(e.deployment)?.value.spec.services[e.service]?.placement;
  const req: PlacementRequest = { replica: e.id, deployment: e.deployment, service: e.service, index: e.index, spec: { ...s.template, placement }, exclude: [s.node] };
  const decision = pass.placer.place(req);
  if (!decision.chosen) return false;
  const to = decision.chosen;
  const { hostPorts: _p, ...rest } = s;
  const hostPorts = pass.placer.assignPorts(e.id, to, req.spec);
  const moved: ReplicaDesired = {
    ...c.desired,
    metadata: { name: e.id },
    spec: { ...rest, node: to, placedAt: pass.iso, relocated: { from: s.node, generation, at: pass.iso }, ...(Object.keys(hostPorts).length ? { hostPorts } : {}) },
  };
  const why = `exhausted ${status.restarts} restarts on ${s.node} (${cause}); re-placed once: ${decision.why}`;
  const ops = [
    pass.deploymentGuard(e.deployment),
    ...pass.deleteCopies(e),
    ...pass.guard(to),
    { op: 'create' as const, key: keys.desired(to, e.id), value: moved },
    ...pass.addressOps(moved),
    { op: 'put' as const, key: keys.decision(e.deployment, e.id), value: decisionValue({ ...decision, why }, 'crash_loop', pass.now, pass.cfg.actor) },
  ];
  pass.plan.place.push({ replica: e.id, deployment: e.deployment, service: e.service, node: to, ...(e.index !== undefined ? { index: e.index } : {}), trigger: 'crash_loop', why });
  pass.replicaAct(e, 'relocate', ops, 'replica_relocated', { from: s.node, to, cause, restarts: status.restarts, why }, [{ placements: { trigger: 'crash_loop', count: 1 } }]);
  return true;
}
