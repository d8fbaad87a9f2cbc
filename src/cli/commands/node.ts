// jaco node: cordon and uncordon (the CLI's field of nodes/<host>).
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { Node } from '../../api/types.js';
import { AuditLog } from '../../store/audit.js';
import { PRODUCTION } from '../../timings.js';
import { commitAtomic } from '../../store/writer.js';
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

export function registerNode(program: Command): Command {
  const node = program.command('node').description('Manage nodes: cordon, uncordon (and drain, remove)');
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
  return node;
}
