// Compose on the cluster network, on a node of `jaco up` (its own namespace and engine): a compose
// file means what it means in docker compose, services reach each other by name. The shop example
// as a user applies it: web asks db at http://db:8091/ (the node's resolver, db's service address
// answered by the node's ingress) and is published on 18090 of the ingress. Another deployment
// reaches db as db.shop, and a compose hostname is its replica's. An application split over
// compose.yaml, compose.override.yaml and an extends base (test/fixtures/compose-layers) runs as
// docker compose would merge it, and its stock_db (jaco's stock-db) answers at its compose name;
// its anonymous volume goes with its container, and its net.* sysctl is its own namespace's; a
// recreated stock_db restarts client (depends_on restart: true), applied again with COMPOSE_FILE.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABELS } from '../../src/api/labels.js';
import { EXAMPLES_DIR, PACKAGE_ROOT } from '../../src/paths.js';
import { execIn } from '../support/docker-exec.js';
import { UpCluster } from '../support/up-cluster.js';
import { eventually } from '../support/wait.js';

const NODE = 'node-1';

describe('compose on the cluster network: services reach each other by name', () => {
  const c = new UpCluster({ nodes: 1 });

  beforeAll(async () => {
    await c.start();
    const r = await c.jaco(['registry', 'push', 'jaco-demo/busybox:1', 'jaco/pause:1'], undefined, 90_000);
    expect(r.code, r.stderr).toBe(0);
  });
  afterAll(async () => {
    await c.stop();
  });

  /** The app container (not the sandbox) of a service's first replica on the node. */
  async function appOf(deployment: string, service: string) {
    const engine = c.engine(NODE);
    const xs = await engine.listContainers({ filters: { label: [`${LABELS.deployment}=${deployment}`, `${LABELS.service}=${service}`] } });
    const app = xs.find((x) => x.Labels[LABELS.role] !== 'sandbox' && x.State === 'running');
    expect(app, `a running ${deployment}/${service} container`).toBeDefined();
    return engine.getContainer(app!.Id);
  }

  it('examples/shop: web reaches db by its name, and answers on its published port', () =>
    c.withLogs(async () => {
      const file = join(EXAMPLES_DIR, 'shop', 'compose.yaml');
      expect(readFileSync(file, 'utf8')).not.toContain('network_mode');
      const applied = await c.jaco(['apply', '-f', file], undefined, 60_000);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stderr).not.toMatch(/^warning:/m);
      const rolled = await c.jaco(['rollout', 'status', 'shop', '--timeout', '120s'], undefined, 130_000);
      expect(rolled.code, rolled.stdout + rolled.stderr).toBe(0);
      // A web replica's page holds db's answer, asked by name.
      const url = `http://${c.node(NODE).address}:18090/`;
      // The whole line, not a part of it: a page cut short must not pass the wait and fail after it.
      const line = /^hello from shop-web-\d+; db says: 12 apples, counted on \d{4}-\d{2}-\d{2}$/;
      let page = '';
      await eventually(
        async () => {
          page = await fetch(url, { signal: AbortSignal.timeout(3000) }).then((r) => r.text(), () => '');
          if (line.test(page.trim())) return true;
          throw new Error(`the page was ${JSON.stringify(page)}`);
        },
        { what: `${url} answering with db's word`, timeoutMs: 30_000 },
      );
      // And asked again now, from inside web: the short name (search shop) and the full one.
      const web = await appOf('shop', 'web');
      for (const name of ['db', 'db.shop']) {
        const got = await execIn(web, ['wget', '-q', '-O-', `http://${name}:8091/`]);
        expect(got.stdout, `${name}: ${got.stderr}`).toMatch(/^12 apples/);
      }
    }));

  it('another deployment reaches db as db.shop; hostname names its replica', () =>
    c.withLogs(async () => {
      const other = ['name: other', 'services:', '  probe:', '    image: jaco-demo/busybox:1', '    hostname: prober', `    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]`, ''].join('\n');
      const applied = await c.jaco(['apply', '-f', '-'], other);
      expect(applied.code, applied.stderr).toBe(0);
      await eventually(async () => (await c.engine(NODE).listContainers({ filters: { label: [`${LABELS.deployment}=other`] } })).some((x) => x.Labels[LABELS.role] !== 'sandbox' && x.State === 'running'), {
        what: 'other/probe running',
        timeoutMs: 60_000,
      });
      const probe = await appOf('other', 'probe');
      expect((await execIn(probe, ['hostname'])).stdout.trim()).toBe('prober');
      const got = await execIn(probe, ['wget', '-q', '-O-', 'http://db.shop:8091/']);
      expect(got.stdout, got.stderr).toMatch(/^12 apples/);
      // The bare name is searched in its own deployment: no db there.
      expect((await execIn(probe, ['wget', '-q', '-T', '3', '-O-', 'http://db:8091/'])).code).not.toBe(0);
      await c.jaco(['delete', 'deployment', 'other']);
      await c.jaco(['delete', '-f', join(EXAMPLES_DIR, 'shop', 'compose.yaml')]);
    }));

  it('a node publishes its engine’s runtimes; placement refuses a runtime or a device no node has', () =>
    c.withLogs(async () => {
      const node = (await c.jaco(['get', 'node', NODE, '-o', 'json'])).stdout;
      expect(JSON.parse(node).status.capacity.runtimes).toContain('runc');
      expect((await c.jaco(['describe', 'node', NODE])).stdout).toMatch(/^Runtimes: +.*\brunc\b/m);
      const app = (extra: string) => ['name: hw', 'services:', '  box:', '    image: jaco-demo/busybox:1', extra, ''].join('\n');
      for (const [extra, want] of [
        ['    runtime: runc', /hw\/box: hw-box-0 would be placed on node-1/],
        ['    runtime: kata', /hw\/box: 1 replica\(s\) would be unschedulable: runtime_missing/],
        ['    devices: [/dev/fuse]', /hw\/box: 1 replica\(s\) would be unschedulable: device_missing/],
      ] as const) {
        const dry = await c.jaco(['apply', '--dry-run', '-f', '-'], app(extra));
        expect(dry.code, dry.stderr).toBe(0);
        expect(dry.stdout).toMatch(want);
      }
    }));

  it('compose.yaml + compose.override.yaml + an extends base: merged, running, stock_db reached by its compose name', () =>
    c.withLogs(async () => {
      const dir = join(PACKAGE_ROOT, 'test', 'fixtures', 'compose-layers');
      const applied = await c.jaco(['apply', '-f', dir], undefined, 60_000);
      expect(applied.code, applied.stderr).toBe(0);
      expect(applied.stdout).toMatch(/^deployment\/layers created/m);
      const rolled = await c.jaco(['rollout', 'status', 'layers', '--timeout', '60s'], undefined, 70_000);
      expect(rolled.code, rolled.stdout + rolled.stderr).toBe(0);
      const client = await appOf('layers', 'client');
      // The override's ORIGIN won; the base's image, limits and grace came through extends.
      let got = { stdout: '', stderr: '', code: 1 };
      await eventually(
        async () => {
          // (No -T: this busybox's wget crashes with it.)
          got = await execIn(client, ['wget', '-q', '-O-', 'http://stock_db:8092/']);
          return got.code === 0;
        },
        { what: 'client reaching stock_db by its compose name', timeoutMs: 20_000 },
      );
      expect(got.stdout.trim(), got.stderr).toBe('7 pears (override)');
      // Its jaco name answers too.
      expect((await execIn(client, ['wget', '-q', '-O-', 'http://stock-db:8092/'])).stdout.trim()).toBe('7 pears (override)');
      // Its net.* sysctl is its namespace's (set on the sandbox it joins).
      const db = await appOf('layers', 'stock-db');
      expect((await execIn(db, ['cat', '/proc/sys/net/core/somaxconn'])).stdout.trim()).toBe('1024');
      // Its /www is an anonymous volume of its container's own, removed with it.
      const info = await db.inspect();
      const www = info.Mounts.find((m) => m.Destination === '/www');
      expect(www?.Type).toBe('volume');
      expect(www?.Name).toMatch(/^[0-9a-f]{64}$/);
      // depends_on restart: true — stock_db recreated (a new ORIGIN) rolls client, after it. Applied
      // with no -f, as docker compose reads COMPOSE_FILE.
      const clientBefore = client.id;
      const files = { COMPOSE_FILE: [join(dir, 'compose.yaml'), join(dir, 'compose.override.yaml')].join(':'), LAYERS_ORIGIN: 'again' };
      const again = await c.jaco(['apply'], undefined, 60_000, files);
      expect(again.code, again.stderr).toBe(0);
      expect(again.stdout).toMatch(/^deployment\/layers configured/m);
      const rolledAgain = await c.jaco(['rollout', 'status', 'layers', '--timeout', '60s'], undefined, 70_000);
      expect(rolledAgain.code, rolledAgain.stdout + rolledAgain.stderr).toBe(0);
      const clientAfter = await appOf('layers', 'client');
      expect(clientAfter.id, 'client recreated with stock_db').not.toBe(clientBefore);
      await eventually(async () => (await execIn(clientAfter, ['wget', '-q', '-O-', 'http://stock_db:8092/'])).stdout.trim() === '7 pears (again)', { what: 'the new client reaching the new stock_db', timeoutMs: 20_000 });
      await c.jaco(['delete', '-f', dir]);
      await eventually(async () => !(await c.engine(NODE).listVolumes()).Volumes?.some((v) => v.Name === www!.Name), { what: `the anonymous volume ${www!.Name} removed with its container`, timeoutMs: 30_000 });
    }));
});
