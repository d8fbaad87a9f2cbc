// Spread skew (seed 002: "rebalance when nodes are added"; seed 003, use case 2): a spread service
// whose replicas sit unevenly — a node came back after its replicas were re-placed elsewhere, or a
// new node joined — is evened out one move at a time, make-before-break, through the shared move
// mechanism and its disruption budget. Skew is Kubernetes' maxSkew 1: the most-loaded node holds
// at most one replica of the service more than the least-loaded node that could take one.
// The destination is the scheduler's own choice (Placer.place: fewest replicas of the service,
// then CPU headroom, then the rendezvous hash), so the scheduler and the rebalancer never disagree
// about where a replica belongs. A move strictly lowers the skew, so spread moves cannot flap;
// cooldowns and the ping-pong exclusion hold all the same. Pure: no I/O, the clock comes in.
import { placementMode } from '../../src/api/spec.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { inFlight, type Copy, type MoveBook } from '../moves/move.js';
import type { MoveIntent, SpreadVerdict, SpreadView } from './plan.js';
import type { Decision, Placer, PlacementRequest } from '../placement/placer.js';
import type { Exclusion } from '../../src/api/reasons/rebalance.js';
import { byName } from './config.js';

export interface SpreadInput {
  book: MoveBook;
  /** Built on first use: a cluster without a skewed service never needs it. */
  placer: () => Placer;
  moveTimeoutMs: (entry: ReplicaEntry) => number;
  /** Why a copy may not move at all (the pressure path's exclusions: moving, global, stateful…). */
  exclusion: (copies: readonly Copy[], copy: Copy) => Exclusion | undefined;
  /** Why a node may not receive this replica beyond the scheduler's filters (node cooldown, pressure after the move). */
  dstRefusal: (node: string, copy: Copy) => string | undefined;
  /** The nodes the replica's service moved away from since balancing was last triggered (the ping-pong exclusion). */
  movedAwayFrom: (copy: Copy) => ReadonlySet<string>;
  /** A replica placed or moved this long ago is within the replica cooldown (undefined: past it). */
  replicaCooldown: (copy: Copy) => number | undefined;
}

/** Every spread service judged; a move intent for each skewed one that can move, the most skewed first. */
export function planSpread(input: SpreadInput): { views: SpreadView[]; intents: MoveIntent[] } {
  const judged: Judged[] = [];
  for (const key of input.book.replicas.serviceKeys()) {
    const j = judge(input, key);
    if (j) judged.push(j);
  }
  // The most skewed service first (ties by name): it is the one users see lopsided.
  judged.sort((a, b) => b.view.skew - a.view.skew || byName(`${a.view.deployment}/${a.view.service}`, `${b.view.deployment}/${b.view.service}`));
  const intents: MoveIntent[] = [];
  for (const j of judged) {
    if (j.view.verdict !== 'move') continue;
    const v = j.view;
    intents.push({
      trigger: 'spread',
      replica: v.replica!,
      deployment: v.deployment,
      service: v.service,
      src: v.src!,
      dst: v.dst!,
      why: `spread restored: ${v.detail}`,
      ...(j.decision ? { verdicts: () => j.decision! } : {}),
      timeoutMs: j.timeoutMs,
      payload: { counts_before: v.counts, skew_before: v.skew, detail: v.detail },
      held: (why) => Object.assign(v, { verdict: 'held', detail: `${v.detail}; not this cycle: ${why}` }),
      refused: (refusal, detail) => Object.assign(v, { verdict: 'held', detail: `${v.detail}; the move mechanism refused: ${refusal} (${detail})` }),
    });
  }
  return { views: judged.map((j) => j.view), intents };
}

interface Judged {
  view: SpreadView;
  timeoutMs: number;
  /** The placer's decision that chose the destination (stored with the move). */
  decision?: Decision;
}

function judge(input: SpreadInput, key: string): Judged | undefined {
  const slash = key.indexOf('/');
  const [deployment, service] = [key.slice(0, slash), key.slice(slash + 1)];
  const entries = input.book.replicas.service(deployment, service);
  const first = entries[0]?.copies[0];
  if (!first || placementMode(first.desired.spec.template) !== 'spread') return undefined;
  const base = { deployment, service };
  const req = (e: ReplicaEntry, exclude: string[] = []): PlacementRequest => ({ replica: e.id, deployment, service, index: e.index, spec: input.book.shape(e.copies[0]!.desired.spec), exclude });

  // Counts over the nodes that hold a replica or could take one (the filters, without anti-affinity).
  // A Map, not an object: node names as property names would give V8 a hidden class per cluster shape.
  const counts = new Map<string, number>();
  let most = 0;
  for (const e of entries)
    for (const c of e.copies)
      if (!c.desired.spec.move) {
        const n = (counts.get(c.desired.spec.node) ?? 0) + 1;
        counts.set(c.desired.spec.node, n);
        most = Math.max(most, n);
      }
  // The common case, cheaply: one replica per node cannot be skewed by more than one.
  if (most <= 1) return undefined;
  const placer = input.placer();
  const probe = req(entries[0]!);
  const open = placer.names.filter((n) => !placer.check(probe, n, { antiAffinity: false }));
  for (const n of open) if (!counts.has(n)) counts.set(n, 0);
  const count = (n: string) => counts.get(n) ?? 0;
  const src = [...counts.keys()].filter((n) => count(n) > 0).sort((a, b) => count(b) - count(a) || byName(a, b))[0];
  const least = open.sort((a, b) => count(a) - count(b) || byName(a, b))[0];
  const skew = src === undefined || least === undefined ? 0 : count(src) - count(least);
  const view = (verdict: SpreadVerdict, detail: string, extra: Partial<SpreadView> = {}): Judged => ({ view: { ...base, counts: sorted(counts), skew: Math.max(0, skew), verdict, detail, ...extra }, timeoutMs: 0 });
  if (skew <= 1) return view('even', skew < 0 ? 'no node can take another replica' : `skew ${Math.max(0, skew)} ≤ 1`);
  if (entries.some((e) => inFlight(e.copies))) return view('held', 'a replica of the service is moving: one at a time');

  // The replica to move: on the most-loaded node, movable, past its cooldown, newest index first.
  const why: string[] = [];
  const onSrc = entries
    .filter((e) => e.copies.length === 1 && e.copies[0]!.desired.spec.node === src)
    .sort((a, b) => (b.index ?? -1) - (a.index ?? -1) || byName(a.id, b.id));
  for (const e of onSrc) {
    const copy = e.copies[0]!;
    const ex = input.exclusion(e.copies, copy);
    if (ex) {
      why.push(`${e.id}: ${ex}`);
      continue;
    }
    const agoMs = input.replicaCooldown(copy);
    if (agoMs !== undefined) {
      why.push(`${e.id}: placed ${Math.round(agoMs / 1000)}s ago (replica cooldown)`);
      continue;
    }
    // Where the scheduler would put it now, away from its node, the nodes it may not go to excluded.
    const refused = new Map(open.map((n) => [n, input.dstRefusal(n, copy)] as const).filter(([, r]) => r !== undefined));
    for (const back of input.movedAwayFrom(copy)) refused.set(back, refused.get(back) ?? 'the service moved away from it since balancing was last triggered (ping-pong exclusion)');
    const decision = placer.decide(req(e, [src!, ...refused.keys()]));
    const dst = decision.chosen;
    if (!dst || count(src!) - count(dst) <= 1) {
      why.push(`${e.id}: no node evens it out${refused.size ? ` (${[...refused].map(([n, r]) => `${n}: ${r}`).join('; ')})` : ''}`);
      continue;
    }
    const judged = view('move', `${src} holds ${count(src!)}, ${dst} holds ${count(dst)}: move ${e.id} ${src} → ${dst} (${decision.why})`, { replica: e.id, src, dst });
    judged.timeoutMs = input.moveTimeoutMs(e);
    judged.decision = decision;
    return judged;
  }
  return view('held', `skew ${skew} but nothing on ${src} can move: ${why.join('; ') || 'no single-copy replica'}`);
}

function sorted(counts: ReadonlyMap<string, number>): Record<string, number> {
  return Object.fromEntries([...counts].sort(([a], [b]) => byName(a, b)));
}
