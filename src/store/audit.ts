// The audit log: audit/<sortable id> records written in the same transaction as the act they
// record. Records are bound to a lease granted per time bucket and never renewed, so they expire
// after the retention period without a cleaner process. A bucket's lease can still vanish early
// (revoked by an operator, lost with a restore from a snapshot): whoever sees a commit fail with
// isLeaseNotFound reports it with leaseLost(), and the next records go on a fresh lease.
import { randomBytes } from 'node:crypto';
import { API_VERSION, type AuditEvent } from '../api/types.js';
import type { AuditType } from '../api/reasons/audit.js';
import { keys } from '../api/keys.js';
import { txnCounts, type Op } from './writer.js';
import { silentLogger } from '../observability/log.js';
import { readListed, type Unreadable } from './reflector.js';
import type { Store, Versioned } from './store.js';

/** An audit event as decide code produces it: data, with its time from the injected clock. */
export interface AuditRecord {
  type: AuditType;
  time: number;
  deployment?: string;
  payload: Record<string, unknown>;
}

export class AuditLog {
  private seq = 0;
  private readonly nonce = randomBytes(2).toString('hex');
  private bucket?: { lease: string; until: number };
  /** The grant in flight: records asked for together, or while it runs, share its lease. */
  private granting?: Promise<string>;
  /** Leases reported lost: never handed out again (a bounded memory of the latest). */
  private readonly gone: string[] = [];

  constructor(private readonly store: Store, readonly actor: string, private readonly retentionMs: number) {}

  /** Sortable by time: <epoch ms, 15 digits>-<process nonce>-<sequence>. */
  nextId(time: number): string {
    return `${String(Math.floor(time)).padStart(15, '0')}-${this.nonce}-${String(this.seq++).padStart(8, '0')}`;
  }

  private lease(): Promise<string> {
    const now = Date.now();
    const b = this.bucket;
    if (b && now < b.until && !this.gone.includes(b.lease)) return Promise.resolve(b.lease);
    this.granting ??= this.grant(now).finally(() => (this.granting = undefined));
    return this.granting;
  }

  private async grant(now: number): Promise<string> {
    // One lease per quarter of the retention period; each lives a full retention past its bucket.
    const bucketMs = Math.max(60_000, this.retentionMs / 4);
    const lease = await this.store.grantLease(Math.ceil((this.retentionMs + bucketMs) / 1000));
    this.bucket = { lease, until: now + bucketMs };
    return lease;
  }

  /**
   * A commit carrying records failed because etcd no longer has a lease (isLeaseNotFound): the
   * given one, or, when the caller cannot tell which, the cached one. The cached lease is dropped
   * if it is that lease, and is never handed out again. Returns whether it was dropped.
   */
  leaseLost(leaseId?: string): boolean {
    const id = leaseId ?? this.bucket?.lease;
    if (id === undefined) return false;
    if (!this.gone.includes(id)) this.gone.push(id);
    if (this.gone.length > 16) this.gone.shift();
    if (this.bucket?.lease !== id) return false;
    this.bucket = undefined;
    return true;
  }

  event(r: AuditRecord): AuditEvent {
    const id = this.nextId(r.time);
    return {
      apiVersion: API_VERSION,
      kind: 'AuditEvent',
      metadata: { name: id },
      spec: { type: r.type, time: new Date(r.time).toISOString(), actor: this.actor, ...(r.deployment ? { deployment: r.deployment } : {}), payload: r.payload },
    };
  }

  /** The op that writes a record; put it in the same act as what it records. */
  async op(r: AuditRecord): Promise<Op> {
    const ev = this.event(r);
    return recordOp(keys.audit(ev.metadata.name), ev, await this.lease());
  }

  async ops(records: AuditRecord[]): Promise<Op[]> {
    return Promise.all(records.map((r) => this.op(r)));
  }
}

export interface AuditQuery {
  types?: string[];
  deployment?: string;
  /** Only the newest n. */
  limit?: number;
}

export function auditMatches(ev: AuditEvent, q: AuditQuery): boolean {
  return (!q.types?.length || q.types.includes(ev.spec.type)) && (!q.deployment || ev.spec.deployment === q.deployment);
}

/**
 * Audit records in time order, filtered, and the revision they were read at (`at`: that of a cut
 * the caller read already). A record that cannot be read (not JSON, not an AuditEvent) is left out
 * and listed in `unreadable`, never thrown.
 */
export async function readAudit(store: Store, q: AuditQuery, at?: number): Promise<{ events: Versioned<AuditEvent>[]; revision: number; unreadable: Unreadable[] }> {
  const { kvs, revision } = await store.listRaw(keys.audits(), at);
  const src = readListed<AuditEvent>('audit', { prefix: keys.audits(), kind: 'AuditEvent' }, kvs, store.prefix.length, silentLogger());
  const events = [...src.items.values()].filter((i) => auditMatches(i.value, q));
  return { events: q.limit ? events.slice(-q.limit) : events, revision, unreadable: [...src.unreadable.values()] };
}

/** A record's op: a create, so a record id is never written twice. */
function recordOp(key: string, value: AuditEvent, lease?: string): Op {
  return { op: 'create', key, value, ...(lease ? { lease } : {}) };
}

/** What one audit record adds to its act's transaction (for acts sized to fill one: writer.txnCounts). */
export const AUDIT_OP_COUNTS = txnCounts([recordOp('', {} as AuditEvent)], false);
