// The chaos driver. On a ChaosCluster with a workload of three deployments, an operator rolls out,
// scales and drains at random times while two fault lanes inject, at random (one seeded PRNG,
// test/support/random.ts): kill -9 of a controller copy (mostly the scheduler's leader), of an
// agent, of an etcd member (each started again); SIGSTOP/SIGCONT of each; an etcd member removed
// and added back from an empty data dir; cuts between a component and etcd (all its proxies, or
// the one to a single member); every etcd lease revoked at once; the whole store restored from a
// snapshot taken earlier in the run, under running controllers and agents; one etcd member cut
// from its peers (a minority that must refuse writes and linearizable reads); a node cut from the
// cluster for longer than the node-loss timeout, then healed. A checker samples etcd and
// `docker ps` throughout (test/chaos/invariants.ts). Once the faults stop, the cluster must
// converge within `convergeMs`. The run is bounded in faults and time; the same seed gives the
// same choices (the real processes' timing is not replayable, the fault schedule is).
import { keys } from '../../src/api/keys.js';
import type { Deployment, Node, NodeSpecRecord, ReplicaDesired } from '../../src/api/types.js';
import { nodeAsDecided } from '../../src/api/nodes.js';
import { FAST, PRODUCTION } from '../../src/timings.js';
import { prng } from '../support/random.js';
import { sleep } from '../support/wait.js';
import { bounded, ChaosCluster, type Component, type EtcdNode, type StoreSnapshot } from './cluster.js';
import { ActChecker, allowedAfterRestore, appliedShape, KeptAcrossRestore, lostApplies, notConverged, simViolations, snapshot, StrayTracker, type ActCoverage, type Snapshot, type Violation } from './invariants.js';
import { MAX_BACKOFF_MS } from '../../src/store/reflector.js';
import { formatGap, SampleGaps, type Gap } from './gaps.js';

export interface ChaosOptions {
  seed: number;
  /** How long faults are injected. */
  chaosMs: number;
  /** At most this many faults. */
  maxFaults: number;
  /** After the faults stop, the cluster must converge within this. */
  convergeMs?: number;
  /** Concurrent fault lanes (faults on distinct targets overlap). */
  lanes?: number;
  log?: (line: string) => void;
}

export interface ChaosReport {
  seed: number;
  faults: Record<string, number>;
  operator: Record<string, number>;
  violations: Violation[];
  samples: number;
  /** What the act-level checks (audit record per placement, writes within a leader's term) covered. */
  acts: ActCoverage;
  /** The longest a stray container stayed with its agent up (the margin under the bound), and the bound. */
  longestStray: { ms: number; detail: string; boundMs: number };
  /** jaco processes that exited without the harness ending them, and why (their last log line). */
  exits: string[];
  /** The longest time without a sample of etcd and `docker ps`, and why (undefined: none failed). */
  longestGap?: Gap;
  /** When the run started (the gap's times are relative to it). */
  t0: number;
  /** Each node cut from the cluster: its replicas then, and how long until all were re-placed elsewhere (undefined: not while it was away). */
  nodeCuts: NodeCut[];
  /** Each etcd member cut from its peers: what a write and a linearizable read through it got. */
  minorityProbes: string[];
  /** Each restore of the store: the snapshot's age and what it rolled back. */
  restores: string[];
  /** From the end of the faults until converged (undefined: not within convergeMs). */
  convergeMs?: number;
  lastNotConverged?: string;
  chaosMs: number;
  errors: string[];
  trace: string[];
}

export interface NodeCut {
  node: string;
  replicas: number;
  cutMs: number;
  replacedMs?: number;
}

interface Svc {
  image: 1 | 2;
  replicas: number;
  /** Bumped to force a new revision without a new image. */
  gen: number;
}

/** Fault kinds and their weights (cards per deck). */
export const FAULT_KINDS = [
  ['kill -9 controller', 3],
  ['kill -9 agent', 2],
  ['kill -9 etcd member', 2],
  ['SIGSTOP controller', 1],
  ['SIGSTOP agent', 1],
  ['SIGSTOP etcd member', 1],
  ['etcd member rejoin from empty data', 1],
  ['cut component from etcd', 2],
  ['revoke every lease', 1],
  ['etcd restored from an earlier snapshot', 1],
  ['etcd member cut from its peers', 1],
  ['node cut from the cluster', 1],
] as const;

/**
 * Faults on etcd itself, and the node cut: one at a time (a second waits for the first to be
 * undone). A node cut must see its replicas re-placed while it is away, which an etcd without a
 * quorum or a restore in the middle of it would prevent (seed 3: a peer cut and a restore during
 * one held it 27 s, nothing re-placed).
 */
const ETCD_KINDS = new Set<string>(['kill -9 etcd member', 'SIGSTOP etcd member', 'etcd member rejoin from empty data', 'revoke every lease', 'etcd restored from an earlier snapshot', 'etcd member cut from its peers', 'node cut from the cluster']);

const OPERATOR_KINDS = [
  ['rollout (new image)', 2],
  ['rollout (new env)', 1],
  ['scale', 2],
  ['drain', 2],
] as const;

const WORKLOAD: Record<string, { min: number; max: number; extra: string }> = {
  // A health-checked service, a plain one, and a packed one: rollouts, moves and drains on each.
  web: { min: 2, max: 4, extra: "      healthcheck: {test: [CMD, 'true'], interval: 5s, timeout: 5s, retries: 3}\n" },
  api: { min: 1, max: 3, extra: '' },
  worker: { min: 1, max: 3, extra: '      placement: {mode: pack}\n' },
};

function manifest(name: string, s: Svc): string {
  return `apiVersion: jaco.dev/v1
kind: Deployment
metadata:
  name: ${name}
spec:
  services:
    ${name}:
      image: jaco-demo/busybox:${s.image}
      replicas: ${s.replicas}
      command: [sh, -c, 'trap "exit 0" TERM; sleep 3600 & wait']
      stopGracePeriod: 2s
      env: {GEN: '${s.gen}'}
      update: {minReadyTime: 1s, stepTimeout: 60s}
${WORKLOAD[name]!.extra}`;
}

/** The shape appliedShape() reads back from etcd for that manifest. */
function shapeOf(name: string, s: Svc): string {
  return appliedShape({ spec: { services: { [name]: { image: `jaco-demo/busybox:${s.image}`, replicas: s.replicas, env: { GEN: String(s.gen) } } } } } as never);
}

export class Chaos {
  readonly r: () => number;
  readonly faults: Record<string, number> = {};
  readonly operator: Record<string, number> = {};
  readonly violations: Violation[] = [];
  readonly trace: string[] = [];
  /** Faults the harness could not inject or undo (reported; not jaco's violations). */
  readonly errors: string[] = [];
  private seenViolations = new Set<string>();
  readonly t0 = Date.now();
  private services = new Map<string, Svc>();
  /** Per deployment: the last acknowledged apply's shape, then later ones of unknown outcome. */
  private allowed = new Map<string, string[]>();
  /** Every apply as it is sent (deployment, shape), in order: a sample allows those sent while it read. */
  private sent: [string, string][] = [];
  private busy = new Set<string>();
  private etcdBusy = false;
  private injected = 0;
  /** Per agent: faults holding it now, and when the last one ended. */
  private agentHeld = new Map<string, number>();
  private agentFreeAt = new Map<string, number>();
  private globalHeld = 0;
  private globalFreeAt = 0;
  private stray: StrayTracker;
  private acts = new ActChecker();
  private keptAcrossRestore = new KeptAcrossRestore();
  samples = 0;
  last?: Snapshot;
  /** Bumped when a restore starts: what was acknowledged before it may be undone. */
  private storeEpoch = 0;
  /** A restore is under way: no sample is taken (the one in flight is waited for first). */
  private restoring = false;
  private inCheck: Promise<unknown> = Promise.resolve();
  /** Snapshots of the store taken during the run, with the deployments each holds (their applied shapes). */
  private snapshots: { snap: StoreSnapshot; shapes: Map<string, string> }[] = [];
  readonly nodeCuts: NodeCut[] = [];
  readonly minorityProbes: string[] = [];
  readonly restores: string[] = [];

  constructor(
    readonly c: ChaosCluster,
    readonly opts: ChaosOptions,
  ) {
    this.r = prng(opts.seed);
    const t = c.timings === 'fast' ? FAST : PRODUCTION;
    // One resync, plus the container's stop grace (2 s), plus two sampling periods — plus the
    // reflector's longest retry back-off: an agent whose link to etcd was cut hears of a deleted
    // desired key only once its watch is back, up to that long after the cut ends (a stray of
    // 3.1 s against a 6 s bound was measured; a watch retried at 5 s would have broken it).
    this.stray = new StrayTracker(t.dockerResyncMs + 2_000 + 2_000 + MAX_BACKOFF_MS);
    // The harness stands in for the supervisor (deploy/systemd: Restart=always, RestartSec=2): a
    // process that exits on its own is started again 2 s later, and the report says so.
    c.onExit = (comp, code, signal) => {
      setTimeout(() => {
        // By then its last words have reached the log file.
        const why = `${signal ?? `exit ${code}`}: ${comp.tail(1).slice(0, 200)}`;
        this.exits.push(`${comp.name} (${why})`);
        this.log(`${comp.name} exited on its own (${why}); started again`);
        if (!comp.running && !comp.killing && !c.isStopping) c.launch(comp);
      }, 2000);
    };
  }

  /** Processes that exited without the harness ending them (each started again, as a supervisor would). */
  readonly exits: string[] = [];

  log(line: string): void {
    const l = `t+${((Date.now() - this.t0) / 1000).toFixed(1)}s ${line}`;
    this.trace.push(l);
    this.opts.log?.(l);
  }

  private pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.r() * xs.length)]!;
  }

  private faultDeck: string[] = [];
  private operatorDeck: string[] = [];

  /**
   * The next card of a shuffled deck holding each kind `weight` times, dealt again when empty:
   * every kind comes up within one deck's worth of draws, however short the run.
   */
  private draw(deck: string[], kinds: readonly (readonly [string, number])[]): string {
    if (!deck.length) {
      for (const [k, w] of kinds) for (let i = 0; i < w; i++) deck.push(k);
      for (let i = deck.length - 1; i > 0; i--) {
        const j = Math.floor(this.r() * (i + 1));
        [deck[i], deck[j]] = [deck[j]!, deck[i]!];
      }
    }
    return deck.pop()!;
  }

  private between(lo: number, hi: number): number {
    return lo + Math.floor(this.r() * (hi - lo));
  }

  // ---------------------------------------------------------------- workload and operator

  async applyAll(): Promise<void> {
    for (const name of Object.keys(WORKLOAD)) {
      this.services.set(name, { image: 1, replicas: name === 'web' ? 3 : 2, gen: 1 });
      await this.apply(name);
    }
  }

  private async apply(name: string): Promise<boolean> {
    const s = this.services.get(name)!;
    const shape = shapeOf(name, s);
    this.allowed.set(name, [...(this.allowed.get(name) ?? []), shape]);
    this.sent.push([name, shape]);
    const epoch = this.storeEpoch;
    const r = await this.c.jaco(['apply', '-f', '-'], manifest(name, s), 60_000).catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
    // Acknowledged by the store it was sent to; if a restore came between, maybe by the old one,
    // whose writes after the snapshot the restore undid: then it is one possibility among others.
    if (r.code === 0) this.allowed.set(name, epoch === this.storeEpoch ? [shape] : [...(this.allowed.get(name) ?? []), shape]);
    this.log(`apply ${name} image:${s.image} replicas:${s.replicas} gen:${s.gen} → ${r.code === 0 ? 'acknowledged' : `exit ${r.code} (${r.stderr.trim().split('\n')[0]})`}`);
    return r.code === 0;
  }

  private count(into: Record<string, number>, kind: string): void {
    into[kind] = (into[kind] ?? 0) + 1;
  }

  /** One operator action: a rollout, a scale, a drain, or an uncordon once a drain ended. */
  async operate(mayDrain: boolean): Promise<void> {
    const snap = this.last;
    const cordoned = snap ? await this.cordoned() : [];
    const draining = snap?.drains.some((d) => !d.status || d.status.state === 'pending' || d.status.state === 'draining');
    if (cordoned.length && !draining) {
      const n = cordoned[0]!;
      const r = await this.c.jaco(['node', 'uncordon', n]);
      this.log(`operator: uncordon ${n} → exit ${r.code}`);
      this.count(this.operator, 'uncordon');
      return;
    }
    let kind = this.draw(this.operatorDeck, OPERATOR_KINDS);
    if (kind === 'drain' && (!mayDrain || draining || cordoned.length)) kind = 'scale';
    if (kind === 'drain') {
      const n = this.pick(this.c.agents).name;
      const r = await this.c.jaco(['node', 'drain', n, '--timeout', '30s']);
      this.log(`operator: drain ${n} → exit ${r.code}${r.code ? ` ${r.stderr.trim()}` : ''}`);
      this.count(this.operator, 'drain');
      return;
    }
    const name = this.pick([...this.services.keys()]);
    const s = this.services.get(name)!;
    const w = WORKLOAD[name]!;
    if (kind === 'rollout (new image)') s.image = s.image === 1 ? 2 : 1;
    else if (kind === 'rollout (new env)') s.gen++;
    else s.replicas = s.replicas >= w.max ? s.replicas - 1 : s.replicas <= w.min ? s.replicas + 1 : s.replicas + (this.r() < 0.5 ? -1 : 1);
    this.count(this.operator, kind);
    await this.apply(name);
  }

  /** Nodes cordoned as operators see them: nodes/ joined with nodespecs/ (src/api/nodes.ts nodeAsDecided). */
  private async cordoned(): Promise<string[]> {
    const [nodes, decided] = await Promise.all([bounded(this.c.store.list<Node>(keys.nodes()), 5000, 'nodes'), bounded(this.c.store.list<NodeSpecRecord>(keys.nodeSpecs()), 5000, 'nodespecs')]);
    const specs = new Map(decided.items.map((i) => [i.value.metadata.name, i.value]));
    return nodes.items.filter((i) => nodeAsDecided(i.value, specs.get(i.value.metadata.name)).spec?.unschedulable).map((i) => i.value.metadata.name);
  }

  // ---------------------------------------------------------------- checker

  private healthySince(node: string): number | undefined {
    if (this.globalHeld > 0 || (this.agentHeld.get(node) ?? 0) > 0) return undefined;
    return Math.max(this.globalFreeAt, this.agentFreeAt.get(node) ?? 0);
  }

  /** Why the last sample could not be taken (etcd or Docker did not answer), for the report. */
  lastSampleError?: string;
  /** Streaks of failed samples: the longest gap between two samples and its causes, for the report. */
  readonly gaps = new SampleGaps(this.t0);
  private probing = false;
  private probedAt = 0;

  /** One sample: every invariant over a fresh snapshot (none while the store is being restored). */
  check(): Promise<Snapshot | undefined> {
    if (this.restoring) return Promise.resolve(undefined);
    const p = this.checkNow();
    this.inCheck = p.catch(() => undefined);
    return p;
  }

  private async checkNow(): Promise<Snapshot | undefined> {
    // The applies allowed as the read starts: an apply acknowledged while a slow read is on its way
    // (a paused etcd member) must not be held against a snapshot taken before it landed — it was
    // still in flight then, and its predecessor allowed (run 3 of 2026-11-25 reported web's
    // replicas 4 as a lost apply 0.8 s after the apply to 3 was acknowledged).
    const allowed = new Map(this.allowed);
    const sentBefore = this.sent.length;
    let s: Snapshot;
    try {
      s = await snapshot(this.c.store, () => this.c.containers());
    } catch (e) {
      // No quorum right now: not a sample. Said once per streak, with the error, and probed (each
      // member, Docker, the checker's own client) so a checker that cannot read a healthy cluster
      // shows why.
      this.lastSampleError = (e as Error).message;
      if (this.gaps.failed(this.lastSampleError)) this.log(`sample failed: ${this.lastSampleError}`);
      this.probeStreak();
      return undefined;
    }
    const gap = this.gaps.ok(Date.now());
    if (gap && gap.failed > 1) this.log(`samples again after ${gap.failed} failed (${(gap.ms / 1000).toFixed(1)} s without a sample)`);
    this.samples++;
    this.last = s;
    // And every apply sent while the snapshot read: its reads go one after another, so the
    // deployments can be read after an apply sent meanwhile has landed (make test of 5dcfcb1
    // reported web's replicas 2 as a lost apply while the apply to 2 was on its way).
    for (const [name, shape] of this.sent.slice(sentBefore)) allowed.set(name, [...(allowed.get(name) ?? []), shape]);
    const acts = await this.acts.check(this.c.store, s);
    for (const v of [...simViolations(s), ...this.stray.check(s, (n) => this.healthySince(n)), ...lostApplies(s, allowed), ...acts, ...this.keptAcrossRestore.check(s)]) this.violation(v);
    return s;
  }

  /**
   * While samples fail for more than 3 s, probes what answers (ChaosCluster.probe) every 5 s,
   * in the background: the sampling goes on meanwhile.
   */
  private probeStreak(): void {
    const now = Date.now();
    if (this.probing || this.gaps.streakMs(now) < 3000 || now - this.probedAt < 5000) return;
    this.probing = true;
    this.probedAt = now;
    void this.c
      .probe()
      .then(
        (found) => found,
        (e: Error) => `probe failed: ${e.message}`,
      )
      .then((found) => {
        this.probing = false;
        this.gaps.probe(found);
        this.log(`probe while samples fail: ${found}`);
      });
  }

  // ---------------------------------------------------------------- faults

  private hold(target: Component | 'etcd'): () => void {
    const isAgent = target !== 'etcd' && this.c.agents.includes(target);
    if (target === 'etcd') this.globalHeld++;
    else if (isAgent) this.agentHeld.set(target.name, (this.agentHeld.get(target.name) ?? 0) + 1);
    return () => {
      if (target === 'etcd') {
        this.globalHeld--;
        this.globalFreeAt = Date.now();
      } else if (isAgent) {
        this.agentHeld.set(target.name, this.agentHeld.get(target.name)! - 1);
        this.agentFreeAt.set(target.name, Date.now());
      }
    };
  }

  private freeComponents(list: Component[]): Component[] {
    return list.filter((c) => !this.busy.has(c.name));
  }

  /** One fault, chosen at random among those whose target is free; resolves once it is undone. */
  async fault(): Promise<void> {
    const kind = this.draw(this.faultDeck, FAULT_KINDS);
    const etcdKind = ETCD_KINDS.has(kind);
    // Waits rather than dropping the card: every kind is dealt in a run as long as one deck.
    while (etcdKind && (this.etcdBusy || this.c.etcd.some((e) => !e.running))) await sleep(200);
    if (etcdKind) this.etcdBusy = true;
    try {
      await this.run(kind);
    } finally {
      if (etcdKind) this.etcdBusy = false;
    }
  }

  private async withTarget(c: Component, fn: () => Promise<void>): Promise<void> {
    this.busy.add(c.name);
    const release = this.hold(c);
    try {
      await fn();
    } finally {
      release();
      this.busy.delete(c.name);
    }
  }

  private async run(kind: string): Promise<void> {
    const note = (what: string) => {
      this.injected++;
      this.count(this.faults, kind);
      this.log(`FAULT ${what}`);
    };
    switch (kind) {
      case 'kill -9 controller': {
        // The scheduler's leader three times in four, else a copy at random.
        const leader = await this.c.leaderOf('scheduler').catch(() => undefined);
        const free = this.freeComponents(this.c.controllers);
        const target = leader && free.includes(leader) && this.r() < 0.75 ? leader : free.length ? this.pick(free) : undefined;
        if (!target) return;
        await this.withTarget(target, async () => {
          note(`kill -9 ${target.name}${target === leader ? ' (scheduler leader)' : ''}`);
          await target.kill('SIGKILL');
          await sleep(this.between(300, 3000));
          this.c.launch(target);
        });
        return;
      }
      case 'kill -9 agent': {
        const free = this.freeComponents(this.c.agents);
        if (!free.length) return;
        const target = this.pick(free);
        await this.withTarget(target, async () => {
          note(`kill -9 agent ${target.name}`);
          await target.kill('SIGKILL');
          await sleep(this.between(300, 4000));
          this.c.launch(target);
          await this.c.waitReady(target.name, 60_000).catch((e: Error) => this.log(`(${target.name} not Ready yet: ${e.message})`));
        });
        return;
      }
      case 'SIGSTOP controller':
      case 'SIGSTOP agent': {
        const free = this.freeComponents(kind.endsWith('agent') ? this.c.agents : this.c.controllers);
        if (!free.length) return;
        const target = this.pick(free);
        const ms = this.between(1000, 5000);
        await this.withTarget(target, async () => {
          note(`SIGSTOP ${target.name} for ${ms} ms`);
          target.signal('SIGSTOP');
          await sleep(ms);
          target.signal('SIGCONT');
        });
        return;
      }
      case 'cut component from etcd': {
        const free = this.freeComponents(this.c.components);
        if (!free.length) return;
        const target = this.pick(free);
        const ms = this.between(1000, 6000);
        const one = this.r() < 0.3 ? Math.floor(this.r() * target.proxies.length) : undefined;
        await this.withTarget(target, async () => {
          note(`cut ${target.name} from ${one === undefined ? 'etcd' : `etcd member m${one}`} for ${ms} ms`);
          if (one === undefined) target.cut();
          else target.proxies[one]!.pause();
          await sleep(ms);
          target.mend();
        });
        return;
      }
      case 'kill -9 etcd member':
      case 'SIGSTOP etcd member':
      case 'etcd member rejoin from empty data':
      case 'etcd member cut from its peers': {
        const raft = await this.c.raftLeader();
        const e: EtcdNode = raft && this.r() < 0.5 ? raft : this.pick(this.c.etcd);
        const release = this.hold('etcd');
        try {
          if (kind === 'kill -9 etcd member') {
            note(`kill -9 etcd ${e.spec.name}${e === raft ? ' (raft leader)' : ''}`);
            await e.kill('SIGKILL');
            await sleep(this.between(1000, 4000));
            await this.c.restartEtcd(e);
          } else if (kind === 'SIGSTOP etcd member') {
            const ms = this.between(1000, 4000);
            note(`SIGSTOP etcd ${e.spec.name}${e === raft ? ' (raft leader)' : ''} for ${ms} ms`);
            e.signal('SIGSTOP');
            await sleep(ms);
            e.signal('SIGCONT');
          } else if (kind === 'etcd member cut from its peers') {
            const ms = this.between(0, 3000);
            note(`etcd ${e.spec.name}${e === raft ? ' (raft leader)' : ''} cut from its peers for ${2500 + ms} ms`);
            this.c.isolateEtcd(e);
            try {
              // Past an election timeout (1 s): a leader cut off has stepped down, the others elected one.
              await sleep(2500);
              await this.probeMinority(e);
              await sleep(ms);
            } finally {
              this.c.healEtcd(e);
            }
          } else {
            note(`etcd ${e.spec.name} removed, wiped, added back empty`);
            await this.c.rejoinEtcd(e);
          }
        } finally {
          release();
        }
        return;
      }
      case 'etcd restored from an earlier snapshot': {
        const taken = await this.snapshotTaken();
        if (!taken) throw new Error('no snapshot of the store was taken to restore');
        const release = this.hold('etcd');
        this.restoring = true;
        try {
          await this.inCheck;
          // What runs and is desired just before the members stop: the restored store must not
          // lose a container it still wants (KeptAcrossRestore).
          const running = await snapshot(this.c.store, () => this.c.containers()).catch(() => undefined);
          if (running) this.keptAcrossRestore.begin(running, taken.snap.revision);
          const header = await bounded(this.c.store.header(), 5000, 'revision').catch(() => undefined);
          const at = Number(header?.revision ?? NaN);
          const before = header?.cluster_id ?? '?';
          note(`etcd restored from the snapshot of ${((Date.now() - taken.snap.takenAt) / 1000).toFixed(1)} s ago (revision ${taken.snap.revision}; the store was at ${at})`);
          this.storeEpoch++;
          const sentFrom = this.sent.length;
          const t = Date.now();
          await this.c.restoreAll(taken.snap);
          const after = await bounded(this.c.store.header(), 5000, 'cluster id').then((h) => h.cluster_id, () => '?');
          this.log(`store restored in ${Date.now() - t} ms: cluster id ${before} → ${after}`);
          // The restored store is the truth: each deployment is what the snapshot holds, or an
          // apply sent since the restore began (its outcome unknown until acknowledged).
          for (const [name, shapes] of allowedAfterRestore(this.services.keys(), taken.shapes, this.sent.slice(sentFrom))) this.allowed.set(name, shapes);
          this.acts.storeReplaced();
          // Watched from the restore until well past the stray bound: an agent acts within it.
          this.keptAcrossRestore.restored(Date.now(), 2 * this.stray.boundMs);
          this.log(`${this.keptAcrossRestore.watching} containers the restored store may still want are watched`);
          // Their revisions after the snapshot's belong to the old store's history, not this one's.
          this.snapshots = this.snapshots.filter((x) => x.snap.revision <= taken.snap.revision);
          this.restores.push(`to revision ${taken.snap.revision} from ${at}, a snapshot ${((t - taken.snap.takenAt) / 1000).toFixed(1)} s old, in ${Date.now() - t} ms (cluster id ${before} → ${after})`);
        } finally {
          this.restoring = false;
          release();
        }
        return;
      }
      case 'node cut from the cluster': {
        const free = this.freeComponents(this.c.agents);
        if (!free.length) return;
        const target = this.pick(free);
        const t = this.c.timings === 'fast' ? FAST : PRODUCTION;
        // NotReady once its heartbeat lease lapses, lost after the grace: past both, by a second.
        const lossMs = t.heartbeatTtlSec * 1000 + t.nodeLostGraceMs + 1000;
        await this.withTarget(target, async () => {
          // Read before the cut, once etcd answers (a restore may have it down for seconds).
          let had: string[] | undefined;
          for (const until = Date.now() + 30_000; !had && Date.now() < until; ) had = await this.desiredOn(target.name).catch(() => sleep(500).then(() => undefined));
          if (!had) throw new Error(`the replicas of ${target.name} could not be read before its cut`);
          const start = Date.now();
          note(`node ${target.name} cut from the cluster (every link of its agent to etcd; ${had.length} replicas) for ${lossMs} ms or until they are re-placed`);
          target.cut();
          const cut: NodeCut = { node: target.name, replicas: had.length, cutMs: 0 };
          try {
            await sleep(lossMs);
            // Held away until every replica it had is desired elsewhere, or 20 s more at most.
            for (const until = Date.now() + 20_000; Date.now() < until; await sleep(500)) {
              const left = await this.desiredOn(target.name).catch(() => had!);
              if (!had.some((r) => left.includes(r))) {
                cut.replacedMs = Date.now() - start;
                break;
              }
            }
          } finally {
            target.mend();
            cut.cutMs = Date.now() - start;
            this.nodeCuts.push(cut);
            this.log(`node ${target.name} back after ${cut.cutMs} ms; ${cut.replacedMs === undefined ? 'its replicas NOT all re-placed while away' : `its ${had.length} replicas re-placed elsewhere ${cut.replacedMs} ms into the cut`}`);
          }
        });
        return;
      }
      case 'revoke every lease': {
        const release = this.hold('etcd');
        try {
          const n = await this.c.revokeAllLeases();
          note(`revoked all ${n} leases`);
        } finally {
          release();
        }
        return;
      }
    }
  }

  private everyKindDealt(): boolean {
    return FAULT_KINDS.every(([k]) => this.faults[k]);
  }

  /** The replicas desired on a node now. */
  private async desiredOn(node: string): Promise<string[]> {
    const { items } = await bounded(this.c.store.list<ReplicaDesired>(keys.desiredOf(node)), 5000, 'desired');
    return items.map((i) => i.value.spec.replica);
  }

  /**
   * A member cut from its peers is a minority of one: a write through it must not be acknowledged
   * (it cannot reach a quorum), and a linearizable read through it must not answer with a value
   * older than one the majority acknowledged during the cut. The probe keys sit outside jaco's prefix.
   */
  private async probeMinority(e: EtcdNode): Promise<void> {
    const majority = this.c.storeOn(this.c.etcd.filter((x) => x !== e));
    const minority = this.c.storeOn([e]);
    const key = `/chaos-probe/${Date.now()}`;
    try {
      const wrote = await bounded(majority.client.put(key).value('majority').exec(), 5000, 'majority put').then(
        () => true,
        (err: Error) => (this.log(`(probe: the majority did not take a write: ${err.message.split('\n')[0]})`), false),
      );
      const put = await bounded(minority.client.put(`${key}-minority`).value('minority').exec(), 3000, 'minority put').then(
        () => 'acknowledged',
        (err: Error) => `refused (${err.message.split('\n')[0]!.slice(0, 60)})`,
      );
      if (put === 'acknowledged') this.violation({ at: Date.now(), invariant: 'a member cut from its peers acknowledges no write', detail: `${e.spec.name} acknowledged a put of ${key}-minority while cut from its peers` });
      const read = wrote
        ? await bounded(minority.client.get(key).string(), 3000, 'minority read').then(
            (v) => v ?? '(absent)',
            (err: Error) => `refused (${err.message.split('\n')[0]!.slice(0, 60)})`,
          )
        : 'not tried';
      if (wrote && !read.startsWith('refused') && read !== 'majority')
        this.violation({ at: Date.now(), invariant: 'a member cut from its peers serves no stale read', detail: `${e.spec.name} answered a linearizable read of ${key} with ${read} after the majority acknowledged 'majority'` });
      // Evidence the cut is real: the cut member knows no leader, one of the others leads.
      const views = await Promise.all(this.c.etcd.map(async (x) => `${x.spec.name} ${await this.c.raftView(x)}`));
      const line = `${e.spec.name}: write ${put}; read ${read} (${views.join(', ')})`;
      this.minorityProbes.push(line);
      this.log(`probe of the minority: ${line}`);
    } finally {
      majority.close();
      minority.close();
    }
  }

  private violation(v: Violation): void {
    const k = `${v.invariant}|${v.detail}`;
    if (this.seenViolations.has(k)) return;
    this.seenViolations.add(k);
    this.violations.push(v);
    this.log(`VIOLATION ${v.invariant}: ${v.detail}`);
  }

  /** A snapshot of the store, and the applied shape of each deployment it holds. */
  async takeSnapshot(): Promise<void> {
    const snap = await this.c.saveSnapshot();
    const { kvs } = await bounded(this.c.store.listRaw(keys.deployments(), snap.revision), 5000, 'deployments at the snapshot');
    const shapes = new Map(kvs.map((kv) => {
      const d = JSON.parse(kv.value.toString()) as Deployment;
      return [d.metadata.name, appliedShape(d)] as const;
    }));
    this.snapshots.push({ snap, shapes });
    this.log(`snapshot of the store taken at revision ${snap.revision}`);
  }

  /** The newest snapshot of this store at least 3 s old, else the oldest (waiting up to 20 s for one). */
  private async snapshotTaken(): Promise<{ snap: StoreSnapshot; shapes: Map<string, string> } | undefined> {
    for (const until = Date.now() + 20_000; !this.snapshots.length && Date.now() < until; ) await sleep(200);
    return this.snapshots.filter((x) => Date.now() - x.snap.takenAt >= 3000).at(-1) ?? this.snapshots[0];
  }

  // ---------------------------------------------------------------- the run

  async runFaults(): Promise<ChaosReport> {
    const convergeMs = this.opts.convergeMs ?? 60_000;
    let checking = true;
    const checker = (async () => {
      while (checking) {
        await this.check();
        await sleep(1000);
      }
    })();
    const stopAt = Date.now() + this.opts.chaosMs;
    // Snapshots of the store for the restore card: one as the faults start, then every 10–15 s (a
    // failed one, while etcd has no quorum, is tried again a second later).
    const snapshots = (async () => {
      for (let wait = 0; Date.now() + wait < stopAt; ) {
        await sleep(wait);
        const ok = !this.restoring && (await this.takeSnapshot().then(() => true, (e: Error) => (this.log(`snapshot not taken: ${e.message.split('\n')[0]}`), false)));
        wait = ok ? this.between(10_000, 15_000) : 1000;
      }
    })();
    const lanes = Array.from({ length: this.opts.lanes ?? 2 }, async (_, i) => {
      await sleep(i * 700);
      // Past the chaos time while a kind has not come up yet (a card dealt while its target was
      // busy, or a long card holding a lane), for at most 30 s more: every run deals every kind.
      while (this.injected < this.opts.maxFaults && (Date.now() < stopAt || (!this.everyKindDealt() && Date.now() < stopAt + 30_000))) {
        await bounded(this.fault(), 120_000, 'a fault').catch((e: Error) => {
          this.errors.push(e.message);
          this.log(`fault failed: ${e.message}`);
        });
        await sleep(this.between(300, 2000));
      }
    });
    const operator = (async () => {
      while (Date.now() < stopAt) {
        await this.operate(stopAt - Date.now() > 15_000).catch((e: Error) => this.log(`operator failed: ${e.message}`));
        await sleep(this.between(2500, 6000));
      }
    })();
    try {
      await Promise.all([...lanes, operator, snapshots]);
      const chaosMs = Date.now() - this.t0;
      this.log(`faults stopped after ${this.injected}; waiting for convergence`);
      const start = Date.now();
      let converged: number | undefined;
      let why: string | undefined = 'no sample';
      while (Date.now() - start < convergeMs) {
        const s = await this.check();
        why = s ? notConverged(s) : `no sample (${this.lastSampleError})`;
        if (!why) {
          converged = Date.now() - start;
          break;
        }
        await sleep(500);
      }
      this.log(converged === undefined ? `NOT converged within ${convergeMs} ms: ${why}` : `converged ${converged} ms after the faults stopped`);
      return { seed: this.opts.seed, faults: this.faults, operator: this.operator, violations: this.violations, samples: this.samples, acts: this.acts.coverage, longestStray: { ...this.stray.longest, boundMs: this.stray.boundMs }, longestGap: this.gaps.longest(Date.now()), t0: this.t0, exits: this.exits, nodeCuts: this.nodeCuts, minorityProbes: this.minorityProbes, restores: this.restores, convergeMs: converged, lastNotConverged: why, chaosMs, errors: this.errors, trace: this.trace };
    } finally {
      checking = false;
      await checker;
    }
  }
}

/** Starts a chaos cluster, waits for the workload, runs the chaos, returns the report; always stops everything. */
export async function runChaos(opts: ChaosOptions, onCluster?: (c: ChaosCluster) => void): Promise<ChaosReport> {
  const c = new ChaosCluster({ nodes: 3, controllers: 2, timings: 'fast' });
  onCluster?.(c);
  let ok = false;
  try {
    await c.start();
    const chaos = new Chaos(c, opts);
    await chaos.applyAll();
    const t = Date.now();
    for (;;) {
      const s = await chaos.check();
      const why = s ? notConverged(s) : 'etcd not answering';
      if (!why) break;
      if (Date.now() - t > 90_000) throw new Error(`the workload never came up before the chaos: ${why}\n${c.logs()}`);
      await sleep(500);
    }
    chaos.log('workload running; chaos starts');
    const report = await chaos.runFaults();
    ok = report.violations.length === 0 && report.convergeMs !== undefined;
    if (!ok) opts.log?.(c.logs(40));
    return report;
  } finally {
    await c.stop({ keepLogs: !ok });
  }
}

export function formatReport(r: ChaosReport): string {
  const faults = Object.entries(r.faults).sort(([a], [b]) => a.localeCompare(b));
  const total = faults.reduce((a, [, n]) => a + n, 0);
  return [
    `chaos seed ${r.seed}: ${total} faults in ${(r.chaosMs / 1000).toFixed(0)} s, ${r.samples} samples of etcd and docker ps`,
    ...faults.map(([k, n]) => `  ${String(n).padStart(3)}  ${k}`),
    `  operator: ${Object.entries(r.operator).map(([k, n]) => `${k} ×${n}`).join(', ') || 'nothing'}`,
    `  act checks: ${r.acts.placements} placements and ${r.acts.removals} removals had their audit record checked, ${r.acts.writes} controller writes their leader's term (${Object.entries(r.acts.byType).sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ×${n}`).join(', ')})${r.acts.unverifiable ? `, ${r.acts.unverifiable} unverifiable (compacted)` : ''}`,
    `  longest stray container with its agent up: ${r.longestStray.ms} ms (bound ${r.longestStray.boundMs} ms)${r.longestStray.detail ? `: ${r.longestStray.detail}` : ''}`,
    `  longest time without a sample: ${formatGap(r.longestGap, r.t0)}`,
    ...(r.exits.length ? [`  exited on their own (started again): ${r.exits.join('; ')}`] : []),
    ...r.restores.map((x) => `  store restored: ${x}`),
    ...r.minorityProbes.map((x) => `  member cut from its peers: ${x}`),
    ...r.nodeCuts.map((x) => `  node cut: ${x.node} away ${x.cutMs} ms, ${x.replicas} replicas ${x.replacedMs === undefined ? 'NOT all re-placed while away' : `re-placed elsewhere ${x.replacedMs} ms in`}`),
    `  invariant violations: ${r.violations.length}${r.violations.map((v) => `\n    ${v.invariant}: ${v.detail}`).join('')}`,
    ...(r.errors.length ? [`  harness errors: ${r.errors.join('; ')}`] : []),
    `  converged: ${r.convergeMs === undefined ? `NO (${r.lastNotConverged})` : `${(r.convergeMs / 1000).toFixed(1)} s after the faults stopped`}`,
  ].join('\n');
}
