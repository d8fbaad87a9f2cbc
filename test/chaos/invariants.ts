// What the chaos run checks, against etcd and `docker ps`: a snapshot of both (Docker first, then
// etcd at one revision), the simulation's invariants over it (test/sim/invariants.ts, through an
// adapter: they are pure over a snapshot), and the checks only the real thing has — containers
// without a desired replica, duplicate containers, acknowledged applies — plus convergence.
import type Docker from 'dockerode';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { templateOf } from '../../src/api/serving.js';
import type { Deployment, NodeDrain, ReplicaDesired, ReplicaObserved, RolloutPlan } from '../../src/api/types.js';
import { withTimeout, type Store } from '../../src/store/store.js';
import { movesWithinBudget, noUnknownNodes, oneCopyOutsideMoves } from '../sim/invariants.js';
import type { Sim } from '../sim/world.js';

export interface Snapshot {
  /** When Docker was listed (ms). */
  at: number;
  revision: number;
  desired: ReplicaDesired[];
  observed: ReplicaObserved[];
  nodes: string[];
  deployments: Deployment[];
  rollouts: RolloutPlan[];
  drains: NodeDrain[];
  /** Running containers of this cluster. */
  running: Docker.ContainerInfo[];
}

/** Docker first, then etcd at one revision: a container seen running had its chance to be in etcd. */
export function snapshot(store: Store, containers: () => Promise<Docker.ContainerInfo[]>): Promise<Snapshot> {
  return withTimeout(read(store, containers), 10_000, 'snapshot: etcd or Docker did not answer within 10 s');
}

async function read(store: Store, containers: () => Promise<Docker.ContainerInfo[]>): Promise<Snapshot> {
  const at = Date.now();
  const running = await containers();
  const first = await store.listRaw(keys.desiredOf());
  const rev = first.revision;
  const read = async <T>(prefix: string): Promise<T[]> => (await store.listRaw(prefix, rev)).kvs.map((kv) => JSON.parse(kv.value.toString()) as T);
  const [observed, nodes, deployments, rollouts, drains] = await Promise.all([
    read<ReplicaObserved>(keys.observedOf()),
    store.listRaw(keys.nodes(), rev, { keysOnly: true }),
    read<Deployment>(keys.deployments()),
    read<RolloutPlan>(keys.rollouts()),
    read<NodeDrain>(keys.drains()),
  ]);
  return {
    at,
    revision: rev,
    desired: first.kvs.map((kv) => JSON.parse(kv.value.toString()) as ReplicaDesired),
    observed,
    nodes: nodes.kvs.map((kv) => kv.key.toString().slice(store.prefix.length + keys.nodes().length)),
    deployments,
    rollouts,
    drains,
    running,
  };
}

/** The simulation's invariants read `sim.desired()` and `sim.nodes`: the same over a real snapshot. */
export function simView(s: Snapshot): Sim {
  return { desired: () => s.desired, nodes: s.nodes } as unknown as Sim;
}

export interface Violation {
  at: number;
  invariant: string;
  detail: string;
}

/** The simulation's invariants over one snapshot. */
export function simViolations(s: Snapshot): Violation[] {
  const view = simView(s);
  const out: Violation[] = [];
  for (const inv of [oneCopyOutsideMoves, movesWithinBudget, noUnknownNodes]) {
    const bad = inv.check(view);
    if (bad) out.push({ at: s.at, invariant: inv.name, detail: bad });
  }
  return out;
}

const label = (c: Docker.ContainerInfo, l: string) => c.Labels[l] ?? '';

/**
 * Containers that must not be running, by identity: a running container whose node has no
 * desired key for its replica (an orphan), or a second running container of one replica on one
 * node at one spec (a duplicate; a start-first replacement runs two specs side by side).
 */
export function strayContainers(s: Snapshot): Map<string, string> {
  const want = new Set(s.desired.map((d) => `${d.spec.node}/${d.spec.replica}`));
  const out = new Map<string, string>();
  const seen = new Map<string, string>();
  for (const c of s.running) {
    const where = `${label(c, LABELS.node)}/${label(c, LABELS.replica)}`;
    if (!want.has(where)) out.set(c.Id, `orphan: ${where} running (${c.Id.slice(0, 12)}) without a desired replica`);
    const same = `${where}@${label(c, LABELS.specHash)}`;
    const other = seen.get(same);
    if (other) out.set(c.Id, `duplicate: ${where} runs twice at one spec (${other.slice(0, 12)}, ${c.Id.slice(0, 12)})`);
    else seen.set(same, c.Id);
  }
  return out;
}

/**
 * Tracks stray containers across snapshots: one is a violation once it has stayed longer than
 * `boundMs` while its node's agent was up and connected (`healthySince(node)`: undefined while a
 * fault holds it; a stopped, cut or restarting agent cannot remove anything).
 */
export class StrayTracker {
  private firstSeen = new Map<string, number>();
  private reported = new Set<string>();
  constructor(readonly boundMs: number) {}

  check(s: Snapshot, healthySince: (node: string) => number | undefined): Violation[] {
    const stray = strayContainers(s);
    const out: Violation[] = [];
    for (const id of [...this.firstSeen.keys()]) if (!stray.has(id)) this.firstSeen.delete(id);
    for (const [id, detail] of stray) {
      const first = this.firstSeen.get(id) ?? s.at;
      this.firstSeen.set(id, first);
      const node = s.running.find((c) => c.Id === id)?.Labels[LABELS.node] ?? '';
      const since = healthySince(node);
      if (since === undefined || this.reported.has(id)) continue;
      const from = Math.max(first, since);
      if (s.at - from > this.boundMs) {
        this.reported.add(id);
        out.push({ at: s.at, invariant: `no stray container beyond one agent resync (${this.boundMs} ms)`, detail: `${detail}, for ${s.at - from} ms with its agent up` });
      }
    }
    return out;
  }
}

/** The parts of a deployment an operator's apply sets, to compare with what etcd holds. */
export function appliedShape(d: Deployment): string {
  return JSON.stringify(Object.entries(d.spec.services).sort(([a], [b]) => a.localeCompare(b)).map(([n, s]) => [n, s.image, s.replicas, s.env ?? null]));
}

/**
 * No acknowledged `jaco apply` lost: each deployment in etcd is the last apply that exited 0, or
 * one sent after it whose outcome is unknown (it exited non-zero: it may or may not have landed).
 */
export function lostApplies(s: Snapshot, allowed: Map<string, string[]>): Violation[] {
  const out: Violation[] = [];
  for (const [name, shapes] of allowed) {
    const d = s.deployments.find((x) => x.metadata.name === name);
    const have = d ? appliedShape(d) : '(absent)';
    if (!shapes.includes(have)) out.push({ at: s.at, invariant: 'no acknowledged apply lost', detail: `deployments/${name} is ${have}; acknowledged ${shapes[0]}${shapes.length > 1 ? ` (or later unacknowledged ${shapes.slice(1).join(' | ')})` : ''}` });
  }
  return out;
}

/**
 * Converged: no rollout or drain in progress; every service has its replicas desired, none moving
 * or suspended, all at the service's current spec (or the one an aborted rollout went back to);
 * each observed running at that revision and spec by its agent, and running exactly once in
 * Docker; no other container running. Returns what is not there yet, or undefined.
 */
export function notConverged(s: Snapshot): string | undefined {
  const busy = s.rollouts.find((r) => r.spec.state === 'in_progress');
  if (busy) return `rollout ${busy.spec.deployment}/${busy.spec.service} in progress`;
  const draining = s.drains.find((d) => d.status?.state === 'pending' || d.status?.state === 'draining' || !d.status);
  if (draining) return `drain of ${draining.metadata.name} ${draining.status?.state ?? 'pending'}`;
  for (const dep of s.deployments) {
    for (const [svc, spec] of Object.entries(dep.spec.services)) {
      const ds = s.desired.filter((d) => d.spec.deployment === dep.metadata.name && d.spec.service === svc);
      if (ds.length !== (spec.replicas ?? 1)) return `${dep.metadata.name}/${svc}: ${ds.length} desired of ${spec.replicas ?? 1}`;
      const plan = s.rollouts.find((r) => r.spec.deployment === dep.metadata.name && r.spec.service === svc);
      const hashes = new Set([templateOf(dep.metadata.generation ?? 0, spec).specHash, ...(plan?.spec.state === 'aborted' ? [plan.spec.fromHash] : [])]);
      for (const d of ds) {
        if (d.spec.move || d.spec.movingTo || d.spec.suspended) return `${d.spec.replica} moving or suspended`;
        if (!hashes.has(d.spec.specHash)) return `${d.spec.replica} desired at an older spec (revision ${d.spec.revision})`;
      }
    }
  }
  const obs = new Map(s.observed.map((o) => [`${o.status.node}/${o.status.replica}`, o.status]));
  for (const d of s.desired) {
    const o = obs.get(`${d.spec.node}/${d.spec.replica}`);
    if (!o || o.state !== 'running' || o.revision !== d.spec.revision || o.specHash !== d.spec.specHash || o.replacing)
      return `${d.spec.replica} on ${d.spec.node} not observed running at revision ${d.spec.revision} (${o ? `${o.state} r${o.revision}` : 'no observed'})`;
    const copies = s.running.filter((c) => label(c, LABELS.node) === d.spec.node && label(c, LABELS.replica) === d.spec.replica);
    if (copies.length !== 1 || label(copies[0]!, LABELS.specHash) !== d.spec.specHash) return `${d.spec.replica} on ${d.spec.node}: ${copies.length} containers running in Docker`;
  }
  const stray = strayContainers(s);
  if (stray.size) return [...stray.values()][0];
  return undefined;
}
