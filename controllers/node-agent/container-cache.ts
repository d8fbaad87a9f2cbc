// The agent's picture of its containers, fed from three sources that race: the periodic resync
// (list + inspect), Docker events (inspect one) and its own start/stop workers. Every update is
// stamped with a sequence number taken BEFORE its read began, so a slow read never overwrites a
// newer one, and a container destroyed meanwhile is not brought back by a resync that listed it.
import type { ContainerFacts } from './facts.js';

export class ContainerCache {
  private seq = 0;
  private readonly items = new Map<string, { facts: ContainerFacts; seq: number }>();
  private readonly tombstones = new Map<string, number>();

  /** Call before a read; pass the result to put()/sweep() with what the read found. */
  begin(): number {
    return ++this.seq;
  }

  /** Records what a read that began at `since` found, unless something newer is known. */
  put(facts: ContainerFacts, since: number): boolean {
    if ((this.tombstones.get(facts.id) ?? 0) > since) return false;
    const cur = this.items.get(facts.id);
    if (cur && cur.seq > since) return false;
    this.items.set(facts.id, { facts, seq: ++this.seq });
    return true;
  }

  /** The container is gone. */
  remove(id: string): void {
    this.items.delete(id);
    this.tombstones.set(id, ++this.seq);
  }

  /** After a full list that began at `since`: drops containers it did not find and old tombstones. */
  sweep(listed: ReadonlySet<string>, since: number): void {
    for (const [id, e] of this.items) if (!listed.has(id) && e.seq < since) this.items.delete(id);
    for (const [id, s] of this.tombstones) if (s < since) this.tombstones.delete(id);
  }

  get(id: string): ContainerFacts | undefined {
    return this.items.get(id)?.facts;
  }

  values(): ContainerFacts[] {
    return [...this.items.values()].map((e) => e.facts);
  }

  get size(): number {
    return this.items.size;
  }
}
