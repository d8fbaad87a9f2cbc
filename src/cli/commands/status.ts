// jaco status [DEPLOYMENT] [-w] [-o json]: what the scheduler made of each deployment — per
// service desired and running counts, unschedulable reasons, rollout state and moves in flight;
// per replica its node, state, code, restarts and age. -w redraws on every change (informers).
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import { silentLogger } from '../../observability/log.js';
import { Cache } from '../../runtime/cache.js';
import type { Store } from '../../store/store.js';
import { CLUSTER_VIEW_READS, clusterViewOf, readClusterView } from '../../app/cluster-view.js';
import { unreadableLines, unreadableRefusal, warnUnreadable } from '../../app/read.js';
import { currentPlan } from '../../app/rebalance-plan.js';
import { attachRescheduler, renderStatus, statusRows } from '../../app/status.js';
import { action, CliError, connect, deploymentArg, parseOutput, timingsOf } from '../common.js';

/** Redraws on every change until SIGINT/SIGTERM (table: clears the screen; json: one line per change). */
async function watchStatus(store: Store, name: string | undefined, format: string): Promise<void> {
  // One cache over every prefix the view joins: each redraw is one consistent cut of the store.
  const cache = Cache.onStore(store, CLUSTER_VIEW_READS, { log: silentLogger() });
  await cache.start();
  let last = '';
  let warned = '';
  const draw = () => {
    const view = clusterViewOf(cache);
    const rows = statusRows(view, name, Date.now());
    // What cannot be read is named once each time it changes (on stderr: the output stays parseable).
    const lines = unreadableLines(view.unreadable);
    if (lines !== warned) process.stderr.write(lines);
    warned = lines;
    if (format === 'json') {
      const line = JSON.stringify({ time: new Date().toISOString(), deployments: rows });
      if (line.slice(line.indexOf(',')) !== last) process.stdout.write(line + '\n');
      last = line.slice(line.indexOf(','));
      return;
    }
    const text = name && !rows.length ? `deployment "${name}" not found (waiting for it)\n` : renderStatus(rows, format);
    process.stdout.write((process.stdout.isTTY ? '\x1b[2J\x1b[H' : '\n') + `Every change; ${new Date().toISOString()}  (Ctrl-C to stop)\n\n` + text);
  };
  let timer: NodeJS.Timeout | undefined;
  const schedule = () => {
    if (!timer) timer = setTimeout(() => ((timer = undefined), draw()), 100);
  };
  cache.on('changed', schedule);
  draw();
  // Ages and heartbeat freshness change without events: redraw now and then too (table only).
  const tick = format === 'json' ? undefined : setInterval(schedule, 2000);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  clearInterval(tick);
  clearTimeout(timer);
  await cache.stop();
}

export function registerStatus(program: Command): void {
  program
    .command('status')
    .description('Show deployments as the scheduler sees them: per service desired/running, unschedulable reasons, rollouts and moves; per replica node, state, code, restarts, age')
    .argument('[deployment]', 'one deployment (default: all)', deploymentArg)
    .option('-w, --watch', 'redraw on every change until Ctrl-C')
    .option('-o, --output <format>', 'json')
    .addHelpText(
      'after',
      `
States and codes: STATE is what the node-agent observes (pulling, pending, starting, running,
degraded, exited, failed, stopped); CODE says why. The scheduler adds: failed/restart_exhausted
(3 restarts in a row without becoming ready: no more until the next apply), unknown/node_not_ready
(the node's heartbeat lapsed), node_lost (a stateful replica kept on a node that is gone).

Examples:
  jaco status
  jaco status hello -w
  jaco status hello -o json | jq '.deployments[0].services[] | {name, desired, running}'
`,
    )
    .action(
      action(async (name: string | undefined, opts: { watch?: boolean; output?: string }, cmd: Command) => {
        const format = parseOutput(opts.output, ['table', 'json']);
        const store = await connect(cmd);
        try {
          if (opts.watch) return await watchStatus(store, name, format);
          const view = await readClusterView(store);
          warnUnreadable(view.unreadable);
          const rows = statusRows(view, name, Date.now());
          if (name && !rows.length) {
            const u = view.unreadable.find((x) => x.key === keys.deployment(name));
            throw new CliError(u ? unreadableRefusal(u, `show deployment "${name}"`) : `deployment "${name}" not found`);
          }
          // Only a pending service needs the rescheduler's word (asking costs a round trip).
          if (rows.some((d) => d.services.some((s) => s.unschedulable))) attachRescheduler(rows, (await currentPlan(store, timingsOf(cmd), { timeoutMs: 1500 })).plan.coalesce);
          process.stdout.write(renderStatus(rows, format));
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          store.close();
        }
      }),
    );
}
