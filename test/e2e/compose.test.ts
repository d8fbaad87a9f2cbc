// A Docker Compose application end to end on real containers: 2 agents, `jaco controller all`, a
// real etcd. `jaco apply -f compose.yaml` with depends_on service_healthy, replicas, resources, a
// health check and stop_grace_period: the dependent starts only once its dependency is healthy;
// everything runs; a changed environment value rolls the service; `jaco delete -f` removes it.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { replicaReady } from '../../src/api/readiness.js';
import type { ReplicaDesired, ReplicaObserved } from '../../src/api/types.js';
import { sampler, startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 2, controllers: 'all' });
});
afterAll(async () => {
  await c?.stop();
});

// Both services on host networking: this test is about depends_on, rollouts and delete, and its
// nodes are simulated on this machine and share its network namespace, where the cluster network
// (a namespace per replica, plumbed on its node) cannot run; compose's default is the cluster
// network, which needs separate hosts (jaco up).
const compose = (greeting: string) => `name: shop
services:
  db:
    image: jaco-demo/busybox:1
    network_mode: host
    # Healthy only after a few seconds: the dependent must wait for it.
    command: ["sh", "-c", "trap 'exit 0' TERM; (sleep 3; touch /tmp/ready) & sleep 3600 & wait"]
    healthcheck:
      test: ["CMD", "test", "-f", "/tmp/ready"]
      interval: 1s
      timeout: 5s
      retries: 30
    stop_grace_period: 5s
    restart: always
  web:
    image: jaco-demo/busybox:1
    network_mode: host
    command: sh -c "trap 'exit 0' TERM; sleep 3600 & wait"
    environment:
      GREETING: ${greeting}
      DB: db
    depends_on:
      db:
        condition: service_healthy
    deploy:
      replicas: 2
      resources:
        limits: {cpus: "0.25", memory: 32M}
    healthcheck:
      test: ["CMD", "true"]
      interval: 1s
      timeout: 5s
    stop_grace_period: 2s
`;

/** desired and observed at one revision: which services are placed, and whether db is ready. */
async function moment(): Promise<{ webPlaced: number; dbPlaced: boolean; dbReady: boolean }> {
  const { kvs } = await c.store.listRaw('');
  const now = Date.now();
  const desired: ReplicaDesired[] = [];
  const observed = new Map<string, ReplicaObserved>();
  for (const kv of kvs) {
    const k = kv.key.toString().slice(c.store.prefix.length);
    if (k.startsWith('desired/')) desired.push(JSON.parse(kv.value.toString()) as ReplicaDesired);
    if (k.startsWith('observed/')) observed.set(k.slice('observed/'.length), JSON.parse(kv.value.toString()) as ReplicaObserved);
  }
  const db = desired.filter((d) => d.spec.service === 'db');
  return {
    webPlaced: desired.filter((d) => d.spec.service === 'web').length,
    dbPlaced: db.length === 1,
    dbReady: db.length === 1 && db.every((d) => replicaReady(d, observed.get(`${d.spec.node}/${d.spec.replica}`), now)),
  };
}

const shop = async () => (await c.containers()).filter((x) => x.Labels[LABELS.deployment] === 'shop');

describe('jaco apply -f compose.yaml on real containers', () => {
  it('waits for the healthy dependency, runs everything, rolls a changed environment, and deletes', () =>
    c.withLogs(async () => {
      const dir = mkdtempSync(join(tmpdir(), 'jaco-compose-e2e-'));
      const file = join(dir, 'compose.yaml');
      writeFileSync(file, compose('hello'));
      const samples = sampler(moment, 100);
      const applied = await c.jaco(['apply', '-f', file]);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stdout).toMatch(/^deployment\/shop created \(revision 1/);
      expect(applied.stderr).toContain('services.db.restart: restart: jaco owns restarts');
      await eventually(async () => {
        const xs = await shop();
        return xs.length === 3 && xs.every((x) => x.State === 'running');
      }, { what: 'db and 2 web containers running', timeoutMs: 90_000 });
      const seen = await samples.stop();
      // Never a web replica placed while db was not healthy; and db really ran unhealthy for a while
      // (placed, starting, its check failing) while web waited.
      expect(seen.filter((s) => s.webPlaced > 0 && !s.dbReady)).toEqual([]);
      expect(seen.filter((s) => s.dbPlaced && !s.dbReady).length).toBeGreaterThan(5);
      const status = await c.jaco(['status', 'shop', '-o', 'json']);
      expect(status.code, status.stderr).toBe(0);

      const web = async () => (await shop()).filter((x) => x.Labels[LABELS.service] === 'web');
      const before = (await web()).map((x) => x.Id).sort();
      const env = async (id: string) => (await c.docker.getContainer(id).inspect()).Config.Env;
      expect(await env(before[0]!)).toContain('GREETING=hello');
      expect((await c.docker.getContainer(before[0]!).inspect()).HostConfig).toMatchObject({ NanoCpus: 250_000_000, Memory: 32 * 1024 * 1024, NetworkMode: 'host' });

      writeFileSync(file, compose('bonjour'));
      const changed = await c.jaco(['apply', '-f', file]);
      expect(changed.stdout).toMatch(/^deployment\/shop configured \(revision 2/);
      const rolled = await c.jaco(['rollout', 'status', 'shop', '--timeout', '120s']);
      expect(rolled.code, rolled.stdout + rolled.stderr).toBe(0);
      const after = await web();
      expect(after.map((x) => x.Id).some((id) => before.includes(id))).toBe(false);
      for (const x of after) expect(await env(x.Id)).toContain('GREETING=bonjour');
      expect((await shop()).filter((x) => x.Labels[LABELS.service] === 'db')).toHaveLength(1); // db untouched

      const del = await c.jaco(['delete', '-f', file]);
      expect(del.stdout).toBe('deployment/shop deleted\n');
      await eventually(async () => (await shop()).length === 0, { what: 'every container of shop removed', timeoutMs: 60_000 });
      expect((await c.store.list(keys.desiredOf())).items).toEqual([]);
    }));
});
