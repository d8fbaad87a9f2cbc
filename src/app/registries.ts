// The CLI's writes of image access: registries/<host> (jaco registry login, logout), the secret
// holding a login's password, and config/images (jaco registry default). Each write is one
// transaction with its audit record, compare-and-swap on what was read; a password never reaches
// an audit record or an error, and is stored only sealed (a Secret, docs/secrets.md).
import { keys } from '../api/keys.js';
import { formatPath, schemas } from '../api/schema.js';
import { API_VERSION, type ClusterKey, type ImageSettings, type ImageSettingsSpec, type Registry, type RegistrySpec, type Secret } from '../api/types.js';
import { secretVersion } from '../secrets/version.js';
import { createdRecord, newSecret, noClusterKey, removedRecord } from './secrets.js';
import { DEFAULT_IMAGE_SETTINGS } from '../images/access.js';
import { AuditLog } from '../store/audit.js';
import type { Store, Versioned } from '../store/store.js';
import { readCut, unreadableIn, warnUnreadable } from './read.js';
import { commitAtomic, type Op } from '../store/writer.js';
import { PRODUCTION } from '../timings.js';

/** Refuses an object the schema would refuse, naming the fields (never their values: one may be a password). */
function check(obj: Registry | ImageSettings): void {
  const issues = schemas().validate(obj);
  if (issues.length) throw new Error(`invalid ${obj.kind} ${obj.metadata.name}: ${issues.map((i) => `${formatPath(i.path)} ${i.rule}`).join('; ')}`);
}

/** Whether a commit with this audit record landed (a lost reply), as apply resolves it. */
function landed(store: Store, ops: Op[]): () => Promise<boolean> {
  const auditKey = ops.find((o) => o.key.startsWith(keys.audits()))?.key;
  return async () => !!auditKey && (await store.get(auditKey)) !== undefined;
}

export interface RegistryLogin {
  host: string;
  username?: string;
  password?: string;
  caPem?: string;
  insecure?: boolean;
}

/**
 * The name of the Secret holding a registry's password: the host (`:` as `_`, brackets dropped)
 * and a version derived from the password as compose secrets' are (scrypt, salted by the host: it
 * confirms no cheap guess), so logging in again with the same password names the same secret.
 */
export function registrySecretName(host: string, password: string): string {
  const slug = host.replace(/[[\]]/g, '').replace(/:/g, '_');
  return `registry_${slug}_${secretVersion(Buffer.from(password, 'utf8'), 'registry', host)}`;
}

/**
 * What a login or logout of `host` works from, read at one revision: the registry's record (or
 * the key's junk, which the command replaces), the password secrets by name, the published
 * cluster key. A value that cannot be read is never a reason to stop: a login writes over it.
 */
async function registryCut(store: Store, host: string) {
  const cut = await readCut(store, ['registries', 'secrets', 'clusterkey']);
  const key = keys.registry(host);
  const registries = cut.kind<Registry>('registries');
  const secrets = cut.kind<Secret>('secrets');
  const cur = registries.items.get(key);
  const junk = cur ? undefined : registries.unreadable.get(key);
  return {
    key,
    cur,
    /** The modRevision a write of the key compares (0: absent). */
    modRevision: cur?.modRevision ?? junk?.modRevision ?? 0,
    secret: (name: string) => secrets.items.get(keys.secret(name)),
    /** The registry's previous password secret, removed with the login that replaces it (only its own). */
    ownSecret: (name: string | undefined) => {
      const s = name ? secrets.items.get(keys.secret(name)) : undefined;
      return s?.value.spec.registry === host ? s : undefined;
    },
    clusterKey: cut.kind<ClusterKey>('clusterkey').items.get(keys.clusterKey()),
  };
}

/**
 * Stores a registry's access, replacing what was stored (as docker login does). The password
 * becomes a Secret sealed to the published cluster key (the CLI cannot open it again), named in
 * the record; the one it replaces is removed in the same transaction.
 */
export async function storeRegistryLogin(store: Store, login: RegistryLogin, now = Date.now()): Promise<'created' | 'updated' | 'unchanged'> {
  const at = await registryCut(store, login.host);
  const { key, cur } = at;
  const secretName = login.username !== undefined ? registrySecretName(login.host, login.password ?? '') : undefined;
  const spec: RegistrySpec = {
    host: login.host,
    ...(login.username !== undefined ? { username: login.username, passwordSecret: secretName! } : {}),
    ...(login.caPem ? { caPem: login.caPem } : {}),
    ...(login.insecure ? { insecure: true } : {}),
  };
  const haveSecret = secretName ? at.secret(secretName) : undefined;
  if (cur && JSON.stringify(cur.value.spec) === JSON.stringify(spec) && (!secretName || haveSecret)) return 'unchanged';
  const next: Registry = {
    apiVersion: API_VERSION,
    kind: 'Registry',
    metadata: { name: login.host, creationTimestamp: cur?.value.metadata.creationTimestamp ?? new Date(now).toISOString() },
    spec,
  };
  check(next);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const result = cur ? 'updated' : 'created';
  const ops: Op[] = [at.modRevision ? { op: 'update', key, value: next, modRevision: at.modRevision } : { op: 'create', key, value: next }];
  if (secretName && !haveSecret) {
    if (!at.clusterKey) throw noClusterKey();
    const secret = newSecret(secretName, Buffer.from(login.password ?? '', 'utf8'), at.clusterKey.value, now);
    secret.spec.registry = login.host;
    ops.push({ op: 'create', key: keys.secret(secretName), value: secret }, await audit.op(createdRecord(secret, now)));
  }
  const old = at.ownSecret(cur?.value.spec.passwordSecret);
  if (old && old.value.metadata.name !== secretName) ops.push({ op: 'delete', key: old.key, modRevision: old.modRevision }, await audit.op(removedRecord('secret', old.value.metadata.name, now)));
  ops.push(await audit.op({ type: 'registry_login', time: now, payload: { host: login.host, result, ...(login.username !== undefined ? { username: login.username } : {}), ca: !!login.caPem, insecure: !!login.insecure } }));
  await commitAtomic(store, [{ label: `registry login ${login.host}`, ops }], { landed: landed(store, ops) });
  return result;
}

/** Removes a registry's stored access (or the junk in its key) and its password secret; false when none was stored. */
export async function removeRegistryLogin(store: Store, host: string, now = Date.now()): Promise<boolean> {
  const at = await registryCut(store, host);
  if (!at.modRevision) return false;
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const ops: Op[] = [{ op: 'delete', key: at.key, modRevision: at.modRevision }];
  const old = at.ownSecret(at.cur?.value.spec.passwordSecret);
  if (old) ops.push({ op: 'delete', key: old.key, modRevision: old.modRevision }, await audit.op(removedRecord('secret', old.value.metadata.name, now)));
  ops.push(await audit.op({ type: 'registry_logout', time: now, payload: { host } }));
  await commitAtomic(store, [{ label: `registry logout ${host}`, ops }], { landed: landed(store, ops) });
  return true;
}

/** Every stored registry, and the image setting, at one revision. */
export async function readImageAccess(store: Store): Promise<{ registries: Versioned<Registry>[]; settings: ImageSettingsSpec; stored?: Versioned<ImageSettings>; revision: number }> {
  // One cut of both: the setting as it was when the registries were read. A value that cannot be
  // read is left out (a registry: pulled from without its access; the setting: the default).
  const cut = await readCut(store, ['registries', 'imageSettings']);
  warnUnreadable(unreadableIn(cut));
  const stored = cut.kind<ImageSettings>('imageSettings').items.get(keys.imageSettings());
  return { registries: [...cut.kind<Registry>('registries').items.values()], settings: stored?.value.spec ?? DEFAULT_IMAGE_SETTINGS, ...(stored ? { stored } : {}), revision: cut.revision };
}

export interface ImageSettingsChange {
  /** A host to make the default, or null to have none. */
  defaultRegistry?: string | null;
  hub?: boolean;
}

/** Changes the image setting; returns it as it now is, and whether anything changed. */
export async function changeImageSettings(store: Store, change: ImageSettingsChange, now = Date.now()): Promise<{ settings: ImageSettingsSpec; changed: boolean }> {
  const key = keys.imageSettings();
  const cur = await store.get<ImageSettings>(key);
  const before = cur?.value.spec ?? DEFAULT_IMAGE_SETTINGS;
  const defaultRegistry = change.defaultRegistry === undefined ? before.defaultRegistry : (change.defaultRegistry ?? undefined);
  const settings: ImageSettingsSpec = { ...(defaultRegistry ? { defaultRegistry } : {}), hub: change.hub ?? before.hub };
  if (cur && JSON.stringify(cur.value.spec) === JSON.stringify(settings)) return { settings, changed: false };
  if (!cur && JSON.stringify(DEFAULT_IMAGE_SETTINGS) === JSON.stringify(settings)) return { settings, changed: false };
  const next: ImageSettings = { apiVersion: API_VERSION, kind: 'ImageSettings', metadata: { name: 'images' }, spec: settings };
  check(next);
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const ops: Op[] = [
    cur ? { op: 'update', key, value: next, modRevision: cur.modRevision } : { op: 'create', key, value: next },
    await audit.op({ type: 'image_settings_changed', time: now, payload: { defaultRegistry: settings.defaultRegistry ?? null, hub: settings.hub, previous: { defaultRegistry: before.defaultRegistry ?? null, hub: before.hub } } }),
  ];
  await commitAtomic(store, [{ label: 'registry default', ops }], { landed: landed(store, ops) });
  return { settings, changed: true };
}
