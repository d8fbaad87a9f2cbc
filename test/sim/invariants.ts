// The invariants the simulation checks. Each is a named function that returns what is wrong, or
// undefined: state invariants over the simulated store after every step; transaction invariants
// over each transaction as it lands (before anyone reads it); act invariants over every act a
// controller plans, before its commit.
import { keys } from '../../src/api/keys.js';
import { drainActive, nodeReady } from '../../src/api/nodes.js';
import { isStateful, namedVolumes, placementMode } from '../../src/api/spec.js';
import type { AddressClaim, AuditEventSpec, ClusterKey, FileKind, Heartbeat, Node, NodeCopy, NodeDrain, ReplicaDesired, ReplicaObserved, RolloutPlan, Secret, VolumeHome } from '../../src/api/types.js';
import { filesUsed } from '../../src/api/files.js';
import { copyAad } from '../../src/secrets/seal.js';
import { simSealedOf } from './secrets.js';
import type { Act } from '../../src/runtime/acts.js';
import type { LandedTxn } from './etcd.js';
import type { Sim } from './world.js';
import { maxUnavailableOf } from '../../src/api/update.js';
import { allows, controllerRole } from '../../src/store/rbac.js';
import { unfit } from '../../src/store/writer.js';

export interface Invariant {
  name: string;
  check(sim: Sim): string | undefined;
}

export interface TxnInvariant {
  name: string;
  check(sim: Sim, txn: LandedTxn): string | undefined;
}

export interface ActInvariant {
  name: string;
  check(sim: Sim, controller: string, act: Act): string | undefined;
}

// ---------------------------------------------------------------- after every step

/**
 * No replica id has two desired copies outside a move's window: a second copy exists only as a
 * move's destination (spec.move) beside its source on move.from — never two sources, never three.
 */
export const oneCopyOutsideMoves: Invariant = {
  name: 'no replica with two copies outside a move',
  check(sim) {
    const byId = new Map<string, ReplicaDesired[]>();
    for (const d of sim.desired()) byId.set(d.spec.replica, [...(byId.get(d.spec.replica) ?? []), d]);
    for (const [id, copies] of byId) {
      if (copies.length === 1) continue;
      const dst = copies.filter((c) => c.spec.move);
      if (copies.length > 2 || dst.length !== 1 || copies.find((c) => !c.spec.move)!.spec.node !== dst[0]!.spec.move!.from)
        return `${id} has ${copies.length} copies: ${copies.map((c) => `${c.spec.node}${c.spec.move ? ` (move from ${c.spec.move.from})` : ''}`).join(', ')}`;
    }
    return undefined;
  },
};

/**
 * Voluntary disruption stays within the budget: a service never has more replicas moving at once
 * than its maxUnavailable (default 1). "Moving" is up to the cutover: from then on the replica is
 * available — its destination was ready at its spec when the cutover deleted the source's desired
 * key (out of endpoints; its container runs out its grace while the next move starts, issue 30).
 * A destination that fails after its cutover (even one the cutover's pass saw ready a moment
 * before) is a failure, not a disruption: the budget counts it as down for the next start
 * (controllers/disruption/budget.ts), this invariant does not.
 */
export const movesWithinBudget: Invariant = {
  name: 'moves within maxUnavailable',
  check(sim) {
    const moving = new Map<string, Set<string>>();
    for (const d of sim.desired()) {
      if (!d.spec.move || d.spec.move.cutoverAt) continue;
      const k = `${d.spec.deployment}/${d.spec.service}`;
      moving.set(k, (moving.get(k) ?? new Set()).add(d.spec.replica));
    }
    for (const [k, ids] of moving) {
      const copies = sim.desired().filter((d) => `${d.spec.deployment}/${d.spec.service}` === k);
      const max = maxUnavailableOf(copies[0]?.spec.template, new Set(copies.map((d) => d.spec.replica)).size);
      if (ids.size > max) return `${k} has ${ids.size} replicas moving at once (maxUnavailable ${max}): ${[...ids].join(', ')}`;
    }
    return undefined;
  },
};

/** Every desired replica is on one of the cluster's nodes (one that exists, or existed and may rejoin). */
export const noUnknownNodes: Invariant = {
  name: 'replicas only on known nodes',
  check(sim) {
    const bad = sim.desired().filter((d) => !sim.nodes.includes(d.spec.node));
    return bad.length ? `on unknown nodes: ${bad.map((d) => `${d.spec.replica}@${d.spec.node}`).join(', ')}` : undefined;
  },
};

/**
 * IPAM (seed 004 §4): every cluster-network copy has an address of its node, claimed for it by
 * addresses/<node>/<n> — written in the copy's own transaction, so at every step — and no two
 * copies on a node share one.
 */
export const addressesClaimed: Invariant = {
  name: 'every cluster-network copy holds a claimed address of its own',
  check(sim) {
    const seen = new Map<string, string>();
    for (const d of sim.desired()) {
      if (d.spec.template.network !== 'cluster') continue;
      const a = d.spec.address;
      if (!a) return `${d.spec.replica}@${d.spec.node} has no address`;
      const n = Number(a.ipv4.split('/')[0]!.split('.')[3]);
      const claim = sim.get<AddressClaim>(keys.address(d.spec.node, n));
      if (claim?.spec.replica !== d.spec.replica || claim.spec.ipv4 !== a.ipv4) return `${d.spec.replica}@${d.spec.node} holds ${a.ipv4}, claimed by ${claim ? `${claim.spec.replica} (${claim.spec.ipv4})` : 'nobody'}`;
      const k = `${d.spec.node}/${a.ipv4}`;
      if (seen.has(k)) return `${seen.get(k)} and ${d.spec.replica} both hold ${a.ipv4} on ${d.spec.node}`;
      seen.set(k, d.spec.replica);
    }
    return undefined;
  },
};

export const STATE_INVARIANTS: readonly Invariant[] = [oneCopyOutsideMoves, movesWithinBudget, noUnknownNodes, addressesClaimed];

// ---------------------------------------------------------------- as each transaction lands

const audits = new WeakMap<LandedTxn, AuditEventSpec[]>();

/** The audit records a transaction writes (decoded once: several invariants read them). */
function auditOf(t: LandedTxn): AuditEventSpec[] {
  let out = audits.get(t);
  if (out) return out;
  out = [];
  for (const [k, text] of t.writes) if (k.startsWith('audit/') && text) out.push((JSON.parse(text) as { spec: AuditEventSpec }).spec);
  audits.set(t, out);
  return out;
}

/** A value as it is once the transaction has landed (its own write, or what the store holds). */
function after<T>(sim: Sim, t: LandedTxn, key: string): T | undefined {
  if (t.writes.has(key)) {
    const text = t.writes.get(key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }
  return sim.get<T>(key);
}

/**
 * No replica of an existing deployment is removed as deleted: a `replica_removed` record with
 * reason `deployment_deleted` lands only while deployments/<name> is absent — a key that holds
 * an unreadable value (a hand edit) is present, not deleted.
 */
export const noRemovalAsDeleted: TxnInvariant = {
  name: 'no replica of an existing deployment removed as deleted',
  check(sim, t) {
    for (const a of auditOf(t)) {
      const p = a.payload as { reason?: string; replica?: string };
      if (a.type === 'replica_removed' && p.reason === 'deployment_deleted' && a.deployment && sim.has(keys.deployment(a.deployment)))
        return `${a.actor} removed ${p.replica} while deployments/${a.deployment} exists${sim.broken.has(keys.deployment(a.deployment)) ? ' (its value unreadable)' : ''}`;
    }
    return undefined;
  },
};

/** How long a node must have been Ready without a lapse for a re-placement off it to be a false alarm (grace + the longest cache lag). */
export const READY_FOR_MS = 30_000;

/**
 * Nothing is re-placed off a node that stayed Ready: a `node_lost` record lands only for nodes
 * whose heartbeat lapsed (the scheduler's own readiness rule) within the last READY_FOR_MS, or is
 * lapsed now — never
 * because a node's value is unreadable, or a cache missed its heartbeats.
 */
export const noReplacementOffReadyNode: TxnInvariant = {
  name: 'nothing re-placed off a Ready node',
  check(sim, t) {
    for (const a of auditOf(t)) {
      if (a.type !== 'node_lost') continue;
      const p = a.payload as { node?: string; replica?: string };
      const ready = String(p.node ?? '')
        .split(',')
        .filter((n) => n && sim.has(keys.node(n)) && sim.readyThroughout(n, READY_FOR_MS));
      if (ready.length) return `${a.actor} re-placed ${p.replica} off ${ready.join(', ')}, Ready without a lapse for ${READY_FOR_MS / 1000} s${ready.some((n) => sim.broken.has(keys.node(n))) ? ' (its node value unreadable)' : ''}`;
    }
    return undefined;
  },
};

/**
 * No write from a deposed leader lands: every controller transaction carries a fence (the create
 * revision of its writer's election key, compared in the transaction), and the key it names is the
 * current leader's — the lowest create revision among its controller's candidates.
 */
export const noDeposedLeaderWrite: TxnInvariant = {
  name: 'no write from a deposed leader lands',
  check(sim, t) {
    const fence = t.conditions.find((c) => c.target === 'create' && c.key.startsWith('leaders/'));
    if (!fence) return `an unfenced controller transaction from ${t.client} landed: ${[...t.writes.keys()].join(', ')}`;
    const controller = fence.key.split('/')[1]!;
    const leader = sim.leaderKey(controller);
    if (fence.key !== leader) return `${t.client}'s ${controller} wrote under ${fence.key} while ${leader ?? 'nobody'} leads: ${[...t.writes.keys()].join(', ')}`;
    return undefined;
  },
};

/**
 * Every act has its audit record, in its transaction: a transaction that places, moves or removes
 * a replica (creates or deletes a desired key), or finishes a drain or a rollout, writes audit
 * records too.
 */
export const actsAudited: TxnInvariant = {
  name: 'every act has its audit record',
  check(sim, t) {
    const audited = auditOf(t).length > 0;
    if (audited) return undefined;
    for (const [k, text] of t.writes) {
      // A replica placed, moved or removed (a desired key created or deleted) — but a cutover deleting
      // a move's source, recorded by the move's start and end. Updates are checked act by act (actCarriesAudit).
      const created = text !== undefined && !sim.has(k);
      const deleted = text === undefined && !sim.get<ReplicaDesired>(k)?.spec.movingTo;
      if (k.startsWith('desired/') && (created || deleted)) return `${t.client} ${created ? 'created' : 'deleted'} ${k} with no audit record in the transaction`;
      if (k.startsWith('drains/') || k.startsWith('rollouts/')) {
        const before = sim.get<{ status?: { state?: string }; spec?: { state?: string } }>(k);
        const now = after<{ status?: { state?: string }; spec?: { state?: string } }>(sim, t, k);
        const state = (v: typeof now) => v?.status?.state ?? v?.spec?.state;
        if (state(now) !== state(before) && ['completed', 'removed', 'aborted'].includes(state(now) ?? '')) return `${t.client} set ${k} ${state(now)} with no audit record in the transaction`;
      }
    }
    return undefined;
  },
};

/**
 * A drain reported complete has no container left that it should have stopped: when drains/<node>
 * becomes completed (or removed), the node's agent reports no container of a replica that left
 * the node, and no suspended replica still running — except those the drain lists as unconfirmed
 * (the node NotReady, its agent unable to report).
 */
export const drainCompleteOnObserved: TxnInvariant = {
  name: 'a drain reported complete has no container left',
  check(sim, t) {
    for (const k of t.writes.keys()) {
      if (!k.startsWith('drains/')) continue;
      const d = after<NodeDrain>(sim, t, k);
      const before = sim.get<NodeDrain>(k);
      const state = d?.status?.state;
      if (!d || (state !== 'completed' && state !== 'removed') || before?.status?.state === state) continue;
      const node = d.spec.node;
      const unconfirmed = new Set(d.status?.unconfirmed ?? []);
      for (const { key, value: o } of sim.under<ReplicaObserved>(keys.observedOf(node))) {
        const replica = key.slice(key.lastIndexOf('/') + 1);
        if (unconfirmed.has(replica)) continue;
        const here = after<ReplicaDesired>(sim, t, keys.desired(node, replica));
        if (!here) return `drain/${node} ${state} while ${node}'s agent still reports ${replica} (${o.status.state}), which left the node`;
        if (here.spec.suspended && o.status.state !== 'stopped') return `drain/${node} ${state} while the suspended ${replica} is still ${o.status.state}`;
      }
    }
    return undefined;
  },
};

/**
 * A rollout reported complete has no container left that it should have stopped: when
 * rollouts/<deployment>/<service> becomes completed, no node that stayed Ready (Ready now and no
 * heartbeat lapse within READY_FOR_MS: a NotReady node cannot report, and a rollout completes
 * without it) reports
 * a container of one of the service's replicas at another spec than the one rolled out.
 */
export const rolloutCompleteOnObserved: TxnInvariant = {
  name: 'a rollout reported complete has no container left',
  check(sim, t) {
    for (const k of t.writes.keys()) {
      if (!k.startsWith('rollouts/')) continue;
      const plan = after<RolloutPlan>(sim, t, k)?.spec;
      if (plan?.state !== 'completed' || sim.get<RolloutPlan>(k)?.spec.state === 'completed') continue;
      for (const d of sim.desired()) {
        const s = d.spec;
        if (s.deployment !== plan.deployment || s.service !== plan.service || s.suspended) continue;
        if (!sim.readyThroughout(s.node, READY_FOR_MS)) continue;
        const o = sim.get<ReplicaObserved>(keys.observed(s.node, s.replica));
        if (o && o.status.specHash !== plan.toHash) return `${k} completed while ${s.node} still runs ${s.replica} at ${o.status.specHash} (${o.status.state}), not ${plan.toHash}`;
      }
    }
    return undefined;
  },
};

/**
 * Canaries come first (update.canary): while a service's rollout waits with canaries not yet
 * promoted, no replica but a canary is moved to the rollout's target spec — a desired key that
 * existed before the transaction and is not a canary never changes its spec hash to the plan's.
 */
export const noStepBeforePromote: TxnInvariant = {
  name: 'no replica but a canary steps before the canaries are promoted',
  check(sim, t) {
    for (const [k, text] of t.writes) {
      if (!k.startsWith('desired/') || text === undefined) continue;
      const before = sim.get<ReplicaDesired>(k)?.spec;
      const now = (JSON.parse(text) as ReplicaDesired).spec;
      if (!before || now.canary || before.specHash === now.specHash) continue;
      const plan = after<RolloutPlan>(sim, t, keys.rollout(now.deployment, now.service))?.spec;
      if (plan?.canary && !plan.canary.promotedAt && (plan.state === 'in_progress' || plan.state === 'paused') && now.specHash === plan.toHash)
        return `${now.replica} stepped to ${plan.toHash} while the canaries of ${now.deployment}/${now.service} wait for promotion`;
    }
    return undefined;
  },
};

/**
 * A node gets a copy of a secret or config only while a replica desired on it uses it, only
 * sealed to the key the node publishes (in the place it belongs), and only of the object as it is:
 * every copy a transaction writes holds, as the transaction lands. (A compromised node reads its
 * own replicas' secrets only — not a copy sealed for another node, not one nothing on it uses.)
 */
export const copyOnlyWhereUsed: TxnInvariant = {
  name: "a copy is written only to a node whose desired replica uses it, sealed to that node's key",
  check(sim, t) {
    for (const [k, text] of t.writes) {
      if (!k.startsWith('copies/') || text === undefined) continue;
      const copy = JSON.parse(text) as NodeCopy;
      const [, node, kind, name] = k.split('/') as [string, string, FileKind, string];
      const users = sim.keys(keys.desiredOf(node)).filter((dk) => {
        const d = after<ReplicaDesired>(sim, t, dk);
        return !!d?.spec?.template && filesUsed(d.spec.template).includes(`${kind}/${name}`);
      });
      if (!users.length) return `${t.client} wrote ${k} while no replica desired on ${node} uses ${kind} ${name}`;
      const nodeKey = after<Node>(sim, t, keys.node(node))?.status?.secretsKey?.id;
      if (copy.spec.nodeKey !== nodeKey || copy.spec.sealed.key !== nodeKey) return `${t.client} wrote ${k} sealed to ${copy.spec.sealed.key} (says ${copy.spec.nodeKey}) while ${node} publishes ${nodeKey ?? 'no key'}`;
      if (simSealedOf(copy.spec.sealed).aad !== copyAad(node, kind, name, copy.spec.uid)) return `${t.client} wrote ${k} sealed for ${simSealedOf(copy.spec.sealed).aad}`;
      const source = after<{ metadata: { uid?: string } }>(sim, t, kind === 'secret' ? keys.secret(name) : keys.config(name));
      if (source?.metadata.uid !== copy.spec.uid) return `${t.client} wrote ${k} of uid ${copy.spec.uid} while ${kind} ${name} is ${source ? `uid ${source.metadata.uid}` : 'gone'}`;
    }
    return undefined;
  },
};

export const TXN_INVARIANTS: readonly TxnInvariant[] = [noDeposedLeaderWrite, actsAudited, noRemovalAsDeleted, noReplacementOffReadyNode, drainCompleteOnObserved, rolloutCompleteOnObserved, noStepBeforePromote, copyOnlyWhereUsed];

// Liveness, once faults stop (checked with convergence).

/**
 * Once quiet, each node's copies are exactly what the replicas desired on it use — each of the
 * object as it is, sealed to the node's current key — every secret at rest is sealed to the newest
 * cluster key, and that key is the one published.
 */
export const copiesConverged: Invariant = {
  name: "a node's copies are exactly what its replicas use, once converged",
  check(sim) {
    const newest = sim.keyFile.primary.id;
    const published = sim.get<ClusterKey>(keys.clusterKey())?.spec.id;
    if (published !== newest) return `the published cluster key is ${published ?? 'none'}, not the newest, ${newest}`;
    for (const { key, value } of sim.under<Secret>(keys.secrets())) if (value.spec.sealed.key !== newest) return `${key} is sealed to ${value.spec.sealed.key}, not the newest cluster key ${newest}`;
    const want = new Set<string>();
    for (const d of sim.desired()) for (const f of filesUsed(d.spec.template)) want.add(`${d.spec.node}/${f}`);
    // A key holding no readable value is nobody's copy (a hand edit: never deleted by a controller).
    const have = new Set(sim.under(keys.copiesOf()).map((v) => v.key.slice(keys.copiesOf().length)));
    const missing = [...want].filter((w) => !have.has(w));
    // A node with a desired key that holds no readable value may run anything: the secrets
    // controller keeps its copies as they are (controllers/secrets/copyset.ts, unknownUse) — not
    // even sealed again when the node's key changes (one for the secrets controller to decide).
    const unknownUse = new Set(sim.keys(keys.desiredOf()).filter((k) => !sim.under(k).length).map((k) => k.split('/')[1]));
    const extra = [...have].filter((h) => !want.has(h) && !unknownUse.has(h.split('/')[0]));
    if (missing.length || extra.length) return `copies missing: ${missing.join(', ') || 'none'}; left over: ${extra.join(', ') || 'none'}`;
    for (const h of have) {
      if (!want.has(h)) continue; // kept for a use nobody can read (above)
      const [node, kind, name] = h.split('/') as [string, FileKind, string];
      const c = sim.get<NodeCopy>(keys.copy(node, kind, name))!;
      const source = sim.get<{ metadata: { uid?: string } }>(kind === 'secret' ? keys.secret(name) : keys.config(name));
      if (c.spec.nodeKey !== sim.nodeKey(node).id) return `${h} is sealed to ${c.spec.nodeKey}, not ${node}'s key ${sim.nodeKey(node).id}`;
      if (c.spec.uid !== source?.metadata.uid) return `${h} is of uid ${c.spec.uid}, not ${source?.metadata.uid}`;
    }
    return undefined;
  },
};

// ---------------------------------------------------------------- as each act is planned

/** A move's cutover (the source's desired key goes once the destination is ready): the middle of a move whose start and end are recorded. */
const isCutover = (act: Act) => / cutover\b|: cutover$/.test(act.label);

/**
 * Every act that changes a desired replica carries an audit record naming it (the runtime writes
 * an act's records in the act's own transaction; an act without any has nothing to write) — but
 * a move's cutover, recorded by the move's start and its end.
 */
export const actCarriesAudit: ActInvariant = {
  name: 'every act has its audit record',
  check(_sim, controller, act) {
    const writes = act.ops.filter((o) => o.op !== 'check' && o.op !== 'checkRange' && o.key.startsWith('desired/'));
    if (!writes.length || isCutover(act)) return undefined;
    if (!act.audit?.length) return `${controller}'s act "${act.label}" changes ${writes.map((o) => o.key).join(', ')} with no audit record`;
    const named = new Set(act.audit.flatMap((a) => [a.payload.replica, a.payload.replica_id]).filter((x): x is string => typeof x === 'string'));
    const unnamed = writes.map((o) => o.key.slice(o.key.lastIndexOf('/') + 1)).filter((r) => !named.has(r));
    if (named.size && unnamed.length) return `${controller}'s act "${act.label}" changes ${unnamed.join(', ')}, which none of its audit records names`;
    return undefined;
  },
};

/**
 * A controller writes only what its etcd user may (src/store/rbac.ts): the one definition of its
 * role checked against every act it plans, so a new write outside it fails here, not in production.
 */
export const actWithinRole: ActInvariant = {
  name: "every act stays within its controller's etcd role",
  check(_sim, controller, act) {
    const { grants } = controllerRole(controller);
    for (const o of act.ops) {
      const access = o.op === 'check' || o.op === 'checkRange' ? 'read' : 'readwrite';
      if (!allows(grants, o.key, access)) return `${controller}'s act "${act.label}" needs ${access} on ${o.key}, which its etcd role (src/store/rbac.ts) does not grant`;
    }
    return undefined;
  },
};

/**
 * An act can land: it writes no key twice (etcd refuses such a transaction; the runtime refuses it
 * before sending, as duplicate_key) — a preemption that stopped two replicas of one service once
 * wrote that service's ledger twice, and only a world that accepted every act hid it.
 */
export const actCanLand: ActInvariant = {
  name: 'every act writes each key once',
  check(_sim, controller, act) {
    const why = unfit(act.ops, false);
    return why?.reason === 'duplicate_key' ? `${controller}'s act "${act.label}": ${why.detail}` : undefined;
  },
};

export const ACT_INVARIANTS: readonly ActInvariant[] = [actCarriesAudit, actWithinRole, actCanLand];

// ---------------------------------------------------------------- the breadth variant (sim-breadth.test.ts)
// Global and stateful services and forced drains: vacuous without them, so checked only there.

/** Named volumes a replica's template mounts, as `<deployment>/<volume>`. */
const volumesOf = (d: ReplicaDesired) => namedVolumes(d.spec.template).map((v) => `${d.spec.deployment}/${v.source}`);

/**
 * A stateful replica (seed 004: its data is on its node) is desired on one node only: never a
 * move's destination beside its source, never two copies — its data cannot be in two places.
 */
export const statefulOnOneNode: Invariant = {
  name: 'a stateful replica is desired on one node only',
  check(sim) {
    const nodes = new Map<string, string[]>();
    for (const d of sim.desired()) {
      if (!isStateful(d.spec.template)) continue;
      nodes.set(d.spec.replica, [...(nodes.get(d.spec.replica) ?? []), `${d.spec.node}${d.spec.move ? ` (move from ${d.spec.move.from} by ${d.spec.move.by})` : ''}`]);
    }
    for (const [id, on] of nodes) if (on.length > 1) return `stateful ${id} is desired on ${on.join(', ')}`;
    return undefined;
  },
};

/**
 * One writer per named volume (seed 004's exclusive volume usage): at most one desired replica of
 * a deployment mounts each of its named volumes — a scale-down's replica is gone before another
 * index takes the volume, a stop-first rollout changes the one replica in place.
 */
export const oneReplicaPerVolume: Invariant = {
  name: 'at most one replica per named volume',
  check(sim) {
    const holders = new Map<string, string[]>();
    for (const d of sim.desired()) for (const v of volumesOf(d)) holders.set(v, [...(holders.get(v) ?? []), `${d.spec.replica}@${d.spec.node}`]);
    for (const [v, on] of holders) if (on.length > 1) return `volume ${v} is mounted by ${on.join(', ')}`;
    return undefined;
  },
};

/**
 * A global service runs at most one replica per node, and each replica stays on the node its id
 * names (replicaId(deployment, service, host)): it is never moved, re-placed or doubled — a drain
 * drops it (seed 001), a lost node keeps it.
 */
export const globalOnePerNode: Invariant = {
  name: 'a global service has at most one replica per node, on the node its id names',
  check(sim) {
    const seen = new Set<string>();
    for (const d of sim.desired()) {
      const s = d.spec;
      if (placementMode(s.template) !== 'global') continue;
      if (s.replica !== `${s.deployment}-${s.service}-${s.node}`) return `global ${s.replica} is desired on ${s.node}${s.move ? ` (a move from ${s.move.from} by ${s.move.by})` : ''}`;
      const k = `${s.deployment}/${s.service}@${s.node}`;
      if (seen.has(k)) return `global ${s.deployment}/${s.service} has two replicas on ${s.node}`;
      seen.add(k);
    }
    return undefined;
  },
};

export const BREADTH_STATE_INVARIANTS: readonly Invariant[] = [statefulOnOneNode, oneReplicaPerVolume, globalOnePerNode];

/**
 * A stateful replica is never re-placed (seed 004): a transaction creates its desired key only on
 * its volume's home node (volumes/<deployment>/<volume>, fixed by its first placement), and never
 * while the replica is desired on another node — not by a lost node (it stays, reported
 * `node_lost`, its record `stranded`), a drain, the rebalancer or a crash loop.
 */
export const statefulNeverReplaced: TxnInvariant = {
  name: 'a stateful replica is never re-placed',
  check(sim, t) {
    for (const a of auditOf(t)) {
      const p = a.payload as { replica?: string; stranded?: boolean; to?: string };
      if (a.type !== 'node_lost' || p.stranded) continue;
      const copy = sim.desired().find((d) => d.spec.replica === p.replica);
      if (copy && isStateful(copy.spec.template)) return `${a.actor} re-placed stateful ${p.replica} off a lost node (to ${p.to ?? '?'})`;
    }
    for (const [k, text] of t.writes) {
      if (!k.startsWith('desired/') || text === undefined || sim.has(k)) continue;
      const d = JSON.parse(text) as ReplicaDesired;
      if (!isStateful(d.spec.template)) continue;
      const elsewhere = sim.desired().find((x) => x.spec.replica === d.spec.replica && x.spec.node !== d.spec.node);
      if (elsewhere) return `${t.client} placed stateful ${d.spec.replica} on ${d.spec.node} while it is desired on ${elsewhere.spec.node}${t.writes.has(keys.desired(elsewhere.spec.node, d.spec.replica)) && t.writes.get(keys.desired(elsewhere.spec.node, d.spec.replica)) === undefined ? ' (deleted in the same transaction: re-placed)' : ''}`;
      for (const v of volumesOf(d)) {
        const [dep, vol] = v.split('/') as [string, string];
        const home = after<VolumeHome>(sim, t, keys.volumeHome(dep, vol))?.spec.node;
        if (home !== d.spec.node) return `${t.client} placed stateful ${d.spec.replica} on ${d.spec.node}, but its volume ${v} lives on ${home ?? 'no node'}`;
      }
    }
    return undefined;
  },
};

export const BREADTH_TXN_INVARIANTS: readonly TxnInvariant[] = [statefulNeverReplaced];

// Liveness, once faults stop (checked with convergence: each must hold before the quiet window ends).

/**
 * Once quiet, a global service runs one replica per eligible Ready node — on each registered,
 * schedulable, Ready node the replica its id names, running at the spec its desired key holds —
 * and none on a node that is not registered.
 */
export const globalOnEveryEligibleNode: Invariant = {
  name: 'a global service runs one replica per eligible Ready node once quiet',
  check(sim) {
    const eligible = sim.nodes.filter((n) => sim.decidedNode(n)?.spec?.unschedulable !== true && sim.has(keys.node(n)) && readyOf(sim, n));
    for (const d of sim.deployments()) {
      for (const [svc, spec] of Object.entries(d.spec.services)) {
        if (placementMode(spec) !== 'global') continue;
        const dep = d.metadata.name;
        for (const n of eligible) {
          const id = `${dep}-${svc}-${n}`;
          const o = sim.get<ReplicaObserved>(keys.observed(n, id));
          if (!sim.has(keys.desired(n, id)) || o?.status.state !== 'running') return `${dep}/${svc} has no running replica on ${n} (${o ? o.status.state : 'nothing observed'})`;
        }
        const stray = sim.desired().find((x) => x.spec.deployment === dep && x.spec.service === svc && !sim.has(keys.node(x.spec.node)));
        if (stray) return `${dep}/${svc} keeps ${stray.spec.replica} on ${stray.spec.node}, which is not registered`;
      }
    }
    return undefined;
  },
};

/**
 * The replicas a forced drain stopped resume once their node takes placements again: none is left
 * suspended (reason node_drained) on a node that is registered, schedulable, and not draining.
 */
export const forcedDrainResumes: Invariant = {
  name: "a forced drain's stopped replicas resume once the node is uncordoned",
  check(sim) {
    for (const d of sim.desired()) {
      const s = d.spec;
      if (s.suspended?.reason !== 'node_drained') continue;
      const node = sim.decidedNode(s.node);
      if (node && !node.spec?.unschedulable && !drainActive(sim.get<NodeDrain>(keys.drain(s.node)))) return `${s.replica} is still suspended on ${s.node}, which is uncordoned with no drain in progress`;
    }
    return undefined;
  },
};

export const BREADTH_LIVENESS: readonly Invariant[] = [globalOnEveryEligibleNode, forcedDrainResumes];

/** Whether a node is Ready now (its heartbeat fresh: the scheduler's own rule). */
const readyOf = (sim: Sim, node: string) => nodeReady(sim.get<Heartbeat>(keys.heartbeat(node)));
