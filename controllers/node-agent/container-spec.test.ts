// How a desired replica becomes `docker create` options, and how `docker inspect` becomes the
// facts decide() reads: every field, as tables.
import type Docker from 'dockerode';
import { describe, expect, it } from 'vitest';
import { DEREGISTRATION_LABEL } from './facts.js';
import { LABELS } from '../../src/api/labels.js';
import { templateOf } from '../../src/api/serving.js';
import type { ReplicaDesiredSpec, ServiceSpec } from '../../src/api/types.js';
import { containerName, createOptions, fileMounts, imageWithTag, ownerLabels, volumeName } from './container-spec.js';
import { deregistrationMs, stopTimeoutSec } from '../../src/api/spec.js';
import { factsFromInspect, portsOf } from './facts.js';

const owner = { clusterUid: '0123456789abcdef-uid', node: 'node-2' };

function spec(s: ServiceSpec, revision = 3): ReplicaDesiredSpec {
  const t = templateOf(revision, s);
  return { replica: 'shop-api-4', deployment: 'shop', service: 'api', node: 'node-2', revision, specHash: t.specHash, template: t.template, placedAt: '2026-01-01T00:00:00Z' };
}

describe('createOptions', () => {
  const full = spec({
    image: 'jaco-demo/busybox:2',
    command: ['sh', '-c'],
    args: ['httpd -f -p 127.0.0.1:8080'],
    env: { COLOR: 'blue', JACO_NODE: 'spoofed' },
    resources: { cpu: '500m', memory: '64Mi', gpus: 1 },
    ports: [8080, 8443],
    healthcheck: { test: ['CMD-SHELL', 'wget -q -O- http://127.0.0.1:8080/'], interval: '2s', timeout: '1500ms', retries: 2, startPeriod: '1s' },
    stopSignal: 'SIGINT',
    stopGracePeriod: '1500ms',
    volumes: [
      { type: 'volume', source: 'data', target: '/data' },
      { type: 'bind', source: '/etc/hosts', target: '/etc/outer-hosts', readOnly: true },
      { type: 'anonymous', target: '/var/cache/app' },
    ],
  });
  const o = createOptions(full, owner);

  it('resources.disk becomes StorageOpt size only where the driver caps writable layers', () => {
    const d = spec({ image: 'i', resources: { disk: '2Gi' } });
    expect(createOptions(d, owner, { capDisk: true }).HostConfig!.StorageOpt).toEqual({ size: String(2 * 1024 ** 3) });
    expect(createOptions(d, owner).HostConfig!.StorageOpt).toBeUndefined();
    expect(createOptions(spec({ image: 'i' }), owner, { capDisk: true }).HostConfig!.StorageOpt).toBeUndefined();
  });

  it('names the container after cluster, node, replica, revision and spec hash', () => {
    expect(o.name).toBe(`jaco-01234567-node-2-shop-api-4-r3-${full.specHash.slice(0, 8)}`);
    expect(o.name).toBe(containerName(owner, 'shop-api-4', 3, full.specHash));
  });

  it('labels it with the cluster, node, deployment, service, replica, spec hash and revision', () => {
    expect(o.Labels).toEqual({
      [LABELS.cluster]: owner.clusterUid,
      [LABELS.node]: 'node-2',
      [LABELS.deployment]: 'shop',
      [LABELS.service]: 'api',
      [LABELS.replica]: 'shop-api-4',
      [LABELS.specHash]: full.specHash,
      [LABELS.revision]: '3',
      // Its ports are routed (its service address): out of routing 5 s before a stop.
      [DEREGISTRATION_LABEL]: '5000',
    });
    expect(ownerLabels(owner)).toEqual([`${LABELS.cluster}=${owner.clusterUid}`, `${LABELS.node}=node-2`]);
  });

  it('command → Entrypoint, args → Cmd, env plus the JACO_ variables (which win)', () => {
    expect(o.Image).toBe('jaco-demo/busybox:2');
    expect(o.Entrypoint).toEqual(['sh', '-c']);
    expect(o.Cmd).toEqual(['httpd -f -p 127.0.0.1:8080']);
    expect(o.Env).toEqual(['COLOR=blue', 'JACO_DEPLOYMENT=shop', 'JACO_NODE=node-2', 'JACO_PORT_P8080=8080', 'JACO_PORT_P8443=8443', 'JACO_REPLICA=shop-api-4', 'JACO_REVISION=3', 'JACO_SERVICE=api', 'PORT=8080']);
  });

  it('dynamic ports: PORT and JACO_PORT_<NAME> from the desired record, the node address, exposed host ports, the deregistration label', () => {
    const d = { ...spec({ image: 'x', ports: [{ name: 'http', containerPort: 80, published: 18080 }, { name: 'admin-ui', containerPort: 9000 }, 7000] }), hostPorts: { http: 20123, 'admin-ui': 20999 } };
    const c = createOptions(d, { ...owner, address: '127.0.1.2' });
    expect(c.Env).toEqual(expect.arrayContaining(['PORT=20123', 'JACO_PORT_HTTP=20123', 'JACO_PORT_ADMIN_UI=20999', 'JACO_PORT_P7000=7000', 'JACO_NODE_ADDRESS=127.0.1.2']));
    expect(Object.keys(c.ExposedPorts!)).toEqual(['20123/tcp', '20999/tcp', '7000/tcp']);
    // A TCP port means an ingress routes to it (a published port on every node, every port on the
    // service address its name resolves to): 5 s out of routing before a stop, unless the service says otherwise.
    expect(c.Labels![DEREGISTRATION_LABEL]).toBe('5000');
    const label = (s: Parameters<typeof spec>[0]) => createOptions(spec(s), owner).Labels![DEREGISTRATION_LABEL];
    expect(label({ image: 'x', ports: [{ containerPort: 80, published: 1 }], deregistrationDelay: '250ms' })).toBe('250');
    expect(label({ image: 'x', ports: [8080] })).toBe('5000');
    // On the cluster network, the ports its image declares are its name's too (compose apps reached by name, no ports listed).
    expect(deregistrationMs({ image: 'x', network: 'cluster', imagePorts: [5432] })).toBe(5000);
    // Reached by no ingress: no port at all, or UDP only; or a delay of its own of none.
    expect(label({ image: 'x' })).toBeUndefined();
    expect(label({ image: 'x', ports: [{ containerPort: 53, protocol: 'udp' }] })).toBeUndefined();
    expect(label({ image: 'x', ports: [8080], deregistrationDelay: '0s' })).toBeUndefined();
  });

  it('host networking, no Docker restarts, CPU and memory limits, GPUs as device requests', () => {
    expect(o.HostConfig).toMatchObject({
      NetworkMode: 'host',
      RestartPolicy: { Name: 'no' },
      NanoCpus: 500_000_000,
      Memory: 64 * 1024 * 1024,
      MemorySwap: 64 * 1024 * 1024,
      DeviceRequests: [{ Driver: '', Count: 1, Capabilities: [['gpu']] }],
    });
    expect(o.ExposedPorts).toEqual({ '8080/tcp': {}, '8443/tcp': {} });
    // gpus: all is Docker's Count -1 (docker run --gpus all).
    expect(createOptions(spec({ image: 'x', resources: { gpus: 'all' } }), owner).HostConfig!.DeviceRequests).toEqual([{ Driver: '', Count: -1, Capabilities: [['gpu']] }]);
  });

  it('runtime, devices and GPUs by id: Runtime, Devices and DeviceRequests of the HostConfig', () => {
    const h = createOptions(spec({ image: 'x', resources: { gpuIds: ['1', 'GPU-5f2c'] }, container: { runtime: 'runsc', devices: ['/dev/fuse', '/dev/sda:/dev/xvda', '/dev/kvm:r', '/dev/sdb:/dev/xvdb:rw'] } }), owner).HostConfig!;
    expect(h.Runtime).toBe('runsc');
    expect(h.Devices).toEqual([
      { PathOnHost: '/dev/fuse', PathInContainer: '/dev/fuse', CgroupPermissions: 'rwm' },
      { PathOnHost: '/dev/sda', PathInContainer: '/dev/xvda', CgroupPermissions: 'rwm' },
      { PathOnHost: '/dev/kvm', PathInContainer: '/dev/kvm', CgroupPermissions: 'r' },
      { PathOnHost: '/dev/sdb', PathInContainer: '/dev/xvdb', CgroupPermissions: 'rw' },
    ]);
    expect(h.DeviceRequests).toEqual([{ Driver: '', DeviceIDs: ['1', 'GPU-5f2c'], Capabilities: [['gpu']] }]);
    // None asked: none set (Docker's defaults: its default runtime, no devices).
    const plain = createOptions(spec({ image: 'x' }), owner).HostConfig!;
    expect([plain.Runtime, plain.Devices, plain.DeviceRequests]).toEqual([undefined, undefined, undefined]);
  });

  it('health check durations in nanoseconds; stop signal and grace (whole seconds, rounded up)', () => {
    expect(o.Healthcheck).toEqual({ Test: ['CMD-SHELL', 'wget -q -O- http://127.0.0.1:8080/'], Interval: 2e9, Timeout: 1.5e9, Retries: 2, StartPeriod: 1e9 });
    expect(o.StopSignal).toBe('SIGINT');
    expect(o.StopTimeout).toBe(2);
  });

  it('named volumes per cluster, node and deployment; binds as given; an anonymous volume with no source (Docker makes the container its own)', () => {
    expect(o.HostConfig?.Mounts).toEqual([
      {
        Type: 'volume',
        Source: 'jaco-01234567-node-2-shop-data',
        Target: '/data',
        ReadOnly: false,
        VolumeOptions: { Labels: { [LABELS.cluster]: owner.clusterUid, [LABELS.node]: 'node-2', [LABELS.deployment]: 'shop' } },
      },
      { Type: 'bind', Source: '/etc/hosts', Target: '/etc/outer-hosts', ReadOnly: true },
      { Type: 'volume', Target: '/var/cache/app', ReadOnly: false, VolumeOptions: { Labels: { [LABELS.cluster]: owner.clusterUid, [LABELS.node]: 'node-2', [LABELS.deployment]: 'shop' } } },
    ]);
    expect(volumeName(owner, 'shop', 'data')).toBe('jaco-01234567-node-2-shop-data');
  });

  it('container options (compose: working_dir, user, labels, init, read_only, caps, extra_hosts, shm, tmpfs, ulimits, privileged) reach Docker; jaco labels win', () => {
    const o = createOptions(
      spec({
        image: 'x',
        container: {
          workingDir: '/srv',
          user: '1000:1000',
          labels: { team: 'payments', [LABELS.replica]: 'spoofed' },
          init: true,
          readOnly: true,
          capAdd: ['NET_BIND_SERVICE'],
          capDrop: ['ALL'],
          extraHosts: ['metadata:169.254.169.254'],
          shmSize: 67108864,
          tmpfs: ['/tmp', '/run/cache:size=64m'],
          ulimits: { nofile: { soft: 65536, hard: 65536 } },
          privileged: true,
          sysctls: { 'net.core.somaxconn': '1024', 'kernel.shmmax': '68719476736' },
          securityOpt: ['no-new-privileges:true'],
          ipc: 'shareable',
          pid: 'host',
        },
      }),
      owner,
    );
    expect(o).toMatchObject({ WorkingDir: '/srv', User: '1000:1000' });
    expect(o.Labels).toMatchObject({ team: 'payments', [LABELS.replica]: 'shop-api-4' });
    expect(o.HostConfig).toMatchObject({
      Init: true,
      ReadonlyRootfs: true,
      CapAdd: ['NET_BIND_SERVICE'],
      CapDrop: ['ALL'],
      ExtraHosts: ['metadata:169.254.169.254'],
      ShmSize: 67108864,
      Tmpfs: { '/tmp': '', '/run/cache': 'size=64m' },
      Ulimits: [{ Name: 'nofile', Soft: 65536, Hard: 65536 }],
      Privileged: true,
      NetworkMode: 'host',
      // Host networking: every sysctl is the container's own to set (the mapping refused net.* there).
      Sysctls: { 'net.core.somaxconn': '1024', 'kernel.shmmax': '68719476736' },
      SecurityOpt: ['no-new-privileges:true'],
      IpcMode: 'shareable',
      PidMode: 'host',
    });
  });

  it('a minimal service: defaults only (SIGTERM, 10 s), no limits, no health check, no mounts', () => {
    const m = createOptions(spec({ image: 'jaco-demo/busybox:1' }), owner);
    expect(m.StopSignal).toBe('SIGTERM');
    expect(m.StopTimeout).toBe(10);
    expect(m.Entrypoint).toBeUndefined();
    expect(m.Cmd).toBeUndefined();
    expect(m.Healthcheck).toBeUndefined();
    expect(m.ExposedPorts).toBeUndefined();
    expect(m.HostConfig).toEqual({ NetworkMode: 'host', RestartPolicy: { Name: 'no' } });
  });

  it('runs the digest apply pinned, not the tag as written', () => {
    const pinned = `198.18.1.1:5000/jaco-demo/busybox:1@sha256:${'a'.repeat(64)}`;
    expect(createOptions(spec({ image: 'jaco-demo/busybox:1', pinnedImage: pinned }), owner).Image).toBe(pinned);
  });

  it('stopTimeoutSec rounds up', () => {
    expect(stopTimeoutSec({ image: 'x', stopGracePeriod: '0s' })).toBe(0);
    expect(stopTimeoutSec({ image: 'x', stopGracePeriod: '100ms' })).toBe(1);
    expect(stopTimeoutSec({ image: 'x', stopGracePeriod: '1m' })).toBe(60);
  });
});

describe('createOptions on the cluster network: the replica joins its sandbox', () => {
  const address = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:0003::5/64' };
  const cluster = (s: ServiceSpec) => ({ ...spec({ network: 'cluster', ...s }), address, hostPorts: { http: 20123 } });
  const o = createOptions(
    cluster({
      image: 'x',
      ports: [{ name: 'http', containerPort: 8080, published: 18080 }, 9000],
      container: { extraHosts: ['db:10.208.3.9'], capAdd: ['NET_ADMIN'] },
    }),
    { ...owner, address: '198.18.1.12' },
    { sandbox: 'sandbox-id-1' },
  );

  it("NetworkMode container:<sandbox>: its namespace, addresses and port space", () => expect(o.HostConfig?.NetworkMode).toBe('container:sandbox-id-1'));

  it('its ports are the container ports (no host ports: none exposed, PORT the first container port)', () => {
    expect(o.ExposedPorts).toBeUndefined();
    expect(o.Env).toEqual(expect.arrayContaining(['PORT=8080', 'JACO_PORT_HTTP=8080', 'JACO_PORT_P9000=9000']));
    expect(o.Env!.join(' ')).not.toContain('20123');
  });

  it('its addresses in the environment beside the others (bare, canonical), the node address kept', () =>
    expect(o.Env).toEqual(expect.arrayContaining(['JACO_REPLICA_ADDRESS=10.208.3.5', 'JACO_REPLICA_ADDRESS6=fd4a:17c2:9e01:3::5', 'JACO_NODE_ADDRESS=198.18.1.12', 'JACO_REPLICA=shop-api-4'])));

  it('hosts entries are the sandbox’s (Docker refuses them here); other container options stay', () => {
    expect(o.HostConfig?.ExtraHosts).toBeUndefined();
    expect(o.HostConfig?.CapAdd).toEqual(['NET_ADMIN']);
  });

  it('net.* sysctls are the sandbox’s (the namespace it joins); the IPC ones stay the container’s', () => {
    const c = createOptions(cluster({ image: 'x', container: { sysctls: { 'net.core.somaxconn': '1024', 'kernel.shmmax': '1' } } }), owner, { sandbox: 's' });
    expect(c.HostConfig?.Sysctls).toEqual({ 'kernel.shmmax': '1' });
    expect(createOptions(cluster({ image: 'x', container: { sysctls: { 'net.core.somaxconn': '1024' } } }), owner, { sandbox: 's' }).HostConfig?.Sysctls).toBeUndefined();
  });

  it('no sandbox: refused (the app never runs without its addresses)', () => expect(() => createOptions(cluster({ image: 'x' }), owner)).toThrow(/needs its sandbox/));

  it('reads back in its sandbox', () => {
    const f = factsFromInspect({
      Id: 'app1',
      Name: `/${o.name}`,
      Created: '2026-01-01T00:00:00Z',
      Config: { Labels: o.Labels, Image: 'x' },
      HostConfig: { NetworkMode: 'container:sandbox-id-1' },
      State: { Status: 'running', Running: true, Pid: 5, ExitCode: 0, StartedAt: '2026-01-01T00:00:01Z', FinishedAt: '0001-01-01T00:00:00Z' },
    } as unknown as Docker.ContainerInspectInfo);
    expect(f).toMatchObject({ networkMode: 'container:sandbox-id-1', ports: [] });
    expect(f.role).toBeUndefined();
  });
});

describe('imageWithTag', () => {
  it.each([
    ['busybox', 'busybox:latest'],
    ['jaco-demo/busybox:1', 'jaco-demo/busybox:1'],
    ['127.0.0.1:5999/nothing', '127.0.0.1:5999/nothing:latest'],
    ['127.0.0.1:5999/nothing:1', '127.0.0.1:5999/nothing:1'],
    ['repo/img@sha256:abc', 'repo/img@sha256:abc'],
  ])('%s → %s', (image, want) => expect(imageWithTag(image)).toBe(want));
});

describe('factsFromInspect', () => {
  const base = {
    Id: 'abc123',
    Name: '/jaco-01234567-node-2-shop-api-4-r3-deadbeef',
    Created: '2026-01-01T00:00:00.5Z',
    Config: {
      Image: 'jaco-demo/busybox:1',
      Labels: { [LABELS.replica]: 'shop-api-4', [LABELS.deployment]: 'shop', [LABELS.service]: 'api', [LABELS.revision]: '3', [LABELS.specHash]: 'deadbeef' },
      ExposedPorts: { '8080/tcp': {} },
      Healthcheck: { Test: ['CMD', 'true'] },
    },
    State: {
      Status: 'running',
      Running: true,
      OOMKilled: false,
      Pid: 4242,
      ExitCode: 0,
      Error: '',
      StartedAt: '2026-01-01T00:00:01Z',
      FinishedAt: '0001-01-01T00:00:00Z',
      Health: { Status: 'unhealthy', FailingStreak: 3, Log: [{ Start: '2026-01-01T00:00:02Z', End: '2026-01-01T00:00:03Z', ExitCode: 1, Output: ' boom \n' }] },
    },
  } as unknown as Docker.ContainerInspectInfo;

  it('reads labels, state, health, ports and times', () => {
    expect(factsFromInspect(base)).toEqual({
      id: 'abc123',
      name: 'jaco-01234567-node-2-shop-api-4-r3-deadbeef',
      replica: 'shop-api-4',
      deployment: 'shop',
      service: 'api',
      revision: 3,
      specHash: 'deadbeef',
      image: 'jaco-demo/busybox:1',
      healthcheck: { test: ['CMD', 'true'], timeoutMs: 0 },
      state: 'running',
      health: 'unhealthy',
      healthOutput: 'boom',
      lastHealthAt: '2026-01-01T00:00:03.000Z',
      exitCode: 0,
      oomKilled: false,
      createdAt: '2026-01-01T00:00:00.500Z',
      startedAt: '2026-01-01T00:00:01.000Z',
      ports: [8080],
      pid: 4242,
    });
  });

  it('a container without a health check has health none; one never started has no startedAt', () => {
    const f = factsFromInspect({
      ...base,
      Config: { ...base.Config, Healthcheck: undefined },
      State: { ...base.State, Status: 'created', Running: false, Pid: 0, StartedAt: '0001-01-01T00:00:00Z', Health: undefined, Error: 'exec failed', ExitCode: 127 },
    } as unknown as Docker.ContainerInspectInfo);
    expect(f).toMatchObject({ state: 'created', health: 'none', exitCode: 127, error: 'exec failed' });
    expect(f.startedAt).toBeUndefined();
    expect(f.lastHealthAt).toBeUndefined();
  });

  it('portsOf skips what is not a port number', () => {
    expect(portsOf({ '53/udp': {}, '8080/tcp': {}, junk: {} })).toEqual([53, 8080]);
    expect(portsOf(undefined)).toEqual([]);
  });
});

describe('secrets and configs', () => {
  const t = spec({
    image: 'jaco-demo/postgres:15',
    volumes: [{ type: 'volume', source: 'data', target: '/var/lib/postgresql/data' }],
    secrets: [{ source: 'shop_db_password_0a1b2c3d4e5f', target: 'db_password' }, { source: 'tls_key', target: '/etc/ssl/private/key.pem', uid: 999, gid: 999, mode: 0o400 }, { source: 'db_password_v2', target: 'certs/pw' }],
    configs: [{ source: 'pg.conf', target: '/etc/postgresql/postgresql.conf' }, { source: 'motd' }, { source: 'relative', target: 'etc/relative.conf' }],
  });
  const dir = '/var/lib/jaco/agent/node-2/files/jaco-01234567-node-2-shop-api-4-r3-abcdef01';

  it('each file is bind-mounted read-only from the container\'s own tmpfs, at its target', () => {
    expect(fileMounts(t.template, dir)).toEqual([
      { Type: 'bind', Source: `${dir}/secret-0`, Target: '/run/secrets/db_password', ReadOnly: true },
      { Type: 'bind', Source: `${dir}/secret-1`, Target: '/etc/ssl/private/key.pem', ReadOnly: true },
      { Type: 'bind', Source: `${dir}/secret-2`, Target: '/run/secrets/certs/pw', ReadOnly: true },
      { Type: 'bind', Source: `${dir}/config-0`, Target: '/etc/postgresql/postgresql.conf', ReadOnly: true },
      { Type: 'bind', Source: `${dir}/config-1`, Target: '/motd', ReadOnly: true },
      { Type: 'bind', Source: `${dir}/config-2`, Target: '/etc/relative.conf', ReadOnly: true },
    ]);
  });

  it('after the volumes, in the create options; nothing of a value is in them', () => {
    const o = createOptions(t, owner, { filesDir: dir });
    expect(o.HostConfig!.Mounts!.map((m) => m.Target)).toEqual(['/var/lib/postgresql/data', '/run/secrets/db_password', '/etc/ssl/private/key.pem', '/run/secrets/certs/pw', '/etc/postgresql/postgresql.conf', '/motd', '/etc/relative.conf']);
    expect(o.Env!.some((e) => e.includes('db_password'))).toBe(false);
  });

  it('a service without any has no file mounts and needs no directory; one with them refuses to go without', () => {
    expect(fileMounts(spec({ image: 'x' }).template, undefined)).toEqual([]);
    expect(() => createOptions(t, owner)).toThrow(/needs the directory of its files/);
  });
});
