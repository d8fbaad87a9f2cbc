// Timers a module leaves behind: tests of long-running pieces (leases, elections) assert that
// nothing of theirs is still scheduled once they are stopped.
import { createHook } from 'node:async_hooks';

/**
 * Counts the timers a source file sets itself (the frame calling setTimeout/setInterval is in
 * it; not those a library sets on its behalf), and those of them still pending (async_hooks).
 */
export function timersCreatedBy(file: string): { created(): number; live(): number; disable(): void } {
  const live = new Set<number>();
  let created = 0;
  const hook = createHook({
    init(asyncId, type) {
      if (type !== 'Timeout') return;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 30;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      const frames = stack.split('\n');
      const at = frames.findIndex((f) => /at (setTimeout|setInterval) \(node:timers/.test(f));
      if (at < 0 || !frames[at + 1]?.includes(file)) return;
      created++;
      live.add(asyncId);
    },
    destroy(asyncId) {
      live.delete(asyncId);
    },
  }).enable();
  return { created: () => created, live: () => live.size, disable: () => void hook.disable() };
}
