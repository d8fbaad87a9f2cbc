// What the dashboard server sends to the page: plain JSON shapes shared by src/dashboard (which
// builds them from the cache) and web/dashboard (which draws them). Types only: the page's bundle
// imports nothing from the server at run time.
import type { DeploymentStatusRow } from '../app/status.js';
import type { PlanReport } from '../app/rebalance-plan.js';
import type { RolloutPlanSpec, RolloutStep } from '../api/types.js';

export interface NodeView {
  name: string;
  /** kubectl-style: Ready, NotReady, Ready,SchedulingDisabled, Ready,Draining. */
  status: string;
  ready: boolean;
  cordoned: boolean;
  draining: boolean;
  /** Why it takes no new placements (unschedulableBecause), if it does not. */
  unschedulable?: string;
  address?: string;
  capacity?: { cpuMillis: number; memoryBytes: number; gpus: number; diskBytes?: number };
  /** What the replicas placed on it book (the placer's footprint of each; disk: resources.disk or the cluster default). */
  booked: { cpuMillis: number; memoryBytes: number; gpus: number; diskBytes: number; ports: number[] };
  /** Its data root's filesystem as the agent last sampled it. */
  disk?: { usedBytes: number; totalBytes: number; capped: boolean };
  /** Degraded causes (src/api/eligibility.ts) and whether an operator trusts it anyway; absent: not degraded. */
  degraded?: { causes: { cause: string; detail: string }[]; trusted: boolean };
  /** The latest heartbeat sample (raw utilisation). */
  sample?: { time: string; cpu: number; memory: number };
  /** The dashboard's own EWMA of the samples (the rebalancer's fold and window). */
  ewma?: { cpu: number; memory: number };
  /** As the rebalancer's plan reports it: EWMA pressure, consecutive hot cycles, cooldown. */
  rebalancer?: { pressure: number | null; over: number; cooldownMs?: number; ineligible?: string };
  replicas: { id: string; deployment: string; service: string; state: string }[];
  drain?: { state: string; reason?: string; requestedAt: string; remaining?: number };
}

/** A rollout plan as stored, each step with its duration once finished. */
export interface RolloutView extends Omit<RolloutPlanSpec, 'steps'> {
  steps: (RolloutStep & { durationMs?: number })[];
}

export interface AuditView {
  key: string;
  time: string;
  type: string;
  actor: string;
  deployment?: string;
  payload: Record<string, unknown>;
}

/** One frame of the live stream (event "state"): the whole picture, recomputed on every change. */
export interface DashboardState {
  revision: number;
  at: string;
  allowActions: boolean;
  thresholds: { trigger: number; dstCap: number };
  nodes: NodeView[];
  deployments: DeploymentStatusRow[];
  /** Each deployment's rollout lines as `jaco rollout status` prints them. */
  progress: Record<string, { phase: string; lines: { service: string; text: string }[] }>;
  rollouts: RolloutView[];
  plan?: PlanReport;
}

/** Event "pressure": new points for the charts, per node [t ms, cpu ewma, memory ewma]. */
export type PressurePoints = Record<string, [number, number, number][]>;

/** An action the page may ask for (only with --allow-actions). */
export type ActionKind = 'cordon' | 'uncordon' | 'drain' | 'rollback' | 'pause' | 'resume' | 'abort' | 'promote';

export interface ActionResult {
  ok: boolean;
  /** The CLI command that does the same. */
  cli: string;
  text: string;
}
