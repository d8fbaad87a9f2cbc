// The network of a local cluster of separate hosts (`jaco up`): a router namespace and one network
// namespace per node, joined by routed veth links (no bridge, no NAT), plus one link from the
// machine's own namespace to the router, so the operator's CLI, etcd and the registry reach every
// node. The plan is pure (addresses, names, the `ip` commands, table-tested); the shell runs
// iproute2. Addresses come from 198.18.0.0/15, the range RFC 2544 reserves for benchmarking
// networks: never routed on the internet, so nothing sent to it can leave the machine.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Where `ip netns add` puts a namespace's handle (what `nsenter --net=` takes). */
export const NETNS_DIR = '/run/netns';
/** Nodes per local cluster: node i is at 198.18.<index>.(10 + i). */
export const MAX_LOCAL_NODES = 200;
/** Local clusters on one machine: each takes 198.18.<index>.0/24 (index 1–254). */
export const MAX_NETWORK_INDEX = 254;

export interface LocalNode {
  name: string;
  /** Its network namespace (`/run/netns/<netns>`). */
  netns: string;
  /** Its one address (on its eth0): Node.status.address, where its ingress answers. */
  address: string;
  /** The router's end of its link: `ip -n <router> link set <link> down` partitions the node. */
  link: string;
}

export interface LocalNetwork {
  index: number;
  /** Prefix of every name this network makes (namespaces, the machine's link). */
  tag: string;
  /** The router namespace: forwards between the links, and nowhere else (no default route). */
  router: string;
  /** The machine's end of its link to the router (an interface of the root namespace). */
  hostLink: string;
  /** The machine's address on that link: etcd and the registry listen here for the nodes. */
  hostAddress: string;
  /** The router's address on every link (each node's and the machine's next hop). */
  gateway: string;
  /** Every address of this network. */
  subnet: string;
  nodes: LocalNode[];
}

export class LocalNetworkError extends Error {
  override name = 'LocalNetworkError';
}

export const networkTag = (index: number) => `jaco${index}`;

/** The names and addresses of network `index` (1–254) for the given nodes. */
export function planNetwork(index: number, nodeNames: string[]): LocalNetwork {
  if (!Number.isInteger(index) || index < 1 || index > MAX_NETWORK_INDEX) throw new LocalNetworkError(`network index ${index} is not in 1–${MAX_NETWORK_INDEX}`);
  if (nodeNames.length > MAX_LOCAL_NODES) throw new LocalNetworkError(`a local cluster has at most ${MAX_LOCAL_NODES} nodes`);
  const tag = networkTag(index);
  const net = `198.18.${index}`;
  return {
    index,
    tag,
    router: `${tag}-router`,
    hostLink: tag,
    hostAddress: `${net}.1`,
    gateway: `${net}.254`,
    subnet: `${net}.0/24`,
    nodes: nodeNames.map((name, i) => ({ name, netns: `${tag}-${name}`, address: `${net}.${10 + i + 1}`, link: `n${i + 1}` })),
  };
}

/**
 * The overlay interface of node `n` (jaco agent --overlay-interface). Each node of the machine needs
 * a name of its own although each has its own namespace: wireguard-go's control socket is
 * /var/run/wireguard/<name>.sock, in the one file system every namespace shares.
 */
export function overlayInterface(net: LocalNetwork, n: LocalNode): string {
  return `${net.tag}-wg${n.link.slice(1)}`;
}

/** One `ip` invocation: in a namespace (`ip -n`), or in the root one. */
export interface IpCommand {
  netns?: string;
  args: string[];
}

/** What `ip -n <router>` runs to give node `n` its route (also after its link comes back up). */
function nodeRoute(net: LocalNetwork, n: LocalNode): IpCommand {
  return { netns: net.router, args: ['route', 'replace', `${n.address}/32`, 'dev', n.link] };
}

/**
 * Every command that builds the network, in order. Each link is a veth pair with /32 addresses
 * and explicit routes: the router holds the gateway address on every link and a host route to
 * each end; the ends route only the cluster's subnet to the gateway (no default route: a
 * container that tries the internet is told "unreachable" at once).
 */
export function networkCommands(net: LocalNetwork): IpCommand[] {
  const cmds: IpCommand[] = [];
  const r = net.router;
  const ip = (netns: string | undefined, ...args: string[]) => cmds.push({ ...(netns ? { netns } : {}), args });
  ip(r, 'link', 'set', 'lo', 'up');
  // The machine's link: its end stays in the root namespace.
  ip(undefined, 'link', 'add', net.hostLink, 'type', 'veth', 'peer', 'name', 'host', 'netns', r);
  ip(undefined, 'addr', 'add', `${net.hostAddress}/32`, 'dev', net.hostLink);
  ip(undefined, 'link', 'set', net.hostLink, 'up');
  ip(undefined, 'route', 'replace', net.subnet, 'via', net.gateway, 'dev', net.hostLink, 'onlink');
  ip(r, 'addr', 'add', `${net.gateway}/32`, 'dev', 'host');
  ip(r, 'link', 'set', 'host', 'up');
  ip(r, 'route', 'replace', `${net.hostAddress}/32`, 'dev', 'host');
  for (const n of net.nodes) {
    ip(n.netns, 'link', 'set', 'lo', 'up');
    ip(n.netns, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', n.link, 'netns', r);
    ip(n.netns, 'addr', 'add', `${n.address}/32`, 'dev', 'eth0');
    ip(n.netns, 'link', 'set', 'eth0', 'up');
    ip(n.netns, 'route', 'replace', net.subnet, 'via', net.gateway, 'dev', 'eth0', 'onlink');
    ip(r, 'addr', 'add', `${net.gateway}/32`, 'dev', n.link);
    ip(r, 'link', 'set', n.link, 'up');
    cmds.push(nodeRoute(net, n));
  }
  return cmds;
}

async function ipRun(c: IpCommand): Promise<string> {
  const argv = [...(c.netns ? ['-n', c.netns] : []), ...c.args];
  try {
    return (await run('ip', argv)).stdout;
  } catch (e) {
    const err = e as { stderr?: string; message: string; code?: string };
    if (err.code === 'ENOENT') throw new LocalNetworkError('`ip` (iproute2) is not installed: run scripts/ensure-system.sh');
    throw new LocalNetworkError(`ip ${argv.join(' ')}: ${(err.stderr ?? err.message).trim()}`);
  }
}

/** Runs `cmd` in network namespace `netns` (nsenter, not `ip netns exec`, which remounts /sys). */
export function inNetns(netns: string, cmd: string, args: string[]): { cmd: string; args: string[] } {
  return { cmd: 'nsenter', args: [`--net=${NETNS_DIR}/${netns}`, '--', cmd, ...args] };
}

/** The namespaces on this machine whose names start with `prefix`. */
export async function namespacesWith(prefix: string): Promise<string[]> {
  const out = await run('ip', ['netns', 'list']).then((r) => r.stdout, () => '');
  return out
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(prefix));
}

/**
 * Claims a free network index by creating its router namespace (`ip netns add` fails when the
 * name exists, so two `jaco up` at once never get the same one), `preferred` first: a cluster
 * restarted from the same data directory keeps its addresses.
 */
export async function claimNetwork(nodeNames: string[], preferred?: number): Promise<LocalNetwork> {
  const order = [...(preferred ? [preferred] : []), ...Array.from({ length: MAX_NETWORK_INDEX }, (_, i) => i + 1).filter((i) => i !== preferred)];
  for (const index of order) {
    const net = planNetwork(index, nodeNames);
    // A link of that name in the root namespace belongs to another network (or a crashed one).
    if (existsSync(`/sys/class/net/${net.hostLink}`)) continue;
    try {
      await run('ip', ['netns', 'add', net.router]);
      return net;
    } catch {
      // taken: the next one
    }
  }
  throw new LocalNetworkError('no free local network (198.18.1–254.0/24 are all in use): `jaco down --purge` clusters you no longer need');
}

/** Builds a claimed network: the node namespaces, every link, address and route. */
export async function createNetwork(net: LocalNetwork): Promise<void> {
  for (const n of net.nodes) await ipRun({ args: ['netns', 'add', n.netns] });
  for (const c of networkCommands(net)) await ipRun(c);
  // The router forwards (its own namespace's setting: the machine's stays as it is).
  await run('nsenter', [`--net=${NETNS_DIR}/${net.router}`, '--', 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']).catch((e: Error) => {
    throw new LocalNetworkError(`enabling forwarding in ${net.router}: ${e.message}`);
  });
}

/**
 * Deletes every namespace of network `tag` and the machine's link (deleting a namespace deletes
 * its veth ends, and with them their peers). Idempotent: what is already gone is skipped. The
 * overlay's WireGuard interfaces go first: a wireguard-go outlives its agent, and a process still
 * in a namespace keeps it alive after `ip netns delete`; it exits when its interface is deleted.
 * Then whatever still runs in a namespace is killed: after a crash, the processes the cluster's
 * children started (an ingress's HAProxy) outlive the children `jaco down` killed. Nothing but the
 * cluster runs in the namespaces it made.
 */
export async function destroyNetwork(tag: string): Promise<string[]> {
  const gone: string[] = [];
  for (const ns of await namespacesWith(`${tag}-`)) await deleteTunnels(ns);
  for (const ns of await namespacesWith(`${tag}-`)) await killProcessesIn(ns);
  for (const ns of await namespacesWith(`${tag}-`)) {
    await run('ip', ['netns', 'delete', ns]).then(
      () => gone.push(ns),
      () => undefined,
    );
  }
  if (existsSync(`/sys/class/net/${tag}`)) await run('ip', ['link', 'delete', tag]).catch(() => undefined);
  return gone;
}

/** SIGKILLs every process in namespace `ns` and waits (up to 5 s) until none is left. */
export async function killProcessesIn(ns: string): Promise<void> {
  const pids = async () =>
    (await run('ip', ['netns', 'pids', ns]).then((r) => r.stdout, () => ''))
      .split('\n')
      .map(Number)
      .filter((p) => p > 0 && p !== process.pid);
  for (const until = Date.now() + 5_000; ; ) {
    const left = await pids();
    if (!left.length || Date.now() > until) return;
    for (const p of left) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* gone meanwhile */
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Deletes the WireGuard (kernel) and tun (wireguard-go) interfaces of namespace `ns`: only the overlay makes them there. */
async function deleteTunnels(ns: string): Promise<void> {
  const out = await run('ip', ['-n', ns, '-j', '-d', 'link', 'show']).then((r) => r.stdout, () => '[]');
  let links: { ifname?: string; linkinfo?: { info_kind?: string } }[] = [];
  try {
    links = JSON.parse(out || '[]') as typeof links;
  } catch {
    return;
  }
  for (const l of links) if (l.ifname && (l.linkinfo?.info_kind === 'wireguard' || l.linkinfo?.info_kind === 'tun')) await run('ip', ['-n', ns, 'link', 'del', 'dev', l.ifname]).catch(() => undefined);
}

/** Cuts node `n` off the network (its link's router end goes down): a partition. */
export async function cutLink(net: LocalNetwork, node: string): Promise<void> {
  const n = nodeOf(net, node);
  await ipRun({ netns: net.router, args: ['link', 'set', n.link, 'down'] });
}

/** Joins a cut node again: the link comes up and the router's route to it (flushed with the link) is put back. */
export async function restoreLink(net: LocalNetwork, node: string): Promise<void> {
  const n = nodeOf(net, node);
  await ipRun({ netns: net.router, args: ['link', 'set', n.link, 'up'] });
  await ipRun(nodeRoute(net, n));
}

function nodeOf(net: LocalNetwork, node: string): LocalNode {
  const n = net.nodes.find((x) => x.name === node);
  if (!n) throw new LocalNetworkError(`no node "${node}" in network ${net.tag}`);
  return n;
}
