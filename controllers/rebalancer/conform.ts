// Placement conformance: a change to a service's `placement.hosts` or `placement.nodeSelector`
// (or a node's labels) can leave replicas on nodes the service may no longer use. The spec hash
// leaves placement out (it does not shape the container), so no rollout touches them and the
// scheduler counts them as placed. Here each such replica moves to where the scheduler's own placer
// puts it now, make-before-break: a hard constraint broken is worth more than ADR 0002's one move
// per cycle, so every misplaced replica whose service's disruption budget has room moves in the
// same cycle — as many at once as update.maxUnavailable allows, the rest on later cycles, never
// fewer running than wanted. Pure: the placer comes in. The planner yields one move intent at a
// time and the arbiter starts it (or not) before the next is worked out: a started move is counted
// where it lands before the next destination is chosen, so two moves of one cycle never overfill one node.
import type { ServiceSpec } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { inFlight, type Copy, type MoveBook } from '../moves/move.js';
import type { Placer } from '../placement/placer.js';
import type { ConformView, MoveIntent } from './plan.js';

export interface ConformInput {
  /** The move book; its placements are every service's current one (from deployments/). */
  book: MoveBook;
  placer: () => Placer;
  /** Node labels by node name. */
  labels: ReadonlyMap<string, Readonly<Record<string, string>>>;
  moveTimeoutMs: (entry: ReplicaEntry) => number;
}

/** What a node fails of a service's placement (hosts, nodeSelector), or undefined when it satisfies it. */
export function brokenPlacement(placement: ServiceSpec['placement'], node: string, labels: Readonly<Record<string, string>> | undefined): string | undefined {
  if (placement?.mode === 'hosts' && !(placement.hosts ?? []).includes(node)) return `not in placement.hosts (${(placement.hosts ?? []).join(', ')})`;
  const wrong = Object.entries(placement?.nodeSelector ?? {}).filter(([k, v]) => labels?.[k] !== v);
  if (wrong.length) return `lacks ${wrong.map(([k, v]) => `${k}=${v}`).join(', ')} (placement.nodeSelector)`;
  return undefined;
}

/** Whether a placement rules out any node at all (brokenPlacement can find something). */
function constrains(placement: ServiceSpec['placement']): boolean {
  return placement?.mode === 'hosts' || Object.keys(placement?.nodeSelector ?? {}).length > 0;
}

/**
 * Every replica on a node its service's placement no longer allows: a move intent for each that
 * has a destination, yielded one at a time (the arbiter starts it or holds it before the next);
 * returns the views.
 */
export function* planConform(input: ConformInput): Generator<MoveIntent, ConformView[], void> {
  const views: ConformView[] = [];
  for (const key of input.book.replicas.serviceKeys()) {
    const placement = input.book.placements.get(key);
    // Global services follow their nodes through the scheduler (a replica per eligible node); a
    // service that names no hosts and selects no labels has no replica to look at (most of them:
    // at 10,000 replicas, looking at each took 2 ms of every cycle).
    if (!input.book.placements.has(key) || placement?.mode === 'global' || !constrains(placement)) continue;
    for (const e of input.book.replicas.service(...(key.split('/') as [string, string]))) {
      // One copy, not moving: a move in flight is settled first.
      if (e.copies.length !== 1 || inFlight(e.copies)) continue;
      const copy: Copy = e.copies[0]!;
      const spec = copy.desired.spec;
      // A job runs to completion where it is: never moved (controllers/scheduler/job.ts).
      if (spec.template.mode === 'job') continue;
      const broken = brokenPlacement(placement, spec.node, input.labels.get(spec.node));
      if (!broken) continue;
      const base = { replica: e.id, deployment: spec.deployment, service: spec.service, node: spec.node, broken };
      // The replica as its service is placed now: the current placement, the rest as it runs.
      const req = { replica: e.id, deployment: spec.deployment, service: spec.service, spec: { ...spec.template, placement: placement ?? {} }, index: spec.index, exclude: [spec.node] };
      const decision = input.placer().decide(req);
      if (!decision.chosen) {
        views.push({ ...base, verdict: 'no_dst', detail: `${spec.node} ${broken}; no node takes it: ${decision.why}` });
        continue;
      }
      const why = `placement changed: ${spec.node} ${broken}; ${decision.why}`;
      const view: ConformView = { ...base, verdict: 'move', dst: decision.chosen, detail: why };
      views.push(view);
      yield {
        trigger: 'placement',
        replica: e.id,
        deployment: spec.deployment,
        service: spec.service,
        src: spec.node,
        dst: decision.chosen,
        why,
        verdicts: () => decision,
        timeoutMs: input.moveTimeoutMs(e),
        payload: { broken, detail: why },
        held: (w) => Object.assign(view, { verdict: 'held', detail: `${spec.node} ${broken}; not this cycle: ${w}` }),
        refused: (refusal, detail) => Object.assign(view, { verdict: 'held', detail: `${spec.node} ${broken}; the move mechanism refused: ${refusal} (${detail})` }),
      };
    }
  }
  return views;
}
