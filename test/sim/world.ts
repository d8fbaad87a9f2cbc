// The deterministic simulation: every controller's real decide code (scheduler, rollout, drain,
// rebalancer — their ControllerSpecs, as the runtime runs them) and simulated node-agents on one
// in-memory store that applies the writer's own compare-and-swap rules (test/support/memory-store.ts).
// One seeded PRNG and a fake clock drive everything: which component acts next, agent delays,
// which faults fire. Same seed, same trace. Faults: stale decisions (a pass decided before another
// controller's acts landed: CAS conflicts), lost replies (an act lands, its controller is told it
// failed), leader changes (leader-local state lost), agents dying and returning, containers
// crashing, operator actions (scale, new image, cordon, drain, delete and re-create).
import { keys } from '../../src/api/keys.js';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type Deployment, type NodeDrain, type ReplicaCommand, type ReplicaDesired, type ReplicaObserved, type RolloutPlan, type ServiceSpec } from '../../src/api/types.js';
import type { ControllerSpec, PassResult } from '../../src/runtime/runner.js';
import { FAST } from '../../src/timings.js';
import { CONTROLLERS } from '../../controllers/index.js';
import { Harness } from '../support/harness.js';
import { MemoryStore } from '../support/memory-store.js';
import { prng } from '../support/random.js';
import { ALL_INVARIANTS, type Invariant } from './invariants.js';

export const T0 = Date.parse('2026-11-21T10:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();


export interface SimOptions {
  nodes: number;
  steps: number;
  /** Steps at the end with no faults and every agent up: the liveness window. */
  quietSteps: number;
  /** Print every step (SIM_TRACE=1). */
  trace?: boolean;
}

type AnyHarness = Harness<unknown, unknown, unknown, PassResult<unknown, unknown>>;

export class SimFailure extends Error {
  override name = 'SimFailure';
}

export class Sim {
  readonly store = new MemoryStore();
  now = T0;
  readonly r: () => number;
  readonly controllers: [string, AnyHarness][];
  readonly nodes: string[];
  readonly down = new Set<string>();
  /** Per node and replica: when the simulated container becomes running (pending starts). */
  private readonly startsAt = new Map<string, number>();
  readonly trace: string[] = [];
  faults = true;
  step = 0;
  /** Simulated time from the end of faults to convergence. */
  quietMs = 0;

  constructor(
    readonly seed: number,
    readonly opts: SimOptions,
  ) {
    this.r = prng(seed);
    this.nodes = Array.from({ length: opts.nodes }, (_, i) => `n${i + 1}`);
    this.controllers = Object.entries(CONTROLLERS).map(([name, make]) => [name, new Harness(this.store, make(FAST) as ControllerSpec<unknown, unknown, unknown, PassResult<unknown, unknown>>) as AnyHarness]);
    for (const n of this.nodes) this.addNode(n);
    this.deploy('app', { web: this.service(3, 1), api: this.service(2, 1) });
    this.deploy('side', { worker: this.service(2, 1) });
  }

  // ------------------------------------------------------------------ helpers

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }

  log(what: string): void {
    const line = `#${this.step} t+${((this.now - T0) / 1000).toFixed(1)}s ${what}`;
    this.trace.push(line);
    if (this.opts.trace) console.log(line);
  }

  service(replicas: number, image: number): ServiceSpec {
    return { image: `jaco-demo/busybox:${image}`, replicas, update: { minReadyTime: '1s', stepTimeout: '60s', maxUnavailable: 1 } };
  }

  private addNode(name: string, unschedulable = false): void {
    this.store.put(keys.node(name), {
      apiVersion: API_VERSION,
      kind: 'Node',
      metadata: { name, labels: {} },
      spec: unschedulable ? { unschedulable: true } : {},
      status: { capacity: { cpuMillis: 4000, memoryBytes: 8 * 1024 ** 3, gpus: 0 }, agentVersion: 'sim', registeredAt: iso(T0) },
    });
    this.heartbeat(name);
  }

  private heartbeat(name: string): void {
    this.store.put(keys.heartbeat(name), { apiVersion: API_VERSION, kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(this.now), intervalMs: 10_000, agentVersion: 'sim', dockerUp: true } });
  }

  /** What `jaco apply` writes: the deployment at its next generation, and its revision record. */
  deploy(name: string, services: Record<string, ServiceSpec>): void {
    const prev = this.store.get<Deployment>(keys.deployment(name));
    const generation = prev ? (prev.metadata.generation ?? 1) + 1 : 1;
    const d: Deployment = { apiVersion: API_VERSION, kind: 'Deployment', metadata: { name, generation, creationTimestamp: iso(this.now) }, spec: { services } };
    this.store.put(keys.deployment(name), d);
    this.store.put(keys.revision(name, generation), {
      apiVersion: API_VERSION,
      kind: 'DeploymentRevision',
      metadata: { name: `${name}-${generation}` },
      spec: { deployment: name, revision: generation, appliedAt: iso(this.now), cause: 'apply', summary: 'sim', template: d.spec },
    });
  }

  deployments(): Deployment[] {
    return this.store.under<Deployment>('deployments/').map((v) => v.value);
  }

  private desiredAt?: { rev: number; values: ReplicaDesired[] };

  /** Every desired value (decoded once per store revision: the invariants read it every step). */
  desired(): ReplicaDesired[] {
    if (this.desiredAt?.rev !== this.store.rev) this.desiredAt = { rev: this.store.rev, values: this.store.under<ReplicaDesired>('desired/').map((v) => v.value) };
    return this.desiredAt.values;
  }

  // ------------------------------------------------------------------ the agents

  /** One agent: observed follows desired after a random delay; restarts are acknowledged; a container may crash. */
  private agent(node: string): void {
    const desired = this.store.under<ReplicaDesired>(keys.desiredOf(node));
    const desiredIds = new Set(desired.map((d) => d.value.spec.replica));
    for (const { value: d } of desired) {
      const s = d.spec;
      const key = keys.observed(node, s.replica);
      const o = this.store.get<ReplicaObserved>(key);
      const started = `${node}/${s.replica}`;
      if (s.suspended) {
        if (o?.status.state !== 'stopped') this.observe(d, 'stopped', o);
        continue;
      }
      const cmd = this.store.get<ReplicaCommand>(keys.command(node, s.replica));
      const ack = cmd && cmd.spec.seq > (o?.status.ackedCommand ?? 0) ? cmd.spec.seq : undefined;
      const stale = o && (o.status.revision !== s.revision || o.status.specHash !== s.specHash);
      if (!o || stale || ack !== undefined || o.status.state === 'exited') {
        if (o?.status.state !== 'starting' || stale || ack !== undefined) {
          this.startsAt.set(started, this.now + 200 + Math.floor(this.r() * 2000));
          this.observe(d, 'starting', o, ack);
        }
        continue;
      }
      if (o.status.state === 'starting' && this.now >= (this.startsAt.get(started) ?? 0)) {
        this.observe(d, 'running', o);
        continue;
      }
      if (this.faults && o.status.state === 'running' && this.r() < 0.01) {
        this.log(`crash ${node}/${s.replica}`);
        this.observe(d, 'exited', o);
      }
    }
    // Containers without a desired key stop after a while; their observed key goes with them.
    for (const o of this.store.under<ReplicaObserved>(keys.observedOf(node))) if (!desiredIds.has(o.value.status.replica) && this.r() < 0.5) this.store.remove(o.key);
    this.heartbeat(node);
  }

  private observe(d: ReplicaDesired, state: ReplicaObserved['status']['state'], prev: ReplicaObserved | undefined, ack?: number): void {
    const s = d.spec;
    const o: ReplicaObserved = {
      apiVersion: API_VERSION,
      kind: 'ReplicaObserved',
      metadata: { name: s.replica },
      status: {
        replica: s.replica,
        node: s.node,
        deployment: s.deployment,
        service: s.service,
        state,
        revision: s.revision,
        specHash: s.specHash,
        health: 'none',
        observedAt: iso(this.now),
        ...(state === 'running' ? { startedAt: iso(this.now) } : prev?.status.startedAt ? { startedAt: prev.status.startedAt } : {}),
        ...(ack !== undefined ? { ackedCommand: ack } : prev?.status.ackedCommand !== undefined ? { ackedCommand: prev.status.ackedCommand } : {}),
        ...(state === 'exited' ? { code: 'exited' } : {}),
      } as ReplicaObserved['status'],
    };
    this.store.put(keys.observed(s.node, s.replica), o);
  }

  // ------------------------------------------------------------------ the controllers

  /** One pass of a controller, maybe with a fault: a stale decision, a lost reply, a new term. */
  private pass(name: string, h: AnyHarness): void {
    const fault = this.faults ? this.r() : 1;
    if (fault < 0.05) {
      this.log(`${name}: leader change (leader-local state lost)`);
      h.state = h.spec.initialState();
    }
    const decision = h.decide(this.now);
    if (fault >= 0.05 && fault < 0.15) {
      // Another controller's pass lands between this decision and its commit.
      const [other, oh] = this.pick(this.controllers.filter(([n]) => n !== name));
      this.log(`${name}: decided; ${other} lands first`);
      this.commit(other, oh, oh.decide(this.now), false);
    }
    if (fault >= 0.2 && fault < 0.3) {
      // The operator acts between this decision and its commit (apply, delete, cordon, drain).
      this.log(`${name}: decided; the operator acts first`);
      this.operator();
    }
    this.commit(name, h, decision, fault >= 0.15 && fault < 0.2);
  }

  private commit(name: string, h: AnyHarness, decision: PassResult<unknown, unknown>, lostReply: boolean): void {
    const landed = h.apply(decision.acts);
    const labels = decision.acts.map((a) => `${landed.has(a.label) ? '' : '✗'}${a.label}`);
    if (labels.length) this.log(`${name}: ${labels.join('; ')}${lostReply ? ' (reply lost)' : ''}`);
    this.checkActs(name, decision, landed);
    // A lost reply: the acts landed, the controller was told the pass failed (its state stays).
    if (decision.next && !lostReply) h.state = decision.next(landed);
  }

  // ------------------------------------------------------------------ the operator

  private operator(): void {
    const deps = this.deployments();
    const roll = this.r();
    if (roll < 0.25 && deps.length) {
      const d = this.pick(deps);
      const svc = this.pick(Object.keys(d.spec.services));
      const s = d.spec.services[svc]!;
      const replicas = Math.max(0, Math.min(5, (s.replicas ?? 1) + this.pick([-1, 1, 2])));
      this.log(`operator: scale ${d.metadata.name}/${svc} to ${replicas}`);
      this.deploy(d.metadata.name, { ...d.spec.services, [svc]: { ...s, replicas } });
    } else if (roll < 0.5 && deps.length) {
      const d = this.pick(deps);
      const svc = this.pick(Object.keys(d.spec.services));
      const s = d.spec.services[svc]!;
      const image = s.image.endsWith(':1') ? 2 : 1;
      this.log(`operator: new image for ${d.metadata.name}/${svc} (:${image})`);
      this.deploy(d.metadata.name, { ...d.spec.services, [svc]: { ...s, image: `jaco-demo/busybox:${image}` } });
    } else if (roll < 0.6) {
      const n = this.pick(this.nodes);
      const node = this.store.get<{ spec: { unschedulable?: boolean } }>(keys.node(n));
      if (!node) return;
      const cordon = !node.spec.unschedulable;
      this.log(`operator: ${cordon ? 'cordon' : 'uncordon'} ${n}`);
      this.store.put(keys.node(n), { ...node, spec: cordon ? { unschedulable: true } : {} });
    } else if (roll < 0.7) {
      const n = this.pick(this.nodes);
      if (this.store.has(keys.drain(n)) || this.store.keys('drains/').length) return;
      this.log(`operator: drain ${n}`);
      const node = this.store.get<{ spec: object }>(keys.node(n));
      if (node) this.store.put(keys.node(n), { ...node, spec: { unschedulable: true } });
      this.store.put(keys.drain(n), { apiVersion: API_VERSION, kind: 'NodeDrain', metadata: { name: n }, spec: { node: n, timeout: '30s', force: false, remove: false, requestedAt: iso(this.now) } } satisfies NodeDrain);
    } else if (roll < 0.75 && deps.some((d) => d.metadata.name === 'side')) {
      this.log('operator: delete side');
      this.store.remove(keys.deployment('side'));
    } else if (roll < 0.8 && !deps.some((d) => d.metadata.name === 'side')) {
      this.log('operator: re-create side');
      this.deploy('side', { worker: this.service(2, 1) });
    }
  }

  // ------------------------------------------------------------------ the run

  /** One step: time passes, then an agent, a controller, the operator, or a fault acts. */
  tick(): void {
    this.step++;
    this.now += 50 + Math.floor(this.r() * 1500);
    const roll = this.r();
    if (!this.faults) for (const n of this.nodes) this.agent(n); // quiet: every agent keeps up
    if (roll < 0.35) {
      const n = this.pick(this.nodes);
      if (!this.down.has(n)) this.agent(n);
    } else if (roll < 0.8) {
      const [name, h] = this.pick(this.controllers);
      this.pass(name, h);
    } else if (roll < 0.9) {
      if (this.faults) this.operator();
    } else if (this.faults) {
      const n = this.pick(this.nodes);
      if (this.down.has(n)) {
        this.log(`agent ${n} returns`);
        this.down.delete(n);
      } else if (this.down.size < this.nodes.length - 2 && this.r() < 0.3) {
        this.log(`agent ${n} dies`);
        this.down.add(n);
      }
    }
    // Finished drains are cleared by the operator (the next one may start).
    for (const d of this.store.under<NodeDrain>('drains/')) if (['completed', 'aborted'].includes(d.value.status?.state ?? '')) this.store.remove(d.key);
    this.check(ALL_INVARIANTS);
  }

  check(invariants: readonly Invariant[]): void {
    for (const inv of invariants) {
      const broken = inv.check(this);
      if (broken) throw new SimFailure(`seed ${this.seed}, step ${this.step}: invariant "${inv.name}" broken: ${broken}`);
    }
  }

  /** Checks on the acts of one pass (e.g. nothing removed as deleted while its deployment exists). */
  private checkActs(name: string, decision: PassResult<unknown, unknown>, landed: ReadonlySet<string>): void {
    for (const act of decision.acts) {
      if (!landed.has(act.label)) continue;
      for (const a of act.audit ?? []) {
        const p = a.payload as { reason?: string; replica?: string };
        if (a.type === 'replica_removed' && p.reason === 'deployment_deleted' && a.deployment && this.store.has(keys.deployment(a.deployment)))
          throw new SimFailure(`seed ${this.seed}, step ${this.step}: invariant "no replica of an existing deployment removed as deleted" broken: ${name} removed ${p.replica} while deployments/${a.deployment} exists`);
      }
    }
  }

  /** The whole run: faults for steps − quietSteps, then a quiet window in which everything must converge. */
  run(): void {
    for (let i = 0; i < this.opts.steps - this.opts.quietSteps; i++) this.tick();
    this.faults = false;
    this.log('faults stop; every agent returns; the operator uncordons every node and cancels drains');
    this.down.clear();
    for (const n of this.nodes) {
      const node = this.store.get<{ spec: object }>(keys.node(n));
      if (node) this.store.put(keys.node(n), { ...node, spec: {} });
    }
    for (const k of this.store.keys('drains/')) this.store.remove(k);
    const quietFrom = this.now;
    for (let i = 0; i < this.opts.quietSteps; i++) {
      this.tick();
      if (!converged(this)) {
        this.quietMs = this.now - quietFrom;
        return;
      }
    }
    throw new SimFailure(`seed ${this.seed}: not converged ${((this.now - quietFrom) / 1000).toFixed(0)} s (${this.opts.quietSteps} steps) after faults stopped: ${converged(this)}`);
  }
}

/**
 * Liveness: every wanted replica of every deployment runs once, at its service's current spec — or,
 * when the rollout to the deployment's current generation was aborted, at the spec it reverted to
 * (seed 001: an aborted rollout stays reverted until the next apply).
 */
export function converged(sim: Sim): string | undefined {
  const desired = sim.desired();
  const problems: string[] = [];
  for (const d of sim.deployments()) {
    for (const [svc, spec] of Object.entries(d.spec.services)) {
      const want = spec.replicas ?? 1;
      const current = templateOf(d.metadata.generation ?? 1, spec).specHash;
      const plan = sim.store.get<RolloutPlan>(keys.rollout(d.metadata.name, svc))?.spec;
      // Reverted until the next apply (any new generation of the deployment counts).
      const target = plan?.state === 'aborted' && plan.toRevision === (d.metadata.generation ?? 1) ? plan.fromHash : current;
      const ids = new Set<string>();
      for (const r of desired.filter((x) => x.spec.deployment === d.metadata.name && x.spec.service === svc)) {
        const o = sim.store.get<ReplicaObserved>(keys.observed(r.spec.node, r.spec.replica));
        if (o?.status.state === 'running' && o.status.specHash === r.spec.specHash && r.spec.specHash === target) ids.add(r.spec.replica);
      }
      if (ids.size !== want) problems.push(`${d.metadata.name}/${svc}: ${ids.size} of ${want} running at ${target === current ? 'its current spec' : 'the spec its aborted rollout reverted to'}`);
    }
  }
  return problems.length ? problems.join('; ') : undefined;
}

