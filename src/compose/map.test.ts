// The network rules of the compose mapping, as tables: what a compose service's network, ports,
// expose, networks, hostname, links and resolver fields become on jaco's cluster network (the
// default: services reach each other by name, as on a compose network) and under
// `network_mode: host`, with every warning and refusal by its field path. The corpus beside it
// (load.test.ts) shows whole files with their line numbers.
import { describe, expect, it } from 'vitest';
import { formatPath } from '../api/schema.js';
import type { ServiceSpec } from '../api/types.js';
import { mapCompose } from './map.js';
import { tableContext } from '../../test/support/compose-context.js';

type Obj = Record<string, unknown>;

const ctx = tableContext;

/** One service `app` (image i) with these fields, and the application's other top-level keys. */
const mapApp = (svc: Obj, top: Obj = {}) => mapCompose({ services: { app: { image: 'i', ...svc } }, ...top }, ctx);

/** An issue as a table states it: severity, field path, and a part of its message. */
type Said = [severity: 'warn' | 'refuse', path: string, fragment: string];

function check(got: ReturnType<typeof mapApp>, spec: Partial<ServiceSpec> | undefined, said: Said[]): void {
  const issues = got.issues.map((i) => [i.severity, formatPath(i.path), i.message] as const);
  expect(issues.map(([s, p]) => `${s} ${p}`), issues.map((i) => i.join(' ')).join('\n')).toEqual(said.map(([s, p]) => `${s} ${p}`));
  said.forEach(([, , fragment], k) => expect(issues[k]![2]).toContain(fragment));
  if (spec) for (const [k, v] of Object.entries(spec)) expect(got.spec.services.app![k as keyof ServiceSpec], k).toEqual(v);
}

const HOST = { network_mode: 'host' };

describe('the network a compose service gets', () => {
  it.each<[string, Obj, ServiceSpec['network'], Said[]]>([
    ['no network_mode: the cluster network', {}, 'cluster', []],
    ['bridge (compose’s default): the cluster network', { network_mode: 'bridge' }, 'cluster', []],
    ['host: its node’s network', HOST, 'host', []],
    ['none: the cluster network, said', { network_mode: 'none' }, 'cluster', [['warn', 'services.app.network_mode', 'jaco has no network-less service; it gets the cluster network']]],
    ['service:X is refused, naming the way', { network_mode: 'service:db' }, 'cluster', [['refuse', 'services.app.network_mode', 'cannot make one container join another’s network namespace (every replica has its own); reach db at its name instead']]],
    ['container:X is refused', { network_mode: 'container:abc' }, 'cluster', [['refuse', 'services.app.network_mode', 'reach abc at its name instead']]],
    ['a mode jaco does not know: the cluster network, said', { network_mode: 'mynet' }, 'cluster', [['warn', 'services.app.network_mode', 'network_mode mynet is not one jaco knows']]],
  ])('%s', (_n, svc, network, said) => check(mapApp(svc), { network }, said));
});

describe('ports and expose on the cluster network: container ports, published on the ingress, never host ports', () => {
  it.each<[string, Obj, ServiceSpec['ports'], Said[]]>([
    ['"8080:80" publishes container port 80 on 8080', { ports: ['8080:80'] }, [{ name: 'p80', containerPort: 80, published: 8080 }], []],
    ['"80:80" publishes 80', { ports: ['80:80'] }, [{ name: 'p80', containerPort: 80, published: 80 }], []],
    ['a number is a container port too', { ports: [80] }, [{ name: 'p80', containerPort: 80 }], [['warn', 'services.app.ports[0]', '80: docker compose would publish it on a random host port, and jaco does not: it is reachable at the service’s name (app:80); write "P:80" to publish it']]],
    ['"80" (target only): a container port, said', { ports: ['80'] }, [{ name: 'p80', containerPort: 80 }], [['warn', 'services.app.ports[0]', 'random host port']]],
    ['a host IP (short syntax) is said', { ports: ['127.0.0.1:8080:80'] }, [{ name: 'p80', containerPort: 80, published: 8080 }], [['warn', 'services.app.ports[0]', 'the host IP is ignored: a published port answers on every node’s ingress']]],
    ['a host IP with no published port', { ports: ['127.0.0.1::80'] }, [{ name: 'p80', containerPort: 80 }], [['warn', 'services.app.ports[0]', 'the host IP is ignored'], ['warn', 'services.app.ports[0]', 'random host port']]],
    ['a host IP (long syntax) is said at host_ip', { ports: [{ target: 80, published: '8080', host_ip: '127.0.0.1' }] }, [{ name: 'p80', containerPort: 80, published: 8080 }], [['warn', 'services.app.ports[0].host_ip', 'the host IP is ignored']]],
    ['long syntax: its name and app_protocol kept', { ports: [{ target: 80, published: 8080, name: 'web', app_protocol: 'http' }] }, [{ name: 'web', containerPort: 80, published: 8080, appProtocol: 'http' }], []],
    ['long syntax without published: a container port', { ports: [{ target: 80 }] }, [{ name: 'p80', containerPort: 80 }], [['warn', 'services.app.ports[0]', 'random host port']]],
    ['long syntax mode host is said', { ports: [{ target: 80, published: 8080, mode: 'host' }] }, [{ name: 'p80', containerPort: 80, published: 8080 }], [['warn', 'services.app.ports[0].mode', 'mode host is ignored']]],
    [
      'ranges publish each port',
      { ports: ['9000-9001:8000-8001'] },
      [
        { name: 'p8000', containerPort: 8000, published: 9000 },
        { name: 'p8001', containerPort: 8001, published: 9001 },
      ],
      [],
    ],
    [
      'a bare range: container ports, said once',
      { ports: ['9000-9001'] },
      [
        { name: 'p9000', containerPort: 9000 },
        { name: 'p9001', containerPort: 9001 },
      ],
      [['warn', 'services.app.ports[0]', '9000-9001: docker compose would publish it']],
    ],
    ['ranges of different lengths are refused', { ports: ['9000-9002:8000-8001'] }, undefined, [['refuse', 'services.app.ports[0]', 'the published and container ranges differ in length']]],
    ['a published UDP port is refused', { ports: ['5353:53/udp'] }, undefined, [['refuse', 'services.app.ports[0]', 'a UDP port cannot be published: the ingress forwards TCP only']]],
    ['a published UDP port (long syntax) is refused, even on its own number', { ports: [{ target: 53, published: 53, protocol: 'udp' }] }, undefined, [['refuse', 'services.app.ports[0]', 'the ingress forwards TCP only']]],
    [
      'a UDP container port is kept, said: the name answers TCP only',
      { ports: ['53/udp'] },
      [{ name: 'p53', containerPort: 53, protocol: 'udp' }],
      [
        ['warn', 'services.app.ports[0]', '53/udp: docker compose would publish it'],
        ['warn', 'services.app.ports[0]', '53/udp: the service’s name answers TCP only (its address is the ingress’s); a UDP port is reached at each replica’s own address'],
      ],
    ],
    [
      'UDP and TCP on one number: two ports, the UDP one named apart',
      { ports: [{ target: 53, protocol: 'udp' }, { target: 53 }] },
      [
        { name: 'p53-udp', containerPort: 53, protocol: 'udp' },
        { name: 'p53', containerPort: 53 },
      ],
      [
        ['warn', 'services.app.ports[0]', 'random host port'],
        ['warn', 'services.app.ports[0]', 'answers TCP only'],
        ['warn', 'services.app.ports[1]', 'random host port'],
      ],
    ],
    ['"80" then "8080:80": one port, published', { ports: ['80', '8080:80'] }, [{ name: 'p80', containerPort: 80, published: 8080 }], [['warn', 'services.app.ports[0]', 'random host port']]],
    ['a port said twice is one', { ports: ['8080:80', '8080:80'] }, [{ name: 'p80', containerPort: 80, published: 8080 }], []],
    [
      'one container port published on two ports: two, named apart',
      { ports: ['8080:80', '8081:80'] },
      [
        { name: 'p80', containerPort: 80, published: 8080 },
        { name: 'p80-8081', containerPort: 80, published: 8081 },
      ],
      [],
    ],
    [
      'expose: container ports (a range, a UDP one said)',
      { expose: ['80', '9000-9001', '53/udp'] },
      [
        { name: 'p80', containerPort: 80 },
        { name: 'p9000', containerPort: 9000 },
        { name: 'p9001', containerPort: 9001 },
        { name: 'p53', containerPort: 53, protocol: 'udp' },
      ],
      [['warn', 'services.app.expose[2]', '53/udp: the service’s name answers TCP only']],
    ],
    ['expose merged with ports, without duplicates', { ports: ['8080:80'], expose: [80, '81'] }, [{ name: 'p80', containerPort: 80, published: 8080 }, { name: 'p81', containerPort: 81 }], []],
  ])('%s', (_n, svc, ports, said) => check(mapApp(svc), ports ? { ports, network: 'cluster' } : undefined, said));

  it('never gives a cluster-network service a host port', () => {
    const got = mapApp({ ports: [80, '81', '8080:82', '127.0.0.1:8081:83', { target: 84, published: 8084 }, '9000-9001'], expose: ['85'] }).spec.services.app!;
    for (const p of got.ports ?? []) {
      expect(typeof p).toBe('object');
      expect(p).not.toHaveProperty('hostPort');
    }
    expect(got.ports).toHaveLength(8);
  });
});

describe('ports under network_mode: host (host ports, as before)', () => {
  it.each<[string, Obj, ServiceSpec['ports'], Said[]]>([
    ['"80": the fixed host port 80', { ports: ['80'] }, [80], []],
    ['"80:80": the fixed host port 80', { ports: ['80:80'] }, [80], []],
    ['"8080:80": bound as 80, published on 8080', { ports: ['8080:80'] }, [{ name: 'p80', containerPort: 80, hostPort: 80, published: 8080 }], []],
    ['"53:53/udp" keeps its protocol', { ports: ['53:53/udp'] }, [{ name: 'p53', containerPort: 53, hostPort: 53, protocol: 'udp' }], []],
    ['"53/udp" keeps its protocol', { ports: ['53/udp'] }, [{ name: 'p53', containerPort: 53, hostPort: 53, protocol: 'udp' }], []],
    ['a published UDP port is refused', { ports: ['5353:53/udp'] }, undefined, [['refuse', 'services.app.ports[0]', 'a UDP port cannot be published: the ingress forwards TCP only']]],
    ['"80" beside "8080:80" is one host port', { ports: ['80', '8080:80'] }, [{ name: 'p80', containerPort: 80, hostPort: 80, published: 8080 }], []],
    ['a host IP is said', { ports: ['127.0.0.1:80:80'] }, [80], [['warn', 'services.app.ports[0]', 'host networking: a container binds the addresses it chooses; the host IP is ignored']]],
    ['expose is said', { expose: ['80'] }, undefined, [['warn', 'services.app.expose', 'host networking: every port a container listens on is reachable on its node']]],
  ])('%s', (_n, svc, ports, said) => check(mapApp({ ...HOST, ...svc }), ports ? { ports, network: 'host' } : undefined, said));
});

describe('networks, hostname, links and the resolver', () => {
  it.each<[string, Obj, Obj, Partial<ServiceSpec> | undefined, Said[]]>([
    ['one network (list): fine', { networks: ['front'] }, {}, { network: 'cluster' }, []],
    ['one network (map, no options): fine', { networks: { front: null } }, {}, { network: 'cluster' }, []],
    ['several networks: no isolation, said', { networks: ['front', 'back'] }, {}, undefined, [['warn', 'services.app.networks', 'jaco does not isolate networks: on the one cluster network every service reaches every other by name (front, back are one)']]],
    [
      'a network’s aliases are more names of the service; fixed addresses are said at their field',
      { networks: { front: { aliases: ['web', 'Front.End', 'app'], ipv4_address: '172.16.0.5', ipv6_address: 'fd00::5', priority: 10 } } },
      {},
      { aliases: ['web', 'Front.End'] },
      [
        ['warn', 'services.app.networks.front.ipv4_address', 'ipv4_address is ignored: jaco allocates each replica’s addresses'],
        ['warn', 'services.app.networks.front.ipv6_address', 'ipv6_address is ignored'],
        ['warn', 'services.app.networks.front.priority', 'priority is ignored: jaco has one cluster network'],
      ],
    ],
    ['an alias the resolver cannot carry is said', { networks: { front: { aliases: ['ok', '-bad'] } } }, {}, { aliases: ['ok'] }, [['warn', 'services.app.networks.front.aliases[1]', '"-bad" cannot be a DNS name']]],
    ['networks under host networking', { ...HOST, networks: ['front'] }, {}, undefined, [['warn', 'services.app.networks', 'networks: host networking: the service shares its node’s network']]],
    ['top-level networks: no isolation', {}, { networks: { front: {}, back: {} } }, undefined, [['warn', 'networks', 'jaco does not isolate networks: every service on the cluster network reaches every other by name']]],
    ['an external top-level network: the same', {}, { networks: { outside: { external: true } } }, undefined, [['warn', 'networks', 'top-level networks (external ones too) are ignored']]],
    ['top-level networks when every service is on host networking', HOST, { networks: { front: {} } }, undefined, [['warn', 'networks', 'every service runs with host networking (network_mode: host)']]],
    ['hostname: the replica’s namespace’s', { hostname: 'web-1' }, {}, { container: { hostname: 'web-1' } }, []],
    ['a dotted hostname is refused', { hostname: 'web.example.com' }, {}, { container: undefined }, [['refuse', 'services.app.hostname', '"web.example.com" is not a host name jaco can give a replica: one RFC 1123 label']]],
    ['a hostname with _ is refused', { hostname: 'web_1' }, {}, undefined, [['refuse', 'services.app.hostname', 'RFC 1123']]],
    ['a hostname over 63 characters is refused', { hostname: 'a'.repeat(64) }, {}, undefined, [['refuse', 'services.app.hostname', 'at most 63']]],
    ['hostname under host networking', { ...HOST, hostname: 'web' }, {}, { container: undefined }, [['warn', 'services.app.hostname', 'host networking: a container has its node’s host name']]],
    ['links by name: fine', { links: ['db', 'cache:cache'] }, {}, { network: 'cluster' }, []],
    ['a link alias is said', { links: ['db', 'db:database'] }, {}, undefined, [['warn', 'services.app.links[1]', 'alias database is not supported: a service is found by its name only (db, and db.shop from other deployments)']]],
    ['links under host networking', { ...HOST, links: ['db'] }, {}, undefined, [['warn', 'services.app.links', 'links: host networking: no links']]],
    ['domainname', { domainname: 'example.com' }, {}, undefined, [['warn', 'services.app.domainname', 'jaco sets no domain name']]],
    ['mac_address', { mac_address: '02:42:ac:11:00:02' }, {}, undefined, [['warn', 'services.app.mac_address', 'its MAC address is not chosen']]],
    ['dns', { dns: ['1.1.1.1'] }, {}, undefined, [['warn', 'services.app.dns', 'a replica asks its node’s resolver, which answers the cluster’s names and forwards every other name']]],
    ['dns_search', { dns_search: ['example.com'] }, {}, undefined, [['warn', 'services.app.dns_search', 'a replica’s search domain is its deployment']]],
    ['dns_opt', { dns_opt: ['ndots:2'] }, {}, undefined, [['warn', 'services.app.dns_opt', 'a replica’s resolv.conf is jaco’s']]],
    ['domainname under host networking', { ...HOST, domainname: 'x' }, {}, undefined, [['warn', 'services.app.domainname', 'host networking: a container has its node’s domain name']]],
    ['mac_address under host networking', { ...HOST, mac_address: 'x' }, {}, undefined, [['warn', 'services.app.mac_address', 'host networking: a container has its node’s interfaces']]],
    ['dns under host networking', { ...HOST, dns: ['1.1.1.1'] }, {}, undefined, [['warn', 'services.app.dns', 'host networking: a container uses its node’s resolver']]],
  ])('%s', (_n, svc, top, spec, said) => check(mapApp(svc, top), spec, said));

  it('no message about a cluster-network service speaks of host networking, and each one about a host-network service does', () => {
    const fields: Obj = { networks: ['a', 'b'], hostname: 'web', links: ['db:x'], domainname: 'x', mac_address: 'x', dns: ['x'], dns_search: ['x'], dns_opt: ['x'], expose: ['80'], ports: ['1.2.3.4:80:80'] };
    const cluster = mapApp(fields, { networks: { a: {} } }).issues;
    const host = mapApp({ ...HOST, ...fields }, { networks: { a: {} } }).issues;
    expect(cluster.length).toBeGreaterThan(5);
    expect(cluster.filter((i) => /host network/i.test(i.message))).toEqual([]);
    expect(host.filter((i) => !/host network/i.test(i.message))).toEqual([]);
  });

  it('top-level networks are said the cluster’s way when any service is on it', () => {
    const got = mapCompose({ services: { a: { image: 'i', network_mode: 'host' }, b: { image: 'i' } }, networks: { x: {} } }, ctx);
    expect(got.issues.map((i) => i.message)).toEqual([expect.stringContaining('jaco does not isolate networks')]);
  });
});

describe('service names: compose’s, mapped to jaco’s, still answered', () => {
  const names = (services: Obj) => {
    const got = mapCompose({ services }, ctx);
    return { services: Object.fromEntries(Object.entries(got.spec.services).map(([n, s]) => [n, { aliases: s.aliases, dependsOn: s.dependsOn }])), issues: got.issues.map((i) => `${i.severity} ${formatPath(i.path)}: ${i.message}`) };
  };
  it.each<[string, string, string]>([
    ['a jaco name stays', 'web', 'web'],
    ['_ becomes -', 'web_app', 'web-app'],
    ['upper case is lowered, . becomes -', 'Web.App', 'web-app'],
    ['a run of them is one -', 'my__db--1', 'my-db-1'],
    ['none at either end', '_private_', 'private'],
  ])('%s: %s → %s', (_what, compose, jaco) => {
    const got = names({ [compose]: { image: 'i' } });
    expect(Object.keys(got.services)).toEqual([jaco]);
    expect(got.services[jaco]!.aliases).toEqual(compose === jaco ? undefined : [compose]);
    expect(got.issues).toEqual([]);
  });

  it('two compose names that map to one jaco name are refused, both named', () => {
    const got = names({ web_app: { image: 'i' }, 'Web.App': { image: 'i' }, db: { image: 'i' } });
    expect(Object.keys(got.services)).toEqual(['db']);
    expect(got.issues).toEqual(['refuse services.Web.App: services "web_app" and "Web.App" are both "web-app" as jaco names (lowercase letters, digits and -): rename one']);
  });

  it('a name with nothing to make a jaco name of is refused', () => {
    expect(names({ ___: { image: 'i' } }).issues).toEqual(['refuse services.___: service name "___" has no letter or digit to make a jaco name of: rename it']);
  });

  it('depends_on names the dependency’s jaco name; the compose name and network aliases are aliases', () => {
    const got = names({ web_app: { image: 'i', depends_on: { my_db: { condition: 'service_healthy' } }, networks: { n: { aliases: ['front', 'web_app'] } } }, my_db: { image: 'i' } });
    expect(got.services).toEqual({ 'web-app': { aliases: ['web_app', 'front'], dependsOn: { 'my-db': { condition: 'service_healthy' } } }, 'my-db': { aliases: ['my_db'], dependsOn: undefined } });
    expect(got.issues).toEqual([]);
  });

  it('a built image without image: is named after the jaco name', () => {
    expect(mapCompose({ services: { web_app: { build: '.' } } }, ctx).spec.services['web-app']!.image).toBe('shop-web-app');
  });
});

describe('anonymous volumes: the container’s own', () => {
  it.each<[string, unknown, ServiceSpec['volumes']]>([
    ['short syntax', '/var/lib/mysql', [{ type: 'anonymous', target: '/var/lib/mysql' }]],
    ['long syntax without a source', { type: 'volume', target: '/data', read_only: true }, [{ type: 'anonymous', target: '/data', readOnly: true }]],
  ])('%s: any number of replicas, each its own', (_what, v, want) => check(mapApp({ volumes: [v], deploy: { replicas: 3 } }), { volumes: want, replicas: 3 }, []));

  it('a bind without a source is refused', () => check(mapApp({ volumes: [{ type: 'bind', target: '/x' }] }), undefined, [['refuse', 'services.app.volumes[0]', 'a bind mount needs a source']]));
});

describe('sysctls, security_opt, ipc, pid: passed to Docker where the replica alone is touched', () => {
  const priv = (svc: Obj) => mapCompose({ services: { app: { image: 'i', ...svc } } }, { ...ctx, allowPrivileged: true });
  it.each<[string, Obj, ServiceSpec['container'], Said[]]>([
    ['net.* and IPC sysctls (map or list)', { sysctls: ['net.core.somaxconn=1024', 'kernel.shmmax=68719476736'] }, { sysctls: { 'net.core.somaxconn': '1024', 'kernel.shmmax': '68719476736' } }, []],
    ['fs.mqueue.*', { sysctls: { 'fs.mqueue.msg_max': 100 } }, { sysctls: { 'fs.mqueue.msg_max': '100' } }, []],
    ['a sysctl that is not namespaced is refused', { sysctls: { 'vm.max_map_count': 262144 } }, undefined, [['refuse', 'services.app.sysctls.vm.max_map_count', 'is not namespaced']]],
    ['net.* under host networking is refused', { ...HOST, sysctls: { 'net.ipv4.ip_forward': 1 } }, undefined, [['refuse', 'services.app.sysctls.net.ipv4.ip_forward', 'host networking: the network namespace is the node']]],
    ['security_opt passes', { security_opt: ['no-new-privileges:true', 'label=disable'] }, { securityOpt: ['no-new-privileges:true', 'label=disable'] }, []],
    ['an unconfined profile needs --allow-privileged', { security_opt: ['seccomp=unconfined'] }, undefined, [['refuse', 'services.app.security_opt[0]', 'refused unless you pass --allow-privileged']]],
    ['ipc shareable', { ipc: 'shareable' }, { ipc: 'shareable' }, []],
    ['ipc host needs --allow-privileged', { ipc: 'host' }, undefined, [['refuse', 'services.app.ipc', 'refused unless you pass --allow-privileged']]],
    ['pid host needs --allow-privileged', { pid: 'host' }, undefined, [['refuse', 'services.app.pid', 'refused unless you pass --allow-privileged']]],
    ['another service’s namespace is refused', { ipc: 'service:db', pid: 'container:x' }, undefined, [['refuse', 'services.app.ipc', 'cannot make a replica join'], ['refuse', 'services.app.pid', 'cannot make a replica join']]],
  ])('%s', (_what, svc, container, said) => {
    const got = mapApp(svc);
    check(got, undefined, said);
    if (container) expect(got.spec.services.app!.container).toEqual(container);
  });

  it('host ipc, host pid and unconfined profiles with --allow-privileged', () => {
    const got = priv({ ipc: 'host', pid: 'host', security_opt: ['apparmor=unconfined'] });
    expect(got.issues).toEqual([]);
    expect(got.spec.services.app!.container).toEqual({ ipc: 'host', pid: 'host', securityOpt: ['apparmor=unconfined'] });
  });
});

describe('runtime, devices and GPUs by id: passed to Docker, placed where the node has them', () => {
  const gpuRequest = (extra: Obj) => ({ deploy: { resources: { reservations: { devices: [{ capabilities: ['gpu'], ...extra }] } } } });
  it.each<[string, Obj, Partial<ServiceSpec>, Said[]?]>([
    ['runtime', { runtime: 'runsc' }, { container: { runtime: 'runsc' } }],
    ['devices, short syntax', { devices: ['/dev/fuse', '/dev/sda:/dev/xvda:rwm'] }, { container: { devices: ['/dev/fuse', '/dev/sda:/dev/xvda:rwm'] } }],
    ['devices, long syntax', { devices: [{ source: '/dev/kvm', permissions: 'rw' }, { source: '/dev/sdb', target: '/dev/xvdb' }] }, { container: { devices: ['/dev/kvm:rw', '/dev/sdb:/dev/xvdb'] } }],
    ['a CDI device name is refused', { devices: ['nvidia.com/gpu=all'] }, {}, [['refuse', 'services.app.devices[0]', 'a CDI device name is not supported']]],
    ['device_ids: GPUs by id', gpuRequest({ device_ids: ['0', 'GPU-5f2c'] }), { resources: { gpuIds: ['0', 'GPU-5f2c'] } }],
    ['gpus: with device_ids (compose’s long gpus)', { gpus: [{ capabilities: ['gpu'], device_ids: ['1'] }] }, { resources: { gpuIds: ['1'] } }],
    ['device_ids with a count is refused', gpuRequest({ device_ids: ['0'], count: 1 }), {}, [['refuse', 'services.app.deploy.resources.reservations.devices[0].count', 'count and device_ids cannot both be set']]],
    [
      'by count and by id at once is refused',
      { deploy: { resources: { reservations: { devices: [{ capabilities: ['gpu'], count: 1 }, { capabilities: ['gpu'], device_ids: ['1'] }] } } } },
      {},
      [['refuse', 'services.app.deploy.resources.reservations.devices', 'GPUs asked for both by count and by device_ids']],
    ],
  ])('%s', (_what, svc, spec, said = []) => check(mapApp(svc), spec, said));
});

describe('depends_on restart: true', () => {
  it('is kept: apply folds the dependency’s spec hash into the service, so a recreated dependency rolls it', () => {
    const got = mapCompose({ services: { db: { image: 'i' }, web: { image: 'i', depends_on: { db: { condition: 'service_healthy', restart: true } } }, worker: { image: 'i', depends_on: { db: { condition: 'service_started', restart: false } } } } }, ctx);
    expect(got.issues).toEqual([]);
    expect(got.spec.services.web!.dependsOn).toEqual({ db: { condition: 'service_healthy', restart: true } });
    expect(got.spec.services.worker!.dependsOn).toEqual({ db: { condition: 'service_started' } });
  });
});

describe('storage_opt: size is the replica\'s scratch disk', () => {
  it.each<[string, Obj, Partial<ServiceSpec> | undefined, Said[]]>([
    ['size in compose bytes', { storage_opt: { size: '20G' } }, { resources: { disk: '20Gi' } }, []],
    ['beside mem_limit', { mem_limit: '1g', storage_opt: { size: '512m' } }, { resources: { memory: '1Gi', disk: '512Mi' } }, []],
    ['not a size', { storage_opt: { size: 'lots' } }, undefined, [['refuse', 'services.app.storage_opt.size', 'not a size']]],
    ['another driver option', { storage_opt: { dm_basesize: '10G' } }, undefined, [['refuse', 'services.app.storage_opt.dm_basesize', 'maps size alone']]],
  ])('%s', (_name, svc, spec, said) => check(mapApp(svc), spec, said));
});
