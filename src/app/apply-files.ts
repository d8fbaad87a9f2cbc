// What apply does with secrets and configs, in the same transaction as the deployments: it creates
// the ones a compose file declares (sealed here to the published cluster key) unless they exist,
// refuses a reference to one that does not exist, pins each reference to its object's uid (so an
// object made again under the same name rolls its services), and removes what a compose file made
// for a deployment once neither it, its kept revisions nor any other deployment refers to it.
import { filesUsed } from '../api/files.js';
import { keys } from '../api/keys.js';
import type { ClusterKey, Config, Deployment, DeploymentRevision, DeploymentSpec, FileKind, FileRef, Secret } from '../api/types.js';
import type { ComposeObject } from '../compose/map.js';
import type { AuditRecord } from '../store/audit.js';
import type { Store, Versioned } from '../store/store.js';
import type { Unreadable } from '../store/reflector.js';
import type { Op } from '../store/writer.js';
import { readCut, readKey, readPrefix, unreadableIn, unreadableRefusal } from './read.js';
import { createdRecord, newConfig, newSecret, objectKey, removedRecord, type FileObject } from './secrets.js';

/** An apply refused for its secrets or configs (a reference to nothing, a name taken by other content). */
export class ApplyFilesError extends Error {
  override name = 'ApplyFilesError';
}

export interface FileOutcome {
  kind: FileKind;
  name: string;
  result: 'created' | 'unchanged' | 'removed';
}

export interface FilePlan<I> {
  /** The items with every reference pinned to its object's uid. */
  items: I[];
  ops: Op[];
  audit: AuditRecord[];
  /** By deployment. */
  outcomes: Map<string, FileOutcome[]>;
}

interface Item {
  name: string;
  spec: DeploymentSpec;
  objects?: ComposeObject[];
}

const idOf = (kind: FileKind, name: string) => `${kind}/${name}`;

/** The spec with each reference's version set to its object's uid. */
function pinned(spec: DeploymentSpec, uidOf: (kind: FileKind, name: string) => string | undefined): DeploymentSpec {
  const pin = (kind: FileKind, refs: FileRef[] | undefined) => refs?.map((r) => ({ ...r, version: uidOf(kind, r.source) ?? r.version }));
  return {
    ...spec,
    services: Object.fromEntries(
      Object.entries(spec.services).map(([n, s]) => [n, s.secrets || s.configs ? { ...s, ...(s.secrets ? { secrets: pin('secret', s.secrets) } : {}), ...(s.configs ? { configs: pin('config', s.configs) } : {}) } : s]),
    ),
  };
}

/** A spec's references pinned to the objects as they are now (what apply would pin: for jaco diff). */
export async function pinToStore(store: Store, spec: DeploymentSpec): Promise<DeploymentSpec> {
  if (!usedBy(spec).size) return spec;
  const { secrets, configs } = await readObjects(store);
  const uids = new Map([...secrets, ...configs].map((v) => [idOf(v.value.kind === 'Secret' ? 'secret' : 'config', v.value.metadata.name), v.value.metadata.uid]));
  return pinned(spec, (kind, name) => uids.get(idOf(kind, name)));
}

/**
 * Every secret and config, read as the controllers read them, and the keys of those that cannot
 * be read (never referred to as if absent: see planFiles).
 */
async function readObjects(store: Store): Promise<{ secrets: Versioned<Secret>[]; configs: Versioned<Config>[]; unreadable: Unreadable[] }> {
  const cut = await readCut(store, ['secrets', 'configs']);
  return { secrets: [...cut.kind<Secret>('secrets').items.values()], configs: [...cut.kind<Config>('configs').items.values()], unreadable: unreadableIn(cut) };
}

const usedBy = (spec: DeploymentSpec) => new Set(Object.values(spec.services).flatMap((s) => filesUsed(s)));

/**
 * Plans the secrets and configs of an apply (and checks them; ApplyFilesError names what is wrong).
 * `current` is every deployment as read at `readAt`.
 */
export async function planFiles<I extends Item>(store: Store, items: I[], current: ReadonlyMap<string, Versioned<Deployment>>, readAt: number, now: number, unreadableDeployments = false): Promise<FilePlan<I>> {
  const plan: FilePlan<I> = { items, ops: [], audit: [], outcomes: new Map() };
  const wanted = items.flatMap((i) => [...usedBy(i.spec)]);
  const created = items.flatMap((i) => i.objects ?? []);
  const owners = new Set(items.map((i) => i.name));
  const ownedSomewhere = [...current.keys()].some((n) => owners.has(n));
  if (!wanted.length && !created.length && !ownedSomewhere) return plan;

  const { secrets, configs, unreadable } = await readObjects(store);
  const stored = new Map<string, Versioned<FileObject>>([
    ...secrets.map((v): [string, Versioned<FileObject>] => [idOf('secret', v.value.metadata.name), v]),
    ...configs.map((v): [string, Versioned<FileObject>] => [idOf('config', v.value.metadata.name), v]),
  ]);
  // An object whose value cannot be read is neither used nor made again under its name.
  const unreadableObject = new Map(unreadable.map((u) => [idOf(u.key.startsWith(keys.secrets()) ? 'secret' : 'config', u.key.slice(u.key.indexOf('/') + 1)), u]));
  const touched = [...new Set([...wanted, ...created.map((o) => idOf(o.kind, o.name))])].flatMap((id) => unreadableObject.get(id) ?? []);
  if (touched.length) throw new ApplyFilesError(`nothing was written: ${touched.map((u) => unreadableRefusal(u, 'use it')).join('; ')}`);

  // 1. What the compose files declare: created unless it exists (the same content-derived name is
  // the same content; a config's digest says so for sure).
  const made = new Map<string, FileObject>();
  let clusterKey: ClusterKey | undefined;
  for (const o of created) {
    const id = idOf(o.kind, o.name);
    if (made.has(id)) continue;
    const have = stored.get(id);
    const out = plan.outcomes.get(o.owner.deployment) ?? plan.outcomes.set(o.owner.deployment, []).get(o.owner.deployment)!;
    if (have) {
      if (have.value.kind === 'Config' && newConfig(o.name, o.value, now).spec.digest !== have.value.spec.digest)
        throw new ApplyFilesError(`nothing was written: config ${o.name} exists with other content than ${o.from}`);
      out.push({ kind: o.kind, name: o.name, result: 'unchanged' });
      continue;
    }
    if (o.kind === 'secret') {
      clusterKey ??= (await readKey<ClusterKey>(store, keys.clusterKey(), 'ClusterKey')).value?.value;
      if (!clusterKey) throw new ApplyFilesError(`nothing was written: secret ${o.owner.name} cannot be sealed, no cluster key is published (is the secrets controller running with --secrets-key-file? jaco up gives it one)`);
    }
    const obj = o.kind === 'secret' ? newSecret(o.name, o.value, clusterKey!, now, o.owner) : newConfig(o.name, o.value, now, o.owner);
    made.set(id, obj);
    plan.ops.push({ op: 'create', key: objectKey(o.kind, o.name), value: obj });
    plan.audit.push(createdRecord(obj, now));
    out.push({ kind: o.kind, name: o.name, result: 'created' });
  }

  // 2. Every reference names an object that exists (or is made now); each pinned, each guarded.
  const uidOf = (kind: FileKind, name: string) => (made.get(idOf(kind, name)) ?? stored.get(idOf(kind, name))?.value)?.metadata.uid;
  const missing: string[] = [];
  for (const i of items)
    for (const [svc, s] of Object.entries(i.spec.services))
      for (const id of filesUsed(s)) if (!made.has(id) && !stored.has(id)) missing.push(`service ${i.name}/${svc} uses ${id.replace('/', ' ')}, which does not exist`);
  if (missing.length) throw new ApplyFilesError(`nothing was written: ${missing.join('; ')} (create it with jaco secret create / jaco config create, or declare it in the compose file)`);
  plan.items = items.map((i) => ({ ...i, spec: pinned(i.spec, uidOf) }));
  // A removal (jaco secret rm) that lands first makes this apply fail rather than refer to nothing.
  for (const id of new Set(wanted)) {
    const v = stored.get(id);
    if (v && !made.has(id)) plan.ops.push({ op: 'check', key: v.key, modRevision: v.modRevision });
  }

  // 3. What the compose files made for these deployments, no longer referred to by them, their kept
  // revisions (a rollback needs them), or any other deployment: removed.
  const others = [...current.values()].filter((d) => !owners.has(d.value.metadata.name)).flatMap((d) => [...usedBy(d.value.spec)]);
  let removing = false;
  // A deployment that cannot be read might refer to any of them: none is removed while one is there.
  for (const i of unreadableDeployments ? [] : items) {
    const owned = [...stored.values()].filter((v) => v.value.spec.owner?.deployment === i.name);
    const keep = new Set([...usedBy(i.spec), ...others]);
    const candidates = owned.filter((v) => !keep.has(idOf(v.value.kind === 'Secret' ? 'secret' : 'config', v.value.metadata.name)));
    if (!candidates.length) continue;
    const revisions = await readPrefix<DeploymentRevision>(store, { prefix: keys.revisions(i.name), kind: 'DeploymentRevision' });
    // A kept revision that cannot be read might refer to any of them: none is removed.
    if (revisions.unreadable.length) continue;
    for (const r of revisions.items) for (const id of usedBy(r.value.spec.template)) keep.add(id);
    for (const v of candidates) {
      const kind: FileKind = v.value.kind === 'Secret' ? 'secret' : 'config';
      if (keep.has(idOf(kind, v.value.metadata.name))) continue;
      plan.ops.push({ op: 'delete', key: v.key, modRevision: v.modRevision });
      plan.audit.push(removedRecord(kind, v.value.metadata.name, now, i.name));
      removing = true;
      (plan.outcomes.get(i.name) ?? plan.outcomes.set(i.name, []).get(i.name)!).push({ kind, name: v.value.metadata.name, result: 'removed' });
    }
  }
  // A removal decided from every deployment (none refers to it) holds only if none came to since.
  if (removing) plan.ops.push({ op: 'checkRange', key: keys.deployments(), unchangedSince: readAt });
  return plan;
}

/**
 * What deleting deployments does to the secrets and configs their compose files made: removed,
 * unless a deployment that stays refers to them.
 */
export async function ownedRemovals(store: Store, deleting: ReadonlySet<string>, now: number): Promise<{ ops: Op[]; audit: AuditRecord[]; removed: FileOutcome[] }> {
  const cut = await readCut(store, ['secrets', 'configs', 'deployments']);
  const deps = { items: [...cut.kind<Deployment>('deployments').items.values()], revision: cut.revision };
  const keep = new Set(deps.items.filter((d) => !deleting.has(d.value.metadata.name)).flatMap((d) => [...usedBy(d.value.spec)]));
  const out = { ops: [] as Op[], audit: [] as AuditRecord[], removed: [] as FileOutcome[] };
  // A deployment that stays and cannot be read might refer to any of them: none is removed.
  if ([...cut.kind('deployments').unreadable.keys()].some((k) => !deleting.has(k.slice(keys.deployments().length)))) return out;
  for (const v of [...cut.kind<Secret>('secrets').items.values(), ...cut.kind<Config>('configs').items.values()] as Versioned<FileObject>[]) {
    const owner = v.value.spec.owner?.deployment;
    const kind: FileKind = v.value.kind === 'Secret' ? 'secret' : 'config';
    if (!owner || !deleting.has(owner) || keep.has(idOf(kind, v.value.metadata.name))) continue;
    out.ops.push({ op: 'delete', key: v.key, modRevision: v.modRevision });
    out.audit.push(removedRecord(kind, v.value.metadata.name, now, owner));
    out.removed.push({ kind, name: v.value.metadata.name, result: 'removed' });
  }
  // Decided from every deployment: holds only if no deployment came to refer to them since.
  if (out.ops.length) out.ops.push({ op: 'checkRange', key: keys.deployments(), unchangedSince: deps.revision });
  return out;
}
