// An in-memory versioned map with etcd's revision bookkeeping, for the table tests of pure
// controller cores: a decision's ops are applied all-or-nothing on their compare-and-swap
// preconditions, the way src/store/writer.ts commits an act. It never stands in for etcd in a
// test that claims to test etcd (those use test/support/etcd.ts).
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';

export class MemoryKv {
  rev = 1;
  readonly kv = new Map<string, Versioned<unknown>>();
  /** Acts refused because a precondition no longer held. */
  conflicts = 0;

  put(key: string, value: unknown): void {
    const prev = this.kv.get(key);
    this.rev++;
    this.kv.set(key, { key, value: structuredClone(value), modRevision: this.rev, createRevision: prev?.createRevision ?? this.rev, version: (prev?.version ?? 0) + 1 });
  }

  get<T>(key: string): T | undefined {
    return this.kv.get(key)?.value as T | undefined;
  }

  remove(key: string): void {
    this.rev++;
    this.kv.delete(key);
  }

  /** Values under a prefix, in key order. */
  under<T>(prefix: string): Versioned<T>[] {
    return [...this.kv.values()].filter((v) => v.key.startsWith(prefix)).sort((a, b) => (a.key < b.key ? -1 : 1)) as Versioned<T>[];
  }

  /** Applies one act's ops if every precondition holds (else counts a conflict); true when it landed. */
  applyAct(ops: Op[]): boolean {
    const ok = ops.every((o) => {
      const cur = this.kv.get(o.key);
      if (o.op === 'create') return !cur;
      if (o.op === 'update' || o.op === 'check') return (cur?.modRevision ?? 0) === o.modRevision;
      if (o.op === 'delete') return o.modRevision === undefined || cur?.modRevision === o.modRevision;
      return true;
    });
    if (!ok) {
      this.conflicts++;
      return false;
    }
    for (const o of ops) {
      if (o.op === 'delete') this.remove(o.key);
      else if (o.op !== 'check') this.put(o.key, o.value);
    }
    return true;
  }
}
