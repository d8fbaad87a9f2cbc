// jaco node: cordon, uncordon, label, trust and distrust (the CLI's fields of nodes/<host>: spec), and
// the cluster's node-eligibility settings (config/nodes).
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import { drainActive, LabelArgError, parseLabelArgs, relabel, type LabelChanges } from '../../api/nodes.js';
import { API_VERSION, type Node, type NodeDrain, type NodeSettings, type NodeSettingsSpec } from '../../api/types.js';
import { NodeSettingsError, resolveNodeSettings } from '../../api/eligibility.js';
import { formatPath, schemas } from '../../api/schema.js';
import { formatBytes, formatDuration } from '../../api/units.js';
import { AuditLog } from '../../store/audit.js';
import { PRODUCTION } from '../../timings.js';
import { commitAtomic } from '../../store/writer.js';
import { ConflictError } from '../../store/errors.js';
import type { Store } from '../../store/store.js';
import { action, CliError, withStore } from '../common.js';
import { readKey, unreadableRefusal } from '../read.js';

export async function setCordon(store: Store, host: string, unschedulable: boolean): Promise<boolean> {
  const { value: cur, unreadable } = await readKey<Node>(store, keys.node(host), 'Node');
  if (unreadable) throw new CliError(unreadableRefusal(unreadable, `${unschedulable ? 'cordon' : 'uncordon'} node "${host}"`));
  if (!cur) throw new CliError(`node "${host}" not found`);
  if (!!cur.value.spec?.unschedulable === unschedulable) return false;
  const next: Node = { ...cur.value, spec: { ...cur.value.spec, unschedulable } };
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  await commitAtomic(store, [
    {
      label: `cordon ${host}`,
      ops: [
        { op: 'update', key: keys.node(host), value: next, modRevision: cur.modRevision },
        await audit.op({ type: 'node_cordoned', time: Date.now(), payload: { node: host, unschedulable } }),
      ],
    },
  ]);
  return true;
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
  // A concurrent write of the node (the agent re-registering, a cordon) fails the CAS: read again.
  for (let attempt = 1; ; attempt++) {
    const cur = await store.get<Node>(keys.node(host));
    if (!cur) throw new CliError(`node "${host}" not found`);
    let next: ReturnType<typeof relabel>;
    try {
      next = relabel(cur.value, changes);
    } catch (e) {
      throw cliError(e);
    }
    if (!Object.keys(next.set).length && !next.removed.length) return next;
    const { labels: _old, ...restSpec } = cur.value.spec ?? {};
    const value: Node = { ...cur.value, spec: { ...restSpec, ...(next.labels ? { labels: next.labels } : {}) } };
    const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
    try {
      await commitAtomic(store, [
        {
          label: `label ${host}`,
          ops: [
            { op: 'update', key: keys.node(host), value, modRevision: cur.modRevision },
            await audit.op({ type: 'node_labeled', time: Date.now(), payload: { node: host, set: next.set, removed: next.removed } }),
          ],
        },
      ]);
      return next;
    } catch (e) {
      if (!(e instanceof ConflictError) || attempt >= 3) throw e;
    }
  }
}

/**
 * Trusts a node (spec.trusted: it takes placements although degraded) or takes the trust back, in
 * one CAS write with its audit record. Returns whether anything changed.
 */
export async function setTrusted(store: Store, host: string, trusted: boolean): Promise<boolean> {
  for (let attempt = 1; ; attempt++) {
    const { value: cur, unreadable } = await readKey<Node>(store, keys.node(host), 'Node');
    if (unreadable) throw new CliError(unreadableRefusal(unreadable, `${trusted ? 'trust' : 'distrust'} node "${host}"`));
    if (!cur) throw new CliError(`node "${host}" not found`);
    if (!!cur.value.spec?.trusted === trusted) return false;
    const { trusted: _old, ...rest } = cur.value.spec ?? {};
    const next: Node = { ...cur.value, spec: { ...rest, ...(trusted ? { trusted: true } : {}) } };
    const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
    try {
      await commitAtomic(store, [{ label: `trust ${host}`, ops: [{ op: 'update', key: keys.node(host), value: next, modRevision: cur.modRevision }, await audit.op({ type: 'node_trusted', time: Date.now(), payload: { node: host, trusted } })] }]);
      return true;
    } catch (e) {
      // The agent re-registering between read and write: read again.
      if (!(e instanceof ConflictError) || attempt >= 3) throw e;
    }
  }
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

export function registerNode(program: Command): Command {
  const node = program.command('node').description('Manage nodes: cordon, uncordon, label, trust, distrust, settings (and drain, remove)');
  node
    .command('cordon')
    .description('Mark a node unschedulable: no new placements; running replicas stay')
    .argument('<host>', 'node name')
    .action(
      action(async (host: string, _o: unknown, cmd: Command) => {
        const changed = await withStore(cmd, (s) => setCordon(s, host, true));
        process.stdout.write(`node/${host} ${changed ? 'cordoned' : 'already cordoned'}\n`);
      }),
    );
  node
    .command('uncordon')
    .description('Mark a node schedulable again')
    .argument('<host>', 'node name')
    .action(
      action(async (host: string, _o: unknown, cmd: Command) => {
        process.stdout.write(await withStore(cmd, (s) => uncordon(s, host)));
      }),
    );
  node
    .command('label')
    .description("Set (KEY=VALUE) or remove (KEY-) a node's runtime labels: kept on the node beside the agent's own, matched by placement.nodeSelector from the scheduler's next pass; the rebalancer moves replicas whose node no longer matches, within their disruption budget")
    .argument('<host>', 'node name')
    .argument('<labels...>', 'KEY=VALUE to set (overrides an agent label of that key), KEY- to remove')
    .addHelpText(
      'after',
      `
Labels set here are the operator's (nodes/<host> spec.labels); the agent's own come from
\`jaco agent --labels\` and change only there. \`jaco get nodes\` shows both.

Examples:
  jaco node label node-2 zone=b disk=ssd
  jaco node label node-2 zone-
`,
    )
    .action(
      action(async (host: string, labels: string[], _o: unknown, cmd: Command) => {
        const r = await withStore(cmd, (s) => setLabels(s, host, labels));
        const parts = [...Object.entries(r.set).map(([k, v]) => `${k}=${v}`), ...r.removed.map((k) => `${k}-`)];
        process.stdout.write(`node/${host} ${parts.length ? `labeled (${parts.join(' ')})` : 'unchanged'}\n`);
      }),
    );
  node
    .command('trust')
    .description('Let a degraded node take new placements although its causes (disk pressure, repeated failures, overlay peers unreachable) persist; audited')
    .argument('<host>', 'node name')
    .addHelpText('after', '\nA node is degraded while its agent reports a cause (jaco describe node shows them); degraded\nnodes take no new placements. Trust overrides that until `jaco node distrust`; running replicas\nare never moved for being degraded either way.\n')
    .action(
      action(async (host: string, _o: unknown, cmd: Command) => {
        const changed = await withStore(cmd, (s) => setTrusted(s, host, true));
        process.stdout.write(`node/${host} ${changed ? 'trusted: it takes placements even while degraded' : 'already trusted'}\n`);
      }),
    );
  node
    .command('distrust')
    .description('Take back `jaco node trust`: the node takes no new placements while degraded; audited')
    .argument('<host>', 'node name')
    .action(
      action(async (host: string, _o: unknown, cmd: Command) => {
        const changed = await withStore(cmd, (s) => setTrusted(s, host, false));
        process.stdout.write(`node/${host} ${changed ? 'no longer trusted' : 'not trusted'}\n`);
      }),
    );
  node
    .command('settings')
    .description("Show or change the cluster's node-eligibility settings: default scratch disk and when a node is degraded (config/nodes; audited)")
    .option('--default-disk <size>', 'scratch disk booked for a replica whose service sets no resources.disk (default 4Gi)')
    .option('--disk-pressure <percent>', "degraded when the data root's filesystem is more than this full (default 90)")
    .option('--failure-window <duration>', 'restarts within this long count (default 10m)')
    .option('--failure-services <n>', 'degraded when replicas of this many services restarted on the node within the window (default 3)')
    .option('--overlay-max-age <duration>', 'a WireGuard peer without a handshake this long is unreachable (default 3m)')
    .option('--overlay-unreachable <percent>', 'degraded when more than this percent of its peers are unreachable (default 50)')
    .addHelpText('after', '\nWithout options it prints the settings. "default" (or an empty value) puts one back to its default.\n\nExamples:\n  jaco node settings\n  jaco node settings --disk-pressure 95 --default-disk 1Gi\n  jaco node settings --overlay-max-age default\n')
    .action(
      action(async (f: SettingsFlags, cmd: Command) => {
        const r = await withStore(cmd, async (s) => {
          if (!Object.values(f).some((v) => v !== undefined)) return { settings: (await readKey<NodeSettings>(s, keys.nodeSettings(), 'NodeSettings')).value?.value.spec ?? {}, changed: undefined };
          return changeNodeSettings(s, f);
        });
        if (r.changed !== undefined) process.stdout.write(`node settings ${r.changed ? 'changed' : 'unchanged'}\n`);
        process.stdout.write(settingsText(r.settings));
      }),
    );
  return node;
}
