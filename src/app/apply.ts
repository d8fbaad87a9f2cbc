// Writing deployments: apply (and rollback, which applies a stored revision's spec). One call is
// one transaction: every deployment, its new revision record, the pruning of old revisions and the
// audit records land together or not at all.
import { randomBytes, randomUUID } from 'node:crypto';
import { DEFAULT_IPV4_RANGE, ulaFromRandom } from '../api/network.js';
import { keys } from '../api/keys.js';
import { summarizeChange } from '../api/change.js';
import { publishedPortConflicts, replicaIdConflicts } from '../api/rules.js';
import { isStateful, placementMode, sameDeploymentSpec, withDependencyHashes } from '../api/spec.js';
import { templateOf } from '../api/serving.js';
import { moveStartBytes } from './controllers.js';
import { DEFAULT_PORT_RANGE } from '../api/ports.js';
import { API_VERSION, type Deployment, type DeploymentRevision, type DeploymentSpec, type NetworkConfig, type Node } from '../api/types.js';
import { AuditLog } from '../store/audit.js';
import { TooLargeError } from '../store/errors.js';
import { encodeJson, MAX_REQUEST_BYTES, type Store, type Versioned } from '../store/store.js';
import { commitAtomic, type OpGroup, type Op } from '../store/writer.js';
import { applyGuards } from './apply-guards.js';
import { PRODUCTION } from '../timings.js';
import type { ComposeObject } from '../compose/map.js';
import { ownedRemovals, planFiles, type FileOutcome } from './apply-files.js';
import { readCut, readKey, unreadableIn, unreadableLines } from './read.js';

/** Revisions kept per deployment (older ones are deleted by the apply that adds a new one). */
export const REVISION_HISTORY_LIMIT = 10;

export interface ApplyItem {
  name: string;
  spec: DeploymentSpec;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** "apply" or "rollback to revision N". */
  cause: string;
  /** Where it came from, for error messages ("hello.yaml document 1"). */
  source?: string;
  /** Services to restart (jaco rollout restart): a new revision even when the spec is unchanged. */
  restart?: string[];
  /** The secrets and configs its compose file declares, created in the same transaction (apply-files.ts). */
  objects?: ComposeObject[];
}

export interface ApplyOutcome {
  name: string;
  result: 'created' | 'configured' | 'unchanged';
  revision: number;
  summary: string;
  /** Its compose file's secrets and configs: created, already there, or removed (no longer referred to). */
  objects?: FileOutcome[];
}

const lastSegment = (key: string) => key.slice(key.lastIndexOf('/') + 1);

export function revisionNumberOfKey(key: string): number {
  return Number(lastSegment(key));
}

/** An apply refused because of what it would clash with among every deployment that would exist. */
export class ApplyConflictError extends Error {
  override name = 'ApplyConflictError';
}

/**
 * Refuses an apply after which two services would name replicas alike (replicaIdConflicts) or a
 * published port could not be answered (publishedPortConflicts).
 */
function checkConflicts(current: Map<string, Versioned<Deployment>>, nodes: Node[], items: ApplyItem[]): void {
  const applied = new Set(items.map((i) => i.name));
  const others = [...current.values()].map((d) => d.value).filter((d) => !applied.has(d.metadata.name));
  const all = [...others.map((d) => ({ name: d.metadata.name, spec: d.spec })), ...items];
  const ranges = nodes.map((n) => ({ node: n.metadata.name, range: n.status?.portRange ?? DEFAULT_PORT_RANGE }));
  const conflicts = [...replicaIdConflicts(all), ...publishedPortConflicts(all, ranges)];
  if (conflicts.length) throw new ApplyConflictError(`nothing was written: ${conflicts.join('; ')}`);
}

/**
 * Refuses a service the system could not later move: a move start (drain, rebalancer) writes the
 * replica's spec twice in one request — the largest transaction a service's spec takes part in
 * (a placement or a rollout step writes it once; a rollback is an apply, checked above). Global and
 * stateful replicas are never moved.
 */
function checkMovable(item: ApplyItem, revision: number): void {
  for (const [service, svc] of Object.entries(item.spec.services)) {
    if (placementMode(svc) === 'global' || isStateful(svc)) continue;
    const t = templateOf(revision, svc);
    const bytes = moveStartBytes({ replica: `${item.name}-${service}-0`, deployment: item.name, service, node: '', index: 0, revision, specHash: t.specHash, template: t.template, placedAt: '' });
    if (bytes > MAX_REQUEST_BYTES)
      throw new TooLargeError(`deployment "${item.name}"${item.source ? ` (${item.source})` : ''} service "${service}" cannot be moved later: a move (drain, rebalancer) writes its spec twice in one request, which`, bytes, MAX_REQUEST_BYTES);
  }
}

/** Plans and commits the apply of several deployments in one transaction. */
export interface ApplyOptions {
  now?: number;
  dryRun?: boolean;
  /** Told what the apply could not read and left out (the CLI prints it to stderr). */
  warn?: (text: string) => void;
}

export async function applyDeployments(store: Store, given: ApplyItem[], opts: ApplyOptions = {}): Promise<ApplyOutcome[]> {
  // One read of every deployment serves the conflict checks and each item's compare-and-swap; the
  // transaction compares what the checks depend on (applyGuards), so they hold for what lands:
  // two concurrent applies cannot both add colliding ids or published ports.
  // Read as the controllers read (read.ts): a value that cannot be read is left out, named, and
  // only a deployment applied over it replaces it.
  const cut = await readCut(store, ['deployments', 'nodes']);
  const listed = { revision: cut.revision };
  const current = new Map([...cut.kind<Deployment>('deployments').items.values()].map((d) => [d.value.metadata.name, d]));
  const unreadable = new Map([...cut.kind('deployments').unreadable.values()].map((u) => [u.key.slice(keys.deployments().length), u]));
  const nodes = [...cut.kind<Node>('nodes').items.values()].map((n) => n.value);
  const applied = new Set(given.map((i) => i.name));
  const skipped = unreadableIn(cut).filter((u) => !applied.has(u.key.slice(keys.deployments().length)) || !u.key.startsWith(keys.deployments()));
  if (skipped.length) opts.warn?.(`${unreadableLines(skipped).trimEnd()}\n  (conflicts with what cannot be read are not checked)\n`);
  checkConflicts(current, nodes, given);
  // Secrets and configs: made, checked, and every reference pinned, before the specs are compared.
  const files = await planFiles(store, given, current, listed.revision, opts.now ?? Date.now(), unreadable.size > 0);
  // A restart: true dependency's spec hash folded into its dependents, from the specs as they land.
  const items = files.items.map((i) => ({ ...i, spec: withDependencyHashes(i.spec) }));
  // Every deployment's revision records (keys only) in one read, not one read per deployment.
  const recorded = new Map<string, string[]>();
  for (const kv of (await store.listRaw(keys.revisions(), listed.revision, { keysOnly: true })).kvs) {
    const key = kv.key.toString('utf8').slice(store.prefix.length);
    const name = key.slice(keys.revisions().length, key.lastIndexOf('/'));
    recorded.set(name, [...(recorded.get(name) ?? []), key]);
  }
  const now = opts.now ?? Date.now();
  const iso = new Date(now).toISOString();
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const acts: OpGroup[] = [];
  const outcomes: ApplyOutcome[] = [];
  for (const item of items) {
    const cur = current.get(item.name);
    const prev = cur?.value;
    // Applied over a value that cannot be read: replaces it, numbered after its kept revisions.
    const over = unreadable.get(item.name);
    const specChanged = !prev || !sameDeploymentSpec(prev.spec, item.spec) || !!item.restart?.length;
    const generation = prev ? (prev.metadata.generation ?? 1) + (specChanged ? 1 : 0) : over ? Math.max(0, ...(recorded.get(item.name) ?? []).map(revisionNumberOfKey)) + 1 : 1;
    const next: Deployment = {
      apiVersion: API_VERSION,
      kind: 'Deployment',
      metadata: {
        name: item.name,
        uid: prev?.metadata.uid ?? randomUUID(),
        creationTimestamp: prev?.metadata.creationTimestamp ?? iso,
        generation,
        ...(item.labels ? { labels: item.labels } : {}),
        ...(item.annotations ? { annotations: item.annotations } : {}),
      },
      spec: item.spec,
    };
    const metaChanged = !!prev && JSON.stringify([prev.metadata.labels, prev.metadata.annotations]) !== JSON.stringify([next.metadata.labels, next.metadata.annotations]);
    const result = over ? 'configured' : !prev ? 'created' : specChanged || metaChanged ? 'configured' : 'unchanged';
    const summary = over ? `replaced a value that could not be read (${over.reason})` : item.restart?.length ? `restart ${item.restart.join(', ')}` : specChanged ? summarizeChange(prev?.spec, item.spec) : '';
    outcomes.push({ name: item.name, result, revision: generation, summary, ...(files.outcomes.get(item.name)?.length ? { objects: files.outcomes.get(item.name) } : {}) });
    if (result === 'unchanged') continue;

    const stored = cur ?? over;
    const ops: OpGroup['ops'] = [stored ? { op: 'update', key: keys.deployment(item.name), value: next, modRevision: stored.modRevision } : { op: 'create', key: keys.deployment(item.name), value: next }];
    if (specChanged) {
      const rev: DeploymentRevision = {
        apiVersion: API_VERSION,
        kind: 'DeploymentRevision',
        metadata: { name: `${item.name}-${generation}` },
        spec: { deployment: item.name, revision: generation, appliedAt: iso, cause: item.cause, summary, template: item.spec, ...(item.restart?.length ? { restarted: item.restart } : {}) },
      };
      ops.push({ op: 'put', key: keys.revision(item.name, generation), value: rev });
      const old = (recorded.get(item.name) ?? []).filter((k) => revisionNumberOfKey(k) !== generation);
      for (const k of old.slice(0, Math.max(0, old.length - (REVISION_HISTORY_LIMIT - 1)))) ops.push({ op: 'delete', key: k });
    }
    // Every change is audited (a label change too): the record is also how a lost reply is resolved.
    ops.push(await audit.op({ type: 'deployment_applied', time: now, deployment: item.name, payload: { revision: generation, result, cause: item.cause, summary } }));
    // Both the deployment and its revision record travel in the one request.
    const bytes = Buffer.byteLength(encodeJson(next)) * (specChanged ? 2 : 1);
    if (bytes > MAX_REQUEST_BYTES) throw new TooLargeError(`deployment "${item.name}"${item.source ? ` (${item.source})` : ''}, with its revision record,`, bytes, MAX_REQUEST_BYTES);
    checkMovable(item, generation);
    acts.push({ label: `apply ${item.name}`, ops });
  }
  // Its checks (an object referred to is still there) go with any write; alone they write nothing.
  if (acts.length || files.ops.some((o) => o.op !== 'check')) acts.push({ label: 'secrets and configs', ops: [...files.ops, ...(await audit.ops(files.audit))] });
  // The first cluster-network service makes the cluster network's ranges (docs/networking.md).
  if (acts.length && items.some((i) => Object.values(i.spec.services).some((svc) => svc.network === 'cluster')) && !(await exists(store, keys.networkConfig(), 'NetworkConfig')))
    acts.push({ label: 'cluster network', ops: [{ op: 'create', key: keys.networkConfig(), value: newNetworkConfig() }] });
  if (!opts.dryRun && acts.length) {
    // The checks above hold for what lands: compared per deployment and per port, not over every
    // deployment, so applies of unrelated deployments all land (apply-guards.ts).
    const guarded = items.filter((i) => outcomes.find((o) => o.name === i.name)?.result !== 'unchanged');
    const guardRevs = new Map((await store.listRaw(keys.portGuards(), listed.revision, { keysOnly: true })).kvs.map((kv) => [Number(lastSegment(kv.key.toString('utf8'))), Number(kv.mod_revision)]));
    const guards = applyGuards(
      guarded.map((i) => ({ name: i.name, spec: i.spec, stored: current.get(i.name)?.value.spec })),
      listed.revision,
      (name) => (current.get(name) ?? unreadable.get(name))?.modRevision ?? 0,
      (port) => guardRevs.get(port) ?? 0,
      iso,
    );
    // What it reports unchanged is unchanged when the rest lands: all or nothing.
    const unchanged = outcomes.filter((o) => o.result === 'unchanged').map((o): Op => ({ op: 'check', key: keys.deployment(o.name), modRevision: current.get(o.name)!.modRevision }));
    acts.push({ label: 'conflict checks still true', ops: [...guards, ...unchanged] });
    await commitAtomic(store, acts, { landed: landedIf(store, acts) });
  }
  return outcomes;
}

/** The cluster network's ranges: the default IPv4 range and a ULA /48 of 40 random bits (RFC 4193). */
export function newNetworkConfig(random: (n: number) => Uint8Array = randomBytes): NetworkConfig {
  return { apiVersion: API_VERSION, kind: 'NetworkConfig', metadata: { name: 'network' }, spec: { ipv4: DEFAULT_IPV4_RANGE, ipv6: ulaFromRandom(random(5)) } };
}

/**
 * Whether a change that got no clear answer is in the store: its audit records have unique keys
 * and land in the same transaction, so finding one proves the whole change landed.
 */
function landedIf(store: Store, acts: OpGroup[]): () => Promise<boolean> {
  const auditKey = acts.flatMap((a) => a.ops).find((o) => o.key.startsWith(keys.audits()))?.key;
  return async () => !!auditKey && (await store.get(auditKey)) !== undefined;
}

/** Whether a key holds a value, readable or not. */
async function exists(store: Store, key: string, kind: string): Promise<boolean> {
  const { value, unreadable } = await readKey(store, key, kind);
  return !!(value ?? unreadable);
}

/** Deletes deployments with their revision records, in one transaction. */
export async function deleteDeployments(store: Store, names: string[], opts: { now?: number; ignoreMissing?: boolean } = {}): Promise<string[]> {
  const now = opts.now ?? Date.now();
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const acts: OpGroup[] = [];
  const deleted: string[] = [];
  const missing: string[] = [];
  for (const name of names) {
    // A value that cannot be read is deleted like any other: delete is how an operator clears it.
    const { value: cur, unreadable } = await readKey<Deployment>(store, keys.deployment(name), 'Deployment');
    const at = cur ?? unreadable;
    if (!at) {
      missing.push(name);
      continue;
    }
    const { kvs } = await store.listRaw(keys.revisions(name));
    acts.push({
      label: `delete ${name}`,
      ops: [
        { op: 'delete', key: keys.deployment(name), modRevision: at.modRevision },
        ...kvs.map((kv) => ({ op: 'delete' as const, key: kv.key.toString('utf8').slice(store.prefix.length) })),
        await audit.op({ type: 'deployment_deleted', time: now, deployment: name, payload: cur ? { revision: cur.value.metadata.generation } : { unreadable: unreadable!.reason } }),
      ],
    });
    deleted.push(name);
  }
  if (missing.length && !opts.ignoreMissing) throw new Error(`deployment ${missing.map((m) => `"${m}"`).join(', ')} not found; nothing was deleted`);
  // What their compose files made goes with them (unless a deployment that stays refers to it).
  const owned = deleted.length ? await ownedRemovals(store, new Set(deleted), now) : undefined;
  if (owned?.ops.length) acts.push({ label: 'secrets and configs', ops: [...owned.ops, ...(await audit.ops(owned.audit))] });
  if (acts.length) await commitAtomic(store, acts, { landed: landedIf(store, acts) });
  return deleted;
}
