// How the CLI reads the store: through the code the controllers read with (src/store/reflector.ts:
// JSON, the kind, the CRD), so a value that cannot be read is left out and named with its key and
// why — never a bare "Unexpected token" that stops the command. One read of several prefixes is
// one consistent cut (Cache.read); a single key or a prefix no controller watches is read alike
// (readListed). Nothing is logged: each command reports what it could not read (warnUnreadable).
import { keys } from '../api/keys.js';
import { silentLogger } from '../observability/log.js';
import { Cache } from '../runtime/cache.js';
import type { Watchable } from '../runtime/watchable.js';
import { KeptReads } from '../store/kept-reads.js';
import { readListed, type SourceSpec, type Unreadable } from '../store/reflector.js';
import type { Store, Versioned } from '../store/store.js';

/**
 * One consistent read of the named prefixes (no watch, nothing logged), from the reads this user
 * kept of the store at their last command where they can be (src/store/kept-reads.ts).
 */
export function readCut(store: Store, names: readonly Watchable[]): Promise<Cache> {
  return Cache.read(store, names, silentLogger(), KeptReads.forStore(store));
}

/** Every key of the cut whose value cannot be read, by key. */
export function unreadableIn(cache: Cache): Unreadable[] {
  return Object.values(cache.feed.sources)
    .flatMap((s) => [...s.unreadable.values()])
    .sort((a, b) => (a.key < b.key ? -1 : 1));
}

/**
 * A prefix read as the cache would read it: readable values and what cannot be read. `at`: at the
 * revision of a cut already read, so a command's reads all show one moment of the store.
 */
export async function readPrefix<T>(store: Store, spec: SourceSpec, at?: number): Promise<{ items: Versioned<T>[]; unreadable: Unreadable[]; revision: number }> {
  const { kvs, revision } = await store.listRaw(spec.prefix, at);
  const src = readListed<T>(spec.prefix, spec, kvs, store.prefix.length, silentLogger());
  return { items: [...src.items.values()], unreadable: [...src.unreadable.values()], revision };
}

/** One key, read as the cache would read it: its value, or why it cannot be read, or neither (absent). `at`: as readPrefix's. */
export async function readKey<T>(store: Store, key: string, kind: string, at?: number): Promise<{ value?: Versioned<T>; unreadable?: Unreadable }> {
  const { items, unreadable } = await readPrefix<T>(store, { prefix: key, kind }, at);
  return { value: items.find((i) => i.key === key), unreadable: unreadable.find((u) => u.key === key) };
}

/** The commands that remove a key of this prefix, for the hint beside an unreadable one. */
function remedy(key: string): string {
  const name = key.slice(key.indexOf('/') + 1);
  if (key.startsWith(keys.deployments())) return `jaco delete deployment ${name} removes it, or jaco apply a good one over it`;
  return 'fix or delete it with etcdctl';
}

/** The lines that name what a command could not read (to stderr: the output itself stays parseable). */
export function unreadableLines(list: readonly Unreadable[]): string {
  return list.map((u) => `warning: ${u.key} cannot be read (${u.reason}); left out — ${remedy(u.key)}\n`).join('');
}

export function warnUnreadable(list: readonly Unreadable[]): void {
  if (list.length) process.stderr.write(unreadableLines(list));
}

/** A refusal to act on a key whose value cannot be read. */
export function unreadableRefusal(u: Unreadable, what: string): string {
  return `cannot ${what}: ${u.key} cannot be read (${u.reason}); ${remedy(u.key)}`;
}
