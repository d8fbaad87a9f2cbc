// Long-running process plumbing: wait for SIGINT/SIGTERM, then stop everything in reverse order.
import type { Logger } from '../observability/log.js';

/** Resolves on the first SIGINT or SIGTERM. */
export function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (s: NodeJS.Signals) => {
      process.off('SIGINT', on);
      process.off('SIGTERM', on);
      resolve(s);
    };
    process.on('SIGINT', on);
    process.on('SIGTERM', on);
  });
}

/** Runs stop functions in reverse order of start, logging (not throwing) their failures. */
export async function stopAll(stops: (() => Promise<void>)[], log: Logger): Promise<void> {
  for (const stop of [...stops].reverse()) {
    try {
      await stop();
    } catch (e) {
      log.warn({ err: (e as Error).message }, 'error while stopping');
    }
  }
}
