// jaco ingress: run one node's ingress — a local HAProxy (a child process with its own config and
// runtime-API socket under --data-dir, never the system service) driven from endpoints/, so every
// published port answers on this node's address. One per node, beside the agent.
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { Ingress } from '../../app/processes.js';
import { logger } from '../../observability/log.js';
import { serveObservability } from '../../observability/server.js';
import { untilSignal } from '../../supervise/process.js';
import { action, durationFlag, storeOf, timingsOf } from '../common.js';

interface IngressFlags {
  node: string;
  dataDir: string;
  metricsAddr: string;
  drainPeriod: string;
  drainLimit: string;
  haproxy?: string;
  serviceAddresses: boolean;
}

const EXAMPLES = `
Examples:
  jaco ingress --node node-1
  jaco --timings fast ingress --node node-2 --data-dir .jaco/ingress --metrics-addr 127.0.0.1:0

The ingress answers every published port (ports: [{containerPort, published}]) on the node's
address (Node.status.address, set by jaco agent --address) and balances over the service's
endpoints on every node. Servers are added, drained and deleted through HAProxy's runtime API;
only a new set of published ports reloads HAProxy. See docs/ingress.md.
`;

export function registerIngress(program: Command): void {
  program
    .command('ingress')
    .description("Run a node's ingress: a local HAProxy answering every published port on the node's address, fed from endpoints")
    .requiredOption('--node <name>', 'the node this ingress runs on (its address is nodes/<name> status.address)')
    .option('--data-dir <dir>', "where HAProxy's config and runtime-API socket live (a directory per node under it)", '.jaco/ingress')
    .option('--metrics-addr <addr>', 'serve /metrics and /healthz here (port 0: any free port, logged)', '127.0.0.1:9466')
    .option('--drain-period <duration>', 'how long a server leaving routing drains before it is deleted', '2s')
    .option('--drain-limit <duration>', 'how long connections still on a drained server may run on before they are cut', '60s')
    .option('--haproxy <path>', 'the haproxy binary (env JACO_HAPROXY; default: haproxy on PATH)')
    .option('--no-service-addresses', "do not answer services' own addresses (several ingresses sharing one network namespace: simulated nodes)")
    .addHelpText('after', EXAMPLES)
    .action(
      action(async (f: IngressFlags, cmd: Command) => {
        const drainMs = durationFlag('--drain-period', f.drainPeriod, { zero: 'to delete a drained server at once' });
        const drainLimitMs = durationFlag('--drain-limit', f.drainLimit, { zero: 'to cut its connections at once' });
        const timings = timingsOf(cmd);
        const store = storeOf(cmd);
        const log = logger('ingress', { node: f.node });
        const ingress = new Ingress({ node: f.node, store, timings, log, dir: join(resolve(f.dataDir), f.node), config: { drainMs, drainLimitMs }, haproxyBinary: f.haproxy, serviceAddresses: f.serviceAddresses });
        const { server, url } = await serveObservability(f.metricsAddr, () => ingress.health());
        await ingress.start();
        log.info({ metrics: `${url}/metrics`, healthz: `${url}/healthz`, dir: ingress.haproxy.dir }, 'ingress running');
        const signal = await untilSignal();
        log.info({ signal }, 'stopping; haproxy finishes the connections under way');
        await ingress.stop();
        await new Promise<void>((r) => server.close(() => r()));
        store.close();
        setTimeout(() => process.exit(), 2000).unref();
        return 0;
      }),
    );
}
