// A node's own Docker engine in the local cluster of separate hosts: a dockerd started inside the
// node's network namespace with its own data root, exec root, socket and cgroup parent, so its
// host-network containers bind the node's address and port space and its image store is its own
// (images reach it from the registry, as on a real host). The supervisor of `jaco up` runs it;
// `purgeEngine` removes what a crashed one left: its containers' processes, mounts and files.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { dockerode } from '../dockerode.js';
import { inNetns } from './local-network.js';

const run = promisify(execFile);

export interface NodeEngineSpec {
  node: string;
  netns: string;
  /** Images, containers, volumes: kept across `jaco down` (the node's image cache), gone with --purge. */
  dataRoot: string;
  /** dockerd's and its containerd's run state (under /run: short paths, as unix sockets need). */
  execRoot: string;
  socket: string;
  pidFile: string;
  /** Every container of this engine lives under this cgroup, so a crash leaves nothing unfindable. */
  cgroupParent: string;
}

/** The engine files of node `node` of network `tag`: data under the cluster's data dir, run state under /run/jaco. */
export function engineSpec(tag: string, node: string, netns: string, dataDir: string): NodeEngineSpec {
  const runDir = join('/run/jaco', tag, node);
  return {
    node,
    netns,
    dataRoot: join(dataDir, 'nodes', node, 'docker'),
    execRoot: join(runDir, 'exec'),
    socket: join(runDir, 'docker.sock'),
    pidFile: join(runDir, 'docker.pid'),
    cgroupParent: `/${tag}-${node}`,
  };
}

/**
 * dockerd's command line: no bridge, no iptables, no forwarding or masquerading (the network
 * rule), and registries' CAs from /etc/docker/certs.d like any engine.
 */
export function engineCommand(s: NodeEngineSpec): { cmd: string; args: string[] } {
  return inNetns(s.netns, 'dockerd', [
    '--bridge=none',
    '--iptables=false',
    '--ip-forward=false',
    '--ip-masq=false',
    '--userland-proxy=false',
    '--data-root', s.dataRoot,
    '--exec-root', s.execRoot,
    '--pidfile', s.pidFile,
    '--host', `unix://${s.socket}`,
    '--cgroup-parent', s.cgroupParent,
    '--log-level', 'warn',
  ]);
}

export const engineUrl = (s: NodeEngineSpec) => `unix://${s.socket}`;

/** Waits until the engine answers on its socket (or its process exits). */
export async function waitForEngine(s: NodeEngineSpec, timeoutMs: number, exited?: () => boolean): Promise<void> {
  const docker = new (dockerode())({ socketPath: s.socket });
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      await docker.ping();
      return;
    } catch (e) {
      last = (e as Error).message;
    }
    if (exited?.()) throw new Error(`the Docker engine of ${s.node} exited while starting (${last})`);
    if (Date.now() > deadline) throw new Error(`the Docker engine of ${s.node} did not answer on ${s.socket} within ${timeoutMs / 1000} s (${last})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export function enginePid(s: NodeEngineSpec): number | undefined {
  try {
    const pid = Number(readFileSync(s.pidFile, 'utf8').trim());
    if (!pid) return undefined;
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

/** Removes every container of this engine labelled `label` (the cluster's), when the engine answers. */
export async function removeEngineContainers(s: NodeEngineSpec, label: string): Promise<number> {
  if (!existsSync(s.socket)) return 0;
  const docker = new (dockerode())({ socketPath: s.socket });
  try {
    const list = await docker.listContainers({ all: true, filters: { label: [label] } });
    await Promise.all(list.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    return list.length;
  } catch {
    return 0;
  }
}

/** Stops a running engine (SIGTERM, then SIGKILL after `graceMs`) and waits for it to go. */
export async function stopEngine(s: NodeEngineSpec, graceMs = 15_000): Promise<void> {
  const pid = enginePid(s);
  if (!pid) return;
  process.kill(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone meanwhile
  }
}

/**
 * What a stopped (or crashed) engine leaves: container processes still in its cgroup (shims keep
 * containers alive when dockerd dies), mounts under its roots (overlay layers, the netns handle
 * dockerd keeps in its exec root), the run directory; with `data`, its data root too.
 */
export async function purgeEngine(s: NodeEngineSpec, opts: { data: boolean }): Promise<void> {
  await killCgroup(s.cgroupParent);
  await unmountUnder([s.execRoot, ...(opts.data ? [s.dataRoot] : [])]);
  rmSync(join(s.execRoot, '..'), { recursive: true, force: true });
  if (opts.data) rmSync(join(s.dataRoot, '..'), { recursive: true, force: true });
}

const CGROUP_ROOT = '/sys/fs/cgroup';

/** Kills every process under cgroup `parent` (v1: in each controller's hierarchy; v2: the unified one) and removes the groups. */
export async function killCgroup(parent: string, root = CGROUP_ROOT): Promise<void> {
  const hierarchies = existsSync(join(root, 'cgroup.controllers')) ? [root] : subdirectories(root).map((c) => join(root, c));
  for (const h of hierarchies) {
    const dir = join(h, parent);
    if (!existsSync(dir)) continue;
    for (const d of groupsBottomUp(dir)) {
      for (const pid of readPids(join(d, 'cgroup.procs')))
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
    }
  }
  // A killed process leaves its group a moment later; removing waits for that.
  for (const h of hierarchies) {
    const dir = join(h, parent);
    if (!existsSync(dir)) continue;
    for (let attempt = 0; attempt < 50; attempt++) {
      let left = 0;
      for (const d of groupsBottomUp(dir))
        try {
          rmdirSync(d);
        } catch {
          left++;
        }
      if (!left) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

/** The names of a directory's subdirectories (none when it cannot be read). */
export function subdirectories(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
}

/** A cgroup directory and its descendants, deepest first. */
function groupsBottomUp(dir: string): string[] {
  return [...subdirectories(dir).flatMap((c) => groupsBottomUp(join(dir, c))), dir];
}

function readPids(file: string): number[] {
  try {
    return readFileSync(file, 'utf8').split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Mount points at or below any of `dirs`, deepest first, from /proc/self/mountinfo. */
export function mountsUnder(mountinfo: string, dirs: string[]): string[] {
  const points = mountinfo
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => !!p)
    // mountinfo escapes spaces and such as octal (\040)
    .map((p) => p.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((p) => dirs.some((d) => p === d || p.startsWith(d.endsWith('/') ? d : `${d}/`)));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

async function unmountUnder(dirs: string[]): Promise<void> {
  let info = '';
  try {
    info = readFileSync('/proc/self/mountinfo', 'utf8');
  } catch {
    return;
  }
  // Lazy: a mount still busy for a moment goes as soon as it is free, and the directory can go now.
  for (const p of mountsUnder(info, dirs)) await run('umount', ['-l', p]).catch(() => undefined);
}
