// jaco up / down: a local cluster on this machine (embedded etcd, controllers, simulated nodes).
import { spawn } from 'node:child_process';
import { mkdirSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { CONTROLLERS } from '../../../controllers/index.js';
import { logger } from '../../observability/log.js';
import { PACKAGE_ROOT } from '../../paths.js';
import { alive, haproxyAvailable, LocalCluster, readUpState, removeClusterContainers, resolveDataDir, stateFile, type UpState } from '../../runtime/local-cluster.js';
import { untilSignal } from '../../runtime/process.js';
import { action, CliError, timingsOf } from '../common.js';

interface UpFlags {
  nodes: string;
  capacity: string;
  detach?: boolean;
  dataDir: string;
  etcdPort: string;
  metricsPort: string;
  dashboardPort: string;
  supervise?: boolean;
}

function summary(st: UpState): string {
  const lines = [
    `jaco is up: etcd ${st.endpoint}, ${st.nodes.length} node(s), timings ${st.timings}`,
    ...st.children.map((c) => `  ${c.name.padEnd(12)} pid ${c.pid}  ${c.name === 'dashboard' ? `${st.dashboard}` : `metrics http://${c.metrics}/metrics`}  log ${c.log}`),
    ...(st.dashboard ? ['', `Dashboard: ${st.dashboard}`] : []),
    '',
    'Next:',
    '  ./bin/jaco get nodes',
    '  ./bin/jaco apply -f examples/hello.yaml',
    '  ./bin/jaco status',
    ...(st.children.some((c) => c.name.startsWith('ingress-')) ? ['  curl http://127.0.1.1:18080/   # the published web service, through node-1\'s ingress'] : []),
    '  ./bin/jaco audit -f',
    '  make down            # stop everything',
  ];
  return lines.join('\n') + '\n';
}

async function sleep(ms: number) {
  await new Promise((r) => setTimeout(r, ms));
}

export function registerUp(program: Command, hasAgent: () => boolean): void {
  program
    .command('up')
    .description('Start a local cluster: embedded etcd under .jaco/, every controller, and N simulated nodes on the local Docker engine')
    .option('--nodes <n>', 'simulated nodes (node-1 … node-N)', '3')
    .option('--capacity <spec>', 'declared capacity of each simulated node', 'cpu=1,memory=2Gi')
    .option('--detach', 'return once the cluster is ready, leaving it running in the background')
    .option('--data-dir <dir>', 'where etcd data, logs and state live', '.jaco')
    .option('--etcd-port <port>', 'etcd client port (the peer port is the next one)', '2379')
    .option('--metrics-port <port>', 'first /metrics port (controllers, then each node)', '9464')
    .option('--dashboard-port <port>', 'port of the dashboard on 127.0.0.1 (the next free one if taken; 0: no dashboard)', '8090')
    .option('--supervise', 'internal: run as the detached supervisor')
    .addHelpText('after', '\nExamples:\n  jaco up --nodes 3 --detach\n  jaco --timings fast up --nodes 2\n')
    .action(
      action(async (f: UpFlags, cmd: Command) => {
        const dataDir = resolveDataDir(f.dataDir);
        const nodes = Number(f.nodes);
        if (!Number.isInteger(nodes) || nodes < 1 || nodes > 50) throw new CliError('--nodes must be a whole number from 1 to 50');
        const existing = readUpState(dataDir);
        if (existing && alive(existing.supervisorPid) && !f.supervise) {
          process.stdout.write(`already up (supervisor pid ${existing.supervisorPid}); \`jaco down\` stops it.\n` + summary(existing));
          return;
        }
        if (f.detach) {
          mkdirSync(join(dataDir, 'logs'), { recursive: true });
          const upLog = join(dataDir, 'logs', 'up.log');
          const log = openSync(upLog, 'a');
          const args = process.argv.slice(2).filter((a) => a !== '--detach');
          const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'jaco'), ...args, '--supervise'], { detached: true, stdio: ['ignore', log, log], env: process.env });
          child.unref();
          const deadline = Date.now() + 120_000;
          for (;;) {
            await sleep(250);
            const st = readUpState(dataDir);
            if (st?.ready && st.supervisorPid === child.pid) {
              process.stdout.write(summary(st));
              return;
            }
            if (st?.error) throw new CliError(`jaco up failed: ${st.error}`);
            if (!alive(child.pid)) throw new CliError(`jaco up failed; see ${upLog}`);
            if (Date.now() > deadline) throw new CliError(`jaco up did not become ready in 120 s; see ${join(dataDir, 'logs')}`);
          }
        }
        const log = logger('up');
        const cluster = new LocalCluster(
          {
            dataDir,
            nodes,
            capacity: f.capacity,
            timings: timingsOf(cmd),
            etcdPort: Number(f.etcdPort),
            metricsPort: Number(f.metricsPort),
            withAgents: hasAgent(),
            withIngress: hasAgent() && haproxyAvailable(),
            controllers: Object.keys(CONTROLLERS),
            dashboardPort: Number(f.dashboardPort),
          },
          log,
        );
        const stopped = untilSignal();
        try {
          await cluster.start();
        } catch (e) {
          const st = readUpState(dataDir);
          if (st) {
            st.error = (e as Error).message;
            writeFileSync(stateFile(dataDir), JSON.stringify(st));
          }
          await cluster.stop();
          throw e;
        }
        const st = readUpState(dataDir);
        if (!f.supervise && st) process.stdout.write(summary(st) + 'Ctrl-C stops the cluster.\n');
        await stopped;
        log.info('stopping the local cluster');
        await cluster.stop();
      }),
    );

  program
    .command('down')
    .description('Stop the local cluster started by `jaco up`: agents, controllers, their containers, etcd')
    .option('--data-dir <dir>', 'the directory given to jaco up', '.jaco')
    .option('--purge', 'also delete the etcd data and logs')
    .action(
      action(async (f: { dataDir: string; purge?: boolean }) => {
        const dataDir = resolveDataDir(f.dataDir);
        const st = readUpState(dataDir);
        if (st && alive(st.supervisorPid)) {
          process.kill(st.supervisorPid, 'SIGTERM');
          const deadline = Date.now() + 60_000;
          while (alive(st.supervisorPid) && Date.now() < deadline) await sleep(200);
        }
        // Whatever the supervisor could not stop goes now.
        for (const pid of [st?.supervisorPid, st?.etcdPid, ...(st?.children.map((c) => c.pid) ?? [])]) if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
        if (st?.clusterUid) await removeClusterContainers(st.clusterUid, logger('down'));
        rmSync(stateFile(dataDir), { force: true });
        if (f.purge) rmSync(dataDir, { recursive: true, force: true });
        process.stdout.write(st ? `jaco is down${f.purge ? ' (data purged)' : ''}\n` : 'jaco was not up\n');
      }),
    );
}
