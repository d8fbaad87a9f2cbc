// jaco hollow-nodes: N real node-agents in one process on an in-memory container runtime, against
// the real etcd and the real controllers: how jaco is measured at a thousand nodes (docs/scale.md).
import type { Command } from 'commander';
import { HollowFleet, AgentFlagError, parseCapacity, parseLabels, checkStatusInterval } from '../../app/processes.js';
import { logger, rootLogger } from '../../observability/log.js';
import { serveObservability } from '../../observability/server.js';
import { untilSignal } from '../../supervise/process.js';
import { action, CliError, durationFlag, storeOf, timingsOf } from '../common.js';

interface HollowFlags {
  count: string;
  first: string;
  namePrefix: string;
  startLatency: string;
  failRate: string;
  seed: string;
  capacity: string;
  labels?: string;
  statusInterval?: string;
  metricsAddr: string;
  logLevel: string;
}

/** The HTTP/2 window the fleet's one etcd client gives etcd (StoreOptions.flowControlWindowBytes). */
const HOLLOW_WINDOW_BYTES = 16 * 1024 * 1024;
const NAME_PREFIX = /^[a-z0-9]([-a-z0-9.]*[-a-z0-9.])?$/;

const EXAMPLES = `
Examples:
  jaco hollow-nodes --count 1000
  jaco hollow-nodes --count 50 --start-latency 50ms --fail-rate 0.05 --seed 7
  jaco hollow-nodes --count 100 --first 1001 --name-prefix lost-   # a second process, other names

Each hollow node is the real node-agent (registration, heartbeat lease, pressure samples, the
watch of desired/<node>/, observed writes, restart commands) with Docker replaced by an in-memory
runtime: a container runs --start-latency after its start, passes its health check (or, without
one, keeps running) unless a seeded draw fails it (--fail-rate), and reports synthetic CPU and
memory. Nothing else is simulated: etcd and the controllers are real. All agents share one etcd
client. SIGTERM stops them and revokes their leases (their nodes turn NotReady at once); SIGKILL
leaves the leases to expire, as a lost host would. See docs/scale.md.
`;

function number(flag: string, v: string, ok: (n: number) => boolean, what: string): number {
  const n = Number(v);
  if (v.trim() === '' || !Number.isFinite(n) || !ok(n)) throw new CliError(`${flag}: "${v}" is not ${what}`);
  return n;
}

export function registerHollowNodes(program: Command): void {
  program
    .command('hollow-nodes')
    .description('Run N node-agents in one process on an in-memory container runtime, for scale tests against a real etcd and real controllers')
    .requiredOption('--count <n>', 'how many hollow nodes')
    .option('--first <i>', 'number of the first node', '1')
    .option('--name-prefix <prefix>', 'node names are <prefix><number>, zero-padded', 'hollow-')
    .option('--start-latency <duration>', 'time from a container start to running', '200ms')
    .option('--fail-rate <0..1>', 'share of containers that fail their health check (exit 1 without one)', '0')
    .option('--seed <n>', 'seed of the draws that decide which containers fail and their usage', '1')
    .option('--capacity <spec>', "every hollow node's capacity", 'cpu=4,memory=16Gi,gpus=0')
    .option('--labels <k=v,...>', 'labels of every hollow node')
    .option('--status-interval <duration>', 'heartbeat and pressure sampling period (default 30s; 1s with --timings fast)')
    .option('--metrics-addr <addr>', 'serve /metrics and /healthz here (port 0: any free port)', '127.0.0.1:0')
    .option('--log-level <level>', 'log level of the agents (a thousand agents at info log every start)', process.env.JACO_LOG_LEVEL ?? 'warn')
    .addHelpText('after', EXAMPLES)
    .action(
      action(async (f: HollowFlags, cmd: Command) => {
        const count = number('--count', f.count, (n) => Number.isInteger(n) && n >= 1 && n <= 100_000, 'a whole number from 1 to 100000');
        const first = number('--first', f.first, (n) => Number.isInteger(n) && n >= 0, 'a whole number ≥ 0');
        const failRate = number('--fail-rate', f.failRate, (n) => n >= 0 && n <= 1, 'a share from 0 to 1');
        const seed = number('--seed', f.seed, Number.isInteger, 'a whole number');
        if (!NAME_PREFIX.test(f.namePrefix)) throw new CliError(`--name-prefix: "${f.namePrefix}" cannot begin a node name (lower-case letters, digits, - and .)`);
        const startLatencyMs = durationFlag('--start-latency', f.startLatency, { zero: 'for none' });
        const timings = timingsOf(cmd);
        let statusIntervalMs;
        let labels;
        let declared;
        try {
          statusIntervalMs = checkStatusInterval(f.statusInterval === undefined ? undefined : durationFlag('--status-interval', f.statusInterval), timings);
          labels = parseLabels(f.labels);
          declared = parseCapacity(f.capacity);
        } catch (e) {
          if (e instanceof AgentFlagError) throw new CliError(e.message);
          throw e;
        }
        const capacity = { cpuMillis: declared.cpuMillis ?? 4000, memoryBytes: declared.memoryBytes ?? 16 * 2 ** 30, gpus: declared.gpus ?? 0 };
        rootLogger().level = f.logLevel;
        // The command's own lines at info whatever the agents' level: scripts wait for 'hollow nodes running'.
        const log = rootLogger().child({ component: 'hollow-nodes' }, { level: 'info' });
        // One client, one watch stream for every agent's two watches: a window as large as a
        // thousand hosts' separate connections would give etcd (src/store/store.ts).
        const store = storeOf(cmd, { flowControlWindowBytes: HOLLOW_WINDOW_BYTES });
        const fleet = new HollowFleet({ store, timings, statusIntervalMs, capacity, labels, log: logger('node-agent'), namePrefix: f.namePrefix, first, count, runtime: { startLatencyMs, failRate, seed } });
        const { server, url } = await serveObservability(f.metricsAddr, () => fleet.health());
        const began = Date.now();
        const stopped = untilSignal();
        const outcome = await Promise.race([fleet.start().then(() => 'started' as const), stopped]);
        if (outcome === 'started') log.info({ count, first, metrics: `${url}/metrics`, healthz: `${url}/healthz`, startMs: Date.now() - began }, 'hollow nodes running');
        const signal = await stopped;
        log.warn({ signal }, 'stopping the hollow nodes');
        await fleet.stop();
        await new Promise<void>((r) => server.close(() => r()));
        store.close();
        setTimeout(() => process.exit(), 2000).unref();
        return 0;
      }),
    );
}
