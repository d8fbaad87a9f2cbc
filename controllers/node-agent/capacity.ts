// The agent's flags that describe its node: declared capacity (cpu=2,memory=4Gi,gpus=0, or
// detected: cores, total memory, nvidia-smi GPUs), node labels, the status interval and the
// Docker host. Parsers are pure and throw AgentFlagError with a message fit for the CLI.
import { execFile } from 'node:child_process';
import { availableParallelism, totalmem } from 'node:os';
import { labelProblem } from '../../src/api/nodes.js';
import type { Capacity } from '../../src/api/types.js';
import { cpuMillis, durationMs, formatDuration, memoryBytes, UnitError } from '../../src/api/units.js';
import type { Timings } from '../../src/timings.js';

export class AgentFlagError extends Error {
  override name = 'AgentFlagError';
}

const CAPACITY_KEYS = ['cpu', 'memory', 'gpus', 'disk'] as const;
type CapacityKey = (typeof CAPACITY_KEYS)[number];

/** "cpu=2,memory=4Gi,gpus=0,disk=100Gi" → the declared parts (keys left out are detected; disk from Docker's data root). */
export function parseCapacity(spec: string): Partial<Capacity> {
  const out: Partial<Capacity> = {};
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    const k = part.slice(0, eq).trim() as CapacityKey;
    const v = part.slice(eq + 1).trim();
    if (eq <= 0 || !v) throw new AgentFlagError(`--capacity: "${part}" is not key=value (e.g. cpu=2,memory=4Gi,gpus=0)`);
    if (!CAPACITY_KEYS.includes(k)) throw new AgentFlagError(`--capacity: unknown key "${k}"; use cpu, memory, gpus and disk`);
    try {
      if (k === 'cpu') out.cpuMillis = cpuMillis(v);
      else if (k === 'memory') out.memoryBytes = memoryBytes(v);
      else if (k === 'disk') out.diskBytes = memoryBytes(v);
      else {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 0) throw new UnitError(`invalid GPU count ${JSON.stringify(v)}`);
        out.gpus = n;
      }
    } catch (e) {
      throw new AgentFlagError(`--capacity: ${k}=${v}: ${(e as Error).message.replace(/^invalid /, 'not a valid ')}`);
    }
  }
  return out;
}

/** "zone=a,gpu=true" → labels, with Kubernetes' label syntax (placement.nodeSelector matches them). */
export function parseLabels(spec: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (spec ?? '').split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.indexOf('=');
    if (eq <= 0) throw new AgentFlagError(`--labels: "${part}" is not key=value (e.g. zone=a,disk=ssd)`);
    const k = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    const bad = labelProblem(k, v);
    if (bad) throw new AgentFlagError(`--labels: ${bad}`);
    out[k] = v;
  }
  return out;
}

/** Seed 001: node_status_interval is 5 s … 5 m. Fast timings (tests, demos) may go below 5 s. */
export function parseStatusInterval(flag: string | undefined, timings: Timings): number {
  if (flag === undefined) return timings.nodeStatusIntervalMs;
  let ms: number;
  try {
    ms = durationMs(flag);
  } catch {
    throw new AgentFlagError(`--status-interval: "${flag}" is not a duration (e.g. 30s, 1m)`);
  }
  const min = timings.name === 'fast' ? 100 : 5000;
  const max = 5 * 60_000;
  if (ms < min || ms > max) throw new AgentFlagError(`--status-interval must be between ${formatDuration(min)} and ${formatDuration(max)} (got ${flag})`);
  return ms;
}

/** unix:///path, tcp://host:port or http://host:port → dockerode connection options. */
export function dockerConnection(host: string): { socketPath: string } | { host: string; port: number; protocol: 'http' } {
  const unix = /^unix:\/\/(\/.+)$/.exec(host);
  if (unix) return { socketPath: unix[1]! };
  const tcp = /^(?:tcp|http):\/\/([^:/]+|\[[^\]]+\]):(\d+)\/?$/.exec(host);
  if (tcp) return { host: tcp[1]!.replace(/^\[|\]$/g, ''), port: Number(tcp[2]), protocol: 'http' };
  throw new AgentFlagError(`--docker-host: "${host}" is not unix:///path/to/docker.sock or tcp://host:port`);
}

/** GPUs as nvidia-smi lists them; 0 when it is absent or fails. */
export function countGpus(timeoutMs = 5000): Promise<number> {
  return new Promise((resolve) => {
    execFile('nvidia-smi', ['-L'], { timeout: timeoutMs }, (err, stdout) => {
      resolve(err ? 0 : stdout.split('\n').filter((l) => /^GPU \d+/.test(l.trim())).length);
    });
  });
}

/** Declared parts win; the rest is detected on this host (disk by the agent, from Docker's data root). */
export async function resolveCapacity(declared: Partial<Capacity>): Promise<Capacity> {
  return {
    ...(declared.diskBytes !== undefined ? { diskBytes: declared.diskBytes } : {}),
    cpuMillis: declared.cpuMillis ?? availableParallelism() * 1000,
    memoryBytes: declared.memoryBytes ?? totalmem(),
    gpus: declared.gpus ?? (await countGpus()),
  };
}
