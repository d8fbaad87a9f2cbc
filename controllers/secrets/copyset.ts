// Which node needs which secret and config: the copy set. A node gets a copy of exactly what the
// replicas desired on it use (every desired key counts — a move's destination before it runs, a
// suspended replica that may resume), sealed to the node's current key, of the object's current
// version; a copy nothing on its node uses any more is removed. Pure: the plan and why, from plain
// data; the controller (decide.ts) seals and writes it.
//
// Registry passwords reach nodes the same way: a node's `uses` include the password secret of the
// registry each of its replicas' images is pulled from (decide.ts) — the plan does not care why a
// node uses a file, only that it does.
export type CopyReason = 'missing' | 'source_changed' | 'node_key_changed';
export type CopyWait = 'node_has_no_key' | 'source_missing';

/** What a node's copy of one file was made from. */
export interface CopyFacts {
  /** The uid of the object it copies. */
  uid: string;
  /** The node key it is sealed to. */
  nodeKey: string;
  modRevision: number;
}

export interface CopySetInput {
  /** Every registered node: its published key (absent: an agent that has not published one) and its key's revision. */
  nodes: ReadonlyMap<string, { key?: string; modRevision: number }>;
  /** Per node, per file (fileId `secret/<name>`): the replicas desired on it that use the file, sorted. */
  uses: ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>;
  /** Nodes whose desired keys are not all readable: what their replicas use is not known, so nothing of theirs is removed. */
  unknownUse: ReadonlySet<string>;
  /** The objects that exist, by fileId: their uid. */
  sources: ReadonlyMap<string, { uid: string }>;
  /** The copies that exist, per node, by fileId. */
  copies: ReadonlyMap<string, ReadonlyMap<string, CopyFacts>>;
}

export interface CopyWrite {
  node: string;
  file: string;
  reason: CopyReason;
  /** The replicas on the node that use it (the first one's desired key guards the write). */
  replicas: readonly string[];
  /** The copy it replaces. */
  prev?: CopyFacts;
}

export interface CopyRemoval {
  node: string;
  file: string;
  prev: CopyFacts;
}

export interface CopyWaiting {
  node: string;
  file: string;
  why: CopyWait;
  replicas: readonly string[];
}

export interface CopyPlan {
  write: CopyWrite[];
  remove: CopyRemoval[];
  waiting: CopyWaiting[];
}

const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The copy set's plan: what to write, remove, and what waits (with why), by node then file. */
export function planCopies(input: CopySetInput): CopyPlan {
  const plan: CopyPlan = { write: [], remove: [], waiting: [] };
  const nodes = [...new Set([...input.uses.keys(), ...input.copies.keys()])].sort(byName);
  for (const node of nodes) {
    const uses = input.uses.get(node) ?? new Map<string, readonly string[]>();
    const have = input.copies.get(node) ?? new Map<string, CopyFacts>();
    const key = input.nodes.get(node)?.key;
    for (const file of [...uses.keys()].sort(byName)) {
      const replicas = uses.get(file)!;
      const source = input.sources.get(file);
      const copy = have.get(file);
      // A source gone while a replica still uses it (removed by hand): the copy is the last place
      // its value is, and a restart needs it — kept, and the wait said.
      if (!source) {
        plan.waiting.push({ node, file, why: 'source_missing', replicas });
        continue;
      }
      if (!key) {
        plan.waiting.push({ node, file, why: 'node_has_no_key', replicas });
        continue;
      }
      const reason: CopyReason | undefined = !copy ? 'missing' : copy.uid !== source.uid ? 'source_changed' : copy.nodeKey !== key ? 'node_key_changed' : undefined;
      if (reason) plan.write.push({ node, file, reason, replicas, ...(copy ? { prev: copy } : {}) });
    }
    if (input.unknownUse.has(node)) continue;
    for (const file of [...have.keys()].sort(byName)) if (!uses.has(file)) plan.remove.push({ node, file, prev: have.get(file)! });
  }
  return plan;
}
