import { describe, expect, it } from 'vitest';
import { formatPath, schemas } from './schema.js';
import { deploymentRuleIssues, publishedPortConflicts, replicaIdConflicts } from './rules.js';
import type { Deployment, ServiceSpec } from './types.js';

const dep = (services: Record<string, unknown>, name = 'app'): Deployment => ({ apiVersion: 'jaco.dev/v1', kind: 'Deployment', metadata: { name }, spec: { services } }) as Deployment;
const issues = (o: unknown) => schemas().validate(o).map((i) => `${formatPath(i.path)}: ${i.message} [${i.rule}]`);

describe('Deployment schema', () => {
  it('accepts a full service', () => {
    const svc: ServiceSpec = {
      image: 'jaco-demo/busybox:1',
      command: ['sh', '-c'],
      args: ['sleep 1000'],
      env: { A: '1' },
      replicas: 3,
      placement: { mode: 'spread', nodeSelector: { zone: 'a' } },
      resources: { cpu: '500m', memory: '128Mi', gpus: 0 },
      ports: [8080],
      healthcheck: { test: ['CMD', 'true'], interval: '5s', timeout: '1s', retries: 3, startPeriod: '1m30s' },
      stopSignal: 'SIGINT',
      stopGracePeriod: '30s',
      volumes: [],
      priority: 10,
      rebalance: 'disabled',
      update: { order: 'stop-first', stepTimeout: '2m', maxUnavailable: 1, minReadyTime: '3s' },
    };
    expect(issues(dep({ web: svc }))).toEqual([]);
    expect(issues(dep({ web: { image: 'x', resources: { cpu: 2, memory: 1048576 } } }))).toEqual([]);
  });

  it.each<[string, unknown, string]>([
    ['missing image', dep({ web: {} }), 'spec.services.web.image: is required [required]'],
    ['unknown field', dep({ web: { image: 'x', imagee: 'y' } }), 'spec.services.web.imagee: unknown field [additionalProperties]'],
    ['unknown top-level field', { ...dep({ web: { image: 'x' } }), extra: 1 }, 'extra: unknown field [additionalProperties]'],
    ['replicas as string', dep({ web: { image: 'x', replicas: 'three' } }), 'spec.services.web.replicas: must be integer [type]'],
    ['negative replicas', dep({ web: { image: 'x', replicas: -1 } }), 'spec.services.web.replicas: must be >= 0 [minimum]'],
    ['bad mode', dep({ web: { image: 'x', placement: { mode: 'random' } } }), 'spec.services.web.placement.mode: must be one of "spread", "pack", "hosts", "global" [enum]'],
    ['port out of range', dep({ web: { image: 'x', ports: [70000] } }), 'spec.services.web.ports[0]: must be <= 65535 [maximum]'],
    ['bad duration', dep({ web: { image: 'x', stopGracePeriod: '10' } }), 'spec.services.web.stopGracePeriod: "10" must match pattern'],
    ['bad cpu quantity', dep({ web: { image: 'x', resources: { cpu: '2 cores' } } }), 'spec.services.web.resources.cpu: must be a number or a quantity string'],
    ['bad memory quantity', dep({ web: { image: 'x', resources: { memory: '1.5Gi' } } }), 'spec.services.web.resources.memory: must be a number or a quantity string'],
    ['no services', dep({}), 'spec.services: must NOT have fewer than 1 properties [minProperties]'],
    ['wrong apiVersion', { ...dep({ web: { image: 'x' } }), apiVersion: 'v1' }, 'apiVersion: must be "jaco.dev/v1" [const]'],
    ['bad name', dep({ web: { image: 'x' } }, 'My_App'), 'metadata.name: "My_App" must match pattern'],
    ['unknown kind', { apiVersion: 'jaco.dev/v1', kind: 'Pod', metadata: { name: 'x' } }, 'kind: unknown kind "Pod"'],
    ['not a mapping', 'hello', ': must be a mapping'],
    ['volume without target', dep({ web: { image: 'x', volumes: [{ type: 'volume', source: 'd' }] } }), 'spec.services.web.volumes[0].target: is required [required]'],
    ['long-form port without containerPort', dep({ web: { image: 'x', ports: [{ name: 'http', published: 80 }] } }), 'spec.services.web.ports[0].containerPort: is required [required]'],
    ['long-form port with an unknown field', dep({ web: { image: 'x', ports: [{ containerPort: 80, hostport: 1 }] } }), 'spec.services.web.ports[0].hostport: unknown field [additionalProperties]'],
    ['a port that is neither', dep({ web: { image: 'x', ports: ['80'] } }), 'spec.services.web.ports[0]: must be integer or object [anyOf]'],
    ['health test too short', dep({ web: { image: 'x', healthcheck: { test: ['CMD'] } } }), 'spec.services.web.healthcheck.test: must NOT have fewer than 2 items [minItems]'],
    ['an http check without a port', dep({ web: { image: 'x', healthcheck: { http: { path: '/' } } } }), 'spec.services.web.healthcheck.http.port: is required [required]'],
    ['an http check path without its slash', dep({ web: { image: 'x', healthcheck: { http: { path: 'health', port: 80 } } } }), 'spec.services.web.healthcheck.http.path: "health" must match pattern'],
    ['an http check expecting no status', dep({ web: { image: 'x', healthcheck: { http: { port: 80, expect: 42 } } } }), 'spec.services.web.healthcheck.http.expect: must be >= 100'],
    ['a tcp check on port 0', dep({ web: { image: 'x', healthcheck: { tcp: { port: 0 } } } }), 'spec.services.web.healthcheck.tcp.port: must be >= 1'],
  ])('rejects %s', (_name, obj, want) => {
    const got = issues(obj);
    expect(got.some((g) => g.startsWith(want)), `${got.join('\n')}\n does not contain\n${want}`).toBe(true);
  });

  it.each([0.5, 2, '0.25', '500m'])('accepts the CPU quantity %j (a YAML number as Kubernetes and compose write it)', (cpu) => {
    expect(issues(dep({ web: { image: 'x', resources: { cpu, memory: 134217728 } } }))).toEqual([]);
  });

  it('accepts both port forms side by side', () => {
    expect(issues(dep({ web: { image: 'x', ports: [8080, { name: 'http', containerPort: 80, published: 18080, protocol: 'tcp' }, { containerPort: 90, hostPort: 9090 }], deregistrationDelay: '2s' } }))).toEqual([]);
  });

  it('reports every error at once', () => {
    expect(issues(dep({ web: { image: 'x', replicas: 'a', ports: ['b'], bogus: 1 } })).length).toBeGreaterThanOrEqual(3);
  });
});

describe('cross-field rules', () => {
  const rules = (services: Record<string, ServiceSpec>, name = 'app') => deploymentRuleIssues(dep(services, name)).map((i) => `${formatPath(i.path)}: ${i.message}`);

  it.each<[string, Record<string, ServiceSpec>, string]>([
    ['an anonymous volume with a source', { x: { image: 'i', volumes: [{ type: 'anonymous', source: 'd', target: '/d' } as never] } }, 'spec.services.x.volumes[0].source: service "x": an anonymous volume has no source (name it, type: volume, to keep it)'],
    ['a named volume without a source', { x: { image: 'i', volumes: [{ type: 'volume', target: '/d' } as never] } }, 'spec.services.x.volumes[0]: service "x": a volume mount needs a source (an anonymous volume is type: anonymous)'],
    ['an alias that is another service’s name (any case)', { web: { image: 'i', aliases: ['DB'] }, db: { image: 'i' } }, 'spec.services.web.aliases[0]: alias "DB" is the name of service "db": a name finds one service'],
    ['an alias two services give', { a: { image: 'i', aliases: ['x'] }, b: { image: 'i', aliases: ['x'] } }, 'spec.services.b.aliases[0]: alias "x" is an alias of service "a": a name finds one service'],
    ['global with replicas', { x: { image: 'i', replicas: 2, placement: { mode: 'global' } } }, 'spec.services.x.replicas: service "x" uses placement=global; remove replicas (global runs one replica per ready node)'],
    ['volumes with 2 replicas', { db: { image: 'i', replicas: 2, volumes: [{ type: 'volume', source: 'data', target: '/d' }] } }, 'spec.services.db.replicas: service "db" has named volumes; it may run at most 1 replica'],
    ['a writable bind with 2 replicas', { x: { image: 'i', replicas: 2, volumes: [{ type: 'bind', source: '/srv/x', target: '/x' }] } }, 'spec.services.x.replicas: service "x" has a writable bind mount (/srv/x); its data stays on one host, so it may run at most 1 replica, got 2'],
    ['global with volumes', { db: { image: 'i', placement: { mode: 'global' }, volumes: [{ type: 'volume', source: 'data', target: '/d' }] } }, 'spec.services.db.volumes: service "db" has named volumes and uses placement=global'],
    ['hosts without hosts', { x: { image: 'i', placement: { mode: 'hosts' } } }, 'spec.services.x.placement.hosts: service "x" uses placement=hosts; list at least one host in placement.hosts'],
    ['hosts with an empty list', { x: { image: 'i', placement: { mode: 'hosts', hosts: [] } } }, 'spec.services.x.placement.hosts: service "x" uses placement=hosts'],
    ['more replicas than hosts', { x: { image: 'i', replicas: 3, placement: { mode: 'hosts', hosts: ['a', 'b'] } } }, 'spec.services.x.replicas: service "x" wants 3 replicas but placement.hosts lists 2 host(s)'],
    ['hosts listed without hosts mode', { x: { image: 'i', placement: { hosts: ['a'] } } }, 'spec.services.x.placement.hosts: service "x" lists placement.hosts but its mode is spread'],
    ['health test form', { x: { image: 'i', healthcheck: { test: ['RUN', 'true'] } } }, 'spec.services.x.healthcheck.test[0]: service "x": healthcheck.test must start with "CMD" or "CMD-SHELL"'],
    ['two health check forms', { x: { image: 'i', healthcheck: { test: ['CMD', 'true'], http: { port: 80 } } } }, 'spec.services.x.healthcheck.http: service "x": a healthcheck has one form, got test and http; keep one of test, http, tcp'],
    ['a health check of no form', { x: { image: 'i', healthcheck: { interval: '5s' } } }, 'spec.services.x.healthcheck: service "x": a healthcheck needs one of test (run in the container), http or tcp (run by the node-agent)'],
    ['a check port named but not listed', { x: { image: 'i', ports: [{ name: 'web', containerPort: 80 }], healthcheck: { tcp: { port: 'http' } } } }, 'spec.services.x.healthcheck.tcp.port: service "x": healthcheck.tcp.port names port "http", which the service does not list (its ports: web)'],
    ['relative bind source', { x: { image: 'i', volumes: [{ type: 'bind', source: 'data', target: '/d' }] } }, 'spec.services.x.volumes[0].source: service "x": a bind mount\'s source must be an absolute host path'],
    ['bad volume name', { x: { image: 'i', volumes: [{ type: 'volume', source: '/abs', target: '/d' }] } }, 'spec.services.x.volumes[0].source: service "x": volume name "/abs"'],
    ['same target twice', { x: { image: 'i', volumes: [{ type: 'volume', source: 'a', target: '/d' }, { type: 'volume', source: 'b', target: '/d' }] } }, 'spec.services.x.volumes[1].target: service "x": two volumes mount at /d'],
    ['duplicate port', { x: { image: 'i', ports: [80, 80] } }, 'spec.services.x.ports[1]: service "x" lists port 80 twice'],
    ['a published UDP port', { x: { image: 'i', ports: [{ containerPort: 53, hostPort: 53, published: 5353, protocol: 'udp' }] } }, 'spec.services.x.ports[0].published: service "x" publishes UDP port 5353: the ingress forwards TCP only'],
    ['a published UDP port on the cluster network', { x: { image: 'i', network: 'cluster', ports: [{ containerPort: 53, published: 53, protocol: 'udp' }] } }, 'spec.services.x.ports[0].published: service "x" publishes UDP port 53: the ingress forwards TCP only'],
    ['a dependency that is not a service', { web: { image: 'i', dependsOn: { db: { condition: 'service_started' } } } }, 'spec.services.web.dependsOn.db: service "web" depends on "db", which is not a service of this deployment'],
    ['a dependency cycle', { a: { image: 'i', dependsOn: { b: { condition: 'service_started' } } }, b: { image: 'i', dependsOn: { a: { condition: 'service_healthy' } } } }, 'spec.services.a.dependsOn: dependsOn forms a cycle: a → b → a'],
    ['bad env name', { x: { image: 'i', env: { '1AB': '1' } } }, 'spec.services.x.env.1AB: service "x": "1AB" is not a valid environment variable name'],
    ['bad service name', { Web_1: { image: 'i' } }, 'spec.services.Web_1: service name "Web_1" must be lowercase'],
    ['a canary of a global service', { x: { image: 'i', placement: { mode: 'global' }, update: { canary: 1 } } }, 'spec.services.x.update.canary: service "x" uses placement=global; update.canary needs replicas'],
    ['a canary beside a volume writer', { db: { image: 'i', volumes: [{ type: 'volume', source: 'data', target: '/d' }], update: { canary: 1 } } }, 'spec.services.db.update.canary: service "db" mounts volume "data" read-write; a canary would be a second writer'],
    ['autoPromote without canary', { x: { image: 'i', update: { autoPromote: '1m' } } }, 'spec.services.x.update.autoPromote: service "x" sets update.autoPromote without update.canary'],
    ['GPUs by count and by id at once', { x: { image: 'i', resources: { gpus: 1, gpuIds: ['0'] } } }, 'spec.services.x.resources.gpuIds: service "x" sets both resources.gpus and resources.gpuIds'],
    ['a job publishing a port', { m: { image: 'i', mode: 'job', ports: [{ containerPort: 80, published: 8080 }] } }, 'spec.services.m.ports: service "m" is a job (mode: job) and publishes port 8080'],
    ['a global job', { m: { image: 'i', mode: 'job', placement: { mode: 'global' } } }, 'spec.services.m.placement.mode: service "m" is a job (mode: job) and uses placement=global'],
    ['a job with a canary', { m: { image: 'i', mode: 'job', update: { canary: 1 } } }, 'spec.services.m.update.canary: service "m" is a job (mode: job); a job is not rolled out'],
    ['job retries without mode: job', { m: { image: 'i', job: { attempts: 2 } } }, 'spec.services.m.job: service "m" sets job without mode: job'],
    ['waiting for a service to complete that is no job', { m: { image: 'i' }, web: { image: 'i', dependsOn: { m: { condition: 'service_completed_successfully' } } } }, 'spec.services.web.dependsOn.m.condition: service "web" waits for "m" to complete (service_completed_successfully), but "m" is not a job'],
    [
      'a named volume written by one service and mounted by another',
      { db: { image: 'i', volumes: [{ type: 'volume', source: 'data', target: '/d' }] }, backup: { image: 'i', volumes: [{ type: 'volume', source: 'data', target: '/b', readOnly: true }] } },
      'spec.services.backup.volumes[0]: volume "data" is mounted read-write by service "db" and also by service "backup"; a named volume has one writer',
    ],
  ])('%s', (_n, services, want) => {
    const got = rules(services);
    expect(got.some((g) => g.startsWith(want)), `${got.join('\n')}\n does not contain\n${want}`).toBe(true);
  });

  it('long deployment+service names', () => expect(rules({ ['s'.repeat(40)]: { image: 'i' } }, 'd'.repeat(20))[0]).toContain('may have at most 52'));

  it.each<[string, Record<string, ServiceSpec>]>([
    ['global without replicas', { x: { image: 'i', placement: { mode: 'global' } } }],
    ['one replica with a volume', { db: { image: 'i', volumes: [{ type: 'volume', source: 'data', target: '/d' }] } }],
    ['hosts with enough hosts', { x: { image: 'i', replicas: 2, placement: { mode: 'hosts', hosts: ['a', 'b'] } } }],
    ['CMD-SHELL health', { x: { image: 'i', healthcheck: { test: ['CMD-SHELL', 'wget -q -O- 127.0.0.1:8080'] } } }],
    ['an http check on a named port', { x: { image: 'i', ports: [{ name: 'web', containerPort: 80 }], healthcheck: { http: { path: '/healthz', port: 'web', expect: 204 } } } }],
    ['a tcp check on a container port', { x: { image: 'i', network: 'cluster', healthcheck: { tcp: { port: 6379 } } } }],
    ['absolute bind', { x: { image: 'i', volumes: [{ type: 'bind', source: '/srv/x', target: '/x', readOnly: true }] } }],
    ['read-only binds with 3 replicas (configs, secrets)', { x: { image: 'i', replicas: 3, volumes: [{ type: 'bind', source: '/etc/app.conf', target: '/app.conf', readOnly: true }] } }],
    ['a global service with binds (a log shipper: /var/log read-only, its positions writable)', { x: { image: 'i', placement: { mode: 'global' }, volumes: [{ type: 'bind', source: '/var/log', target: '/host/log', readOnly: true }, { type: 'bind', source: '/var/lib/shipper', target: '/state' }] } }],
    ['a named volume shared read-only by two services', { a: { image: 'i', volumes: [{ type: 'volume', source: 'assets', target: '/a', readOnly: true }] }, b: { image: 'i', volumes: [{ type: 'volume', source: 'assets', target: '/b', readOnly: true }] } }],
    ['a UDP port that is not published', { x: { image: 'i', ports: [{ containerPort: 53, hostPort: 53, protocol: 'udp' }, { containerPort: 80, published: 8080, protocol: 'tcp' }] } }],
    ['anonymous volumes with 3 replicas (each container its own)', { x: { image: 'i', replicas: 3, volumes: [{ type: 'anonymous', target: '/var/lib/mysql' }] } }],
    ['a job gating a service', { m: { image: 'i', mode: 'job', job: { attempts: 1, backoff: '2s' }, ports: [{ containerPort: 80 }] }, web: { image: 'i', dependsOn: { m: { condition: 'service_completed_successfully' } } } }],
    ['one service mounting its volume twice', { db: { image: 'i', volumes: [{ type: 'volume', source: 'data', target: '/d' }, { type: 'volume', source: 'data', target: '/e', readOnly: true }] } }],
  ])('accepts %s', (_n, services) => expect(rules(services)).toEqual([]));
});

describe('names', () => {
  const desired = (name: string) => ({
    apiVersion: 'jaco.dev/v1',
    kind: 'ReplicaCounter',
    metadata: { name },
    spec: { next: 1 },
  });
  it('allows dots in the names of internal kinds (host names, global replica ids)', () => expect(issues(desired('app-agent-host.example.com'))).toEqual([]));
  it('keeps deployment names to DNS labels', () => expect(issues(dep({ web: { image: 'x' } }, 'my.app'))[0]).toContain('metadata.name: "my.app" must match pattern'));
});

describe('replica id conflicts across deployments', () => {
  const svc = (mode?: 'global') => ({ image: 'x', ...(mode ? { placement: { mode } } : {}) });
  it('refuses equal stems', () => {
    expect(replicaIdConflicts([{ name: 'a-b', spec: { services: { c: svc() } } }, { name: 'a', spec: { services: { 'b-c': svc() } } }])).toEqual([
      'deployment "a" service "b-c" and deployment "a-b" service "c" would both name replicas "a-b-c-<n>"; rename one',
    ]);
  });
  it('refuses a global stem that another stem begins with', () => {
    expect(replicaIdConflicts([{ name: 'app', spec: { services: { agent: svc('global'), 'agent-node': svc() } } }])[0]).toContain('global service "agent"');
  });
  it('accepts services whose stems only share a prefix when neither is global', () => {
    expect(replicaIdConflicts([{ name: 'app', spec: { services: { web: svc(), 'web-admin': svc() } } }, { name: 'app-web', spec: { services: { x: svc() } } }])).toEqual([]);
  });
});

describe('published port conflicts (apply, across every deployment that would exist)', () => {
  const pub = (published: number, extra: object = {}) => ({ image: 'x', ports: [{ name: 'http', containerPort: 80, published, ...extra }] }) as ServiceSpec;
  const d = (name: string, services: Record<string, ServiceSpec>) => ({ name, spec: { services } });
  const nodes = [
    { node: 'node-2', range: { min: 20000, max: 32767 } },
    { node: 'node-1', range: { min: 20000, max: 32767 } },
    { node: 'edge', range: { min: 40000, max: 40100 } },
  ];
  it.each<[string, { name: string; spec: { services: Record<string, ServiceSpec> } }[], string[]]>([
    ['distinct ports, outside every range', [d('a', { web: pub(18080) }), d('b', { web: pub(18081) })], []],
    ['one service, one port (re-applied)', [d('a', { web: pub(18080) })], []],
    ['a UDP port is not routed: no clash', [d('a', { web: pub(18080) }), d('b', { dns: pub(18080, { protocol: 'udp' }) })], []],
    ['one port published by two deployments', [d('b', { web: pub(18080) }), d('a', { api: pub(18080) })], ['port 18080 is published by deployment "a" service "api" and by deployment "b" service "web"; every ingress answers a published port for one service: change one']],
    ['one port published by two services of one deployment', [d('a', { web: pub(18080), api: pub(18080) })], ['port 18080 is published by deployment "a" service "api" and by deployment "a" service "web"; every ingress answers a published port for one service: change one']],
    ['a published port that is another service\'s fixed host port', [d('a', { web: pub(18080) }), d('b', { db: { image: 'x', ports: [18080] } })], ['port 18080 is published by deployment "a" service "web" and is a fixed host port of deployment "b" service "db"; the ingress binds it on every node\'s address: change one']],
    ['a published port inside two nodes\' dynamic range, named once', [d('a', { web: pub(20001) })], ['port 20001 published by deployment "a" service "web" lies in the dynamic host port range 20000-32767 of nodes node-1, node-2, from which the scheduler hands ports to replicas: publish a port outside it']],
    ['a published port inside one node\'s own range', [d('a', { web: pub(40000) })], ['port 40000 published by deployment "a" service "web" lies in the dynamic host port range 40000-40100 of node edge, from which the scheduler hands ports to replicas: publish a port outside it']],
  ])('%s', (_name, deployments, want) => {
    expect(publishedPortConflicts(deployments, nodes)).toEqual(want);
  });
  it("checks the agents' default range while no node is registered", () => {
    expect(publishedPortConflicts([d('a', { web: pub(32767) })], [])).toEqual([
      'port 32767 published by deployment "a" service "web" lies in the dynamic host port range 20000-32767 (the agents\' default), from which the scheduler hands ports to replicas: publish a port outside it',
    ]);
    expect(publishedPortConflicts([d('a', { web: pub(19999) })], [])).toEqual([]);
  });
});
