// Issue 25's proof on separate hosts (`jaco up`: a namespace and a Docker engine per node): images
// travel through the cluster registry and are pinned at apply; a compose build is built, pushed
// and pulled by engines that had no copy; a tag pushed again changes nothing until the next apply;
// a registry that wants credentials refuses the nodes (image_unauthorized) until `jaco registry
// login`; two nodes bind one port on 0.0.0.0; a node cut off by its link loses its replicas to the
// others.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Deployment, NodeCopy, Registry, ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { buildImage, pushLocalImage } from '../../src/images/build.js';
import { resolveDigest } from '../../src/images/registry.js';
import { ensureClusterCa, issueCertificate } from '../../src/pki/ca.js';
import { DOCKER_CERTS_DIR } from '../../src/supervise/local-cluster.js';
import { freePort } from '../../src/supervise/etcd.js';
import { startRegistry, waitForRegistry, type RegistryServer } from '../../src/supervise/registry.js';
import { requireDocker } from '../support/cluster.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

/** A busybox httpd on 0.0.0.0:PORT serving the file the command writes. */
const httpd = (port: number, page: string) => ['sh', '-c', `trap "exit 0" TERM; mkdir -p /tmp/w; ${page} > /tmp/w/index.html; httpd -f -p 0.0.0.0:${port} -h /tmp/w & wait`];

async function get(url: string): Promise<string> {
  const r = await fetch(url, { signal: AbortSignal.timeout(3000) });
  return (await r.text()).trim();
}

describe('separate hosts: images travel through the cluster registry', () => {
  const c = new UpCluster({ nodes: 3 });
  let docker: Docker;
  let registry = '';
  const dirs: string[] = [];
  const localImages: string[] = [];

  beforeAll(async () => {
    docker = await requireDocker();
    await c.start();
    registry = c.state.registry!.host;
    const r = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1'], undefined, 60_000);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await c.stop();
    for (const i of localImages) await docker?.getImage(i).remove({ force: true }).catch(() => undefined);
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  const desiredOf = async (deployment: string) => (await c.store.list<ReplicaDesired>(keys.desiredOf())).items.map((i) => i.value).filter((d) => d.spec.deployment === deployment);
  const observedOf = async (deployment: string) => (await c.store.list<ReplicaObserved>(keys.observedOf())).items.map((i) => i.value.status).filter((o) => o.deployment === deployment);
  const spec = async (deployment: string, service: string) => (await c.store.get<Deployment>(keys.deployment(deployment)))!.value.spec.services[service]!;
  const allRunning = async (deployment: string, n: number) => {
    const obs = await observedOf(deployment);
    return obs.filter((o) => o.state === 'running').length === n && obs.length === n;
  };
  const nodeAddress = (node: string) => c.node(node).address;

  it("every node's own engine pulls the pinned digest; two nodes bind 0.0.0.0:5432 alike", async () => {
    await c.withLogs(async () => {
      for (const n of c.net.nodes) expect(await c.engine(n.name).listImages()).toEqual([]);
      await c.apply(`
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: bind}
spec:
  services:
    db:
      image: jaco-demo/busybox:1
      replicas: 2
      ports: [5432]
      command: ${JSON.stringify(httpd(5432, 'echo "$JACO_NODE"'))}
`);
      const pinned = (await spec('bind', 'db')).pinnedImage!;
      const digest = await resolveDigest(`${registry}/jaco-demo/busybox:1`, { caPem: ensureClusterCa(join(c.dataDir, 'pki')).certPem });
      expect(pinned).toBe(`${registry}/jaco-demo/busybox:1@${digest}`);
      await eventually(() => allRunning('bind', 2), { what: 'bind/db running on two nodes', timeoutMs: 60_000 });
      const nodes = (await desiredOf('bind')).map((d) => d.spec.node).sort();
      expect(new Set(nodes).size).toBe(2);
      for (const node of nodes) {
        // Its own port 5432 on its own address: two hosts, one port number.
        expect(await get(`http://${nodeAddress(node)}:5432/`)).toBe(node);
        const images = await c.engine(node).listImages();
        expect(images.flatMap((i) => i.RepoDigests ?? [])).toContain(`${registry}/jaco-demo/busybox@${digest}`);
      }
      // A node that runs nothing of it pulled nothing.
      const idle = c.net.nodes.map((n) => n.name).find((n) => !nodes.includes(n))!;
      expect(await c.engine(idle).listImages()).toEqual([]);
      // describe shows the tag and the digest.
      const d = await c.jaco(['describe', 'service', 'bind/db']);
      expect(d.stdout).toContain(`Digest:     ${digest}`);
      await c.jaco(['delete', 'deployment', 'bind']);
    });
  });

  it('replicas landing together on a node without the image share one pull', async () => {
    await c.withLogs(async () => {
      const node = 'node-3';
      // A node without the image: what an earlier test ran there is gone first.
      await eventually(async () => (await c.engine(node).listContainers({ all: true })).length === 0, { what: `no container left on ${node}`, timeoutMs: 60_000 });
      for (const i of await c.engine(node).listImages()) await c.engine(node).getImage(i.Id).remove({ force: true });
      const pulls: string[] = [];
      const events = (await c.engine(node).getEvents({ filters: { type: ['image'], event: ['pull'] } })) as NodeJS.ReadableStream & { destroy(): void };
      events.on('data', (d: Buffer) => pulls.push(...d.toString().split('\n').filter(Boolean)));
      // Every replica on the one node left schedulable.
      for (const n of ['node-1', 'node-2']) expect((await c.jaco(['node', 'cordon', n])).code).toBe(0);
      try {
        await c.apply(`
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: crowd}
spec:
  services:
    w:
      image: jaco-demo/busybox:1
      replicas: 6
      command: [sleep, "3600"]
      stopGracePeriod: 0s
`);
        await eventually(() => allRunning('crowd', 6), { what: 'crowd/w running', timeoutMs: 60_000 });
        expect(new Set((await desiredOf('crowd')).map((d) => d.spec.node))).toEqual(new Set([node]));
      } finally {
        events.destroy();
        for (const n of ['node-1', 'node-2']) await c.jaco(['node', 'uncordon', n]);
      }
      expect(pulls.length).toBe(1);
      await c.jaco(['delete', 'deployment', 'crowd']);
    });
  });

  it('a compose build: built with the operator engine, pushed, pinned, pulled by each node, and run', async () => {
    await c.withLogs(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'jaco-e2e-build-'));
      dirs.push(dir);
      mkdirSync(join(dir, 'app'));
      writeFileSync(join(dir, 'app', 'Dockerfile'), 'FROM jaco-demo/busybox:1\nARG MSG\nRUN mkdir -p /www && echo "$MSG" > /www/index.html\nCMD ["sh", "-c", "trap \\"exit 0\\" TERM; httpd -f -p 0.0.0.0:8080 -h /www & wait"]\n');
      // Host networking: the test reads each replica on its node's address from this machine, which
      // routes to no cluster-network replica's own address; this test is about the build.
      writeFileSync(join(dir, 'compose.yaml'), 'name: built\nservices:\n  app:\n    build:\n      context: ./app\n      args: {MSG: built-v1}\n    network_mode: host\n    deploy: {replicas: 2}\n');
      const r = await c.jaco(['apply', '-f', dir], undefined, 180_000);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/built-app:latest: built from .* and pushed as sha256:/);
      const s = await spec('built', 'app');
      expect(s.image).toBe(`${registry}/built-app:latest`);
      expect(s.pinnedImage).toMatch(new RegExp(`^${registry.replace(/\./g, '\\.')}/built-app:latest@sha256:[0-9a-f]{64}$`));
      localImages.push(s.image);
      await eventually(() => allRunning('built', 2), { what: 'built/app running', timeoutMs: 60_000 });
      for (const d of await desiredOf('built')) expect(await get(`http://${nodeAddress(d.spec.node)}:8080/`)).toBe('built-v1');
    });
  });

  it('a tag pushed again changes no running replica until the next apply, which rolls it', async () => {
    await c.withLogs(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'jaco-e2e-repush-'));
      dirs.push(dir);
      const tag = 'e2e/repushed:1';
      localImages.push(tag, `${registry}/${tag}`);
      const build = async (page: string) => {
        writeFileSync(join(dir, 'Dockerfile'), `FROM jaco-demo/busybox:1\nRUN mkdir -p /www && echo ${page} > /www/index.html\n`);
        await buildImage(docker, { context: dir }, tag);
        const pushed = await c.jaco(['registry', 'push', tag], undefined, 60_000);
        expect(pushed.code, pushed.stderr).toBe(0);
        return /@(sha256:[0-9a-f]{64})/.exec(pushed.stdout)![1]!;
      };
      const first = await build('first');
      const manifest = `
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: repushed}
spec:
  services:
    web:
      image: ${tag}
      replicas: 2
      command: [sh, -c, 'trap "exit 0" TERM; httpd -f -p 0.0.0.0:8181 -h /www & wait']
`;
      await c.apply(manifest);
      await eventually(() => allRunning('repushed', 2), { what: 'repushed/web running', timeoutMs: 60_000 });
      const before = (await observedOf('repushed')).map((o) => o.containerId).sort();
      const second = await build('second');
      expect(second).not.toBe(first);
      // Long enough for every controller and agent to have passed several times (fast timings).
      await new Promise((r) => setTimeout(r, 4000));
      expect((await spec('repushed', 'web')).pinnedImage).toBe(`${registry}/${tag}@${first}`);
      expect((await observedOf('repushed')).map((o) => o.containerId).sort()).toEqual(before);
      for (const d of await desiredOf('repushed')) expect(await get(`http://${nodeAddress(d.spec.node)}:8181/`)).toBe('first');
      // The next apply of the same file pins the new digest and rolls the service.
      const again = await c.apply(manifest);
      expect(again).toContain('configured');
      expect((await spec('repushed', 'web')).pinnedImage).toBe(`${registry}/${tag}@${second}`);
      await eventually(async () => (await observedOf('repushed')).filter((o) => o.state === 'running' && o.image?.endsWith(second)).length === 2, { what: 'both replicas on the new digest', timeoutMs: 60_000 });
      // The port is the command's own (jaco does not know it, so the update steps start-first on
      // the host's network): a new container runs a moment before its httpd finds the port taken,
      // and serves once the old one has left.
      const answers = async () => Promise.all((await desiredOf('repushed')).map((d) => get(`http://${nodeAddress(d.spec.node)}:8181/`).catch((e: Error) => e.message)));
      await eventually(async () => (await answers()).every((a) => a === 'second'), { what: 'both nodes serving the second build', timeoutMs: 30_000 });
    });
  });

  it('a registry that wants credentials: image_unauthorized on the nodes until jaco registry login, then the replicas run, the password a secret copied only where they run', async () => {
    let server: RegistryServer | undefined;
    const dir = mkdtempSync(join(tmpdir(), 'jaco-e2e-auth-'));
    dirs.push(dir);
    const port = await freePort();
    const host = `${c.net.hostAddress}:${port}`;
    const certsDir = join(DOCKER_CERTS_DIR, host);
    try {
      await c.withLogs(async () => {
        // A second registry on the machine's cluster address, TLS from the cluster CA (which every
        // engine here trusts for it through certs.d, as an operator would set it up), and a user.
        const pki = join(c.dataDir, 'pki');
        const ca = ensureClusterCa(pki);
        const cert = issueCertificate(ca, { commonName: 'private registry', ips: [c.net.hostAddress], usage: 'server' }, { dir, name: 'private' });
        mkdirSync(certsDir, { recursive: true });
        writeFileSync(join(certsDir, 'ca.crt'), ca.certPem);
        const user = { username: 'ci', password: 'e2e-secret-pw' };
        server = startRegistry({ dir: join(dir, 'registry'), address: c.net.hostAddress, port, tls: { certFile: cert.certFile, keyFile: cert.keyFile }, users: { [user.username]: user.password } });
        await waitForRegistry(server);
        const image = `${host}/private/app:1`;
        localImages.push(image);
        await pushLocalImage(docker, 'jaco-demo/busybox:1', image, user);
        // The operator is logged in (docker login left it in their config.json); the cluster is not.
        const dockerConfig = join(dir, 'docker-config');
        mkdirSync(dockerConfig);
        writeFileSync(join(dockerConfig, 'config.json'), JSON.stringify({ auths: { [host]: { auth: Buffer.from(`${user.username}:${user.password}`).toString('base64') } } }));
        const r = await c.jaco(
          ['apply', '-f', '-'],
          `apiVersion: jaco.dev/v1\nkind: Deployment\nmetadata: {name: private}\nspec:\n  services:\n    app:\n      image: ${image}\n      replicas: 2\n      command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']\n`,
          60_000,
          { DOCKER_CONFIG: dockerConfig },
        );
        expect(r.code, r.stderr).toBe(0);
        expect((await spec('private', 'app')).pinnedImage).toMatch(/@sha256:/);
        await eventually(async () => (await observedOf('private')).filter((o) => o.code === 'image_unauthorized').length === 2, { what: 'both replicas image_unauthorized', timeoutMs: 60_000 });
        const status = await c.jaco(['status', 'private']);
        expect(status.stdout).toContain('image_unauthorized');
        const login = await c.jaco(['registry', 'login', host, '--username', user.username, '--password-stdin', '--ca-file', ca.certFile], user.password);
        expect(login.code, login.stderr).toBe(0);
        await eventually(() => allRunning('private', 2), { what: 'private/app running after the login', timeoutMs: 90_000 });
        // The password is not shown anywhere an operator looks, nor stored in clear under any key:
        // it is a secret, copied (sealed to each node's own key) only to the nodes running the replicas.
        for (const args of [['registry', 'ls', '-o', 'yaml'], ['audit'], ['get', 'deployment', 'private', '-o', 'yaml'], ['secret', 'ls', '-o', 'yaml']]) expect((await c.jaco(args)).stdout).not.toContain(user.password);
        for (const kv of (await c.store.listRaw('')).kvs) expect(kv.value.toString('utf8'), kv.key.toString()).not.toContain(user.password);
        const secretName = (await c.store.get<Registry>(keys.registry(host)))!.value.spec.passwordSecret!;
        const holders = (await c.store.list<NodeCopy>(keys.copiesOf())).items.filter((i) => i.value.spec.name === secretName).map((i) => i.value.spec.node).sort();
        expect(holders).toEqual([...new Set((await desiredOf('private')).map((d) => d.spec.node))].sort());
      });
    } finally {
      await server?.stop();
      rmSync(certsDir, { recursive: true, force: true });
    }
  });

  it('a node cut off by its link goes NotReady; its stateless replicas run elsewhere; back, it runs no duplicate', async () => {
    await c.withLogs(async () => {
      await c.apply(`
apiVersion: jaco.dev/v1
kind: Deployment
metadata: {name: roam}
spec:
  services:
    w:
      image: jaco-demo/busybox:1
      replicas: 3
      command: [sh, -c, 'trap "exit 0" TERM; while :; do sleep 1; done']
`);
      await eventually(() => allRunning('roam', 3), { what: 'roam/w running', timeoutMs: 60_000 });
      const victim = (await desiredOf('roam'))[0]!.spec.node;
      const ids = (await desiredOf('roam')).filter((d) => d.spec.node === victim).map((d) => d.spec.replica);
      await c.cut(victim);
      try {
        await eventually(async () => !(await c.ready(victim)), { what: `${victim} NotReady`, timeoutMs: 30_000 });
        // Its replicas are placed on the other nodes (same ids), pulled there, and run.
        await eventually(
          async () => {
            const desired = await desiredOf('roam');
            const obs = await observedOf('roam');
            return ids.every((id) => desired.some((d) => d.spec.replica === id && d.spec.node !== victim && obs.some((o) => o.replica === id && o.node === d.spec.node && o.state === 'running')));
          },
          { what: `the replicas of ${victim} running elsewhere`, timeoutMs: 60_000 },
        );
      } finally {
        await c.restore(victim);
      }
      await eventually(() => c.ready(victim), { what: `${victim} Ready again`, timeoutMs: 30_000 });
      // Back on the network, its agent stops the copies that run elsewhere now.
      await eventually(async () => (await c.engine(victim).listContainers({ filters: { label: ['jaco.dev/deployment=roam'] } })).length === 0, { what: `no roam container left on ${victim}`, timeoutMs: 60_000 });
      expect((await desiredOf('roam')).length).toBe(3);
    });
  });
});
