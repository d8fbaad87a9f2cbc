// The one disruption budget every voluntary disruption passes (descheduler's evictions gate, a
// Kubernetes PodDisruptionBudget): a service may have at most update.maxUnavailable replicas
// disrupted at once. Pure: the replica view and the clock in, a verdict out.
//
// A replica counts as disrupted while it is not running, while a move of it is in flight up to its
// cutover, while a rollout step on it has not finished (its agent does not yet run its desired
// spec), or while a restart command on it is pending. Moves and rollout steps are gated: they start
// only with room in the budget. Restarts are counted but not gated: they repair a replica that
// already failed.
//
// "Available" after a move's cutover: the destination was ready at its spec when the cutover
// deleted the source's desired key, which took the source out of endpoints (every ingress drains
// it); the replica serves from its destination while the source's container runs out its
// deregistration delay and stop grace. So a cut-over move whose destination still runs its spec
// holds no room: the next move starts while the old container stops (issue 30: a drain at the
// container's pace, not at the stop grace's). Its marker stays until the source is gone, so
// nothing else moves that replica meanwhile (move_in_flight).
//
// Two controllers deciding from the same state could both spend the last unit, so every gated act
// also writes the service's ledger (disruptions/<deployment>/<service>) with compare-and-swap: one
// of two concurrent starts conflicts, and decides again from the state the other one left.
import { keys } from '../../src/api/keys.js';
import { replicaRunning } from '../../src/api/readiness.js';
import { maxUnavailableOf } from '../../src/api/update.js';
import { API_VERSION, type DisruptionKind, type DisruptionLedger, type ReplicaCommand, type ServiceSpec } from '../../src/api/types.js';
import type { Copy, ReplicaEntry } from '../../src/runtime/replicas.js';
import type { Versioned } from '../../src/store/store.js';
import { chainedWrite, type Op } from '../../src/store/writer.js';

export const DISRUPTIONS = {
  down: 'not running',
  moving: 'a move of it is in flight',
  stepping: 'a rollout step on it has not finished',
  restarting: 'a restart command on it is pending',
} as const;
export type Disruption = keyof typeof DISRUPTIONS;

/** What the budget reads besides the replicas: restart commands, by store key. */
export interface BudgetInput {
  commands?: ReadonlyMap<string, Versioned<ReplicaCommand>>;
}

const pendingRestart = (c: Copy, input: BudgetInput) => {
  const cmd = input.commands?.get(keys.command(c.desired.spec.node, c.desired.spec.replica));
  return !!cmd && (c.observed?.status.ackedCommand ?? -1) < cmd.value.spec.seq;
};

/**
 * A move past its cutover whose destination runs its spec: the source's desired key is gone (the
 * only copy left is the destination, marked cut over) and the destination is running at it.
 */
function cutOverAndServing(copies: readonly Copy[]): boolean {
  const [dst] = copies;
  if (copies.length !== 1 || !dst!.desired.spec.move?.cutoverAt) return false;
  const s = dst!.observed?.status;
  return !!s && s.state === 'running' && s.specHash === dst!.desired.spec.specHash && s.revision === dst!.desired.spec.revision;
}

/** Why a replica counts against its service's budget now, or undefined. A suspended replica does not count. */
export function disruptionOf(copies: readonly Copy[], input: BudgetInput = {}): Disruption | undefined {
  if (!copies.length || copies.every((c) => c.desired.spec.suspended)) return undefined;
  if (copies.some((c) => c.desired.spec.move || c.desired.spec.movingTo) && !cutOverAndServing(copies)) return 'moving';
  if (!copies.some((c) => replicaRunning(c.observed))) return 'down';
  if (copies.some((c) => c.observed && (c.observed.status.specHash !== c.desired.spec.specHash || c.observed.status.replacing))) return 'stepping';
  if (copies.some((c) => pendingRestart(c, input))) return 'restarting';
  return undefined;
}

export interface Budget {
  max: number;
  /** Disrupted replicas of the service, by id. */
  disrupted: Map<string, Disruption>;
}

/** The service's budget as its replicas stand (copies from `copiesOf`, which may include this pass's assumptions). */
export function budgetOf(replicas: readonly Pick<ReplicaEntry, 'id'>[], copiesOf: (id: string) => readonly Copy[], template: ServiceSpec | undefined, input: BudgetInput = {}): Budget {
  const disrupted = new Map<string, Disruption>();
  for (const r of replicas) {
    const d = disruptionOf(copiesOf(r.id), input);
    if (d) disrupted.set(r.id, d);
  }
  // A percentage is of the service's replicas (src/api/update.ts): one rule for moves and rollout steps.
  return { max: maxUnavailableOf(template, replicas.length), disrupted };
}

/**
 * Whether disrupting `replica` now fits the budget. The replica itself is not counted (disrupting a
 * replica that is already down takes nothing further down); the detail says what holds the room.
 */
export function admits(b: Budget, replica: string): { ok: true } | { ok: false; detail: string } {
  const others = [...b.disrupted].filter(([id]) => id !== replica).sort(([a], [c]) => (a < c ? -1 : 1));
  if (others.length + 1 <= b.max) return { ok: true };
  return { ok: false, detail: `${others.length} disrupted (${others.map(([id, why]) => `${id}: ${DISRUPTIONS[why]}`).join(', ')}), maxUnavailable ${b.max}` };
}

/**
 * The ledger writes of one pass: the first gated act of a service compares the ledger's mod
 * revision, each later one in the same pass its version (acts land in order, each in its own
 * transaction), so the chain breaks at the first act that does not land.
 */
export class LedgerBook {
  private readonly taken = new Map<string, number>();

  constructor(private readonly ledgers: ReadonlyMap<string, Versioned<DisruptionLedger>>) {}

  /** The ops that record one more voluntary disruption of the service. */
  record(deployment: string, service: string, e: { replica: string; by: string; kind: DisruptionKind; now: number }): Op[] {
    const k = `${deployment}/${service}`;
    const cur = this.ledgers.get(k);
    const n = this.taken.get(k) ?? 0;
    this.taken.set(k, n + 1);
    const key = keys.disruptions(deployment, service);
    const value: DisruptionLedger = {
      apiVersion: API_VERSION,
      kind: 'DisruptionLedger',
      metadata: { name: `${deployment}-${service}` },
      spec: { deployment, service, sequence: (cur?.value.spec.sequence ?? 0) + n + 1, last: { replica: e.replica, by: e.by, kind: e.kind, at: new Date(e.now).toISOString() } },
    };
    return chainedWrite(key, cur, n, value);
  }
}
