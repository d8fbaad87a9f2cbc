// Service defaults and the per-service spec hash (seed 001, "Per-service spec hash"). The hash
// covers only what shapes the container, in a canonical form (sorted keys, defaults applied,
// quantities and durations normalised), so cosmetic edits do not flip it while semantic ones do.
import { createHash } from 'node:crypto';
import type { DeploymentSpec, PlacementMode, ServiceSpec, UpdateOrder, VolumeMount } from './types.js';
import { canonicalPorts, DEFAULT_DEREGISTRATION_DELAY, routedPorts } from './ports.js';
import { canonicalFiles } from './files.js';
import { cpuMillis, durationMs, memoryBytes } from './units.js';

export const SERVICE_DEFAULTS = {
  replicas: 1,
  mode: 'spread' as PlacementMode,
  stopSignal: 'SIGTERM',
  stopGracePeriod: '10s',
  priority: 0,
  rebalance: 'enabled' as const,
  updateOrder: 'start-first' as UpdateOrder,
  stepTimeout: '60s',
  maxUnavailable: 1,
  minReadyTime: '5s',
  health: { interval: '30s', timeout: '30s', retries: 3, startPeriod: '0s' },
  job: { attempts: 3, backoff: '5s' },
} as const;

/**
 * update.maxUnavailable when the manifest leaves it out: update.parallelism when that is above 1 —
 * replicas stepped N at once are N in motion, as with Swarm's --update-parallelism N — else 1
 * (seed 001's one at a time). The disruption budget of moves follows it too.
 */
export function defaultMaxUnavailable(update: ServiceSpec['update']): number {
  const p = update?.parallelism;
  return p !== undefined && p > 1 ? p : SERVICE_DEFAULTS.maxUnavailable;
}

/** The service spec with every default filled in: what a replica's template carries. */
export function withDefaults(spec: ServiceSpec): ServiceSpec {
  const mode = spec.placement?.mode ?? SERVICE_DEFAULTS.mode;
  const out: ServiceSpec = {
    ...spec,
    placement: { ...spec.placement, mode },
    stopSignal: spec.stopSignal ?? SERVICE_DEFAULTS.stopSignal,
    stopGracePeriod: spec.stopGracePeriod ?? SERVICE_DEFAULTS.stopGracePeriod,
    priority: spec.priority ?? SERVICE_DEFAULTS.priority,
    rebalance: spec.rebalance ?? SERVICE_DEFAULTS.rebalance,
    update: {
      order: spec.update?.order ?? SERVICE_DEFAULTS.updateOrder,
      stepTimeout: spec.update?.stepTimeout ?? SERVICE_DEFAULTS.stepTimeout,
      maxUnavailable: spec.update?.maxUnavailable ?? defaultMaxUnavailable(spec.update),
      minReadyTime: spec.update?.minReadyTime ?? SERVICE_DEFAULTS.minReadyTime,
    },
  };
  if (mode !== 'global') out.replicas = spec.replicas ?? SERVICE_DEFAULTS.replicas;
  if (spec.healthcheck) {
    const h = SERVICE_DEFAULTS.health;
    const { test, http, tcp } = spec.healthcheck;
    out.healthcheck = {
      ...(test ? { test } : {}),
      ...(http ? { http: { ...http, path: http.path ?? '/' } } : {}),
      ...(tcp ? { tcp } : {}),
      interval: spec.healthcheck.interval ?? h.interval,
      timeout: spec.healthcheck.timeout ?? h.timeout,
      retries: spec.healthcheck.retries ?? h.retries,
      startPeriod: spec.healthcheck.startPeriod ?? h.startPeriod,
    };
  }
  return out;
}

/**
 * The container-shaping part of a service in canonical form. Replicas, placement, priority,
 * rebalance, update policy and dependsOn are left out on purpose: scaling, re-placing or
 * re-ordering a service must not restart its containers (the scheduler owns those; the hash drives
 * the rollout controller). Docker create options (`container`) shape the container, so they are
 * in — only when set, so that a service without them keeps the hash earlier releases gave it.
 */
export function canonicalService(spec: ServiceSpec): Record<string, unknown> {
  const s = withDefaults(spec);
  const h = s.healthcheck;
  const files = canonicalFiles(s);
  const restartWith = Object.fromEntries(
    Object.entries(s.dependsOn ?? {})
      .filter(([, d]) => d.restart && d.specHash)
      .map(([dep, d]) => [dep, d.specHash]),
  );
  return {
    image: s.image,
    // A service turned job (or back) runs differently: only when set, so services keep their hash.
    ...(s.mode === 'job' ? { mode: s.mode } : {}),
    // A new digest of the same tag rolls the service; only when set, so that an unpinned service
    // keeps the hash earlier releases gave it.
    ...(s.pinnedImage ? { pinnedImage: s.pinnedImage } : {}),
    ...(s.network === 'cluster' ? { network: s.network } : {}),
    command: s.command ?? null,
    args: s.args ?? null,
    env: s.env ?? {},
    resources: {
      cpuMillis: cpuMillis(s.resources?.cpu),
      memoryBytes: memoryBytes(s.resources?.memory),
      gpus: s.resources?.gpus ?? 0,
      // Only when set, so services without them keep their hash.
      ...(s.resources?.gpuIds ? { gpuIds: s.resources.gpuIds } : {}),
    },
    ports: canonicalPorts(s.ports),
    healthcheck: h
      ? {
          // The exec form keeps the hash earlier releases gave it; the agent's forms only when set.
          ...(h.http || h.tcp ? { ...(h.http ? { http: h.http } : {}), ...(h.tcp ? { tcp: h.tcp } : {}) } : { test: h.test }),
          intervalMs: durationMs(h.interval),
          timeoutMs: durationMs(h.timeout),
          retries: h.retries,
          startPeriodMs: durationMs(h.startPeriod),
        }
      : null,
    stopSignal: s.stopSignal,
    stopGraceMs: durationMs(s.stopGracePeriod),
    volumes: (s.volumes ?? []).map((v) => ({ type: v.type, source: v.type === 'anonymous' ? undefined : v.source, target: v.target, readOnly: v.readOnly ?? false })),
    ...(s.container && Object.keys(s.container).length ? { container: s.container } : {}),
    // Which secrets and configs, where, owned and moded how (never their values); only when set,
    // so a service without them keeps the hash earlier releases gave it.
    ...(files.length ? { files } : {}),
    // The dependencies it restarts with (dependsOn restart: true): a recreated one rolls it.
    ...(Object.keys(restartWith).length ? { restartWith } : {}),
  };
}

/** The services and, transitively, those that restart with them (dependsOn restart: true): what jaco rollout restart restarts. */
export function withRestartDependents(spec: DeploymentSpec, services: readonly string[]): string[] {
  const out = new Set(services);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [name, svc] of Object.entries(spec.services))
      if (!out.has(name) && Object.entries(svc.dependsOn ?? {}).some(([dep, d]) => d.restart && out.has(dep))) grew = !!out.add(name);
  }
  return Object.keys(spec.services).filter((n) => out.has(n));
}

/**
 * The deployment with each restart: true dependency's spec hash written into its dependent
 * (dependsOn.X.specHash): a dependency recreated — a new spec, image digest, secret version —
 * changes its dependents' spec hashes, so the normal rollout rolls them (compose depends_on
 * restart: true). Dependencies first, so a chain restarts end to end. Deterministic and
 * idempotent: every apply (and diff) writes the same hashes for the same services.
 */
export function withDependencyHashes(spec: DeploymentSpec): DeploymentSpec {
  const done = new Map<string, ServiceSpec>();
  const visiting = new Set<string>();
  const fold = (name: string): ServiceSpec | undefined => {
    const svc = spec.services[name];
    if (!svc || done.has(name)) return done.get(name) ?? svc;
    // A cycle is refused at validation; here it only must not recurse forever.
    if (visiting.has(name)) return svc;
    visiting.add(name);
    const deps = svc.dependsOn;
    let out = svc;
    if (deps && Object.values(deps).some((d) => d.restart || d.specHash)) {
      const next: NonNullable<ServiceSpec['dependsOn']> = {};
      for (const [dep, d] of Object.entries(deps)) {
        const { specHash: _stale, ...rest } = d;
        const target = d.restart ? fold(dep) : undefined;
        next[dep] = target ? { ...rest, specHash: specHash(target) } : rest;
      }
      out = { ...svc, dependsOn: next };
    }
    visiting.delete(name);
    done.set(name, out);
    return out;
  };
  const services = Object.fromEntries(Object.keys(spec.services).map((n) => [n, fold(n)!]));
  return { ...spec, services };
}

/** Docker's stop timeout for a service: its stopGracePeriod (default 10 s) rounded up to whole seconds, never less than declared. */
export function stopTimeoutSec(t: ServiceSpec): number {
  return Math.ceil(durationMs(t.stopGracePeriod ?? SERVICE_DEFAULTS.stopGracePeriod) / 1000);
}

/**
 * A service's deregistration delay: its own, else 5 s when an ingress routes to it, else none.
 * Every TCP port is routed: a published one on every node's ingress, and each of the service's
 * own ports (listed, or declared by its image on the cluster network) on its service address, the
 * address its name resolves to. A service with no port is reached by nobody through an ingress.
 */
export function deregistrationMs(t: ServiceSpec): number {
  return durationMs(t.deregistrationDelay ?? (routedPorts(t) ? DEFAULT_DEREGISTRATION_DELAY : '0s'));
}

/**
 * How long a replica's container may take to leave once asked to: out of routing for its
 * deregistration delay, then its stop signal and grace before SIGKILL. A stop-first replacement
 * waits this long before its new container can start.
 */
export function leavingMs(t: ServiceSpec): number {
  return deregistrationMs(t) + stopTimeoutSec(t) * 1000;
}

/** JSON with object keys sorted at every level: the canonical byte form that gets hashed. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) => {
    if (v && typeof v === 'object' && !Array.isArray(v)) {
      const o = v as Record<string, unknown>;
      return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
    }
    return v;
  });
}

/**
 * Whether two values are equal as JSON: what JSON.stringify would write of them, in any key order
 * (a key whose value is undefined is absent, as in JSON). Walks them; nothing is serialized.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  if (Array.isArray(a) || Array.isArray(b)) {
    if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i] ?? null, b[i] ?? null)) return false;
    return true;
  }
  const x = a as Record<string, unknown>;
  const y = b as Record<string, unknown>;
  for (const k of Object.keys(x)) if (x[k] !== undefined && !jsonEqual(x[k], y[k])) return false;
  for (const k of Object.keys(y)) if (y[k] !== undefined && x[k] === undefined) return false;
  return true;
}

/** SHA-256 (hex) of the canonical service spec. */
export function specHash(spec: ServiceSpec): string {
  return createHash('sha256').update(canonicalJson(canonicalService(spec))).digest('hex');
}

/** The image a replica's container runs: the digest apply pinned, else the image as written. */
export function runImage(t: Pick<ServiceSpec, 'image' | 'pinnedImage'>): string {
  return t.pinnedImage ?? t.image;
}

/** The digest of a pinned image (…@sha256:…), or undefined. */
export function imageDigest(pinned: string | undefined): string | undefined {
  const at = pinned?.lastIndexOf('@') ?? -1;
  return at >= 0 ? pinned!.slice(at + 1) : undefined;
}

/** A digest as docker shows an id: sha256: and 12 hex digits (or <unset>). */
export function shortDigest(pinned: string | undefined): string {
  return imageDigest(pinned)?.slice(0, 'sha256:'.length + 12) ?? '<unset>';
}

/** True when two deployment specs are equal after canonical ordering (apply's "unchanged"). */
export function sameDeploymentSpec(a: DeploymentSpec, b: DeploymentSpec): boolean {
  return canonicalJson(a) === canonicalJson(b);
}

/** A job service (mode: job): its replicas run to completion once per change of its spec. */
export function isJob(spec: Pick<ServiceSpec, 'mode'>): boolean {
  return spec.mode === 'job';
}

/** A job's retries with the defaults filled in: runs in all, and the wait before the second. */
export function jobPolicy(spec: Pick<ServiceSpec, 'job'>): { attempts: number; backoffMs: number } {
  return { attempts: spec.job?.attempts ?? SERVICE_DEFAULTS.job.attempts, backoffMs: durationMs(spec.job?.backoff ?? SERVICE_DEFAULTS.job.backoff) };
}

export function placementMode(spec: ServiceSpec): PlacementMode {
  return spec.placement?.mode ?? SERVICE_DEFAULTS.mode;
}

/** A service's mounts of Docker named volumes (the ones that live on a node: seed 004's rules). */
export function namedVolumes(spec: Pick<ServiceSpec, 'volumes'>): Extract<VolumeMount, { source: string }>[] {
  return (spec.volumes ?? []).filter((v): v is Extract<VolumeMount, { source: string }> => v.type === 'volume');
}

/**
 * A replica whose data lives on its node: it has a named volume or a writable bind mount. It is
 * never moved or re-placed by jaco (seed 004); read-only binds (configs, secrets) hold nothing, and
 * an anonymous volume lives and dies with its container (a new container starts with a new one).
 */
export function isStateful(spec: ServiceSpec): boolean {
  return (spec.volumes ?? []).some((v) => v.type === 'volume' || (v.type === 'bind' && !v.readOnly));
}

/**
 * Whether a replacement container may start before the one it replaces stops (start-first): not
 * when the service asks for stop-first, not for a stateful replica (two writers of its data), not
 * when it binds host ports — fixed ones, or dynamic ones, which a replica keeps across revisions
 * (the new container could not bind them) — and not on the cluster network, where a replica keeps
 * its address on its node: its one network namespace holds that address and every port, so the
 * new container can only join it once the old one is gone. Read-only binds hold nothing and do
 * not force it. The agent replaces containers by it and the rollout counts surges by it: one
 * rule, so maxSurge holds.
 */
export function startsFirst(t: ServiceSpec): boolean {
  // Every port is a host port under host networking, fixed or dynamic: any one of them is held.
  return t.update?.order !== 'stop-first' && !isStateful(t) && !t.ports?.length && !onClusterNetwork(t);
}

/** Each replica its own network namespace and addresses (ServiceSpec.network; default host). */
export function onClusterNetwork(t: Pick<ServiceSpec, 'network'>): boolean {
  return t.network === 'cluster';
}

/** Services in placement order: descending priority, ties by name (seed 002). */
export function servicesByPriority(spec: DeploymentSpec): [string, ServiceSpec][] {
  return Object.entries(spec.services).sort(
    ([an, a], [bn, b]) => (b.priority ?? 0) - (a.priority ?? 0) || (an < bn ? -1 : an > bn ? 1 : 0),
  );
}
