// jaco's resource types: every object stored under the key prefix, Kubernetes-style
// (apiVersion, kind, metadata, spec, status). crds/ holds the schema of each kind; these types
// mirror those schemas. Times are RFC 3339 strings; internal sizes are plain numbers.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import type { NetworkConfigSpec, ReplicaAddress } from './network.js';
import type { ActFailureReason } from './reasons/acts.js';
import type { ObservedCode } from './reasons/agent.js';
import type { DrainAbortReason, DrainReplicaReason } from './reasons/drain.js';
import type { RolloutAction, RolloutState } from './reasons/rollout.js';
import type { DecisionTrigger, FilterName, UnschedulableReason } from './reasons/scheduling.js';

// A replica's addresses are the address plan's (network.ts defines them, as it must not import back
// from here); they are part of ReplicaDesired's spec, so they are named here too.
export type { ReplicaAddress };
// A rollout's states and the operator's requests are closed vocabularies (reasons/rollout.ts, which
// must not import back from here); RolloutPlan holds them, so they are named here too.
export type { RolloutAction, RolloutState };

export const GROUP = 'jaco.dev';
export const API_VERSION = 'jaco.dev/v1';

/** The metadata fields jaco uses, typed by client-node's V1ObjectMeta (timestamps as strings). */
export type ObjectMeta = Pick<V1ObjectMeta, 'labels' | 'annotations' | 'resourceVersion' | 'generation' | 'uid'> & {
  name: string;
  creationTimestamp?: string;
};

export interface JacoObject<K extends string = string, S = unknown, St = unknown> {
  apiVersion: typeof API_VERSION;
  kind: K;
  metadata: ObjectMeta;
  spec: S;
  status?: St;
}

// ---------------------------------------------------------------- Deployment (user-facing)

export type PlacementMode = 'spread' | 'pack' | 'hosts' | 'global';
export type UpdateOrder = 'start-first' | 'stop-first';

export interface Placement {
  mode?: PlacementMode;
  hosts?: string[];
  nodeSelector?: Record<string, string>;
  /** At most this many replicas of the service on one node (compose's max_replicas_per_node). */
  maxPerNode?: number;
}

export interface Resources {
  /** CPU quantity: "500m", "0.5", "2". Soft (scored against capacity × overcommit). */
  cpu?: string | number;
  /** Memory quantity: "128Mi", "1Gi". Hard cap, enforced by Docker and by placement. */
  memory?: string | number;
  /** A count, or "all": the node's every GPU (at least one), as `docker run --gpus all`. */
  gpus?: number | 'all';
  /** These GPUs by id (index or UUID): only on nodes that have each; counted as that many GPUs. Not with gpus. */
  gpuIds?: string[];
  /**
   * Scratch disk (the container's writable layer): "10Gi". Booked like memory against the node's
   * data-root filesystem; absent: the cluster's defaultInstanceEphemeralDisk (seed 004: 4Gi).
   */
  disk?: string | number;
}

/**
 * A health check, one of three forms: `test` is run by Docker inside the container (an exec check:
 * the image needs what it runs); `http` and `tcp` are run by the node-agent against the replica
 * (its own address on the cluster network, its node's under host networking), so an image without
 * a shell can be checked. Interval, timeout, retries and start period mean the same for all three.
 */
export interface HealthCheck {
  /** ["CMD", "arg", …] or ["CMD-SHELL", "cmd"] (Docker's HEALTHCHECK forms). */
  test?: string[];
  /** An HTTP GET of `path` on `port`: healthy when the answer's status is `expect` (default any 2xx or 3xx). */
  http?: HttpCheck;
  /** A TCP connection to `port`: healthy when it is accepted. */
  tcp?: TcpCheck;
  interval?: string;
  timeout?: string;
  retries?: number;
  startPeriod?: string;
}

/**
 * The port a check goes to: a container port (number) or the name of one of the service's ports.
 * Under host networking it is the port's host port (fixed or assigned), else the number as given.
 */
export type CheckPort = number | string;

export interface HttpCheck {
  /** Default "/". */
  path?: string;
  port: CheckPort;
  /** The status code that counts as healthy (default: any of 200–399). */
  expect?: number;
}

export interface TcpCheck {
  port: CheckPort;
}

/**
 * volume: a Docker named volume on the node; bind: a host path; anonymous: a volume of the
 * container's own, made with it and removed with it (compose's `- /var/lib/mysql`): each replica
 * has its own, and a new container starts with a new one.
 */
export type VolumeMount = { type: 'volume' | 'bind'; source: string; target: string; readOnly?: boolean } | { type: 'anonymous'; target: string; readOnly?: boolean };

/** One dependency of a service (dependsOn). */
export interface Dependency {
  condition: DependencyCondition;
  /** Roll the service whenever the dependency is recreated (compose depends_on restart: true). */
  restart?: boolean;
  /**
   * With restart: the dependency's spec hash, as apply saw it (withDependencyHashes; never written
   * by hand): part of the service's own spec hash, so a recreated dependency rolls it.
   */
  specHash?: string;
}

/** Docker create options beyond the workload's shape (compose's working_dir, user, cap_add, …). */
export interface ContainerOptions {
  workingDir?: string;
  user?: string;
  /** Container labels (jaco's own labels always win). */
  labels?: Record<string, string>;
  init?: boolean;
  readOnly?: boolean;
  capAdd?: string[];
  capDrop?: string[];
  /** "host:ip" entries for /etc/hosts. */
  extraHosts?: string[];
  /** The container's host name (cluster network: its namespace's; default the replica's id). */
  hostname?: string;
  /** Bytes of /dev/shm. */
  shmSize?: number;
  /** "path[:options]" tmpfs mounts. */
  tmpfs?: string[];
  ulimits?: Record<string, { soft: number; hard: number }>;
  /** Only with --allow-privileged at apply. */
  privileged?: boolean;
  /**
   * Namespaced kernel parameters (compose sysctls). On the cluster network the `net.*` ones are set
   * on the replica's sandbox, whose network namespace the container joins; the IPC ones
   * (kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*) on the container.
   */
  sysctls?: Record<string, string>;
  /** Docker security options (compose security_opt: seccomp, apparmor, label, no-new-privileges). */
  securityOpt?: string[];
  /** The IPC namespace: the container's own (private, shareable) or the node's (host). */
  ipc?: 'private' | 'shareable' | 'host';
  /** The PID namespace: the node's (host); absent: the container's own. */
  pid?: 'host';
  /** The Docker runtime (HostConfig.Runtime): placed only on nodes whose engine has it. */
  runtime?: string;
  /** "/dev/host[:/dev/container][:rwm]" (HostConfig.Devices): placed only on nodes that declare the host device. */
  devices?: string[];
}

export type FailureAction = 'rollback' | 'pause' | 'continue';
/** A number of replicas, or a percentage of the service's replicas ("25%"). */
export type ReplicaCount = number | string;

/** How a service's replicas are replaced (docs/rollout.md); src/api/update.ts resolves it. */
export interface UpdatePolicy {
  order?: UpdateOrder;
  stepTimeout?: string;
  /** The disruption budget: replicas that may be disrupted at once — moves (drain, rebalance) and rollout steps. */
  maxUnavailable?: ReplicaCount;
  /** With no health check, how long a replica must run before it counts as ready. */
  minReadyTime?: string;
  /** Replicas stepped at once (default 1; 0: as many as maxUnavailable allows). */
  parallelism?: number;
  /** Start-first steps in flight, i.e. extra containers (default: parallelism); further steps go stop-first. */
  maxSurge?: ReplicaCount;
  /** Wait between one step finishing and the next starting (default 0s). */
  delay?: string;
  /** How long a new replica must stay ready before its step counts (default 0s). */
  monitor?: string;
  /** The rollout fails when no step completes for this long (default: no deadline). */
  progressDeadline?: string;
  /** What a failed rollout does: rollback (default), pause, or continue with the next replica. */
  failureAction?: FailureAction;
  /** Fraction of steps that may fail before failureAction applies (default 0). */
  maxFailureRatio?: number;
  /** How a revert after a failed rollout goes (compose's rollback_config); each field defaults to the forward one, delay to 0s. */
  rollback?: { parallelism?: number; delay?: string; order?: UpdateOrder };
  /**
   * Canary: a rollout first starts this many extra replicas at the new spec beside the old ones
   * (taking none out) and waits for `jaco rollout promote` (or autoPromote) before stepping the
   * old ones. Default 0: no canary.
   */
  canary?: number;
  /** With canary: promote once every canary has stayed ready this long (default: wait for the operator). */
  autoPromote?: string;
}

/** How jaco apply builds a service's image (compose's build section; docs/images.md). */
export interface ImageBuild {
  /** The build context: a directory on the operator's machine (absolute once read). */
  context: string;
  /** The Dockerfile, relative to the context (default Dockerfile). */
  dockerfile?: string;
  args?: Record<string, string>;
  /** The stage of a multi-stage Dockerfile to build. */
  target?: string;
  labels?: Record<string, string>;
  noCache?: boolean;
  /** Pull newer base images while building. */
  pull?: boolean;
  /** Where it is pushed when `image` names no registry (compose x-jaco.registry); default --registry, else the cluster's. */
  registry?: string;
}

/** When apply resolves a service's image and when its nodes pull (docs/images.md). */
export type PullPolicy = 'missing' | 'always' | 'never' | 'build';

/**
 * How a service's replicas are networked (docs/networking.md): `host` — the node's own network
 * namespace, ports a per-node resource (JACO_NODE_ADDRESS, PORT); `cluster` — each replica its own
 * network namespace with its own addresses (ReplicaDesiredSpec.address), reached on its container
 * ports.
 */
export type NetworkMode = 'host' | 'cluster';

/**
 * What a service is: `service` (the default) keeps its replicas running; `job` runs each replica
 * to completion once per applied change of its spec (docs/manifests.md, "One-off jobs").
 */
export type ServiceMode = 'service' | 'job';

/** How a job (mode: job) is retried: a replica that exits non-zero runs again, up to `attempts` runs in all. */
export interface JobPolicy {
  /** Runs in all, the first included (default 3). */
  attempts?: number;
  /** Wait before the second run; doubles for each further one (default 5s). */
  backoff?: string;
}

export interface ServiceSpec {
  /** The image as written (a tag, or a digest). */
  image: string;
  /** Default service; job: runs to completion (docs/manifests.md). */
  mode?: ServiceMode;
  /** With mode job: its retries. */
  job?: JobPolicy;
  /** Default host (for now: services and names on the cluster network come with issue 26's next slice). */
  network?: NetworkMode;
  /** The image resolved to its registry digest at apply: what every node runs. */
  pinnedImage?: string;
  /**
   * The TCP ports the pinned image declares (EXPOSE), read at apply for a cluster-network service:
   * its name answers on them beside the ports it lists (docs/networking.md). Written by jaco apply.
   */
  imagePorts?: number[];
  pullPolicy?: PullPolicy;
  /** Built by jaco apply with the operator's engine and pushed to the cluster's registry (compose's build). */
  build?: ImageBuild;
  command?: string[];
  args?: string[];
  env?: Record<string, string>;
  replicas?: number;
  placement?: Placement;
  resources?: Resources;
  /** A number is a fixed host port (the short form); the long form may leave the host port to the scheduler (src/api/ports.ts). */
  ports?: (number | PortSpec)[];
  /** How long a replica leaves routing before its container is stopped (default 5s for a service with a TCP port — an ingress routes to it, published or on its service address — else 0s). */
  deregistrationDelay?: string;
  healthcheck?: HealthCheck;
  stopSignal?: string;
  stopGracePeriod?: string;
  volumes?: VolumeMount[];
  priority?: number;
  rebalance?: 'enabled' | 'disabled';
  update?: UpdatePolicy;
  container?: ContainerOptions;
  /**
   * Services of the same deployment this one waits for: none of its replicas is placed until each
   * dependency has all its replicas started (service_started) or ready (service_healthy), or a
   * job dependency succeeded at its current spec (service_completed_successfully).
   */
  dependsOn?: Record<string, Dependency>;
  /**
   * Other names the service answers to, as `ALIAS` inside its deployment and `ALIAS.DEPLOYMENT`
   * anywhere: a compose service's own name when jaco's differs (`web_app` for `web-app`), and its
   * compose network aliases. Not part of the container: changing them restarts nothing.
   */
  aliases?: string[];
  /** Secrets (secrets/<source>) as files on a tmpfs in the container, at /run/secrets/<target> (docs/secrets.md). */
  secrets?: FileRef[];
  /** Configs (configs/<source>) as files on a tmpfs in the container, at <target> (default /<source>). */
  configs?: FileRef[];
}

/**
 * A service's use of a secret or config: which one, and the file it appears as. The value is
 * never in the spec; `version` (pinned by apply) is the object's uid, so a secret deleted and made
 * again under the same name rolls the service like any change (it is in the spec hash).
 */
export interface FileRef {
  /** The secret's (config's) name in the cluster. */
  source: string;
  /**
   * Secrets: a file name under /run/secrets, or an absolute path (default: the source's name).
   * Configs: an absolute path (default /<source>; a relative one is taken from /).
   */
  target?: string;
  /** Owner of the file (default 0). */
  uid?: number;
  gid?: number;
  /** Permission bits (default 0o444, as Docker's). */
  mode?: number;
  /** The object's metadata.uid when apply read it. */
  version?: string;
}

/** A port of a service, long form (docs/ingress.md). */
export interface PortSpec {
  /** Names JACO_PORT_<NAME> (default "p<containerPort>"). */
  name?: string;
  containerPort: number;
  /** A fixed host port (a per-node resource); absent: the scheduler assigns one from the node's range. */
  hostPort?: number;
  /** Answered on every node's ingress at <node address>:published. */
  published?: number;
  protocol?: 'tcp' | 'udp';
  /** What it speaks (compose app_protocol): http makes the ingress proxy HTTP requests; otherwise TCP connections. */
  appProtocol?: string;
}

export type DependencyCondition = 'service_started' | 'service_healthy' | 'service_completed_successfully';

export interface DeploymentSpec {
  services: Record<string, ServiceSpec>;
  /** How the deployment's services roll out together. */
  update?: DeploymentUpdate;
}

export interface DeploymentUpdate {
  /**
   * Roll the deployment as one unit: when any service's rollout fails (or is aborted), every
   * service that rolled toward the same revision goes back to the previous one, and `jaco rollout
   * status` reports the deployment as one.
   */
  atomic?: boolean;
}

/** Revision = metadata.generation: it bumps on every spec change, rollbacks included. */
export type Deployment = JacoObject<'Deployment', DeploymentSpec, never>;

/** revisions/<name>/<n>: the spec as applied at revision n, for rollback and history. */
export interface DeploymentRevisionSpec {
  deployment: string;
  revision: number;
  appliedAt: string;
  /** Where it came from: "apply" or "rollback to N". */
  cause: string;
  /** A one-line summary of what changed from the previous revision. */
  summary: string;
  template: DeploymentSpec;
  /** Services whose every replica this revision replaces at the same spec (jaco rollout restart). */
  restarted?: string[];
}
export type DeploymentRevision = JacoObject<'DeploymentRevision', DeploymentRevisionSpec, never>;

// ---------------------------------------------------------------- Nodes

export interface Capacity {
  cpuMillis: number;
  memoryBytes: number;
  gpus: number;
  /** Its GPUs' ids: each index and UUID (nvidia-smi -L), so a service may ask for GPUs by id. */
  gpuIds?: string[];
  /** Its Docker engine's runtimes (docker info); absent: not known. */
  runtimes?: string[];
  /** Host devices it offers containers (jaco agent --device /dev/fuse). */
  devices?: string[];
  /** Scratch disk: the size of the filesystem holding Docker's data root (or --capacity disk=…); absent from older agents (disk not booked there). */
  diskBytes?: number;
}

export interface NodeSpec {
  /** Cordoned: no new placements; running replicas stay. Written by the CLI. */
  unschedulable?: boolean;
  /**
   * Labels the operator set at runtime (`jaco node label`), beside the agent's own
   * (metadata.labels, from `jaco agent --labels`); one of the same key wins. Written by the CLI.
   */
  labels?: Record<string, string>;
  /**
   * The operator's override of `degraded` (`jaco node trust`): the node takes placements although
   * its agent reports disk pressure, failures or overlay loss. Written by the CLI, audited.
   */
  trusted?: boolean;
}

export interface NodeStatus {
  capacity: Capacity;
  agentVersion: string;
  hostname?: string;
  registeredAt: string;
  /** The address replicas of this node are reached at (jaco agent --address). */
  address?: string;
  /** Where dynamic host ports are assigned from (jaco agent --port-range). */
  portRange?: PortRange;
  /** The public half of the node's own X25519 key: its copies of secrets are sealed to it (docs/secrets.md). */
  secretsKey?: { id: string; publicKey: string };
  /** Its end of the WireGuard mesh (jaco agent --overlay): the others configure it as a peer (docs/networking.md). */
  overlay?: NodeOverlay;
  /** Its agent's logs and exec endpoint (mutual TLS; docs/operate.md): the CLI dials it directly, never through etcd. */
  api?: { endpoint: string };
}

export interface NodeOverlay {
  /** The public half of the node's WireGuard key (base64); the private half never leaves the node. */
  publicKey: string;
  /** Where its WireGuard listens: <node address>:<port>. */
  endpoint: string;
}

export interface PortRange {
  min: number;
  max: number;
}

/**
 * nodes/<host>: what its agent reports (status, metadata.labels). Its `spec` is what operators
 * decided only as readers see it — joined from nodespecs/<host> (src/api/nodes.ts nodeAsDecided) —
 * or, stored here, as a cluster written before issue 29 kept it (honoured while nodespecs/<host> is absent).
 */
export type Node = JacoObject<'Node', NodeSpec, NodeStatus>;

/** nodespecs/<host>: what operators decided about a node (cordon, runtime labels, trust); written only by the CLI. */
export type NodeSpecRecord = JacoObject<'NodeSpec', NodeSpec, never>;

export interface ReplicaFootprint {
  cpuMillis: number;
  memoryBytes: number;
}

export interface PressureSample {
  time: string;
  /** Sum of the node's container CPU over its CPU capacity (0…, may exceed 1 when overcommitted). */
  cpuUtil: number;
  /** Sum of the node's container memory (less inactive file cache) over its memory capacity. */
  memoryUtil: number;
  /** Measured per replica: the rebalancer's relief estimate. */
  replicas: Record<string, ReplicaFootprint>;
  /**
   * What cpuUtil and memoryUtil measure: `node` the whole host (root cgroup CPU, /proc/meminfo;
   * a real host), `containers` the sum of the agent's own containers over its capacity (simulated
   * and hollow nodes). Absent in samples of agents before the mode existed: containers.
   */
  mode?: 'node' | 'containers';
}

export interface HeartbeatSpec {
  node: string;
  time: string;
  intervalMs: number;
  agentVersion: string;
  dockerUp: boolean;
  pressure?: PressureSample;
  /**
   * How far the agent's clock is ahead of the controllers' (negative: behind), in ms, as it last
   * measured against the clock beacon (api/clock-skew.ts); absent until it has measured.
   */
  clockSkewMs?: number;
  /** The filesystem of Docker's data root, as the agent last sampled it (statfs): what disk pressure is judged from. */
  disk?: DiskSample;
  /** Its WireGuard peers as the agent last saw them (jaco agent --overlay): what overlay health is judged from. */
  overlay?: OverlaySample;
}

export interface DiskSample {
  /** Docker's data root (docker info DockerRootDir). */
  path: string;
  totalBytes: number;
  /** Available to unprivileged writers (statfs bavail × bsize). */
  availableBytes: number;
  /** In use (statfs (blocks − bfree) × bsize); full is used over used + available, as df counts it. */
  usedBytes: number;
  /** Where the storage driver can cap a container's writable layer (StorageOpt size), or why not ("overlay2 on ext4"). */
  capped: boolean;
  driver: string;
  backingFs?: string;
}

export interface OverlaySample {
  /** One entry per node the mesh should reach: its latest WireGuard handshake, if any, and whether a probe answered. */
  peers: OverlayPeerSample[];
}

export interface OverlayPeerSample {
  node: string;
  /** The latest handshake (wg show latest-handshakes); absent: never, or the peer is not configured. */
  handshakeAt?: string;
  /** When the agent last saw its received bytes grow (the 25 s persistent keepalive keeps a live peer sending). */
  heardAt?: string;
  /**
   * When the agent first saw the peer configured on its interface: a peer just added has had no
   * time to handshake, and is judged unreachable only once it has been there the overlay max age.
   */
  since?: string;
}
/** heartbeats/<host>: bound to the agent's lease, so it vanishes when the agent stops renewing. */
export type Heartbeat = JacoObject<'Heartbeat', HeartbeatSpec, never>;

// ---------------------------------------------------------------- Replicas

export type MoveActor = 'drain' | 'rebalancer';

/** A make-before-break move in progress: set on the destination's desired key. */
export interface MoveMarker {
  id: string;
  from: string;
  by: MoveActor;
  startedAt: string;
  deadline: string;
  /** When the destination was ready and the source's desired key was deleted; the move completes once the source's container is gone. */
  cutoverAt?: string;
  /** A coalescing move: it makes room on `node` for a pending replica of deployment/service (the scheduler holds the hole for it). */
  forPending?: HoleFor;
  /** A rebalancer move: the balancing epoch it started in (the ping-pong exclusion, seed 002). */
  epoch?: string;
}

/** The pending service a move makes room for, and where. */
export interface HoleFor {
  deployment: string;
  service: string;
  node: string;
}

/** Who preempted a replica, and when (ReplicaDesiredSpec.preempted). */
export interface Preempted {
  /** The beneficiary: the pending service the room was made for, and the node of the hole. */
  for: HoleFor;
  /** The victim's priority and the beneficiary's, as they were when it was preempted. */
  priority: number;
  forPriority: number;
  at: string;
}

/** Set on the source's desired key while a move of it is in flight (moves of one replica conflict on it). */
export interface MovingTo {
  id: string;
  node: string;
  by: MoveActor;
}

export interface ReplicaDesiredSpec {
  replica: string;
  deployment: string;
  service: string;
  node: string;
  /** Position in the service (absent for global replicas, whose id carries the host). */
  index?: number;
  revision: number;
  specHash: string;
  /** The service spec at that revision, defaults applied: all the agent needs to run it. */
  template: ServiceSpec;
  /** When the replica was placed on (or moved to) this node. */
  placedAt: string;
  /**
   * A `cluster`-network replica's own addresses on this node, allocated at placement from the
   * node's subnets (CIDR form: the prefix length is the subnet's; the gateway is the subnet's first
   * host, held by the node). Kept across revisions on the node, like its dynamic host ports.
   */
  address?: ReplicaAddress;
  move?: MoveMarker;
  movingTo?: MovingTo;
  /**
   * The node a completed move took it from (drain or rebalancer): the ping-pong exclusion of seed
   * 002 reads it, so it survives a leader failover. A rebalancer move records its balancing epoch
   * and the nodes the replica left earlier in the same epoch: none of them takes it back until
   * new balancing is triggered (a node or its deployment changes).
   */
  movedFrom?: { node: string; by: MoveActor; at: string; forPending?: HoleFor; epoch?: string; earlier?: string[] };
  /** Set when the replica must not run here but must not be re-placed either (drain --force). */
  suspended?: { reason: string; at: string };
  /**
   * Preemption by priority (issue 17): the rebalancer stopped this replica (with `suspended`,
   * reason `preempted`) to make room on its node for a higher-priority pending service. The
   * scheduler holds the hole for `for` and re-places this replica once capacity exists elsewhere.
   */
  preempted?: Preempted;
  /**
   * A canary (update.canary): an extra replica the scheduler placed for the rollout to `revision`
   * beside the service's replicas; the scheduler scales it away when that rollout ends.
   */
  canary?: { revision: number };
  /**
   * Crash-loop escalation: the replica exhausted its restarts on `from` at the deployment's
   * `generation` and was re-placed here once; exhausting again is final until the next apply.
   */
  relocated?: { from: string; generation: number; at: string };
  /** Dynamic host ports the scheduler assigned on this node, by port name (kept across revisions). */
  hostPorts?: Record<string, number>;
}
/** desired/<host>/<replica>: scheduler, rollout, drain and rebalancer write their own fields. */
export type ReplicaDesired = JacoObject<'ReplicaDesired', ReplicaDesiredSpec, never>;

export type ObservedState = 'pulling' | 'pending' | 'starting' | 'running' | 'degraded' | 'exited' | 'failed' | 'stopped';
export type HealthState = 'none' | 'starting' | 'healthy' | 'unhealthy';

export interface ReplicaObservedStatus {
  replica: string;
  node: string;
  deployment: string;
  service: string;
  state: ObservedState;
  /** A code of src/api/reasons/agent.ts, or a suspended replica's drain reason. */
  code?: ObservedCode | string;
  details?: string;
  /** Desired revision and spec hash of the container this status describes. */
  revision?: number;
  specHash?: string;
  containerId?: string;
  containerName?: string;
  image?: string;
  startedAt?: string;
  /**
   * A running container without a health check: whether it has run for its service's minReadyTime,
   * judged by the agent on its own clock (readiness must not compare two hosts' clocks: issue 29).
   * Absent from agents before it existed: readers then judge from startedAt.
   */
  minReadyMet?: boolean;
  health?: HealthState;
  lastHealthAt?: string;
  exitCode?: number;
  /** When the container stopped running (an exited one). */
  finishedAt?: string;
  /** During a start-first replacement: the previous container, still serving. */
  replacing?: { revision: number; specHash: string; containerId: string; state: ObservedState };
  /** The seq of the last command executed (commands/<host>/<replica>). */
  ackedCommand?: number;
  /** A cluster-network replica's addresses as plumbed in its network namespace (its sandbox's). */
  address?: ReplicaAddress;
  observedAt: string;
}
/** observed/<host>/<replica>: only the node-agent of <host> writes it. */
export type ReplicaObserved = StatusObject<'ReplicaObserved', ReplicaObservedStatus>;

export interface ReplicaCommandSpec {
  replica: string;
  op: 'restart';
  /** Monotonic per replica; the agent executes a command once, when seq > its ackedCommand. */
  seq: number;
  issuedAt: string;
  reason: string;
}
export interface ReplicaCommandStatus {
  /** Consecutive restarts without a running observation in between. */
  restarts: number;
  lastRestartAt?: string;
  /**
   * Why the last restart was ordered (src/api/reasons/scheduling.ts RESTART_CAUSES): one ordered
   * for an act outside jaco (a container removed or paused by hand) says nothing of the node's
   * health. Absent in records older than it: those count against the node.
   */
  lastRestartCause?: string;
  /** restart_exhausted: no more restarts until the deployment's next apply (generation). */
  exhausted?: boolean;
  generation: number;
}
/** commands/<host>/<replica>: written by the scheduler only. */
export type ReplicaCommand = JacoObject<'ReplicaCommand', ReplicaCommandSpec, ReplicaCommandStatus>;

// ---------------------------------------------------------------- Secrets and configs (docs/secrets.md)

/** A value sealed to one public key (src/secrets/seal.ts): X25519 + HKDF-SHA256 + AES-256-GCM, base64 fields. */
export interface SealedValue {
  alg: 'X25519-HKDF-SHA256-A256GCM';
  /** The id of the key it is sealed to. */
  key: string;
  epk: string;
  iv: string;
  data: string;
}

/** Which deployment's compose file made a secret or config (apply removes it once nothing refers to it). */
export interface FileOwner {
  deployment: string;
  /** Its name in the compose file. */
  name: string;
}

export interface SecretSpec {
  /** Bytes of the value. */
  size: number;
  /** The value, sealed to the cluster key (`secret/<name>/<uid>` its additional data). */
  sealed: SealedValue;
  owner?: FileOwner;
  /** The registry whose password this is (jaco registry login made it; logout or the next login removes it). */
  registry?: string;
}
/** secrets/<name>: immutable (a new value is a new name). The CLI creates and removes it; the secrets controller re-seals it to a new cluster key. */
export type Secret = JacoObject<'Secret', SecretSpec, never>;

export interface ConfigSpec {
  size: number;
  /** sha256:<hex> of the content. */
  digest: string;
  /** The content, base64: configs are not secret. */
  data: string;
  owner?: FileOwner;
}
/** configs/<name>: immutable, written by the CLI only. */
export type Config = JacoObject<'Config', ConfigSpec, never>;

export type FileKind = 'secret' | 'config';

export interface NodeCopySpec {
  node: string;
  kind: FileKind;
  name: string;
  /** The uid of the secret (config) it is a copy of. */
  uid: string;
  /** The id of the node key it is sealed to (Node.status.secretsKey.id). */
  nodeKey: string;
  size: number;
  /** Sealed to the node's key (`copy/<node>/<kind>/<name>/<uid>` its additional data). */
  sealed: SealedValue;
}
/** copies/<node>/<kind>/<name>: a node's copy of what its replicas use; only the secrets controller writes it, only that node's agent reads it. */
export type NodeCopy = JacoObject<'NodeCopy', NodeCopySpec, never>;

/** clusterkey: the public half of the cluster key that seals secrets now (published by the secrets controller). */
export type ClusterKey = JacoObject<'ClusterKey', { id: string; publicKey: string; publishedAt: string }, never>;

// ---------------------------------------------------------------- Audit

export interface AuditEventSpec {
  type: string;
  time: string;
  actor: string;
  deployment?: string;
  payload: Record<string, unknown>;
}
/** audit/<sortable id>: written in the same transaction as the act it records. */
export type AuditEvent = JacoObject<'AuditEvent', AuditEventSpec, never>;

export type AnyObject = JacoObject<string, unknown, unknown>;

/** A kind with only a status (what a component observes), no spec. */
export interface StatusObject<K extends string, St> {
  apiVersion: typeof API_VERSION;
  kind: K;
  metadata: ObjectMeta;
  status: St;
}

// ---------------------------------------------------------------- Scheduler bookkeeping

/** counters/<deployment>/<service>: the next replica index; indexes are never reused. */
export type ReplicaCounter = JacoObject<'ReplicaCounter', { next: number }, never>;

/** What a voluntary disruption is (the disruption budget's vocabulary). */
export type DisruptionKind = 'move' | 'rollout_step' | 'preempt';

/**
 * disruptions/<deployment>/<service>: the sequencer of the service's voluntary disruptions. Every
 * move start and rollout step writes it with compare-and-swap, so two controllers deciding from
 * one state cannot both spend the last unit of the service's disruption budget.
 */
export type DisruptionLedger = JacoObject<
  'DisruptionLedger',
  { deployment: string; service: string; sequence: number; last: { replica: string; by: string; kind: DisruptionKind; at: string } },
  never
>;

/** volumes/<deployment>/<volume>: the home node of a named volume, fixed on first placement. */
export type VolumeHome = JacoObject<'VolumeHome', { deployment: string; volume: string; node: string; since: string }, never>;

/** config/network (src/api/network.ts). */
export type NetworkConfig = JacoObject<'NetworkConfig', NetworkConfigSpec, never>;
/** subnets/<node>: a node's subnets, given by the scheduler. */
export type NodeSubnet = JacoObject<'NodeSubnet', { node: string; index: number; ipv4: string; ipv6: string; since: string }, never>;
/** subnetindex/<n>: who holds subnet index n. */
export type SubnetIndexClaim = JacoObject<'SubnetIndexClaim', { node: string }, never>;
/** serviceaddresses/<deployment>/<service>: the service's address (docs/networking.md), answered on every node. */
/** serviceaddresses/<deployment>/<service>: the service's address, and the other names it answers to (its spec's aliases). */
export type ServiceAddress = JacoObject<'ServiceAddress', { deployment: string; service: string; number: number; ipv4: string; ipv6: string; since: string; aliases?: string[] }, never>;
/** serviceaddressnumbers/<n>: who holds service address number n. */
export type ServiceAddressClaim = JacoObject<'ServiceAddressClaim', { deployment: string; service: string }, never>;
/** addresses/<node>/<n>: who holds host number n of the node's subnets. */
export type AddressClaim = JacoObject<'AddressClaim', { node: string; replica: string; deployment: string; service: string; ipv4: string; ipv6: string; since: string }, never>;

export interface EndpointAddress {
  replica: string;
  node: string;
  /** Every port it is reached at: a host-network copy's host ports (fixed, then assigned); a cluster-network copy's container ports. */
  ports: number[];
  /** Where it is reached: its node's address (host network), or its own IPv4 address (cluster network). */
  address?: string;
  /** Those ports by port name. */
  hostPorts?: Record<string, number>;
}
/** endpoints/<deployment>/<service>: the healthy replicas, for any load balancer to watch. */
export type Endpoints = JacoObject<'Endpoints', { deployment: string; service: string; addresses: EndpointAddress[] }, never>;

/** One server (a replica copy) of a route, as one node's ingress routes it. */
export interface IngressServer {
  replica: string;
  node: string;
  address: string;
  port: number;
  /** ready: takes new requests; drain: left endpoints, finishing the requests under way. */
  state: 'ready' | 'drain';
  /** HAProxy's own health check of it (UP, DOWN, …), when read. */
  check?: string;
}

export interface IngressRoute {
  published: number;
  deployment: string;
  service: string;
  servers: IngressServer[];
}

export interface IngressStatusSpec {
  node: string;
  /** Where it answers (the node's address). */
  address?: string;
  time: string;
  haproxy: 'running' | 'down';
  routes: IngressRoute[];
  /** Published ports claimed twice: routed to the first. */
  conflicts?: { published: number; routedTo: string; ignored: string[] }[];
  /** Routes HAProxy could not bind (address:port, the system's reason): left out, the others answer. */
  unbound?: { published: number; deployment: string; service: string; address: string; reason: string }[];
}
/** ingresses/<node>: what one node's ingress routes, bound to its lease (gone when it stops). */
export type IngressStatus = JacoObject<'IngressStatus', IngressStatusSpec, never>;

/** One node's verdict in a placement decision (what `jaco explain` prints). */
export interface NodeVerdict {
  node: string;
  /** The filter that rejected the node, or absent when it passed every filter. */
  rejected?: { filter: FilterName; reason: UnschedulableReason; detail: string };
  /** Score components of a node that passed, and their total. */
  score?: { total: number; parts: Record<string, number> };
}

export interface PlacementDecisionSpec {
  replica: string;
  deployment: string;
  service: string;
  at: string;
  actor: string;
  mode: PlacementMode;
  /** The chosen node, or absent when the replica is unschedulable. */
  chosen?: string;
  /** Why the chosen node won, or why none could be chosen. */
  why: string;
  reason?: UnschedulableReason;
  verdicts: NodeVerdict[];
  /** On large clusters: how many rejected or scored nodes are not listed in verdicts, by filter ("scored" for passing nodes). */
  omitted?: Record<string, number>;
  /** What put it there: scale_up, global_node or node_lost (the scheduler), drain or rebalance (a move) — src/api/reasons/scheduling.ts. */
  trigger?: DecisionTrigger;
}
/** decisions/<deployment>/<replica>: stored with the decision, not recomputed later. */
export type PlacementDecision = JacoObject<'PlacementDecision', PlacementDecisionSpec, never>;

export interface Unschedulable {
  reason: UnschedulableReason;
  count: number;
  message: string;
  /** Per node: why it was rejected. */
  nodes: Record<string, string>;
  missing?: string[];
}

export interface ServiceSchedulingStatus {
  desired: number;
  placed: number;
  unschedulable?: Unschedulable;
  restartExhausted?: string[];
  nodeLost?: string[];
  /** Desired keys of the service whose value cannot be read: its membership is held until they are fixed. */
  unreadable?: string[];
  /** Dependencies (dependsOn) not yet meeting their condition: nothing new is placed until they do. */
  waitingForDependency?: string[];
  /** Canary replicas placed beside `placed` for the service's rollout (update.canary). */
  canaries?: number;
  /** A job's (mode: job) result at its current spec: kept until the spec changes, so nothing runs it twice. */
  job?: JobResult;
}

export type JobState = 'running' | 'succeeded' | 'failed';

/** The result of one run of a job service, per spec hash (controllers/scheduler/job.ts). */
export interface JobResult {
  specHash: string;
  revision: number;
  /**
   * The create revision of the deployment key it ran for: a deployment deleted and re-created
   * with the same spec is another incarnation, whose job has not run (RolloutPlanSpec.incarnation).
   */
  incarnation: number;
  state: JobState;
  /** Runs so far of the replica that decided the result (the most of any replica while running). */
  attempts: number;
  /** The deciding exit code: 0 when succeeded, the failing run's when failed. */
  exitCode?: number;
  startedAt?: string;
  finishedAt?: string;
  durationMs?: number;
  /** One line: "exit 3 after 3 attempts", "succeeded after 1 attempt". */
  reason?: string;
}

/** A write a controller keeps failing to make (src/runtime/acts.ts), as status reports it. */
export interface FailingAct {
  act: string;
  reason: ActFailureReason;
  detail: string;
  since: string;
  attempts: number;
}

export interface ServiceRolloutStatus {
  state: RolloutState;
  fromRevision: number;
  toRevision: number;
  currentStep: number;
  totalSteps: number;
  failureReason?: string;
  /** While a rollout has canaries (update.canary): how many, how many are ready, whether promoted. */
  canary?: { replicas: number; ready: number; promoted: boolean };
}

export interface DeploymentStatusStatus {
  /** Owned by the scheduler. */
  scheduling?: { observedGeneration: number; updatedAt: string; services: Record<string, ServiceSchedulingStatus>; failingActs?: FailingAct[] };
  /** Owned by the rollout controller. */
  rollout?: { appliedRevision: number; updatedAt: string; services: Record<string, ServiceRolloutStatus> };
}
/** deploymentstatus/<name>: scheduler and rollout each write their own field. */
export type DeploymentStatus = StatusObject<'DeploymentStatus', DeploymentStatusStatus>;

// ---------------------------------------------------------------- Rollouts

export interface RolloutStep {
  replica: string;
  node: string;
  startedAt: string;
  /** With update.monitor: when the replica was first seen ready (the step counts monitor later). */
  readyAt?: string;
  finishedAt?: string;
  /** done: ready at the new revision; failed: the step that aborted the rollout; reverted: a
   *  step back to fromRevision after an abort; superseded: a newer apply replaced the plan. */
  result?: 'done' | 'failed' | 'reverted' | 'superseded';
  /** A canary's step: watched like any step, but not one of currentStep/totalSteps. */
  canary?: boolean;
  /**
   * A stop-first step: how long the old container may take to leave before the new one can start
   * (its deregistration delay and stop grace, src/api/spec.ts leavingMs). The step timeout counts
   * after it: a database with a 60 s grace can finish a step under a 60 s step timeout.
   */
  leavingMs?: number;
}

/** A rollout's canary phase (update.canary). */
export interface RolloutCanary {
  /** Canary replicas wanted beside the service's replicas. */
  replicas: number;
  /** Since when every canary has been ready (autoPromote counts from here). */
  readySince?: string;
  promotedAt?: string;
  promotedBy?: 'operator' | 'auto';
}

export interface RolloutPlanSpec {
  deployment: string;
  service: string;
  fromRevision: number;
  toRevision: number;
  fromHash: string;
  toHash: string;
  totalSteps: number;
  currentStep: number;
  state: RolloutState;
  failureReason?: string;
  startedAt: string;
  finishedAt?: string;
  /** Set while paused: by the operator, or by failureAction pause (then failureReason says why). */
  pausedAt?: string;
  /** The last resume: the progress deadline counts from here (or a later step) rather than from the start. */
  resumedAt?: string;
  /** Written by the CLI only (compare-and-swap); the controller carries it out and clears it in one write. */
  request?: { action: RolloutAction; requestedAt: string };
  steps: RolloutStep[];
  /** With update.canary: no replica is stepped until the canaries are promoted. */
  canary?: RolloutCanary;
  /**
   * The create revision of the deployment key the plan was made for. A deployment deleted and
   * re-created is another incarnation, which numbers its revisions afresh: a plan of the previous
   * one never governs it (absent in plans written before this field: taken as the current one).
   */
  incarnation?: number;
}
/** rollouts/<deployment>/<service>: written by the rollout controller only. */
export type RolloutPlan = JacoObject<'RolloutPlan', RolloutPlanSpec, never>;

// ---------------------------------------------------------------- Drains

export type DrainReplicaState = 'pending' | 'moving' | 'done' | 'blocked' | 'dropped' | 'stopped';

export interface NodeDrainSpec {
  node: string;
  timeout: string;
  force: boolean;
  /** Delete the node object and heartbeat once drained (jaco node remove). */
  remove: boolean;
  requestedAt: string;
}

export interface NodeDrainStatus {
  state: 'pending' | 'draining' | 'completed' | 'aborted' | 'removed';
  reason?: DrainAbortReason;
  startedAt?: string;
  finishedAt?: string;
  /** Replicas that left the node whose containers its agent still reports (the drain completes once they are gone). */
  stopping?: string[];
  /** The node was NotReady when the drain finished: these containers could not be confirmed stopped. */
  unconfirmed?: string[];
  replicas: Record<string, DrainReplicaStatus>;
}

export interface DrainReplicaStatus {
  state: DrainReplicaState;
  reason?: DrainReplicaReason;
  dst?: string;
  /** When the state, reason or dst last changed. */
  at?: string;
  /** Set at the replica's first move attempt: it must be moved by then or the drain aborts (drain_timeout). */
  deadline?: string;
  /** Nodes where a move of this replica failed in this drain (dst_failed): not tried again. */
  failedOn?: string[];
}
/** drains/<host>: the CLI creates it, the drain controller advances it. */
export type NodeDrain = JacoObject<'NodeDrain', NodeDrainSpec, NodeDrainStatus>;

// ---------------------------------------------------------------- Images (docs/images.md)

/**
 * registries/<host>: how nodes (and apply) reach one registry. Written by the CLI only (jaco
 * registry login). The password is not here: it is a Secret (passwordSecret), sealed to the
 * cluster key at rest and copied, sealed to its own key, to each node whose replicas pull from
 * the registry — like any secret a replica uses (docs/images.md, docs/secrets.md).
 */
export interface RegistrySpec {
  /** host[:port] as image references name it (docker.io for Docker Hub), lower case. */
  host: string;
  username?: string;
  /** The Secret (secrets/<name>) holding the user's password; set with username. */
  passwordSecret?: string;
  /** PEM of the CA that signs the registry's certificate (public). */
  caPem?: string;
  /** Plain HTTP: only for a registry that serves no TLS. */
  insecure?: boolean;
}
export type Registry = JacoObject<'Registry', RegistrySpec, never>;

/** config/images: the cluster-wide image setting (jaco registry default). */
export interface ImageSettingsSpec {
  /** Where builds are pushed, and where short names (busybox, team/app) are resolved. */
  defaultRegistry?: string;
  /** Whether a short name may be resolved at Docker Hub when no default registry is set (default no). */
  hub: boolean;
}
export type ImageSettings = JacoObject<'ImageSettings', ImageSettingsSpec, never>;

export interface ClockBeaconSpec {
  /** The writing controller's wall clock when it wrote the beacon. */
  time: string;
  /** How often it is written. */
  intervalMs: number;
  /** The controller process that wrote it. */
  by: string;
}
/** clock: the controllers' time, written every interval; each agent measures its skew against it (clock-skew.ts). */
export type ClockBeacon = JacoObject<'ClockBeacon', ClockBeaconSpec, never>;
/**
 * config/nodes: the cluster's node-eligibility settings (seed 004; `jaco node settings`). Every
 * field is optional: an absent one is its default (src/api/eligibility.ts DEFAULT_NODE_SETTINGS).
 */
export interface NodeSettingsSpec {
  /** Scratch disk booked for a replica whose service sets no resources.disk (seed 004: default_instance_ephemeral_disk_bytes, 4Gi). */
  defaultInstanceEphemeralDisk?: string;
  /** A node whose data root's filesystem is fuller than this (percent used) is degraded: disk pressure. */
  diskPressurePercent?: number;
  /** Replicas of at least failureServices services restarted on one node within failureWindow: degraded. */
  failureWindow?: string;
  failureServices?: number;
  /** A peer whose latest WireGuard handshake is older than this (or that has none) is unreachable. */
  overlayHandshakeMaxAge?: string;
  /** More than this percent of a node's peers unreachable: degraded (overlay). */
  overlayUnreachablePercent?: number;
}
export type NodeSettings = JacoObject<'NodeSettings', NodeSettingsSpec, never>;
