// Membership: which replicas a service has. Replicas of deleted deployments and services go; a
// change to or from placement global replaces the replicas (their ids differ); spread, pack and
// hosts scale down from the highest indexes (not-running ones first) and place new indexes with
// the counter's compare-and-swap; global runs one replica per eligible node.
import { keys, replicaId } from '../../src/api/keys.js';
import type { PlaceTrigger } from '../../src/api/reasons/scheduling.js';
import { replicaRunning } from '../../src/api/readiness.js';
import type { ServingTemplate } from '../../src/api/serving.js';
import { namedVolumes, placementMode } from '../../src/api/spec.js';
import { API_VERSION, type ReplicaCounter, type ReplicaDesired, type ServiceSchedulingStatus, type ServiceSpec, type VolumeHome } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import { AUDIT_OP_COUNTS, type AuditRecord } from '../../src/store/audit.js';
import { MAX_REQUEST_BYTES, MAX_TXN_OPS } from '../../src/store/store.js';
import { actBytes, chainedWrite, type Op } from '../../src/store/writer.js';
import { footprintOf, type Decision, type PlacementRequest } from '../placement/placer.js';
import { decisionValue } from '../placement/decision.js';
import { cmp, iso, type SchedulerPass } from './pass.js';
import type { ActMetrics } from './plan.js';
import { addUnschedulable, unschedulableOf } from './unschedulable.js';

/** Replicas whose deployment or service is gone (a deployment whose key is unreadable is not gone). */
export function removeOrphanedReplicas(pass: SchedulerPass): void {
  const { snap } = pass;
  const services = [...snap.replicas.serviceKeys()].sort(cmp);
  for (const k of services) {
    const [dep, svc] = k.split('/') as [string, string];
    const d = snap.deployments.get(dep);
    if (d?.value.spec.services[svc] || (!d && snap.frozenDeployments.has(dep))) continue;
    for (const e of snap.replicas.service(dep, svc)) pass.remove(e, d ? 'service_removed' : 'deployment_deleted');
  }
}

/** A mode change replaces every replica; global replicas of removed nodes go. What is left stays. */
export function keptReplicas(pass: SchedulerPass, replicas: readonly ReplicaEntry[], spec: ServiceSpec): ReplicaEntry[] {
  const mode = placementMode(spec);
  const kept: ReplicaEntry[] = [];
  for (const e of replicas) {
    // Indexed ids and host-keyed ids cannot be mixed: a change to or from global replaces them.
    if ((mode === 'global') !== (e.index === undefined)) pass.remove(e, 'mode_changed');
    else if (mode === 'global' && e.copies.every((c) => pass.nodeGone(c))) pass.remove(e, 'node_gone');
    else kept.push(e);
  }
  return kept;
}

/** spread, pack and hosts over `want`: not-running replicas go first, then the highest indexes. */
export function scaleDown(pass: SchedulerPass, kept: ReplicaEntry[], want: number): ReplicaEntry[] {
  if (kept.length <= want) return kept;
  const up = (e: ReplicaEntry) => e.copies.some((c) => pass.ready(c.desired.spec.node) && replicaRunning(c.observed));
  const order = [...kept].sort((a, b) => Number(up(a)) - Number(up(b)) || (b.index ?? 0) - (a.index ?? 0) || cmp(a.id, b.id));
  const gone = new Set(order.slice(0, kept.length - want));
  for (const e of order) if (gone.has(e)) pass.remove(e, 'scale_down');
  return kept.filter((e) => !gone.has(e));
}

/** Room left in a request for what a placement act carries besides its placements (counter, volumes). */
const ACT_OVERHEAD_BYTES = 16 * 1024;
/** An audit record's op, as the runtime adds it: its payload plus the event's envelope and key. */
const auditBytes = (r: AuditRecord) => Buffer.byteLength(JSON.stringify(r.payload)) + 400;
/**
 * What every placement act holds besides its placements, counted as etcd counts a transaction
 * (compares and writes each up to MAX_TXN_OPS; writer.txnCounts): the leader's fence, the
 * counter's compare and write, and the deployment guard.
 */
const ACT_BASE = { compares: 3, writes: 1 };
/** One placement: its desired key's create and its decision's put, and its audit record (a create). */
const PLACEMENT = { compares: 1 + AUDIT_OP_COUNTS.compares, writes: 2 + AUDIT_OP_COUNTS.writes };

interface Chunk {
  first: number;
  end: number;
  /** Placements in it, and how many of them are canaries. */
  n: number;
  canaries: number;
  ops: Op[];
  /** Nodes it places on (each guarded once, by the act's last ops). */
  nodes: Set<string>;
  /** Compares and writes of the transaction it will be, audit records and fence included. */
  compares: number;
  writes: number;
  audit: AuditRecord[];
  bytes: number;
}

/**
 * Places up to `count` new replicas, all in this pass: in acts that each fill one transaction,
 * chained on the counter (the first compares its mod revision, each next one its version), so
 * the indexes are this leader's alone and never handed out twice. Returns how many it placed.
 *
 * Every act writes the counter, so a rollout's completion, which compares the counter at the
 * revision it judged (controllers/rollout/evidence.ts), is refused by any placement its cache has
 * not seen — even one its watch lost. That is why the acts of one service go one after another:
 * acts that did not all write the counter could commit concurrently, but the guard would then
 * miss a lost event of one of them.
 */
export function placeIndexed(
  pass: SchedulerPass,
  dep: string,
  svc: string,
  spec: ServiceSpec,
  template: () => ServingTemplate,
  existing: ReplicaEntry[],
  count: number,
  st: ServiceSchedulingStatus,
  /** The placements from the `from`-th on (0-based) are canaries of the rollout to `revision`. */
  canaries?: { from: number; revision: number },
): number {
  const { snap, placer } = pass;
  const counter = snap.counters.get(`${dep}/${svc}`);
  let next = nextIndex(pass, dep, svc, counter?.value.spec.next ?? 0);
  const mode = placementMode(spec);
  // The footprint of what will run (the serving template), today's placement constraints.
  const t = template();
  const shape: ServiceSpec = { ...t.template, placement: spec.placement };
  // Holes the rescheduler made for other pending services are not this service's to take.
  const held = pass.heldAgainst(dep, svc);
  const request = (index: number): PlacementRequest => ({ replica: replicaId(dep, svc, index), deployment: dep, service: svc, index, spec: shape, ...(held ? { held } : {}) });

  if (mode === 'hosts') {
    // All or nothing (seed 001): fewer listed hosts able to take one than wanted → none placed.
    const cands = placer.candidates(request(next));
    if (cands.length < count) {
      const listed = [...new Set(spec.placement?.hosts ?? [])].sort();
      const holding = new Set(existing.flatMap((e) => e.copies.map((c) => c.desired.spec.node)));
      const missing = listed.filter((h) => !cands.includes(h) && !holding.has(h));
      const d = placer.decide(request(next));
      const why = `${cands.length} of the ${listed.length} listed host(s) can take a replica and ${count} are wanted: none placed (all or nothing)${missing.length ? `; missing: ${missing.join(', ')}` : ''}`;
      addUnschedulable(st, { ...unschedulableOf({ ...d, reason: 'cannot_satisfy_host_placement' }, count, missing), message: why });
      return 0;
    }
  }

  const volumes = volumesWithoutHome(pass, dep, spec);
  const chunks: Chunk[] = [];
  let cur: Chunk | undefined;
  let placed = 0;
  for (; placed < count; placed++) {
    const index = next;
    const decision = placer.place(request(index));
    if (!decision.chosen) {
      addUnschedulable(st, unschedulableOf(decision, count - placed));
      break;
    }
    const id = decision.replica;
    const canary = canaries && placed >= canaries.from ? { revision: canaries.revision } : undefined;
    const trigger: PlaceTrigger = canary ? 'canary' : 'scale_up';
    const desired = desiredValue(id, dep, svc, decision.chosen, index, t, pass.now, placer.assignPorts(id, decision.chosen, shape));
    if (canary) desired.spec.canary = canary;
    const ops: Op[] = [
      { op: 'create', key: keys.desired(decision.chosen, id), value: desired },
      ...pass.addressOps(desired),
      { op: 'put', key: keys.decision(dep, id), value: decisionValue(decision, trigger, pass.now, pass.cfg.actor) },
    ];
    const audit: AuditRecord = { type: 'replica_placed', time: pass.now, deployment: dep, payload: { replica: id, service: svc, node: decision.chosen, revision: t.revision, trigger, why: decision.why } };
    const bytes = actBytes(ops) + auditBytes(audit);
    if (bytes > MAX_REQUEST_BYTES - ACT_OVERHEAD_BYTES) {
      // No act can carry even one replica of this spec: refuse here, with a reason, rather than fail every pass.
      placer.forget(id, decision.chosen);
      addUnschedulable(st, {
        reason: 'spec_too_large',
        count: count - placed,
        message: `one replica of ${svc} takes ${bytes} bytes in a request; etcd accepts at most ${MAX_REQUEST_BYTES} (--max-request-bytes): shrink its env or command`,
        nodes: {},
      });
      break;
    }
    // Each placement creates its desired key (a compare and a write), writes its decision and its
    // audit record; each node it places on adds the node's eligibility guard (compares).
    const host = decision.chosen;
    // A cluster-network replica's address claim is one more create (a compare and a write).
    const claims = ops.length - 2;
    const one = { compares: PLACEMENT.compares + claims, writes: PLACEMENT.writes + claims };
    const guards = (c: Chunk) => (c.nodes.has(host) ? 0 : pass.guard(host).length);
    const full = (c: Chunk) =>
      c.compares + one.compares + guards(c) > MAX_TXN_OPS || c.writes + one.writes > MAX_TXN_OPS || c.bytes + bytes > MAX_REQUEST_BYTES - ACT_OVERHEAD_BYTES;
    if (!cur || full(cur)) {
      const first = !chunks.length;
      cur = { first: index, end: index, n: 0, canaries: 0, ops: [], nodes: new Set(), compares: ACT_BASE.compares, writes: ACT_BASE.writes, audit: [], bytes: 0 };
      chunks.push(cur);
      // The first act records the volume homes (each a create: one compare, one write).
      if (first) for (const v of volumes) cur.ops.push(recordVolumeHome(pass, dep, v, decision.chosen));
      cur.compares += cur.ops.length;
      cur.writes += cur.ops.length;
    }
    cur.compares += one.compares + guards(cur);
    cur.writes += one.writes;
    cur.nodes.add(host);
    cur.ops.push(...ops);
    cur.audit.push(audit);
    cur.bytes += bytes;
    cur.n++;
    if (canary) cur.canaries++;
    cur.end = index + 1;
    next++;
    pass.plan.place.push({ replica: id, deployment: dep, service: svc, node: decision.chosen, index, trigger, why: decision.why });
  }
  if (!placed) return 0;
  const counterKey = keys.counter(dep, svc);
  chunks.forEach((c, k) => {
    const value: ReplicaCounter = { apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name: `${dep}-${svc}` }, spec: { next: c.end } };
    // The counter's CAS makes the indexes this leader's alone; later acts of the pass follow the first by its version.
    const counterOps = chainedWrite(counterKey, counter, k, value);
    const n = c.n - c.canaries;
    const metrics: ActMetrics[] = [];
    if (n) metrics.push({ placements: { trigger: 'scale_up', count: n } });
    if (c.canaries) metrics.push({ placements: { trigger: 'canary', count: c.canaries } });
    pass.plan.acts.push({
      label: `place ${dep}/${svc} ${c.first}..${c.end - 1}`,
      subject: `deployment/${dep}`,
      ops: [...counterOps, ...c.ops, ...[...c.nodes].sort().flatMap((n) => pass.guard(n)), pass.deploymentGuard(dep)],
      audit: c.audit,
      metrics,
    });
  });
  return placed;
}

/** The next index: past the counter and every replica of the service, including ones being removed (never reused). */
function nextIndex(pass: SchedulerPass, dep: string, svc: string, counted: number): number {
  let next = counted;
  for (const e of pass.snap.replicas.service(dep, svc)) if (e.index !== undefined && e.index >= next) next = e.index + 1;
  return next;
}

/** Named volumes of a service that have no home yet: the first placement records them. */
function volumesWithoutHome(pass: SchedulerPass, dep: string, spec: ServiceSpec): string[] {
  return [...new Set(namedVolumes(spec).map((v) => v.source))].filter((v) => !pass.snap.volumeHomes.has(`${dep}/${v}`)).sort();
}

function recordVolumeHome(pass: SchedulerPass, dep: string, volume: string, node: string): Op {
  pass.placer.recordVolumeHome(dep, volume, node);
  const value: VolumeHome = { apiVersion: API_VERSION, kind: 'VolumeHome', metadata: { name: `${dep}-${volume}` }, spec: { deployment: dep, volume, node, since: pass.iso } };
  return { op: 'create', key: keys.volumeHome(dep, volume), value };
}

/**
 * global: one replica per eligible node (Ready, schedulable, matching the node selector).
 * Nodes that merely went NotReady, cordoned or draining keep theirs: no churn.
 */
export function scaleGlobal(pass: SchedulerPass, dep: string, svc: string, spec: ServiceSpec, template: () => ServingTemplate, kept: ReplicaEntry[], st: ServiceSchedulingStatus): void {
  const { placer } = pass;
  const marker = globalMarker(pass, dep, svc);
  const holding = new Set(kept.flatMap((e) => e.copies.map((c) => c.desired.spec.node)));
  let t: ServingTemplate | undefined;
  let shape: ServiceSpec | undefined;
  let wanted = kept.length;
  const rejected: Decision[] = [];
  for (const host of placer.names) {
    if (holding.has(host)) continue;
    t ??= template();
    shape ??= { ...t.template, placement: spec.placement };
    const id = replicaId(dep, svc, host);
    const req: PlacementRequest = { replica: id, deployment: dep, service: svc, spec: shape };
    const rej = placer.check(req, host, { antiAffinity: false });
    // Not a node this service runs on at all (yet): not counted as wanted.
    if (rej && (rej.filter === 'eligibility' || rej.filter === 'node_selector')) continue;
    wanted++;
    const verdict = rej ? { node: host, rejected: rej } : { node: host, score: { total: 0, parts: {} } };
    const decision: Decision = {
      replica: id,
      deployment: dep,
      service: svc,
      mode: 'global',
      verdicts: [verdict],
      ...(rej
        ? { reason: rej.reason, why: `global: ${host} is eligible but cannot run it (${rej.reason}): ${rej.detail}` }
        : { chosen: host, why: `global: one replica per eligible node; ${host} is Ready, schedulable and passes every filter` }),
    };
    if (rej) {
      rejected.push(decision);
      continue;
    }
    placer.assume({ id, deployment: dep, service: svc, node: host, ...footprintOf(shape) });
    pass.plan.place.push({ replica: id, deployment: dep, service: svc, node: host, trigger: 'global_node', why: decision.why });
    const desired = desiredValue(id, dep, svc, host, undefined, t, pass.now, placer.assignPorts(id, host, shape));
    pass.plan.acts.push({
      label: `place ${id}`,
      subject: `deployment/${dep}`,
      ops: [
        ...marker(),
        ...pass.guard(host),
        pass.deploymentGuard(dep),
        { op: 'create', key: keys.desired(host, id), value: desired },
        ...pass.addressOps(desired),
        { op: 'put', key: keys.decision(dep, id), value: decisionValue(decision, 'global_node', pass.now, pass.cfg.actor) },
      ],
      audit: [{ type: 'replica_placed', time: pass.now, deployment: dep, payload: { replica: id, service: svc, node: host, revision: t.revision, trigger: 'global_node', why: decision.why } }],
      metrics: [{ placements: { trigger: 'global_node', count: 1 } }],
    });
    st.placed++;
  }
  st.desired = wanted;
  st.placed += kept.length;
  if (rejected.length) {
    const first = rejected[0]!;
    const nodes = Object.fromEntries(rejected.map((d) => [d.verdicts[0]!.node, `${d.verdicts[0]!.rejected!.filter}: ${d.verdicts[0]!.rejected!.detail}`]));
    addUnschedulable(st, { reason: first.reason!, count: rejected.length, message: `${rejected.length} eligible node(s) cannot run their replica; first: ${first.why}`, nodes });
  }
}

/**
 * The service's counter, written by each global placement in the same transaction as an indexed
 * placement writes it: a rollout's completion compares the counter it judged (controllers/rollout/
 * evidence.ts), so a global replica its cache never received refuses the completion too. The value
 * keeps `next` (indexes handed out before a change to global are never reused). Each act writes
 * it, so each placement moves it: the acts of one pass chain on it — the first compares its mod
 * revision, each next one the version the previous act leaves — and a cache that lags is refused
 * rather than writing an older `next` back.
 */
function globalMarker(pass: SchedulerPass, dep: string, svc: string): () => Op[] {
  const counter = pass.snap.counters.get(`${dep}/${svc}`);
  const key = keys.counter(dep, svc);
  const value: ReplicaCounter = { apiVersion: API_VERSION, kind: 'ReplicaCounter', metadata: { name: `${dep}-${svc}` }, spec: { next: counter?.value.spec.next ?? 0 } };
  let k = 0;
  return () => chainedWrite(key, counter, k++, value);
}

/** The desired record of a replica placed on `node` (new, or global's copy for a node). */
export function desiredValue(
  id: string,
  deployment: string,
  service: string,
  node: string,
  index: number | undefined,
  t: ServingTemplate,
  now: number,
  hostPorts: Record<string, number> = {},
): ReplicaDesired {
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: id },
    spec: {
      replica: id,
      deployment,
      service,
      node,
      ...(index !== undefined ? { index } : {}),
      revision: t.revision,
      specHash: t.specHash,
      template: t.template,
      placedAt: iso(now),
      ...(Object.keys(hostPorts).length ? { hostPorts } : {}),
    },
  };
}
