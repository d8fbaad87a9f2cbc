// jaco top nodes|replicas [DEPLOYMENT]: CPU and memory per node and per replica, as the agents
// last reported them (src/cli/top.ts).
import type { Command } from 'commander';
import { readClusterView } from '../../app/cluster-view.js';
import { action, CliError, deploymentArg, parseOutput, withStore } from '../common.js';
import { printTable, toJson } from '../../app/output.js';
import { NODE_HEADERS, nodeTableRows, nodeUsage, REPLICA_HEADERS, replicaTableRows, replicaUsage, TOP_SORTS, type TopSort } from '../top.js';

interface TopFlags {
  sortBy: string;
  output?: string;
}

function sortOf(v: string): TopSort {
  if (!(TOP_SORTS as readonly string[]).includes(v)) throw new CliError(`--sort-by: "${v}" is not one of ${TOP_SORTS.join(', ')}`);
  return v as TopSort;
}

const HELP = `
Examples:
  jaco top nodes
  jaco top replicas shop --sort-by memory
  jaco top replicas -o json

Figures are the agents' latest samples (every node status interval: 30 s, 1 s with --timings fast),
not a fresh measurement. A node's CPU and memory are its use over its capacity — of the whole host
(MEASURES host) or of its own containers (MEASURES containers: simulated nodes sharing a host);
PRESSURE is the rebalancer's: the larger of the two, and which. A replica's CPU is cgroup CPU time
over the sampling interval, its memory what the cgroup holds less inactive file cache (as \`docker
stats\` counts it); LIMIT columns are of the service's resources, when it sets them. Sorted by
CPU, largest first (--sort-by). A node without a heartbeat (its agent lost its lease), or whose sample is stale, shows no figures.
`;

export function registerTop(program: Command): void {
  const top = program.command('top').description('CPU and memory per node or per replica, from what the agents report, sorted, with pressure');
  top
    .command('nodes')
    .description("Each node's CPU and memory use, its pressure and what it measures")
    .option('--sort-by <key>', `${TOP_SORTS.join(', ')}`, 'cpu')
    .option('-o, --output <format>', 'table (default) or json')
    .addHelpText('after', HELP)
    .action(
      action(async (f: TopFlags, cmd: Command) => {
        const sort = sortOf(f.sortBy);
        const out = parseOutput(f.output, ['table', 'json']);
        const now = Date.now();
        const rows = nodeUsage(await withStore(cmd, readClusterView), sort);
        if (out === 'json') process.stdout.write(toJson(rows));
        else printTable(NODE_HEADERS, nodeTableRows(rows, now));
      }),
    );
  top
    .command('replicas')
    .description("Each replica's CPU and memory use (of one deployment when named), and of its service's limits")
    .argument('[deployment]', 'only the replicas of this deployment', deploymentArg)
    .option('--sort-by <key>', `${TOP_SORTS.join(', ')}`, 'cpu')
    .option('-o, --output <format>', 'table (default) or json')
    .addHelpText('after', HELP)
    .action(
      action(async (deployment: string | undefined, f: TopFlags, cmd: Command) => {
        const sort = sortOf(f.sortBy);
        const out = parseOutput(f.output, ['table', 'json']);
        const now = Date.now();
        const view = await withStore(cmd, readClusterView);
        if (deployment && !view.deployments.has(deployment)) throw new CliError(`deployment "${deployment}" not found`);
        const rows = replicaUsage(view, { ...(deployment ? { deployment } : {}), sort });
        if (out === 'json') process.stdout.write(toJson(rows));
        else printTable(REPLICA_HEADERS, replicaTableRows(rows, now));
      }),
    );
}
