// jaco controller <name>|all: run leader-elected controllers in this process, on one manager
// (one cache of the store shared by all of them).
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Command } from 'commander';
import { CONTROLLERS } from '../../app/processes.js';
import { logger } from '../../observability/log.js';
import { serveObservability } from '../../observability/server.js';
import { Manager } from '../../runtime/manager.js';
import { IdleCollector } from '../../runtime/memory.js';
import { readClusterKeys } from '../../secrets/keyfile.js';
import { runningAllocator } from '../../supervise/allocator.js';
import { stopAll, untilSignal } from '../../supervise/process.js';
import { action, CliError, connect, timingsOf } from '../common.js';

/** How a process appears in election keys and logs: host/pid/random. */
export function processIdentity(): string {
  return `${hostname()}/${process.pid}/${randomBytes(2).toString('hex')}`;
}

export function registerController(program: Command): void {
  program
    .command('controller')
    .description(`Run controllers (leader-elected; start several copies for HA): ${Object.keys(CONTROLLERS).join(', ')} or all`)
    .argument('<name>', 'a controller name, or all')
    .option('--metrics-addr <addr>', 'serve /metrics and /healthz here', '127.0.0.1:9464')
    .option('--identity <id>', 'how this process appears in election keys (default host/pid)')
    .option('--secrets-key-file <file>', 'the cluster key file the secrets controller opens secrets with (env JACO_SECRETS_KEY_FILE; jaco up makes one; docs/secrets.md)')
    .addHelpText('after', '\nExamples:\n  jaco controller all --secrets-key-file /etc/jaco/secrets.key\n  jaco --timings fast controller scheduler --metrics-addr 127.0.0.1:0\n')
    .action(
      action(async (name: string, opts: { metricsAddr: string; identity?: string; secretsKeyFile?: string }, cmd: Command) => {
        const names = name === 'all' ? Object.keys(CONTROLLERS) : [name];
        for (const n of names) if (!CONTROLLERS[n]) throw new CliError(`unknown controller ${JSON.stringify(n)}; one of ${Object.keys(CONTROLLERS).join(', ')}, all`);
        const keyFile = opts.secretsKeyFile ?? process.env.JACO_SECRETS_KEY_FILE;
        // A key file named but unreadable is a mistake to say now, not a warning in a log later.
        if (keyFile && names.includes('secrets')) {
          try {
            readClusterKeys(keyFile);
          } catch (e) {
            throw new CliError(`--secrets-key-file: ${(e as Error).message}`);
          }
        }
        const log = logger('controller');
        const store = await connect(cmd);
        const timings = timingsOf(cmd);
        const stops: (() => Promise<void>)[] = [async () => store.close()];
        let manager: Manager | undefined;
        const { server, url } = await serveObservability(opts.metricsAddr, () => manager?.health() ?? { ok: false, detail: { starting: true } });
        stops.push(() => new Promise((r) => server.close(() => r())));
        // The election keys advertise where this process serves /metrics (and e.g. /rebalance/plan).
        const identity = `${opts.identity ?? processIdentity()} metrics=${url}`;
        manager = new Manager({ store, timings, log, identity }, names.map((n) => CONTROLLERS[n]!(timings, { secrets: { keyFile } })));
        await manager.start();
        stops.push(() => manager!.stop());
        log.info({ controllers: names, metrics: `${url}/metrics`, timings: timings.name, revision: manager.cache.revision, allocator: runningAllocator() }, 'controllers running');
        // A burst's garbage (a big apply placed, a relist) given back once the process is quiet.
        const mib = (b: number) => Math.round(b / 2 ** 20);
        const collector = new IdleCollector({ onCollect: (before, after) => log.info({ heapUsedMiB: mib(before), afterMiB: mib(after) }, 'quiet after a burst: collected its garbage') }).start();
        stops.push(async () => collector.stop());
        const sig = await untilSignal();
        log.info({ signal: sig }, 'stopping');
        await stopAll(stops, log);
      }),
    );
}
