// Node readiness and schedulability, as every controller and the CLI judge them. A node is Ready
// while its heartbeat exists and reports Docker reachable. The heartbeat key is bound to the
// agent's lease: etcd deletes it one TTL after the agent's last keepalive, timed on etcd's own
// clock. So liveness is the lease, and no reader compares the agent's wall clock with its own: a
// node whose clock is minutes off either way is Ready while it keeps its lease (issue 29; its skew
// is measured and shown apart: clock-skew.ts).
//
// The node record's two halves (issue 29): what the agent REPORTS — Node.status (capacity,
// address, keys, endpoints, agent version), Node.metadata.labels (its own --labels) and the
// Heartbeat (liveness, Docker, pressure, clock skew) — and what OPERATORS DECIDE — Node.spec
// (cordon, runtime labels from `jaco node label`, and the like), which the agent never changes.
// New agent-reported fields go to Node.status or Heartbeat.spec; new operator decisions to NodeSpec.
// The two halves are two keys — nodes/<host> (the agent's) and nodespecs/<host> (the CLI's; the
// agent's etcd user only reads it) — so a stolen agent password cannot uncordon or trust its node;
// readers see them joined by nodeAsDecided, through the cache's one NODES index (src/runtime/nodes.ts).
import type { Heartbeat, Node, NodeDrain, NodeSpec, NodeSpecRecord, PressureSample } from './types.js';

/** What nodeAsDecided reads a nodespecs/<host> value that cannot be read as: cordoned, since what operators decided is not known. */
export const UNREADABLE_NODE_SPEC: NodeSpec = Object.freeze({ unschedulable: true });

/**
 * A node as operators see it: what its agent reports (nodes/<host>) with what operators decided
 * (nodespecs/<host>, or 'unreadable' when that key holds a value that cannot be read). A cluster
 * written before the split keeps the decision inside nodes/<host> as `spec`: honoured while
 * nodespecs/<host> is absent, so an upgrade never uncordons a node; the CLI's next cordon, label or
 * trust writes nodespecs/<host>, and from then on a `spec` in nodes/<host> is ignored. The node
 * object itself is returned when nothing is joined: no copy per node per pass.
 */
export function nodeAsDecided(node: Node, decided: NodeSpecRecord | 'unreadable' | undefined): Node {
  if (decided === undefined) return node;
  return { ...node, spec: decided === 'unreadable' ? UNREADABLE_NODE_SPEC : (decided.spec ?? {}) };
}

/** Where a seeded nodespecs/<host> took its spec from (audit `node_spec_seeded`). */
export type NodeSpecSeedSource = 'nodes' | 'none' | 'unreadable';

export interface NodeSpecSeed {
  host: string;
  spec: NodeSpec;
  from: NodeSpecSeedSource;
}

/**
 * The nodespecs/<host> keys to create, once, when nodes' agents get their etcd users (jaco etcd
 * rbac, jaco up): a node with a nodespecs/<host> key (readable or not) has one, and nothing here
 * ever overwrites it. Every other node — registered (`nodes`) or only named (`named`, its agent
 * not yet joined) — gets one: the `spec` a cluster written before the split kept in nodes/<host>,
 * or an empty one, or a cordon when nodes/<host> cannot be read (what operators decided is not
 * known). Once it exists the nodes/<host> `spec`, which the agent's user can write, is never read
 * (nodeAsDecided), so the user that cannot write nodespecs/ decides nothing. Sorted by host.
 */
export function nodeSpecsToSeed(nodes: ReadonlyMap<string, Node | 'unreadable'>, hasSpecKey: ReadonlySet<string>, named: readonly string[] = []): NodeSpecSeed[] {
  const hosts = [...new Set([...nodes.keys(), ...named])].filter((h) => !hasSpecKey.has(h)).sort();
  return hosts.map((host) => {
    const n = nodes.get(host);
    if (n === 'unreadable') return { host, spec: UNREADABLE_NODE_SPEC, from: 'unreadable' };
    return n?.spec && Object.keys(n.spec).length ? { host, spec: n.spec, from: 'nodes' } : { host, spec: {}, from: 'none' };
  });
}

/** Whether the node's agent holds its lease: the heartbeat is there (etcd removes it with the lease). */
export function heartbeatAlive(hb: Heartbeat | undefined): boolean {
  return !!hb;
}

/** A sample older than this many heartbeat intervals when its heartbeat was written is stale (a stalled sampler). */
export const SAMPLE_FRESHNESS_INTERVALS = 3;

/** Whether the sample was recent when its heartbeat was written: two times of the agent's one clock. */
export function sampleFresh(p: PressureSample, hb: Heartbeat, freshnessIntervals = SAMPLE_FRESHNESS_INTERVALS): boolean {
  const age = Date.parse(hb.spec.time) - Date.parse(p.time);
  return Number.isFinite(age) && age <= freshnessIntervals * hb.spec.intervalMs;
}

export function nodeReady(hb: Heartbeat | undefined): boolean {
  return heartbeatAlive(hb) && !!hb?.spec.dockerUp;
}

/**
 * Whether a node was removed from the cluster: its key is gone AND a removal is recorded —
 * drains/<host> in state `removed`, which the drain controller writes in the transaction that
 * deletes the node (jaco node remove). A key merely absent is not a removal: the store lost it
 * (restored from a snapshot, restarted empty, a hand delete), its agent registers it again, and
 * until then it is a node without a heartbeat — NotReady, judged like one. The agent reads its
 * own absence by the same rule (node-agent/presence.ts nodeAbsence).
 */
export function nodeRemoved(keyPresent: boolean, drain: NodeDrain | undefined): boolean {
  return !keyPresent && drain?.status?.state === 'removed';
}

export function drainActive(d: NodeDrain | undefined): boolean {
  return !!d && (d.status?.state ?? 'pending') !== 'completed' && d.status?.state !== 'aborted';
}

/** Why a node takes no new placements, or undefined when it does. */
export function unschedulableBecause(node: Node | undefined, hb: Heartbeat | undefined, drain: NodeDrain | undefined): string | undefined {
  if (!node) return 'not registered';
  if (!heartbeatAlive(hb)) return 'NotReady (no heartbeat: the agent lost its lease)';
  if (!hb?.spec.dockerUp) return 'NotReady (Docker unreachable)';
  if (drainActive(drain)) return 'draining';
  if (node.spec?.unschedulable) return 'cordoned';
  const c = node.status?.capacity;
  if (!c || (c.cpuMillis <= 0 && c.memoryBytes <= 0)) return 'no capacity';
  return undefined;
}

/** kubectl-style STATUS column: "Ready", "NotReady", "Ready,SchedulingDisabled", "Ready,Draining". */
export function nodeStatusText(node: Node, hb: Heartbeat | undefined, drain: NodeDrain | undefined): string {
  const parts = [nodeReady(hb) ? 'Ready' : 'NotReady'];
  if (drainActive(drain)) parts.push('Draining');
  else if (drain?.status?.state === 'aborted') parts.push('DrainAborted');
  if (node.spec?.unschedulable) parts.push('SchedulingDisabled');
  return parts.join(',');
}

// ---------------------------------------------------------------- labels

/** Kubernetes' label syntax, for the agent's --labels and `jaco node label` alike. */
const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/** What is wrong with a label, or undefined when it is well formed. */
export function labelProblem(key: string, value?: string): string | undefined {
  if (!LABEL_KEY.test(key) || key.length > 316) return `"${key}" is not a valid label key`;
  if (value !== undefined && (!LABEL_VALUE.test(value) || value.length > 63)) return `"${value}" is not a valid label value (letters, digits, - _ ., at most 63)`;
  return undefined;
}

/**
 * A node's labels as placement matches them: the agent's own (metadata.labels) with the
 * operator's runtime labels (spec.labels) over them. Built once per stored value (the cache never
 * changes one), since every pass reads every node's.
 */
const effectiveLabels = new WeakMap<Node, Record<string, string>>();
export function nodeLabels(node: Node): Record<string, string> {
  let l = effectiveLabels.get(node);
  if (!l) effectiveLabels.set(node, (l = node.spec?.labels ? { ...node.metadata.labels, ...node.spec.labels } : (node.metadata.labels ?? {})));
  return l;
}

/** `jaco node label` arguments: k=v sets, k- removes. */
export interface LabelChanges {
  set: Record<string, string>;
  remove: string[];
}

export class LabelArgError extends Error {
  override name = 'LabelArgError';
}

/** Parses `k=v … k-`; throws LabelArgError naming the argument that is not one. */
export function parseLabelArgs(args: readonly string[]): LabelChanges {
  const out: LabelChanges = { set: {}, remove: [] };
  if (!args.length) throw new LabelArgError('give at least one label: KEY=VALUE to set, KEY- to remove');
  for (const a of args) {
    const eq = a.indexOf('=');
    if (eq < 0 && a.endsWith('-')) {
      const k = a.slice(0, -1);
      const bad = labelProblem(k);
      if (bad) throw new LabelArgError(`${JSON.stringify(a)}: ${bad}`);
      out.remove.push(k);
      continue;
    }
    if (eq <= 0) throw new LabelArgError(`${JSON.stringify(a)} is neither KEY=VALUE nor KEY- (e.g. zone=a, zone-)`);
    const k = a.slice(0, eq);
    const v = a.slice(eq + 1);
    const bad = labelProblem(k, v);
    if (bad) throw new LabelArgError(`${JSON.stringify(a)}: ${bad}`);
    if (out.remove.includes(k) || k in out.set) throw new LabelArgError(`label ${k} is given twice`);
    out.set[k] = v;
  }
  for (const k of out.remove) if (k in out.set) throw new LabelArgError(`label ${k} is given twice`);
  return out;
}

/**
 * The node's runtime labels after the changes (undefined: none left), and what changed. Removing
 * a label the operator never set is refused: one of the agent's own is changed where it is set
 * (jaco agent --labels) or overridden with KEY=VALUE, and a key on neither is likely a typo.
 */
export function relabel(node: Node, ch: LabelChanges): { labels?: Record<string, string>; set: Record<string, string>; removed: string[] } {
  const cur = { ...node.spec?.labels };
  const agent = node.metadata.labels ?? {};
  for (const k of ch.remove)
    if (!(k in cur))
      throw new LabelArgError(
        k in agent
          ? `label ${k} on node ${node.metadata.name} is the agent's own (jaco agent --labels ${k}=${agent[k]}): change it there, or override it here with ${k}=VALUE`
          : `node ${node.metadata.name} has no label ${k}`,
      );
  const set: Record<string, string> = {};
  for (const [k, v] of Object.entries(ch.set)) if (cur[k] !== v) set[k] = cur[k] = v;
  for (const k of ch.remove) delete cur[k];
  return { ...(Object.keys(cur).length ? { labels: cur } : {}), set, removed: ch.remove };
}

/**
 * A node's labels as `get nodes` and `describe node` show them: the agent's own, then the
 * operator's runtime ones marked so (one overriding an agent label shows the agent's value it hides).
 */
export function labelsText(node: Node, sep = ', '): string {
  const agent = node.metadata.labels ?? {};
  const runtime = node.spec?.labels ?? {};
  const own = Object.entries(agent).filter(([k]) => !(k in runtime)).map(([k, v]) => `${k}=${v}`);
  const set = Object.entries(runtime).map(([k, v]) => `${k}=${v} (runtime${k in agent ? `, agent: ${agent[k]}` : ''})`);
  return [...own, ...set].join(sep);
}
