// Coalescing (seed 003's baseline rescheduler, use case 1): a replica that cannot be placed for
// capacity — memory, GPUs or a host port — while moving a few movable replicas elsewhere would make
// room for it. The plan is computed whole before anything moves: on some node, the fewest movable
// replicas whose departure lets the pending replica fit, each landing where the scheduler's own
// placer accepts it with the hole already taken. Only a complete plan starts a move, and only its
// first (one move per cycle, make-before-break, within the disruption budget); the next cycle
// plans again from what landed, so the plan shrinks by one each time until the scheduler can place
// the pending replica. Pure: the placer comes in and is left as it was found.
import { canonicalJson, namedVolumes } from '../../src/api/spec.js';
import type { ServiceSpec } from '../../src/api/types.js';
import type { UnschedulableReason } from '../../src/api/reasons/scheduling.js';
import { NO_PLAN_REASONS, type Exclusion, type NoPlanReason } from '../../src/api/reasons/rebalance.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { inFlight, type Copy, type MoveBook } from '../moves/move.js';
import { footprintOf, type PlacedReplica, type Placer, type PlacementRequest } from '../placement/placer.js';
import type { CoalesceView, CoalesceVictim, MoveIntent, PendingService } from './plan.js';
import { byName } from './config.js';

/** Reasons coalescing can help with: the replica would fit but for what others hold. */
export const CAPACITY_REASONS: readonly UnschedulableReason[] = ['no_capacity_memory', 'no_capacity_gpu', 'port_conflict'];
const CAPACITY_FILTERS = new Set(['memory', 'gpus', 'ports']);

export interface CoalesceInput {
  book: MoveBook;
  /** Built on first use: with nothing pending it is never needed. */
  placer: () => Placer;
  pending: readonly PendingService[];
  now: number;
  /** A replica pending for less than this is the scheduler's business still. */
  graceMs: number;
  exclusion: (copies: readonly Copy[], copy: Copy) => Exclusion | undefined;
  moveTimeoutMs: (entry: ReplicaEntry) => number;
}

/** Every pending service judged, highest priority first; at most one move intent, the first of a complete plan. */
export function planCoalesce(input: CoalesceInput): { views: CoalesceView[]; intent?: MoveIntent } {
  const pending = [...input.pending].sort((a, b) => (b.spec.priority ?? 0) - (a.spec.priority ?? 0) || byName(`${a.deployment}/${a.service}`, `${b.deployment}/${b.service}`));
  const views: CoalesceView[] = [];
  let intent: MoveIntent | undefined;
  let planned: string | undefined;
  const nodes = new NodeBook(input);
  // A service with nothing placed yet and no named volume is judged by its spec alone (the filters
  // read its own replicas and volume homes only): pending services alike in shape share a no-plan verdict.
  const noPlanByShape = new Map<string, { noPlan: NoPlanReason; detail: string }>();
  for (const p of pending) {
    const base = { deployment: p.deployment, service: p.service, reason: p.reason };
    if (input.now - p.since < input.graceMs) {
      views.push({ ...base, verdict: 'grace', detail: `pending ${Math.round((input.now - p.since) / 1000)}s; coalescing after ${Math.round(input.graceMs / 1000)}s` });
      continue;
    }
    if (planned) {
      // Plans are worked one at a time, highest priority first: the rest wait their turn (and cost nothing).
      views.push({ ...base, verdict: 'held', detail: `waits its turn: ${planned} is being made room for first` });
      continue;
    }
    const shape = !input.book.replicas.service(p.deployment, p.service).length && !namedVolumes(p.spec).length ? canonicalJson(p.spec) : undefined;
    const known = shape === undefined ? undefined : noPlanByShape.get(shape);
    if (known) {
      views.push({ ...base, verdict: 'no_plan', ...known });
      continue;
    }
    const fitsOn = input.placer().decide(pendingRequest(p)).chosen;
    if (fitsOn) {
      views.push({ ...base, verdict: 'fits', detail: `it fits now (${fitsOn}): the scheduler places it` });
      continue;
    }
    const found = bestPlan(input, p, nodes);
    if ('noPlan' in found) {
      views.push({ ...base, verdict: 'no_plan', noPlan: found.noPlan, detail: found.detail });
      if (shape !== undefined) noPlanByShape.set(shape, found);
      continue;
    }
    const view: CoalesceView & { node: string; plan: CoalesceVictim[] } = {
      ...base,
      verdict: 'move',
      node: found.node,
      plan: found.plan,
      detail: `${found.plan.length} move(s) make room on ${found.node}: ${found.plan.map((v) => `${v.replica} → ${v.to}`).join(', ')}`,
    };
    views.push(view);
    planned = `${p.deployment}/${p.service}`;
    if (!found.plan.length) {
      Object.assign(view, { verdict: 'held', detail: `the move(s) in flight away from ${found.node} make room: the scheduler places it once they complete` });
      continue;
    }
    const first = found.plan[0]!;
    const entry = input.book.entry(first.replica)!;
    const spec = entry.copies[0]!.desired.spec;
    intent = {
      trigger: 'coalesce',
      replica: first.replica,
      deployment: first.deployment,
      service: first.service,
      src: first.from,
      dst: first.to,
      why: `moved off ${first.from} to make room for ${p.deployment}/${p.service} (${p.reason}): ${view.detail}`,
      verdicts: () => input.placer().decide({ replica: first.replica, deployment: first.deployment, service: first.service, spec: input.book.shape(spec), index: spec.index, exclude: [first.from] }),
      forPending: { deployment: p.deployment, service: p.service, node: found.node },
      timeoutMs: input.moveTimeoutMs(entry),
      payload: { for: `${view.deployment}/${view.service}`, pending_reason: view.reason, hole_node: view.node, plan: view.plan, detail: view.detail },
      held: (why) => Object.assign(view, { verdict: 'held', detail: `${view.detail}; not this cycle: ${why}` }),
      refused: (refusal, detail) => {
        const budget = refusal === 'budget_exceeded';
        Object.assign(view, { verdict: budget ? 'no_plan' : 'held', ...(budget ? { noPlan: 'would_exceed_budget' } : {}), detail: `${view.detail}; the move mechanism refused ${first.replica}: ${refusal} (${detail})` });
      },
    };
  }
  return { views, ...(intent ? { intent } : {}) };
}

type Found = { node: string; plan: CoalesceVictim[] } | { noPlan: NoPlanReason; detail: string };

const pendingRequest = (p: PendingService): PlacementRequest => ({ replica: `${p.deployment}-${p.service}-pending`, deployment: p.deployment, service: p.service, spec: p.spec });

/** The node needing the fewest moves (ties by name), or why there is none. */
/**
 * Per node, what every pending service's what-if starts from — its single-copy replicas, the
 * movable ones in freeing order, those already leaving — worked out once per cycle: with many
 * pending services each tries every node, and the node's replicas do not change between them.
 */
class NodeBook {
  private readonly byNode = new Map<string, { here: ReplicaEntry[]; movable: ReplicaEntry[]; leaving: ReplicaEntry[]; ordered?: ReplicaEntry[] }>();
  constructor(private readonly input: CoalesceInput) {}

  of(node: string): { here: ReplicaEntry[]; movable: ReplicaEntry[]; leaving: ReplicaEntry[]; ordered?: ReplicaEntry[] } {
    let v = this.byNode.get(node);
    if (!v) {
      const onNode = this.input.book.replicas.onNode(node);
      const here = onNode.filter((e) => e.copies.length === 1);
      const movable = here.filter((e) => !this.input.exclusion(e.copies, e.copies[0]!));
      // Replicas already moving away from the node (an earlier move of this plan) count as gone.
      const leaving = onNode.filter((e) => inFlight(e.copies)?.desired.spec.move?.from === node);
      this.byNode.set(node, (v = { here, movable, leaving }));
    }
    return v;
  }

  /**
   * The node's movable replicas other than the pending service's, in the order that frees its
   * needs fastest. `hasPorts`: whether the pending service has fixed host ports (the caller works
   * it out once; this runs for every node).
   */
  blockers(node: string, p: PendingService, hasPorts: boolean): ReplicaEntry[] {
    const v = this.of(node);
    let own = false;
    for (const e of v.movable) if (e.deployment === p.deployment && e.service === p.service) own = true;
    // Without host ports the order does not depend on the pending service: sorted once.
    if (hasPorts || own) return order(v.movable.filter((e) => e.deployment !== p.deployment || e.service !== p.service), p.spec);
    return (v.ordered ??= order(v.movable, p.spec));
  }
}

function bestPlan(input: CoalesceInput, p: PendingService, nodes: NodeBook): Found {
  const placer = input.placer();
  const req = pendingRequest(p);
  const antiAffinity = p.spec.placement?.mode === 'hosts';
  // Whether any blocked node had replicas that could move (then "no plan fits"), or only ones that never do.
  let triedMovable = false;
  let onlyFixed = false;
  // First the cheap bound: on each node the capacity filters block, the fewest blockers (largest
  // first) whose departure could make room at all. Only those nodes get the what-if, fewest first.
  const bounds: { node: string; blockers: ReplicaEntry[]; leaving: ReplicaEntry[]; k: number }[] = [];
  const check = placer.checker(req, { antiAffinity });
  const hasPorts = footprintOf(p.spec).ports.length > 0;
  for (const node of placer.names) {
    const rej = check(node);
    if (!rej || !CAPACITY_FILTERS.has(rej)) continue; // fits already, or no move can help here
    const { here, leaving } = nodes.of(node);
    const blockers = nodes.blockers(node, p, hasPorts);
    if (!blockers.length && !leaving.length) {
      onlyFixed ||= here.length > 0;
      continue;
    }
    triedMovable = true;
    const k = lowerBound(placer.headroom(node), placer.needs(p.spec, node), [...leaving, ...blockers], placer, node);
    if (k !== undefined) bounds.push({ node, blockers, leaving, k: Math.max(1, k - leaving.length) });
  }
  bounds.sort((a, b) => a.k - b.k || byName(a.node, b.node));
  let best: { node: string; plan: CoalesceVictim[] } | undefined;
  for (const b of bounds) {
    if (best && best.plan.length <= b.k) break; // no node further on can need fewer moves
    const plan = planOn(input.book, placer, req, b.node, b.blockers, b.leaving, antiAffinity);
    if (plan && (!best || plan.length < best.plan.length)) best = { node: b.node, plan };
  }
  if (best) return best;
  return onlyFixed && !triedMovable
    ? { noPlan: 'only_stateful_blockers', detail: NO_PLAN_REASONS.only_stateful_blockers }
    : { noPlan: 'no_plan_fits', detail: NO_PLAN_REASONS.no_plan_fits };
}

/** Blockers in the order that frees what the pending replica lacks fastest: port holders, then the largest. */
function order(movable: ReplicaEntry[], spec: ServiceSpec): ReplicaEntry[] {
  const want = new Set(footprintOf(spec).ports);
  const keyed = movable.map((e) => {
    const f = footprintOf(e.copies[0]!.desired.spec.template);
    // "all" GPUs sorts first among GPU holders: it frees every GPU of the node.
    return { e, port: f.ports.some((x) => want.has(x)) ? 1 : 0, gpus: f.gpus === 'all' ? Infinity : f.gpus, mem: f.memoryBytes };
  });
  return keyed.sort((x, y) => y.port - x.port || y.gpus - x.gpus || y.mem - x.mem || byName(x.e.id, y.e.id)).map((k) => k.e);
}

/**
 * The fewest blockers (in their order) whose memory and GPUs would make room, or undefined when
 * even all of them would not. Ports are not counted: the port holders come first in the order.
 */
function lowerBound(room: { memoryBytes: number; gpus: number }, need: { memoryBytes: number; gpus: number }, blockers: ReplicaEntry[], placer: Placer, node: string): number | undefined {
  let { memoryBytes, gpus } = room;
  if (memoryBytes >= need.memoryBytes && gpus >= need.gpus) return 1; // a port is in the way
  for (let k = 0; k < blockers.length; k++) {
    const f = placer.needs(blockers[k]!.copies[0]!.desired.spec.template, node);
    memoryBytes += f.memoryBytes;
    gpus += f.gpus;
    if (memoryBytes >= need.memoryBytes && gpus >= need.gpus) return k + 1;
  }
  return undefined;
}

const placedOf = (e: ReplicaEntry, node: string): PlacedReplica => ({ id: e.id, deployment: e.deployment, service: e.service, node, ...footprintOf(e.copies[0]!.desired.spec.template) });

/**
 * What-if on one node: take blockers off until the pending replica fits, hold the hole for it,
 * then find each blocker a home elsewhere with the scheduler's own placer. The placer is restored
 * before returning, whatever the outcome.
 */
function planOn(book: MoveBook, placer: Placer, req: PlacementRequest, node: string, blockers: ReplicaEntry[], leaving: ReplicaEntry[], antiAffinity: boolean): CoalesceVictim[] | undefined {
  for (const e of leaving) placer.forget(e.id, node);
  const taken: ReplicaEntry[] = [];
  for (const e of placer.check(req, node, { antiAffinity }) ? blockers : []) {
    placer.forget(e.id, node);
    taken.push(e);
    if (!placer.check(req, node, { antiAffinity })) break;
  }
  const fits = !placer.check(req, node, { antiAffinity });
  const hole: PlacedReplica = { id: req.replica, deployment: req.deployment, service: req.service, node, ...footprintOf(req.spec) };
  const landed: PlacedReplica[] = [];
  let plan: CoalesceVictim[] | undefined;
  if (fits) {
    placer.assume(hole);
    plan = [];
    for (const e of taken) {
      const d = placer.decide({ replica: e.id, deployment: e.deployment, service: e.service, index: e.index, spec: book.shape(e.copies[0]!.desired.spec), exclude: [node] });
      if (!d.chosen) {
        plan = undefined;
        break;
      }
      // Counted where it lands, so the next blocker sees it there.
      const p = placedOf(e, d.chosen);
      placer.assume(p);
      landed.push(p);
      plan.push({ replica: e.id, deployment: e.deployment, service: e.service, from: node, to: d.chosen });
    }
    placer.forget(hole.id, node);
  }
  for (const p of landed) placer.forget(p.id, p.node);
  for (const e of [...taken, ...leaving]) placer.assume(placedOf(e, node));
  return plan;
}
