// deploy/ followed on one host (issue 32): the etcd member, the controllers, the dashboard and the
// backup each started with exactly the command line and environment its systemd unit gives it
// (test/support/units.ts reads the unit file and the env files it names), in a network namespace of
// the test's own that holds the address deploy/etcd/member.env.example names — so the units' fixed
// ports and addresses are used as written. The files an operator writes are written as
// deploy/README.md says (test/support/deploy-steps.ts): the member's certificate and environment
// file (made a one-member cluster on TLS), the host's etcd client certificate, `jaco etcd rbac
// --enable-auth` and its env files where the units read them, jaco.env pointed at the member, the
// cluster key file made with `jaco secret key rotate`. The node units (agent, ingress) need Docker: e2e.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { stopProcess } from '../../src/child.js';
import { NETNS_DIR } from '../../src/supervise/local-network.js';
import { JACO_BIN } from '../support/cli.js';
import { etcdTlsFiles, etcdUsers, type OperatorJaco } from '../support/deploy-steps.js';
import { commandOf, hostPath, readEnvFile, readUnit, type Host } from '../support/units.js';
import { eventually } from '../support/wait.js';
import { getInNetns } from '../support/netns-fetch.js';

const run = promisify(execFile);
const deploy = (f: string) => join(PACKAGE_ROOT, 'deploy', f);
/** The member's address in deploy/etcd/member.env.example, held by this test's namespace. */
const ADDRESS = '10.0.0.11';
const NS = `jaco-units-${process.pid}`;
const inNs = (cmd: string, args: string[]) => ['--net=' + join(NETNS_DIR, NS), '--', cmd, ...args];

/** GET url from inside the namespace: [status, body]. */
const get = async (url: string): Promise<[number, string]> => {
  const r = await getInNetns(NS, url);
  return [r.status, r.body];
};

describe('deploy/ units, run as systemd runs them', () => {
  const root = mkdtempSync(join(tmpdir(), 'jaco-units-'));
  const host: Host = { hostname: 'node-a', root };
  const children: ChildProcess[] = [];
  const logs: string[] = [];

  /** Starts a unit's command in the namespace, as systemd would start the service. */
  function start(unitFile: string, instance?: string): ChildProcess {
    const c = commandOf(readUnit(deploy(unitFile), instance), host);
    const child = spawn('nsenter', inNs(c.cmd, c.args), { env: c.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const name = unitFile.split('/').pop()!;
    child.stdout!.on('data', (d: Buffer) => logs.push(`${name}: ${d.toString().trimEnd()}`));
    child.stderr!.on('data', (d: Buffer) => logs.push(`${name}: ${d.toString().trimEnd()}`));
    children.push(child);
    return child;
  }
  /** A oneshot unit to its end: its exit code and output. */
  async function runOnce(unitFile: string): Promise<{ code: number; out: string }> {
    const c = commandOf(readUnit(deploy(unitFile)), host);
    const r = await run('nsenter', inNs(c.cmd, c.args), { env: c.env, encoding: 'utf8', timeout: 60_000 }).then(
      (o) => ({ code: 0, out: o.stdout + o.stderr }),
      (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }),
    );
    return r;
  }
  /** The operator's jaco, on the host (etcd answers in its namespace). */
  const operator: OperatorJaco = async (args, env) =>
    (await run('nsenter', inNs(process.execPath, [JACO_BIN, ...args]), { env: { PATH: process.env.PATH, JACO_ENDPOINTS: `https://${ADDRESS}:2379`, JACO_PREFIX: '/jaco/', ...env }, encoding: 'utf8', timeout: 30_000 })).stdout;
  let asRoot: Record<string, string> = {};
  const tell = () => `\n${logs.slice(-30).join('\n')}`;

  beforeAll(async () => {
    await run('ip', ['netns', 'add', NS]);
    await run('ip', ['-n', NS, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', NS, 'addr', 'add', `${ADDRESS}/32`, 'dev', 'lo']);
    // What the operator writes (deploy/README.md, steps 1 and 2), for a cluster of one member.
    expect(readFileSync(deploy('etcd/member.env.example'), 'utf8')).toContain(`ETCD_LISTEN_CLIENT_URLS=https://${ADDRESS}:2379`);
    const ops = join(root, 'operator');
    const tls = await etcdTlsFiles(operator, join(ops, 'pki'), [{ host, member: 'etcd-a', address: ADDRESS }], [host], join(ops, 'etcd-client'));
    mkdirSync(join(root, 'etc/jaco'), { recursive: true });
    writeFileSync(join(root, 'etc/jaco/jaco.env'), readFileSync(deploy('systemd/jaco.env'), 'utf8').replace(/^JACO_ENDPOINTS=.*$/m, `JACO_ENDPOINTS=https://${ADDRESS}:2379`));
    start('etcd/etcd-jaco.service');
    await eventually(() => operator(['get', 'nodes'], tls).then(() => true, () => false), { what: `etcd from its unit answering on ${ADDRESS}:2379 over TLS${tell()}`, timeoutMs: 30_000 });
    const copy = (file: string, path: string) => ({ file, host, path });
    asRoot = await etcdUsers(operator, tls, join(ops, 'credentials'), [host.hostname], [copy('controller.env', '/etc/jaco/controller.env'), copy('controller-scheduler.env', '/etc/jaco/controller-scheduler.env'), copy('viewer.env', '/etc/jaco/dashboard.env'), copy('root.env', '/etc/jaco/backup.env')]);
    await operator(['secret', 'key', 'rotate', '--key-file', join(root, 'etc/jaco/secrets.key')], asRoot);
  }, 60_000);

  afterAll(async () => {
    await Promise.all(children.map((c) => stopProcess(c, { graceMs: 5_000 })));
    await run('ip', ['netns', 'delete', NS]).catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  });

  it('jaco-controller.service: every controller up, /healthz and /metrics on the port the unit and the Prometheus targets name', async () => {
    start('systemd/jaco-controller.service');
    const target = readFileSync(deploy('prometheus/targets/controllers.yml'), 'utf8');
    const port = /--metrics-addr 0\.0\.0\.0:(\d+)/.exec(readFileSync(deploy('systemd/jaco-controller.service'), 'utf8'))![1]!;
    expect(target).toContain(`:${port}`);
    await eventually(async () => (await get(`http://127.0.0.1:${port}/healthz`).catch(() => [0, '']))[0] === 200, { what: `the controllers' /healthz${tell()}`, timeoutMs: 30_000 });
    const [, metrics] = await get(`http://${ADDRESS}:${port}/metrics`);
    expect(metrics).toMatch(/^jaco_leader\{/m);
  });

  it('jaco-controller@.service: one controller in a process of its own, under its own etcd user, on the metrics port its env file names', async () => {
    // Beside jaco-controller.service on this host: its own port, as the unit's comment says.
    appendFileSync(hostPath(host, '/etc/jaco/controller-scheduler.env'), 'JACO_METRICS_ADDR=0.0.0.0:9470\n');
    const env = readEnvFile(hostPath(host, '/etc/jaco/controller-scheduler.env'));
    expect(env.JACO_ETCD_USER).toBe('jaco-controller-scheduler');
    start('systemd/jaco-controller@.service', 'scheduler');
    // /healthz answers once its cache has listed what the scheduler reads, as that user.
    await eventually(async () => (await get('http://127.0.0.1:9470/healthz').catch(() => [0, '']))[0] === 200, { what: `jaco-controller@scheduler's /healthz${tell()}`, timeoutMs: 30_000 });
    const [, metrics] = await get(`http://${ADDRESS}:9470/metrics`);
    // Leading or standing by beside jaco-controller.service's scheduler: either way it says which (1 or 0).
    expect(metrics).toMatch(/^jaco_leader\{[^}]*controller="scheduler"\} [01]$/m);
    expect(metrics).not.toMatch(/^jaco_leader\{[^}]*controller="rollout"/m);
  });

  it('jaco-dashboard.service: the page and its assets on the address the unit names', async () => {
    start('systemd/jaco-dashboard.service');
    const addr = /--addr (\S+)/.exec(readFileSync(deploy('systemd/jaco-dashboard.service'), 'utf8'))![1]!;
    const [status, page] = await eventually(async () => {
      const r = await get(`http://${addr}/`).catch(() => undefined);
      return r?.[0] === 200 ? r : undefined;
    }, { what: `the dashboard on ${addr}${tell()}`, timeoutMs: 30_000 });
    expect(status).toBe(200);
    expect(page).toContain('/assets/dashboard.js');
    expect((await get(`http://${addr}/assets/dashboard.js`))[0]).toBe(200);
    // It reads the cluster as the user of dashboard.env (the viewer): its cache has listed.
    await eventually(async () => JSON.parse((await get(`http://${addr}/healthz`))[1]).synced === true, { what: `the dashboard's cache synced${tell()}`, timeoutMs: 30_000 });
  });

  it('jaco-backup.service: a checked snapshot in /var/backups/jaco each run, named by time; the timer runs it daily', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await runOnce('systemd/jaco-backup.service');
      expect(r.code, r.out).toBe(0);
    }
    const dir = join(root, 'var/backups/jaco');
    const files = readdirSync(dir).sort();
    expect(files.filter((f) => f.endsWith('.db')), files.join(' ')).toHaveLength(2);
    for (const f of files.filter((f) => f.endsWith('.db'))) {
      expect(f).toMatch(/^jaco-\d{8}T\d{6}\.\d{3}Z\.db$/);
      expect(await operator(['backup', '--check', join(dir, f)], asRoot)).toContain(': OK (');
    }
    expect(readFileSync(deploy('systemd/jaco-backup.timer'), 'utf8')).toMatch(/^OnCalendar=daily$/m);
  });
});
