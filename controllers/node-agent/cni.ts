// A cluster-network replica's addresses, plumbed by the CNI `ptp` plugin (Debian's
// containernetworking-plugins): a routed veth pair between the node's network namespace and the
// replica's sandbox — no bridge, no NAT — the addresses given through static IPAM, each family's
// gateway the first host of its prefix. The config and the plugin's answers are pure (tables
// beside it); CniNetwork only execs the plugin and reads the sandbox's addresses with `ip`. jaco
// writes no netlink code of its own.
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import type { ReplicaAddress } from '../../src/api/types.js';
import { canonicalCidr, gatewayOf } from '../../src/api/network.js';
import { CniError, type ReplicaNetwork, type SandboxNetns } from './network.js';

/** Where Debian's containernetworking-plugins puts the plugins (`jaco agent --cni-bin-dir`). */
export const DEFAULT_CNI_BIN_DIR = '/usr/lib/cni';
/** The spec version of the configs jaco hands the plugin (plugins 1.x speak it). */
export const CNI_VERSION = '1.0.0';
/** The replica's end of the veth pair, inside its namespace. */
export const CNI_IFNAME = 'eth0';
/** The network's name in the config (the plugin uses it in its own bookkeeping only). */
export const CNI_NETWORK = 'jaco';
/** A plugin that has not answered by then is killed: a start must not hang on it. */
const PLUGIN_TIMEOUT_MS = 30_000;

// ------------------------------------------------------------------ the plugin's config and answers

export interface CniConfig {
  cniVersion: string;
  name: string;
  type: 'ptp';
  ipMasq: false;
  ipam: {
    type: 'static';
    addresses: { address: string; gateway: string }[];
    routes: { dst: string }[];
  };
}

/**
 * The ptp config of one replica: its IPv4 and IPv6 address by static IPAM, each with its gateway,
 * and default routes of both families through them. ipMasq stays off (the network rule: no NAT).
 */
export function cniConfig(address: ReplicaAddress): CniConfig {
  const addresses = [address.ipv4, address.ipv6].map((a) => ({ address: canonicalCidr(a), gateway: gatewayOf(a) }));
  return {
    cniVersion: CNI_VERSION,
    name: CNI_NETWORK,
    type: 'ptp',
    ipMasq: false,
    ipam: { type: 'static', addresses, routes: [{ dst: '0.0.0.0/0' }, { dst: '::/0' }] },
  };
}

/** The CNI environment of one call (the spec's CNI_* variables). */
export function cniEnv(command: 'ADD' | 'DEL', sb: SandboxNetns, binDir: string): Record<string, string> {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: sb.id,
    // A sandbox that no longer runs has no namespace left: DEL then only releases (static IPAM: nothing).
    CNI_NETNS: sb.pid > 0 ? netnsPath(sb.pid) : '',
    CNI_IFNAME,
    CNI_PATH: binDir,
  };
}

export const netnsPath = (pid: number) => `/proc/${pid}/ns/net`;

/** A failed call as an error: the plugin's own (CNI's {code, msg, details} on stdout) when it gave one. */
export function cniFailure(command: string, stdout: string, stderr: string, exit: number | string): CniError {
  let parsed: { code?: unknown; msg?: unknown; details?: unknown } | undefined;
  try {
    parsed = JSON.parse(stdout) as typeof parsed;
  } catch {
    // not the spec's error object
  }
  if (parsed && typeof parsed.msg === 'string') {
    const details = typeof parsed.details === 'string' && parsed.details ? `: ${parsed.details}` : '';
    return new CniError(`ptp ${command}: ${parsed.msg}${details}`, typeof parsed.code === 'number' ? parsed.code : undefined);
  }
  const text = (stderr || stdout).trim().split('\n').slice(-3).join(' ') || `exited ${exit}`;
  return new CniError(`ptp ${command}: ${text}`);
}

/** The global addresses of `ip -j addr show dev eth0`, as CIDRs. */
export function addressesFromIp(json: string): string[] {
  const links = JSON.parse(json) as { addr_info?: { family?: string; local?: string; prefixlen?: number; scope?: string }[] }[];
  return links.flatMap((l) => (l.addr_info ?? []).filter((a) => a.scope === 'global' && a.local && a.prefixlen !== undefined).map((a) => `${a.local}/${a.prefixlen}`));
}

/** Whether a sandbox's interface holds both of a replica's addresses. */
export function holdsAddress(have: readonly string[], address: ReplicaAddress): boolean {
  const set = new Set(have.map((a) => canonicalCidr(a)));
  return set.has(canonicalCidr(address.ipv4)) && set.has(canonicalCidr(address.ipv6));
}

// ------------------------------------------------------------------ the shell

/** The agent's replica network on a real host: the CNI ptp plugin, run in the agent's own network namespace (the node's). */
export class CniNetwork implements ReplicaNetwork {
  constructor(readonly binDir: string = DEFAULT_CNI_BIN_DIR) {}

  async add(sb: SandboxNetns, address: ReplicaAddress): Promise<void> {
    await this.call('ADD', sb, address);
  }

  async del(sb: SandboxNetns, address: ReplicaAddress): Promise<void> {
    await this.call('DEL', sb, address);
  }

  /** The sandbox's global addresses on eth0 ([] when it has no eth0 yet). */
  addresses(sb: SandboxNetns): Promise<string[]> {
    return new Promise((resolve, reject) => {
      execFile('nsenter', [`--net=${netnsPath(sb.pid)}`, '--', 'ip', '-j', 'addr', 'show', 'dev', CNI_IFNAME], { timeout: PLUGIN_TIMEOUT_MS }, (err, stdout, stderr) => {
        if (!err) return resolve(addressesFromIp(stdout || '[]'));
        if (/does not exist/.test(stderr)) return resolve([]);
        reject(new CniError(`cannot read the addresses of sandbox ${sb.id.slice(0, 12)} (pid ${sb.pid}): ${(stderr || err.message).trim()}`));
      });
    });
  }

  /** Runs the plugin with the CNI environment and the config on stdin; its stdout on success. */
  private call(command: 'ADD' | 'DEL', sb: SandboxNetns, address: ReplicaAddress): Promise<string> {
    const plugin = join(this.binDir, 'ptp');
    return new Promise((resolve, reject) => {
      const child = spawn(plugin, [], { env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...cniEnv(command, sb, this.binDir) }, stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), PLUGIN_TIMEOUT_MS);
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString('utf8')));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString('utf8')));
      child.on('error', (e) => {
        clearTimeout(timer);
        reject(new CniError(`cannot run the CNI plugin ${plugin}: ${e.message} (jaco agent --cni-bin-dir; Debian's package: containernetworking-plugins)`));
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve(stdout);
        else reject(signal === 'SIGKILL' ? new CniError(`ptp ${command}: no answer within ${PLUGIN_TIMEOUT_MS / 1000} s`) : cniFailure(command, stdout, stderr, code ?? signal ?? '?'));
      });
      child.stdin.on('error', () => undefined); // a plugin that exits without reading
      child.stdin.end(JSON.stringify(cniConfig(address)));
    });
  }
}
