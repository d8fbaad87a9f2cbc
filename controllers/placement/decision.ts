// The stored record of a placement decision (decisions/<deployment>/<replica>, what `jaco explain
// REPLICA` prints): every node's verdict and why the chosen node won. Written by whoever puts a
// replica on a node — the scheduler (scale-up, a global node, a lost node's replacement) and the
// movers (a drain's or the rebalancer's move) — so a replica is explained wherever it is now.
import type { DecisionTrigger } from '../../src/api/reasons/scheduling.js';
import { API_VERSION, type PlacementDecision } from '../../src/api/types.js';
import type { Decision } from './placer.js';

export function decisionValue(d: Decision, trigger: DecisionTrigger, now: number, actor: string): PlacementDecision {
  return {
    apiVersion: API_VERSION,
    kind: 'PlacementDecision',
    metadata: { name: d.replica },
    spec: {
      replica: d.replica,
      deployment: d.deployment,
      service: d.service,
      at: new Date(now).toISOString(),
      actor,
      mode: d.mode,
      ...(d.chosen ? { chosen: d.chosen } : {}),
      why: d.why,
      ...(d.reason ? { reason: d.reason } : {}),
      verdicts: d.verdicts,
      ...(d.omitted ? { omitted: d.omitted } : {}),
      trigger,
    },
  };
}
