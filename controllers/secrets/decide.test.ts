import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { API_VERSION, type ClusterKey, type Config, type Node, type NodeCopy, type Registry, type ReplicaDesired, type Secret, type ServiceSpec } from '../../src/api/types.js';
import { ClusterKeyRing } from '../../src/secrets/keyfile.js';
import { copyAad, generateKeyPair, open, seal, secretAad, type KeyPair } from '../../src/secrets/seal.js';
import type { Versioned } from '../../src/store/store.js';
import { decideSecrets, RESEAL_PER_PASS, type SecretsCrypto, type SecretsSnapshot } from './decide.js';

const NOW = Date.parse('2026-11-21T10:00:00Z');
const PLAIN = 'p4ssw0rd-that-must-never-show';

const v = <T>(key: string, value: T, modRevision = 5): Versioned<T> => ({ key, value, modRevision, createRevision: 1, version: 1 });

const nodeKeys = { n1: generateKeyPair('nk'), n2: generateKeyPair('nk') };

function node(name: keyof typeof nodeKeys | 'n3', key?: KeyPair): Versioned<Node> {
  const k = key ?? (nodeKeys as Record<string, KeyPair>)[name];
  return v(keys.node(name), {
    apiVersion: API_VERSION,
    kind: 'Node',
    metadata: { name },
    spec: {},
    status: { capacity: { cpuMillis: 1000, memoryBytes: 1, gpus: 0 }, agentVersion: 't', registeredAt: new Date(NOW).toISOString(), ...(k ? { secretsKey: { id: k.id, publicKey: k.publicKey } } : {}) },
  }, 7);
}

function secret(name: string, value: string, key: KeyPair, uid = `uid-${name}`): Versioned<Secret> {
  return v(keys.secret(name), { apiVersion: API_VERSION, kind: 'Secret', metadata: { name, uid }, spec: { size: value.length, sealed: seal(Buffer.from(value), key, secretAad(name, uid)) } }, 9);
}

function config(name: string, content: string, uid = `uid-${name}`): Versioned<Config> {
  return v(keys.config(name), { apiVersion: API_VERSION, kind: 'Config', metadata: { name, uid }, spec: { size: content.length, digest: `sha256:${'0'.repeat(64)}`, data: Buffer.from(content).toString('base64') } }, 11);
}

function desired(nodeName: string, replica: string, t: Partial<ServiceSpec>, modRevision = 20): Versioned<ReplicaDesired> {
  return v(keys.desired(nodeName, replica), {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: replica },
    spec: { replica, deployment: 'shop', service: 'db', node: nodeName, revision: 1, specHash: 'h', template: { image: 'i', ...t }, placedAt: new Date(NOW).toISOString() },
  }, modRevision);
}

function ringCrypto(ring?: ClusterKeyRing): SecretsCrypto {
  return { clusterKeys: () => ring, open: (s, aad) => open(s, ring!.byId, aad), seal };
}

function snapshot(s: Partial<SecretsSnapshot>): SecretsSnapshot {
  return { revision: 100, nodes: new Map(), desired: new Map(), unknownUse: new Set(), secrets: new Map(), configs: new Map(), copies: new Map(), ...s };
}

const ck1 = { ...generateKeyPair('ck', new Date('2026-01-01T00:00:00Z')) };
const ck2 = { ...generateKeyPair('ck', new Date('2026-06-01T00:00:00Z')) };
const published = (k: KeyPair): Versioned<ClusterKey> => v(keys.clusterKey(), { apiVersion: API_VERSION, kind: 'ClusterKey', metadata: { name: 'current' }, spec: { id: k.id, publicKey: k.publicKey, publishedAt: 'x' } }, 3);

describe('the secrets controller decides', () => {
  it("copies a registry's password secret to the nodes whose replicas pull from it, and removes it when none does", () => {
    const reg: Registry = { apiVersion: API_VERSION, kind: 'Registry', metadata: { name: '127.0.0.1:5000' }, spec: { host: '127.0.0.1:5000', username: 'ci', passwordSecret: 'registry_127.0.0.1_5000_ab' } };
    const pw = secret('registry_127.0.0.1_5000_ab', PLAIN, ck1);
    const base = {
      nodes: new Map([['n1', node('n1')], ['n2', node('n2')]]),
      secrets: new Map([['registry_127.0.0.1_5000_ab', pw]]),
      clusterKey: published(ck1),
      registries: [reg],
      imageSettings: { defaultRegistry: '127.0.0.1:5000', hub: false },
    };
    const snap = snapshot({
      ...base,
      desired: new Map([
        // n1: one image written with the registry, one short name at the default registry (the same one).
        ['n1', [desired('n1', 'shop-db-1', { image: '127.0.0.1:5000/db:1' }), desired('n1', 'shop-web-1', { image: 'web:1', pinnedImage: `127.0.0.1:5000/web:1@sha256:${'a'.repeat(64)}` })]],
        // n2: an image from elsewhere needs nothing.
        ['n2', [desired('n2', 'shop-cache-1', { image: 'other.local/cache:1' })]],
      ]),
    });
    const d = decideSecrets(snap, NOW, ringCrypto(new ClusterKeyRing([ck1])));
    expect(d.acts.map((a) => a.label)).toEqual(['copy secret/registry_127.0.0.1_5000_ab to n1']);
    expect(d.acts[0]!.audit![0]!.payload).toMatchObject({ replicas: ['shop-db-1', 'shop-web-1'] });
    const write = d.acts[0]!.ops[0] as { value: NodeCopy };
    expect(open(write.value.spec.sealed, nodeKeys.n1, copyAad('n1', 'secret', 'registry_127.0.0.1_5000_ab', 'uid-registry_127.0.0.1_5000_ab')).toString()).toBe(PLAIN);
    expect(JSON.stringify(d)).not.toContain(PLAIN);

    // The replicas left n1 (or the registry was logged out of): its copy goes.
    const copy = v(keys.copy('n1', 'secret', 'registry_127.0.0.1_5000_ab'), write.value, 30);
    const gone = decideSecrets(snapshot({ ...base, desired: new Map([['n1', [desired('n1', 'shop-cache-1', { image: 'other.local/cache:1' })]]]), copies: new Map([['n1/secret/registry_127.0.0.1_5000_ab', copy]]) }), NOW, ringCrypto(new ClusterKeyRing([ck1])));
    expect(gone.acts.map((a) => a.label)).toEqual(['remove copy of secret/registry_127.0.0.1_5000_ab from n1']);
    const out = decideSecrets(snapshot({ ...base, registries: [], desired: snap.desired, copies: new Map([['n1/secret/registry_127.0.0.1_5000_ab', copy]]) }), NOW, ringCrypto(new ClusterKeyRing([ck1])));
    expect(out.acts.map((a) => a.label)).toEqual(['remove copy of secret/registry_127.0.0.1_5000_ab from n1']);
  });

  it("copies a secret to the node whose replica uses it, sealed to that node's key, guarded by what it relied on", () => {
    const snap = snapshot({
      nodes: new Map([['n1', node('n1')], ['n2', node('n2')]]),
      desired: new Map([['n1', [desired('n1', 'shop-db-1', { secrets: [{ source: 'db_password' }] })]], ['n2', [desired('n2', 'shop-web-1', {})]]]),
      secrets: new Map([['db_password', secret('db_password', PLAIN, ck1)]]),
      clusterKey: published(ck1),
    });
    const d = decideSecrets(snap, NOW, ringCrypto(new ClusterKeyRing([ck1])));
    expect(d.acts.map((a) => a.label)).toEqual(['copy secret/db_password to n1']);
    const [act] = d.acts;
    const write = act!.ops[0] as { op: string; key: string; value: NodeCopy };
    expect(write).toMatchObject({ op: 'create', key: 'copies/n1/secret/db_password' });
    expect(write.value.spec).toMatchObject({ node: 'n1', kind: 'secret', name: 'db_password', uid: 'uid-db_password', nodeKey: nodeKeys.n1.id, size: PLAIN.length });
    // Opens with the node's key, in its place only.
    expect(open(write.value.spec.sealed, nodeKeys.n1, copyAad('n1', 'secret', 'db_password', 'uid-db_password')).toString()).toBe(PLAIN);
    expect(() => open(write.value.spec.sealed, nodeKeys.n2, copyAad('n1', 'secret', 'db_password', 'uid-db_password'))).toThrow();
    expect(act!.ops.slice(1)).toEqual([
      { op: 'check', key: 'nodes/n1', modRevision: 7 },
      { op: 'check', key: 'secrets/db_password', modRevision: 9 },
      { op: 'check', key: 'desired/n1/shop-db-1', modRevision: 20 },
    ]);
    expect(act!.audit).toEqual([{ type: 'secret_copied', time: NOW, payload: { node: 'n1', kind: 'secret', name: 'db_password', reason: 'missing', replicas: ['shop-db-1'] } }]);
    // The plaintext is nowhere in what the pass decided, its records or its notes.
    expect(JSON.stringify(d)).not.toContain(PLAIN);
    expect(JSON.stringify(d)).not.toContain(Buffer.from(PLAIN).toString('base64'));
  });

  it('removes a copy no replica uses, only if no desired key of the node changed since it read them', () => {
    const copy = v<NodeCopy>(keys.copy('n1', 'config', 'app.conf'), { apiVersion: API_VERSION, kind: 'NodeCopy', metadata: { name: 'app.conf' }, spec: { node: 'n1', kind: 'config', name: 'app.conf', uid: 'u', nodeKey: nodeKeys.n1.id, size: 1, sealed: seal(Buffer.from('x'), nodeKeys.n1, 'a') } }, 33);
    const d = decideSecrets(snapshot({ nodes: new Map([['n1', node('n1')]]), desired: new Map([['n1', []]]), copies: new Map([['n1/config/app.conf', copy]]) }), NOW, ringCrypto());
    expect(d.acts).toHaveLength(1);
    expect(d.acts[0]!.ops).toEqual([
      { op: 'delete', key: 'copies/n1/config/app.conf', modRevision: 33 },
      { op: 'checkRange', key: 'desired/n1/', unchangedSince: 100 },
    ]);
    expect(d.acts[0]!.audit![0]).toMatchObject({ type: 'secret_copy_removed', payload: { node: 'n1', kind: 'config', name: 'app.conf', reason: 'unused' } });
  });

  it('without a cluster key file it still copies configs, and says why secrets wait', () => {
    const snap = snapshot({
      nodes: new Map([['n1', node('n1')]]),
      desired: new Map([['n1', [desired('n1', 'r1', { secrets: [{ source: 'db_password' }], configs: [{ source: 'app.conf' }] })]]]),
      secrets: new Map([['db_password', secret('db_password', PLAIN, ck1)]]),
      configs: new Map([['app.conf', config('app.conf', 'listen 80;')]]),
    });
    const d = decideSecrets(snap, NOW, ringCrypto(undefined));
    expect(d.acts.map((a) => a.label)).toEqual(['copy config/app.conf to n1']);
    expect(d.problems).toEqual([{ file: 'secret/db_password', why: 'no_cluster_key', detail: 'no cluster key file (--secrets-key-file)' }]);
    const c = (d.acts[0]!.ops[0] as { value: NodeCopy }).value;
    expect(open(c.spec.sealed, nodeKeys.n1, copyAad('n1', 'config', 'app.conf', 'uid-app.conf')).toString()).toBe('listen 80;');
  });

  it('publishes the newest cluster key, never a step back to an older one, and leaves one it does not know', () => {
    const both = new ClusterKeyRing([ck1, ck2]);
    expect(decideSecrets(snapshot({}), NOW, ringCrypto(both)).acts.map((a) => [a.label, a.ops[0]!.op])).toEqual([[`publish cluster key ${ck2.id}`, 'create']]);
    const upgrade = decideSecrets(snapshot({ clusterKey: published(ck1) }), NOW, ringCrypto(both));
    expect(upgrade.acts[0]!.ops[0]).toMatchObject({ op: 'update', modRevision: 3, value: { spec: { id: ck2.id, publicKey: ck2.publicKey } } });
    expect(upgrade.acts[0]!.audit![0]!.payload).toEqual({ id: ck2.id, previous: ck1.id });
    // A controller still on the old file (mid-rotation) does not undo the newer key.
    expect(decideSecrets(snapshot({ clusterKey: published(ck2) }), NOW, ringCrypto(new ClusterKeyRing([ck1]))).acts).toEqual([]);
    expect(decideSecrets(snapshot({ clusterKey: published(ck2) }), NOW, ringCrypto(both)).acts).toEqual([]);
  });

  it('re-seals secrets at rest to the newest key, a batch per pass, and says which cannot be opened', () => {
    const both = new ClusterKeyRing([ck1, ck2]);
    const stranger = generateKeyPair('ck');
    const secrets = new Map<string, Versioned<Secret>>();
    for (let i = 0; i < RESEAL_PER_PASS + 3; i++) secrets.set(`s${i}`, secret(`s${i}`, `${PLAIN}${i}`, ck1));
    secrets.set('fresh', secret('fresh', PLAIN, ck2));
    secrets.set('lost', secret('lost', PLAIN, stranger));
    const d = decideSecrets(snapshot({ secrets, clusterKey: published(ck2) }), NOW, ringCrypto(both));
    const reseals = d.acts.filter((a) => a.label.startsWith('reseal'));
    expect(reseals).toHaveLength(RESEAL_PER_PASS);
    expect(d.staleAtRest).toBe(RESEAL_PER_PASS + 3);
    expect(d.wakeAt).toBe(NOW);
    const first = reseals[0]!.ops[0] as { op: string; modRevision: number; value: Secret };
    expect(first).toMatchObject({ op: 'update', modRevision: 9 });
    expect(first.value.spec.sealed.key).toBe(ck2.id);
    expect(open(first.value.spec.sealed, new ClusterKeyRing([ck2]).byId, secretAad(first.value.metadata.name, first.value.metadata.uid!)).toString()).toMatch(new RegExp(`^${PLAIN}`));
    expect(reseals[0]!.audit![0]).toMatchObject({ type: 'secret_resealed', payload: { from: ck1.id, to: ck2.id } });
    expect(d.problems).toEqual([{ file: 'secret/lost', why: 'cannot_open', detail: `sealed to cluster key ${stranger.id}, which the key file does not hold` }]);
    expect(JSON.stringify(d)).not.toContain(PLAIN);
  });

  it('a secret altered at rest is not copied; the pass says so without its value', () => {
    const s = secret('db_password', PLAIN, ck1);
    const tampered = { ...s, value: { ...s.value, metadata: { ...s.value.metadata, name: 'db_password' }, spec: { ...s.value.spec, sealed: { ...s.value.spec.sealed, data: Buffer.from('garbage-garbage-garbage').toString('base64') } } } };
    const d = decideSecrets(
      snapshot({ nodes: new Map([['n1', node('n1')]]), desired: new Map([['n1', [desired('n1', 'r', { secrets: [{ source: 'db_password' }] })]]]), secrets: new Map([['db_password', tampered]]), clusterKey: published(ck1) }),
      NOW,
      ringCrypto(new ClusterKeyRing([ck1])),
    );
    expect(d.acts).toEqual([]);
    expect(d.problems.map((p) => [p.file, p.why])).toEqual([['secret/db_password', 'cannot_open']]);
  });
});
