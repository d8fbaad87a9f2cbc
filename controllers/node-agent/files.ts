// A replica's secrets and configs as files, in memory only. The agent opens its node's copies
// (copies/<node>/, sealed to its own key) and writes each file a container uses into a tmpfs of
// that container's own (src/secrets/tmpfs.ts) — mounted under its state directory before the
// container is created, each file bind-mounted read-only at its target (as Swarm does), removed
// with the container. Nothing is written to the node's disk: a Docker `tmpfs` mount is empty until
// the container runs (the process could read its secret before it is there), and `docker cp` into
// a created container writes its layer, on disk.
import { fileId, nodeFileName, serviceFiles } from '../../src/api/files.js';
import type { FileKind, NodeCopy, ServiceSpec } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import { copyAad, open, type KeyPair } from '../../src/secrets/seal.js';
import { FileDeliveryError, type DeliveredFile, type FileDelivery } from '../../src/secrets/tmpfs.js';
import type { Versioned } from '../../src/store/store.js';

export { FileDeliveryError, NoDelivery, TmpfsDelivery, releaseAllFiles, type FileCode } from '../../src/secrets/tmpfs.js';

/** Whether a copy of this node can be used now (what decide gates a start on), and of which object (its uid). */
export type FileState = { state: 'ready'; uid: string } | { state: 'unreadable'; detail: string };

/**
 * What the copies of this node allow (by fileId): ready, or unreadable and why. A copy opened once
 * at a mod revision is not opened again until it changes; the value is dropped at once.
 */
export class ReplicaFiles {
  private readonly checked = new Map<string, { modRevision: number; state: FileState }>();

  constructor(
    private readonly node: string,
    private readonly key: KeyPair,
    private readonly delivery: FileDelivery,
    private readonly log: Logger,
  ) {}

  /** The directory a container's files are in (container-spec.ts mounts each file from it). */
  dirOf(container: string): string {
    return this.delivery.dirOf(container);
  }

  /** Every copy's state, for decide (a file with no copy is absent: missing). */
  states(copies: Iterable<Versioned<NodeCopy>>): Map<string, FileState> {
    const out = new Map<string, FileState>();
    const seen = new Set<string>();
    for (const c of copies) {
      const id = fileId(c.value.spec.kind, c.value.spec.name);
      seen.add(id);
      const had = this.checked.get(id);
      if (had?.modRevision === c.modRevision) {
        out.set(id, had.state);
        continue;
      }
      const state = this.check(c.value);
      if (state.state === 'unreadable') this.log.warn({ file: id, detail: state.detail }, 'a copy of this node cannot be opened; waiting for the secrets controller to seal it again');
      this.checked.set(id, { modRevision: c.modRevision, state });
      out.set(id, state);
    }
    for (const id of this.checked.keys()) if (!seen.has(id)) this.checked.delete(id);
    return out;
  }

  private check(c: NodeCopy): FileState {
    if (c.spec.node !== this.node) return { state: 'unreadable', detail: `the copy names node ${c.spec.node}` };
    if (c.spec.nodeKey !== this.key.id) return { state: 'unreadable', detail: `sealed to node key ${c.spec.nodeKey}; this node's key is ${this.key.id}` };
    try {
      this.open(c).fill(0);
      return { state: 'ready', uid: c.spec.uid };
    } catch (e) {
      return { state: 'unreadable', detail: (e as Error).message };
    }
  }

  private open(c: NodeCopy): Buffer {
    return open(c.spec.sealed, this.key, copyAad(this.node, c.spec.kind, c.spec.name, c.spec.uid));
  }

  /** Opens the copies a container's spec uses and writes them for it; the directory, or undefined when it uses none. */
  async prepare(container: string, t: ServiceSpec, copy: (kind: FileKind, name: string) => NodeCopy | undefined): Promise<string | undefined> {
    const wanted = serviceFiles(t);
    if (!wanted.length) return undefined;
    const files: DeliveredFile[] = [];
    try {
      for (const f of wanted) {
        const c = copy(f.kind, f.ref.source);
        if (!c) throw new FileDeliveryError(f.kind === 'secret' ? 'secret_missing' : 'config_missing', `no copy of ${f.kind} ${f.ref.source} on this node yet`);
        // The very object the spec was applied with (a name made again is another value).
        if (f.ref.version !== undefined && c.spec.uid !== f.ref.version)
          throw new FileDeliveryError(f.kind === 'secret' ? 'secret_missing' : 'config_missing', `the copy of ${f.kind} ${f.ref.source} on this node is of another ${f.kind} of that name; waiting for the one applied`);
        let content: Buffer;
        try {
          content = this.open(c);
        } catch (e) {
          throw new FileDeliveryError('secret_unreadable', `the copy of ${f.kind} ${f.ref.source} cannot be opened: ${(e as Error).message}`);
        }
        files.push({ name: nodeFileName(f), content, uid: f.uid, gid: f.gid, mode: f.mode });
      }
      return await this.delivery.write(container, files);
    } finally {
      for (const f of files) f.content.fill(0);
    }
  }

  /**
   * The password a registry's secret holds, opened from this node's copy (the secrets controller
   * copies it to every node whose replicas pull from that registry). Throws FileDeliveryError
   * while there is no usable copy yet; the caller drops the password after the pull.
   */
  registryPassword(secret: string, copy: NodeCopy | undefined): string {
    if (!copy) throw new FileDeliveryError('secret_missing', `no copy of the registry's password (secret ${secret}) on this node yet`);
    try {
      return this.open(copy).toString('utf8');
    } catch (e) {
      throw new FileDeliveryError('secret_unreadable', `the copy of the registry's password (secret ${secret}) cannot be opened: ${(e as Error).message}`);
    }
  }

  async release(container: string): Promise<void> {
    await this.delivery.release(container);
  }

  /** Releases the files of this agent's containers (names starting `prefix`) that `keep` does not name. */
  async sweep(prefix: string, keep: (container: string) => boolean): Promise<string[]> {
    const gone = this.delivery.list().filter((c) => c.startsWith(prefix) && !keep(c));
    for (const c of gone) await this.delivery.release(c);
    return gone;
  }
}

