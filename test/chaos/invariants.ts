// What the chaos run checks, against etcd and `docker ps`: a snapshot of both (Docker first, then
// etcd at one revision), the simulation's invariants over it (test/sim/invariants.ts, through an
// adapter: they are pure over a snapshot), and the checks only the real thing has — containers
// without a desired replica, duplicate containers, acknowledged applies — plus convergence.
import type Docker from 'dockerode';
import type { IKeyValue } from '../../src/store/wire.js';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import { DEREGISTRATION_LABEL } from '../../controllers/node-agent/facts.js';
import { templateOf } from '../../src/api/serving.js';
import type { AuditEvent, Deployment, NodeDrain, ReplicaDesired, ReplicaObserved, RolloutPlan } from '../../src/api/types.js';
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
  /** The desired keys (relative to the prefix) with their etcd create revisions, as read. */
  desiredKeys: RevKey[];
  /** The audit records alive at this revision (they live on leases: a revoke removes them early). */
  audits: AuditAt[];
  /** The election keys alive at this revision (leaders/<controller>/<lease>). */
  leaders: ElectionKey[];
}

/** A key (relative to the store prefix) and the revision of the transaction that created it. */
export interface RevKey {
  key: string;
  createRevision: number;
}

/** An audit record as etcd holds it: created once, in the transaction of the act it records. */
export interface AuditAt extends RevKey {
  type: string;
  actor: string;
  /** The record's payload, as JSON. */
  payload: string;
}

/**
 * Docker first, then etcd at one revision: a container seen running had its chance to be in etcd.
 * A failure names the read that failed, or the ones still unanswered after 10 s (a long streak of
 * failed samples must say whether Docker, etcd or the checker's own client was in the way).
 */
export function snapshot(store: Store, containers: () => Promise<Docker.ContainerInfo[]>): Promise<Snapshot> {
  const pending = new Set<string>();
  const step = async <T>(what: string, p: () => Promise<T>): Promise<T> => {
    pending.add(what);
    try {
      return await p();
    } catch (e) {
      throw new Error(`${what}: ${(e as Error).message.split('\n')[0]}`);
    } finally {
      pending.delete(what);
    }
  };
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`snapshot: no answer within 10 s from ${[...pending].join(', ') || 'nothing pending'}`)), 10_000);
  });
  return Promise.race([read(store, containers, step).finally(() => clearTimeout(timer)), late]);
}

type Step = <T>(what: string, p: () => Promise<T>) => Promise<T>;

async function read(store: Store, containers: () => Promise<Docker.ContainerInfo[]>, step: Step): Promise<Snapshot> {
  const at = Date.now();
  const running = await step('docker ps', containers);
  const first = await step('etcd range desired/', () => store.listRaw(keys.desiredOf()));
  const rev = first.revision;
  const range = <T>(prefix: string, fn: () => Promise<T>) => step(`etcd range ${prefix} at the revision`, fn);
  const read = <T>(prefix: string): Promise<T[]> => range(prefix, async () => (await store.listRaw(prefix, rev)).kvs.map((kv) => JSON.parse(kv.value.toString()) as T));
  const [observed, nodes, deployments, rollouts, drains, audits, leaders] = await Promise.all([
    read<ReplicaObserved>(keys.observedOf()),
    range(keys.nodes(), () => store.listRaw(keys.nodes(), rev, { keysOnly: true })),
    read<Deployment>(keys.deployments()),
    read<RolloutPlan>(keys.rollouts()),
    read<NodeDrain>(keys.drains()),
    range(keys.audits(), () => auditsAt(store, rev)),
    range('leaders/', () => leadersAt(store, '', rev)),
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
    desiredKeys: first.kvs.map((kv) => revKey(store, kv)),
    audits,
    leaders,
  };
}

const revKey = (store: Store, kv: IKeyValue): RevKey => ({ key: kv.key.toString().slice(store.prefix.length), createRevision: Number(kv.create_revision) });

/** The audit records alive at a revision (a past one too, while etcd has not compacted it). */
export async function auditsAt(store: Store, revision: number): Promise<AuditAt[]> {
  const { kvs } = await store.listRaw(keys.audits(), revision);
  return kvs.map((kv) => {
    const ev = JSON.parse(kv.value.toString()) as AuditEvent;
    return { ...revKey(store, kv), type: ev.spec.type, actor: ev.spec.actor, payload: JSON.stringify(ev.spec.payload ?? {}) };
  });
}

/** An election key: leaders/<controller>/<lease>, its value the candidate's identity (host/pid …). */
export interface ElectionKey extends RevKey {
  identity?: string;
}

/** The election keys of one controller ('' for all) alive at a revision, with their identities. */
export async function leadersAt(store: Store, controller: string, revision: number): Promise<ElectionKey[]> {
  const prefix = controller ? keys.leaders(controller) : keys.leaders('').slice(0, -1);
  return (await store.listRaw(prefix, revision)).kvs.map((kv) => ({ ...revKey(store, kv), identity: kv.value.toString() }));
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
 * fault holds it; a stopped, cut or restarting agent cannot remove anything) — plus the
 * container's own deregistration delay, which the agent legitimately waits out before its stop
 * (a serving container is held out of routing first: none in today's workload, which publishes no
 * port, but the bound must not misfire on one that does).
 */
export class StrayTracker {
  private firstSeen = new Map<string, number>();
  private reported = new Set<string>();
  /** The longest any stray stayed with its agent up, and which: the run's margin under the bound. */
  longest = { ms: 0, detail: '' };
  constructor(readonly boundMs: number) {}

  check(s: Snapshot, healthySince: (node: string) => number | undefined): Violation[] {
    const stray = strayContainers(s);
    const out: Violation[] = [];
    for (const id of [...this.firstSeen.keys()]) if (!stray.has(id)) this.firstSeen.delete(id);
    for (const [id, detail] of stray) {
      const first = this.firstSeen.get(id) ?? s.at;
      this.firstSeen.set(id, first);
      const c = s.running.find((x) => x.Id === id);
      const node = c?.Labels[LABELS.node] ?? '';
      const since = healthySince(node);
      if (since === undefined || this.reported.has(id)) continue;
      const from = Math.max(first, since);
      const age = s.at - from;
      if (age > this.longest.ms) this.longest = { ms: age, detail };
      if (age > this.boundMs + (Number(c?.Labels[DEREGISTRATION_LABEL]) || 0)) {
        this.reported.add(id);
        out.push({ at: s.at, invariant: `no stray container beyond one agent resync (${this.boundMs} ms)`, detail: `${detail}, for ${age} ms with its agent up` });
      }
    }
    return out;
  }
}

/**
 * No container destroyed without instruction across a restore of the store (docs/store.md: "node-agents
 * keep every container that the restored desired/ still wants"). `begin` takes the containers running
 * and desired just before the members stop; each sample until `windowMs` after the restore ends, a
 * container of those no longer running while the restored store still wants its replica on that node
 * at that spec — and no controller has recorded a decision about that replica since the restore (a
 * restart, a move: an instruction) — was destroyed by nobody's decision: a violation.
 */
export class KeptAcrossRestore {
  private kept = new Map<string, { what: string; replica: string }>();
  private sinceRevision = 0;
  private until = Infinity;

  begin(before: Snapshot, restoredRevision: number): void {
    const wanted = new Set(before.desired.map((d) => `${d.spec.node}/${d.spec.replica}@${d.spec.specHash}`));
    this.kept = new Map();
    for (const c of before.running) {
      const what = `${label(c, LABELS.node)}/${label(c, LABELS.replica)}@${label(c, LABELS.specHash)}`;
      if (wanted.has(what)) this.kept.set(c.Id, { what, replica: label(c, LABELS.replica) });
    }
    this.sinceRevision = restoredRevision;
    this.until = Infinity;
  }

  /** The store answers again: the check runs for `windowMs` more. */
  restored(now: number, windowMs: number): void {
    this.until = now + windowMs;
  }

  /** How many containers are still watched. */
  get watching(): number {
    return this.kept.size;
  }

  check(s: Snapshot): Violation[] {
    if (!this.kept.size) return [];
    if (s.at > this.until) {
      this.kept.clear();
      return [];
    }
    const wanted = new Set(s.desired.map((d) => `${d.spec.node}/${d.spec.replica}@${d.spec.specHash}`));
    const running = new Set(s.running.map((c) => c.Id));
    const decided = (replica: string) => s.audits.some((a) => a.createRevision > this.sinceRevision && a.payload.includes(JSON.stringify(replica)));
    const out: Violation[] = [];
    for (const [id, k] of this.kept) {
      if (running.has(id)) continue;
      this.kept.delete(id);
      if (!wanted.has(k.what) || decided(k.replica)) continue;
      out.push({ at: s.at, invariant: 'a restore destroys no container the restored store still wants', detail: `${k.what} (${id.slice(0, 12)}) is gone, still desired there at that spec, with no decision about ${k.replica} since the restore` });
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
 * What each deployment may be once the store was restored from a snapshot: what the snapshot holds
 * (`'(absent)'` if it held none), or an apply sent since the restore began (its outcome unknown until
 * acknowledged). Applies acknowledged before the restore but after the snapshot are undone by it —
 * the restored store is the truth (docs/store.md: "apply it again") — so they are not allowed.
 */
export function allowedAfterRestore(names: Iterable<string>, atSnapshot: ReadonlyMap<string, string>, sentSince: readonly (readonly [string, string])[]): Map<string, string[]> {
  return new Map([...names].map((name) => [name, [atSnapshot.get(name) ?? '(absent)', ...sentSince.filter(([n]) => n === name).map(([, shape]) => shape)]]));
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

// ---------------------------------------------------------------- act-level invariants, from etcd's revisions
//
// The simulation checks these on every transaction as it lands (test/sim/invariants.ts). Against
// the real etcd the checker sees no transactions, only what etcd keeps of them: each key's
// create_revision and mod_revision, and reads at a past revision (etcd keeps every revision until
// it is compacted; nothing compacts in the chaos cluster). One transaction is one revision, so
// "written in the same transaction" is "created at the same revision".

/** A desired key created during the run: a replica placed on its node (new, re-placed or moved there). */
export interface Placement extends RevKey {
  replica: string;
  node: string;
}

/**
 * Every act has its audit record: a desired key's creation (a replica placed, re-placed after a
 * lost node, or a move's destination) lands with an audit record created in the same revision —
 * the same transaction — that names the replica. `audits` are the records alive at the key's
 * create revision (read at that revision: a record revoked since is still there). Returns what is
 * wrong, or undefined.
 */
export function unauditedPlacement(p: Placement, audits: readonly AuditAt[]): string | undefined {
  const same = audits.filter((a) => a.createRevision === p.createRevision);
  if (!same.length) return `${p.key} created at revision ${p.createRevision} with no audit record in that transaction`;
  if (!same.some((a) => a.payload.includes(JSON.stringify(p.replica)))) return `${p.key} created at revision ${p.createRevision}; that transaction's audit records (${same.map((a) => a.type).join(', ')}) do not name ${p.replica}`;
  return undefined;
}

/** A desired key deleted during the run: the revision of the transaction that deleted it, and whether its value then was a move's source. */
export interface Removal extends RevKey {
  replica: string;
  deletedAt: number;
  /** The deleted value carried `movingTo`: a move's cutover, recorded by the move's start and end. */
  cutover: boolean;
}

/**
 * Every act has its audit record, removals too: a desired key's delete (a replica removed, re-placed
 * off a lost node, healed, a move's destination abandoned, a global replica dropped) lands with an
 * audit record created in the same revision that names the replica — but a move's cutover, whose
 * source goes as the second half of a move recorded by its start and end. `audits` are the records
 * alive at the delete's revision. Returns what is wrong, or undefined.
 */
export function unauditedRemoval(r: Removal, audits: readonly AuditAt[]): string | undefined {
  if (r.cutover) return undefined;
  const same = audits.filter((a) => a.createRevision === r.deletedAt);
  if (!same.length) return `${r.key} (created at revision ${r.createRevision}) deleted at revision ${r.deletedAt} with no audit record in that transaction`;
  if (!same.some((a) => a.payload.includes(JSON.stringify(r.replica)))) return `${r.key} deleted at revision ${r.deletedAt}; that transaction's audit records (${same.map((a) => a.type).join(', ')}) do not name ${r.replica}`;
  return undefined;
}

/**
 * The revision that deleted a key (or replaced it by a new one) between `from`, when it was seen with
 * `createRevision`, and `to`, when it was not: found by halving (reads at past revisions), with the
 * value it had just before. Undefined when etcd never showed it gone (a read at `to` disagrees).
 */
export async function deletionOf(store: Store, key: string, createRevision: number, from: number, to: number): Promise<{ deletedAt: number; value: unknown } | undefined> {
  const at = async (rev: number) => (await store.listRaw(key, rev)).kvs.find((kv) => kv.key.toString().slice(store.prefix.length) === key && Number(kv.create_revision) === createRevision);
  if (await at(to)) return undefined;
  let lo = from;
  let hi = to;
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    if (await at(mid)) lo = mid;
    else hi = mid;
  }
  const before = await at(lo);
  return { deletedAt: hi, value: before ? JSON.parse(before.value.toString()) : undefined };
}

/** A controller's write etcd can attribute: an audit record (its actor is the controller) and the transaction it landed in. */
export interface AttributedWrite {
  what: string;
  revision: number;
  controller: string;
}

/**
 * No write from a deposed leader lands: a write attributed to an elected controller lands within a
 * term of that controller's leadership. `leaders` are the controller's election keys alive at the
 * write's revision (read at that revision); the term in force is the lowest create revision's, and
 * there must be one: none alive means every term had ended (deleted keys: leases expired or revoked)
 * and the write came from a leader already deposed. A term cannot have begun after the write (a
 * create revision above it is reported too). Returns what is wrong, or undefined.
 */
export function deposedLeaderWrite(w: AttributedWrite, leaders: readonly RevKey[]): string | undefined {
  const term = leaderOf(leaders);
  if (!term) return `${w.what} by ${w.controller} landed at revision ${w.revision}, when no ${w.controller} term was in force (no election key under leaders/${w.controller}/)`;
  if (term.createRevision >= w.revision) return `${w.what} by ${w.controller} landed at revision ${w.revision}, before the term of ${term.key} began (revision ${term.createRevision})`;
  return undefined;
}

/** The leader at a revision: the lowest create revision among its controller's election keys then. */
export function leaderOf(leaders: readonly ElectionKey[]): ElectionKey | undefined {
  return leaders.length ? leaders.reduce((a, b) => (b.createRevision < a.createRevision ? b : a)) : undefined;
}

/** The process that wrote an audit record: ids are <epoch ms>-<per-process nonce>-<sequence> (src/store/audit.ts). */
export function writerOf(auditKey: string): string | undefined {
  return auditKey.slice(keys.audits().length).split('-')[1];
}

/**
 * No write from a deposed leader lands, per process: the records of one writer process (one audit
 * nonce: one controller in one process, whose identity never changes) all land under that process's
 * own terms — so the leader in force at each of its writes has one identity. A process whose writes
 * landed under two leaders' identities wrote at least once while the other copy led: a deposed
 * leader's write. `seen` maps controller/nonce to the first leader identity and revision seen for
 * it (updated); returns what is wrong, or undefined.
 */
export function writeUnderAnotherLeader(w: AttributedWrite & { writer: string }, leader: ElectionKey, seen: Map<string, { identity: string; revision: number }>): string | undefined {
  if (leader.identity === undefined) return undefined;
  const k = `${w.controller}/${w.writer}`;
  const first = seen.get(k);
  if (!first) {
    seen.set(k, { identity: leader.identity, revision: w.revision });
    return undefined;
  }
  if (first.identity === leader.identity) return undefined;
  return `${w.controller} process ${w.writer} wrote under ${first.identity}'s term (revision ${first.revision}) and ${w.what} under ${leader.identity}'s (${leader.key}, revision ${w.revision}): one of them was written by a copy that was not the leader`;
}

/** Figures of the act-level checks over a run. */
export interface ActCoverage {
  /** Desired keys whose creation was checked for its audit record. */
  placements: number;
  /** Desired keys whose deletion was checked for its audit record (cutovers included, exempt). */
  removals: number;
  /** Controller writes (audited transactions) checked against the controller's terms. */
  writes: number;
  /** By audit type: the records those writes carried. */
  byType: Record<string, number>;
  /** Items that could not be read at their revision (compacted) — none expected. */
  unverifiable: number;
}

/**
 * The act-level invariants over the run, sample by sample: each desired key seen for the first time
 * (key and create revision) is checked by unauditedPlacement against the audit records read at its
 * create revision; each desired key seen at one sample and gone at the next is found deleted at its
 * revision (deletionOf) and checked by unauditedRemoval against the records read there; each audit
 * record seen for the first time (alive in a sample, or found for a placement or a removal) whose actor is an elected controller is checked by deposedLeaderWrite against that
 * controller's election keys read at the record's revision. When a read fails (no quorum, or no
 * answer within the timeout) the sample stops there and the rest is tried at the next one.
 */
export class ActChecker {
  private placements = new Set<string>();
  private writes = new Set<string>();
  /** Controllers seen campaigning: the elected ones (ingress and node agents are not; the CLI is not a controller). */
  private elected = new Set<string>();
  /** Per controller/audit nonce (one writer process): the leader identity its first checked write landed under. */
  private writers = new Map<string, { identity: string; revision: number }>();
  readonly coverage: ActCoverage = { placements: 0, removals: 0, writes: 0, byType: {}, unverifiable: 0 };
  /** Desired keys alive at the last sample (by key@createRevision): a key gone at the next one was deleted in between. */
  private alive = new Map<string, { key: string; createRevision: number; replica: string; seenAt: number }>();

  constructor(private readonly readTimeoutMs = 5000) {}

  /**
   * The store was restored from a snapshot: a desired key alive at the last sample and absent now
   * was rolled back, not deleted by anyone (the new store's history has no such deletion, and its
   * revisions after the snapshot's are not the old store's), so the removals start afresh.
   */
  storeReplaced(): void {
    this.alive.clear();
  }

  async check(store: Store, s: Snapshot): Promise<Violation[]> {
    const out: Violation[] = [];
    for (const l of s.leaders) this.elected.add(l.key.split('/')[1]!);
    const at = new Map<number, Promise<AuditAt[]>>();
    const auditsOf = (rev: number) => at.get(rev) ?? (at.set(rev, withTimeout(auditsAt(store, rev), this.readTimeoutMs, 'audit read')), at.get(rev)!);
    const found: AuditAt[] = [];
    for (const d of s.desired) {
      const k = s.desiredKeys.find((x) => x.key === keys.desired(d.spec.node, d.spec.replica));
      if (!k) continue;
      const id = `${k.key}@${k.createRevision}`;
      if (this.placements.has(id)) continue;
      const audits = await this.attempt(() => auditsOf(k.createRevision));
      if (audits === 'retry') return out; // etcd not answering: the rest waits for the next sample
      this.placements.add(id);
      if (audits === 'compacted') continue;
      this.coverage.placements++;
      const bad = unauditedPlacement({ ...k, replica: d.spec.replica, node: d.spec.node }, audits);
      if (bad) out.push({ at: s.at, invariant: 'every act has its audit record', detail: bad });
      found.push(...audits.filter((a) => a.createRevision === k.createRevision));
    }
    // Removals: desired keys alive at the last sample and gone (or re-created) now.
    const now = new Map<string, { key: string; createRevision: number; replica: string; seenAt: number }>();
    for (const d of s.desired) {
      const k = s.desiredKeys.find((x) => x.key === keys.desired(d.spec.node, d.spec.replica));
      if (k) now.set(`${k.key}@${k.createRevision}`, { ...k, replica: d.spec.replica, seenAt: s.revision });
    }
    for (const [id, a] of this.alive) {
      if (now.has(id)) continue;
      const del = await this.attempt(() => withTimeout(deletionOf(store, a.key, a.createRevision, a.seenAt, s.revision), this.readTimeoutMs * 4, 'deletion read'));
      if (del === 'retry') return out; // the rest (and this one: still in alive) at the next sample
      this.alive.delete(id);
      if (del === 'compacted' || del === undefined) continue;
      const audits = await this.attempt(() => auditsOf(del.deletedAt));
      if (audits === 'retry') return out;
      if (audits === 'compacted') continue;
      this.coverage.removals++;
      const cutover = !!(del.value as ReplicaDesired | undefined)?.spec?.movingTo;
      const bad = unauditedRemoval({ ...a, deletedAt: del.deletedAt, cutover }, audits);
      if (bad) out.push({ at: s.at, invariant: 'every act has its audit record', detail: bad });
      found.push(...audits.filter((x) => x.createRevision === del.deletedAt));
    }
    for (const [id, a] of now) this.alive.set(id, a);
    for (const a of [...s.audits, ...found]) {
      if (this.writes.has(a.key) || !this.elected.has(a.actor)) continue;
      const leaders = await this.attempt(() => withTimeout(leadersAt(store, a.actor, a.createRevision), this.readTimeoutMs, 'leaders read'));
      if (leaders === 'retry') return out;
      this.writes.add(a.key);
      if (leaders === 'compacted') continue;
      this.coverage.writes++;
      this.coverage.byType[a.type] = (this.coverage.byType[a.type] ?? 0) + 1;
      const w = { what: `${a.type} (${a.key})`, revision: a.createRevision, controller: a.actor };
      const writer = writerOf(a.key);
      const leader = leaderOf(leaders);
      const bad = deposedLeaderWrite(w, leaders) ?? (writer && leader ? writeUnderAnotherLeader({ ...w, writer }, leader, this.writers) : undefined);
      if (bad) out.push({ at: s.at, invariant: 'no write from a deposed leader lands', detail: bad });
    }
    return out;
  }

  private async attempt<T>(read: () => Promise<T>): Promise<T | 'retry' | 'compacted'> {
    try {
      return await read();
    } catch (e) {
      if (/compacted/i.test((e as Error).message)) {
        this.coverage.unverifiable++;
        return 'compacted';
      }
      return 'retry';
    }
  }
}
