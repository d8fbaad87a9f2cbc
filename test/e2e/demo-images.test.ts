// The demo server images scripts/build-images.sh makes from Debian's packages (jaco-demo/postgres:15,
// jaco-demo/redis:7, jaco-demo/nginx:1), run on real Docker the way the official images are used.
// The network rule holds: every container has network mode none, so it has its own loopback and
// nothing else (IPv6 turned on there by sysctl where a test needs ::1), and is reached only with
// docker exec from inside. Every container and volume carries this run's label and is removed after.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireDocker } from '../support/cluster.js';
import { execIn, logsOf } from '../support/docker-exec.js';
import { eventually } from '../support/wait.js';

const POSTGRES = 'jaco-demo/postgres:15';
const REDIS = 'jaco-demo/redis:7';
const NGINX = 'jaco-demo/nginx:1';
const RUN_LABEL = 'jaco.test/demo-images';
const RUN = `${process.pid}-${Date.now().toString(36)}`;
/** IPv6 on the container's loopback: Docker turns it off in a container without an IPv6 network. */
const IPV6_LOOPBACK = { 'net.ipv6.conf.all.disable_ipv6': '0', 'net.ipv6.conf.lo.disable_ipv6': '0' };
const GRACE_S = 10;

let docker: Docker;
const tmp = mkdtempSync(join(tmpdir(), 'jaco-demo-images-'));
chmodSync(tmp, 0o755);

beforeAll(async () => {
  docker = await requireDocker();
  for (const image of [POSTGRES, REDIS, NGINX]) {
    await docker.getImage(image).inspect().catch(() => {
      throw new Error(`${image} is missing; scripts/build-images.sh builds it (make test runs it first)`);
    });
  }
});

afterAll(async () => {
  if (docker) {
    const filters = { label: [`${RUN_LABEL}=${RUN}`] };
    const containers = await docker.listContainers({ all: true, filters });
    await Promise.all(containers.map((c) => docker.getContainer(c.Id).remove({ force: true, v: true })));
    const { Volumes } = await docker.listVolumes({ filters });
    await Promise.all((Volumes ?? []).map((v) => docker.getVolume(v.Name).remove()));
  }
  rmSync(tmp, { recursive: true, force: true });
});

interface RunOptions {
  cmd?: string[];
  env?: string[];
  binds?: string[];
  /** ::1 on the loopback (default true). */
  ipv6?: boolean;
}

async function run(name: string, image: string, o: RunOptions = {}): Promise<Docker.Container> {
  const c = await docker.createContainer({
    name: `jaco-demo-images-${name}-${RUN}`,
    Image: image,
    Cmd: o.cmd,
    Env: o.env,
    Labels: { [RUN_LABEL]: RUN },
    HostConfig: { NetworkMode: 'none', Binds: o.binds, Sysctls: o.ipv6 === false ? undefined : IPV6_LOOPBACK },
  });
  await c.start();
  return c;
}

async function volume(name: string): Promise<string> {
  const v = await docker.createVolume({ Name: `jaco-demo-images-${name}-${RUN}`, Labels: { [RUN_LABEL]: RUN } });
  return v.name;
}

/** Waits until `cmd` run in the container exits 0. */
async function until(c: Docker.Container, cmd: string[], what: string): Promise<void> {
  await eventually(async () => (await execIn(c, cmd)).code === 0, { timeoutMs: 60_000, intervalMs: 250, what });
}

/** docker stop sends the image's stop signal; the server must exit 0 before the grace runs out (137 = killed). */
async function stopsWithinGrace(c: Docker.Container): Promise<void> {
  const started = Date.now();
  await c.stop({ t: GRACE_S });
  const took = Date.now() - started;
  const { State } = await c.inspect();
  expect(State.ExitCode).toBe(0);
  expect(took).toBeLessThan(GRACE_S * 1000);
}

/** Who the container's PID 1 runs as, and what it is. */
async function pid1(c: Docker.Container): Promise<string> {
  return (await execIn(c, ['sh', '-c', 'echo "$(stat -c %U /proc/1) $(cat /proc/1/comm)"'])).stdout.trim();
}

/** No documentation, manual pages, translations or apt lists in the image. */
async function expectLean(c: Docker.Container): Promise<void> {
  const r = await execIn(c, ['sh', '-c', 'find /usr/share/doc -type f ! -name copyright; find /usr/share/man /usr/share/info /var/lib/apt/lists /var/cache/apt -type f; find /usr/share/locale -mindepth 1 ! -name locale.alias']);
  expect(r.stdout).toBe('');
}

describe('jaco-demo/postgres:15', () => {
  interface Login {
    host: string;
    user: string;
    db: string;
    password: string;
  }
  const psql = (c: Docker.Container, l: Login, sql: string) =>
    execIn(c, ['psql', '-h', l.host, '-U', l.user, '-d', l.db, '-tA', '-v', 'ON_ERROR_STOP=1', '-c', sql], [`PGPASSWORD=${l.password}`]);
  const ready = (c: Docker.Container) => until(c, ['pg_isready', '-q', '-h', '127.0.0.1'], 'postgres accepting TCP connections');

  it('has the official image’s config: port, PGDATA, stop signal', async () => {
    const { Config } = await docker.getImage(POSTGRES).inspect();
    expect(Config.ExposedPorts).toEqual({ '5432/tcp': {} });
    expect(Config.Env).toEqual(expect.arrayContaining(['PGDATA=/var/lib/postgresql/data', 'PG_MAJOR=15']));
    expect(Config.Cmd).toEqual(['postgres']);
    expect((Config as { StopSignal?: string }).StopSignal).toBe('SIGINT');
    expect(Config.Labels?.['jaco.demo.inputs']).toMatch(/^[0-9a-f]{16}$/);
  });

  it('creates POSTGRES_USER and POSTGRES_DB, takes its password over TCP (IPv4 and IPv6) and refuses a wrong one; a new start on the same data keeps it', async () => {
    const data = await volume('pgdata');
    const app: Login = { host: '127.0.0.1', user: 'app', db: 'shop', password: 's3cret pw' };
    const first = await run('pg-1', POSTGRES, {
      env: ['POSTGRES_USER=app', `POSTGRES_PASSWORD=${app.password}`, 'POSTGRES_DB=shop'],
      cmd: ['postgres', '-c', 'work_mem=12MB'],
      binds: [`${data}:/var/lib/postgresql/data`],
    });
    await ready(first);

    expect(await psql(first, app, `select current_user || ',' || current_database()`)).toMatchObject({ code: 0, stdout: 'app,shop\n' });
    expect(await psql(first, { ...app, host: '::1' }, `select current_user || ',' || current_database()`)).toMatchObject({ code: 0, stdout: 'app,shop\n' });
    const wrong = await psql(first, { ...app, password: 'not it' }, 'select 1');
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain('password authentication failed for user "app"');
    // scram-sha-256 for every TCP connection, the password stored as a SCRAM verifier.
    expect((await psql(first, app, `select string_agg(distinct auth_method, ',') from pg_hba_file_rules where type = 'host'`)).stdout).toBe('scram-sha-256\n');
    expect((await psql(first, app, `select rolpassword like 'SCRAM-SHA-256$%' from pg_authid where rolname = 'app'`)).stdout).toBe('t\n');
    expect((await psql(first, app, 'show data_directory')).stdout).toBe('/var/lib/postgresql/data\n');
    expect((await psql(first, app, 'show work_mem')).stdout).toBe('12MB\n');
    expect(await pid1(first)).toBe('postgres postgres');
    const { stderr } = await logsOf(first);
    expect(stderr).toContain('listening on IPv4 address "0.0.0.0", port 5432');
    expect(stderr).toContain('listening on IPv6 address "::", port 5432');
    expect(stderr).toContain('database system is ready to accept connections');
    await expectLean(first);

    expect((await psql(first, app, `create table orders (id int primary key, item text); insert into orders values (1, 'tea')`)).code).toBe(0);
    await stopsWithinGrace(first);
    // SIGINT is postgres's fast shutdown (SIGTERM would be the smart one).
    expect((await logsOf(first)).stderr).toContain('received fast shutdown request');

    // Another container on the same data: no second initdb, so the first password and data stay.
    const second = await run('pg-2', POSTGRES, {
      env: ['POSTGRES_USER=app', 'POSTGRES_PASSWORD=ignored on existing data'],
      binds: [`${data}:/var/lib/postgresql/data`],
    });
    await ready(second);
    expect(await psql(second, app, 'select item from orders where id = 1')).toMatchObject({ code: 0, stdout: 'tea\n' });
    const logs = await logsOf(second);
    expect(logs.stdout + logs.stderr).not.toContain('init process complete');
    await stopsWithinGrace(second);
  });

  it('reads the password from POSTGRES_PASSWORD_FILE, defaults user and database to postgres, passes flag-only args to the server, runs the init scripts', async () => {
    const secret = join(tmp, 'pg-password');
    writeFileSync(secret, 'from a file\n', { mode: 0o400 });
    const initdb = join(tmp, 'initdb');
    mkdirSync(initdb, { mode: 0o755 });
    writeFileSync(join(initdb, '01-seed.sql'), 'create table seeded (n int); insert into seeded values (7);\n', { mode: 0o644 });
    writeFileSync(join(initdb, '02-more.sh'), 'psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -c "insert into seeded values (8)"\n', { mode: 0o644 });
    const c = await run('pg-file', POSTGRES, {
      env: ['POSTGRES_PASSWORD_FILE=/run/secrets/pg-password', 'POSTGRES_INITDB_ARGS=--data-checksums'],
      cmd: ['-c', 'max_connections=42'],
      binds: [`${secret}:/run/secrets/pg-password:ro`, `${initdb}:/docker-entrypoint-initdb.d:ro`],
      ipv6: false,
    });
    await ready(c);
    const login: Login = { host: '127.0.0.1', user: 'postgres', db: 'postgres', password: 'from a file' };
    expect(await psql(c, login, `select current_user || ',' || current_database()`)).toMatchObject({ code: 0, stdout: 'postgres,postgres\n' });
    expect((await psql(c, { ...login, password: 'from a fil' }, 'select 1')).code).toBe(2);
    expect((await psql(c, login, 'show max_connections')).stdout).toBe('42\n');
    expect((await psql(c, login, 'show data_checksums')).stdout).toBe('on\n');
    expect((await psql(c, login, 'select string_agg(n::text, \',\' order by n) from seeded')).stdout).toBe('7,8\n');
    await stopsWithinGrace(c);
  });

  it('refuses to initialise without a password', async () => {
    const c = await run('pg-nopw', POSTGRES, { ipv6: false });
    expect((await c.wait()).StatusCode).toBe(1);
    expect((await logsOf(c)).stderr).toContain('no superuser password is given');
  });
});

describe('jaco-demo/redis:7', () => {
  const cli = (c: Docker.Container, host: string, ...args: string[]) => execIn(c, ['redis-cli', '-h', host, ...args]);
  const ready = (c: Docker.Container) => until(c, ['redis-cli', '-h', '127.0.0.1', 'ping'], 'redis answering PING');

  it('has the official image’s config: port, working directory /data', async () => {
    const { Config } = await docker.getImage(REDIS).inspect();
    expect(Config.ExposedPorts).toEqual({ '6379/tcp': {} });
    expect(Config.WorkingDir).toBe('/data');
    expect(Config.Cmd).toEqual(['redis-server']);
  });

  it('listens on every address with protected mode off, answers PING and SET/GET over IPv4 and IPv6, logs to stdout, saves and stops on SIGTERM', async () => {
    const c = await run('redis', REDIS);
    await ready(c);
    expect(await cli(c, '127.0.0.1', 'ping')).toMatchObject({ code: 0, stdout: 'PONG\n' });
    expect(await cli(c, '127.0.0.1', 'set', 'greeting', 'hello')).toMatchObject({ code: 0, stdout: 'OK\n' });
    expect(await cli(c, '::1', 'get', 'greeting')).toMatchObject({ code: 0, stdout: 'hello\n' });
    expect((await cli(c, '::1', 'config', 'get', 'protected-mode')).stdout).toBe('protected-mode\nno\n');
    expect((await cli(c, '127.0.0.1', 'config', 'get', 'bind')).stdout).toBe('bind\n* -::*\n');
    expect(await pid1(c)).toBe('redis redis-server');
    expect((await logsOf(c)).stdout).toContain('Ready to accept connections');
    await expectLean(c);
    await stopsWithinGrace(c);
    expect((await logsOf(c)).stdout).toMatch(/DB saved on disk[\s\S]*ready to exit/);
  });

  it('passes extra args through to redis-server', async () => {
    const c = await run('redis-aof', REDIS, { cmd: ['redis-server', '--appendonly', 'yes'] });
    await ready(c);
    expect((await cli(c, '127.0.0.1', 'config', 'get', 'appendonly')).stdout).toBe('appendonly\nyes\n');
    expect((await cli(c, '127.0.0.1', 'config', 'get', 'protected-mode')).stdout).toBe('protected-mode\nno\n');
    expect(await cli(c, '127.0.0.1', 'set', 'k', 'v')).toMatchObject({ code: 0, stdout: 'OK\n' });
    expect((await execIn(c, ['ls', '/data/appendonlydir'])).stdout).toMatch(/appendonly\.aof/);
    await stopsWithinGrace(c);
  });
});

describe('jaco-demo/nginx:1', () => {
  const get = (c: Docker.Container, url: string) => execIn(c, ['wget', '-qO-', url]);
  const ready = (c: Docker.Container) => until(c, ['wget', '-qO', '/dev/null', 'http://127.0.0.1/'], 'nginx serving on port 80');

  it('has the official image’s config: port 80, stop signal SIGQUIT, nginx in the foreground', async () => {
    const { Config } = await docker.getImage(NGINX).inspect();
    expect(Config.ExposedPorts).toEqual({ '80/tcp': {} });
    expect(Config.Cmd).toEqual(['nginx', '-g', 'daemon off;']);
    expect((Config as { StopSignal?: string }).StopSignal).toBe('SIGQUIT');
  });

  it('serves /usr/share/nginx/html on IPv4 and IPv6, access log to stdout and error log to stderr, stops gracefully', async () => {
    const c = await run('nginx', NGINX);
    await ready(c);
    expect(await get(c, 'http://127.0.0.1/')).toMatchObject({ code: 0, stdout: expect.stringContaining('<title>Welcome to nginx!</title>') });
    expect(await get(c, 'http://[::1]/')).toMatchObject({ code: 0, stdout: expect.stringContaining('<title>Welcome to nginx!</title>') });
    const logs = await logsOf(c);
    expect(logs.stdout).toMatch(/127\.0\.0\.1 - - \[.*\] "GET \/ HTTP\/1\.1" 200 /);
    expect(logs.stdout).toMatch(/::1 - - \[.*\] "GET \/ HTTP\/1\.1" 200 /);
    expect(logs.stderr).toContain('start worker process');
    expect(await pid1(c)).toBe('root nginx');
    await expectLean(c);
    await stopsWithinGrace(c);
    expect((await logsOf(c)).stderr).toContain('signal 3 (SIGQUIT) received');
  });

  it('serves IPv4 alone when the container has no IPv6', async () => {
    const c = await run('nginx-v4', NGINX, { ipv6: false });
    await ready(c);
    expect((await get(c, 'http://127.0.0.1/')).stdout).toContain('Welcome to nginx!');
    await stopsWithinGrace(c);
  });

  it('serves a mounted html directory, and a file mounted over conf.d/default.conf replaces the default server', async () => {
    const html = join(tmp, 'html');
    mkdirSync(html, { mode: 0o755 });
    writeFileSync(join(html, 'index.html'), 'from a mounted html dir\n', { mode: 0o644 });
    const site = join(tmp, 'default.conf');
    writeFileSync(site, 'server {\n  listen 80;\n  location / {\n    default_type text/plain;\n    return 200 "from a mounted default.conf\\n";\n  }\n}\n', { mode: 0o644 });

    const withHtml = await run('nginx-html', NGINX, { binds: [`${html}:/usr/share/nginx/html:ro`] });
    const withConf = await run('nginx-conf', NGINX, { binds: [`${site}:/etc/nginx/conf.d/default.conf:ro`] });
    await Promise.all([ready(withHtml), ready(withConf)]);
    expect((await get(withHtml, 'http://127.0.0.1/')).stdout).toBe('from a mounted html dir\n');
    expect((await get(withConf, 'http://127.0.0.1/')).stdout).toBe('from a mounted default.conf\n');
    expect((await get(withConf, 'http://127.0.0.1/index.html')).stdout).toBe('from a mounted default.conf\n');
    await Promise.all([stopsWithinGrace(withHtml), stopsWithinGrace(withConf)]);
  });
});
