// Issue 27's proof, on real Docker with real `jaco agent` and `jaco controller` processes: a real
// PostgreSQL 15 (jaco-demo/postgres:15) started with POSTGRES_PASSWORD_FILE=/run/secrets/db_password
// from a compose `secrets:` entry, on node-1, and a client service on node-2 that logs in with the
// same secret, in a loop. The secret reaches exactly those two nodes, sealed to each one's key; its
// file is on a tmpfs in each container and on no disk of the node (the agents' state directories,
// the containers' layers and Docker's files of them, every log); etcd holds ciphertext only. A
// rotation (a new secret name, applied) rolls both services, and the client never fails a login.
//
// The test nodes share this machine's network namespace: each service listens on, and connects to,
// a port of its own revision (56400 + JACO_REVISION) on node-1's loopback address, so a revision's
// client logs in to the database of the same revision while the previous one still serves. The
// client tries a login only while its database accepts connections; a login refused for any reason
// but the database going away under it (its old revision stopping) counts as failed.
// So both services say network_mode: host (compose's default, the cluster network, gives each
// replica a namespace of its own, which needs separate hosts).
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync, type Stats } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { Deployment, NodeCopy, ReplicaObserved } from '../../src/api/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { execIn, logsOf } from '../support/docker-exec.js';
import { nodeAddress } from '../support/ingress.js';
import { eventually } from '../support/wait.js';

const PW1 = `pw1-${Math.random().toString(36).slice(2)}-e2e`;
const PW2 = `pw2-${Math.random().toString(36).slice(2)}-e2e`;
const DB_HOST = nodeAddress('node-1');

const compose = (secret: 'db_password' | 'db_password_v2') => `name: pg
services:
  db:
    image: jaco-demo/postgres:15
    network_mode: host
    entrypoint: ["sh", "-c", "exec docker-entrypoint.sh postgres -c listen_addresses=${DB_HOST} -c port=$$((56400 + JACO_REVISION))"]
    environment:
      POSTGRES_PASSWORD_FILE: /run/secrets/db_password
      POSTGRES_USER: app
      POSTGRES_DB: app
    secrets:
      - source: ${secret}
        target: db_password
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -q -h ${DB_HOST} -p $$((56400 + JACO_REVISION))"]
      interval: 5s
      timeout: 2s
      retries: 30
    deploy:
      placement:
        constraints: [node.hostname == node-1]
  client:
    image: jaco-demo/postgres:15
    network_mode: host
    entrypoint:
      - sh
      - -c
      - |
        port=$$((56400 + JACO_REVISION))
        while :; do
          if pg_isready -q -h ${DB_HOST} -p $$port; then
            if out=$$(PGPASSWORD="$$(cat /run/secrets/db_password)" psql -h ${DB_HOST} -p $$port -U app -d app -tAc "select 'in'" 2>&1); then
              echo "login ok rev=$$JACO_REVISION"
            else
              case "$$out" in
                *"shutting down"*|*"starting up"*|*"Connection refused"*) echo "database went away rev=$$JACO_REVISION: $$out" ;;
                *) echo "login FAILED rev=$$JACO_REVISION: $$out" ;;
              esac
            fi
          else
            echo "database not up yet rev=$$JACO_REVISION"
          fi
          sleep 0.3
        done
    secrets:
      - source: ${secret}
        target: db_password
    deploy:
      placement:
        constraints: [node.hostname == node-2]
secrets:
  ${secret}:
    file: ./${secret}.txt
`;

let c: TestCluster;
const dir = mkdtempSync(join(tmpdir(), 'jaco-e2e-secrets-'));
/** Every client container's log, as last read (a container's log goes with it: read while it runs). */
const clientLogs = new Map<string, string>();
let watching = true;
let watcher: Promise<void> | undefined;

async function containersOf(service: string, all = false): Promise<Docker.ContainerInfo[]> {
  return (await c.containers()).filter((x) => x.Labels[LABELS.service] === service && (all || x.State === 'running'));
}

async function readClientLogs(): Promise<void> {
  for (const x of await containersOf('client', true)) {
    try {
      clientLogs.set(x.Id, (await logsOf(c.docker.getContainer(x.Id))).stdout);
    } catch {
      // removed meanwhile: its last read stays
    }
  }
}

const allClientLog = () => [...clientLogs.values()].join('');

/** Every file under `root` on the same filesystem as `root` (mounts below it, the tmpfs ones, are not its disk). */
function filesOnDisk(root: string, dev = statSync(root).dev): string[] {
  let st: Stats;
  try {
    st = statSync(root);
  } catch {
    return [];
  }
  if (st.dev !== dev) return [];
  if (!st.isDirectory()) return st.isFile() ? [root] : [];
  return readdirSync(root).flatMap((e) => filesOnDisk(join(root, e), dev));
}

function holds(file: string, secret: string): boolean {
  try {
    return readFileSync(file).includes(Buffer.from(secret));
  } catch {
    return false;
  }
}

async function runningAt(revision: number): Promise<boolean> {
  const obs = (await c.store.list<ReplicaObserved>(keys.observedOf())).items.map((o) => o.value.status);
  const mine = obs.filter((o) => o.deployment === 'pg');
  return mine.length === 2 && mine.every((o) => o.state === 'running' && o.revision === revision && !o.replacing);
}

beforeAll(async () => {
  c = await startCluster({ nodes: 0, controllers: 'all' });
  for (const n of ['node-1', 'node-2', 'node-3']) await c.startAgent(n, ['--address', nodeAddress(n)]);
  writeFileSync(join(dir, 'db_password.txt'), PW1);
  writeFileSync(join(dir, 'db_password_v2.txt'), PW2);
  watcher = (async () => {
    while (watching) {
      await readClientLogs().catch(() => undefined);
      await new Promise((r) => setTimeout(r, 300));
    }
  })();
}, 120_000);

afterAll(async () => {
  watching = false;
  await watcher;
  await c?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('postgres and its client, with a compose secret', () => {
  it('starts postgres with POSTGRES_PASSWORD_FILE from the secret, and the client logs in with it', () =>
    c.withLogs(async () => {
      writeFileSync(join(dir, 'compose.yaml'), compose('db_password'));
      const r = await c.jaco(['apply', '-f', dir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^secret\/pg_db_password_[0-9a-f]{12} created\ndeployment\/pg created/);
      await eventually(() => runningAt(1), { what: 'db and client running at revision 1', timeoutMs: 120_000 });
      await eventually(async () => (await readClientLogs(), allClientLog().includes('login ok rev=1')), { what: 'a login with the secret', timeoutMs: 60_000 });
    }));

  it('gives the secret only to the nodes whose replicas use it, sealed to each node\'s own key', () =>
    c.withLogs(async () => {
      const name = (await c.store.get<Deployment>(keys.deployment('pg')))!.value.spec.services.db!.secrets![0]!.source;
      const copies = (await c.store.list<NodeCopy>(keys.copiesOf())).items.map((i) => i.key).sort();
      expect(copies).toEqual([`copies/node-1/secret/${name}`, `copies/node-2/secret/${name}`]);
      for (const n of ['node-1', 'node-2']) {
        const copy = (await c.store.get<NodeCopy>(keys.copy(n, 'secret', name)))!.value;
        const nodeKey = JSON.parse(readFileSync(join(c.stateDir(n), 'node.key'), 'utf8')).key.id as string;
        expect(copy.spec.nodeKey).toBe(nodeKey);
      }
    }));

  it('the secret is a file on a tmpfs inside each container, read-only, and on no disk of the node', () =>
    c.withLogs(async () => {
      for (const svc of ['db', 'client']) {
        const [x] = await containersOf(svc);
        const ct = c.docker.getContainer(x!.Id);
        const mounts = await execIn(ct, ['sh', '-c', 'grep " /run/secrets/db_password " /proc/mounts']);
        expect(mounts.stdout, `${svc}: /proc/mounts`).toMatch(/^tmpfs \/run\/secrets\/db_password tmpfs ro,/m);
        expect((await execIn(ct, ['cat', '/run/secrets/db_password'])).stdout).toBe(PW1);
        // Its layer, Docker's files of it (config, logs) and the node's disk hold no copy.
        const info = await ct.inspect();
        const upper = (info.GraphDriver.Data as Record<string, string> | null)?.UpperDir;
        expect(upper).toBeTruthy();
        for (const f of [...filesOnDisk(upper!), ...filesOnDisk(join('/var/lib/docker/containers', info.Id))]) expect(holds(f, PW1), f).toBe(false);
        // The tmpfs it comes from is under the agent's state directory, and is a tmpfs.
        const src = info.Mounts.find((m) => m.Destination === '/run/secrets/db_password')!.Source;
        expect(src.startsWith(join(c.stateDir(svc === 'db' ? 'node-1' : 'node-2'), 'files'))).toBe(true);
        expect(spawnSync('stat', ['-f', '-c', '%T', src], { encoding: 'utf8' }).stdout.trim()).toBe('tmpfs');
      }
      for (const n of ['node-1', 'node-2', 'node-3']) {
        const onDisk = filesOnDisk(c.stateDir(n));
        expect(onDisk).toContain(join(c.stateDir(n), 'node.key'));
        for (const f of onDisk) expect(holds(f, PW1), f).toBe(false);
      }
      // No log of any jaco process, no output of the CLI.
      for (const f of filesOnDisk(c.logDir)) expect(holds(f, PW1), f).toBe(false);
    }));

  it('etcd holds ciphertext only: no key under the prefix, no file of its data', () =>
    c.withLogs(async () => {
      const get = spawnSync('etcdctl', ['get', '--prefix', c.prefix], { env: { ...process.env, ...c.etcdctlEnv() }, maxBuffer: 256 << 20 });
      expect(get.status, get.stderr.toString()).toBe(0);
      expect(get.stdout.includes(Buffer.from('copies/node-1/secret/'))).toBe(true);
      for (const form of [PW1, Buffer.from(PW1).toString('base64')]) {
        expect(get.stdout.includes(Buffer.from(form))).toBe(false);
        for (const f of filesOnDisk(c.etcd.member.spec.dataDir)) expect(holds(f, form), f).toBe(false);
      }
    }));

  it('a rotation — a new secret name, applied — rolls both services with no failed login, and the old password stops working', () =>
    c.withLogs(async () => {
      writeFileSync(join(dir, 'compose.yaml'), compose('db_password_v2'));
      const r = await c.jaco(['apply', '-f', dir]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^secret\/pg_db_password_v2_[0-9a-f]{12} created\ndeployment\/pg configured \(revision 2/);
      await eventually(() => runningAt(2), { what: 'db and client rolled to revision 2', timeoutMs: 150_000 });
      await eventually(async () => (await readClientLogs(), allClientLog().includes('login ok rev=2')), { what: 'a login with the new secret', timeoutMs: 60_000 });
      // Once the old containers are gone, so are the old copies, and their tmpfs.
      await eventually(async () => (await containersOf('client', true)).length === 1 && (await containersOf('db', true)).length === 1, { what: 'the old containers removed', timeoutMs: 60_000 });
      const v2 = (await c.store.get<Deployment>(keys.deployment('pg')))!.value.spec.services.client!.secrets![0]!.source;
      await eventually(async () => (await c.store.list(keys.copiesOf())).items.map((i) => i.key).sort().join() === [`copies/node-1/secret/${v2}`, `copies/node-2/secret/${v2}`].join(), { what: 'only the new copies left' });
      await eventually(() => readdirSync(join(c.stateDir('node-2'), 'files')).length === 1, { what: "the old client's tmpfs removed", timeoutMs: 30_000 });
      await readClientLogs();
      const log = allClientLog();
      expect(log.match(/login ok rev=1/g)?.length ?? 0).toBeGreaterThan(3);
      expect(log.match(/login ok rev=2/g)?.length ?? 0).toBeGreaterThan(0);
      expect(log).not.toContain('login FAILED');
      console.info(`rotation: ${log.match(/login ok rev=1/g)?.length} logins at revision 1, ${log.match(/login ok rev=2/g)?.length} at revision 2, 0 failed; ${log.match(/database went away/g)?.length ?? 0} tries met a database stopping`);
      const [client] = await containersOf('client');
      const ct = c.docker.getContainer(client!.Id);
      expect((await execIn(ct, ['cat', '/run/secrets/db_password'])).stdout).toBe(PW2);
      // The rotation changed the password: the old one is refused by the new database.
      const old = await execIn(ct, ['sh', '-c', `PGPASSWORD="$OLD" psql -h ${DB_HOST} -p 56402 -U app -d app -tAc 'select 1'`], [`OLD=${PW1}`]);
      expect(old.code).not.toBe(0);
      expect(old.stderr).toContain('password authentication failed for user "app"');
      for (const n of ['node-1', 'node-2']) for (const f of filesOnDisk(c.stateDir(n))) expect(holds(f, PW2), f).toBe(false);
      for (const f of filesOnDisk(c.logDir)) expect(holds(f, PW2), f).toBe(false);
      const get = spawnSync('etcdctl', ['get', '--prefix', c.prefix], { env: { ...process.env, ...c.etcdctlEnv() }, maxBuffer: 256 << 20 });
      for (const form of [PW2, Buffer.from(PW2).toString('base64')]) expect(get.stdout.includes(Buffer.from(form))).toBe(false);
    }));
});
