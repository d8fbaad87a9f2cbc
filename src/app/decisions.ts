// Placement decisions as an operator reads them (`jaco explain REPLICA` and the dashboard): finding
// a replica's stored decision at a cut's revision, and its text — every node's verdict, and where
// the replica is now.
import { keys } from '../api/keys.js';
import type { Deployment, NodeVerdict, PlacementDecision, ReplicaDesired } from '../api/types.js';
import type { Cache } from '../runtime/cache.js';
import type { Store } from '../store/store.js';
import { age, table } from './output.js';
import { readKey, readPrefix, warnUnreadable } from './read.js';

function verdictRows(d: PlacementDecision['spec']): (string | number)[][] {
  const score = (v: NodeVerdict) => `${v.score!.total} (${Object.entries(v.score!.parts).map(([k, x]) => `${k} ${x}`).join(', ') || 'no scoring'})`;
  return d.verdicts.map((v) =>
    v.rejected ? [v.node, 'rejected', v.rejected.filter, v.rejected.detail] : [v.node, v.node === d.chosen ? 'chosen' : 'scored', score(v), '-'],
  );
}


function omittedText(o: Record<string, number> | undefined): string {
  if (!o || !Object.keys(o).length) return '';
  const parts = Object.entries(o).map(([f, n]) => (f === 'scored' ? `${n} other candidate(s) scored lower` : `${n} rejected by ${f}`));
  return `Not listed (large cluster): ${parts.join(', ')}\n`;
}

/** The text of one stored decision, with where the replica is now. */
export function renderDecision(dec: PlacementDecision, now: number, current: ReplicaDesired[]): string {
  const d = dec.spec;
  let out = `Replica:     ${d.replica}\nDeployment:  ${d.deployment}\nService:     ${d.service} (placement ${d.mode})\n`;
  out += `Decided:     ${d.at} (${age(d.at, now)} ago) by ${d.actor}${d.trigger ? `, trigger ${d.trigger}` : ''}\n`;
  out += `Chosen:      ${d.chosen ?? `none (${d.reason})`}\nWhy:         ${d.why}\n`;
  const nodes = current.map((c) => c.spec.node);
  if (d.chosen && nodes.length && !nodes.includes(d.chosen))
    out += `Now:         on ${nodes.join(' and ')}: moved since this decision (see jaco audit --type replica_moved,rebalance_moved)\n`;
  else if (!nodes.length) out += 'Now:         the replica no longer exists\n';
  // A cluster-network replica's address, given with the placement (IPAM: the ipam filter below).
  for (const c of current) if (c.spec.address) out += `Address:     ${c.spec.address.ipv4}, ${c.spec.address.ipv6} (on ${c.spec.node})\n`;
  out += '\n' + table(['NODE', 'VERDICT', 'FILTER / SCORE', 'DETAIL'], verdictRows(d));
  return out + omittedText(d.omitted);
}

export const decisionsOf = (dep?: string) => ({ prefix: keys.decisions(dep), kind: 'PlacementDecision' });

/**
 * Finds a replica's stored decision: deployments are few, so try each whose name prefixes the id
 * (a deployment whose value cannot be read too: its decisions may well be readable).
 */
export async function findDecision(store: Store, cut: Cache, replica: string): Promise<PlacementDecision | undefined> {
  const deps = [...cut.kind<Deployment>('deployments').items.keys(), ...cut.kind('deployments').unreadable.keys()].map((k) => k.slice(keys.deployments().length));
  for (const dep of deps.filter((n) => replica.startsWith(`${n}-`)).sort((a, b) => b.length - a.length)) {
    const { value, unreadable } = await readKey<PlacementDecision>(store, keys.decision(dep, replica), 'PlacementDecision', cut.revision);
    if (unreadable) warnUnreadable([unreadable]);
    if (value) return value.value;
  }
  // A deleted deployment's decisions are cleaned up with it; a leftover is still worth showing.
  return (await readPrefix<PlacementDecision>(store, decisionsOf(), cut.revision)).items.find((d) => d.value.spec.replica === replica)?.value;
}
