// The agent's one door to a container engine. Everything above it — registration, the claim and
// heartbeats, the pass, starts and stops, pressure — is the same whatever is behind it: Docker
// (docker.ts, dockerode) on a real host, or the in-memory hollow engine (controllers/hollow/) that
// lets one process run a thousand agents against a real etcd for scale tests.
//
// The vocabulary is Docker's on purpose: the agent's container spec is a `docker create` body
// (container-spec.ts), and failures are DockerApiError (with Docker's status codes: 404 gone, 409
// conflict, 400 bad spec) or DockerUnreachableError (the engine does not answer). They, and the
// Owner a runtime is made for, are defined here, with the door: every runtime throws them and the
// parts above read them without importing any one runtime.
import type { DockerInfoStorage } from './disk.js';
import type Docker from 'dockerode';
import type { CgroupUsage } from './cgroup.js';
import type { ContainerFacts, ProbeResult, ProbeSpec } from './facts.js';
import type { PullAuth } from '../../src/images/access.js';

/** Which agent a container belongs to: several agents (simulated nodes, clusters) share an engine. */
export interface Owner {
  clusterUid: string;
  node: string;
  /** The node's address (Node.status.address): JACO_NODE_ADDRESS. */
  address?: string;
}

/** The engine does not answer on its socket: the agent reports docker_up 0 and retries. */
export class DockerUnreachableError extends Error {
  override name = 'DockerUnreachableError';
  readonly recoverable = true;
  constructor(readonly host: string, cause: string) {
    super(`cannot reach Docker at ${host}: ${cause}. Is dockerd running, and may this user use its socket? (--docker-host)`);
  }
}

/** Docker answered with an error status (statusCode: 400 bad spec, 404 missing, 409 conflict, 500 …). */
export class DockerApiError extends Error {
  override name = 'DockerApiError';
  constructor(message: string, readonly statusCode: number) {
    super(message);
  }
}

/** An exec (the agent's early health check) did not exit within its timeout. */
export class HealthExecTimeout extends Error {
  override name = 'HealthExecTimeout';
}

/** The status of an engine's answer (404 gone, 409 conflict, …); undefined for any other failure. */
export const statusOf = (e: unknown): number | undefined => (e instanceof DockerApiError ? e.statusCode : undefined);

/** Reads a container's usage without asking the engine (cgroup files); undefined: ask `stats`. */
export interface UsageReader {
  read(id: string, pid: number): CgroupUsage | undefined;
  /** Forget what is kept for containers that are gone. */
  retain(ids: Set<string>): void;
}

export interface ContainerEngine {
  /** Where the engine is, for logs and /healthz (unix:///var/run/docker.sock, hollow://node-7). */
  readonly host: string;
  /** Usage known without an API call; absent: the agent reads cgroup files (CgroupReader). */
  readonly usage?: UsageReader;
  ping(): Promise<void>;
  /** The engine's runtimes (runc, runsc, nvidia…); absent: the runtime has none to choose (hollow). */
  runtimes?(): Promise<string[]>;
  /** Ids of every container (any state) of this agent's cluster and node. */
  listOwn(): Promise<string[]>;
  /** Facts of a container by id or name, or undefined when it is gone. */
  inspect(idOrName: string): Promise<ContainerFacts | undefined>;
  imagePresent(image: string): Promise<boolean>;
  /** Pulls an image (with the registry's credentials, when the cluster has them); an abort ends it. */
  pull(image: string, signal?: AbortSignal, auth?: PullAuth): Promise<void>;
  /** Creates a container; its id. */
  create(opts: Docker.ContainerCreateOptions): Promise<string>;
  /** Starts a container (already running is fine). */
  start(id: string): Promise<void>;
  /** Stops with the container's own stop signal and grace (already stopped or gone is fine). */
  stop(id: string): Promise<void>;
  /** Removes a container (gone is fine). */
  remove(id: string): Promise<void>;
  /**
   * Runs a command in a running container to its exit code (the agent's early health checks);
   * throws HealthExecTimeout past timeoutMs. Absent: the runtime has no exec (hollow), and health
   * comes from the runtime's own checks only.
   */
  exec?(id: string, cmd: string[], timeoutMs: number): Promise<number>;
  /**
   * Runs an agent-run health check (healthcheck.http/.tcp) of a container. Absent (Docker): the
   * agent dials the replica over the network itself (probes.ts dialProbe).
   */
  probe?(id: string, p: ProbeSpec): Promise<ProbeResult>;
  /** The engine's storage (docker info): its data root and driver. Absent: no disk of its own (hollow). */
  storageInfo?(): Promise<DockerInfoStorage>;
  /** The engine's one-shot usage of a container (the fallback of `usage`). */
  stats(id: string): Promise<CgroupUsage | undefined>;
  /**
   * Follows this agent's container events (start, die, destroy, health_status: …); `ended`
   * resolves when the stream ends (the engine went away) or the signal aborts.
   */
  watchEvents(onEvent: (id: string, action: string) => void, signal: AbortSignal): Promise<{ ended: Promise<void> }>;
}

/** Makes the runtime of one agent once its owner (cluster uid, node) is known. */
export type EngineFactory = (owner: Owner) => ContainerEngine;
