// Transactional writes. A plan is a list of acts; an act is a group of ops that must land together
// (a placement and its audit record, a move and its marker). Acts are packed into transactions of
// at most MAX_TXN_OPS operations, never split across two, each all-or-nothing, each with its
// compare-and-swap preconditions and, for controllers, the fence on the leader's election key.
import type { Namespace } from 'etcd3';
import { ConflictError, FencedError, TooLargeError } from './errors.js';
import { encodeJson, MAX_REQUEST_BYTES, MAX_TXN_OPS, type Store } from './store.js';

export type Op =
  /** Create: the key must not exist. */
  | { op: 'create'; key: string; value: unknown; lease?: string }
  /** Update: the key must still be at modRevision. */
  | { op: 'update'; key: string; value: unknown; modRevision: number; lease?: string }
  /** Delete: when modRevision is given the key must still be at it; otherwise delete if present. */
  | { op: 'delete'; key: string; modRevision?: number }
  /** Precondition only: the key is at modRevision (0: absent). Guards a read that decided the act. */
  | { op: 'check'; key: string; modRevision: number }
  /** Unconditional put: only for keys the writer alone owns (its heartbeat, its observed state). */
  | { op: 'put'; key: string; value: unknown; lease?: string };

export interface Act {
  ops: Op[];
  /** What the act is, for logs and conflict messages. */
  label?: string;
}

/** A leader's fence: its election key and that key's create revision. */
export interface Fence {
  controller: string;
  /** Election key, relative to the store prefix. */
  key: string;
  createRevision: number;
}

export interface CommitResult {
  /** Acts that landed. */
  committed: Act[];
  /** Acts whose transaction failed a precondition (re-read and decide again). */
  conflicted: Act[];
  transactions: number;
}

const TXN_OVERHEAD_BYTES = 64;

function opSize(o: Op): number {
  const v = 'value' in o ? Buffer.byteLength(encodeJson(o.value)) : 0;
  return Buffer.byteLength(o.key) * 2 + v + TXN_OVERHEAD_BYTES;
}

/** Packs acts into transactions of ≤ maxOps ops and compares, never splitting an act. */
export function packActs(acts: Act[], maxOps = MAX_TXN_OPS, fenced = false, maxBytes = MAX_REQUEST_BYTES): Act[][] {
  const budget = fenced ? maxOps - 1 : maxOps; // the fence takes one compare
  const txns: Act[][] = [];
  let cur: Act[] = [];
  let n = 0;
  let bytes = 0;
  for (const act of acts) {
    const size = act.ops.length;
    const actBytes = act.ops.reduce((s, o) => s + opSize(o), 0);
    if (size > budget) throw new Error(`act ${act.label ?? ''} has ${size} ops; a transaction holds at most ${budget}`);
    if (actBytes > maxBytes) throw new TooLargeError(`act ${act.label ?? ''}`, actBytes, maxBytes);
    if (n + size > budget || bytes + actBytes > maxBytes) {
      txns.push(cur);
      cur = [];
      n = 0;
      bytes = 0;
    }
    cur.push(act);
    n += size;
    bytes += actBytes;
  }
  if (cur.length) txns.push(cur);
  return txns;
}

async function commitTxn(ns: Namespace, acts: Act[], fence?: Fence): Promise<boolean> {
  const ops = acts.flatMap((a) => a.ops);
  type Cmp = [string, 'Create' | 'Mod', '==' | '>', string | number];
  const compares: Cmp[] = [];
  if (fence) compares.push([fence.key, 'Create', '==', fence.createRevision]);
  for (const o of ops) {
    if (o.op === 'create') compares.push([o.key, 'Create', '==', 0]);
    else if (o.op === 'update') compares.push([o.key, 'Mod', '==', o.modRevision]);
    else if (o.op === 'delete' && o.modRevision !== undefined) compares.push([o.key, 'Mod', '==', o.modRevision]);
    else if (o.op === 'check') compares.push([o.key, 'Mod', '==', o.modRevision]);
  }
  const writes = ops
    .filter((o) => o.op !== 'check')
    .map((o) => {
      if (o.op === 'delete') return ns.delete().key(o.key);
      const w = o as Extract<Op, { value: unknown }>;
      const put = ns.put(w.key).value(encodeJson(w.value));
      return w.lease ? put.lease(w.lease) : put;
    });
  // etcd3's builder needs one compare to start; when the acts have none, an always-true one on a
  // key they write anyway (an RBAC-restricted writer, such as an agent, may read nothing else).
  const [first, ...rest] = compares.length ? compares : ([[ops[0]!.key, 'Mod', '>', -1]] as Cmp[]);
  let txn = ns.if(first![0], first![1], first![2], first![3]);
  for (const c of rest) txn = txn.and(c[0], c[1], c[2], c[3]);
  if (fence) txn = txn.else(ns.get(fence.key));
  const res = await txn.then(...writes).commit();
  if (res.succeeded) return true;
  if (fence) {
    const kv = res.responses?.[0]?.response_range?.kvs?.[0];
    if (!kv || Number(kv.create_revision) !== fence.createRevision) throw new FencedError(fence.controller);
  }
  return false;
}

/**
 * Commits acts in as few transactions as the limits allow. A transaction that fails a
 * precondition is reported in `conflicted` (the others still land); a failed fence throws
 * FencedError at once and stops the rest.
 */
export async function commitActs(store: Store, acts: Act[], fence?: Fence): Promise<CommitResult> {
  const result: CommitResult = { committed: [], conflicted: [], transactions: 0 };
  for (const group of packActs(acts, MAX_TXN_OPS, !!fence)) {
    result.transactions++;
    const ok = await commitTxn(store.ns, group, fence);
    (ok ? result.committed : result.conflicted).push(...group);
  }
  return result;
}

/** Commits a set of acts atomically in one transaction (CLI apply): all or nothing. */
export async function commitAtomic(store: Store, acts: Act[]): Promise<void> {
  const ops = acts.flatMap((a) => a.ops);
  if (ops.length > MAX_TXN_OPS)
    throw new Error(`this change needs ${ops.length} writes; one etcd transaction holds at most ${MAX_TXN_OPS} (--max-txn-ops): split it`);
  const bytes = ops.reduce((s, o) => s + opSize(o), 0);
  if (bytes > MAX_REQUEST_BYTES) throw new TooLargeError('this change', bytes, MAX_REQUEST_BYTES);
  const ok = await commitTxn(store.ns, acts);
  if (!ok) throw new ConflictError('the store changed while this change was prepared; nothing was written, try again', ops.map((o) => o.key));
}
