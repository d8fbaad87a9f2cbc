// jaco up / down: a local cluster on this machine (embedded etcd, controllers, simulated nodes).
import { spawnLogged } from '../../child.js';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Command } from 'commander';
import { CONTROLLERS } from '../../app/processes.js';
import { logger } from '../../observability/log.js';
import { PACKAGE_ROOT } from '../../paths.js';
import { alive, haproxyAvailable, LocalCluster, readUpState, recordedNetwork, resolveDataDir, stateFile, tearDown, type UpState } from '../../supervise/local-cluster.js';
import { untilSignal } from '../../supervise/process.js';
import { action, CliError, timingsOf } from '../common.js';

interface UpFlags {
  nodes: string;
  capacity: string;
  detach?: boolean;
  dataDir: string;
  etcdPort: string;
  metricsPort: string;
  dashboardPort: string;
  registryPort: string;
  sharedEngine?: boolean;
  supervise?: boolean;
}

/** Where a child of the summary answers: the dashboard's page, an engine's socket, else /metrics. */
function childWhere(st: UpState, c: UpState['children'][number]): string {
  if (c.name === 'dashboard') return `${st.dashboard}`;
  if (c.name.startsWith('docker-')) return `engine ${c.metrics}`;
  return `metrics http://${c.metrics}/metrics`;
}

function summary(st: UpState): string {
  const first = st.network?.nodes[0]?.address ?? '127.0.1.1';
  const lines = [
    `jaco is up: etcd ${st.endpoint}, registry ${st.registry?.host ?? '-'}, ${st.nodes.length} node(s) (${st.mode === 'isolated' ? 'separate hosts: own namespace and engine each' : 'simulated, sharing this machine\'s engine'}), timings ${st.timings}`,
    ...(st.network ? st.network.nodes.map((n) => `  ${n.name.padEnd(12)} address ${n.address}  namespace ${n.netns}`) : []),
    ...st.children.map((c) => `  ${c.name.padEnd(14)} pid ${c.pid}  ${childWhere(st, c)}  log ${c.log}`),
    ...(st.dashboard ? ['', `Dashboard: ${st.dashboard}`] : []),
    '',
    'Next:',
    '  ./bin/jaco get nodes',
    '  ./bin/jaco apply -f examples/hello.yaml',
    '  ./bin/jaco status',
    '  ./bin/jaco logs hello -f          # through each node\'s agent, with the certificate in .jaco/pki/operator',
    ...(st.children.some((c) => c.name.startsWith('ingress-')) ? [`  curl http://${first}:18080/   # the published web service, through node-1's ingress`] : []),
    '  ./bin/jaco audit -f',
    '  make down            # stop everything',
  ];
  return lines.join('\n') + '\n';
}

async function sleep(ms: number) {
  await new Promise((r) => setTimeout(r, ms));
}

export function registerUp(program: Command): void {
  program
    .command('up')
    .description('Start a local cluster: embedded etcd under .jaco/, every controller, and N nodes, each a separate host (its own network namespace and Docker engine)')
    .option('--nodes <n>', 'nodes (node-1 … node-N)', '3')
    .option('--capacity <spec>', 'declared capacity of each node', 'cpu=1,memory=2Gi')
    .option('--shared-engine', "simulated nodes sharing this machine's network namespace and Docker engine (faster to start, one port space; no root needed beyond Docker's)")
    .option('--detach', 'return once the cluster is ready, leaving it running in the background')
    .option('--data-dir <dir>', 'where etcd data, logs and state live', '.jaco')
    .option('--etcd-port <port>', 'etcd client port (the peer port is the next one)', '2379')
    .option('--metrics-port <port>', 'first /metrics port (controllers, then each node)', '9464')
    .option('--dashboard-port <port>', 'port of the dashboard on 127.0.0.1 (the next free one if taken; 0: no dashboard)', '8090')
    .option('--registry-port <port>', "the cluster registry's port (separate hosts: on this machine's cluster address; --shared-engine: 127.0.0.1, the next free one if taken)", '5000')
    .option('--supervise', 'internal: run as the detached supervisor')
    .addHelpText(
      'after',
      '\nExamples:\n  jaco up --nodes 3 --detach\n  jaco --timings fast up --nodes 2\n  jaco up --nodes 2 --shared-engine --detach\n\nSeparate hosts need root (network namespaces, one dockerd per node); see docs/local-cluster.md.\n',
    )
    .action(
      action(async (f: UpFlags, cmd: Command) => {
        const dataDir = resolveDataDir(f.dataDir);
        const nodes = Number(f.nodes);
        if (!Number.isInteger(nodes) || nodes < 1 || nodes > 50) throw new CliError('--nodes must be a whole number from 1 to 50');
        const isolated = !f.sharedEngine;
        if (isolated && process.getuid?.() !== 0) throw new CliError('separate hosts (network namespaces, a Docker engine per node) need root: run as root, or use --shared-engine');
        const existing = readUpState(dataDir);
        if (existing && alive(existing.supervisorPid) && !f.supervise) {
          process.stdout.write(`already up (supervisor pid ${existing.supervisorPid}); \`jaco down\` stops it.\n` + summary(existing));
          return;
        }
        if (f.detach) {
          mkdirSync(join(dataDir, 'logs'), { recursive: true });
          const upLog = join(dataDir, 'logs', 'up.log');
          const args = process.argv.slice(2).filter((a) => a !== '--detach');
          const child = spawnLogged(process.execPath, [join(PACKAGE_ROOT, 'bin', 'jaco'), ...args, '--supervise'], upLog, { detached: true, env: process.env });
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
            withAgents: true,
            withIngress: haproxyAvailable(),
            controllers: Object.keys(CONTROLLERS),
            dashboardPort: Number(f.dashboardPort),
            registryPort: Number(f.registryPort),
            isolated,
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
    .description("Stop the local cluster started by `jaco up`: agents, controllers, their containers, the nodes' engines and network, etcd (also after a crash; twice is harmless)")
    .option('--data-dir <dir>', 'the directory given to jaco up', '.jaco')
    .option('--purge', "also delete the etcd data, logs and the nodes' image stores, and this machine's image names under the cluster registry's host (what `jaco registry push` and compose builds named)")
    .action(
      action(async (f: { dataDir: string; purge?: boolean }) => {
        const dataDir = resolveDataDir(f.dataDir);
        const st = readUpState(dataDir);
        if (st && alive(st.supervisorPid)) {
          process.kill(st.supervisorPid, 'SIGTERM');
          const deadline = Date.now() + 60_000;
          while (alive(st.supervisorPid) && Date.now() < deadline) await sleep(200);
        }
        // Whatever the supervisor could not stop goes now (engines are stopped by tearDown, after
        // their containers are removed).
        for (const c of st?.children ?? []) if (c.pid && alive(c.pid) && !c.name.startsWith('docker-')) process.kill(c.pid, 'SIGKILL');
        for (const pid of [st?.supervisorPid, st?.etcdPid, st?.registry?.pid]) if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
        await tearDown(dataDir, { clusterUid: st?.clusterUid, network: st?.network ?? (await recordedNetwork(dataDir)), registry: st?.registry }, logger('down'), { purge: !!f.purge });
        rmSync(stateFile(dataDir), { force: true });
        if (f.purge) rmSync(dataDir, { recursive: true, force: true });
        process.stdout.write(st ? `jaco is down${f.purge ? ' (data purged)' : ''}\n` : 'jaco was not up\n');
      }),
    );
}
