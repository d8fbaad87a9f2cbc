// The secrets controller's pass: publish the cluster key's public half, keep every secret at rest
// sealed to the newest cluster key, and keep each node's copies exactly what its replicas use
// (copyset.ts), each sealed to that node's own key. The plan is pure; sealing is the one thing it
// does besides deciding — through `crypto`, injected (real keys here, a deterministic stand-in in
// the simulation), because an act must carry the ciphertext it writes.
//
// Every act compares what it relied on: a copy write, the node key it sealed to (nodes/<node>),
// the object it copied, and the desired key of a replica that uses it; a copy's removal, that no
// desired key on its node changed since the pass read them (a replica just placed may use it).
import { filesUsed } from '../../src/api/files.js';
import { runImage } from '../../src/api/spec.js';
import { registrySecretOf } from '../../src/images/access.js';
import { keys } from '../../src/api/keys.js';
import type { CopyWaitReason } from '../../src/api/reasons/secrets.js';
import { API_VERSION, type ClusterKey, type Config, type FileKind, type ImageSettingsSpec, type Node, type NodeCopy, type Registry, type ReplicaDesired, type Secret, type ServiceSpec } from '../../src/api/types.js';
import type { Act } from '../../src/runtime/acts.js';
import type { PassResult } from '../../src/runtime/runner.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import { copyAad, secretAad, type PublicKeyInfo, type Sealed } from '../../src/secrets/seal.js';
import { planCopies, type CopyFacts, type CopyPlan } from './copyset.js';
import type { SecretsMetricEvent } from './metrics.js';

/** The cluster keys as the pass needs them (ClusterKeyRing, or the simulation's stand-in). */
export interface ClusterKeys {
  readonly primary: PublicKeyInfo;
  has(id: string): boolean;
  /** Whether held key `a` is older than held key `b`. */
  older(a: string, b: string): boolean;
}

/** What sealing the pass may do: open with the cluster keys, seal to a public key. */
export interface SecretsCrypto {
  /** The cluster keys now; undefined without a key file (configs are still copied). */
  clusterKeys(): ClusterKeys | undefined;
  /** Opens a value sealed to a cluster key (throws OpenError). */
  open(sealed: Sealed, aad: string): Buffer;
  seal(value: Buffer, to: PublicKeyInfo, aad: string): Sealed;
}

export interface SecretsSnapshot {
  /** The cache's revision: what the pass read is everything up to it. */
  revision: number;
  nodes: ReadonlyMap<string, Versioned<Node>>;
  /** Desired replicas by node (the last readable version of an unreadable key counts). */
  desired: ReadonlyMap<string, readonly Versioned<ReplicaDesired>[]>;
  /** Nodes with a desired key that has no readable version. */
  unknownUse: ReadonlySet<string>;
  secrets: ReadonlyMap<string, Versioned<Secret>>;
  configs: ReadonlyMap<string, Versioned<Config>>;
  /** Copies by `<node>/<kind>/<name>`. */
  copies: ReadonlyMap<string, Versioned<NodeCopy>>;
  clusterKey?: Versioned<ClusterKey>;
  /** The registries' access: a replica's image at a registry with a stored password uses that password's secret. */
  registries?: readonly Registry[];
  imageSettings?: ImageSettingsSpec;
}

/** A secret (config) that cannot be copied, and why: logged once, counted. */
export interface SecretProblem {
  file: string;
  why: CopyWaitReason;
  detail: string;
}

export interface SecretsDecision extends PassResult<undefined, SecretsMetricEvent> {
  plan: CopyPlan;
  problems: SecretProblem[];
  /** Secrets still sealed to an older cluster key (re-sealed a batch per pass). */
  staleAtRest: number;
}

/** Re-seals at rest per pass: a rotation of thousands of secrets goes in batches, the copies not held up behind it. */
export const RESEAL_PER_PASS = 64;

const fileOf = (kind: FileKind, name: string) => `${kind}/${name}`;
const splitFile = (file: string): [FileKind, string] => [file.slice(0, file.indexOf('/')) as FileKind, file.slice(file.indexOf('/') + 1)];

/**
 * The files a template uses. Every replica of a service at one revision shares one frozen template
 * in the cache (WATCHABLE's `share`): computed once per template, not once per replica per pass.
 */
const usedByTemplate = new WeakMap<ServiceSpec, readonly string[]>();
function templateFiles(t: ServiceSpec): readonly string[] {
  let f = usedByTemplate.get(t);
  if (!f) usedByTemplate.set(t, (f = filesUsed(t)));
  return f;
}

/**
 * Per node, per file: the replicas desired there that use it — the secrets and configs of their
 * templates, and the password secret of the registry their image is pulled from.
 */
function usesOf(snap: SecretsSnapshot): Map<string, Map<string, string[]>> {
  const out = new Map<string, Map<string, string[]>>();
  const pullSecret = new Map<string, string | undefined>();
  const pullFile = (image: string) => {
    if (!pullSecret.has(image)) {
      const s = registrySecretOf(image, snap.registries!, snap.imageSettings);
      pullSecret.set(image, s ? fileOf('secret', s.secret) : undefined);
    }
    return pullSecret.get(image);
  };
  for (const [node, ds] of snap.desired)
    for (const d of ds) {
      const t = d.value.spec.template;
      const pull = snap.registries?.length ? pullFile(runImage(t)) : undefined;
      for (const file of pull ? [...templateFiles(t), pull] : templateFiles(t)) {
        const m = out.get(node) ?? out.set(node, new Map()).get(node)!;
        (m.get(file) ?? m.set(file, []).get(file)!).push(d.value.spec.replica);
      }
    }
  for (const m of out.values()) for (const r of m.values()) r.sort();
  return out;
}

function copyFacts(snap: SecretsSnapshot): Map<string, Map<string, CopyFacts>> {
  const out = new Map<string, Map<string, CopyFacts>>();
  for (const c of snap.copies.values()) {
    const s = c.value.spec;
    const m = out.get(s.node) ?? out.set(s.node, new Map()).get(s.node)!;
    m.set(fileOf(s.kind, s.name), { uid: s.uid, nodeKey: s.nodeKey, modRevision: c.modRevision });
  }
  return out;
}

export function decideSecrets(snap: SecretsSnapshot, now: number, crypto: SecretsCrypto): SecretsDecision {
  const acts: Act<SecretsMetricEvent>[] = [];
  const problems: SecretProblem[] = [];
  const ring = crypto.clusterKeys();

  // 1. The public half of the newest cluster key, for `jaco secret create` and apply to seal to.
  // Never a step back: a controller whose key file is older than the one that published leaves it.
  const published = snap.clusterKey?.value.spec;
  if (ring && published?.id !== ring.primary.id && (!published || (ring.has(published.id) && ring.older(published.id, ring.primary.id)))) {
    const value: ClusterKey = { apiVersion: API_VERSION, kind: 'ClusterKey', metadata: { name: 'current' }, spec: { id: ring.primary.id, publicKey: ring.primary.publicKey, publishedAt: new Date(now).toISOString() } };
    acts.push({
      label: `publish cluster key ${ring.primary.id}`,
      ops: [snap.clusterKey ? { op: 'update', key: keys.clusterKey(), value, modRevision: snap.clusterKey.modRevision } : { op: 'create', key: keys.clusterKey(), value }],
      audit: [{ type: 'cluster_key_published', time: now, payload: { id: ring.primary.id, ...(published ? { previous: published.id } : {}) } }],
    });
  }

  // 2. Secrets at rest sealed to an older key: opened and sealed to the newest, a batch a pass.
  const stale = ring ? [...snap.secrets.values()].filter((s) => s.value.spec.sealed.key !== ring.primary.id && ring.has(s.value.spec.sealed.key)) : [];
  for (const s of stale.slice(0, RESEAL_PER_PASS)) {
    const name = s.value.metadata.name;
    const aad = secretAad(name, s.value.metadata.uid ?? '');
    let value: Buffer;
    try {
      value = crypto.open(s.value.spec.sealed, aad);
    } catch (e) {
      problems.push({ file: fileOf('secret', name), why: 'cannot_open', detail: (e as Error).message });
      continue;
    }
    const sealed = crypto.seal(value, ring!.primary, aad);
    value.fill(0);
    const next: Secret = { ...s.value, metadata: { ...s.value.metadata }, spec: { ...s.value.spec, sealed } };
    delete next.metadata.resourceVersion;
    acts.push({
      label: `reseal secret ${name}`,
      ops: [{ op: 'update', key: keys.secret(name), value: next, modRevision: s.modRevision }],
      audit: [{ type: 'secret_resealed', time: now, payload: { name, from: s.value.spec.sealed.key, to: ring!.primary.id } }],
    });
  }
  if (ring) for (const s of snap.secrets.values()) if (!ring.has(s.value.spec.sealed.key)) problems.push({ file: fileOf('secret', s.value.metadata.name), why: 'cannot_open', detail: `sealed to cluster key ${s.value.spec.sealed.key}, which the key file does not hold` });

  // 3. Each node's copies.
  const sources = new Map<string, { uid: string }>();
  for (const s of snap.secrets.values()) sources.set(fileOf('secret', s.value.metadata.name), { uid: s.value.metadata.uid ?? '' });
  for (const c of snap.configs.values()) sources.set(fileOf('config', c.value.metadata.name), { uid: c.value.metadata.uid ?? '' });
  const nodes = new Map([...snap.nodes].map(([n, v]) => [n, { key: v.value.status?.secretsKey?.id, modRevision: v.modRevision }]));
  const plan = planCopies({ nodes, uses: usesOf(snap), unknownUse: snap.unknownUse, sources, copies: copyFacts(snap) });
  const desiredKey = new Map<string, Versioned<ReplicaDesired>>();
  for (const [node, ds] of snap.desired) for (const d of ds) desiredKey.set(`${node}/${d.value.spec.replica}`, d);

  for (const w of plan.write) {
    const [kind, name] = splitFile(w.file);
    const node = snap.nodes.get(w.node)!;
    const nodeKey = node.value.status!.secretsKey!;
    const src = kind === 'secret' ? snap.secrets.get(name)! : snap.configs.get(name)!;
    const uid = src.value.metadata.uid ?? '';
    let value: Buffer;
    if (kind === 'config') value = Buffer.from((src.value as Config).spec.data, 'base64');
    else if (!ring) {
      problems.push({ file: w.file, why: 'no_cluster_key', detail: 'no cluster key file (--secrets-key-file)' });
      continue;
    } else {
      try {
        value = crypto.open((src.value as Secret).spec.sealed, secretAad(name, uid));
      } catch (e) {
        problems.push({ file: w.file, why: 'cannot_open', detail: (e as Error).message });
        continue;
      }
    }
    const copy: NodeCopy = {
      apiVersion: API_VERSION,
      kind: 'NodeCopy',
      metadata: { name },
      spec: { node: w.node, kind, name, uid, nodeKey: nodeKey.id, size: value.length, sealed: crypto.seal(value, nodeKey, copyAad(w.node, kind, name, uid)) },
    };
    value.fill(0);
    const key = keys.copy(w.node, kind, name);
    const guard = desiredKey.get(`${w.node}/${w.replicas[0]}`)!;
    const ops: Op[] = [
      w.prev ? { op: 'update', key, value: copy, modRevision: w.prev.modRevision } : { op: 'create', key, value: copy },
      // Sealed to the key the node publishes now, of the object as read, for a replica that still uses it.
      { op: 'check', key: keys.node(w.node), modRevision: node.modRevision },
      { op: 'check', key: kind === 'secret' ? keys.secret(name) : keys.config(name), modRevision: src.modRevision },
      { op: 'check', key: guard.key, modRevision: guard.modRevision },
    ];
    acts.push({
      label: `copy ${w.file} to ${w.node}`,
      subject: `node/${w.node}`,
      ops,
      audit: [{ type: 'secret_copied', time: now, payload: { node: w.node, kind, name, reason: w.reason, replicas: w.replicas.slice(0, 5) } }],
      metrics: [{ event: 'copied', reason: w.reason }],
    });
  }
  for (const r of plan.remove) {
    const [kind, name] = splitFile(r.file);
    acts.push({
      label: `remove copy of ${r.file} from ${r.node}`,
      subject: `node/${r.node}`,
      ops: [
        { op: 'delete', key: keys.copy(r.node, kind, name), modRevision: r.prev.modRevision },
        // No replica placed on the node since the pass read it (it might use this very file).
        { op: 'checkRange', key: keys.desiredOf(r.node), unchangedSince: snap.revision },
      ],
      audit: [{ type: 'secret_copy_removed', time: now, payload: { node: r.node, kind, name, reason: 'unused' } }],
      metrics: [{ event: 'removed', reason: 'unused' }],
    });
  }
  for (const w of plan.waiting) problems.push({ file: w.file, why: w.why, detail: `${w.node}: ${w.replicas.slice(0, 3).join(', ')}${w.replicas.length > 3 ? ', …' : ''}` });

  const notes = plan.waiting.map((w) => ({ node: w.node, file: w.file, waits: w.why }));
  // More to re-seal than one pass takes: come back at once.
  const wakeAt = stale.length > RESEAL_PER_PASS ? now : undefined;
  return { acts, notes, ...(wakeAt !== undefined ? { wakeAt } : {}), plan, problems, staleAtRest: stale.length };
}
