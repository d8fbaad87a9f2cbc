// What a node-agent is started with (jaco agent's flags, hollow nodes, tests): its node and store,
// its engine and network, its own directory and endpoint. A file of its own so that the agent and
// the parts it wires (presence, the sampler, …) share it without importing the agent back.
import type { Capacity, PortRange } from '../../src/api/types.js';
import type { Logger } from '../../src/observability/log.js';
import type { TlsMaterial } from '../../src/pki/identity.js';
import type { Store } from '../../src/store/store.js';
import type { Timings } from '../../src/timings.js';
import type { ReplicaNetwork } from './network.js';
import type { PressureMode } from './node-usage.js';
import type { OverlayOptions } from './overlay.js';
import type { EngineFactory } from './engine.js';

export interface AgentOptions {
  node: string;
  store: Store;
  timings: Timings;
  /** Heartbeat and pressure sampling period (seed 001: node_status_interval). */
  statusIntervalMs: number;
  /** The host's wall clock (default Date.now): tests skew it (issue 29). Only durations on it are compared. */
  clock?: () => number;
  capacity: Capacity;
  labels: Record<string, string>;
  /** unix:///var/run/docker.sock or tcp://host:port. */
  dockerHost: string;
  /** The container engine; default Docker at dockerHost (hollow nodes pass an in-memory one). */
  engine?: EngineFactory;
  /** Register again although a drain removed this node from the cluster. */
  rejoin: boolean;
  log: Logger;
  /** Where cgroups are mounted (tests point it at fixtures). */
  cgroupRoot?: string;
  /**
   * What the node's pressure measures (node-usage.ts): `node` the whole host, `containers` the sum
   * of this agent's containers. Default: node on Docker, containers with a runtime of its own
   * (hollow nodes have no host to measure).
   */
  pressureMode?: PressureMode;
  /** The node's address (Node.status.address, JACO_NODE_ADDRESS). */
  address?: string;
  /** Where the scheduler assigns this node's dynamic host ports from (Node.status.portRange). */
  portRange?: PortRange;
  /**
   * The agent's own directory (jaco agent --state-dir): its node key (made on the first start,
   * mode 600, never sent anywhere) and the tmpfs of each container's secrets and configs. Absent
   * (tests, hollow nodes): a key for this run only, and no files written.
   */
  stateDir?: string;
  /** The WireGuard mesh between nodes (jaco agent --overlay; overlay.ts): needs stateDir and address. */
  overlay?: OverlayOptions;
  /** The pause image of cluster-network sandboxes (default jaco/pause:1, a short name resolved at the cluster's default registry). */
  sandboxImage?: string;
  /**
   * Plumbs cluster-network sandboxes. Default: the CNI ptp plugin from cniBinDir on Docker, memory
   * with a runtime of its own (hollow nodes have no namespaces).
   */
  network?: ReplicaNetwork;
  /** Where the CNI plugins are (default /usr/lib/cni, Debian's containernetworking-plugins). */
  cniBinDir?: string;
  /**
   * The node's resolver for its cluster-network replicas (names.ts; default: on with Docker, off
   * for hollow nodes). False: their sandboxes still name it, and names do not resolve.
   */
  resolver?: boolean;
  /**
   * The logs and exec endpoint (api-server.ts): where it listens and its TLS material (the node's
   * certificate from the cluster CA). Absent, or a runtime other than Docker: no endpoint.
   */
  api?: { host: string; port: number; tls: TlsMaterial };
}
