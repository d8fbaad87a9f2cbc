// What operators decide about a node, at nodespecs/<host> (never in nodes/<host>, which is its
// agent's): cordon, uncordon, labels, trust — and the cluster's node-eligibility settings
// (config/nodes). Each is one transaction with its audit record; `jaco node` and the dashboard call them.
import { keys } from '../api/keys.js';
import { drainActive, LabelArgError, nodeAsDecided, parseLabelArgs, relabel, type LabelChanges } from '../api/nodes.js';
import { API_VERSION, type Node, type NodeDrain, type NodeSettings, type NodeSettingsSpec, type NodeSpec, type NodeSpecRecord } from '../api/types.js';
import { NodeSettingsError, resolveNodeSettings } from '../api/eligibility.js';
import { formatPath, schemas } from '../api/schema.js';
import { formatBytes, formatDuration } from '../api/units.js';
import { AuditLog, type AuditRecord } from '../store/audit.js';
import { PRODUCTION } from '../timings.js';
import { commitAtomic, type Op } from '../store/writer.js';
import { ConflictError } from '../store/errors.js';
import type { Store, Versioned } from '../store/store.js';
import { CliError } from './errors.js';
import { readKey, unreadableRefusal } from './read.js';

/** A node as the CLI changes what operators decide about it: both keys as read, and the two joined. */
export interface NodeToDecide {
  /** nodes/<host> (what its agent reports). */
  node: Versioned<Node>;
  /** nodespecs/<host>; absent: nothing decided since the split (an older CLI's spec may sit in node). */
  decided?: Versioned<NodeSpecRecord>;
  /** The node as operators see it (api/nodes.ts nodeAsDecided). */
  joined: Node;
}

/**
 * Reads a node to change what operators decided about it. What cannot be read cannot be decided
 * on: refused, naming the key; a node that does not exist is refused too.
 */
export async function readNodeToDecide(store: Store, host: string, what: string, notFoundHint = ''): Promise<NodeToDecide> {
  const [n, d] = await Promise.all([readKey<Node>(store, keys.node(host), 'Node'), readKey<NodeSpecRecord>(store, keys.nodeSpec(host), 'NodeSpec')]);
  for (const u of [n.unreadable, d.unreadable]) if (u) throw new CliError(unreadableRefusal(u, what));
  if (!n.value) throw new CliError(`node "${host}" not found${notFoundHint}`);
  return { node: n.value, ...(d.value ? { decided: d.value } : {}), joined: nodeAsDecided(n.value.value, d.value?.value) };
}

/**
 * The ops that store `spec` as what operators decided about the node: nodespecs/<host> created or
 * updated on the revision read, and nodes/<host> compared (a node removed or re-registered
 * meanwhile refuses the write: read again). nodes/<host> itself is never written: it is the agent's.
 */
export function nodeSpecOps(r: NodeToDecide, spec: NodeSpec): Op[] {
  const host = r.node.value.metadata.name;
  const value: NodeSpecRecord = { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name: host }, spec };
  return [
    r.decided ? { op: 'update', key: keys.nodeSpec(host), value, modRevision: r.decided.modRevision } : { op: 'create', key: keys.nodeSpec(host), value },
    { op: 'check', key: r.node.key, modRevision: r.node.modRevision },
  ];
}

/**
 * Changes what operators decided about a node in one CAS write with its audit record. `change`
 * gets the node as operators see it and returns the new spec with its audit record, or only what
 * to return when nothing changes. A write that loses to a concurrent one (the agent re-registering,
 * another operator) reads again, up to three times.
 */
async function decideNode<R>(store: Store, host: string, what: string, change: (node: Node) => { result: R; spec?: NodeSpec; audit?: AuditRecord }): Promise<R> {
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  for (let attempt = 1; ; attempt++) {
    const cur = await readNodeToDecide(store, host, what);
    const c = change(cur.joined);
    if (!c.spec || !c.audit) return c.result;
    try {
      await commitAtomic(store, [{ label: what, ops: [...nodeSpecOps(cur, c.spec), await audit.op(c.audit)] }]);
      return c.result;
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 3) throw e;
    }
  }
}

export async function setCordon(store: Store, host: string, unschedulable: boolean): Promise<boolean> {
  return decideNode(store, host, `${unschedulable ? 'cordon' : 'uncordon'} node "${host}"`, (n) =>
    !!n.spec?.unschedulable === unschedulable
      ? { result: false }
      : { result: true, spec: { ...n.spec, unschedulable }, audit: { type: 'node_cordoned', time: Date.now(), payload: { node: host, unschedulable } } },
  );
}

/**
 * Sets and removes a node's runtime labels (spec.labels) in one CAS write with its audit record;
 * placement matches them from its next pass. Returns what changed (nothing: nothing written).
 */
export async function setLabels(store: Store, host: string, args: readonly string[]): Promise<{ set: Record<string, string>; removed: string[] }> {
  const cliError = (e: unknown) => (e instanceof LabelArgError ? new CliError(`jaco node label: ${e.message}`) : e);
  let changes: LabelChanges;
  try {
    changes = parseLabelArgs(args);
  } catch (e) {
    throw cliError(e);
  }
  return decideNode(store, host, `label node "${host}"`, (n) => {
    let next: ReturnType<typeof relabel>;
    try {
      next = relabel(n, changes);
    } catch (e) {
      throw cliError(e);
    }
    const result = { set: next.set, removed: next.removed };
    if (!Object.keys(next.set).length && !next.removed.length) return { result };
    const { labels: _old, ...rest } = n.spec ?? {};
    return { result, spec: { ...rest, ...(next.labels ? { labels: next.labels } : {}) }, audit: { type: 'node_labeled', time: Date.now(), payload: { node: host, set: next.set, removed: next.removed } } };
  });
}

/**
 * Trusts a node (spec.trusted: it takes placements although degraded) or takes the trust back, in
 * one CAS write with its audit record. Returns whether anything changed.
 */
export async function setTrusted(store: Store, host: string, trusted: boolean): Promise<boolean> {
  return decideNode(store, host, `${trusted ? 'trust' : 'distrust'} node "${host}"`, (n) => {
    if (!!n.spec?.trusted === trusted) return { result: false };
    const { trusted: _old, ...rest } = n.spec ?? {};
    return { result: true, spec: { ...rest, ...(trusted ? { trusted: true } : {}) }, audit: { type: 'node_trusted', time: Date.now(), payload: { node: host, trusted } } };
  });
}

/** `jaco node settings` flags → the fields they set (an empty string resets a field to its default). */
export interface SettingsFlags {
  defaultDisk?: string;
  diskPressure?: string;
  failureWindow?: string;
  failureServices?: string;
  overlayMaxAge?: string;
  overlayUnreachable?: string;
}

/** The stored settings with the flags applied; throws CliError naming the flag that is wrong. */
export function applySettingsFlags(cur: NodeSettingsSpec, f: SettingsFlags): NodeSettingsSpec {
  const out: NodeSettingsSpec = { ...cur };
  const num = (flag: string, v: string) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n)) throw new CliError(`--${flag}: "${v}" is not a number`);
    return n;
  };
  const set = <K extends keyof NodeSettingsSpec>(k: K, flag: string, v: string | undefined, parse: (v: string) => NodeSettingsSpec[K]) => {
    if (v === undefined) return;
    if (v === '' || v === 'default') delete out[k];
    else out[k] = parse(v);
    try {
      resolveNodeSettings({ [k]: out[k] });
    } catch (e) {
      if (e instanceof NodeSettingsError) throw new CliError(`--${flag}: ${e.message.slice(e.message.indexOf(':') + 2)}`);
      throw e;
    }
  };
  set('defaultInstanceEphemeralDisk', 'default-disk', f.defaultDisk, (v) => v);
  set('diskPressurePercent', 'disk-pressure', f.diskPressure, (v) => num('disk-pressure', v));
  set('failureWindow', 'failure-window', f.failureWindow, (v) => v);
  set('failureServices', 'failure-services', f.failureServices, (v) => num('failure-services', v));
  set('overlayHandshakeMaxAge', 'overlay-max-age', f.overlayMaxAge, (v) => v);
  set('overlayUnreachablePercent', 'overlay-unreachable', f.overlayUnreachable, (v) => num('overlay-unreachable', v));
  return out;
}

/** Writes config/nodes (CAS, audited); returns the settings now stored and whether they changed. */
export async function changeNodeSettings(store: Store, f: SettingsFlags, now = Date.now()): Promise<{ settings: NodeSettingsSpec; changed: boolean }> {
  const key = keys.nodeSettings();
  const { value: cur, unreadable } = await readKey<NodeSettings>(store, key, 'NodeSettings');
  if (unreadable) throw new CliError(unreadableRefusal(unreadable, 'change the node settings'));
  const before = cur?.value.spec ?? {};
  const settings = applySettingsFlags(before, f);
  if (JSON.stringify(settings) === JSON.stringify(before)) return { settings, changed: false };
  const next: NodeSettings = { apiVersion: API_VERSION, kind: 'NodeSettings', metadata: { name: 'nodes' }, spec: settings };
  const issues = schemas().validate(next);
  if (issues.length) throw new CliError(`invalid node settings: ${issues.map((i) => `${formatPath(i.path)} ${i.rule}`).join('; ')}`);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  await commitAtomic(store, [
    {
      label: 'node settings',
      ops: [cur ? { op: 'update', key, value: next, modRevision: cur.modRevision } : { op: 'create', key, value: next }, await audit.op({ type: 'node_settings_changed', time: now, payload: { settings, previous: before } })],
    },
  ]);
  return { settings, changed: true };
}

/** The settings as `jaco node settings` prints them: every field, a default marked so. */
export function settingsText(spec: NodeSettingsSpec): string {
  const r = resolveNodeSettings(spec);
  const mark = (k: keyof NodeSettingsSpec) => (spec[k] === undefined ? ' (default)' : '');
  return [
    `default disk:        ${formatBytes(r.defaultDiskBytes)}${mark('defaultInstanceEphemeralDisk')}   scratch disk booked for a service without resources.disk`,
    `disk pressure:       ${r.diskPressurePercent}%${mark('diskPressurePercent')}   degraded when the data root's filesystem is fuller`,
    `failure window:      ${formatDuration(r.failureWindowMs)}${mark('failureWindow')}   restarts within it count`,
    `failure services:    ${r.failureServices}${mark('failureServices')}   degraded when replicas of this many services restarted on the node`,
    `overlay max age:     ${formatDuration(r.overlayHandshakeMaxAgeMs)}${mark('overlayHandshakeMaxAge')}   a WireGuard peer without a handshake this long is unreachable`,
    `overlay unreachable: ${r.overlayUnreachablePercent}%${mark('overlayUnreachablePercent')}   degraded when more of its peers are unreachable`,
  ].join('\n') + '\n';
}

/**
 * What uncordon says. A drain keeps its node unschedulable by itself (it is not a cordon): while
 * one is under way, "schedulable" would be untrue, so the answer names it and how to end it.
 */
export function uncordonText(host: string, changed: boolean, drain: NodeDrain | undefined): string {
  const done = `node/${host} ${changed ? 'uncordoned' : 'not cordoned'}`;
  if (!drainActive(drain)) return `${done}${changed ? '' : ': already schedulable'}\n`;
  return `${done}, but it is being drained (${drain!.status?.state ?? 'pending'}): it takes no new replicas until the drain ends; to stop it: jaco node drain ${host} --cancel\n`;
}

/** Uncordons a node (the CLI's and the dashboard's action); what to print. */
export async function uncordon(store: Store, host: string): Promise<string> {
  const changed = await setCordon(store, host, false);
  return uncordonText(host, changed, (await readKey<NodeDrain>(store, keys.drain(host), 'NodeDrain')).value?.value);
}
