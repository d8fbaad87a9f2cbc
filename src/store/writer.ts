// Transactional writes. A plan is a list of acts; an act is a group of ops that must land together
// (a placement and its audit record, a move and its marker). The compare-and-swap rules are stated
// once, as data (`conditionsOf`), and evaluated by etcd here or by an in-memory key space in tests
// and the simulation (`conditionsHold`), so both follow the same rules.
//
// Controllers commit with `commitEach`: acts are packed into transactions of at most MAX_TXN_OPS
// compares, as many writes and MAX_REQUEST_BYTES, never split, each all-or-nothing and fenced by
// the leader's election key; a transaction that fails a precondition is retried act by act, so one act that
// cannot land never holds back the others; transactions that share no key go concurrently. The
// CLI commits with `commitAtomic`: all or nothing.
import { CompareResult, CompareTarget, type ICompare, type IRequestOp } from 'etcd3';
import { ConflictError, FencedError, TooLargeError } from './errors.js';
import { encodeJson, MAX_REQUEST_BYTES, MAX_TXN_OPS, prefixEnd, type Store } from './store.js';

export type Op =
  /** Create: the key must not exist. */
  | { op: 'create'; key: string; value: unknown; lease?: string }
  /** Update: the key must still be at modRevision. */
  | { op: 'update'; key: string; value: unknown; modRevision: number; lease?: string }
  /** Delete: when modRevision is given the key must still be at it; otherwise delete if present. */
  | { op: 'delete'; key: string; modRevision?: number }
  /** Precondition only: the key is at modRevision (0: absent). Guards a read that decided the act. */
  | { op: 'check'; key: string; modRevision: number }
  /** Precondition only: the key has been written `version` times (0: absent). Chains acts of one pass on one key. */
  | { op: 'check'; key: string; version: number }
  /**
   * Precondition only: no key under the prefix `key` was created or changed after revision
   * `unchangedSince` (deletes are not seen). Guards a decision made from a whole prefix.
   */
  | { op: 'checkRange'; key: string; unchangedSince: number }
  /** Unconditional put: only for keys the writer alone owns (its heartbeat, its observed state). */
  | { op: 'put'; key: string; value: unknown; lease?: string };

/**
 * The `k`-th write (from 0) of one key within one pass: the first compares the key as the pass
 * read it (its mod revision, or absence), each next one checks the version the write before it
 * leaves and puts. Acts chained so land in plan order (Committer) and a link that fails breaks
 * every later one: a pass never writes back a value older than one it wrote.
 */
export function chainedWrite(key: string, read: { modRevision: number; version: number } | undefined, k: number, value: unknown): Op[] {
  if (k === 0) return [read ? { op: 'update', key, value, modRevision: read.modRevision } : { op: 'create', key, value }];
  return [
    { op: 'check', key, version: (read?.version ?? 0) + k },
    { op: 'put', key, value },
  ];
}

/**
 * Ops that land together or not at all: what the writer packs into transactions and commits. A
 * controller's Act (src/runtime/acts.ts) is one, with its audit records and metrics beside it.
 */
export interface OpGroup {
  ops: Op[];
  /** What the act is, for logs and conflict messages. */
  label?: string;
}

/** A writer's fence: a key only it holds (a leader's election key, an agent's claim) and that key's create revision. */
export interface Fence {
  controller: string;
  /** Relative to the store prefix. */
  key: string;
  createRevision: number;
}

/**
 * One precondition of a transaction: the key's create revision, mod revision or version equals
 * `revision` (0: absent) — or, for a range (every key under `key`), is below it.
 */
export interface Condition {
  key: string;
  target: 'create' | 'mod' | 'version';
  revision: number;
  range?: true;
}

/** The preconditions of a set of ops (and of the fence), in order. The one statement of jaco's CAS rules. */
export function conditionsOf(ops: readonly Op[], fence?: Fence): Condition[] {
  const out: Condition[] = [];
  if (fence) out.push({ key: fence.key, target: 'create', revision: fence.createRevision });
  for (const o of ops) {
    if (o.op === 'create') out.push({ key: o.key, target: 'create', revision: 0 });
    else if (o.op === 'checkRange') out.push({ key: o.key, target: 'mod', revision: o.unchangedSince + 1, range: true });
    else if (o.op === 'check' && 'version' in o) out.push({ key: o.key, target: 'version', revision: o.version });
    else if (o.op === 'update' || o.op === 'check') out.push({ key: o.key, target: 'mod', revision: o.modRevision });
    else if (o.op === 'delete' && o.modRevision !== undefined) out.push({ key: o.key, target: 'mod', revision: o.modRevision });
  }
  return out;
}

interface KeyRevisions {
  createRevision: number;
  modRevision: number;
  version: number;
}

/** A key space conditions are evaluated against (etcd's, or an in-memory one). */
export interface KeySpace {
  get(key: string): KeyRevisions | undefined;
  /** Every key under a prefix. */
  under(prefix: string): Iterable<KeyRevisions>;
}

/** Whether every condition holds against a key space (an absent key has revisions 0). */
export function conditionsHold(conds: readonly Condition[], space: KeySpace): boolean {
  const at = (c: Condition, cur: KeyRevisions | undefined) => (c.target === 'create' ? cur?.createRevision : c.target === 'mod' ? cur?.modRevision : cur?.version) ?? 0;
  return conds.every((c) => (c.range ? [...space.under(c.key)].every((cur) => at(c, cur) < c.revision) : at(c, space.get(c.key)) === c.revision));
}

const COMPARE_TARGET = { create: CompareTarget.Create, mod: CompareTarget.Mod, version: CompareTarget.Version } as const;
const COMPARE_FIELD = { create: 'create_revision', mod: 'mod_revision', version: 'version' } as const;
const TARGET_OF: Record<number, Condition['target']> = { [CompareTarget.Create]: 'create', [CompareTarget.Mod]: 'mod', [CompareTarget.Version]: 'version' };

/** A condition as the etcd compare that states it (`prefix`: the store's key prefix). */
export function compareOf(c: Condition, prefix = ''): ICompare {
  return {
    key: Buffer.from(prefix + c.key),
    ...(c.range ? { range_end: Buffer.from(prefixEnd(prefix + c.key), 'latin1') } : {}),
    target: COMPARE_TARGET[c.target],
    result: c.range ? CompareResult.Less : CompareResult.Equal,
    [COMPARE_FIELD[c.target]]: c.revision,
  };
}

/** The condition an etcd compare made by compareOf states (for an in-memory etcd to evaluate with conditionsHold). */
export function conditionOfCompare(c: ICompare, prefix = ''): Condition {
  const target = TARGET_OF[c.target as number];
  const range = !!c.range_end;
  if (!target || (c.result ?? CompareResult.Equal) !== (range ? CompareResult.Less : CompareResult.Equal)) throw new Error(`a compare compareOf does not make: ${JSON.stringify(c)}`);
  const revision = Number((c as Record<string, unknown>)[COMPARE_FIELD[target]] ?? 0);
  return { key: String(c.key ?? '').slice(prefix.length), target, revision, ...(range ? { range: true as const } : {}) };
}

const TXN_OVERHEAD_BYTES = 64;

/**
 * An op's value as it goes over the wire, encoded once: sizing (unfit, packActs) and sending used
 * to encode every value three times — 8 % of the controller's CPU while placing 10,000 replicas.
 */
const encoded = new WeakMap<object, Buffer>();
function valueBytes(o: Extract<Op, { value: unknown }>): Buffer {
  let b = encoded.get(o);
  if (!b) encoded.set(o, (b = Buffer.from(encodeJson(o.value))));
  return b;
}

function opSize(o: Op): number {
  const v = 'value' in o ? valueBytes(o).length : 0;
  return Buffer.byteLength(o.key) * 2 + v + TXN_OVERHEAD_BYTES;
}

/** The bytes an act takes in a request (an estimate on the safe side). */
export function actBytes(ops: readonly Op[]): number {
  return ops.reduce((s, o) => s + opSize(o), 0);
}

/**
 * What one transaction of these ops asks of etcd: its compares (the fence's included) and its
 * writes. etcd's --max-txn-ops bounds each list on its own (compares, success ops, failure ops:
 * checked on a real etcd, 128 of each pass and 129 of either is refused), so an act that both
 * checks and writes many keys fits where a count of all its ops together would split it.
 */
export function txnCounts(ops: readonly Op[], fenced: boolean): { compares: number; writes: number } {
  let compares = fenced ? 1 : 0;
  let writes = 0;
  for (const o of ops) {
    if (o.op !== 'check' && o.op !== 'checkRange') writes++;
    if (o.op === 'create' || o.op === 'update' || o.op === 'check' || o.op === 'checkRange' || (o.op === 'delete' && o.modRevision !== undefined)) compares++;
  }
  return { compares, writes };
}

const isWrite = (o: Op): o is Extract<Op, { op: 'create' | 'update' | 'delete' | 'put' }> => o.op !== 'check' && o.op !== 'checkRange';
const writtenKeys = (ops: readonly Op[]) => ops.filter(isWrite).map((o) => o.key);

/** Why an act can never land as one transaction, or undefined when it can. */
export function unfit(ops: readonly Op[], fenced: boolean): { reason: 'too_many_ops' | 'too_large' | 'duplicate_key'; detail: string } | undefined {
  // etcd refuses a transaction that writes one key twice ("duplicate key given in txn request"),
  // whatever its compares: found here, the same in etcd, the memory store and the simulation.
  const seen = new Set<string>();
  for (const k of writtenKeys(ops)) {
    if (seen.has(k)) return { reason: 'duplicate_key', detail: `${k} is written twice` };
    seen.add(k);
  }
  const { compares, writes } = txnCounts(ops, fenced);
  if (compares > MAX_TXN_OPS || writes > MAX_TXN_OPS)
    return { reason: 'too_many_ops', detail: `${writes} writes and ${compares} compares; one transaction holds at most ${MAX_TXN_OPS} of each` };
  const bytes = actBytes(ops);
  if (bytes > MAX_REQUEST_BYTES) return { reason: 'too_large', detail: new TooLargeError('the act', bytes, MAX_REQUEST_BYTES).message };
  return undefined;
}

/**
 * Packs acts into transactions of ≤ maxOps compares and ≤ maxOps writes (txnCounts), never
 * splitting an act, and never putting into one transaction two acts that write one key (etcd
 * refuses a duplicate key) or an act that compares a key an earlier act of it writes (a
 * transaction evaluates every compare before any write, and the later act's precondition is meant
 * for the earlier one's result). Acts come one at a time (a commit may be fed while its pass still
 * decides: Committer); `add` hands back the transaction an act closed, `close` the open one.
 */
export class Packer<A extends OpGroup> {
  private readonly base: number;
  private cur: A[] = [];
  private compares = 0;
  private writes = 0;
  private bytes = 0;
  private written = new Set<string>();

  constructor(
    private readonly maxOps = MAX_TXN_OPS,
    fenced = false,
    private readonly maxBytes = MAX_REQUEST_BYTES,
  ) {
    this.base = fenced ? 1 : 0; // the fence takes one compare of every transaction
    this.compares = this.base;
  }

  /** Adds an act; returns the transaction it closed, if it did not fit the open one. */
  add(act: A): A[] | undefined {
    const size = txnCounts(act.ops, false);
    const b = actBytes(act.ops);
    if (this.base + size.compares > this.maxOps || size.writes > this.maxOps)
      throw new Error(`act ${act.label ?? ''} has ${size.writes} writes and ${size.compares} compares; a transaction holds at most ${this.maxOps} of each`);
    if (b > this.maxBytes) throw new TooLargeError(`act ${act.label ?? ''}`, b, this.maxBytes);
    const follows = act.ops.some((o) => (o.op === 'checkRange' ? [...this.written].some((w) => w.startsWith(o.key)) : this.written.has(o.key)));
    const full = this.compares + size.compares > this.maxOps || this.writes + size.writes > this.maxOps || this.bytes + b > this.maxBytes;
    const closed = this.cur.length && (full || follows) ? this.close() : undefined;
    this.cur.push(act);
    this.compares += size.compares;
    this.writes += size.writes;
    this.bytes += b;
    for (const k of writtenKeys(act.ops)) this.written.add(k);
    return closed;
  }

  /** Closes the open transaction (undefined when it is empty). */
  close(): A[] | undefined {
    if (!this.cur.length) return undefined;
    const txn = this.cur;
    this.cur = [];
    this.compares = this.base;
    this.writes = 0;
    this.bytes = 0;
    this.written = new Set();
    return txn;
  }
}

/** Every act packed into transactions at once (Packer). */
export function packActs<A extends OpGroup>(acts: A[], maxOps = MAX_TXN_OPS, fenced = false, maxBytes = MAX_REQUEST_BYTES): A[][] {
  const packer = new Packer<A>(maxOps, fenced, maxBytes);
  const txns: A[][] = [];
  for (const a of acts) {
    const t = packer.add(a);
    if (t) txns.push(t);
  }
  const last = packer.close();
  if (last) txns.push(last);
  return txns;
}

/** Commits ops in one transaction: the revision it landed at, or 0 when a precondition failed; FencedError when the fence did. */
async function commitTxn(store: Store, ops: Op[], fence?: Fence): Promise<number> {
  const key = (k: string) => Buffer.from(store.prefix + k);
  const compare = conditionsOf(ops, fence).map((c) => compareOf(c, store.prefix));
  const success: IRequestOp[] = ops.filter(isWrite).map((o) =>
    o.op === 'delete' ? { request_delete_range: { key: key(o.key) } } : { request_put: { key: key(o.key), value: valueBytes(o), ...(o.lease ? { lease: o.lease } : {}) } },
  );
  const res = await store.client.kv.txn({ compare, success, failure: fence ? [{ request_range: { key: key(fence.key) } }] : [] });
  if (res.succeeded) return Number(res.header?.revision ?? 0) || 1;
  if (fence) {
    const kv = res.responses?.[0]?.response_range?.kvs?.[0];
    if (!kv || Number(kv.create_revision) !== fence.createRevision) throw new FencedError(fence.controller);
  }
  return 0;
}

export interface CommitResult<A extends OpGroup = OpGroup> {
  /** Acts that landed. */
  committed: A[];
  /** The store revision each act that landed was written at (its transaction's). */
  landedAt: Map<A, number>;
  /** Acts whose preconditions failed (re-read and decide again). */
  conflicted: A[];
  /** Acts refused before sending: they can never fit one transaction. */
  refused: { act: A; reason: 'too_many_ops' | 'too_large' | 'duplicate_key'; detail: string }[];
  transactions: number;
}

/** Transactions of one commit in flight at once: etcd batches concurrent proposals into one raft round. */
export const MAX_IN_FLIGHT = 16;

/**
 * For each transaction (a group of acts, in plan order), the earlier ones it must wait for: those
 * that write a key it compares or writes, and those that compare a key it writes (an act's
 * compare is meant for the state the acts planned before it leave, or find). Transactions that
 * share no key are independent and may land in any order. Fed one transaction at a time, as a
 * commit is (Committer).
 */
export class Dependencies {
  private readonly lastWrite = new Map<string, number>();
  private readonly readSince = new Map<string, number[]>();
  private readonly ranges: { prefix: string; group: number }[] = [];
  private readonly written: { key: string; group: number }[] = [];
  private count = 0;

  /** The earlier transactions the next one waits for, ascending. */
  next(group: readonly OpGroup[]): number[] {
    const i = this.count++;
    const deps = new Set<number>();
    for (const a of group)
      for (const o of a.ops) {
        if (o.op === 'checkRange') {
          for (const w of this.written) if (w.key.startsWith(o.key)) deps.add(w.group);
          this.ranges.push({ prefix: o.key, group: i });
          continue;
        }
        const w = this.lastWrite.get(o.key);
        if (w !== undefined) deps.add(w);
        if (!isWrite(o)) {
          const r = this.readSince.get(o.key);
          if (r) r.push(i);
          else this.readSince.set(o.key, [i]);
          continue;
        }
        for (const r of this.readSince.get(o.key) ?? []) deps.add(r);
        for (const r of this.ranges) if (o.key.startsWith(r.prefix)) deps.add(r.group);
        this.readSince.delete(o.key);
        this.lastWrite.set(o.key, i);
        this.written.push({ key: o.key, group: i });
      }
    deps.delete(i);
    return [...deps].sort((a, b) => a - b);
  }
}

/** The dependencies of every transaction of a commit at once. */
export function dependencies(groups: readonly (readonly OpGroup[])[]): number[][] {
  const d = new Dependencies();
  return groups.map((g) => d.next(g));
}

/** One transaction of acts; if a precondition fails, each act alone, in order (etcd does not say which one failed). */
async function commitGroup<A extends OpGroup>(store: Store, group: A[], fence: Fence | undefined, out: CommitResult<A>): Promise<void> {
  const landed = (a: A, revision: number) => {
    out.committed.push(a);
    out.landedAt.set(a, revision);
  };
  out.transactions++;
  const revision = await commitTxn(store, group.flatMap((a) => a.ops), fence);
  if (revision) {
    for (const a of group) landed(a, revision);
    return;
  }
  if (group.length === 1) {
    out.conflicted.push(group[0]!);
    return;
  }
  // An act may follow one it chains on: in order, so the others still land.
  for (const a of group) {
    out.transactions++;
    const r = await commitTxn(store, a.ops, fence);
    if (r) landed(a, r);
    else out.conflicted.push(a);
  }
}

const emptyResult = <A extends OpGroup>(): CommitResult<A> => ({ committed: [], landedAt: new Map(), conflicted: [], refused: [], transactions: 0 });

/**
 * Commits acts in as few transactions as the limits allow, each act landing or failing on its own:
 * a batch that fails a precondition is retried act by act. An act that can never fit is refused
 * up front. Transactions that share no key go concurrently (up to MAX_IN_FLIGHT); one that
 * shares a key with an earlier one is sent once that one has its answer, so a chain of acts on a
 * key lands in plan order and breaks where one fails. A failed fence throws FencedError; any
 * other error (etcd away, a lost response) throws too, once every transaction already sent has
 * its answer, and no further one is sent — the caller decides again from what its cache shows.
 *
 * A commit can be fed while its pass still decides (a controller deciding in steps, runner.ts):
 * `add` sends every transaction its acts fill, `flush` the partly filled one too, and `finish`
 * sends the rest and gives the result, in the order the acts were added. Fed at once, it packs
 * exactly as a whole plan would.
 */
export class Committer<A extends OpGroup> {
  private readonly packer: Packer<A>;
  private readonly deps = new Dependencies();
  private readonly refused: CommitResult<A>['refused'] = [];
  /** Per transaction sent: its outcome, and when it has its answer. */
  private readonly outs: CommitResult<A>[] = [];
  private readonly done: Promise<void>[] = [];
  private failed: unknown;
  private inFlight = 0;
  private readonly queue: (() => void)[] = [];

  constructor(
    private readonly store: Store,
    private readonly fence?: Fence,
  ) {
    this.packer = new Packer<A>(MAX_TXN_OPS, !!fence);
  }

  /** Whether a transaction failed with an error (nothing more is sent). */
  get broken(): boolean {
    return this.failed !== undefined;
  }

  /** Takes acts in plan order; sends each transaction they fill. */
  add(acts: readonly A[]): void {
    for (const act of acts) {
      const why = unfit(act.ops, !!this.fence);
      if (why) this.refused.push({ act, ...why });
      else {
        const txn = this.packer.add(act);
        if (txn) this.send(txn);
      }
    }
  }

  /** Sends the partly filled transaction too (the pass goes on deciding: what it has should not wait). */
  flush(): void {
    const txn = this.packer.close();
    if (txn) this.send(txn);
  }

  /** Sends what is left and waits for every answer; throws the first error (after every answer). */
  async finish(): Promise<CommitResult<A>> {
    this.flush();
    await Promise.all(this.done);
    if (this.failed !== undefined) throw this.failed;
    const result = emptyResult<A>();
    result.refused.push(...this.refused);
    for (const o of this.outs) {
      result.committed.push(...o.committed);
      for (const [a, r] of o.landedAt) result.landedAt.set(a, r);
      result.conflicted.push(...o.conflicted);
      result.transactions += o.transactions;
    }
    return result;
  }

  private send(txn: A[]): void {
    const i = this.outs.length;
    const out = emptyResult<A>();
    this.outs.push(out);
    const after = this.deps.next(txn).map((d) => this.done[d]);
    this.done[i] = Promise.all(after)
      .then(() => this.slot(after.length > 0))
      .then(async () => {
        try {
          if (this.failed === undefined) await commitGroup(this.store, txn, this.fence, out);
        } catch (e) {
          this.failed ??= e;
        } finally {
          this.release();
        }
      });
  }

  /**
   * A place among the transactions in flight. One that waited for others (the next link of a
   * chain) goes ahead of those that did not: a chain's links follow each other at etcd's pace,
   * not each behind everything queued since the link before — a service's placements finish in
   * a few round trips instead of trailing the whole pass.
   */
  private slot(follows: boolean): Promise<void> {
    if (this.inFlight < MAX_IN_FLIGHT) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise<void>((r) => (follows ? this.queue.unshift(r) : this.queue.push(r)));
  }

  private release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.inFlight--;
  }
}

/** Commits a whole plan's acts (Committer, fed at once). */
export function commitEach<A extends OpGroup>(store: Store, acts: A[], fence?: Fence): Promise<CommitResult<A>> {
  const c = new Committer<A>(store, fence);
  c.add(acts);
  return c.finish();
}

/** commitEach for writers that want only what landed and what conflicted (refusals throw). */
export async function commitActs<A extends OpGroup>(store: Store, acts: A[], fence?: Fence): Promise<CommitResult<A>> {
  const r = await commitEach(store, acts, fence);
  const refused = r.refused[0];
  if (refused) {
    if (refused.reason === 'too_large') throw new TooLargeError(`act ${refused.act.label ?? ''}`, actBytes(refused.act.ops), MAX_REQUEST_BYTES);
    throw new Error(`act ${refused.act.label ?? ''}: ${refused.detail}`);
  }
  return r;
}

export interface AtomicOptions {
  /**
   * After a conflict or an error that leaves the outcome unknown (a lost response, or the client
   * retrying a commit that had landed), tells whether this very change is in the store: a write
   * that landed is reported as landed, not as "nothing was written".
   */
  landed?: () => Promise<boolean>;
}

/** Commits a set of acts atomically in one transaction (CLI apply): all or nothing. */
export async function commitAtomic(store: Store, acts: OpGroup[], opts: AtomicOptions = {}): Promise<void> {
  const ops = acts.flatMap((a) => a.ops);
  const { compares, writes } = txnCounts(ops, false);
  if (compares > MAX_TXN_OPS || writes > MAX_TXN_OPS)
    throw new Error(`this change needs ${writes} writes and ${compares} compares; one etcd transaction holds at most ${MAX_TXN_OPS} of each (--max-txn-ops): split it`);
  const bytes = actBytes(ops);
  if (bytes > MAX_REQUEST_BYTES) throw new TooLargeError('this change', bytes, MAX_REQUEST_BYTES);
  let ok: boolean;
  try {
    ok = (await commitTxn(store, ops)) > 0;
  } catch (e) {
    if (opts.landed && (await opts.landed().catch(() => false))) return;
    throw e;
  }
  if (ok || (opts.landed && (await opts.landed()))) return;
  throw new ConflictError('the store changed while this change was prepared; nothing was written, try again', ops.filter(isWrite).map((o) => o.key));
}
