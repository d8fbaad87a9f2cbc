// The nodes as operators see them (issue 29): each nodes/<host> (what its agent reports) joined with
// nodespecs/<host> (what operators decided) by api/nodes.ts nodeAsDecided. Every reader that judges
// a node — placement, scheduler, drain, rebalancer, the CLI's views, the dashboard — reads this one
// index, never the two prefixes apart; a host's entry is joined again only when one of its keys changes.
import { nodeAsDecided } from '../api/nodes.js';
import type { Node, NodeSpecRecord } from '../api/types.js';
import type { SourceState } from '../store/reflector.js';
import type { Versioned } from '../store/store.js';
import type { Cache, IndexDef } from './cache.js';

/** By host: nodes/<host> as read (its key and revisions) with its spec joined from nodespecs/<host>. */
export type NodeView = Map<string, Versioned<Node>>;

/** nodes/<host> with what operators decided: nodespecs/<host> read, unreadable, or absent (see nodeAsDecided). */
export function joinNode(node: Versioned<Node>, specs: SourceState<NodeSpecRecord>, specKey: string): Versioned<Node> {
  const spec = specs.items.get(specKey)?.value ?? (specs.unreadable.has(specKey) ? 'unreadable' : undefined);
  const value = nodeAsDecided(node.value, spec);
  return value === node.value ? node : { ...node, value };
}

function joinHost(index: NodeView, host: string, cache: Cache): void {
  const nodes = cache.kind<Node>('nodes');
  const specs = cache.kind<NodeSpecRecord>('nodespecs');
  const node = nodes.items.get(nodes.prefix + host);
  if (node) index.set(host, joinNode(node, specs, specs.prefix + host));
  else index.delete(host);
}

export const NODES: IndexDef<NodeView> = {
  name: 'nodes',
  sources: ['nodes', 'nodespecs'],
  build(cache) {
    const out: NodeView = new Map();
    const nodes = cache.kind<Node>('nodes');
    for (const v of nodes.items.values()) joinHost(out, nodes.rest(v.key), cache);
    return out;
  },
  apply(index, changes, cache) {
    const hosts = new Set(changes.map((c) => cache.kind(c.source as 'nodes' | 'nodespecs').rest(c.key)));
    for (const host of hosts) joinHost(index, host, cache);
  },
};

/** The nodes as operators see them, by host (the cache must hold nodes and nodespecs). */
export function nodesOf(cache: Cache): ReadonlyMap<string, Versioned<Node>> {
  return cache.index(NODES);
}

/** The same, values only. */
export function nodeValuesOf(cache: Cache): Map<string, Node> {
  return new Map([...nodesOf(cache)].map(([host, v]) => [host, v.value]));
}
