// jaco controller <name>|all: run leader-elected controllers in this process.
import type { Command } from 'commander';
import { CONTROLLERS, type ControllerHandle } from '../../../controllers/index.js';
import { logger } from '../../observability/log.js';
import { serveObservability } from '../../observability/server.js';
import { processIdentity } from '../../runtime/controller.js';
import { stopAll, untilSignal } from '../../runtime/process.js';
import { action, CliError, connect, timingsOf } from '../common.js';

export function registerController(program: Command): void {
  program
    .command('controller')
    .description(`Run controllers (leader-elected; start several copies for HA): ${Object.keys(CONTROLLERS).join(', ') || '(none yet)'} or all`)
    .argument('<name>', 'a controller name, or all')
    .option('--metrics-addr <addr>', 'serve /metrics and /healthz here', '127.0.0.1:9464')
    .option('--identity <id>', 'how this process appears in election keys (default host/pid)')
    .addHelpText('after', '\nExamples:\n  jaco controller all\n  jaco --timings fast controller scheduler --metrics-addr 127.0.0.1:0\n')
    .action(
      action(async (name: string, opts: { metricsAddr: string; identity?: string }, cmd: Command) => {
        const names = name === 'all' ? Object.keys(CONTROLLERS) : [name];
        for (const n of names) if (!CONTROLLERS[n]) throw new CliError(`unknown controller ${JSON.stringify(n)}; one of ${Object.keys(CONTROLLERS).join(', ')}, all`);
        const log = logger('controller');
        const store = await connect(cmd);
        const handles: ControllerHandle[] = [];
        const stops: (() => Promise<void>)[] = [async () => store.close()];
        const { server, url } = await serveObservability(opts.metricsAddr, () => {
          const detail = Object.fromEntries(handles.map((h) => [h.name, h.health()]));
          return { ok: handles.every((h) => h.health().synced), detail: { controllers: detail } };
        });
        stops.push(() => new Promise((r) => server.close(() => r())));
        // The election keys advertise where this process serves /metrics (and e.g. /rebalance/plan).
        const ctx = { store, timings: timingsOf(cmd), log, identity: `${opts.identity ?? processIdentity()} metrics=${url}` };
        for (const n of names) {
          const h = await CONTROLLERS[n]!(ctx);
          handles.push(h);
          stops.push(() => h.stop());
        }
        log.info({ controllers: names, metrics: `${url}/metrics`, timings: ctx.timings.name }, 'controllers running');
        const sig = await untilSignal();
        log.info({ signal: sig }, 'stopping');
        await stopAll(stops, log);
      }),
    );
}
