// The last lines of each replica's last removed container, for `jaco logs --previous`. Docker's
// log goes with a removed container, so the agent reads its tail just before it removes one (a
// restart's, a replacement's) and keeps it here: in memory, and in the agent's state directory so
// an agent restart does not forget it. The newest PREVIOUS_KEPT replicas are kept.
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Replicas whose previous container's lines are kept. */
export const PREVIOUS_KEPT = 256;

/** The lines of a removed container kept for `jaco logs --previous` (Docker's tail), per replica. */
export const PREVIOUS_LINES = 1000;

export interface PreviousLog {
  container: string;
  tty: boolean;
  /** Docker's stream (multiplexed unless tty), timestamps on. */
  log: Buffer;
}

/** A replica id as jaco makes them: it names a file here, so nothing else is accepted. */
const REPLICA_ID = /^[a-z0-9][a-z0-9.-]{0,252}$/;

export class PreviousLogs {
  /** Newest last (a Map iterates in insertion order). */
  private readonly kept = new Map<string, PreviousLog>();

  /** dir: where they outlive the agent (undefined: memory only). */
  constructor(private readonly dir?: string, private readonly limit = PREVIOUS_KEPT) {}

  keep(replica: string, p: PreviousLog): void {
    this.kept.delete(replica);
    this.kept.set(replica, p);
    for (const r of this.kept.keys()) if (this.kept.size > this.limit) this.kept.delete(r);
    if (!this.dir || !REPLICA_ID.test(replica)) return;
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // Written whole under a temporary name, then renamed: a crash leaves the old one or the new one.
    const file = join(this.dir, `${replica}.log`);
    writeFileSync(`${file}.tmp`, Buffer.concat([Buffer.from(`${JSON.stringify({ container: p.container, tty: p.tty })}\n`), p.log]), { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
    this.prune();
  }

  get(replica: string): PreviousLog | undefined {
    const m = this.kept.get(replica);
    if (m || !this.dir || !REPLICA_ID.test(replica)) return m;
    let buf: Buffer;
    try {
      buf = readFileSync(join(this.dir, `${replica}.log`));
    } catch {
      return undefined;
    }
    const nl = buf.indexOf(10);
    try {
      const head = JSON.parse(buf.subarray(0, nl).toString()) as { container: string; tty: boolean };
      return { container: head.container, tty: head.tty, log: buf.subarray(nl + 1) };
    } catch {
      return undefined; // not one of ours (a hand edit): as if nothing were kept
    }
  }

  /** The oldest files beyond the limit go. */
  private prune(): void {
    const files = readdirSync(this.dir!).filter((f) => f.endsWith('.log'));
    if (files.length <= this.limit) return;
    const byAge = files.map((f) => ({ f, t: statSync(join(this.dir!, f)).mtimeMs })).sort((a, b) => a.t - b.t || (a.f < b.f ? -1 : 1));
    for (const { f } of byAge.slice(0, files.length - this.limit)) rmSync(join(this.dir!, f), { force: true });
  }
}
