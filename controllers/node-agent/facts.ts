// What the agent knows about one of its containers: the plain data decide() reads, extracted from
// `docker inspect` once (labels, state, health, exit code, ports). Pure: no Docker calls here.
import type Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import type { HealthState, ReplicaAddress } from '../../src/api/types.js';

export type DockerState = 'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead';

export interface ContainerFacts {
  id: string;
  /** Without Docker's leading slash. */
  name: string;
  /** From the jaco labels ('' / 0 when a label is missing). */
  replica: string;
  deployment: string;
  service: string;
  revision: number;
  specHash: string;
  image: string;
  state: DockerState;
  health: HealthState;
  /** The last health check's output, trimmed. */
  healthOutput?: string;
  lastHealthAt?: string;
  exitCode: number;
  oomKilled: boolean;
  /** Docker's State.Error (e.g. why a start failed). */
  error?: string;
  createdAt: string;
  /** Absent when the container never started. */
  startedAt?: string;
  /**
   * How long it has been running, measured on the agent's monotonic clock (running-clock.ts; absent:
   * not known). Readiness counts minReadyTime with it, not with startedAt: a node whose wall clock
   * steps back after a start would otherwise hold the container not ready for as long as it stepped.
   */
  runningForMs?: number;
  finishedAt?: string;
  /** Host ports the container declares (Config.ExposedPorts; host networking). */
  ports: number[];
  /** The main process, for its cgroup (0 when not running). */
  pid: number;
  /** How long it stays out of routing before a stop (its label, set at create; absent: none). */
  deregistrationMs?: number;
  /** The container's own health check as Docker holds it (absent: none, or NONE). */
  healthcheck?: HealthcheckFacts;
  /** Its agent-run health check (healthcheck.http or .tcp; probes.ts), from its label. */
  probe?: ProbeSpec;
  /** `sandbox`: it holds a cluster-network replica's network namespace (absent: the replica's own container). */
  role?: 'sandbox';
  /** Docker's HostConfig.NetworkMode: host, none, or container:<id> (a replica in its sandbox). */
  networkMode?: string;
  /** On a sandbox: the hash of its spec (sandbox.ts), and the addresses it was made for. */
  sandboxHash?: string;
  address?: ReplicaAddress;
}

/** A container's health check as created (image defaults merged in by Docker), in ms. */
export interface HealthcheckFacts {
  /** Docker's Test: ["CMD", …] or ["CMD-SHELL", "…"]. */
  test: string[];
  /** 0: Docker's default (30 s). */
  timeoutMs: number;
}

/** The label carrying a container's deregistration delay: a stop honours the container's own, like its grace. */
export const DEREGISTRATION_LABEL = 'jaco.dev/deregistration-delay-ms';

/** The label carrying a container's agent-run check (JSON of its ProbeSpec; probes.ts). */
export const PROBE_LABEL = 'jaco.dev/health-probe';

/** One container's agent-run check, resolved: where it goes and how often. */
export interface ProbeSpec {
  kind: 'http' | 'tcp';
  host: string;
  port: number;
  /** http: the path requested. */
  path?: string;
  /** http: the status that counts as healthy (absent: 200–399). */
  expect?: number;
  intervalMs: number;
  timeoutMs: number;
  retries: number;
  startPeriodMs: number;
}

/** What one run of an agent-run check saw (probes.ts; a runtime's own `probe`). */
export interface ProbeResult {
  ok: boolean;
  /** What the check saw, as a health check's output ("HTTP 503 from http://…", "connect ECONNREFUSED …"). */
  output: string;
}

/** A container's check read back from its label (undefined: none, or a label this agent cannot read). */
export function probeFromLabel(value: string | undefined): ProbeSpec | undefined {
  if (!value) return undefined;
  try {
    const p = JSON.parse(value) as ProbeSpec;
    const ok = (p.kind === 'http' || p.kind === 'tcp') && typeof p.host === 'string' && Number.isInteger(p.port) && [p.intervalMs, p.timeoutMs, p.retries, p.startPeriodMs].every((n) => typeof n === 'number' && n >= 0);
    return ok ? p : undefined;
  } catch {
    return undefined;
  }
}

const DOCKER_STATES: DockerState[] = ['created', 'running', 'paused', 'restarting', 'removing', 'exited', 'dead'];
/** Docker's zero time: a container that never started or never finished. */
const ZERO_TIME = '0001-01-01T00:00:00Z';

function time(t: string | undefined): string | undefined {
  if (!t || t.startsWith('0001-01-01')) return undefined;
  const ms = Date.parse(t);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

function trim(s: string | undefined, max = 300): string | undefined {
  const t = s?.trim();
  if (!t) return undefined;
  return t.length > max ? `${t.slice(0, max)}…` : t;
}

export function portsOf(exposed: Record<string, unknown> | undefined | null): number[] {
  return Object.keys(exposed ?? {})
    .map((p) => Number(p.split('/')[0]))
    .filter((p) => Number.isInteger(p) && p > 0)
    .sort((a, b) => a - b);
}

/** What a container's labels say of its network: whether it is a sandbox, and what the sandbox holds. */
export function networkLabels(labels: Record<string, string>): Pick<ContainerFacts, 'role' | 'sandboxHash' | 'address'> {
  if (labels[LABELS.role] !== 'sandbox') return {};
  const ipv4 = labels[LABELS.ipv4];
  const ipv6 = labels[LABELS.ipv6];
  return { role: 'sandbox', ...(labels[LABELS.sandboxHash] ? { sandboxHash: labels[LABELS.sandboxHash] } : {}), ...(ipv4 && ipv6 ? { address: { ipv4, ipv6 } } : {}) };
}

export function factsFromInspect(i: Docker.ContainerInspectInfo): ContainerFacts {
  const labels = i.Config?.Labels ?? {};
  const st = i.State;
  const status = (DOCKER_STATES as string[]).includes(st.Status) ? (st.Status as DockerState) : st.Running ? 'running' : 'exited';
  const h = st.Health;
  const last = h?.Log?.[h.Log.length - 1];
  const health: HealthState = !h || !i.Config?.Healthcheck || i.Config.Healthcheck.Test?.[0] === 'NONE' ? 'none' : (['starting', 'healthy', 'unhealthy'].includes(h.Status) ? h.Status : 'starting') as HealthState;
  const facts: ContainerFacts = {
    id: i.Id,
    name: i.Name.replace(/^\//, ''),
    replica: labels[LABELS.replica] ?? '',
    deployment: labels[LABELS.deployment] ?? '',
    service: labels[LABELS.service] ?? '',
    revision: Number(labels[LABELS.revision]) || 0,
    specHash: labels[LABELS.specHash] ?? '',
    image: i.Config?.Image ?? '',
    state: status,
    health,
    exitCode: st.ExitCode ?? 0,
    oomKilled: !!st.OOMKilled,
    createdAt: time(i.Created) ?? ZERO_TIME,
    ports: portsOf(i.Config?.ExposedPorts),
    pid: st.Pid ?? 0,
  };
  const opt = {
    healthOutput: health === 'none' ? undefined : trim(last?.Output),
    lastHealthAt: health === 'none' ? undefined : time(last?.End),
    error: trim(st.Error),
    startedAt: time(st.StartedAt),
    finishedAt: time(st.FinishedAt),
    deregistrationMs: Number(labels[DEREGISTRATION_LABEL]) > 0 ? Number(labels[DEREGISTRATION_LABEL]) : undefined,
    healthcheck: health === 'none' ? undefined : { test: i.Config.Healthcheck!.Test ?? [], timeoutMs: Math.round((i.Config.Healthcheck!.Timeout ?? 0) / 1e6) },
    networkMode: i.HostConfig?.NetworkMode || undefined,
    probe: probeFromLabel(labels[PROBE_LABEL]),
    ...networkLabels(labels),
  };
  for (const [k, v] of Object.entries(opt)) if (v !== undefined) (facts as unknown as Record<string, unknown>)[k] = v;
  return facts;
}
