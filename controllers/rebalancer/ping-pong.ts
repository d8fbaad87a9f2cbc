// The ping-pong exclusion, as seed 002 says it: "Once a service migrates away from a node, that
// node is temporarily excluded from further migration options to avoid ping-pong behavior until
// new balancing is triggered." New balancing is triggered by a node change (a node registered,
// re-registered, resized, relabelled, cordoned, drained or removed: its nodes/, nodespecs/ or drains/ key
// changed) or a change to the service's deployment (its generation). Both are read from etcd, so
// every leader computes the same epoch; a completed rebalancer move records the epoch it started
// in and the nodes the replica left before in that epoch (movedFrom), so the exclusion survives a
// leader failover and remembers every node the service left, not only the last.
import type { ReplicaIndex } from '../../src/runtime/replicas.js';
import type { EligibilityRevisions } from '../placement/input.js';

/** A digest of every node's and drain's key revision: it changes with any node change. */
export function nodeEpoch(eligibility: EligibilityRevisions): string {
  let h = 0x811c9dc5;
  for (const [key, rev] of [...eligibility].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
    const s = `${key}@${rev};`;
    for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, '0');
}

export class PingPong {
  private readonly byService = new Map<string, ReadonlySet<string>>();
  private nodes?: string;

  constructor(
    private readonly replicas: ReplicaIndex,
    private readonly eligibility: EligibilityRevisions,
    private readonly generations: ReadonlyMap<string, number> | undefined,
  ) {}

  /** The balancing epoch of a deployment's services: the nodes' epoch and the deployment's generation. */
  epoch(deployment: string): string {
    // Worked out on first use: most cycles stop at a gate and never need it.
    this.nodes ??= nodeEpoch(this.eligibility);
    return `${this.nodes}.${this.generations?.get(deployment) ?? 0}`;
  }

  /** The nodes a service's replicas moved away from in the current epoch: none takes one of them back. */
  excluded(deployment: string, service: string): ReadonlySet<string> {
    const key = `${deployment}/${service}`;
    let out = this.byService.get(key);
    if (!out) {
      const epoch = this.epoch(deployment);
      const nodes = new Set<string>();
      for (const e of this.replicas.service(deployment, service))
        for (const c of e.copies) {
          const m = c.desired.spec.movedFrom;
          if (m?.epoch !== epoch) continue;
          nodes.add(m.node);
          for (const n of m.earlier ?? []) nodes.add(n);
        }
      this.byService.set(key, (out = nodes));
    }
    return out;
  }
}
