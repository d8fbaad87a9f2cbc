// Every interval and timeout in jaco, in one object. Production defaults come from the seed
// documents; `--timings fast` (or JACO_TIMINGS=fast) scales them down for tests and demos.
// Fast timings are NOT for production: they trade stability for speed (rebalancer cooldowns of
// seconds, lease TTLs of 2 s, health checks every second).

export interface Timings {
  name: 'production' | 'fast';
  /** Node-agent heartbeat and pressure sampling (seed 001: default 30 s, allowed 5 s … 5 m). */
  nodeStatusIntervalMs: number;
  /**
   * TTL of the agent's liveness lease (heartbeats/<host> is bound to it), in seconds. Liveness is
   * the lease, kept alive every `livenessKeepAliveMs`, not the pressure samples: a stopped agent's
   * node turns NotReady one TTL after its last keepalive, while a pause shorter than
   * TTL − keepalive (6 s in production) goes unnoticed.
   */
  heartbeatTtlSec: number;
  /** Keepalives of the liveness lease (etcd keepalives are cheap: one small message on one stream). */
  livenessKeepAliveMs: number;
  /** Leader-election lease TTL (seconds). */
  leaderTtlSec: number;
  /** Watch events are coalesced for this long before a reconcile (seed 001: 50 ms). */
  debounceMs: number;
  /** Unconditional reconcile (seed 001: 30 s). */
  safetyTickMs: number;
  /** Node-agent's Docker resync (catches events missed while Docker was away). */
  dockerResyncMs: number;
  /** Back-off bounds for image pulls, Docker and etcd reconnects. */
  backoffMinMs: number;
  backoffMaxMs: number;
  /** A node NotReady for longer than this has its stateless replicas re-placed. */
  nodeLostGraceMs: number;
  /**
   * The grace instead, for a node already NotReady when the scheduler's leader began its term (a
   * restart of the whole cluster, a failover): its agent may be on its way back (Nomad's failover
   * heartbeat TTL).
   */
  nodeLostFailoverGraceMs: number;
  /** Back-off between health-driven restarts of one replica. */
  restartBackoffMs: number;
  /** Default rolling-update step timeout (seed 001: 60 s; per service: update.stepTimeout). */
  stepTimeoutMs: number;
  /** Default per-replica drain move timeout (seed 001: 5 min; per drain: --timeout). */
  drainTimeoutMs: number;
  /** Rebalancer (seed 000). */
  rebalanceCycleMs: number;
  ewmaWindowMs: number;
  cooldownReplicaMs: number;
  cooldownNodeMs: number;
  /** Audit records expire after this (lease-bound). */
  auditRetentionMs: number;
}

export const PRODUCTION: Timings = {
  name: 'production',
  nodeStatusIntervalMs: 30_000,
  heartbeatTtlSec: 8,
  livenessKeepAliveMs: 2_000,
  leaderTtlSec: 10,
  debounceMs: 50,
  safetyTickMs: 30_000,
  dockerResyncMs: 30_000,
  backoffMinMs: 500,
  backoffMaxMs: 30_000,
  // With the 8 s lease: a stopped agent's stateless replicas are re-placed ~12 s after its last keepalive.
  nodeLostGraceMs: 4_000,
  nodeLostFailoverGraceMs: 30_000,
  restartBackoffMs: 10_000,
  stepTimeoutMs: 60_000,
  drainTimeoutMs: 5 * 60_000,
  rebalanceCycleMs: 30_000,
  ewmaWindowMs: 5 * 60_000,
  cooldownReplicaMs: 10 * 60_000,
  cooldownNodeMs: 2 * 60_000,
  auditRetentionMs: 7 * 24 * 3_600_000,
};

/** Seconds where production has tens of seconds, for tests and demos. */
export const FAST: Timings = {
  name: 'fast',
  nodeStatusIntervalMs: 1_000,
  heartbeatTtlSec: 3,
  livenessKeepAliveMs: 1_000,
  leaderTtlSec: 2,
  debounceMs: 50,
  safetyTickMs: 2_000,
  dockerResyncMs: 2_000,
  backoffMinMs: 200,
  backoffMaxMs: 2_000,
  nodeLostGraceMs: 3_000,
  nodeLostFailoverGraceMs: 10_000,
  restartBackoffMs: 500,
  stepTimeoutMs: 15_000,
  drainTimeoutMs: 30_000,
  rebalanceCycleMs: 2_000,
  ewmaWindowMs: 6_000,
  cooldownReplicaMs: 10_000,
  cooldownNodeMs: 4_000,
  auditRetentionMs: 3_600_000,
};

export class TimingsError extends Error {
  override name = 'TimingsError';
}

export function timingsByName(name: string | undefined): Timings {
  const n = name ?? process.env.JACO_TIMINGS ?? 'production';
  if (n === 'production' || n === 'default') return PRODUCTION;
  if (n === 'fast') return FAST;
  throw new TimingsError(`unknown timings ${JSON.stringify(n)}; use production or fast`);
}
