// Secrets in the local cluster `jaco up` starts (separate hosts: each node its own namespace and
// engine, images from the cluster registry): it makes the cluster key file once and gives it to its
// controllers, gives each agent a state directory, delivers a secret into a container of a node's
// own engine, and `jaco down` unmounts the secrets' tmpfs it leaves; `jaco up` again starts the
// replica afresh (no restart counted for the containers `jaco down` removed).
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { ClusterKey, Node } from '../../src/api/types.js';
import { agentStateDir, clusterKeyFile } from '../../src/supervise/local-cluster.js';
import { readClusterKeys } from '../../src/secrets/keyfile.js';
import { execIn } from '../support/docker-exec.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const VALUE = `up-${Math.random().toString(36).slice(2)}`;

describe('jaco up and secrets', () => {
  const c = new UpCluster({ nodes: 2 });
  beforeAll(async () => {
    await c.start();
    const pushed = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1'], undefined, 60_000);
    expect(pushed.code, pushed.stderr).toBe(0);
  });
  afterAll(async () => {
    await c.stop();
  });

  it('makes the cluster key file (mode 600) its controllers publish, and a key per node in its state directory', () =>
    c.withLogs(async () => {
      const file = clusterKeyFile(c.dataDir);
      expect(statSync(file).mode & 0o777).toBe(0o600);
      await eventually(async () => (await c.store.get<ClusterKey>(keys.clusterKey()))?.value.spec.id === readClusterKeys(file).primary.id, { what: 'the cluster key published' });
      for (const n of ['node-1', 'node-2']) {
        const node = (await c.store.get<Node>(keys.node(n)))!.value;
        expect(readFileSync(join(agentStateDir(c.dataDir, n), 'node.key'), 'utf8')).toContain(node.status!.secretsKey!.publicKey);
      }
    }));

  it('delivers a secret into a container on a tmpfs; jaco down leaves no mount behind', () =>
    c.withLogs(async () => {
      const created = await c.jaco(['secret', 'create', 'token', '-'], VALUE);
      expect(created.code, created.stderr).toBe(0);
      await c.apply(
        JSON.stringify({
          apiVersion: 'jaco.dev/v1',
          kind: 'Deployment',
          metadata: { name: 'sec' },
          spec: { services: { app: { image: 'jaco-demo/busybox:1', command: ['sleep', '3600'], secrets: [{ source: 'token', mode: 0o400 }], placement: { mode: 'hosts', hosts: ['node-2'] } } } },
        }),
      );
      const docker = c.engine('node-2');
      const id = await eventually(
        async () => (await docker.listContainers({ filters: { label: [`${LABELS.cluster}=${c.state.clusterUid}`, `${LABELS.deployment}=sec`] } }))[0]?.Id,
        { what: 'the container running', timeoutMs: 60_000 },
      );
      const ct = docker.getContainer(id);
      expect((await execIn(ct, ['cat', '/run/secrets/token'])).stdout).toBe(VALUE);
      expect((await execIn(ct, ['sh', '-c', 'grep " /run/secrets/token " /proc/mounts; stat -c %a /run/secrets/token'])).stdout).toMatch(/^tmpfs \/run\/secrets\/token tmpfs ro,.*\n400\n$/);
      const files = join(agentStateDir(c.dataDir, 'node-2'), 'files');
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).toContain(files);
      const r = await c.jaco(['down', '--data-dir', c.dataDir], undefined, 120_000);
      expect(r.code, r.stderr).toBe(0);
      expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(files);
      // The key file outlives jaco down (the secrets in etcd need it); --purge removes it with the rest.
      expect(existsSync(clusterKeyFile(c.dataDir))).toBe(true);

      // jaco up again: jaco down removed the containers and the agents' reports of them, so the
      // replica starts afresh — not "removed outside jaco", no restart counted (a node would
      // read as failing), and its secret is delivered again.
      await c.up();
      const again = await eventually(
        async () => (await c.engine('node-2').listContainers({ filters: { label: [`${LABELS.cluster}=${c.state.clusterUid}`, `${LABELS.deployment}=sec`] } }))[0]?.Id,
        { what: 'the container running again after jaco up', timeoutMs: 60_000 },
      );
      expect(again).not.toBe(id);
      expect((await execIn(c.engine('node-2').getContainer(again), ['cat', '/run/secrets/token'])).stdout).toBe(VALUE);
      const audit = await c.jaco(['audit', '-o', 'json']);
      expect(audit.stdout).not.toContain('replica_restarted');
      expect(audit.stdout).not.toContain('container_removed');
    }));
});
