// jaco dashboard: a live web view of the cluster served by this process (see src/dashboard/).
import type { Command } from 'commander';
import { DashboardServer } from '../../dashboard/server.js';
import { logger } from '../../observability/log.js';
import { untilSignal } from '../../supervise/process.js';
import { action, CliError, connect, timingsOf } from '../common.js';
import { splitHostPort } from '../../api/network.js';

export const DEFAULT_DASHBOARD_ADDR = '127.0.0.1:8090';

/** HOST:PORT (port 0: any free port). */
export function parseAddr(v: string): { host: string; port: number } {
  const hp = splitHostPort(v);
  if (!hp) throw new CliError(`invalid --addr ${JSON.stringify(v)}: use HOST:PORT ([IPV6]:PORT), such as ${DEFAULT_DASHBOARD_ADDR}`);
  return hp;
}

export function registerDashboard(program: Command): void {
  program
    .command('dashboard')
    .description('Serve a live web view of nodes, pressure, deployments, rollouts, placement decisions and the audit log')
    .option('--addr <host:port>', 'where to listen (port 0: any free port)', DEFAULT_DASHBOARD_ADDR)
    .option('--allow-actions', 'offer cordon/uncordon, drain, rollback and rollout pause/resume/abort on the page (off by default)')
    .addHelpText(
      'after',
      `
The page reads etcd through this process (with the --endpoints/--user/--cacert credentials given
to jaco) and is pushed every change with server-sent events; every asset is served from here.
It binds 127.0.0.1 by default: anyone who can reach the address sees the cluster, and with
--allow-actions can change it, so put it behind your own authentication before binding elsewhere.
Each action shows the CLI command that does the same. \`jaco up\` starts one and prints its URL.

Examples:
  jaco dashboard
  jaco dashboard --addr 127.0.0.1:0 --allow-actions
  ssh -L 8090:127.0.0.1:8090 host   # then open http://127.0.0.1:8090/ locally
`,
    )
    .action(
      action(async (opts: { addr: string; allowActions?: boolean }, cmd: Command) => {
        const { host, port } = parseAddr(opts.addr);
        const store = await connect(cmd);
        const dash = new DashboardServer({ store, host, port, allowActions: !!opts.allowActions, timings: timingsOf(cmd), log: logger('dashboard') });
        try {
          const stopped = untilSignal();
          const url = await dash.start();
          process.stdout.write(`jaco dashboard: ${url}${opts.allowActions ? ' (actions allowed)' : ''}\n`);
          await stopped;
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          await dash.stop().catch(() => undefined);
          store.close();
        }
      }),
    );
}
