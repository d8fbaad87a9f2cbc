// Polling helpers: tests wait for a condition with a generous deadline, never for a fixed time.

export async function eventually<T>(fn: () => Promise<T | undefined | false> | T | undefined | false, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v as T;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${opts.what ?? 'a condition'}${last ? `; last error: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 100));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
