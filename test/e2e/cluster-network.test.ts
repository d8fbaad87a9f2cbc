// Issue 26, the agent's slice, on separate hosts (`jaco up`: a namespace and an engine per node):
// a cluster-network replica runs in a network namespace of its own, held by its sandbox and given
// the addresses of its desired record by the CNI ptp plugin before its command runs. Desired
// records are written directly with addresses from a test range (the scheduler's IPAM fills them
// later), so the controllers are paused (SIGSTOP) while these run: nothing else writes desired/.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { ReplicaAddress, ServiceSpec } from '../../src/api/types.js';
import { readUpState } from '../../src/supervise/local-cluster.js';
import { commitActs } from '../../src/store/writer.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';
import { textInNetns } from '../support/netns-fetch.js';
import { deleteDesired, desired, observedStatus, putDesired, waitObserved } from './agent-fixtures.js';
import { execIn } from '../support/docker-exec.js';
import { API_VERSION, type ServiceAddress } from '../../src/api/types.js';

const run = promisify(execFile);
const NODE = 'node-1';
/** Addresses of a test range: 10.208.1.0/24 and a ULA /64, gateways .1 and ::1. */
const addr = (host: number): ReplicaAddress => ({ ipv4: `10.208.1.${host}/24`, ipv6: `fd4a:17c2:9e01:1::${host.toString(16)}/64` });
const bare = (cidr: string) => cidr.slice(0, cidr.indexOf('/'));

describe('the cluster network: every replica its own network namespace', () => {
  const c = new UpCluster({ nodes: 1 });
  let image = '';
  let engine: Docker;
  let netns = '';
  let controllersPid = 0;

  beforeAll(async () => {
    await c.start();
    const r = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1', 'jaco/pause:1'], undefined, 90_000);
    expect(r.code, r.stderr).toBe(0);
    image = `${c.state.registry!.host}/jaco-demo/busybox:1`;
    engine = c.engine(NODE);
    netns = c.node(NODE).netns;
    // No scheduler: these desired records belong to no deployment, and it would remove them.
    controllersPid = c.state.children.find((x) => x.name === 'controllers')!.pid!;
    process.kill(controllersPid, 'SIGSTOP');
  });
  afterAll(async () => {
    if (controllersPid) process.kill(controllersPid, 'SIGCONT');
    await c.stop();
  });

  /** A command in the node's network namespace (where its agent runs). */
  const inNode = async (...cmd: string[]) => (await run('nsenter', [`--net=/run/netns/${netns}`, '--', ...cmd], { encoding: 'utf8', timeout: 10_000 })).stdout;
  /** GET http://host:8080/path from the node's namespace. */
  const get = (host: string, path = '/') => textInNetns(netns, `http://${host.includes(':') ? `[${host}]` : host}:8080${path}`);
  /** Waits until `host` answers on 8080 with `want` (a server starts a moment after its container). */
  const answers = (host: string, want: string) => eventually(async () => (await get(host)).trim() === want, { what: `${host}:8080 answering "${want}"`, timeoutMs: 10_000 });
  const routes = async () => `${await inNode('ip', '-4', 'route')}\n${await inNode('ip', '-6', 'route')}`;
  /** The node's ends of replica veths (ptp names them veth…; the node's own link to the router is its eth0). */
  const veths = async () => (await inNode('ip', '-br', 'link', 'show', 'type', 'veth')).trim().split('\n').map((l) => l.split(/[\s@]/)[0]!).filter((n) => n.startsWith('veth'));
  const containersOf = async (replica: string) => engine.listContainers({ all: true, filters: { label: [`${LABELS.replica}=${replica}`] } });
  const sandboxOf = async (replica: string) => (await containersOf(replica)).find((x) => x.Labels[LABELS.role] === 'sandbox');
  const agentLog = () => readFileSync(join(c.dataDir, 'logs', `${NODE}.log`), 'utf8');
  const running = (replica: string) => waitObserved(c.store, NODE, replica, (s) => s.state === 'running', 'running');

  /**
   * busybox httpd on 8080 serving what the command's very first lines recorded: the namespace's
   * addresses (fib_trie, if_inet6) as the command began, and who it is.
   */
  const server = (listen: string): ServiceSpec => ({
    image: '',
    network: 'cluster',
    stopGracePeriod: '1s',
    command: [
      'sh',
      '-c',
      `cat /proc/net/fib_trie > /tmp/fib; cat /proc/net/if_inet6 > /tmp/if6; mkdir -p /tmp/w; mv /tmp/fib /tmp/if6 /tmp/w/; echo "$JACO_REPLICA $JACO_REPLICA_ADDRESS $JACO_REPLICA_ADDRESS6 $PORT" > /tmp/w/index.html; trap "exit 0" TERM; httpd -f -p ${listen} -h /tmp/w & wait`,
    ],
    ports: [{ name: 'http', containerPort: 8080 }],
  });
  const put = (replica: string, address: ReplicaAddress, spec: Partial<ServiceSpec> = {}, revision = 1) =>
    putDesired(c.store, desired(NODE, replica, { ...server('8080'), image, ...spec }, { address, revision, service: 'net' }));

  it('a replica answers at its own IPv4 and IPv6 address from its node, two on one node bind 0.0.0.0:8080 alike, and the addresses were there before the command ran', () =>
    c.withLogs(async () => {
      const a = addr(5);
      const b = addr(6);
      await put('net-a', a);
      // The second one binds the IPv4 wildcard literally: on the host network it could not, beside the first.
      await put('net-b', b, { command: server('0.0.0.0:8080').command });
      const sa = await running('net-a');
      const sb = await running('net-b');
      expect(sa.address).toEqual(a);
      expect(sb.address).toEqual(b);
      await answers(bare(a.ipv4), 'net-a 10.208.1.5 fd4a:17c2:9e01:1::5 8080');
      await answers(bare(a.ipv6), 'net-a 10.208.1.5 fd4a:17c2:9e01:1::5 8080');
      await answers(bare(b.ipv4), 'net-b 10.208.1.6 fd4a:17c2:9e01:1::6 8080');
      // Its very first line saw both addresses on its eth0: it never ran without them.
      const fib = await get(bare(a.ipv4), '/fib');
      expect(fib).toMatch(/\|-- 10\.208\.1\.5\n\s+\/32 host LOCAL/);
      expect(await get(bare(a.ipv4), '/if6')).toMatch(/^fd4a17c29e0100010000000000000005 \S+ 40 00 80\s+eth0$/m);
      // Each in a namespace of its own, held by a sandbox, its container joined to it, no host ports.
      for (const [replica, s] of [['net-a', sa], ['net-b', sb]] as const) {
        const sandbox = (await sandboxOf(replica))!;
        expect(sandbox.Labels).toMatchObject({ [LABELS.ipv4]: (replica === 'net-a' ? a : b).ipv4, [LABELS.node]: NODE, [LABELS.deployment]: 'demo' });
        const app = await engine.getContainer(s.containerId!).inspect();
        expect(app.HostConfig.NetworkMode).toBe(`container:${sandbox.Id}`);
        expect(app.Config.ExposedPorts ?? {}).toEqual({});
        expect((await engine.getContainer(sandbox.Id).inspect()).HostConfig.NetworkMode).toBe('none');
      }
      // The node's own port 8080 is free: nothing of theirs is in its namespace.
      await expect(get(c.node(NODE).address)).rejects.toThrow(/ECONNREFUSED/);
      // Routed veths, one per replica, and host routes to each address.
      const r = await routes();
      expect(r).toMatch(/10\.208\.1\.5 dev veth\S+ scope host/);
      expect(r).toMatch(/fd4a:17c2:9e01:1::6 dev veth\S+/);
    }));

  it("finds services by name: the node's resolver at its replicas' gateways answers SERVICE.DEPLOYMENT, and SERVICE within the deployment (the sandbox's search domain)", () =>
    c.withLogs(async () => {
      const a = addr(5);
      await put('net-a', a);
      const s = await running('net-a');
      const app = engine.getContainer(s.containerId!);
      // The sandbox's resolv.conf, shared by the container in its namespace; its host name too.
      const conf = (await execIn(app, ['cat', '/etc/resolv.conf'])).stdout;
      expect(conf).toMatch(/^search demo$/m);
      expect(conf).toMatch(/^nameserver 10\.208\.1\.1$/m);
      expect(conf).toMatch(/^nameserver fd4a:17c2:9e01:1::1$/m);
      expect((await execIn(app, ['hostname'])).stdout.trim()).toBe('net-a');
      // A service address, as the scheduler would write it (the controllers are paused).
      const web: ServiceAddress = { apiVersion: API_VERSION, kind: 'ServiceAddress', metadata: { name: 'demo-web' }, spec: { deployment: 'demo', service: 'web', number: 9, ipv4: '10.207.0.9', ipv6: 'fd4a:17c2:9e01:ffff::9', since: new Date().toISOString() } };
      await commitActs(c.store, [{ ops: [{ op: 'put', key: keys.serviceAddress('demo', 'web'), value: web }] }]);
      try {
        // From the replica's own namespace, by the C library's resolver (busybox ping resolves, then
        // sends nothing that anyone answers): the short name through the search domain, and the full one.
        // ping takes the first address it is given (here the AAAA).
        for (const name of ['web', 'web.demo']) {
          const want = new RegExp(`^PING ${name.replace('.', '\\.')} \\((10\\.207\\.0\\.9|fd4a:17c2:9e01:ffff::9)\\)`, 'm');
          await eventually(async () => want.test((await execIn(app, ['busybox', 'ping', '-c', '1', '-W', '1', name])).stdout), { what: `${name} resolving to the service's address inside net-a`, timeoutMs: 15_000 });
        }
        // Both families, asked of the resolver directly.
        const look = await execIn(app, ['busybox', 'nslookup', 'web.demo', '10.208.1.1']);
        expect(look.stdout).toContain('10.207.0.9');
        expect(look.stdout).toContain('fd4a:17c2:9e01:ffff::9');
        // A name under the deployment that is no service: NXDOMAIN at once, never forwarded.
        const miss = await execIn(app, ['busybox', 'nslookup', 'nothing.demo', '10.208.1.1']);
        expect(miss.stdout + miss.stderr).toMatch(/NXDOMAIN|can't find/i);
      } finally {
        await commitActs(c.store, [{ ops: [{ op: 'delete', key: keys.serviceAddress('demo', 'web') }] }]);
      }
    }));

  it('an http health check is run by the agent at the replica’s own address (no shell used): healthy, then unhealthy with what it saw', () =>
    c.withLogs(async () => {
      const a = addr(9);
      await put('net-h', a, { healthcheck: { http: { path: '/index.html', port: 'http' }, interval: '1s', timeout: '1s', retries: 2 } });
      const s = await waitObserved(c.store, NODE, 'net-h', (x) => x.state === 'running' && x.health === 'healthy', 'running and healthy');
      const app = engine.getContainer(s.containerId!);
      expect((await app.inspect()).Config.Healthcheck?.Test).toEqual(['NONE']);
      expect((await execIn(app, ['rm', '/tmp/w/index.html'])).code).toBe(0);
      const sick = await waitObserved(c.store, NODE, 'net-h', (x) => x.code === 'unhealthy', 'unhealthy');
      expect(sick.state).toBe('degraded');
      expect(sick.details).toBe('HTTP 404 from http://10.208.1.9:8080/index.html, expected 200–399');
      await deleteDesired(c.store, NODE, 'net-h');
      await eventually(async () => (await containersOf('net-h')).length === 0, { what: 'net-h gone', timeoutMs: 20_000 });
    }));

  it('a new revision replaces the container stop-first in the same sandbox: the same address answers the new one', () =>
    c.withLogs(async () => {
      const before = (await sandboxOf('net-a'))!.Id;
      const old = (await observedStatus(c.store, NODE, 'net-a'))!.containerId;
      await put('net-a', addr(5), { env: { V: '2' } }, 2);
      const s = await waitObserved(c.store, NODE, 'net-a', (x) => x.state === 'running' && x.revision === 2, 'running revision 2');
      expect(s.containerId).not.toBe(old);
      expect((await sandboxOf('net-a'))!.Id).toBe(before);
      await answers('10.208.1.5', 'net-a 10.208.1.5 fd4a:17c2:9e01:1::5 8080');
      expect((await containersOf('net-a')).length).toBe(2);
    }));

  it('an agent killed and restarted adopts sandboxes and containers: nothing restarted, nothing plumbed again, the addresses still answer', () =>
    c.withLogs(async () => {
      const ids = async () => (await engine.listContainers({ all: true })).map((x) => `${x.Id}:${x.State}`).sort();
      const before = await ids();
      const started = (await engine.getContainer((await observedStatus(c.store, NODE, 'net-b'))!.containerId!).inspect()).State.StartedAt;
      const links = await veths();
      const plumbed = agentLog().split('sandbox plumbed').length;
      const pid = c.state.children.find((x) => x.name === NODE)!.pid!;
      process.kill(pid, 'SIGKILL');
      // The supervisor starts it again; the new agent is up once it answers its health check.
      await eventually(() => (readUpState(c.dataDir)?.children.find((x) => x.name === NODE)?.pid ?? pid) !== pid, { what: 'a new agent process', timeoutMs: 30_000 });
      await eventually(async () => (await fetch(`http://${c.node(NODE).address}:9465/healthz`).catch(() => undefined))?.status === 200, { what: 'the new agent healthy', timeoutMs: 30_000 });
      // Several passes and a resync (fast timings: 2 s).
      await new Promise((r) => setTimeout(r, 4000));
      expect(await ids()).toEqual(before);
      expect((await engine.getContainer((await observedStatus(c.store, NODE, 'net-b'))!.containerId!).inspect()).State.StartedAt).toBe(started);
      expect(await veths()).toEqual(links);
      expect(agentLog().split('sandbox plumbed').length).toBe(plumbed);
      const metrics = await (await fetch(`http://${c.node(NODE).address}:9465/metrics`)).text();
      expect(metrics).not.toMatch(/jaco_agent_cni_calls_total\{command="ADD"/);
      expect((await get('10.208.1.6')).trim()).toBe('net-b 10.208.1.6 fd4a:17c2:9e01:1::6 8080');
      expect((await get('fd4a:17c2:9e01:1::5')).trim()).toBe('net-a 10.208.1.5 fd4a:17c2:9e01:1::5 8080');
    }));

  it('a removed replica leaves no container, no sandbox, no veth and no route on its node', () =>
    c.withLogs(async () => {
      const links = await veths();
      expect(links.length).toBe(2);
      await deleteDesired(c.store, NODE, 'net-b');
      await eventually(async () => !(await observedStatus(c.store, NODE, 'net-b')), { what: 'the observed key of net-b gone', timeoutMs: 30_000 });
      // The observed key goes last: by then the namespace and its plumbing are gone too.
      expect(await containersOf('net-b')).toEqual([]);
      expect((await veths()).length).toBe(1);
      const r = await routes();
      expect(r).not.toContain('10.208.1.6');
      expect(r).not.toContain('fd4a:17c2:9e01:1::6');
      expect(r).toContain('10.208.1.5');
      await expect(get('10.208.1.6')).rejects.toThrow(/EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|timeout|aborted/i);
    }));

  it('a CNI failure shows network_failed with the plugin’s error, starts no container, leaves nothing behind; fixed, the replica runs', () =>
    c.withLogs(async () => {
      const links = await veths();
      // A /32 leaves no host for a gateway: the plugin cannot route through it.
      await put('net-c', { ipv4: '10.208.1.9/32', ipv6: 'fd4a:17c2:9e01:1::9/64' });
      const s = await waitObserved(c.store, NODE, 'net-c', (x) => x.state === 'pending' && x.code === 'network_failed', 'pending/network_failed');
      expect(s.details).toMatch(/^ptp ADD: .*network is unreachable/);
      expect(agentLog()).toMatch(/could not give the sandbox its addresses; will retry/);
      // Retried with back-off (the failure counted more than once), the app's container never created.
      await eventually(() => agentLog().split('could not give the sandbox its addresses').length > 2, { what: 'a second attempt', timeoutMs: 20_000 });
      expect((await containersOf('net-c')).map((x) => x.Labels[LABELS.role])).toEqual(['sandbox']);
      // Each failed ADD is undone: no veth of its own, no route to it (between two attempts).
      await eventually(async () => JSON.stringify(await veths()) === JSON.stringify(links) && !(await routes()).includes('10.208.1.9'), { what: 'nothing left of the failed attempts', timeoutMs: 10_000, intervalMs: 50 });
      // The record fixed (another address: another sandbox), it runs.
      await put('net-c', addr(9));
      const ok = await running('net-c');
      expect(ok.address).toEqual(addr(9));
      await answers('10.208.1.9', 'net-c 10.208.1.9 fd4a:17c2:9e01:1::9 8080');
      await eventually(async () => (await containersOf('net-c')).length === 2, { what: 'the failed sandbox torn down', timeoutMs: 20_000 });
      expect(await observedStatus(c.store, NODE, 'net-c')).toMatchObject({ state: 'running' });
    }));

  it('a host-network replica beside them keeps the node’s namespace, as before', () =>
    c.withLogs(async () => {
      await putDesired(c.store, desired(NODE, 'host-a', { image, command: ['sh', '-c', 'mkdir -p /w; echo "host $JACO_NODE_ADDRESS" > /w/index.html; trap "exit 0" TERM; httpd -f -p 0.0.0.0:8080 -h /w & wait'], ports: [8080], stopGracePeriod: '1s' }, { service: 'host' }));
      const s = await running('host-a');
      expect(s.address).toBeUndefined();
      const i = await engine.getContainer(s.containerId!).inspect();
      expect(i.HostConfig.NetworkMode).toBe('host');
      await answers(c.node(NODE).address, `host ${c.node(NODE).address}`);
      // The cluster replicas' 8080 is theirs: both still answer.
      expect((await get('10.208.1.5')).trim()).toContain('net-a');
      expect((await containersOf('host-a')).map((x) => x.Labels[LABELS.role])).toEqual([undefined]);
      await commitActs(c.store, [{ ops: [{ op: 'delete', key: keys.desired(NODE, 'host-a') }] }]);
    }));
});
