// The C allocator a long-running controller process runs with. After a burst (10,000 replicas
// placed) glibc's malloc keeps the freed C heap — gRPC's and V8's off-heap allocations — resident:
// the placing process sat at ~290–350 MiB once idle with a V8 heap of ~60 MiB in use, where a
// process started on the same state holds ~170 MiB (docs/benchmarks.md, "Runtime"). jemalloc
// (Debian's libjemalloc2) with its background thread gives freed pages back within seconds, without
// waiting for the next allocation: the same process, idle, at ~155 MiB (~265 on glibc).
//
// Preloaded by name (the dynamic loader finds it on its own search path, on any architecture), only
// where it is installed: elsewhere glibc with fewer arenas, as before.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

export const JEMALLOC = 'libjemalloc.so.2';

/** Where Debian and its derivatives install shared libraries (multiarch first). */
const LIBRARY_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib'];

/**
 * The environment a controller process is started with: jemalloc preloaded (its background thread
 * on) when the library is found in `dirs`, else glibc with two arenas. An LD_PRELOAD already set in
 * `env` (the operator's) is kept, and nothing is added.
 */
export function allocatorEnv(env: NodeJS.ProcessEnv = process.env, dirs: readonly string[] = LIBRARY_DIRS): Record<string, string> {
  if (env.LD_PRELOAD) return {};
  if (dirs.some((d) => existsSync(join(d, JEMALLOC)))) return { LD_PRELOAD: JEMALLOC, MALLOC_CONF: env.MALLOC_CONF ?? 'background_thread:true' };
  return { MALLOC_ARENA_MAX: env.MALLOC_ARENA_MAX ?? '2' };
}

/** The allocator a process runs with, as its memory map shows it (default: this process). */
export function runningAllocator(maps = '/proc/self/maps'): 'jemalloc' | 'glibc' | 'unknown' {
  try {
    return readFileSync(maps, 'utf8').includes(JEMALLOC) ? 'jemalloc' : 'glibc';
  } catch {
    return 'unknown';
  }
}
