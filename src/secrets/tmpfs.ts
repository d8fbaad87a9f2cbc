// Writing a container's secrets and configs in memory only: a tmpfs per container, mounted under
// the node-agent's state directory before the container is created, each file written with its
// owner and mode (never through a link), unmounted and removed with the container. The agent's
// ReplicaFiles (controllers/node-agent/files.ts) decides what goes in; this is how it goes.
import { execFile } from 'node:child_process';
import { constants, existsSync, mkdirSync, readdirSync, rmSync, statSync, statfsSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ObservedCode } from '../api/reasons/agent.js';
import type { Logger } from '../observability/log.js';

const run = promisify(execFile);
const TMPFS_MAGIC = 0x01021994;

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
