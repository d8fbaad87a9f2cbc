// The chaos driver. On a ChaosCluster with a workload of three deployments, an operator rolls out,
// scales and drains at random times while two fault lanes inject, at random (one seeded PRNG,
// test/support/random.ts): kill -9 of a controller copy (mostly the scheduler's leader), of an
// agent, of an etcd member (each started again); SIGSTOP/SIGCONT of each; an etcd member removed
// and added back from an empty data dir; cuts between a component and etcd (all its proxies, or
// the one to a single member); every etcd lease revoked at once. A checker samples etcd and
// `docker ps` throughout (test/chaos/invariants.ts). Once the faults stop, the cluster must
// converge within `convergeMs`. The run is bounded in faults and time; the same seed gives the
// same choices (the real processes' timing is not replayable, the fault schedule is).
import { keys } from '../../src/api/keys.js';
import type { Node, NodeSpecRecord } from '../../src/api/types.js';
import { nodeAsDecided } from '../../src/api/nodes.js';
import { FAST, PRODUCTION } from '../../src/timings.js';
import { prng } from '../support/random.js';
import { sleep } from '../support/wait.js';
import { bounded, ChaosCluster, type Component, type EtcdNode } from './cluster.js';
import { ActChecker, appliedShape, lostApplies, notConverged, simViolations, snapshot, StrayTracker, type ActCoverage, type Snapshot, type Violation } from './invariants.js';
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
  /** From the end of the faults until converged (undefined: not within convergeMs). */
  convergeMs?: number;
  lastNotConverged?: string;
  chaosMs: number;
  errors: string[];
  trace: string[];
}

interface Svc {
  image: 1 | 2;
  replicas: number;
  /** Bumped to force a new revision without a new image. */
  gen: number;
}

/** Fault kinds and their weights (cards per deck). */
const FAULT_KINDS = [
  ['kill -9 controller', 3],
  ['kill -9 agent', 2],
  ['kill -9 etcd member', 2],
  ['SIGSTOP controller', 1],
  ['SIGSTOP agent', 1],
  ['SIGSTOP etcd member', 1],
  ['etcd member rejoin from empty data', 1],
  ['cut component from etcd', 2],
  ['revoke every lease', 1],
] as const;

const OPERATOR_KINDS = [
  ['rollout (new image)', 2],
  ['rollout (new env)', 1],
  ['scale', 2],
  ['drain', 2],
] as const;

const WORKLOAD: Record<string, { min: number; max: number; extra: string }> = {
  // A health-checked service, a plain one, and a packed one: rollouts, moves and drains on each.
  web: { min: 2, max: 4, extra: "      healthcheck: {test: [CMD, 'true'], interval: 1s, timeout: 5s, retries: 3}\n" },
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
  samples = 0;
  last?: Snapshot;

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
    const r = await this.c.jaco(['apply', '-f', '-'], manifest(name, s), 60_000).catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
    if (r.code === 0) this.allowed.set(name, [shape]);
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

  /** One sample: every invariant over a fresh snapshot. */
  async check(): Promise<Snapshot | undefined> {
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
    for (const v of [...simViolations(s), ...this.stray.check(s, (n) => this.healthySince(n)), ...lostApplies(s, allowed), ...acts]) {
      const k = `${v.invariant}|${v.detail}`;
      if (this.seenViolations.has(k)) continue;
      this.seenViolations.add(k);
      this.violations.push(v);
      this.log(`VIOLATION ${v.invariant}: ${v.detail}`);
    }
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
    const etcdKind = kind.includes('etcd member') || kind === 'revoke every lease';
    if (etcdKind && this.etcdBusy) return;
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
      case 'etcd member rejoin from empty data': {
        if (this.c.etcd.some((e) => !e.running)) return;
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
          } else {
            note(`etcd ${e.spec.name} removed, wiped, added back empty`);
            await this.c.rejoinEtcd(e);
          }
        } finally {
          release();
        }
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
    const lanes = Array.from({ length: this.opts.lanes ?? 2 }, async (_, i) => {
      await sleep(i * 700);
      while (Date.now() < stopAt && this.injected < this.opts.maxFaults) {
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
      await Promise.all([...lanes, operator]);
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
      return { seed: this.opts.seed, faults: this.faults, operator: this.operator, violations: this.violations, samples: this.samples, acts: this.acts.coverage, longestStray: { ...this.stray.longest, boundMs: this.stray.boundMs }, longestGap: this.gaps.longest(Date.now()), t0: this.t0, exits: this.exits, convergeMs: converged, lastNotConverged: why, chaosMs, errors: this.errors, trace: this.trace };
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
    `  invariant violations: ${r.violations.length}${r.violations.map((v) => `\n    ${v.invariant}: ${v.detail}`).join('')}`,
    ...(r.errors.length ? [`  harness errors: ${r.errors.join('; ')}`] : []),
    `  converged: ${r.convergeMs === undefined ? `NO (${r.lastNotConverged})` : `${(r.convergeMs / 1000).toFixed(1)} s after the faults stopped`}`,
  ].join('\n');
}
