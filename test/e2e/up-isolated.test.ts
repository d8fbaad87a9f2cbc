// `jaco up` makes separate hosts on one machine: each node its own network namespace, address,
// port space and Docker engine, joined by routed links (real-hosts.test.ts cuts one); `jaco down --purge`
// removes everything it made, even after a crash.
import { execFileSync } from 'node:child_process';
import Docker from 'dockerode';
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Node } from '../../src/api/types.js';
import { AgentClient, agentTarget } from '../../src/cli/agent-client.js';
import { readTlsDir } from '../../src/pki/identity.js';
import { runningAllocator } from '../../src/supervise/allocator.js';
import { enginesOf, operatorTlsDir } from '../../src/supervise/local-cluster.js';
import { namespacesWith } from '../../src/supervise/local-network.js';
import { jaco } from '../support/cli.js';
import { UpCluster } from '../support/up-cluster.js';

const inNs = (netns: string, ...cmd: string[]) => execFileSync('nsenter', [`--net=/run/netns/${netns}`, '--', ...cmd], { encoding: 'utf8', stdio: 'pipe' });

describe('jaco up: separate hosts', () => {
  const c = new UpCluster({ nodes: 3 });
  beforeAll(async () => {
    await c.start();
  });
  afterAll(async () => {
    await c.stop();
  });

  it('gives every node its own namespace, address and Docker engine, with its agent inside', async () => {
    const addresses = c.net.nodes.map((n) => n.address);
    expect(new Set(addresses).size).toBe(3);
    const roots = new Set<string>();
    for (const n of c.net.nodes) {
      // Its one address is on its own eth0, not in the machine's namespace.
      expect(inNs(n.netns, 'ip', '-4', '-br', 'addr', 'show', 'eth0')).toContain(`${n.address}/32`);
      const info = await c.engine(n.name).info();
      roots.add(info.DockerRootDir as string);
      expect(info.DockerRootDir).toBe(`${c.dataDir}/nodes/${n.name}/docker`);
      // The agent registered the node at that address and answers its metrics there.
      const node = JSON.parse((await c.jaco(['get', 'node', n.name, '-o', 'json'])).stdout) as { status: { address: string } };
      expect(node.status.address).toBe(n.address);
      const res = await fetch(`http://${n.address}:9465/healthz`);
      expect(res.status).toBe(200);
    }
    expect(roots.size).toBe(3);
    const out = execFileSync('ip', ['-4', '-br', 'addr'], { encoding: 'utf8' });
    for (const a of addresses) expect(out).not.toContain(`${a}/`);
  });

  it('runs its controllers on jemalloc (Debian\'s libjemalloc2, which ensure-system installs), the agents on glibc', () => {
    const pidOf = (name: string) => c.state.children.find((ch) => ch.name === name)!.pid!;
    expect(runningAllocator(`/proc/${pidOf('controllers')}/maps`)).toBe('jemalloc');
    expect(runningAllocator(`/proc/${pidOf('node-1')}/maps`)).toBe('glibc');
  });

  it('routes between nodes over their links, and nowhere else', () => {
    const [a, b] = c.net.nodes;
    // node-1 reaches node-2's agent over the router …
    expect(inNs(a!.netns, 'ip', 'route', 'get', b!.address)).toContain(`via ${c.net.gateway} dev eth0`);
    // … and has no route off the cluster network (no default route: nothing can leave the machine).
    expect(() => inNs(a!.netns, 'ip', 'route', 'get', '192.0.2.1')).toThrow(/unreachable/);
    expect(inNs(a!.netns, 'ip', 'route')).not.toMatch(/default/);
  });

  it("serves logs and exec on every node's address with the certificates jaco up issued (docs/operate.md)", async () => {
    const client = new AgentClient(readTlsDir(operatorTlsDir(c.dataDir), 'operator'));
    try {
      for (const n of c.net.nodes) {
        const node = (await c.store.get<Node>(keys.node(n.name)))!.value;
        expect(node.status?.api?.endpoint).toBe(`${n.address}:9467`);
        // Reached from this machine, mutual TLS passed, the agent answering for its own node.
        await expect(client.call(agentTarget(node, n.name), 'GET', '/v1/replicas/none-0/logs')).rejects.toThrow(`node ${n.name}: replica none-0 has no container on node ${n.name}`);
      }
    } finally {
      client.close();
    }
  });
});

describe('jaco down --purge after a crash', () => {
  it('removes every namespace, engine, container process, mount, cgroup and link the cluster made; twice is harmless', async () => {
    const c = new UpCluster({ nodes: 2 });
    await c.start();
    const tag = c.net.tag;
    const engines = enginesOf(c.dataDir, c.state);
    const enginePids = engines.map((e) => Number(readFileSync(e.pidFile, 'utf8')));
    // Every process in the nodes' namespaces: the children, and what they started (each ingress's
    // HAProxy), which no pid file names.
    const inNamespaces = (await namespacesWith(`${tag}-`)).flatMap((ns) => execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split('\n').filter(Boolean).map(Number));
    const comm = (pid: number) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      } catch {
        return ''; // a short-lived process (a check's exec) gone meanwhile
      }
    };
    expect(inNamespaces.map(comm).filter((n) => n === 'haproxy').length, "each node's HAProxy (master and worker)").toBeGreaterThanOrEqual(2);
    // The supervisor and one engine die without cleaning anything up.
    process.kill(c.state.supervisorPid, 'SIGKILL');
    process.kill(enginePids[0]!, 'SIGKILL');
    expect((await namespacesWith(`${tag}-`)).length).toBe(3);

    // A name under the cluster registry's host on this machine's engine, as `jaco registry push`
    // leaves one: purged with the cluster, while the image's other name stays.
    const host = new Docker();
    const registryName = `${c.state.registry!.host}/probe:1`;
    await host.getImage('jaco-demo/busybox:1').tag({ repo: `${c.state.registry!.host}/probe`, tag: '1' });
    expect((await host.listImages()).some((i) => i.RepoTags?.includes(registryName))).toBe(true);

    const r = await jaco(['down', '--purge', '--data-dir', c.dataDir], { timeoutMs: 120_000 });
    expect(r.code).toBe(0);
    const names = (await host.listImages()).flatMap((i) => [...(i.RepoTags ?? []), ...(i.RepoDigests ?? [])]);
    expect(names.filter((n) => n.startsWith(`${c.state.registry!.host}/`))).toEqual([]);
    expect(names).toContain('jaco-demo/busybox:1');
    expect(await namespacesWith(`${tag}-`)).toEqual([]);
    expect(existsSync(`/sys/class/net/${tag}`)).toBe(false);
    expect(existsSync(`/run/jaco/${tag}`)).toBe(false);
    expect(existsSync(c.dataDir)).toBe(false);
    // Gone, or dead and not yet reaped by init (a zombie).
    const running = (pid: number) => {
      try {
        return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
      } catch {
        return false;
      }
    };
    for (const pid of [...enginePids, ...c.state.children.map((ch) => ch.pid!), ...inNamespaces]) expect(running(pid), `process ${pid} (${comm(pid)}) left running`).toBe(false);
    expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(c.dataDir);
    for (const e of engines) expect(existsSync(`/sys/fs/cgroup/memory${e.cgroupParent}`)).toBe(false);

    const again = await jaco(['down', '--purge', '--data-dir', c.dataDir]);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('was not up');
  });
});
