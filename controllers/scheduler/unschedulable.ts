// A service's unschedulable status: what a placement decision that found no node reports, and how
// several such reports of one pass add up (membership, node loss and preemption all report here).
import type { ServiceSchedulingStatus, Unschedulable } from '../../src/api/types.js';
import type { Decision } from '../placement/placer.js';

/** The status a service reports when `count` of its replicas hit this decision. */
export function unschedulableOf(d: Decision, count: number, missing?: string[]): Unschedulable {
  const nodes: Record<string, string> = {};
  for (const v of d.verdicts) if (v.rejected) nodes[v.node] = `${v.rejected.filter}: ${v.rejected.detail}`;
  return { reason: d.reason ?? 'no_nodes_active', count, message: d.why, nodes, ...(missing?.length ? { missing } : {}) };
}

/**
 * Adds `u` to the service's status: counts add up; the first reason heads it, except that a reason
 * the rescheduler can act on (capacity) heads one that only waits (`preempted`): a service with a
 * preempted replica and another pending for capacity still gets coalescing and preemption for it.
 */
export function addUnschedulable(st: ServiceSchedulingStatus, u: Unschedulable): void {
  const cur = st.unschedulable;
  if (!cur) st.unschedulable = u;
  else if (cur.reason === 'preempted' && u.reason !== 'preempted') st.unschedulable = { ...u, count: cur.count + u.count, message: `${u.message}; and ${cur.message}` };
  else st.unschedulable = { ...cur, count: cur.count + u.count };
}
