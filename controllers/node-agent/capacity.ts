// The agent's flags that describe its node: declared capacity (cpu=2,memory=4Gi,gpus=0, or
// detected: cores, total memory, nvidia-smi GPUs and their ids), the devices it offers
// (--device), node labels, the status interval and the Docker host. Parsers are pure and throw AgentFlagError with a message fit for the CLI.
import { execFile } from 'node:child_process';
import { availableParallelism, totalmem } from 'node:os';
import { labelProblem } from '../../src/api/nodes.js';
import type { Capacity } from '../../src/api/types.js';
import { cpuMillis, formatDuration, memoryBytes, UnitError } from '../../src/api/units.js';
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

/**
 * Seed 001: node_status_interval is 5 s … 5 m (the CLI parses the flag as every duration flag);
 * fast timings (tests, demos) may go below 5 s. Absent: the timings' own.
 */
export function checkStatusInterval(ms: number | undefined, timings: Timings): number {
  if (ms === undefined) return timings.nodeStatusIntervalMs;
  const min = timings.name === 'fast' ? 100 : 5000;
  const max = 5 * 60_000;
  if (ms < min || ms > max) throw new AgentFlagError(`--status-interval must be between ${formatDuration(min)} and ${formatDuration(max)} (got ${formatDuration(ms)})`);
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

/**
 * GPUs as `nvidia-smi -L` lists them ("GPU 0: Tesla T4 (UUID: GPU-5f2c…)"): their count and their
 * ids, each index and UUID (what Docker's device requests take). None when the output lists none.
 */
export function gpusListed(output: string): { count: number; ids: string[] } {
  const ids: string[] = [];
  let count = 0;
  for (const line of output.split('\n')) {
    const m = /^GPU (\d+):.*?(?:\(UUID: ([^)\s]+)\))?$/.exec(line.trim());
    if (!m) continue;
    count++;
    ids.push(m[1]!, ...(m[2] ? [m[2]] : []));
  }
  return { count, ids };
}

/** This host's GPUs (nvidia-smi -L); none when it is absent or fails. */
export function detectGpus(timeoutMs = 5000): Promise<{ count: number; ids: string[] }> {
  return new Promise((resolve) => {
    execFile('nvidia-smi', ['-L'], { timeout: timeoutMs }, (err, stdout) => resolve(err ? { count: 0, ids: [] } : gpusListed(stdout)));
  });
}

/**
 * `--device PATH` (repeatable): the host devices this node offers containers (compose devices:),
 * each an absolute path that exists here. Placement gives a service asking for one only such nodes.
 */
export function parseDevices(paths: readonly string[], exists: (path: string) => boolean): string[] {
  for (const p of paths) {
    if (!/^\/[^:]+$/.test(p)) throw new AgentFlagError(`--device: "${p}" is not an absolute device path (e.g. /dev/fuse)`);
    if (!exists(p)) throw new AgentFlagError(`--device: ${p} does not exist on this host`);
  }
  return [...new Set(paths)].sort();
}

/**
 * Declared parts win; the rest is detected on this host (disk by the agent, from Docker's data
 * root). A declared GPU count N has the ids 0…N-1.
 */
export async function resolveCapacity(declared: Partial<Capacity>): Promise<Capacity> {
  const gpus = declared.gpus === undefined ? await detectGpus() : { count: declared.gpus, ids: Array.from({ length: declared.gpus }, (_, i) => String(i)) };
  return {
    ...(declared.diskBytes !== undefined ? { diskBytes: declared.diskBytes } : {}),
    cpuMillis: declared.cpuMillis ?? availableParallelism() * 1000,
    memoryBytes: declared.memoryBytes ?? totalmem(),
    gpus: gpus.count,
    ...(gpus.ids.length ? { gpuIds: gpus.ids } : {}),
    ...(declared.devices?.length ? { devices: declared.devices } : {}),
  };
}
