// Preemption by priority (issue 17, seed 002's "lower priority migration"): when coalescing cannot
// make room for a pending replica, replicas of lower priority make way for it. On the node where it
// costs least (the highest victim priority lowest, then the fewest victims), the fewest
// lower-priority replicas whose departure lets it fit — Kubernetes' choice: every lower-priority
// replica off, then as many reprieved as still leave it room, highest priority and smallest first.
// Each victim is moved elsewhere when the scheduler's placer finds it a home (a migration, through
// the make-before-break move, one per cycle), else stopped where it is (suspended, reason
// `preempted`) and left to the scheduler, which places it again once capacity exists. Never
// equal or higher priority, a stateful or global replica, a replica of the same service, or past a
// victim service's disruption budget. Pure: the placer comes in and is left as it was found.
import { canonicalJson, isJob, isStateful, namedVolumes, placementMode } from '../../src/api/spec.js';
import type { HoleFor, ReplicaDesired, ServiceSpec } from '../../src/api/types.js';
import { NO_PREEMPT_REASONS, type NoPreemptReason } from '../../src/api/reasons/rebalance.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { AuditRecord } from '../../src/store/audit.js';
import type { Op } from '../../src/store/writer.js';
import { admits } from '../disruption/budget.js';
import { inFlight, type MoveBook } from '../moves/move.js';
import { footprintOf, type PlacedReplica, type Placer, type PlacementRequest } from '../placement/placer.js';
import { placedReplicaOf } from '../placement/input.js';
import type { PendingService, PreemptView, PreemptVictim, PreemptWant } from './plan.js';
import { byName } from './config.js';

const CAPACITY_FILTERS = new Set(['memory', 'gpus', 'ports']);
const iso = (ms: number) => new Date(ms).toISOString();

export interface PreemptInput {
  book: MoveBook;
  placer: () => Placer;
  /** Pending services coalescing found no plan for (past their grace). */
  pending: readonly PendingService[];
  /** A service's priority now (the deployment's spec: priority is not in the spec hash, templates may lag). */
  priorityOf: (deployment: string, service: string, template: ServiceSpec) => number;
  now: number;
  moveTimeoutMs: (entry: ReplicaEntry) => number;
}

export interface PreemptOutcome {
  views: PreemptView[];
  want?: PreemptWant;
}

/** The rebalancer's preemption for this cycle: the highest-priority pending service with a plan is served, the rest wait. */
export function planPreempt(input: PreemptInput): PreemptOutcome {
  const pending = [...input.pending].sort((a, b) => prio(input, b) - prio(input, a) || byName(`${a.deployment}/${a.service}`, `${b.deployment}/${b.service}`));
  const views: PreemptView[] = [];
  const out: PreemptOutcome = { views };
  let planned: string | undefined;
  // As in coalescing: a service with nothing placed and no named volume is judged by its spec and priority alone.
  const noneByShape = new Map<string, { noPreempt: NoPreemptReason; detail: string }>();
  for (const p of pending) {
    const priority = prio(input, p);
    const base = { deployment: p.deployment, service: p.service, priority, reason: p.reason };
    if (planned) {
      views.push({ ...base, verdict: 'held', detail: `waits its turn: ${planned} is being made room for first` });
      continue;
    }
    const shape = !input.book.replicas.service(p.deployment, p.service).length && !namedVolumes(p.spec).length ? `${priority} ${canonicalJson(p.spec)}` : undefined;
    const found = (shape !== undefined && noneByShape.get(shape)) || bestVictims(input, p, priority);
    if ('noPreempt' in found) {
      views.push({ ...base, verdict: 'none', noPreempt: found.noPreempt, detail: found.detail });
      if (shape !== undefined) noneByShape.set(shape, found);
      continue;
    }
    planned = `${p.deployment}/${p.service}`;
    const view: PreemptView = { ...base, verdict: 'preempt', node: found.node, victims: found.victims, detail: describe(found.node, found.victims, found.leaving) };
    views.push(view);
    const hole: HoleFor = { deployment: p.deployment, service: p.service, node: found.node };
    const migration = found.victims.find((v) => v.action === 'migrate');
    if (migration) {
      const entry = input.book.entry(migration.replica)!;
      const spec = entry.copies[0]!.desired.spec;
      const held = (why: string) => Object.assign(view, { verdict: 'held', detail: `${view.detail}; ${why}` });
      out.want = {
        view,
        migrate: {
          trigger: 'preempt',
          replica: migration.replica,
          deployment: migration.deployment,
          service: migration.service,
          src: found.node,
          dst: migration.to!,
          why: `moved off ${found.node} to make room for ${planned} (priority ${priority} over ${migration.priority}): ${view.detail}`,
          verdicts: () => input.placer().decide({ replica: migration.replica, deployment: migration.deployment, service: migration.service, spec: input.book.shape(spec), index: spec.index, exclude: [found.node] }),
          forPending: hole,
          timeoutMs: input.moveTimeoutMs(entry),
          payload: { for: planned, for_priority: priority, priority: migration.priority, pending_reason: p.reason, hole_node: found.node, victims: found.victims, detail: view.detail },
          held: (why) => held(`not this cycle: ${why}`),
          refused: (refusal, detail) => held(`the move mechanism refused ${migration.replica}: ${refusal} (${detail})`),
        },
      };
      continue;
    }
    if (found.leaving) {
      out.want = { view, wait: `waits for the migration(s) away from ${found.node} to land` };
      continue;
    }
    const victims = found.victims;
    out.want = { view, stop: () => ({ victims, ...stopOps(input, p, priority, hole, victims) }) };
  }
  return out;
}

/**
 * What a preemption view means, in the words of `nomad job plan` ("1 replica of batch/worker
 * preempted"): `jaco rebalance plan` and `jaco apply --dry-run` print it.
 */
export function preemptText(v: PreemptView): string {
  const who = `${v.deployment}/${v.service} (priority ${v.priority})`;
  if (!v.victims?.length) return `${who} would preempt nothing${v.noPreempt ? ` (${v.noPreempt})` : ''}: ${v.detail}`;
  const groups = new Map<string, PreemptVictim[]>();
  for (const x of v.victims) {
    const k = `${x.deployment}/${x.service} (priority ${x.priority}) ${x.action === 'migrate' ? `moved to ${x.to}` : 'preempted'}`;
    groups.set(k, [...(groups.get(k) ?? []), x]);
  }
  const parts = [...groups].map(([k, xs]) => `${xs.length} replica${xs.length > 1 ? 's' : ''} of ${k} [${xs.map((x) => x.replica).join(', ')}]`);
  return `${who} would preempt on ${v.node}: ${parts.join('; ')}`;
}

const prio = (input: PreemptInput, p: PendingService) => input.priorityOf(p.deployment, p.service, p.spec);

function describe(node: string, victims: PreemptVictim[], leaving: number): string {
  const what = victims.map((v) => (v.action === 'migrate' ? `${v.replica} (priority ${v.priority}) moves → ${v.to}` : `${v.replica} (priority ${v.priority}) is stopped`));
  return `${victims.length} lower-priority replica(s) make room on ${node}: ${what.join(', ')}${leaving ? `; ${leaving} already moving away` : ''}`;
}

type Found = { node: string; victims: PreemptVictim[]; leaving: number } | { noPreempt: NoPreemptReason; detail: string };

interface Candidate {
  entry: ReplicaEntry;
  priority: number;
  placed: PlacedReplica;
}

const request = (p: PendingService): PlacementRequest => ({ replica: `${p.deployment}-${p.service}-pending`, deployment: p.deployment, service: p.service, spec: p.spec });

/** The node where evicting costs least, and its victims, or why there is none. */
function bestVictims(input: PreemptInput, p: PendingService, priority: number): Found {
  const placer = input.placer();
  const req = request(p);
  const antiAffinity = p.spec.placement?.mode === 'hosts';
  const check = placer.checker(req, { antiAffinity });
  const overhead = placer.config.memoryOverheadBytes;
  // First the cheap bound on every node the capacity filters block: the lowest priority among its
  // candidates and the fewest of them that could free enough memory and GPUs. Only nodes whose
  // bound could beat the best so far get the reprieve what-if, best bound first.
  const bounds: { node: string; cands: Candidate[]; leaving: ReplicaEntry[]; minPriority: number; k: number }[] = [];
  for (const node of placer.names) {
    const rej = check(node);
    if (!rej || !CAPACITY_FILTERS.has(rej)) continue; // fits already (the scheduler's), or no eviction helps
    const onNode = input.book.replicas.onNode(node);
    const cands: Candidate[] = [];
    let minPriority = Infinity;
    for (const e of onNode) {
      const c = preemptible(input, e, p, node, priority);
      if (!c) continue;
      cands.push(c);
      minPriority = Math.min(minPriority, c.priority);
    }
    if (!cands.length) continue;
    const leaving = onNode.filter((e) => inFlight(e.copies)?.desired.spec.move?.from === node);
    const room = placer.headroom(node);
    const wants = placer.needs(p.spec, node);
    for (const e of leaving) {
      const f = placedReplicaOf(e.copies.find((c) => c.desired.spec.node === node)!.desired);
      room.memoryBytes += (f?.memoryBytes ?? 0) + overhead;
      room.gpus += gpusOf(placer, f?.gpus ?? 0, node);
    }
    const k = Math.max(
      fewest(room.memoryBytes, wants.memoryBytes, cands.map((c) => c.placed.memoryBytes + overhead)),
      fewest(room.gpus, wants.gpus, cands.map((c) => gpusOf(placer, c.placed.gpus, node))),
      1,
    );
    if (Number.isFinite(k)) bounds.push({ node, cands, leaving, minPriority, k });
  }
  bounds.sort((a, b) => a.minPriority - b.minPriority || a.k - b.k || byName(a.node, b.node));
  let budgetBlocked = false;
  let best: { node: string; victims: Candidate[]; leaving: number; key: number[] } | undefined;
  for (const b of bounds) {
    if (best && !less([b.minPriority, b.k], best.key.slice(0, 2))) break; // no node further on can do better
    const victims = victimsOn(placer, check, b.node, b.cands, b.leaving);
    if (!victims) continue;
    const key = [Math.max(...victims.map((v) => v.priority)), victims.length, victims.reduce((s, v) => s + v.priority, 0)];
    if (best && !less(key, best.key)) continue;
    // The budget last, for a node that would be chosen: it reads the victims' services.
    if (withinBudget(input, victims)) best = { node: b.node, victims, leaving: b.leaving.length, key };
    else budgetBlocked = true;
  }
  if (!best) {
    return budgetBlocked
      ? { noPreempt: 'would_exceed_budget', detail: NO_PREEMPT_REASONS.would_exceed_budget }
      : { noPreempt: 'no_lower_priority', detail: NO_PREEMPT_REASONS.no_lower_priority };
  }
  return { node: best.node, victims: homes(input.book, placer, req, best.node, best.victims, best.leaving ? leavingOf(input, best.node) : []), leaving: best.leaving };
}

const gpusOf = (placer: Placer, gpus: number | 'all', node: string) => (gpus === 'all' ? placer.needs({ image: '', resources: { gpus: 'all' } }, node).gpus : gpus);

/** The fewest of `sizes` (largest first) that bring `room` to `need`: Infinity when all of them do not. */
function fewest(room: number, need: number, sizes: number[]): number {
  if (room >= need) return 0;
  const sorted = [...sizes].sort((a, b) => b - a);
  for (let k = 0; k < sorted.length; k++) if ((room += sorted[k]!) >= need) return k + 1;
  return Infinity;
}

const less = (a: number[], b: number[]) => {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! < b[i]!;
  return false;
};

const leavingOf = (input: PreemptInput, node: string) => input.book.replicas.onNode(node).filter((e) => inFlight(e.copies)?.desired.spec.move?.from === node);

/** A replica on `node` the pending service may evict, or undefined. */
function preemptible(input: PreemptInput, e: ReplicaEntry, p: PendingService, node: string, priority: number): Candidate | undefined {
  if (e.copies.length !== 1) return undefined; // moving: not ours to touch
  const s = e.copies[0]!.desired.spec;
  if (s.node !== node || s.movingTo || s.suspended) return undefined;
  if (e.deployment === p.deployment && e.service === p.service) return undefined;
  if (isStateful(s.template) || placementMode(s.template) === 'global') return undefined;
  const victimPriority = input.priorityOf(e.deployment, e.service, s.template);
  if (victimPriority >= priority) return undefined;
  const placed = placedReplicaOf(e.copies[0]!.desired);
  return placed ? { entry: e, priority: victimPriority, placed } : undefined;
}

/**
 * What-if on one node: every candidate (and every replica already leaving) off; if the pending
 * replica fits, reprieve candidates one by one — highest priority, then smallest, first — keeping
 * each that still leaves room. The victims are the candidates not reprieved. Placer restored.
 */
function victimsOn(placer: Placer, check: (node: string) => unknown, node: string, cands: Candidate[], leaving: ReplicaEntry[]): Candidate[] | undefined {
  for (const e of leaving) placer.forget(e.id, node);
  for (const c of cands) placer.forget(c.entry.id, node);
  let victims: Candidate[] | undefined;
  if (!check(node)) {
    victims = [];
    const order = [...cands].sort((a, b) => b.priority - a.priority || size(a) - size(b) || byName(a.entry.id, b.entry.id));
    for (const c of order) {
      placer.assume(c.placed);
      if (check(node)) {
        placer.forget(c.entry.id, node);
        victims.push(c);
      }
    }
  }
  // Restore: candidates not reprieved (and the leaving replicas) go back on the node.
  const back = new Set(victims ?? cands);
  for (const c of cands) if (!victims || back.has(c)) placer.assume(c.placed);
  for (const e of leaving) placer.assume({ id: e.id, deployment: e.deployment, service: e.service, node, ...footprintOf(e.copies.find((c) => c.desired.spec.node === node)!.desired.spec.template) });
  return victims?.sort((a, b) => a.priority - b.priority || size(b) - size(a) || byName(a.entry.id, b.entry.id));
}

/** GPUs weigh more than any memory: a GPU holder is the last reprieved when GPUs are what is short. */
const size = (c: Candidate) => (c.placed.gpus === 'all' ? 1e6 : c.placed.gpus) * 1e15 + c.placed.memoryBytes;

/** Every victim's service can afford it: its disruption budget counts the other victims of the service too. */
function withinBudget(input: PreemptInput, victims: Candidate[]): boolean {
  const byService = new Map<string, Candidate[]>();
  for (const v of victims) byService.set(`${v.entry.deployment}/${v.entry.service}`, [...(byService.get(`${v.entry.deployment}/${v.entry.service}`) ?? []), v]);
  for (const vs of byService.values()) {
    const e = vs[0]!.entry;
    const budget = input.book.budget(e.deployment, e.service, e.copies[0]!.desired.spec.template);
    for (const v of vs) {
      if (!admits(budget, v.entry.id).ok) return false;
      budget.disrupted.set(v.entry.id, 'down');
    }
  }
  return true;
}

/**
 * Where each victim goes: with the hole held for the pending replica, a running victim that the
 * placer fits elsewhere migrates there (counted, so the next victim sees it); the rest are stopped.
 * Placer restored.
 */
function homes(book: MoveBook, placer: Placer, req: PlacementRequest, node: string, victims: Candidate[], leaving: ReplicaEntry[]): PreemptVictim[] {
  for (const e of leaving) placer.forget(e.id, node);
  for (const v of victims) placer.forget(v.entry.id, node);
  const hole: PlacedReplica = { id: req.replica, deployment: req.deployment, service: req.service, node, ...footprintOf(req.spec) };
  placer.assume(hole);
  const landed: PlacedReplica[] = [];
  const out: PreemptVictim[] = [];
  for (const v of victims) {
    const e = v.entry;
    const copy = e.copies[0]!;
    const base = { replica: e.id, deployment: e.deployment, service: e.service, priority: v.priority, node };
    const movable = replicaRunning(copy.observed) && copy.desired.spec.template.rebalance !== 'disabled' && !isJob(copy.desired.spec.template);
    const d = movable ? placer.decide({ replica: e.id, deployment: e.deployment, service: e.service, index: e.index, spec: book.shape(copy.desired.spec), exclude: [node] }) : undefined;
    if (d?.chosen) {
      const p = { ...v.placed, node: d.chosen };
      placer.assume(p);
      landed.push(p);
      out.push({ ...base, action: 'migrate', to: d.chosen });
    } else out.push({ ...base, action: 'stop' });
  }
  for (const p of landed) placer.forget(p.id, p.node);
  placer.forget(hole.id, node);
  for (const v of victims) placer.assume(v.placed);
  for (const e of leaving) placer.assume({ id: e.id, deployment: e.deployment, service: e.service, node, ...footprintOf(e.copies.find((c) => c.desired.spec.node === node)!.desired.spec.template) });
  return out;
}

/**
 * The stops, one transaction: each victim's desired key (compared at the revision judged) says it
 * is suspended for preemption and for whom — the agent stops its container, the placer no longer
 * counts it, the scheduler holds the hole and re-places the victim when capacity exists — and each
 * victim service's disruption ledger is advanced once (two deciders cannot both spend the last
 * unit; a second write of one key in the same transaction is one etcd refuses, as a rollout step's).
 */
function stopOps(input: PreemptInput, p: PendingService, priority: number, hole: HoleFor, victims: PreemptVictim[]): { ops: Op[]; audit: AuditRecord[] } {
  const ops: Op[] = [];
  const audit: AuditRecord[] = [];
  const at = iso(input.now);
  const lastOfService = new Map(victims.map((v) => [`${v.deployment}/${v.service}`, v]));
  for (const v of victims) {
    const copy = input.book.entry(v.replica)!.copies[0]!;
    const value: ReplicaDesired = { ...copy.desired, spec: { ...copy.desired.spec, suspended: { reason: 'preempted', at }, preempted: { for: hole, priority: v.priority, forPriority: priority, at } } };
    ops.push({ op: 'update', key: copy.key, value, modRevision: copy.modRevision });
    if (lastOfService.get(`${v.deployment}/${v.service}`) === v) ops.push(...input.book.ledger.record(v.deployment, v.service, { replica: v.replica, by: 'rebalancer', kind: 'preempt', now: input.now }));
    audit.push({
      type: 'replica_preempted',
      time: input.now,
      deployment: v.deployment,
      payload: {
        replica_id: v.replica,
        deployment: v.deployment,
        service: v.service,
        priority: v.priority,
        node: v.node,
        for: `${p.deployment}/${p.service}`,
        for_priority: priority,
        pending_reason: p.reason,
        detail: `stopped on ${v.node} to make room for ${p.deployment}/${p.service} (priority ${priority} over ${v.priority}); placed again when capacity exists`,
      },
    });
  }
  return { ops, audit };
}
