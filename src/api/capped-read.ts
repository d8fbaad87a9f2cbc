// Reading a file, a device or a pipe without trusting its size: manifests, compose files, the
// values of secrets and configs.
import { closeSync, openSync, readSync } from 'node:fs';

/**
 * Reads a file or a descriptor, but never more than `limit` bytes: past it, undefined, having read
 * one byte more and no further. A size from stat says nothing of a device or a pipe (/dev/zero,
 * an endless `jaco apply -f -`), which would otherwise be read until memory runs out.
 */
export function readCapped(from: string | number, limit: number): Buffer | undefined {
  const fd = typeof from === 'number' ? from : openSync(from, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, limit + 1 - total));
      let n: number;
      try {
        n = readSync(fd, buf, 0, buf.length, null);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'EOF') break;
        // A non-blocking stdin with nothing yet: wait a moment rather than spin.
        if (code === 'EAGAIN') {
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
          continue;
        }
        throw e;
      }
      if (n === 0) break;
      chunks.push(buf.subarray(0, n));
      total += n;
      if (total > limit) return undefined;
    }
    return Buffer.concat(chunks, total);
  } finally {
    if (typeof from !== 'number') closeSync(fd);
  }
}

/** "500 KiB", "16 MiB". */
export function sizeText(bytes: number): string {
  return bytes >= 1048576 ? `${+(bytes / 1048576).toFixed(1)} MiB` : bytes >= 1024 ? `${+(bytes / 1024).toFixed(1)} KiB` : `${bytes} bytes`;
}

/** A file read with readCapped, failing past the limit (for readers that report a read that failed, with why). */
export function readFileCapped(path: string, limit: number): Buffer {
  const bytes = readCapped(path, limit);
  if (!bytes) throw new Error(`more than ${sizeText(limit)} read, and it goes on; at most ${sizeText(limit)} is read`);
  return bytes;
}
