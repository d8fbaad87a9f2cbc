// A service's secrets and configs as files: where each appears in the container, with which owner
// and mode, and how they enter the spec hash. One statement of the rules the CLI (apply), the
// secrets controller (which node needs which) and the node-agent (what it writes where) share.
import { posix } from 'node:path';
import type { FileKind, FileRef, ServiceSpec } from './types.js';

/** Docker's default mode of a secret or config file. */
export const DEFAULT_FILE_MODE = 0o444;
/** Where secrets appear when their target is not an absolute path. */
export const SECRETS_DIR = '/run/secrets';

/** One file of a service: the reference, its kind, its place in the service's list, and its resolved path. */
export interface ServiceFile {
  kind: FileKind;
  /** Its index among the service's secrets (or configs). */
  index: number;
  ref: FileRef;
  /** The absolute path in the container. */
  target: string;
  uid: number;
  gid: number;
  mode: number;
}

/** The absolute path a reference appears at in the container. */
export function fileTarget(kind: FileKind, ref: FileRef): string {
  const t = ref.target ?? ref.source;
  if (t.startsWith('/')) return posix.normalize(t);
  return posix.normalize(kind === 'secret' ? `${SECRETS_DIR}/${t}` : `/${t}`);
}

/** Every secret and config a service mounts, in spec order (secrets first). */
export function serviceFiles(t: Pick<ServiceSpec, 'secrets' | 'configs'>): ServiceFile[] {
  const of = (kind: FileKind, refs: FileRef[] | undefined): ServiceFile[] =>
    (refs ?? []).map((ref, index) => ({ kind, index, ref, target: fileTarget(kind, ref), uid: ref.uid ?? 0, gid: ref.gid ?? 0, mode: ref.mode ?? DEFAULT_FILE_MODE }));
  return [...of('secret', t.secrets), ...of('config', t.configs)];
}

/** `secret/<name>` or `config/<name>`: how the copy set and the agent name what a service uses. */
export const fileId = (kind: FileKind, name: string) => `${kind}/${name}`;

/** The objects a service uses, as fileIds. */
export function filesUsed(t: Pick<ServiceSpec, 'secrets' | 'configs'>): string[] {
  return [...new Set(serviceFiles(t).map((f) => fileId(f.kind, f.ref.source)))];
}

/** The name of a file in the replica's own tmpfs on the node (one per reference: a secret may be mounted twice). */
export function nodeFileName(f: Pick<ServiceFile, 'kind' | 'index'>): string {
  return `${f.kind}-${f.index}`;
}

/**
 * The files as the spec hash sees them: resolved, defaults applied, ordered by target — so a
 * cosmetic difference (a default written out, a reordering) does not roll the service, while a
 * new name, version, path, owner or mode does. Empty when the service uses none.
 */
export function canonicalFiles(t: Pick<ServiceSpec, 'secrets' | 'configs'>): Record<string, unknown>[] {
  return serviceFiles(t)
    .map((f) => ({ kind: f.kind, source: f.ref.source, target: f.target, uid: f.uid, gid: f.gid, mode: f.mode, version: f.ref.version ?? null }))
    .sort((a, b) => (a.target < b.target ? -1 : a.target > b.target ? 1 : 0));
}

/** Why a file reference cannot be used (the rule apply and compose report), or undefined. */
export function fileTargetProblem(kind: FileKind, ref: FileRef): string | undefined {
  const raw = ref.target ?? ref.source;
  if (raw.split('/').includes('..')) return `target ${JSON.stringify(raw)} may not contain ".."`;
  const t = fileTarget(kind, ref);
  if (t === '/' || t === SECRETS_DIR) return `target ${JSON.stringify(raw)} names a directory, not a file`;
  return undefined;
}
