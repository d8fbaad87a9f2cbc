// Secrets and configs from the CLI: creating one (a secret sealed here to the public half of the
// cluster key the secrets controller publishes — the CLI never holds a key that opens one),
// listing and showing them without their values, and removing them only while nothing uses them.
// Every write is a compare-and-swap with its audit record in the same transaction.
import { randomUUID } from 'node:crypto';
import { fileId, filesUsed } from '../api/files.js';
import { keys } from '../api/keys.js';
import { FILE_OBJECT_NAME_MAX, FILE_OBJECT_NAME_PATTERN, MAX_FILE_OBJECT_BYTES } from '../api/crds.js';
import { API_VERSION, type ClusterKey, type Config, type Deployment, type FileKind, type FileOwner, type NodeCopy, type Registry, type ReplicaDesired, type Secret } from '../api/types.js';
import type { Cache } from '../runtime/cache.js';
import { seal, secretAad } from '../secrets/seal.js';
import { configDigest } from '../secrets/version.js';
import { AuditLog, type AuditRecord } from '../store/audit.js';
import { readCut } from './read.js';
import type { Store, Versioned } from '../store/store.js';
import { commitAtomic, type OpGroup, type Op } from '../store/writer.js';
import { PRODUCTION } from '../timings.js';
import { CliError } from './errors.js';

export type FileObject = Secret | Config;

/** A name as Docker names secrets: letters, digits, _ . -; starting with a letter or digit. */
export function checkObjectName(kind: FileKind, name: string): void {
  if (!new RegExp(FILE_OBJECT_NAME_PATTERN).test(name) || name.length > FILE_OBJECT_NAME_MAX)
    throw new CliError(`${kind} name ${JSON.stringify(name)} is not valid: letters, digits, _ . and -, starting with a letter or digit, at most ${FILE_OBJECT_NAME_MAX} characters`);
}

export function checkObjectSize(kind: FileKind, name: string, bytes: number): void {
  if (bytes > MAX_FILE_OBJECT_BYTES) throw new CliError(`${kind} ${name} is ${bytes} bytes; a ${kind} holds at most ${MAX_FILE_OBJECT_BYTES} (500 KiB)`);
}

/** The public half of the cluster key new secrets are sealed to; a clear error when none is published yet. */
export async function publishedClusterKey(store: Store): Promise<Versioned<ClusterKey>> {
  const k = await store.get<ClusterKey>(keys.clusterKey());
  if (!k) throw noClusterKey();
  return k;
}

/** The refusal to seal a secret in a cluster with no published key. */
export function noClusterKey(): CliError {
  return new CliError('no cluster key is published, so no secret can be sealed: is the secrets controller running with --secrets-key-file? (`jaco up` gives it one; docs/secrets.md)');
}

/** A new Secret object, its value sealed to the published cluster key (the value itself is dropped by the caller). */
export function newSecret(name: string, value: Buffer, clusterKey: ClusterKey, now: number, owner?: FileOwner): Secret {
  const uid = randomUUID();
  return {
    apiVersion: API_VERSION,
    kind: 'Secret',
    metadata: { name, uid, creationTimestamp: new Date(now).toISOString() },
    spec: { size: value.length, sealed: seal(value, clusterKey.spec, secretAad(name, uid)), ...(owner ? { owner } : {}) },
  };
}

export function newConfig(name: string, content: Buffer, now: number, owner?: FileOwner): Config {
  return {
    apiVersion: API_VERSION,
    kind: 'Config',
    metadata: { name, uid: randomUUID(), creationTimestamp: new Date(now).toISOString() },
    spec: { size: content.length, digest: configDigest(content), data: content.toString('base64'), ...(owner ? { owner } : {}) },
  };
}

/** The audit record of a new object: its name, size, key or digest — never its value. */
export function createdRecord(o: FileObject, now: number): AuditRecord {
  return o.kind === 'Secret'
    ? { type: 'secret_created', time: now, ...(o.spec.owner ? { deployment: o.spec.owner.deployment } : {}), payload: { name: o.metadata.name, size: o.spec.size, key: o.spec.sealed.key, ...(o.spec.owner ? { owner: o.spec.owner.name } : {}) } }
    : { type: 'config_created', time: now, ...(o.spec.owner ? { deployment: o.spec.owner.deployment } : {}), payload: { name: o.metadata.name, size: o.spec.size, digest: o.spec.digest, ...(o.spec.owner ? { owner: o.spec.owner.name } : {}) } };
}

export const objectKey = (kind: FileKind, name: string) => (kind === 'secret' ? keys.secret(name) : keys.config(name));

/** Creates one secret or config (jaco secret|config create); refuses a name that exists (they are immutable). */
export async function createObject(store: Store, kind: FileKind, name: string, value: Buffer, now = Date.now()): Promise<FileObject> {
  checkObjectName(kind, name);
  checkObjectSize(kind, name, value.length);
  const o = kind === 'secret' ? newSecret(name, value, (await publishedClusterKey(store)).value, now) : newConfig(name, value, now);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const ops: Op[] = [{ op: 'create', key: objectKey(kind, name), value: o }, await audit.op(createdRecord(o, now))];
  try {
    await commitAtomic(store, [{ label: `create ${kind} ${name}`, ops }], { landed: async () => (await store.get<FileObject>(objectKey(kind, name)))?.value.metadata.uid === o.metadata.uid });
  } catch (e) {
    if ((e as Error).name === 'ConflictError')
      throw new CliError(`${kind} ${name} exists; ${kind}s are immutable: create a new name (${name}_v2) and refer to it, then remove the old one (docs/secrets.md, "Rotation")`);
    throw e;
  }
  return o;
}

/** Who uses an object: the services of deployments that refer to it, and replicas still desired at an older revision that do. */
export interface Users {
  services: string[];
  /** Replicas (not already named by their service) whose desired template uses it: mid-rollout, or a spec since changed. */
  replicas: string[];
}

/** Every user of every object, by fileId: services, replicas, and the registries whose password a secret holds (`registry/<host>`). */
export function usersOf(deployments: Iterable<Deployment>, desired: Iterable<ReplicaDesired>, registries: Iterable<Registry> = []): Map<string, Users> {
  const out = new Map<string, Users>();
  const at = (id: string) => out.get(id) ?? out.set(id, { services: [], replicas: [] }).get(id)!;
  for (const r of registries) if (r.spec.passwordSecret) at(fileId('secret', r.spec.passwordSecret)).services.push(`registry/${r.spec.host}`);
  for (const d of deployments) for (const [svc, s] of Object.entries(d.spec.services)) for (const id of filesUsed(s)) at(id).services.push(`${d.metadata.name}/${svc}`);
  for (const r of desired) {
    const svc = `${r.spec.deployment}/${r.spec.service}`;
    for (const id of filesUsed(r.spec.template)) {
      const u = at(id);
      if (!u.services.includes(svc)) u.replicas.push(`${r.spec.replica} (${svc} revision ${r.spec.revision})`);
    }
  }
  for (const u of out.values()) {
    u.services = [...new Set(u.services)].sort();
    u.replicas = [...new Set(u.replicas)].sort();
  }
  return out;
}

export function describeUsers(u: Users | undefined): string {
  if (!u || (!u.services.length && !u.replicas.length)) return '';
  return [...u.services, ...u.replicas].join(', ');
}

/** One consistent read of what the secret and config commands need (one revision). */
export function readFileObjects(store: Store): Promise<Cache> {
  return readCut(store, ['secrets', 'configs', 'deployments', 'desired', 'copies', 'clusterkey', 'registries']);
}

/**
 * Removes secrets or configs; refused (nothing removed) while any deployment or desired replica
 * uses one of them, naming who. The transaction compares that no deployment or desired replica
 * changed since the read, so an apply that starts using one meanwhile wins, and this one retries.
 */
export async function removeObjects(store: Store, kind: FileKind, names: string[], now = Date.now()): Promise<void> {
  const cache = await readFileObjects(store);
  const items = cache.kind<FileObject>(kind === 'secret' ? 'secrets' : 'configs');
  const users = usersOf(values(cache.kind<Deployment>('deployments').items), values(cache.kind<ReplicaDesired>('desired').items), values(cache.kind<Registry>('registries').items));
  const missing = names.filter((n) => !items.get(n));
  if (missing.length) throw new CliError(`${kind} ${missing.join(', ')} not found; nothing was removed`);
  const inUse = names.map((n) => [n, describeUsers(users.get(`${kind}/${n}`))] as const).filter(([, u]) => u);
  if (inUse.length) {
    const how = inUse.some(([, u]) => u.includes('registry/')) ? 'log out of the registry (jaco registry logout)' : 'delete the deployment';
    throw new CliError(`${inUse.map(([n, u]) => `${kind} ${n} is used by ${u}`).join('; ')}; nothing was removed (refer to another ${kind} first, or ${how})`);
  }
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const acts: OpGroup[] = [];
  for (const n of names) {
    const v = items.get(n)!;
    acts.push({ label: `remove ${kind} ${n}`, ops: [{ op: 'delete', key: objectKey(kind, n), modRevision: v.modRevision }, await audit.op(removedRecord(kind, n, now))] });
  }
  acts.push({
    label: 'nothing started using them',
    ops: [
      { op: 'checkRange', key: keys.deployments(), unchangedSince: cache.revision },
      { op: 'checkRange', key: keys.desiredOf(), unchangedSince: cache.revision },
    ],
  });
  try {
    await commitAtomic(store, acts);
  } catch (e) {
    if ((e as Error).name === 'ConflictError') throw new CliError(`the cluster changed while ${names.join(', ')} was being removed; nothing was removed: run it again`);
    throw e;
  }
}

export function removedRecord(kind: FileKind, name: string, now: number, deployment?: string): AuditRecord {
  return { type: kind === 'secret' ? 'secret_removed' : 'config_removed', time: now, ...(deployment ? { deployment } : {}), payload: { name } };
}

const values = <T>(m: Map<string, Versioned<T>>) => [...m.values()].map((v) => v.value);

/** What `ls`, `inspect` and `get -o yaml` show of an object: never its value, nor its ciphertext. */
export interface ObjectView {
  apiVersion: string;
  kind: 'Secret' | 'Config';
  metadata: FileObject['metadata'];
  spec: { size: number; sealedTo?: string; digest?: string; owner?: FileOwner };
  status: { usedBy: string[]; nodes: string[] };
}

export function objectViews(cache: Cache, kind: FileKind): ObjectView[] {
  const items = cache.kind<FileObject>(kind === 'secret' ? 'secrets' : 'configs');
  const users = usersOf(values(cache.kind<Deployment>('deployments').items), values(cache.kind<ReplicaDesired>('desired').items), values(cache.kind<Registry>('registries').items));
  const nodes = new Map<string, string[]>();
  for (const c of values(cache.kind<NodeCopy>('copies').items)) if (c.spec.kind === kind) nodes.set(c.spec.name, [...(nodes.get(c.spec.name) ?? []), c.spec.node].sort());
  return values(items.items)
    .map((o): ObjectView => {
      const metadata = { ...o.metadata };
      delete metadata.resourceVersion;
      const u = users.get(`${kind}/${o.metadata.name}`);
      return {
        apiVersion: API_VERSION,
        kind: o.kind,
        metadata,
        spec: { size: o.spec.size, ...(o.kind === 'Secret' ? { sealedTo: o.spec.sealed.key } : { digest: o.spec.digest }), ...(o.spec.owner ? { owner: o.spec.owner } : {}) },
        status: { usedBy: u ? [...u.services, ...u.replicas] : [], nodes: nodes.get(o.metadata.name) ?? [] },
      };
    })
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1));
}
