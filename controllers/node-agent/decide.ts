// The node-agent's pure core: given the desired replicas of this node, its containers (and the
// sandboxes of its cluster-network replicas), the starts in flight and what it last reported,
// decide what to start, stop, cancel and report. No I/O, no clock but `now`; the shell (agent.ts)
// carries the plan out. Replicas are visited in id order, so the same snapshot always yields the
// same plan.
import { minReadyMs } from '../../src/api/readiness.js';
import { fixedHostPorts, hostPortList } from '../../src/api/ports.js';
import { isStateful, jsonEqual, onClusterNetwork, runImage } from '../../src/api/spec.js';
import type { ObservedState, ReplicaCommand, ReplicaDesired, ReplicaObservedStatus, ServiceSpec } from '../../src/api/types.js';
import type { CancelReason, ObservedCode, StartKind, StopReason } from '../../src/api/reasons/agent.js';
import type { ContainerFacts } from './facts.js';
import type { FileCode, FileState } from './files.js';
import { serviceFiles } from '../../src/api/files.js';
import { sandboxSpec, type SandboxSpec } from './sandbox.js';

/** Where an in-flight start is. 'failed' is terminal and kept, so the start is not retried until
 * the desired state changes or a restart command comes. */
export type StartPhase = 'queued' | 'stopping' | 'pulling' | 'pull_failed' | 'sandbox' | 'network_failed' | 'creating' | 'create_failed' | 'starting' | 'failed';

export interface StartProgress {
  revision: number;
  specHash: string;
  /** The sandbox it runs the replica in (cluster network): another one supersedes the start. */
  sandboxHash?: string;
  kind: StartKind;
  phase: StartPhase;
  code?: ObservedCode;
  details?: string;
  /** Set once the container is created. */
  containerId?: string;
  /** When the start was ordered, on the agent's monotonic clock (absent: long ago — it is reported as it goes). */
  queuedAt?: number;
}

/** A desired key that could not be used: malformed, or not meant for this node. */
export interface InvalidDesired {
  reason: string;
  deployment?: string;
  service?: string;
}

export interface AgentSnapshot {
  node: string;
  /** Valid desired keys of this node, by replica id. */
  desired: ReadonlyMap<string, ReplicaDesired>;
  invalid: ReadonlyMap<string, InvalidDesired>;
  commands: ReadonlyMap<string, ReplicaCommand>;
  /** What the agent last wrote to observed/<node>/<replica> (restart commands are acknowledged there). */
  observed: ReadonlyMap<string, ReplicaObservedStatus>;
  /** This agent's containers (labelled with its cluster and node), sandboxes apart. */
  containers: readonly ContainerFacts[];
  /** The sandboxes of its cluster-network replicas (role sandbox). */
  sandboxes?: readonly ContainerFacts[];
  /** Starts in flight (or terminally failed), by replica. */
  starts: ReadonlyMap<string, StartProgress>;
  /** Containers a stop is already under way for. */
  stopping: ReadonlySet<string>;
  /**
   * The agent's monotonic clock now (ms). Durations — a deregistration hold, a start's report
   * delay — are measured on it: the wall clock (`now`) may step, and a duration taken across a
   * step is wrong by the step (issue 29). `now` only stamps what is reported.
   */
  mono: number;
  /** Containers held out of routing before their stop, since when on the monotonic clock (the plan's `retiring` of the last pass). */
  retiring?: ReadonlyMap<string, number>;
  /**
   * This node's copies of secrets and configs, by fileId (`secret/<name>`): ready, or unreadable
   * and why. A replica starts only once every file it uses is ready (files.ts writes them).
   */
  files?: ReadonlyMap<string, FileState>;
  /**
   * The secret holding the password of each desired image's registry, where the cluster stores
   * one (registrySecretOf): a start also waits for this node's copy of it, as for its files — the
   * pull is not tried, and backed off, before the secrets controller has copied it here.
   */
  pullSecrets?: ReadonlyMap<string, string>;
}

export interface DecideConfig {
  /** An unchanged status is rewritten when its lastHealthAt moved by at least this much. */
  healthRefreshMs: number;
  /**
   * A new replica's start is reported (state starting) only once it has taken this long: one
   * that runs sooner is first reported running — one observed write per placement, not two.
   */
  startReportDelayMs: number;
}

/** The agent's startReportDelayMs: a container start usually takes well under a second. */
export const START_REPORT_DELAY_MS = 1000;

export interface StartOrder {
  replica: string;
  kind: StartKind;
  desired: ReplicaDesired;
  /** Containers to stop and remove before the new one is created (stop-first, restart). */
  stopFirst: string[];
  /** kind resume: the existing container to start. */
  resume?: string;
  /** kind restart: the command seq acknowledged once the fresh container is up. */
  command?: number;
  /** Cluster network: the sandbox the new container joins. */
  sandbox?: SandboxOrder;
}

/** Which sandbox a start runs its container in. */
export interface SandboxOrder {
  spec: SandboxSpec;
  /** A running sandbox of this spec: joined as it is (its addresses checked, plumbed if missing). Absent: make one. */
  reuse?: string;
  /** The replica's other sandboxes (another spec, or no longer running): torn down after stopFirst, before a new one is made. */
  replace: string[];
}

export interface StopOrder {
  replica: string;
  containerId: string;
  name: string;
  /** Remove after stopping (all but suspended replicas). */
  remove: boolean;
  reason: StopReason;
  /** A sandbox: its addresses go first (CNI DEL), then the container. */
  sandbox?: true;
}

export interface CancelOrder {
  replica: string;
  reason: CancelReason;
}

export interface AgentPlan {
  starts: StartOrder[];
  stops: StopOrder[];
  cancels: CancelOrder[];
  /** observed/<node>/<replica> values that changed. */
  observe: ReplicaObservedStatus[];
  /** observed/<node>/<replica> keys to delete (no desired key, no container left). */
  forget: string[];
  /** Decide again at this time even if nothing changes (a minReadyTime running out). */
  recheckAt?: number;
  /**
   * Serving containers the agent wants stopped but holds for their deregistration delay (the
   * ingresses drain them meanwhile), since when (monotonic clock): the next pass's snapshot.retiring.
   */
  retiring: Map<string, number>;
}

type Observation = Pick<ReplicaObservedStatus, 'state' | 'code' | 'details' | 'health' | 'lastHealthAt' | 'exitCode' | 'startedAt' | 'finishedAt' | 'minReadyMet'>;

const SERVING = new Set(['running', 'paused', 'restarting']);
export const isServing = (c: ContainerFacts) => SERVING.has(c.state);

/** What a container shows, as an observed state. */
export function observeContainer(c: ContainerFacts): Observation {
  const base = { health: c.health, ...(c.lastHealthAt ? { lastHealthAt: c.lastHealthAt } : {}), ...(c.startedAt ? { startedAt: c.startedAt } : {}) };
  switch (c.state) {
    case 'running':
      return c.health === 'unhealthy' ? { ...base, state: 'degraded', code: 'unhealthy', details: c.healthOutput ?? 'health check failing' } : { ...base, state: 'running' };
    case 'paused':
      return { ...base, state: 'degraded', code: 'paused', details: 'the container is paused' };
    case 'restarting':
      return { ...base, state: 'starting' };
    case 'created':
      // A created container either never got started (the agent resumes it) or failed to start.
      return c.error ? { ...base, state: 'exited', code: 'start_failed', exitCode: c.exitCode, details: c.error } : { ...base, state: 'starting' };
    default: {
      // When it stopped: a job's duration, and the start of its back-off (controllers/scheduler/job.ts).
      const ended = { ...base, ...(c.finishedAt ? { finishedAt: c.finishedAt } : {}) };
      if (c.oomKilled) return { ...ended, state: 'exited', code: 'oom_killed', exitCode: c.exitCode, details: 'killed for exceeding its memory limit' };
      if (c.error) return { ...ended, state: 'exited', code: 'start_failed', exitCode: c.exitCode, details: c.error };
      return { ...ended, state: 'exited', exitCode: c.exitCode, details: `exited with code ${c.exitCode}` };
    }
  }
}

/** What a start in flight shows. */
export function observeStart(p: Pick<StartProgress, 'phase' | 'code' | 'details'>): Observation {
  const extra = { ...(p.code ? { code: p.code } : {}), ...(p.details ? { details: p.details } : {}) };
  switch (p.phase) {
    case 'pulling':
      return { state: 'pulling', code: 'pulling', health: 'none' };
    case 'pull_failed':
    case 'network_failed':
    case 'create_failed':
      return { state: 'pending', health: 'none', ...extra };
    case 'failed':
      return { state: 'failed', health: 'none', ...extra };
    default:
      return { state: 'starting', health: 'none', ...extra };
  }
}

/**
 * When a container of the desired spec counts as ready to take over from an old one: healthy, or
 * (without a health check) running for the service's minReadyTime. Returns the time it will be
 * ready when that is only a matter of time.
 */
export function readiness(c: ContainerFacts, t: ServiceSpec, now: number): { ready: boolean; at?: number } {
  if (c.state !== 'running') return { ready: false };
  if (c.health === 'healthy') return { ready: true };
  if (c.health !== 'none' || (!c.startedAt && c.runningForMs === undefined)) return { ready: false };
  // Measured on one monotonic clock when the shell knows it; else from Docker's start stamp.
  const at = c.runningForMs !== undefined ? now + minReadyMs(t) - c.runningForMs : Date.parse(c.startedAt!) + minReadyMs(t);
  return now >= at ? { ready: true } : { ready: false, at };
}

/** Stop-first when asked for, when the old container holds a host port the new one needs, when the
 * service has volumes (two copies of a stateful workload must not write the same data), or on the
 * cluster network (the replica's one namespace holds its address and ports). */
export function stopFirstFor(t: ServiceSpec, serving: ContainerFacts[], hostPorts: number[] = fixedHostPorts(t)): ContainerFacts[] {
  if (!serving.length) return [];
  if (t.update?.order === 'stop-first' || isStateful(t) || onClusterNetwork(t)) return serving;
  // startsFirst (src/api/spec.ts) with its port rule checked against the host ports the running
  // containers really hold (an older revision's may differ from the new spec's).
  const ports = new Set(hostPorts);
  return serving.some((c) => c.ports.some((p) => ports.has(p))) ? serving : [];
}

/** Newest first: the container that started (or was created) last. */
function newest(cs: ContainerFacts[]): ContainerFacts | undefined {
  return [...cs].sort((a, b) => ((b.startedAt ?? b.createdAt) > (a.startedAt ?? a.createdAt) ? 1 : -1) || (a.id < b.id ? -1 : 1))[0];
}

/**
 * A status as compared: without observedAt and lastHealthAt. An agent compares every replica of
 * its node on every pass, so the two are walked as they are (jsonEqual), never serialized: the
 * canonical JSON of each new status was 5 % of a 900-agent hollow process and of the simulation.
 */
function sameStatus(a: ReplicaObservedStatus, b: ReplicaObservedStatus): boolean {
  const { observedAt: _ao, lastHealthAt: _al, ...x } = a;
  const { observedAt: _bo, lastHealthAt: _bl, ...y } = b;
  return jsonEqual(x, y);
}

/** True when two statuses differ in anything but observedAt (and a lastHealthAt that moved little). */
export function statusChanged(prev: ReplicaObservedStatus | undefined, next: ReplicaObservedStatus, healthRefreshMs: number): boolean {
  if (!prev) return true;
  if (!sameStatus(prev, next)) return true;
  if (prev.lastHealthAt === next.lastHealthAt) return false;
  if (!prev.lastHealthAt || !next.lastHealthAt) return true;
  return Date.parse(next.lastHealthAt) - Date.parse(prev.lastHealthAt) >= healthRefreshMs;
}

interface ReplicaView {
  id: string;
  desired?: ReplicaDesired;
  invalid?: InvalidDesired;
  command?: ReplicaCommand;
  prev?: ReplicaObservedStatus;
  containers: ContainerFacts[];
  sandboxes: ContainerFacts[];
  start?: StartProgress;
}

/**
 * Why a replica's files keep it from starting: the first file it uses that this node has no
 * usable copy of, with its code and a line naming it (never its value); undefined when every one
 * is ready.
 */
export function filesBlocking(t: ServiceSpec, files: ReadonlyMap<string, FileState> | undefined, pullSecret?: string): { code: FileCode; details: string } | undefined {
  const waiting: string[] = [];
  let code: FileCode | undefined;
  if (pullSecret !== undefined) {
    const st = files?.get(`secret/${pullSecret}`);
    if (st?.state !== 'ready') {
      code = st?.state === 'unreadable' ? 'secret_unreadable' : 'secret_missing';
      waiting.push(`the registry's password, secret ${pullSecret} (${st?.state === 'unreadable' ? st.detail : 'no copy on this node yet'})`);
    }
  }
  for (const f of serviceFiles(t)) {
    const id = `${f.kind}/${f.ref.source}`;
    const st = files?.get(id);
    // Ready, and a copy of the very object the spec was applied with (its pinned uid), when pinned.
    const other = st?.state === 'ready' && f.ref.version !== undefined && st.uid !== f.ref.version;
    if (st?.state === 'ready' && !other) continue;
    code ??= st?.state === 'unreadable' ? 'secret_unreadable' : f.kind === 'secret' ? 'secret_missing' : 'config_missing';
    const why = st?.state === 'unreadable' ? st.detail : other ? `the copy on this node is of another ${f.kind} of that name` : 'no copy on this node yet';
    if (!waiting.some((w) => w.startsWith(`${f.kind} ${f.ref.source} `))) waiting.push(`${f.kind} ${f.ref.source} (${why})`);
  }
  return code ? { code, details: `waiting for ${waiting.join(', ')}` } : undefined;
}

/** The plan for one snapshot. */
export function decide(snap: AgentSnapshot, now: number, config: DecideConfig): AgentPlan {
  const plan: AgentPlan = { starts: [], stops: [], cancels: [], observe: [], forget: [], retiring: new Map() };
  const byReplica = new Map<string, ContainerFacts[]>();
  for (const c of snap.containers) byReplica.set(c.replica, [...(byReplica.get(c.replica) ?? []), c]);
  const sandboxesOf = new Map<string, ContainerFacts[]>();
  for (const c of snap.sandboxes ?? []) sandboxesOf.set(c.replica, [...(sandboxesOf.get(c.replica) ?? []), c]);
  const ids = new Set([...snap.desired.keys(), ...snap.invalid.keys(), ...byReplica.keys(), ...sandboxesOf.keys(), ...snap.starts.keys(), ...snap.observed.keys()]);
  for (const id of [...ids].sort()) {
    const view: ReplicaView = {
      id,
      desired: snap.desired.get(id),
      invalid: snap.invalid.get(id),
      command: snap.commands.get(id),
      prev: snap.observed.get(id),
      containers: byReplica.get(id) ?? [],
      sandboxes: sandboxesOf.get(id) ?? [],
      start: snap.starts.get(id),
    };
    decideReplica(view, snap, now, config, plan);
  }
  return plan;
}

const inFlight = (s: StartProgress | undefined) => !!s && s.phase !== 'failed';
/** Whether a container runs in a sandbox's network namespace. */
const inSandbox = (c: ContainerFacts, sb: ContainerFacts) => c.networkMode === `container:${sb.id}`;

function decideReplica(v: ReplicaView, snap: AgentSnapshot, now: number, config: DecideConfig, plan: AgentPlan): void {
  // recheckAt is on the wall clock the runner wakes on; a monotonic duration is added to `now`.
  const recheckIn = (ms: number) => {
    plan.recheckAt = Math.min(plan.recheckAt ?? Infinity, now + ms);
  };
  const emit = (status: ReplicaObservedStatus) => {
    if (statusChanged(v.prev, status, config.healthRefreshMs)) plan.observe.push(status);
  };
  // A serving container with a deregistration delay is held that long before its stop: the
  // scheduler has taken it out of endpoints, and every ingress drains it meanwhile.
  const held = (c: ContainerFacts): boolean => {
    if (!c.deregistrationMs || !isServing(c) || snap.stopping.has(c.id)) return false;
    const since = snap.retiring?.get(c.id) ?? snap.mono;
    const due = since + c.deregistrationMs;
    if (snap.mono >= due) return false;
    plan.retiring.set(c.id, since);
    recheckIn(due - snap.mono);
    return true;
  };
  const stop = (c: ContainerFacts, reason: StopReason, remove = true) => {
    if (!snap.stopping.has(c.id) && !held(c)) plan.stops.push({ replica: v.id, containerId: c.id, name: c.name, remove, reason, ...(c.role === 'sandbox' ? { sandbox: true as const } : {}) });
  };
  // A sandbox goes once no container of its replica is in it (the app first, then its addresses),
  // and never under a start, which makes and tears down the sandboxes it needs itself.
  const tearDown = (keep: ContainerFacts | undefined, reason: StopReason) => {
    if (inFlight(v.start)) return;
    for (const sb of v.sandboxes) if (sb !== keep && !v.containers.some((c) => inSandbox(c, sb))) stop(sb, reason);
  };
  const acked = v.prev?.ackedCommand;
  const common = { replica: v.id, node: snap.node, ...(acked !== undefined ? { ackedCommand: acked } : {}), observedAt: new Date(now).toISOString() };

  // 1. A desired key the agent cannot use: report it, start nothing, leave running containers be
  //    (bad input never stops a workload).
  if (!v.desired && v.invalid) {
    if (v.start) plan.cancels.push({ replica: v.id, reason: 'invalid' });
    const c0 = v.containers[0];
    emit({
      ...common,
      deployment: v.invalid.deployment ?? c0?.deployment ?? '',
      service: v.invalid.service ?? c0?.service ?? '',
      state: 'failed',
      code: 'invalid_spec',
      details: v.invalid.reason,
    });
    return;
  }

  // 2. No desired key: stop and remove what runs, then its sandbox, then forget the observed key
  //    (its address is free only once no namespace holds it).
  if (!v.desired) {
    if (v.start) plan.cancels.push({ replica: v.id, reason: 'desired_removed' });
    for (const c of v.containers) stop(c, 'orphaned');
    tearDown(undefined, 'orphaned');
    if (!v.containers.length && !v.sandboxes.length && v.prev) plan.forget.push(v.id);
    return;
  }

  const spec = v.desired.spec;
  const t = spec.template;
  // Cluster network: the sandbox it needs (none while its record carries no address), the ones of
  // that spec, and the running one a container joins.
  const cluster = onClusterNetwork(t);
  const want = sandboxSpec(spec);
  const wanted = want ? v.sandboxes.filter((sb) => sb.sandboxHash === want.hash) : [];
  const fit = newest(wanted.filter((sb) => sb.state === 'running'));
  const matches = (x: { revision?: number; specHash?: string }) => x.revision === spec.revision && x.specHash === spec.specHash;
  // On the cluster network a container of the desired spec counts only in a sandbox of the desired one.
  const cur = newest(v.containers.filter((c) => matches(c) && (!cluster || wanted.some((sb) => inSandbox(c, sb)))));
  const olds = v.containers.filter((c) => c !== cur);
  const sandboxOrder = (): SandboxOrder | undefined =>
    want ? { spec: want, ...(fit ? { reuse: fit.id } : {}), replace: v.sandboxes.filter((sb) => sb !== fit).map((sb) => sb.id) } : undefined;
  let start = v.start;
  if (start && !(matches(start) && start.sandboxHash === want?.hash)) {
    plan.cancels.push({ replica: v.id, reason: 'superseded' });
    start = undefined;
  }
  const base = {
    ...common,
    deployment: spec.deployment,
    service: spec.service,
    revision: spec.revision,
    specHash: spec.specHash,
    image: runImage(t),
  };

  // 3. Suspended: stop every container of the replica and keep them stopped.
  if (spec.suspended) {
    if (start) plan.cancels.push({ replica: v.id, reason: 'suspended' });
    const serving = v.containers.filter(isServing);
    for (const c of serving) stop(c, 'suspended', false);
    // Stopped only once Docker says so: a drain waits on this before it removes the node.
    const state = serving.length ? 'running' : 'stopped';
    const details = serving.length ? `suspended since ${spec.suspended.at}; stopping` : `suspended since ${spec.suspended.at}`;
    emit({ ...base, state, code: spec.suspended.reason, details, health: 'none', ...(cur ? { containerId: cur.id, containerName: cur.name } : {}) });
    return;
  }

  // 4. What to start, if anything.
  const seq = v.command?.spec.op === 'restart' ? v.command.spec.seq : undefined;
  const commandPending = seq !== undefined && seq > (acked ?? -1);
  const servingOlds = olds.filter(isServing);
  let order: StartOrder | undefined;
  let removedBehind = false;
  // Cluster network without an address yet: nothing can start (the scheduler allocates it).
  const noAddress = cluster && !want;
  const withSandbox = (o: StartOrder): StartOrder => {
    const sb = sandboxOrder();
    return sb ? { ...o, sandbox: sb } : o;
  };
  // Stop-first on the cluster network takes every other container of the replica, running or not:
  // they are in the namespace the new one joins, or in one of the sandboxes it replaces.
  const createStopFirst = () => (cluster ? olds : stopFirstFor(t, servingOlds, hostPortList(spec))).map((c) => c.id);
  if (!inFlight(start) && !noAddress) {
    if (commandPending) {
      order = withSandbox({ replica: v.id, kind: 'restart', desired: v.desired, stopFirst: v.containers.map((c) => c.id), command: seq });
    } else if (start?.phase === 'failed') {
      // Terminal until the desired state changes or a restart command comes.
    } else if (!cur) {
      // A container gone behind the agent's back is reported, not recreated (the scheduler decides);
      // one the agent was itself replacing (a restart cut short by a crash) is recreated.
      removedBehind = !!v.prev?.containerId && matches(v.prev) && v.prev.state !== 'stopped' && v.prev.code !== 'restarting';
      if (!removedBehind) order = withSandbox({ replica: v.id, kind: 'create', desired: v.desired, stopFirst: createStopFirst() });
    } else if ((cur.state === 'created' && !cur.error) || (cur.state === 'exited' && v.prev?.state === 'stopped' && matches(v.prev))) {
      // Never started (the agent stopped between create and start), or resumed after a suspension;
      // on the cluster network only into its sandbox still running, else afresh in a new one.
      if (!cluster || (fit && inSandbox(cur, fit))) order = withSandbox({ replica: v.id, kind: 'resume', desired: v.desired, stopFirst: [], resume: cur.id });
      else order = withSandbox({ replica: v.id, kind: 'create', desired: v.desired, stopFirst: v.containers.map((c) => c.id) });
    }
  }
  // Nothing starts without every one of its secrets and configs; what runs keeps running.
  const blocked = order ? filesBlocking(t, snap.files, snap.pullSecrets?.get(t.image)) : undefined;
  if (blocked) order = undefined;
  // A start that stops containers first waits while any of them is held out of routing.
  let leavingRouting = false;
  if (order?.stopFirst.length) {
    const byId = new Map(v.containers.map((c) => [c.id, c]));
    // Every one is checked (not the first only): each one's hold starts now.
    leavingRouting = order.stopFirst.map((id) => byId.get(id)).filter((c) => c && held(c)).length > 0;
    if (leavingRouting && order.kind === 'restart') order = undefined;
  }
  const deferred = leavingRouting ? order : undefined;
  if (deferred) order = undefined;
  if (order) plan.starts.push(order);
  const stoppedFirst = new Set(order?.stopFirst ?? deferred?.stopFirst ?? []);

  // 5. Old containers: removed once they no longer run, stopped once the new one is ready.
  const ready = cur && !order ? readiness(cur, t, now) : { ready: false };
  for (const o of olds) {
    if (stoppedFirst.has(o.id)) continue;
    if (!isServing(o)) stop(o, 'superseded');
    else if (ready.ready) stop(o, 'replaced');
  }
  if (!ready.ready && ready.at !== undefined && servingOlds.length) plan.recheckAt = Math.min(plan.recheckAt ?? Infinity, ready.at);
  // Sandboxes of another spec, or no longer running, that nothing is in: torn down (a start under
  // way or ordered now tears down what it replaces itself). The running one of the desired spec
  // stays while the replica is desired here: it holds the address.
  if (!order && !deferred) tearDown(fit, 'superseded');

  // 6. Report: the start under way, else the current container, else why nothing runs.
  let obs: Observation;
  let containerId: string | undefined;
  let containerName: string | undefined;
  if (deferred) {
    obs = { state: 'starting', code: 'stop_first', details: 'leaving routing before the old container stops', health: 'none' };
  } else if (blocked) {
    obs = { state: 'pending', code: blocked.code, details: blocked.details, health: 'none' };
  } else if (order) {
    const code: ObservedCode | undefined = order.kind === 'restart' ? 'restarting' : order.stopFirst.length ? 'stop_first' : undefined;
    obs = observeStart({ phase: 'queued', code });
    // A restart is acknowledged in the same write that reports it, before it runs: an agent that
    // crashes mid-restart never runs the same command twice.
    if (order.command !== undefined) base.ackedCommand = order.command;
  } else if (start) {
    obs = observeStart(start);
    containerId = start.containerId;
  } else if (cur) {
    obs = observeContainer(cur);
    // Without a health check, the minReadyTime is run out on this agent's clock and reported (the
    // controllers never compare its startedAt with their own clock): looked at again when it is due.
    if (obs.state === 'running' && !t.healthcheck) {
      const r = readiness(cur, t, now);
      obs.minReadyMet = r.ready;
      if (r.at !== undefined) plan.recheckAt = Math.min(plan.recheckAt ?? Infinity, r.at);
    }
  } else if (noAddress) {
    obs = { state: 'pending', code: 'network_failed', details: 'the desired record carries no address yet (cluster network: the scheduler allocates it at placement)', health: 'none' };
  } else if (removedBehind) {
    obs = { state: 'exited', code: 'container_removed', details: `container ${v.prev!.containerName ?? v.prev!.containerId} was removed outside jaco`, health: 'none' };
    containerId = v.prev!.containerId;
    containerName = v.prev!.containerName;
  } else {
    obs = { state: 'starting', health: 'none' };
  }
  if (cur && !order && !start) {
    containerId = cur.id;
    containerName = cur.name;
  }
  // A replica never reported yet, with no other container, whose plain start is under way: its
  // first report waits for the container to run, or for the start to take startReportDelayMs.
  const queuedAt = order ? snap.mono : start?.queuedAt;
  const kind = order?.kind ?? start?.kind;
  if (!v.prev && !olds.length && kind === 'create' && obs.state === 'starting' && !obs.code && queuedAt !== undefined) {
    const due = queuedAt + config.startReportDelayMs;
    if (snap.mono < due) {
      recheckIn(due - snap.mono);
      return;
    }
  }
  // The old container still serving (until it is gone, even while it is being stopped).
  const serving = newest(servingOlds);
  const replacing = serving
    ? { revision: serving.revision, specHash: serving.specHash, containerId: serving.id, state: observeContainer(serving).state as ObservedState }
    : undefined;
  // The addresses of the namespace the described container is in: plumbed, since it only started once they were.
  const address = containerId && cur?.id === containerId ? v.sandboxes.find((sb) => inSandbox(cur, sb))?.address : undefined;
  emit({
    ...base,
    ...obs,
    ...(containerId ? { containerId } : {}),
    ...(containerName ? { containerName } : {}),
    ...(replacing ? { replacing } : {}),
    ...(address ? { address } : {}),
  });
}
