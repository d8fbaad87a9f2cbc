// jaco agent: run the node-agent of one host (one per host, like a DaemonSet; `jaco up` runs
// several on one engine as simulated nodes).
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { defaultAddress, AgentFlagError, dockerConnection, parseCapacity, parseDevices, parseLabels, checkStatusInterval, resolveCapacity, NodeAgent, NodeRemovedError, type AgentExit, PRESSURE_MODES, type PressureMode, DEFAULT_CNI_BIN_DIR, DEFAULT_SANDBOX_IMAGE, DEFAULT_API_PORT } from '../../app/processes.js';
import { DEFAULT_PORT_RANGE, parsePortRange } from '../../api/ports.js';
import { existsSync } from 'node:fs';
import { hasTlsDir, readTlsDir, TLS_FILES, type TlsMaterial } from '../../pki/identity.js';
import { parseImageReference } from '../../images/reference.js';
import { logger } from '../../observability/log.js';
import { serveObservability } from '../../observability/server.js';
import { untilSignal } from '../../supervise/process.js';
import { action, CliError, durationFlag, EXIT_INVALID, storeOf, timingsOf } from '../common.js';
import { splitHostPort } from '../../api/network.js';

interface AgentFlags {
  node: string;
  capacity?: string;
  device: string[];
  labels?: string;
  dockerHost: string;
  metricsAddr: string;
  statusInterval?: string;
  rejoin?: boolean;
  address?: string;
  portRange: string;
  pressure: string;
  stateDir?: string;
  overlay?: boolean;
  overlayPort: string;
  overlayInterface: string;
  sandboxImage: string;
  cniBinDir: string;
  apiAddr?: string;
  apiTlsDir?: string;
}

/** A Linux interface name: at most 15 characters, no slash or space. */
const INTERFACE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

const NODE_NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

const EXAMPLES = `
Examples:
  jaco agent --node node-1
  jaco agent --node gpu-1 --capacity cpu=16,memory=64Gi,gpus=2 --labels zone=a,gpu=true
  jaco agent --node node-2 --device /dev/fuse --device /dev/kvm   # devices compose services may ask for
  jaco --timings fast agent --node node-1 --capacity cpu=1,memory=2Gi --metrics-addr 127.0.0.1:0
  jaco agent --node node-3 --rejoin          # after jaco node remove node-3
  jaco agent --node sim-1 --pressure containers --address 127.0.1.1   # a simulated node on a shared host
  jaco agent --node node-1 --address 10.0.0.11 --overlay     # in the WireGuard mesh between nodes (UDP 51820)

The agent registers nodes/<node>, heartbeats on its own etcd lease with the node's pressure, runs
the replicas of desired/<node>/ on Docker and reports them in observed/<node>/. Their secrets and
configs come from copies/<node>/, sealed to the node's own key in --state-dir, and are written on a
tmpfs per container, never on disk (docs/secrets.md). With --overlay it joins the WireGuard mesh
between nodes: its key is made in --state-dir, its public half and endpoint published on its node,
and every other node's subnets are routed to it over the tunnel (docs/networking.md). It stops nothing
when etcd or Docker is briefly away. When nodes/<node> is deleted while it runs (jaco node
remove), it stops and removes its containers and exits 0. See docs/node-agent.md.
`;

/**
 * The logs and exec endpoint the flags ask for: off, or where it listens and its TLS files. Without
 * either flag it serves when the state directory holds the node's certificate; a flag given for an
 * endpoint that cannot serve is an error, never a silent off.
 */
function agentApiOf(f: AgentFlags, address: string, stateDir: string): { host: string; port: number; tls: TlsMaterial } | undefined {
  if (f.apiAddr === 'off') return undefined;
  const dir = resolve(f.apiTlsDir ?? join(stateDir, 'tls'));
  let host = address;
  let port = DEFAULT_API_PORT;
  if (f.apiAddr !== undefined) {
    const hp = splitHostPort(f.apiAddr);
    if (!hp || !isIP(hp.host)) throw new CliError(`--api-addr: "${f.apiAddr}" is not <ip>:<port> ([<ipv6>]:<port>) or off`);
    ({ host, port } = hp);
  }
  if (!hasTlsDir(dir)) {
    if (f.apiAddr !== undefined || f.apiTlsDir !== undefined) throw new CliError(`--api-tls-dir: ${dir} does not hold ${Object.values(TLS_FILES).join(', ')}; issue them with \`jaco cert node ${f.node} --ip ${host} --out ${dir}\`, or give --api-addr off`);
    return undefined;
  }
  try {
    return { host, port, tls: readTlsDir(dir, '--api-tls-dir') };
  } catch (e) {
    throw new CliError((e as Error).message);
  }
}

export function registerAgent(program: Command): void {
  program
    .command('agent')
    .description("Run a host's node-agent: register the node, heartbeat with pressure, run its desired replicas on Docker, report them")
    .requiredOption('--node <name>', 'the node this agent runs (its key is nodes/<name>)')
    .option('--capacity <spec>', "declared capacity, e.g. cpu=2,memory=4Gi,gpus=0,disk=100Gi (parts left out are detected: cores, total memory, nvidia-smi GPUs, the size of the filesystem of Docker's data root; the engine's runtimes always are)")
    .option('--device <path>', 'a host device this node offers containers (compose devices:, e.g. /dev/fuse); services asking for one are placed only on nodes offering it (repeatable)', (v: string, prev: string[]) => [...prev, v], [] as string[])
    .option('--labels <k=v,...>', 'node labels (placement.nodeSelector matches them); they replace the labels of nodes/<name>')
    .option('--docker-host <url>', 'the Docker engine (env DOCKER_HOST)', process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock')
    .option('--metrics-addr <addr>', 'serve /metrics and /healthz here (port 0: any free port, logged)', '127.0.0.1:9465')
    .option('--status-interval <duration>', 'heartbeat and pressure sampling period, 5s…5m (default 30s; 1s with --timings fast)')
    .option('--address <ip>', "the address this node's replicas are reached at (Node.status.address, JACO_NODE_ADDRESS); default: the default route interface's address, else the host's one other IPv4 address")
    .option('--port-range <min-max>', 'where the scheduler assigns dynamic host ports on this node', `${DEFAULT_PORT_RANGE.min}-${DEFAULT_PORT_RANGE.max}`)
    .option('--pressure <mode>', 'what the node\'s pressure measures: node (the whole host: root cgroup CPU, /proc/meminfo; one agent per host) or containers (the sum of this agent\'s containers: simulated nodes sharing a host)', 'node')
    .option('--state-dir <dir>', "the agent's own directory: its node key (made on the first start, mode 600) and the tmpfs of each container's secrets and configs (default /var/lib/jaco/agent/<node>)")
    .option('--overlay', "join the WireGuard mesh between nodes: make the overlay interface (the kernel's WireGuard, else wireguard-go), a peer per node (docs/networking.md)")
    .option('--overlay-port <port>', "the overlay's UDP port (its endpoint is <address>:<port>)", '51820')
    .option('--overlay-interface <name>', 'the overlay interface (one per host: nodes sharing a machine need one name each)', 'jaco-wg')
    .option('--sandbox-image <image>', "the pause image holding each cluster-network replica's network namespace (a short name resolves at the cluster's default registry)", DEFAULT_SANDBOX_IMAGE)
    .option('--cni-bin-dir <dir>', "where the CNI plugins are (Debian's containernetworking-plugins): ptp plumbs cluster-network replicas", DEFAULT_CNI_BIN_DIR)
    .option('--api-addr <host:port>', `where the logs and exec endpoint listens (HTTPS, mutual TLS; published on the node), or off (default <address>:${DEFAULT_API_PORT} when --api-tls-dir holds the node's certificate)`)
    .option('--api-tls-dir <dir>', "the endpoint's TLS files: ca.pem, cert.pem, cert.key (`jaco cert node`; default <state-dir>/tls)")
    .option('--rejoin', 'register again although `jaco node remove` removed this node from the cluster')
    .addHelpText('after', EXAMPLES)
    .action(
      action(async (f: AgentFlags, cmd: Command) => {
        if (!NODE_NAME.test(f.node) || f.node.length > 253) throw new CliError(`--node: "${f.node}" is not a valid node name (lower-case letters, digits, - and .)`);
        const timings = timingsOf(cmd);
        let statusIntervalMs: number;
        let labels: Record<string, string>;
        let declared;
        let portRange;
        // Without a default route: not an interface the agent made (its overlay, a replica's veth of the CNI ptp plugin).
        const address = f.address ?? defaultAddress((i) => i === f.overlayInterface || i.startsWith('veth'));
        if (!(PRESSURE_MODES as readonly string[]).includes(f.pressure)) throw new CliError(`--pressure: "${f.pressure}" is not one of ${PRESSURE_MODES.join(', ')}`);
        const pressureMode = f.pressure as PressureMode;
        if (isIP(address) !== 4) throw new CliError(`--address: "${address}" is not an IPv4 address`);
        try {
          parseImageReference(f.sandboxImage);
        } catch (e) {
          throw new CliError(`--sandbox-image: ${(e as Error).message}`);
        }
        try {
          portRange = parsePortRange(f.portRange);
        } catch (e) {
          throw new CliError(`--port-range: ${(e as Error).message}`);
        }
        try {
          statusIntervalMs = checkStatusInterval(f.statusInterval === undefined ? undefined : durationFlag('--status-interval', f.statusInterval), timings);
          labels = parseLabels(f.labels);
          declared = { ...parseCapacity(f.capacity ?? ''), devices: parseDevices(f.device, existsSync) };
          dockerConnection(f.dockerHost);
        } catch (e) {
          if (e instanceof AgentFlagError) throw new CliError(e.message);
          throw e;
        }
        const overlayPort = Number(f.overlayPort);
        if (!Number.isInteger(overlayPort) || overlayPort < 1 || overlayPort > 65535) throw new CliError(`--overlay-port: "${f.overlayPort}" is not a port (1–65535)`);
        if (!INTERFACE_NAME.test(f.overlayInterface)) throw new CliError(`--overlay-interface: "${f.overlayInterface}" is not an interface name (1–15 letters, digits, '.', '-', '_')`);
        const overlay = f.overlay ? { interface: f.overlayInterface, port: overlayPort } : undefined;
        const stateDir = resolve(f.stateDir ?? join('/var/lib/jaco/agent', f.node));
        const api = agentApiOf(f, address, stateDir);
        const capacity = await resolveCapacity(declared);
        const store = storeOf(cmd);
        const log = logger('node-agent', { node: f.node });
        if (!api) log.info({ tlsDir: f.apiTlsDir ?? join(stateDir, 'tls') }, f.apiAddr === 'off' ? 'no logs and exec endpoint (--api-addr off)' : 'no logs and exec endpoint: no node certificate in the TLS directory (jaco cert node; docs/operate.md)');
        const agent = new NodeAgent({
          node: f.node,
          store,
          timings,
          statusIntervalMs,
          capacity,
          labels,
          dockerHost: f.dockerHost,
          rejoin: !!f.rejoin,
          log,
          address,
          portRange,
          pressureMode,
          sandboxImage: f.sandboxImage,
          cniBinDir: f.cniBinDir,
          stateDir,
          overlay,
          ...(api ? { api } : {}),
        });
        const { server, url } = await serveObservability(f.metricsAddr, () => agent.health());
        const close = async () => {
          await agent.stop();
          await new Promise<void>((r) => server.close(() => r()));
          store.close();
          // A lingering socket (Docker keep-alive, gRPC) must not keep a stopped agent alive.
          setTimeout(() => process.exit(), 2000).unref();
        };
        try {
          await agent.start();
        } catch (e) {
          await close();
          if (e instanceof NodeRemovedError) throw new CliError(e.message, EXIT_INVALID);
          throw e;
        }
        log.info({ metrics: `${url}/metrics`, healthz: `${url}/healthz` }, 'node-agent running');
        const outcome = await Promise.race<AgentExit | NodeJS.Signals>([agent.exited, untilSignal()]);
        if (typeof outcome === 'string') log.info({ signal: outcome }, 'stopping; containers keep running');
        await close();
        return typeof outcome === 'string' ? 0 : outcome.code;
      }),
    );
}
