// Seed 004's node eligibility beyond readiness: a node is `degraded` — it takes no new placements
// until its causes clear or an operator trusts it (`jaco node trust`) — when its data root is
// fuller than the cluster allows, when replicas of several services keep failing on it, or when it
// cannot reach most of its WireGuard peers. Pure: the agent reports samples (heartbeat disk and
// overlay), the scheduler's restart bookkeeping (commands/) gives the failures, and every reader
// (placer, `get nodes`, `describe node`, dashboard) judges them here alike, against one clock.
import { OUTSIDE_RESTART_CAUSES } from './reasons/scheduling.js';
import type { DiskSample, Heartbeat, Node, NodeSettingsSpec, OverlayPeerSample, ReplicaCommand, ReplicaCommandStatus } from './types.js';
import { durationMs, formatBytes, formatDuration, memoryBytes } from './units.js';

/** The settings with every default filled in (what readers use). */
export interface NodeSettingsResolved {
  defaultDiskBytes: number;
  diskPressurePercent: number;
  failureWindowMs: number;
  failureServices: number;
  overlayHandshakeMaxAgeMs: number;
  overlayUnreachablePercent: number;
}

export const DEFAULT_NODE_SETTINGS: NodeSettingsResolved = {
  defaultDiskBytes: 4 * 1024 ** 3,
  diskPressurePercent: 90,
  failureWindowMs: 10 * 60_000,
  failureServices: 3,
  // WireGuard re-handshakes every 2 minutes while traffic flows (the persistent keepalive keeps
  // it flowing); a session with none for 3 minutes is dead (REJECT_AFTER_TIME).
  overlayHandshakeMaxAgeMs: 180_000,
  overlayUnreachablePercent: 50,
};

export class NodeSettingsError extends Error {
  override name = 'NodeSettingsError';
}

/** Stored (or flag) settings over the defaults; throws NodeSettingsError naming the field that is wrong. */
export function resolveNodeSettings(s: NodeSettingsSpec | undefined): NodeSettingsResolved {
  const out = { ...DEFAULT_NODE_SETTINGS };
  if (!s) return out;
  const field = <T>(name: keyof NodeSettingsSpec, f: () => T): T => {
    try {
      return f();
    } catch (e) {
      throw new NodeSettingsError(`${name}: ${(e as Error).message}`);
    }
  };
  const percent = (name: keyof NodeSettingsSpec, v: number) => {
    if (!Number.isFinite(v) || v <= 0 || v > 100) throw new NodeSettingsError(`${name}: ${v} is not a percentage in (0, 100]`);
    return v;
  };
  const positiveMs = (name: keyof NodeSettingsSpec, v: string) => {
    const ms = field(name, () => durationMs(v));
    if (!(ms > 0)) throw new NodeSettingsError(`${name}: "${v}" is not a positive duration (e.g. 30s, 10m)`);
    return ms;
  };
  if (s.defaultInstanceEphemeralDisk !== undefined) out.defaultDiskBytes = field('defaultInstanceEphemeralDisk', () => memoryBytes(s.defaultInstanceEphemeralDisk));
  if (s.diskPressurePercent !== undefined) out.diskPressurePercent = percent('diskPressurePercent', s.diskPressurePercent);
  if (s.failureWindow !== undefined) out.failureWindowMs = positiveMs('failureWindow', s.failureWindow);
  if (s.failureServices !== undefined) {
    if (!Number.isInteger(s.failureServices) || s.failureServices < 1) throw new NodeSettingsError(`failureServices: ${s.failureServices} is not a whole number ≥ 1`);
    out.failureServices = s.failureServices;
  }
  if (s.overlayHandshakeMaxAge !== undefined) out.overlayHandshakeMaxAgeMs = positiveMs('overlayHandshakeMaxAge', s.overlayHandshakeMaxAge);
  if (s.overlayUnreachablePercent !== undefined) out.overlayUnreachablePercent = percent('overlayUnreachablePercent', s.overlayUnreachablePercent);
  return out;
}

/** Why a node is degraded: closed, with descriptions (status, `describe node`, audit, docs). */
export const DEGRADED_CAUSES = {
  disk_pressure: "its Docker data root's filesystem is fuller than diskPressurePercent",
  repeated_failures: 'replicas of failureServices or more services restarted on it within failureWindow',
  overlay_unreachable: 'more than overlayUnreachablePercent of its WireGuard peers were neither heard from nor handshook within overlayHandshakeMaxAge',
} as const;
export type DegradedCause = keyof typeof DEGRADED_CAUSES;

export interface DegradedFinding {
  cause: DegradedCause;
  detail: string;
}

/** A node's degraded state: its causes (empty: not degraded), and whether the operator trusts it anyway. */
export interface NodeCondition {
  causes: DegradedFinding[];
  trusted: boolean;
}

/**
 * Whether a replica's restart bookkeeping counts against its node at `now`: it is in a streak of
 * restarts (cleared once ready), the last one within the window, and that one was not ordered for
 * an act outside jaco (a container removed or paused by hand: OUTSIDE_RESTART_CAUSES). A record
 * without a cause predates it and counts, as it always did.
 */
export function restartCountsAgainstNode(st: ReplicaCommandStatus | undefined, windowMs: number, now: number): st is ReplicaCommandStatus {
  if (!st?.restarts || !st.lastRestartAt || now - Date.parse(st.lastRestartAt) > windowMs) return false;
  return !(OUTSIDE_RESTART_CAUSES as ReadonlySet<string>).has(st.lastRestartCause ?? '');
}

/**
 * Per node, the services (deployment/service) with a replica restarted within the window: the
 * scheduler's restart bookkeeping, keyed commands/<host>/<replica>. A restart is of one replica,
 * so failures of one bad service alone never degrade a node (that is the service's problem).
 */
export function failingServicesOf(commands: Iterable<readonly [string, { value: ReplicaCommand }]> | undefined, services: (replica: string) => string | undefined, windowMs: number, now: number): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const [key, c] of commands ?? []) {
    if (!restartCountsAgainstNode(c.value.status, windowMs, now)) continue;
    const host = key.split('/')[1]!;
    const svc = services(c.value.spec.replica) ?? c.value.spec.replica;
    let set = out.get(host);
    if (!set) out.set(host, (set = new Set()));
    set.add(svc);
  }
  return out;
}

/** How full a data root is, in percent, as df counts it: used over used + available (root's reserve left out). */
export function diskUsedPercent(d: DiskSample): number | undefined {
  const denom = d.usedBytes + d.availableBytes;
  return denom > 0 ? (100 * d.usedBytes) / denom : undefined;
}

/**
 * A peer is reachable while its latest handshake, or the latest growth of what it sent, is within
 * the age of the sample's own time; a peer configured more recently than that has until then to
 * show either (`since`). `sampledAt` is the heartbeat's, on the same (agent's) clock as the peer's
 * times, so a node whose clock is off is judged alike (issue 29: no two clocks compared).
 */
export function peerReachable(p: OverlayPeerSample, settings: NodeSettingsResolved, sampledAt: number): boolean {
  const t = (x: string | undefined) => (x ? Date.parse(x) : -Infinity);
  return sampledAt - Math.max(t(p.handshakeAt), t(p.heardAt), t(p.since)) <= settings.overlayHandshakeMaxAgeMs;
}

/** When the agent wrote this heartbeat, on its own clock: what its samples' times are measured against. */
const sampledAt = (hb: Heartbeat): number => Date.parse(hb.spec.time);

/**
 * Per node, the peers that find it unreachable in their own samples. A link cut one way (the
 * node's sends dropped) leaves the node hearing its peers while none hears it: its own sample
 * looks fine, theirs do not, so both sides count.
 */
export function unreachableReports(heartbeats: Iterable<Heartbeat>, settings: NodeSettingsResolved): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const hb of heartbeats)
    for (const p of hb.spec.overlay?.peers ?? []) {
      if (peerReachable(p, settings, sampledAt(hb))) continue;
      let set = out.get(p.node);
      if (!set) out.set(p.node, (set = new Set()));
      set.add(hb.spec.node);
    }
  return out;
}

/**
 * Why a node is degraded, judged from its fresh heartbeat's samples, the failures on it and its
 * peers' reports. Samples are judged against the heartbeat's own time, so no clock is passed in.
 */
export function degradedCauses(hb: Heartbeat | undefined, failingServices: ReadonlySet<string> | undefined, settings: NodeSettingsResolved, reportedBy?: ReadonlySet<string>): DegradedFinding[] {
  const out: DegradedFinding[] = [];
  const disk = hb?.spec.disk;
  const used = disk && diskUsedPercent(disk);
  if (disk && used !== undefined && used > settings.diskPressurePercent)
    out.push({ cause: 'disk_pressure', detail: `${disk.path} is ${Math.round(used)}% full (${formatBytes(disk.availableBytes)} of ${formatBytes(disk.totalBytes)} free; limit ${settings.diskPressurePercent}%)` });
  if (failingServices && failingServices.size >= settings.failureServices)
    out.push({ cause: 'repeated_failures', detail: `replicas of ${failingServices.size} services restarted within ${formatDuration(settings.failureWindowMs)} (${[...failingServices].sort().slice(0, 5).join(', ')}); limit ${settings.failureServices}` });
  const peers = hb?.spec.overlay?.peers ?? [];
  if (peers.length) {
    const unreachable = peers.filter((p) => !peerReachable(p, settings, sampledAt(hb!)) || reportedBy?.has(p.node)).map((p) => p.node);
    if ((100 * unreachable.length) / peers.length > settings.overlayUnreachablePercent)
      out.push({ cause: 'overlay_unreachable', detail: `${unreachable.length} of ${peers.length} WireGuard peers unreachable (neither heard nor handshake within ${formatDuration(settings.overlayHandshakeMaxAgeMs)}: ${unreachable.sort().slice(0, 5).join(', ')}); limit ${settings.overlayUnreachablePercent}%` });
  }
  return out;
}

/** The node's condition: its causes and the operator's override (Node spec.trusted). */
export function nodeCondition(node: Node | undefined, hb: Heartbeat | undefined, failingServices: ReadonlySet<string> | undefined, settings: NodeSettingsResolved, reportedBy?: ReadonlySet<string>): NodeCondition {
  return { causes: degradedCauses(hb, failingServices, settings, reportedBy), trusted: !!node?.spec?.trusted };
}

/** What every reader of node conditions holds: the placer's stored state and the CLI's cluster view alike. */
export interface ConditionSources {
  nodes: Iterable<Node>;
  heartbeats: ReadonlyMap<string, Heartbeat>;
  /** Restart bookkeeping by store key (commands/<host>/<replica>). */
  commands: Iterable<readonly [string, { value: ReplicaCommand }]> | undefined;
  /** "<deployment>/<service>" of a replica id (one restarted but since removed counts as itself). */
  serviceOf: (replica: string) => string | undefined;
  settings: NodeSettingsResolved;
}

/**
 * Every node's condition, by name: the one judgement the placer (controllers/placement/input.ts),
 * `get nodes`, `describe node` and the dashboard (src/app/cluster-view.ts) all read. `now` bounds
 * the failure window only; samples are judged against their heartbeat's own time.
 */
export function nodeConditions(s: ConditionSources, now: number): Map<string, NodeCondition> {
  const failing = failingServicesOf(s.commands, s.serviceOf, s.settings.failureWindowMs, now);
  const reports = unreachableReports(s.heartbeats.values(), s.settings);
  const out = new Map<string, NodeCondition>();
  for (const n of s.nodes) {
    const name = n.metadata.name;
    out.set(name, nodeCondition(n, s.heartbeats.get(name), failing.get(name), s.settings, reports.get(name)));
  }
  return out;
}

/** Why the node takes no new placements for being degraded (undefined: it is not, or it is trusted). */
export function degradedBecause(c: NodeCondition): string | undefined {
  if (!c.causes.length || c.trusted) return undefined;
  return `degraded: ${c.causes.map((f) => `${f.cause} — ${f.detail}`).join('; ')} (jaco node trust overrides)`;
}

/** The STATUS column's word for it: "Degraded", "Degraded(trusted)", or nothing. */
export function degradedText(c: NodeCondition): string | undefined {
  if (!c.causes.length) return undefined;
  return c.trusted ? 'Degraded(trusted)' : 'Degraded';
}

/** A node's STATUS with its degraded state after the readiness words: "Ready,Degraded". */
export function statusWithCondition(status: string, c: NodeCondition | undefined): string {
  const d = c && degradedText(c);
  return d ? `${status},${d}` : status;
}

/** `describe node`'s lines about scratch disk, overlay reachability and the degraded condition. */
export function conditionLines(node: Node, hb: Heartbeat | undefined, c: NodeCondition | undefined, settings: NodeSettingsResolved): string[] {
  const out: string[] = [];
  const disk = hb?.spec.disk;
  const cap = node.status?.capacity.diskBytes;
  if (disk) {
    const used = Math.round(diskUsedPercent(disk) ?? 0);
    const how = disk.capped ? `booked and capped (${disk.driver} StorageOpt size)` : `booked, not capped: ${disk.driver} on ${disk.backingFs ?? 'an unknown filesystem'}`;
    out.push(`Disk:         ${disk.path}: ${formatBytes(disk.availableBytes)} free of ${formatBytes(disk.totalBytes)} (${used}% used; degraded past ${settings.diskPressurePercent}%); scratch disk ${how}${cap !== undefined && cap !== disk.totalBytes ? `; capacity declared ${formatBytes(cap)}` : ''}`);
  } else out.push(`Disk:         ${cap !== undefined ? `capacity ${formatBytes(cap)} (declared); ` : ''}no disk sample (an agent older than disk booking, or Docker's storage not read)${cap === undefined ? ': scratch disk not booked on this node' : ''}`);
  const peers = hb?.spec.overlay?.peers;
  if (peers) {
    const late = peers.filter((p) => !peerReachable(p, settings, sampledAt(hb!)));
    const ago = (t: string) => formatDuration(Math.max(0, sampledAt(hb!) - Date.parse(t)));
    const fmt = (p: OverlayPeerSample) => `${p.node} (${p.handshakeAt ? `handshake ${ago(p.handshakeAt)} ago` : 'no handshake'}${p.heardAt ? `, heard ${ago(p.heardAt)} ago` : ''}${p.since ? `, configured ${ago(p.since)} ago` : ''})`;
    // The mesh joins nodes with subnets, given once a cluster-network service exists (docs/networking.md).
    if (!peers.length) out.push('Overlay:      no peers yet (nodes are joined once they have subnets: the first cluster-network service gives them)');
    else out.push(`Overlay:      ${peers.length - late.length} of ${peers.length} peers reachable${late.length ? `; unreachable: ${late.map(fmt).join(', ')}` : ''}`);
  }
  if (c?.causes.length) {
    out.push(`Degraded:     ${c.trusted ? 'yes, but trusted by an operator (jaco node distrust to undo): it takes placements' : 'yes: no new placements until the causes clear (jaco node trust overrides)'}`);
    for (const f of c.causes) out.push(`  ${f.cause}: ${f.detail}`);
  } else out.push(`Degraded:     no${c?.trusted ? ' (trusted by an operator: a future cause would not stop placements)' : ''}`);
  return out;
}
