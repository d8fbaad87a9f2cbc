// Node readiness and schedulability, as every controller and the CLI judge them. A node is Ready
// while its heartbeat exists (the key is bound to the agent's lease), is fresh (written within
// three intervals) and reports Docker reachable.
import type { Heartbeat, Node, NodeDrain } from './types.js';

/** A heartbeat older than this many intervals is stale (seed 001: 3× the heartbeat interval). */
export const HEARTBEAT_FRESHNESS_INTERVALS = 3;

/**
 * A heartbeat's time, parsed once per heartbeat value: the cache's values are never changed, and
 * every pass judges every copy's node (10,000 replicas: 10,000 date parses a pass, per controller).
 */
const heartbeatTimes = new WeakMap<Heartbeat, number>();

export function heartbeatFresh(hb: Heartbeat | undefined, now: number): boolean {
  if (!hb) return false;
  let t = heartbeatTimes.get(hb);
  if (t === undefined) heartbeatTimes.set(hb, (t = Date.parse(hb.spec.time)));
  return Number.isFinite(t) && now - t <= HEARTBEAT_FRESHNESS_INTERVALS * hb.spec.intervalMs;
}

export function nodeReady(hb: Heartbeat | undefined, now: number): boolean {
  return heartbeatFresh(hb, now) && !!hb?.spec.dockerUp;
}

export function drainActive(d: NodeDrain | undefined): boolean {
  return !!d && (d.status?.state ?? 'pending') !== 'completed' && d.status?.state !== 'aborted';
}

/** Why a node takes no new placements, or undefined when it does. */
export function unschedulableBecause(node: Node | undefined, hb: Heartbeat | undefined, drain: NodeDrain | undefined, now: number): string | undefined {
  if (!node) return 'not registered';
  if (!heartbeatFresh(hb, now)) return 'NotReady (no fresh heartbeat)';
  if (!hb?.spec.dockerUp) return 'NotReady (Docker unreachable)';
  if (drainActive(drain)) return 'draining';
  if (node.spec?.unschedulable) return 'cordoned';
  const c = node.status?.capacity;
  if (!c || (c.cpuMillis <= 0 && c.memoryBytes <= 0)) return 'no capacity';
  return undefined;
}

/** kubectl-style STATUS column: "Ready", "NotReady", "Ready,SchedulingDisabled", "Ready,Draining". */
export function nodeStatusText(node: Node, hb: Heartbeat | undefined, drain: NodeDrain | undefined, now: number): string {
  const parts = [nodeReady(hb, now) ? 'Ready' : 'NotReady'];
  if (drainActive(drain)) parts.push('Draining');
  else if (drain?.status?.state === 'aborted') parts.push('DrainAborted');
  if (node.spec?.unschedulable) parts.push('SchedulingDisabled');
  return parts.join(',');
}
