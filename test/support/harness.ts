// A controller on an in-memory store: the controller's own snapshot function reads the runtime's
// cache fed by a MemoryStore, its decide plans, and the plan's acts are applied one by one with the
// writer's compare-and-swap rules, as the runtime would commit them (audit records kept when their
// act lands; the leader-local state follows what landed). Table tests of every pure core use it,
// and so does the simulation; it stands in for nothing real.
import { Cache } from '../../src/runtime/cache.js';
import type { Act } from '../../src/runtime/acts.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import { AUDIT_OP_COUNTS, type AuditRecord } from '../../src/store/audit.js';
import { MAX_TXN_OPS } from '../../src/store/store.js';
import { txnCounts, type Fence } from '../../src/store/writer.js';
import { MemoryStore } from './memory-store.js';

export class Harness<S, Snap, M = unknown, R extends PassResult<S, M> = PassResult<S, M>> {
  readonly cache: Cache;
  state: S;
  readonly audit: AuditRecord[] = [];
  readonly metrics: M[] = [];
  /** Labels of the acts that did not land, per pass. */
  conflicted: string[] = [];

  constructor(
    readonly store: MemoryStore,
    readonly spec: ControllerSpec<S, Snap, M, R>,
  ) {
    this.cache = new Cache(store);
    this.state = spec.initialState();
  }

  snapshot(now: number): Snap {
    return this.spec.snapshot({ cache: this.cache, failing: [] }, this.state, now);
  }

  /** Decides without applying anything. */
  decide(now: number): R {
    return this.spec.decide(this.state, this.snapshot(now), now);
  }

  /** Applies acts in order, each all-or-nothing; returns the labels that landed. */
  apply(acts: readonly Act<M>[], fence?: Fence): Set<string> {
    const landed = new Set<string>();
    this.conflicted = [];
    for (const act of acts) {
      assertFits(act);
      if (!this.store.applyAct(act.ops, fence)) {
        this.conflicted.push(act.label);
        continue;
      }
      landed.add(act.label);
      this.audit.push(...(act.audit ?? []));
      this.metrics.push(...(act.metrics ?? []));
    }
    return landed;
  }

  /** One pass: decide, apply, move the state on. */
  pass(now: number): R {
    const r = this.decide(now);
    const landed = this.apply(r.acts);
    if (r.next) this.state = r.next(landed);
    return r;
  }
}

/**
 * An act etcd would refuse fails the test here, loudly: the runtime commits every act in a fenced
 * transaction with its audit records (creates), and etcd takes at most MAX_TXN_OPS compares and as
 * many writes (writer.txnCounts). Table tests apply acts without etcd, so without this an act sized
 * by a wrong count would pass them and never land in production.
 */
function assertFits(act: Act<unknown>): void {
  const c = txnCounts(act.ops, true);
  const n = act.audit?.length ?? 0;
  const compares = c.compares + n * AUDIT_OP_COUNTS.compares;
  const writes = c.writes + n * AUDIT_OP_COUNTS.writes;
  if (compares > MAX_TXN_OPS || writes > MAX_TXN_OPS) throw new Error(`act ${act.label} has ${writes} writes and ${compares} compares with its fence and audit records: etcd refuses more than ${MAX_TXN_OPS} of either`);
}
