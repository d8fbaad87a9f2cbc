// jaco node: cordon, uncordon, label, trust and distrust — what operators decide about a node, at
// nodespecs/<host> (never in nodes/<host>, which is its agent's) — and the cluster's
// node-eligibility settings (config/nodes).
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { NodeSettings } from '../../api/types.js';
import { changeNodeSettings, setCordon, setLabels, setTrusted, settingsText, uncordon, type SettingsFlags } from '../../app/nodes.js';
import { readKey } from '../../app/read.js';
import { action, withStore } from '../common.js';

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
Labels set here are the operator's (nodespecs/<host> spec.labels); the agent's own come from
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
