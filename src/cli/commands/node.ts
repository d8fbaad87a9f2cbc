// jaco node: cordon, uncordon and label (the CLI's fields of nodes/<host>: spec).
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import { LabelArgError, parseLabelArgs, relabel, type LabelChanges } from '../../api/nodes.js';
import type { Node } from '../../api/types.js';
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

export function registerNode(program: Command): Command {
  const node = program.command('node').description('Manage nodes: cordon, uncordon, label (and drain, remove)');
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
        const changed = await withStore(cmd, (s) => setCordon(s, host, false));
        process.stdout.write(`node/${host} ${changed ? 'uncordoned' : 'already schedulable'}\n`);
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
  return node;
}
