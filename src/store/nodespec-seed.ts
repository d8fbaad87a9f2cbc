// The first nodespecs/<host> of each node, made by the step that gives nodes' agents their etcd
// users (provisionRoles: `jaco etcd rbac`, `jaco up`). That step takes from an agent's user the
// right to decide about its node; this makes sure there is a decision it cannot touch: a cluster
// written before the split kept it as `spec` inside nodes/<host>, which the agent's user writes,
// and readers honour that `spec` only while nodespecs/<host> is absent (api/nodes.ts nodeAsDecided).
// Written as the CLI writes nodespecs/ (its only writer): create-only, with its audit record.
import { keys } from '../api/keys.js';
import { nodeSpecsToSeed, type NodeSpecSeed } from '../api/nodes.js';
import { API_VERSION, type Node, type NodeSpecRecord } from '../api/types.js';
import { silentLogger } from '../observability/log.js';
import { PRODUCTION } from '../timings.js';
import { AuditLog } from './audit.js';
import { ConflictError } from './errors.js';
import { readListed } from './reflector.js';
import type { Store } from './store.js';
import { commitAtomic } from './writer.js';

/**
 * Creates nodespecs/<host> for every registered node and every node in `named` that has none
 * (nodeSpecsToSeed), one transaction per node: the key created only if still absent, nodes/<host>
 * still at the revision read, and the audit record `node_spec_seeded`. A write that loses (an
 * operator's cordon, the agent re-registering) reads again; an operator's decision is never
 * overwritten. Returns what it created.
 */
export async function seedNodeSpecs(store: Store, named: readonly string[] = []): Promise<NodeSpecSeed[]> {
  const audit = new AuditLog(store, 'cli', PRODUCTION.auditRetentionMs);
  const made: NodeSpecSeed[] = [];
  for (let attempt = 1; attempt <= 3; attempt++) {
    const n = await store.listRaw(keys.nodes());
    const d = await store.listRaw(keys.nodeSpecs(), n.revision);
    const nodes = readListed<Node>('nodes', { prefix: keys.nodes(), kind: 'Node' }, n.kvs, store.prefix.length, silentLogger());
    const specs = readListed<NodeSpecRecord>('nodespecs', { prefix: keys.nodeSpecs(), kind: 'NodeSpec' }, d.kvs, store.prefix.length, silentLogger());
    const byHost = new Map<string, Node | 'unreadable'>([...nodes.items.values()].map((v) => [nodes.rest(v.key), v.value]));
    for (const k of nodes.unreadable.keys()) byHost.set(nodes.rest(k), 'unreadable');
    const hasSpec = new Set([...specs.items.keys(), ...specs.unreadable.keys()].map((k) => specs.rest(k)));
    const modRevision = (host: string) => nodes.items.get(keys.node(host))?.modRevision ?? nodes.unreadable.get(keys.node(host))?.modRevision ?? 0;
    let lost = false;
    for (const s of nodeSpecsToSeed(byHost, hasSpec, named)) {
      const value: NodeSpecRecord = { apiVersion: API_VERSION, kind: 'NodeSpec', metadata: { name: s.host }, spec: s.spec };
      const ops = [
        { op: 'create' as const, key: keys.nodeSpec(s.host), value },
        { op: 'check' as const, key: keys.node(s.host), modRevision: modRevision(s.host) },
        await audit.op({ type: 'node_spec_seeded', time: Date.now(), payload: { node: s.host, spec: s.spec, from: s.from } }),
      ];
      try {
        await commitAtomic(store, [{ label: `seed nodespecs/${s.host}`, ops }]);
        made.push(s);
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        lost = true;
      }
    }
    if (!lost) return made;
  }
  return made;
}
