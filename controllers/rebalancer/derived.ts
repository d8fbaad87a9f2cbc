// What a cycle derives from the replica set and keeps for the next one: the desired keys grouped
// by node, service and in-flight move, and the scheduler's placer with every replica accounted.
// At 10,000 replicas rebuilding them is most of a cycle's cost, and between two cycles few keys
// change. Informer values are replaced on change, never mutated, so object identity tells what
// changed; the answers are exactly what rebuilding would give (decide stays a pure function).
import type { Node, ReplicaDesired, VolumeHome } from '../../src/api/types.js';
import type { VersionedDesired } from '../moves/move.js';
import { Placer, type PlacedReplica } from '../scheduler/placement.js';
import { placedReplicaOf, placementInputFrom } from '../scheduler/placement-input.js';
import type { Snapshot } from './decide.js';

export const serviceKey = (d: ReplicaDesired) => `${d.spec.deployment}/${d.spec.service}`;

/** Positions in the snapshot's desired list, grouped the ways a cycle reads them. */
export interface Layout {
  /** Every copy of a replica with a move in flight (its source and its destination). */
  moving: number[];
  byNode: Map<string, number[]>;
  /** By "<deployment>/<service>". */
  byService: Map<string, number[]>;
}

/** How the desired list changed since a previous one, position by position. */
type Change = { kind: 'same' } | { kind: 'edited'; replaced: number[]; appendedFrom: number } | { kind: 'reordered' };

/** Beyond this many replaced positions a rebuild is as cheap as patching. */
const PATCH_LIMIT = 256;

function changeOf(prev: readonly ReplicaDesired[], cur: readonly VersionedDesired[]): Change {
  if (cur.length < prev.length) return { kind: 'reordered' };
  const replaced: number[] = [];
  for (let i = 0; i < prev.length; i++)
    if (prev[i] !== cur[i]!.value) {
      replaced.push(i);
      if (replaced.length > PATCH_LIMIT) return { kind: 'reordered' };
    }
  return !replaced.length && cur.length === prev.length ? { kind: 'same' } : { kind: 'edited', replaced, appendedFrom: prev.length };
}

/** A replaced value that keeps its node, service, id and move state keeps its place in the layout. */
function sameShape(a: ReplicaDesired, b: ReplicaDesired): boolean {
  return a.spec.replica === b.spec.replica && a.spec.node === b.spec.node && a.spec.deployment === b.spec.deployment && a.spec.service === b.spec.service && !!a.spec.move === !!b.spec.move;
}

const push = (m: Map<string, number[]>, k: string, i: number) => {
  const l = m.get(k);
  if (l) l.push(i);
  else m.set(k, [i]);
};

function movingOf(desired: readonly VersionedDesired[]): number[] {
  const ids = new Set<string>();
  for (const d of desired) if (d.value.spec.move) ids.add(d.value.spec.replica);
  const moving: number[] = [];
  if (ids.size) desired.forEach((d, i) => ids.has(d.value.spec.replica) && moving.push(i));
  return moving;
}

let layoutMemo: { desired: ReplicaDesired[]; layout: Layout } | undefined;

/** The desired keys grouped by node, service and in-flight move (kept between cycles). */
export function layoutOf(desired: readonly VersionedDesired[]): Layout {
  const m = layoutMemo;
  const change = m ? changeOf(m.desired, desired) : ({ kind: 'reordered' } as const);
  if (m && change.kind === 'same') return m.layout;
  if (m && change.kind === 'edited' && change.replaced.every((i) => sameShape(m.desired[i]!, desired[i]!.value))) {
    for (const i of change.replaced) m.desired[i] = desired[i]!.value;
    for (let i = change.appendedFrom; i < desired.length; i++) {
      const d = desired[i]!.value;
      m.desired.push(d);
      push(m.layout.byNode, d.spec.node, i);
      push(m.layout.byService, serviceKey(d), i);
    }
    if (change.appendedFrom < desired.length) m.layout.moving = movingOf(desired);
    return m.layout;
  }
  const layout: Layout = { moving: movingOf(desired), byNode: new Map(), byService: new Map() };
  desired.forEach((d, i) => {
    push(layout.byNode, d.value.spec.node, i);
    push(layout.byService, serviceKey(d.value), i);
  });
  layoutMemo = { desired: desired.map((d) => d.value), layout };
  return layout;
}

let placedMemo = new WeakMap<ReplicaDesired, PlacedReplica | null>();
let placerMemo: { desired: ReplicaDesired[]; nodes: readonly Node[]; ineligible: (string | undefined)[]; volumes: readonly VolumeHome[]; placer: Placer } | undefined;

/** What a desired key occupies (its quantities parsed once per stored object). */
function placedOf(d: ReplicaDesired): PlacedReplica | null {
  let p = placedMemo.get(d);
  if (p === undefined) placedMemo.set(d, (p = placedReplicaOf(d) ?? null));
  return p;
}
function assume(placer: Placer, d: ReplicaDesired): void {
  const p = placedOf(d);
  if (p) placer.assume(p);
}
function forget(placer: Placer, d: ReplicaDesired): void {
  const p = placedOf(d);
  if (p) placer.forget(p.id, p.node);
}

/**
 * The scheduler's placer over the snapshot (its filters are the rebalancer's hard filters). Kept
 * while the nodes, their eligibility at `now` and the volume homes are the same; replicas that
 * changed are taken off and put back rather than accounting all of them again. Never used to
 * place: Placer.check and Placer.candidates only read it.
 */
export function placerFor(snap: Snapshot, now: number, ineligible: (string | undefined)[]): Placer {
  const m = placerMemo;
  if (m && sameItems(m.volumes, snap.volumeHomes) && sameItems(m.nodes, snap.nodes) && sameItems(m.ineligible, ineligible)) {
    const change = changeOf(m.desired, snap.desired);
    if (change.kind === 'same') return m.placer;
    if (change.kind === 'edited') {
      for (const i of change.replaced) {
        forget(m.placer, m.desired[i]!);
        assume(m.placer, (m.desired[i] = snap.desired[i]!.value));
      }
      for (let i = change.appendedFrom; i < snap.desired.length; i++) assume(m.placer, m.desired[m.desired.push(snap.desired[i]!.value) - 1]!);
      return m.placer;
    }
    const desired = snap.desired.map((d) => d.value);
    const cur = new Set(desired);
    const before = new Set(m.desired);
    for (const d of m.desired) if (!cur.has(d)) forget(m.placer, d);
    for (const d of desired) if (!before.has(d)) assume(m.placer, d);
    m.desired = desired;
    return m.placer;
  }
  const placer = new Placer(placementInputFrom({ nodes: snap.nodes, heartbeats: snap.heartbeats, drains: snap.drains, desired: [], volumeHomes: snap.volumeHomes }, now));
  const desired = snap.desired.map((d) => d.value);
  for (const d of desired) assume(placer, d);
  placerMemo = { desired, nodes: snap.nodes, ineligible, volumes: snap.volumeHomes, placer };
  return placer;
}

function sameItems<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Runs fn with nothing kept (and restores what was): tests compare a cycle with and without it. */
export function withoutKept<T>(fn: () => T): T {
  const kept = [layoutMemo, placerMemo, placedMemo] as const;
  layoutMemo = undefined;
  placerMemo = undefined;
  placedMemo = new WeakMap();
  try {
    return fn();
  } finally {
    [layoutMemo, placerMemo, placedMemo] = kept;
  }
}
