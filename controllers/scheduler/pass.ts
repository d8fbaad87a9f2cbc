// What every job of one scheduler pass shares: the snapshot, the clock, the plan being built, the
// placer (with this pass's placements and removals accounted), node readiness judged once per
// host, and the few operations several jobs do (remove a replica, delete a key, ask to be woken).
import { keys } from '../../src/api/keys.js';
import { nodeReady, nodeRemoved } from '../../src/api/nodes.js';
import { planOfIncarnation } from '../../src/api/serving.js';
import type { HoleFor, NodeSubnet, ReplicaCommand, ReplicaDesired, RolloutPlan } from '../../src/api/types.js';
import { addressClaimOp, type NetworkView } from '../placement/ipam.js';
import type { Copy, ReplicaEntry } from '../../src/runtime/replicas.js';
import type { Versioned } from '../../src/store/store.js';
import type { Op } from '../../src/store/writer.js';
import type { Placer } from '../placement/placer.js';
import { heldAgainst, holesOf } from './holes.js';
import { eligibilityGuard, placerFor } from '../placement/input.js';
import type { RemoveReason } from '../../src/api/reasons/scheduling.js';
import type { AuditType } from '../../src/api/reasons/audit.js';
import type { SchedulerAct, SchedulerConfig, SchedulerPlan, SchedulerSnapshot } from './plan.js';

export const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
export const iso = (ms: number) => new Date(ms).toISOString();

export class SchedulerPass {
  readonly plan: SchedulerPlan = {
    place: [],
    stop: [],
    replaceLost: [],
    restart: [],
    commandStatus: [],
    stranded: [],
    status: new Map(),
    endpoints: [],
    cleanup: [],
    waiting: [],
    unschedulable: {},
    acts: [],
  };
  readonly iso: string;
  /** Keys this pass deletes (so bookkeeping does not delete them twice). */
  readonly deleted = new Set<string>();
  /** Per service: replicas exhausted and stranded on lost nodes (status). */
  private readonly conditions = new Map<string, { exhausted: string[]; nodeLost: string[] }>();
  private placerCache?: Placer;
  /** Service address numbers in use, with the ones this pass gives (giveServiceAddress). */
  serviceNumbers?: Set<number>;
  /** Subnets given to nodes this pass (grantSubnets), placed into like stored ones. */
  private readonly granted = new Map<string, Versioned<NodeSubnet>>();
  private holesCache?: Map<string, HoleFor[]>;
  private readonly readyCache = new Map<string, boolean>();

  constructor(
    readonly snap: SchedulerSnapshot,
    readonly now: number,
    readonly cfg: SchedulerConfig,
  ) {
    this.iso = iso(now);
  }

  /** Nodes a service's new replicas may not take: holes coalescing made for other pending services (holes.ts). */
  heldAgainst(deployment: string, service: string): Record<string, string> | undefined {
    this.holesCache ??= holesOf(this.snap, this.now);
    return this.holesCache.size ? heldAgainst(this.holesCache, deployment, service) : undefined;
  }

  /** Built on first use: an idle pass never needs it. */
  get placer(): Placer {
    const { snap } = this;
    this.placerCache ??= placerFor(
      { nodes: snap.nodes.values(), heartbeats: snap.heartbeats, drains: snap.drains, replicas: snap.replicas, volumeHomes: [...snap.volumeHomes.values()].map((v) => v.value), commands: snap.commands, network: this.network, settings: snap.settings },
      this.now,
      this.cfg.placement,
    );
    return this.placerCache;
  }

  /** The cluster network as this pass sees it: the snapshot's, with the subnets it gives. */
  get network(): NetworkView {
    const n = this.snap.network;
    return this.granted.size ? { ...n, subnets: new Map([...n.subnets, ...this.granted]) } : n;
  }

  /** Gives node subnets (grantSubnets, before any placement of the pass: the placer sees them). */
  grant(node: string, subnet: NodeSubnet): void {
    if (this.placerCache) throw new Error('subnets are given before the placer is built');
    this.granted.set(node, { key: keys.subnet(node), value: subnet, modRevision: 0, createRevision: 0, version: 0 } as Versioned<NodeSubnet>);
  }

  /**
   * A cluster-network copy about to be created on its node: its address of the node's subnets
   * (recorded in the desired value, replacing any it had on another node) and the claim to create
   * in the same act. Host-network copies get none and need nothing.
   */
  addressOps(desired: ReplicaDesired): Op[] {
    delete desired.spec.address;
    const given = this.placer.assignAddress(desired.spec.replica, desired.spec.node, desired.spec.template);
    if (!given) return [];
    desired.spec.address = given.address;
    return [addressClaimOp(desired.spec, given, this.now)];
  }

  // -------------------------------------------------------------- nodes

  ready(host: string): boolean {
    let r = this.readyCache.get(host);
    if (r === undefined) this.readyCache.set(host, (r = nodeReady(this.snap.heartbeats.get(host))));
    return r;
  }

  /** Every copy of the replica is on a Ready node (the common case, cheap). */
  allReady(e: ReplicaEntry): boolean {
    return e.copies.every((c) => this.ready(c.desired.spec.node));
  }

  /**
   * A node removed from the cluster (nodeRemoved: its key gone with the removal recorded). A key
   * merely absent is a node the store lost — NotReady, on the clock like one — and a key that is
   * unreadable is a node that exists.
   */
  nodeGone(c: Copy): boolean {
    const host = c.desired.spec.node;
    return nodeRemoved(this.snap.nodes.has(host) || this.snap.frozenNodes.has(host), this.snap.drains.get(host));
  }

  /** How long a copy's node has been lost, or undefined while it is not (Ready, or within the grace). */
  lostFor(c: Copy): number | undefined {
    const host = c.desired.spec.node;
    if (this.nodeGone(c)) return Infinity; // removed from the cluster: nothing runs there for us
    if (this.snap.frozenNodes.has(host) && !this.snap.nodes.has(host)) return undefined; // frozen: not judged
    if (this.ready(host)) return undefined;
    const since = this.snap.notReadySince.get(host);
    if (since === undefined) return undefined;
    // NotReady when this term began: the whole cluster restarted, or the leader failed over while
    // the node's agent was away; its agent may be on its way back, so it has the longer grace.
    const grace = this.snap.failoverClocks.get(host) === since ? Math.max(this.cfg.nodeLostGraceMs, this.cfg.nodeLostFailoverGraceMs) : this.cfg.nodeLostGraceMs;
    const t = this.now - since;
    if (t >= grace) return t;
    this.wake(since + grace);
    return undefined;
  }

  /**
   * The deployment key as this pass read it (absent: revision 0). Every act that follows from the
   * deployment's spec — or from its absence — compares it, so a re-apply or a delete landing
   * between decision and commit refuses the act instead of, say, removing the replicas of a
   * deployment that was just re-created as "deleted".
   */
  deploymentGuard(dep: string): Op {
    return { op: 'check', key: keys.deployment(dep), modRevision: this.snap.deployments.get(dep)?.modRevision ?? 0 };
  }

  /** Preconditions of an act placing on `host`: its node and drain keys are as judged (no cordon or drain landed since). */
  guard(host: string): Op[] {
    return eligibilityGuard(this.snap.eligibility, host);
  }

  /** A service's rollout plan, if it is of the deployment's current incarnation (serving.ts planOfIncarnation). */
  rolloutPlan(dep: string, svc: string): RolloutPlan | undefined {
    const d = this.snap.deployments.get(dep);
    const p = this.snap.rollouts.get(`${dep}/${svc}`);
    return d ? planOfIncarnation(d, p) : p;
  }

  wake(at: number | undefined): void {
    if (at !== undefined && at > this.now) this.plan.wakeAt = Math.min(this.plan.wakeAt ?? at, at);
  }

  // -------------------------------------------------------------- replicas

  /** The restart command of a replica's copy on a node. */
  command(e: ReplicaEntry, node: string): Versioned<ReplicaCommand> | undefined {
    return this.snap.commands.get(keys.command(node, e.id));
  }

  condition(e: Pick<ReplicaEntry, 'deployment' | 'service'>): { exhausted: string[]; nodeLost: string[] } {
    const k = `${e.deployment}/${e.service}`;
    let c = this.conditions.get(k);
    if (!c) this.conditions.set(k, (c = { exhausted: [], nodeLost: [] }));
    return c;
  }

  conditionOf(dep: string, svc: string): { exhausted: string[]; nodeLost: string[] } | undefined {
    return this.conditions.get(`${dep}/${svc}`);
  }

  deleteOp(v: { key: string; modRevision: number }): Op {
    this.deleted.add(v.key);
    return { op: 'delete', key: v.key, modRevision: v.modRevision };
  }

  /** Deletes of desired keys of a replica (all of them unless named) and of the restart command beside each. */
  deleteCopies(e: ReplicaEntry, copies: readonly Copy[] = e.copies): Op[] {
    const ops: Op[] = [];
    for (const c of copies) {
      ops.push(this.deleteOp(c));
      const cmd = this.command(e, c.desired.spec.node);
      if (cmd) ops.push(this.deleteOp(cmd));
    }
    return ops;
  }

  /** Removes every copy of a replica, with its commands and decision. */
  remove(e: ReplicaEntry, reason: RemoveReason): void {
    const ops = [this.deploymentGuard(e.deployment), ...this.deleteCopies(e)];
    const dec = this.snap.decisions.get(keys.decision(e.deployment, e.id));
    if (dec) ops.push(this.deleteOp(dec));
    const nodes = e.copies.map((c) => c.desired.spec.node);
    this.plan.stop.push({ replica: e.id, deployment: e.deployment, service: e.service, nodes, reason });
    this.replicaAct(e, 'remove', ops, 'replica_removed', { nodes, reason });
  }

  /**
   * One act on one replica with its audit record, shaped alike by every job: labelled
   * `<verb> <replica>`, reported on its deployment, the record naming the replica and its service.
   */
  replicaAct(e: Pick<ReplicaEntry, 'id' | 'deployment' | 'service'>, verb: string, ops: Op[], type: AuditType, payload: Record<string, unknown>, metrics?: SchedulerAct['metrics']): void {
    this.plan.acts.push({
      label: `${verb} ${e.id}`,
      subject: `deployment/${e.deployment}`,
      ops,
      audit: [{ type, time: this.now, deployment: e.deployment, payload: { replica: e.id, service: e.service, ...payload } }],
      ...(metrics ? { metrics } : {}),
    });
  }
}
