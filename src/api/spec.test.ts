import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { canonicalJson, isStateful, jsonEqual, servicesByPriority, specHash, startsFirst, withDefaults, withDependencyHashes, withRestartDependents } from './spec.js';
import type { DeploymentSpec, ServiceSpec } from './types.js';

const base: ServiceSpec = { image: 'jaco-demo/busybox:1', command: ['sh', '-c', 'sleep 1000'], env: { A: '1', B: '2' }, replicas: 2 };

describe('specHash', () => {
  it('is a SHA-256 hex digest', () => expect(specHash(base)).toMatch(/^[0-9a-f]{64}$/));

  it('is stable under cosmetic edits: comments, key order, formatting', () => {
    const a = parse(`image: jaco-demo/busybox:1\ncommand: [sh, -c, "sleep 1000"]\nenv: {A: "1", B: "2"}\nreplicas: 2\n`) as ServiceSpec;
    const b = parse(`# the web tier\nreplicas: 2   # two of them\nenv:\n  B: "2"\n  A: "1"\ncommand:\n  - sh\n  - -c\n  - sleep 1000\nimage: jaco-demo/busybox:1\n`) as ServiceSpec;
    expect(specHash(a)).toBe(specHash(b));
  });

  it('is the hash earlier releases gave a service without Docker create options (an upgrade rolls nothing)', () =>
    expect(specHash(base)).toBe('0a315f814d4cd30d1bbc80049ecf51fc391ddffa9ebff2b5539d8f422953cbde'));

  it('is stable when defaults are written out or quantities are spelled differently', () => {
    expect(specHash({ ...base, stopSignal: 'SIGTERM', stopGracePeriod: '10s' })).toBe(specHash(base));
    expect(specHash({ ...base, resources: { cpu: '500m', memory: '1Gi' } })).toBe(specHash({ ...base, resources: { cpu: '0.5', memory: '1024Mi' } }));
  });

  it.each<[string, Partial<ServiceSpec>]>([
    ['image', { image: 'jaco-demo/busybox:2' }],
    ['env value (same keys)', { env: { A: '1', B: '3' } }],
    ['command', { command: ['sh', '-c', 'sleep 5'] }],
    ['healthcheck', { healthcheck: { test: ['CMD', 'true'] } }],
    ['an http check', { healthcheck: { http: { port: 80 } } }],
    ['a tcp check', { healthcheck: { tcp: { port: 80 } } }],
    ['mounts', { volumes: [{ type: 'volume', source: 'data', target: '/data' }] }],
    ['resources', { resources: { memory: '64Mi' } }],
    ['stop grace', { stopGracePeriod: '30s' }],
    ['ports', { ports: [8080] }],
    ['Docker create options', { container: { user: '1000' } }],
    ['added capabilities', { container: { capAdd: ['NET_ADMIN'] } }],
    ['a secret', { secrets: [{ source: 'db_password' }] }],
    ['a config', { configs: [{ source: 'app.conf' }] }],
    ['GPUs by id', { resources: { gpuIds: ['0'] } }],
    ['a runtime', { container: { runtime: 'runsc' } }],
    ['a device', { container: { devices: ['/dev/fuse'] } }],
  ])('changes with %s', (_name, change) => expect(specHash({ ...base, ...change })).not.toBe(specHash(base)));

  describe('secrets and configs: the references, never the values', () => {
    const withFiles: ServiceSpec = { ...base, secrets: [{ source: 'db_password', version: 'u1' }, { source: 'tls', target: '/etc/tls.key', mode: 0o400 }], configs: [{ source: 'app.conf', target: '/etc/app.conf' }] };
    it.each<[string, Partial<ServiceSpec>]>([
      ['a new name (a rotation)', { secrets: [{ source: 'db_password_v2', target: 'db_password', version: 'u2' }, { source: 'tls', target: '/etc/tls.key', mode: 0o400 }] }],
      ['a new version (made again under the same name)', { secrets: [{ source: 'db_password', version: 'u9' }, { source: 'tls', target: '/etc/tls.key', mode: 0o400 }] }],
      ['a target', { configs: [{ source: 'app.conf', target: '/etc/other.conf' }] }],
      ['a mode', { secrets: [{ source: 'db_password', version: 'u1' }, { source: 'tls', target: '/etc/tls.key', mode: 0o440 }] }],
      ['an owner', { secrets: [{ source: 'db_password', version: 'u1' }, { source: 'tls', target: '/etc/tls.key', mode: 0o400, uid: 999 }] }],
    ])('changes with %s', (_n, change) => expect(specHash({ ...withFiles, ...change })).not.toBe(specHash(withFiles)));
    it('not with defaults written out, relative targets spelled out, or another order', () =>
      expect(
        specHash({
          ...base,
          configs: [{ source: 'app.conf', target: '/etc/app.conf', uid: 0, gid: 0, mode: 0o444 }],
          secrets: [{ source: 'tls', target: '/etc/tls.key', mode: 0o400 }, { source: 'db_password', target: '/run/secrets/db_password', version: 'u1' }],
        }),
      ).toBe(specHash(withFiles)));
    it('a service without any keeps the hash earlier releases gave it', () => expect(specHash({ ...base, secrets: [], configs: [] })).toBe(specHash(base)));
  });

  it.each<[string, Partial<ServiceSpec>]>([
    ['replicas', { replicas: 5 }],
    ['placement', { placement: { mode: 'pack' } }],
    ['priority', { priority: 10 }],
    ['rebalance opt-out', { rebalance: 'disabled' }],
    ['update policy', { update: { order: 'stop-first' } }],
    ['dependencies', { dependsOn: { db: { condition: 'service_healthy' } } }],
    ['empty Docker create options', { container: {} }],
  ])('does not change with %s (no container restart for scheduling changes)', (_name, change) => expect(specHash({ ...base, ...change })).toBe(specHash(base)));
});

describe('isStateful', () => {
  it.each<[string, ServiceSpec['volumes'], boolean]>([
    ['no mounts', undefined, false],
    ['a named volume', [{ type: 'volume', source: 'data', target: '/data' }], true],
    ['a read-only named volume (still its node\'s data)', [{ type: 'volume', source: 'data', target: '/data', readOnly: true }], true],
    ['a writable bind', [{ type: 'bind', source: '/srv/x', target: '/x' }], true],
    ['read-only binds only (a config, a secret)', [{ type: 'bind', source: '/run/secrets/db', target: '/run/secrets/db', readOnly: true }], false],
    ['an anonymous volume (the container’s own, gone with it)', [{ type: 'anonymous', target: '/var/lib/mysql' }], false],
  ])('%s → %s', (_n, volumes, want) => expect(isStateful({ ...base, ...(volumes ? { volumes } : {}) })).toBe(want));
});

describe('startsFirst: the one start-first rule of the agent and the rollout', () => {
  it.each<[string, Partial<ServiceSpec>, boolean]>([
    ['a plain service', {}, true],
    ['update.order stop-first', { update: { order: 'stop-first' } }, false],
    ['a named volume (two writers)', { volumes: [{ type: 'volume', source: 'data', target: '/data' }] }, false],
    ['only a read-only bind (a config)', { volumes: [{ type: 'bind', source: '/etc/app.conf', target: '/app.conf', readOnly: true }] }, true],
    ['a fixed host port (the new container could not bind it)', { ports: [8080] }, false],
    ['a dynamic host port (the replica keeps it across revisions)', { ports: [{ containerPort: 80, published: 18080 }] }, false],
    ['host network said out loud', { network: 'host' }, true],
    ['the cluster network (the replica keeps its address and namespace on its node)', { network: 'cluster' }, false],
    ['the cluster network, even asked start-first', { network: 'cluster', update: { order: 'start-first' } }, false],
  ])('%s → %s', (_n, extra, want) => expect(startsFirst({ ...base, ...extra })).toBe(want));
});

describe('withDefaults', () => {
  it('fills every default', () => {
    const d = withDefaults({ image: 'x' });
    expect(d).toMatchObject({ replicas: 1, placement: { mode: 'spread' }, stopSignal: 'SIGTERM', stopGracePeriod: '10s', priority: 0, rebalance: 'enabled', update: { order: 'start-first', stepTimeout: '60s', maxUnavailable: 1 } });
  });
  it('leaves replicas out for global', () => expect(withDefaults({ image: 'x', placement: { mode: 'global' } }).replicas).toBeUndefined());
  it('an http check and a tcp check on the same port hash apart, and a written-out default path changes nothing', () => {
    expect(specHash({ ...base, healthcheck: { http: { port: 80 } } })).not.toBe(specHash({ ...base, healthcheck: { tcp: { port: 80 } } }));
    expect(specHash({ ...base, healthcheck: { http: { port: 80, path: '/' } } })).toBe(specHash({ ...base, healthcheck: { http: { port: 80 } } }));
  });
  it('fills health-check defaults', () => expect(withDefaults({ image: 'x', healthcheck: { test: ['CMD', 'true'] } }).healthcheck).toEqual({ test: ['CMD', 'true'], interval: '30s', timeout: '30s', retries: 3, startPeriod: '0s' }));
});

describe('servicesByPriority', () => {
  it('orders by descending priority, ties by name', () => {
    const order = servicesByPriority({ services: { b: { image: 'x' }, a: { image: 'x' }, z: { image: 'x', priority: 5 }, c: { image: 'x', priority: -1 } } }).map(([n]) => n);
    expect(order).toEqual(['z', 'a', 'b', 'c']);
  });
});

describe('canonicalJson', () => {
  it('sorts keys at every level and keeps array order', () => expect(canonicalJson({ b: 1, a: { d: [2, 1], c: 0 } })).toBe('{"a":{"c":0,"d":[2,1]},"b":1}'));
});

describe('withDependencyHashes: a recreated dependency rolls the services that restart with it (depends_on restart: true)', () => {
  const app = (db: Partial<ServiceSpec>, webDeps: ServiceSpec['dependsOn'], more: Record<string, ServiceSpec> = {}): DeploymentSpec => ({
    services: { db: { image: 'db:1', ...db }, web: { image: 'web:1', dependsOn: webDeps }, ...more },
  });
  const webHash = (spec: DeploymentSpec) => specHash(withDependencyHashes(spec).services.web!);
  const restart = { db: { condition: 'service_healthy' as const, restart: true } };
  const plain = { db: { condition: 'service_healthy' as const } };

  // Each row: what changes in db, whether web (restart: true) rolls, whether web (no restart) does.
  it.each<[string, Partial<ServiceSpec>, boolean]>([
    ['a new image', { image: 'db:2' }, true],
    ['a new digest of the same tag', { pinnedImage: 'db:1@sha256:' + 'a'.repeat(64) }, true],
    ['its environment', { env: { A: '1' } }, true],
    ['its container options', { container: { runtime: 'runsc' } }, true],
    ['its replica count (scaling recreates nothing)', { replicas: 3 }, false],
    ['its aliases (restart nothing)', { aliases: ['database'] }, false],
  ])('db changes %s', (_what, change, rolls) => {
    expect(webHash(app(change, restart)) !== webHash(app({}, restart))).toBe(rolls);
    expect(webHash(app(change, plain))).toBe(webHash(app({}, plain)));
  });

  it('writes the dependency’s hash into the dependent’s dependsOn; nothing without restart', () => {
    const got = withDependencyHashes(app({}, { ...restart, cache: { condition: 'service_started' } }, { cache: { image: 'c:1' } }));
    expect(got.services.web!.dependsOn).toEqual({ db: { condition: 'service_healthy', restart: true, specHash: specHash({ image: 'db:1' }) }, cache: { condition: 'service_started' } });
    expect(got.services.db).toEqual({ image: 'db:1' });
  });

  it('a chain restarts end to end: a change at its root rolls every service restarting along it', () => {
    const chain = (img: string): DeploymentSpec => ({
      services: {
        a: { image: 'a', dependsOn: { b: { condition: 'service_started', restart: true } } },
        b: { image: 'b', dependsOn: { c: { condition: 'service_started', restart: true } } },
        c: { image: img },
      },
    });
    const [x, y] = [withDependencyHashes(chain('c:1')), withDependencyHashes(chain('c:2'))];
    for (const s of ['a', 'b', 'c']) expect(specHash(x.services[s]!), s).not.toBe(specHash(y.services[s]!));
  });

  it('idempotent (every apply and diff writes the same), and a stale hash without restart is dropped', () => {
    const once = withDependencyHashes(app({}, restart));
    expect(withDependencyHashes(once)).toEqual(once);
    const stale = withDependencyHashes(app({}, { db: { condition: 'service_started', specHash: 'f'.repeat(64) } }));
    expect(stale.services.web!.dependsOn).toEqual({ db: { condition: 'service_started' } });
  });

  it('a service without restart dependencies keeps the hash earlier releases gave it', () => {
    const spec = app({}, plain);
    expect(withDependencyHashes(spec).services.web).toBe(spec.services.web);
  });
});

describe('withRestartDependents: what jaco rollout restart restarts', () => {
  const r = { condition: 'service_started' as const, restart: true };
  const spec: DeploymentSpec = {
    services: {
      db: { image: 'db' },
      api: { image: 'api', dependsOn: { db: r } },
      web: { image: 'web', dependsOn: { api: r } },
      worker: { image: 'w', dependsOn: { db: { condition: 'service_started' } } },
    },
  };
  it.each<[string[], string[]]>([
    [['db'], ['db', 'api', 'web']],
    [['api'], ['api', 'web']],
    [['web'], ['web']],
    [['worker'], ['worker']],
  ])('%j → %j', (given, want) => expect(withRestartDependents(spec, given)).toEqual(want));
});

describe('jsonEqual: equal as JSON, in any key order', () => {
  const rows: [string, unknown, unknown][] = [
    ['keys in another order', { a: 1, b: { c: [1, 2], d: 'x' } }, { b: { d: 'x', c: [1, 2] }, a: 1 }],
    ['a key set to undefined is absent', { a: 1, b: undefined }, { a: 1 }],
    ['undefined in an array is null', [1, undefined], [1, null]],
    ['equal primitives', 'x', 'x'],
  ];
  it.each(rows)('%s: equal, as canonicalJson says', (_n, a, b) => {
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(jsonEqual(a, b)).toBe(true);
    expect(jsonEqual(b, a)).toBe(true);
  });
  const differ: [string, unknown, unknown][] = [
    ['a value differs deep down', { a: { b: [1, { c: 2 }] } }, { a: { b: [1, { c: 3 }] } }],
    ['a key more', { a: 1 }, { a: 1, b: 0 }],
    ['null is not absent', { a: null }, {}],
    ['an array is not an object', { a: [] }, { a: {} }],
    ['array lengths', [1], [1, 1]],
    ['1 is not "1"', { a: 1 }, { a: '1' }],
  ];
  it.each(differ)('%s: not equal, as canonicalJson says', (_n, a, b) => {
    expect(canonicalJson(a)).not.toBe(canonicalJson(b));
    expect(jsonEqual(a, b)).toBe(false);
    expect(jsonEqual(b, a)).toBe(false);
  });
});
