// The preconditions of a rollout's completion. "Completed" is decided on observed state from one
// snapshot of the cache: no replica of the service left at another spec, no agent still running an
// old container — except on nodes judged NotReady, whose agents cannot report. A snapshot can be
// wrong in two ways that matter here, and the completion act compares what it judged on both:
//
//   - A node judged NotReady from a heartbeat the cache holds late (a watch that lags, or lost the
//     newer heartbeat until the consistency check): its agent is alive and still runs the old
//     container the rollout excused. The act compares each excused node's heartbeat key at the
//     revision judged (absent: 0), as the scheduler's re-placement off a lost node does
//     (controllers/scheduler/node-loss.ts). Simulation seed 60348.
//   - A replica the cache never received (its placement's event lost): the scheduler placed it at
//     the previous spec, the rollout saw every replica it knew at the new one and completed. Every
//     placement writes the service's counter in the same transaction — an indexed one its next
//     index, a global one the counter unchanged (controllers/scheduler/membership.ts globalMarker)
//     — so the act compares the counter at the revision judged (absent: 0). Simulation seeds
//     66901, 69100 (indexed); the breadth variant's global services (test/sim/sim-breadth.test.ts).
//
//   - A move started meanwhile (a drain's or the rebalancer's, decided from the same state): its
//     destination can bring into view a container the rollout never judged — an old one left on
//     that node by an earlier re-placement, whose agent has not stopped it yet. Every voluntary
//     disruption records itself in the service's disruption ledger, in the same transaction, so the
//     act compares the ledger at the revision judged. Simulation seed 30302 (breadth variant).
//
// A refused completion is decided again from a cache that has caught up (or been healed by its
// consistency check). A few compares, whatever the size of the service.
import { keys } from '../../src/api/keys.js';
import type { Op } from '../../src/store/writer.js';

/** What of the snapshot a completion's evidence is compared against. */
export interface EvidenceRevisions {
  /** Heartbeat mod revisions by node (absent: no heartbeat). */
  heartbeatRevisions: ReadonlyMap<string, number>;
  /** Counter mod revisions by `<deployment>/<service>` (absent: no counter). */
  counterRevisions: ReadonlyMap<string, number>;
  /** Disruption ledgers by `<deployment>/<service>` (absent: none recorded yet). */
  ledgers: ReadonlyMap<string, { modRevision: number }>;
}

/** The checks a completion of `deployment/service` carries: its counter, its disruption ledger, and the heartbeat of every node whose old containers it excused as NotReady. */
export function completionGuard(s: EvidenceRevisions, deployment: string, service: string, excusedNodes: Iterable<string>): Op[] {
  const k = `${deployment}/${service}`;
  const ops: Op[] = [
    { op: 'check', key: keys.counter(deployment, service), modRevision: s.counterRevisions.get(k) ?? 0 },
    { op: 'check', key: keys.disruptions(deployment, service), modRevision: s.ledgers.get(k)?.modRevision ?? 0 },
  ];
  for (const node of [...new Set(excusedNodes)].sort()) ops.push({ op: 'check', key: keys.heartbeat(node), modRevision: s.heartbeatRevisions.get(node) ?? 0 });
  return ops;
}
