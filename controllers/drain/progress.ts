// How a drain's progress reads for an operator: the lines `jaco node drain --wait` prints as
// drains/<host>.status changes, and the final verdict with its exit code. Pure, so the CLI's
// output is tested by tables rather than by waiting on a cluster.
import type { DrainReplicaStatus, NodeDrain } from '../../src/api/types.js';
import { formatDuration } from '../../src/api/units.js';
import { DRAIN_ABORT_REASONS, type DrainAbortReason, type DrainReplicaReason } from '../../src/api/reasons/drain.js';

export type DrainPhase = 'missing' | 'pending' | 'draining' | 'completed' | 'aborted' | 'removed';

export interface DrainProgress {
  phase: DrainPhase;
  /** One line per thing that can change (the drain, each replica), keyed so a follower prints only changes. */
  lines: { key: string; text: string }[];
  /** Set once the drain is over: the last line to print. */
  verdict?: string;
  /** 0 completed or removed, 1 aborted (or the drain is gone); undefined while it runs. */
  exitCode?: number;
}

/** One replica's line: what happened to it, where it went, why it waits. */
export function replicaLine(host: string, st: DrainReplicaStatus): string {
  const to = st.dst ? ` → ${st.dst}` : '';
  const why = st.reason ? ` (${st.reason})` : '';
  // Waiting for the operator needs the operator told how to unblock it.
  const hint = st.state === 'blocked' && st.reason === ('stateful_replica' satisfies DrainReplicaReason) ? `: has volumes; jaco node drain ${host} --force stops it on the node` : '';
  return `${st.state}${to}${why}${hint}`;
}

export function counts(d: NodeDrain): string {
  const v = Object.values(d.status?.replicas ?? {});
  const n = (s: DrainReplicaStatus['state']) => v.filter((r) => r.state === s).length;
  return `${n('done')} moved, ${n('dropped')} dropped, ${n('stopped')} stopped`;
}

/** What is finished for good: the replica no longer holds the drain up. */
const SETTLED: readonly DrainReplicaStatus['state'][] = ['done', 'dropped', 'stopped'];

/**
 * The drain as `jaco describe node` shows it: its state and counts, then one line per replica
 * still holding it up (moving, pending, blocked — with why), so the operator sees what it waits on.
 */
export function drainSummary(d: NodeDrain): string[] {
  const host = d.spec.node;
  const replicas = Object.entries(d.status?.replicas ?? {}).sort(([a], [b]) => (a < b ? -1 : 1));
  const open = replicas.filter(([, st]) => !SETTLED.includes(st.state));
  const reason = d.status?.reason ? ` (${d.status.reason})` : '';
  const tally = replicas.length ? `: ${counts(d)}${open.length ? `, ${open.length} to go` : ''}` : '';
  return [`${d.status?.state ?? 'pending'}${reason}${tally}`, ...open.map(([id, st]) => `  ${id}  ${replicaLine(host, st)}`)];
}

export function drainProgress(d: NodeDrain | undefined): DrainProgress {
  if (!d) return { phase: 'missing', lines: [], verdict: 'the drain is gone (cancelled with jaco node drain --cancel?)', exitCode: 1 };
  const host = d.spec.node;
  const phase: DrainPhase = d.status?.state ?? 'pending';
  const lines = [{ key: '', text: `drain/${host} ${phase}` }];
  for (const [id, st] of Object.entries(d.status?.replicas ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) lines.push({ key: id, text: `  ${id}  ${replicaLine(host, st)}` });
  const took = d.status?.startedAt && d.status.finishedAt ? ` in ${formatDuration(Date.parse(d.status.finishedAt) - Date.parse(d.status.startedAt))}` : '';
  switch (phase) {
    case 'completed':
      return { phase, lines, verdict: `drain/${host} completed${took}: ${counts(d)}; the node stays cordoned (jaco node uncordon ${host} to use it again)`, exitCode: 0 };
    case 'removed':
      return { phase, lines, verdict: `node/${host} removed from the cluster (drained${took}: ${counts(d)}); its agent stops its containers and exits`, exitCode: 0 };
    case 'aborted': {
      const reason = d.status?.reason ?? 'unknown';
      const stuck = Object.entries(d.status?.replicas ?? {}).find(([, r]) => r.state === 'blocked' && r.reason !== 'stateful_replica');
      const which = stuck ? ` (${stuck[0]}: ${stuck[1].reason})` : '';
      const what = DRAIN_ABORT_REASONS[reason as DrainAbortReason] ?? reason;
      return { phase, lines, verdict: `drain/${host} aborted: ${reason}${which} — ${what}`, exitCode: 1 };
    }
    default:
      return { phase, lines };
  }
}
