// A replica's secrets and configs as files, in memory only. The agent opens its node's copies
// (copies/<node>/, sealed to its own key) and writes each file a container uses into a tmpfs of
// that container's own — mounted by the agent under its state directory before the container is
// created, each file bind-mounted read-only at its target (as Swarm does), removed with the
// container. Nothing is written to the node's disk: a Docker `tmpfs` mount is empty until the
// container runs (the process could read its secret before it is there), and `docker cp` into a
// created container writes its layer, on disk.
//
// Two parts: ReplicaFiles, which knows the copies (what decide may start, the plaintext for a
// start), and FileDelivery, which writes and removes the tmpfs (TmpfsDelivery on a real host).
import { execFile } from 'node:child_process';
import { constants, existsSync, mkdirSync, readdirSync, rmSync, statSync, statfsSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileId, nodeFileName, serviceFiles } from '../../src/api/files.js';
import type { ObservedCode } from '../../src/api/reasons/agent.js';
import type { FileKind, NodeCopy, ServiceSpec } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import { copyAad, open, type KeyPair } from '../../src/secrets/seal.js';
import type { Versioned } from '../../src/store/store.js';

const run = promisify(execFile);
const TMPFS_MAGIC = 0x01021994;

/** Whether a copy of this node can be used now (what decide gates a start on). */
export type FileState = { state: 'ready' } | { state: 'unreadable'; detail: string };

/** The codes a replica waits with when its files are not ready (src/api/reasons/agent.ts). */
export type FileCode = Extract<ObservedCode, 'secret_missing' | 'config_missing' | 'secret_unreadable' | 'secret_delivery_failed'>;

/** A start cannot have its files: missing or unreadable copies (decide had not seen it yet), or the tmpfs failed. */
export class FileDeliveryError extends Error {
  override name = 'FileDeliveryError';
  readonly recoverable = true;
  constructor(
    readonly code: FileCode,
    message: string,
  ) {
    super(message);
  }
}

/** One file for one container, as the delivery writes it. */
export interface DeliveredFile {
  /** Its name in the container's tmpfs (nodeFileName). */
  name: string;
  content: Buffer;
  uid: number;
  gid: number;
  mode: number;
}

/** Where a container's files are written, and how they go. */
export interface FileDelivery {
  /** The directory a container's files are (or will be) in. */
  dirOf(container: string): string;
  /** Writes the files on a tmpfs of the container's own; returns its directory. */
  write(container: string, files: DeliveredFile[]): Promise<string>;
  /** Unmounts and removes a container's files (nothing there is fine). */
  release(container: string): Promise<void>;
  /** The containers that have files here. */
  list(): string[];
}

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
      return { state: 'ready' };
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

const isTmpfs = (path: string) => statfsSync(path).type === TMPFS_MAGIC;

/**
 * A tmpfs per container under `root` (the agent's state directory's files/, mode 700): mounted
 * with mode 700, nosuid, nodev, noexec, sized to its files. Without the right to mount (not root),
 * a root that is itself on a tmpfs (a state directory under /run) still keeps everything in memory;
 * anywhere else the start fails with secret_delivery_failed rather than write to disk.
 */
export class TmpfsDelivery implements FileDelivery {
  constructor(
    readonly root: string,
    private readonly log: Logger,
  ) {}

  dirOf(container: string): string {
    return join(this.root, container);
  }

  /** A tmpfs mounted at dir (not just a directory on the root's filesystem). */
  private mounted(dir: string): boolean {
    try {
      return isTmpfs(dir) && statSync(dir).dev !== statSync(this.root).dev;
    } catch {
      return false;
    }
  }

  private async ensureTmpfs(dir: string, bytes: number): Promise<void> {
    mkdirSync(this.root, { recursive: true, mode: 0o700 });
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (this.mounted(dir)) return;
    const size = Math.ceil((bytes + 64 * 1024) / 4096) * 4096;
    try {
      await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0700,nosuid,nodev,noexec`, 'tmpfs', dir]);
      return;
    } catch (e) {
      const why = ((e as { stderr?: string }).stderr ?? (e as Error).message).trim();
      if (isTmpfs(this.root)) {
        this.log.warn({ dir, err: why }, 'cannot mount a tmpfs per container; the state directory is on a tmpfs, so the files stay in memory there');
        return;
      }
      throw new FileDeliveryError('secret_delivery_failed', `cannot mount a tmpfs at ${dir} (${why}): run the agent as root, or give it a --state-dir on a tmpfs (under /run)`);
    }
  }

  async write(container: string, files: DeliveredFile[]): Promise<string> {
    const dir = this.dirOf(container);
    await this.ensureTmpfs(dir, files.reduce((s, f) => s + f.content.length + 4096, 0));
    try {
      for (const f of files) {
        // O_NOFOLLOW: a link planted in the directory is never written through.
        const h = await openFile(join(dir, f.name), constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, 0o600);
        try {
          await h.writeFile(f.content);
          await h.chown(f.uid, f.gid);
          await h.chmod(f.mode);
        } finally {
          await h.close();
        }
      }
    } catch (e) {
      if (e instanceof FileDeliveryError) throw e;
      throw new FileDeliveryError('secret_delivery_failed', `cannot write the files of ${container}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
    return dir;
  }

  async release(container: string): Promise<void> {
    const dir = this.dirOf(container);
    if (!existsSync(dir)) return;
    if (this.mounted(dir)) {
      try {
        await run('umount', [dir]);
      } catch (e) {
        // Busy (a container still holds a bind of it): kept; the next sweep tries again.
        this.log.warn({ dir, err: ((e as { stderr?: string }).stderr ?? (e as Error).message).trim() }, 'cannot unmount a container\'s files yet');
        return;
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }

  list(): string[] {
    try {
      return readdirSync(this.root, { withFileTypes: true })
        .filter((d) => d.isDirectory())
        .map((d) => d.name);
    } catch {
      return [];
    }
  }
}

/**
 * Hollow nodes' delivery: their containers are in memory, so their files are opened (the copy
 * works) and dropped, never written anywhere.
 */
export class NoDelivery implements FileDelivery {
  dirOf(container: string): string {
    return `/nonexistent/jaco-hollow-files/${container}`;
  }
  async write(container: string): Promise<string> {
    return this.dirOf(container);
  }
  async release(): Promise<void> {}
  list(): string[] {
    return [];
  }
}

/** Unmounts and removes every container's files under a state directory (jaco down, test teardown). */
export async function releaseAllFiles(stateDir: string, log: Logger): Promise<void> {
  const d = new TmpfsDelivery(join(stateDir, 'files'), log);
  for (const c of d.list()) await d.release(c);
}
