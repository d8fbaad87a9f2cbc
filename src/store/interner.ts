// Shared subtrees of stored values. Thousands of desired keys of one service carry the same
// template (the service's spec at one revision); decoding each on its own holds thousands of equal
// copies. Values read from the store are never mutated (the cache replaces, never edits), so equal
// subtrees can be one object: the interner hands out the first copy it saw of each, frozen so a
// mutation anywhere fails loudly instead of changing every replica's template at once. Entries go
// when no value holds their object any more.

export class Interner {
  private readonly byText = new Map<string, WeakRef<object>>();
  private readonly registry = new FinalizationRegistry<string>((text) => {
    if (!this.byText.get(text)?.deref()) this.byText.delete(text);
  });

  /** The shared object equal to `value` (by its JSON text), recording `value` when it is the first. */
  share<T extends object>(value: T): T {
    const text = JSON.stringify(value);
    const held = this.byText.get(text)?.deref();
    if (held) return held as T;
    deepFreeze(value);
    this.byText.set(text, new WeakRef(value));
    this.registry.register(value, text);
    return value;
  }

  /** Distinct subtrees held (for tests and metrics). */
  get size(): number {
    return this.byText.size;
  }
}

/** Freezes a value and everything in it (a value that is never to change in place). */
export function deepFreeze(v: unknown): void {
  if (v === null || typeof v !== 'object' || Object.isFrozen(v)) return;
  Object.freeze(v);
  for (const x of Object.values(v)) deepFreeze(x);
}

/** Replaces the subtree at `path` of a decoded value by its shared copy, if it is an object. */
export function shareAt(interner: Interner, value: unknown, path: readonly string[]): void {
  let parent = value as Record<string, unknown> | undefined;
  for (const p of path.slice(0, -1)) {
    const next = parent?.[p];
    if (next === null || typeof next !== 'object') return;
    parent = next as Record<string, unknown>;
  }
  const last = path[path.length - 1]!;
  const sub = parent?.[last];
  if (parent && sub !== null && typeof sub === 'object') parent[last] = interner.share(sub);
}
