// The CustomResourceDefinitions of every jaco kind, written once here and emitted to crds/*.yaml
// by `npm run gen:crds` (a unit test fails when crds/ is stale). At run time the CLI and the
// controllers validate with the YAML files in crds/, compiled by ajv (src/api/schema.ts).
import type { V1CustomResourceDefinition, V1JSONSchemaProps } from '@kubernetes/client-node';
import { DURATION_PATTERN } from './units.js';
import { PERCENT_PATTERN } from './update.js';
import { GROUP } from './types.js';

type Schema = V1JSONSchemaProps & Record<string, unknown>;

const str = (extra: Schema = {}): Schema => ({ type: 'string', ...extra });
const int = (extra: Schema = {}): Schema => ({ type: 'integer', ...extra });
const num = (extra: Schema = {}): Schema => ({ type: 'number', ...extra });
const bool = (): Schema => ({ type: 'boolean' });
const arr = (items: Schema, extra: Schema = {}): Schema => ({ type: 'array', items, ...extra });
const obj = (properties: Record<string, Schema>, required: string[] = [], extra: Schema = {}): Schema => ({
  type: 'object',
  properties,
  ...(required.length ? { required } : {}),
  ...extra,
});
const map = (values: Schema, extra: Schema = {}): Schema => ({ type: 'object', additionalProperties: values, ...extra });
/** A free-form object: the one place unknown fields are allowed (audit payloads). */
const freeForm = (description: string): Schema => ({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true, description });
const time = (description: string): Schema => str({ format: 'date-time', description });
const duration = (description: string): Schema => str({ pattern: DURATION_PATTERN, description: `${description} Go-style duration, e.g. 30s, 1m30s, 500ms.` });
/** A replica count or a percentage of the service's replicas ("25%"). */
const replicaCount = (minimum: number, description: string): Schema => ({
  'x-kubernetes-int-or-string': true,
  anyOf: [{ type: 'integer', minimum }, { type: 'string', pattern: PERCENT_PATTERN }],
  description,
});
const intOrString = (pattern: string, description: string): Schema => ({
  'x-kubernetes-int-or-string': true,
  anyOf: [{ type: 'integer', minimum: 0 }, { type: 'string', pattern }],
  description,
});

/** A coalescing move's pending service and hole (MoveMarker.forPending, movedFrom.forPending). */
const HOLE_FOR: Schema = obj({ deployment: str(), service: str(), node: str() }, ['deployment', 'service', 'node'], { description: 'A coalescing move: the pending service it makes room for, and the node of the hole (held for it).' });

export const NAME_PATTERN = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
/** A container's host name: one RFC 1123 label (letters, digits and -, at most 63). */
/** A name the node's resolver can answer (dns-table.ts): labels of letters, digits, '-' and '_', any case, dotted. */
export const ALIAS_PATTERN = '^[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?(\\.[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?)*$';
export const HOSTNAME_PATTERN = '^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$';
/** A Docker runtime's name (runc, runsc, nvidia, io.containerd.kata.v2). */
export const RUNTIME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9_.-]*$';
/** A device as docker run --device writes it: /dev/host, then optionally :/dev/container and :permissions (r, w, m). */
export const DEVICE_PATTERN = '^/[^:]+(:/[^:]+)?(:[rwm]{1,3})?$';
/** A registry host[:port] as stored (lower case): a DNS name or IPv4 address, or an IPv6 address in brackets. */
export const REGISTRY_HOST_PATTERN = '^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*|\\[[0-9a-f:]+\\])(:[0-9]+)?$';
/** Secret and config names, as Docker's: letters, digits, `_`, `.` and `-`, starting with a letter or digit. */
export const FILE_OBJECT_NAME_PATTERN = '^[a-zA-Z0-9][a-zA-Z0-9_.-]*$';
export const FILE_OBJECT_NAME_MAX = 128;

/** A service's use of a secret or config (FileRef). */
function fileRef(kind: 'secret' | 'config'): Schema {
  return obj(
    {
      source: str({ minLength: 1, maxLength: FILE_OBJECT_NAME_MAX, pattern: FILE_OBJECT_NAME_PATTERN, description: `The ${kind}'s name (jaco ${kind} ls).` }),
      target: str({
        minLength: 1,
        description: kind === 'secret' ? 'A file name under /run/secrets, or an absolute path (default: the source).' : 'An absolute path (default /<source>).',
      }),
      uid: int({ minimum: 0, description: 'Owner of the file (default 0).' }),
      gid: int({ minimum: 0, description: 'Group of the file (default 0).' }),
      mode: int({ minimum: 0, maximum: 0o777, description: 'Permission bits (default 0o444; YAML: 0o440, or 288).' }),
      version: str({ description: `The ${kind}'s uid, pinned by jaco apply: in the spec hash, so a ${kind} made again under the same name rolls the service.` }),
    },
    ['source'],
  );
}

const sealedValue = (description: string): Schema =>
  obj(
    {
      alg: str({ enum: ['X25519-HKDF-SHA256-A256GCM'] }),
      key: str({ minLength: 1, description: 'The id of the key it is sealed to.' }),
      epk: str({ description: 'The ephemeral X25519 public key, base64.' }),
      iv: str({ description: 'The AES-GCM nonce, base64.' }),
      data: str({ description: 'The ciphertext and its tag, base64.' }),
    },
    ['alg', 'key', 'epk', 'iv', 'data'],
    { description },
  );
const fileOwner = obj({ deployment: str(), name: str() }, ['deployment', 'name'], { description: "The deployment whose compose file made it (jaco apply removes it once neither that deployment nor its kept revisions refer to it)." });
/** Secrets and configs: Swarm's limit (an etcd request carries a deployment and its objects together). */
export const MAX_FILE_OBJECT_BYTES = 500 * 1024;
export const CPU_PATTERN = '^([0-9]+(\\.[0-9]+)?|[0-9]+m)$';
export const MEMORY_PATTERN = '^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$';

/** A replica's own addresses (ReplicaAddress): one IPv4 and one IPv6, each in CIDR form. */
const replicaAddress = (description: string): Schema =>
  obj(
    {
      ipv4: str({ pattern: '^[0-9]{1,3}(\\.[0-9]{1,3}){3}/[0-9]{1,2}$' }),
      ipv6: str({ pattern: '^[0-9a-f:]+/[0-9]{1,3}$' }),
    },
    ['ipv4', 'ipv6'],
    { description },
  );

/** A health check's port: a container port, or the name of one of the service's ports. */
const checkPort: Schema = {
  'x-kubernetes-int-or-string': true,
  anyOf: [int({ minimum: 1, maximum: 65535 }), str({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63 })],
  description: 'A container port, or the name of one of the service\'s ports; under host networking the check goes to its host port (fixed or assigned).',
};

const serviceSchema: Schema = obj(
  {
    image: str({ minLength: 1, description: 'Image reference as written, e.g. jaco-demo/busybox:1.' }),
    mode: str({ enum: ['service', 'job'], description: 'service (default): its replicas keep running; job: each replica runs to completion once per applied change of the spec, retried on failure (job.attempts, job.backoff).' }),
    job: obj(
      {
        attempts: int({ minimum: 1, description: 'Runs in all, the first included, before the job has failed (default 3).' }),
        backoff: duration('Wait before the second run; doubles for each further one (default 5s).'),
      },
      [],
      { description: 'With mode job: how a replica that exits non-zero is run again.' },
    ),
    network: str({ enum: ['host', 'cluster'], description: "host (default): the node's network namespace, ports a per-node resource; cluster: each replica its own network namespace and addresses on the cluster network (docs/networking.md)." }),
    pinnedImage: str({
      pattern: '@sha256:[0-9a-f]{64}$',
      description: 'What every node runs: the image resolved to its registry digest at apply ("REGISTRY/REPO:TAG@sha256:…"). Written by jaco apply (docs/images.md); absent when the image was not resolved (pullPolicy never, or no registry known for it).',
    }),
    imagePorts: arr(int({ minimum: 1, maximum: 65535 }), {
      maxItems: 1024,
      description: 'The TCP ports the pinned image declares (EXPOSE), read by jaco apply for a cluster-network service: its name answers on them beside the ports it lists (docs/networking.md).',
    }),
    pullPolicy: str({
      enum: ['missing', 'always', 'never', 'build'],
      description: 'missing (default): the tag is resolved at every apply; always: at every apply and at rollout restart; never: not resolved, and nodes never pull (the image must be on each node); build: built and pushed at every apply.',
    }),
    build: obj(
      {
        context: str({ minLength: 1, description: "A directory on the operator's machine (relative: to the manifest's directory)." }),
        dockerfile: str({ minLength: 1, description: 'Relative to the context (default Dockerfile).' }),
        args: map(str()),
        target: str({ minLength: 1, description: 'The stage of a multi-stage Dockerfile.' }),
        labels: map(str()),
        noCache: bool(),
        pull: bool(),
        registry: str({ minLength: 1, description: 'Where it is pushed when image names no registry (default: --registry, else the cluster default).' }),
      },
      ['context'],
      { description: "Built by jaco apply with the operator's Docker engine and pushed to the cluster's registry; `image` names it there (docs/images.md). Does not change the spec hash: the pushed digest does." },
    ),
    command: arr(str(), { description: "Overrides the image's entrypoint." }),
    args: arr(str(), { description: "Overrides the image's command." }),
    env: map(str(), { description: 'Environment variables.' }),
    replicas: int({ minimum: 0, maximum: 10000, description: 'Number of replicas (default 1). Not allowed with placement.mode global.' }),
    placement: obj({
      mode: str({ enum: ['spread', 'pack', 'hosts', 'global'], description: 'spread (default), pack, hosts or global.' }),
      hosts: arr(str({ minLength: 1 }), { description: 'The nodes a hosts-mode service may run on.' }),
      nodeSelector: map(str(), { description: 'Node labels a node must carry.' }),
      maxPerNode: int({ minimum: 1, description: 'At most this many replicas of the service on one node (a hard limit, unlike spread).' }),
    }),
    resources: obj({
      // A quantity as Kubernetes and compose write it: a string, or a plain number — 0.5 too
      // (Kubernetes' int-or-string admits integers only; jaco's validator admits any number).
      cpu: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'number', minimum: 0 }, { type: 'string', pattern: CPU_PATTERN }], description: 'CPU request and limit: "500m", "0.5", 0.5, 2. Soft: scored, may be overcommitted.' },
      memory: intOrString(MEMORY_PATTERN, 'Memory limit: "128Mi", "1Gi". Hard: placement never overcommits it.'),
      gpus: { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer', minimum: 0 }, str({ enum: ['all'] })], description: 'GPUs, passed to Docker as device requests: a count, or "all" (every GPU of the node, at least one).' },
      gpuIds: arr(str({ minLength: 1 }), { minItems: 1, description: 'These GPUs by id (an index or a UUID, as nvidia-smi -L lists them), passed to Docker as a device request: placed only on nodes that have each (device_missing), and counted as that many GPUs. Not with gpus.' }),
      disk: intOrString(MEMORY_PATTERN, "Scratch disk (the container's writable layer): \"10Gi\". Booked like memory against the node's data-root filesystem; absent: the cluster's defaultInstanceEphemeralDisk (4Gi)."),
    }),
    ports: arr(
      {
        description: 'A number: a fixed host port the service binds (host networking), a per-node resource. The long form may leave the host port to the scheduler (a dynamic port from the node\'s range, passed as PORT and JACO_PORT_<NAME>) and publish it on every node\'s ingress.',
        'x-kubernetes-int-or-string': true,
        anyOf: [
          { type: 'integer', minimum: 1, maximum: 65535 },
          obj(
            {
              name: str({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 63, description: 'Names JACO_PORT_<NAME> (default p<containerPort>).' }),
              containerPort: int({ minimum: 1, maximum: 65535 }),
              hostPort: int({ minimum: 1, maximum: 65535, description: 'Fixed host port; absent: assigned from the node\'s port range.' }),
              published: int({ minimum: 1, maximum: 65535, description: 'Answered on every node\'s ingress at <node address>:published.' }),
              protocol: str({ enum: ['tcp', 'udp'] }),
              appProtocol: str({ minLength: 1, description: 'What the port speaks (compose app_protocol): http makes the ingress proxy HTTP requests; otherwise it passes TCP connections.' }),
            },
            ['containerPort'],
          ),
        ],
      } as Schema,
    ),
    deregistrationDelay: duration('How long a replica is out of routing before its container is stopped (default 5s for a service with a TCP port — an ingress routes to it, published or on its service address — else 0s).'),
    healthcheck: obj(
      {
        test: arr(str(), { minItems: 2, description: '["CMD", arg, …] or ["CMD-SHELL", command]: run by Docker inside the container. One of test, http, tcp.' }),
        http: obj(
          {
            path: str({ pattern: '^/', description: 'The path requested (default /).' }),
            port: checkPort,
            expect: int({ minimum: 100, maximum: 599, description: 'The status code that counts as healthy (default: any of 200–399).' }),
          },
          ['port'],
          { description: 'An HTTP GET run by the node-agent against the replica (its own address on the cluster network, its node\'s under host networking): no shell needed in the image. One of test, http, tcp.' },
        ),
        tcp: obj({ port: checkPort }, ['port'], { description: 'A TCP connection opened by the node-agent to the replica: healthy when accepted. One of test, http, tcp.' }),
        interval: duration('Time between checks (default 30s).'),
        timeout: duration('Time a check may take (default 30s).'),
        retries: int({ minimum: 1, description: 'Consecutive failures before unhealthy (default 3).' }),
        startPeriod: duration('Grace period after start (default 0s).'),
      },
    ),
    stopSignal: str({ pattern: '^(SIG)?[A-Z0-9+]+$', description: 'Signal that asks the container to stop (default SIGTERM).' }),
    stopGracePeriod: duration('Time between the stop signal and SIGKILL (default 10s).'),
    volumes: arr(
      obj(
        {
          type: str({ enum: ['volume', 'bind', 'anonymous'], description: "anonymous: a volume of the container's own, made and removed with it (no source)." }),
          source: str({ minLength: 1, description: 'Volume name (volume) or absolute host path (bind); none for anonymous.' }),
          target: str({ pattern: '^/', description: 'Absolute path in the container.' }),
          readOnly: bool(),
        },
        ['type', 'target'],
      ),
      { description: 'A service with a named volume or a writable bind runs at most one replica; anonymous volumes are per container.' },
    ),
    priority: int({ description: 'Higher places first (default 0).' }),
    rebalance: str({ enum: ['enabled', 'disabled'], description: 'disabled opts the service out of pressure-based moves.' }),
    update: obj({
      order: str({ enum: ['start-first', 'stop-first'], description: 'start-first (default): the old container serves until the new one is ready; stop-first: stop it first.' }),
      stepTimeout: duration('Rolling-update step timeout (default 60s).'),
      maxUnavailable: replicaCount(1, 'The disruption budget: replicas that may be disrupted at once by moves and rollout steps (default: update.parallelism when above 1, else 1). A count, or a percentage of the replicas rounded down (at least 1).'),
      minReadyTime: duration('With no health check: how long a replica must run to count as ready (default 5s).'),
      parallelism: int({ minimum: 0, description: 'Replicas stepped at once (default 1; 0: as many as maxUnavailable allows).' }),
      maxSurge: replicaCount(0, 'Start-first steps in flight, i.e. extra containers (default: parallelism); further steps go stop-first. A count, or a percentage of the replicas rounded up.'),
      delay: duration('Wait between one step finishing and the next starting (default 0s).'),
      monitor: duration('How long a new replica must stay ready before its step counts (default 0s).'),
      progressDeadline: duration('The rollout fails when no step completes for this long (default: no deadline).'),
      failureAction: str({ enum: ['rollback', 'pause', 'continue'], description: 'When a rollout fails: rollback (default) reverts to the previous revision, pause waits for the operator, continue goes on with the next replica.' }),
      maxFailureRatio: num({ minimum: 0, maximum: 1, description: 'Fraction of steps that may fail before failureAction applies (default 0).' }),
      rollback: obj(
        {
          parallelism: int({ minimum: 0, description: 'Replicas reverted at once (default: update.parallelism).' }),
          delay: duration('Wait between revert steps (default 0s).'),
          order: str({ enum: ['start-first', 'stop-first'], description: 'Order of revert steps (default: update.order).' }),
        },
        [],
        { description: 'How a revert after a failed rollout goes (compose: deploy.rollback_config). Reverts pass the same disruption budget.' },
      ),
      canary: int({ minimum: 0, description: 'Canary: a rollout first starts this many extra replicas at the new spec beside the old ones and waits for jaco rollout promote (or autoPromote) before stepping the old ones (default 0: none).' }),
      autoPromote: duration('With canary: promote once every canary has stayed ready this long (default: wait for jaco rollout promote).'),
    }),
    aliases: arr(str({ pattern: ALIAS_PATTERN, maxLength: 200 }), {
      description: "Other names the service answers to: ALIAS inside its deployment, ALIAS.DEPLOYMENT anywhere (a compose service's own name when jaco's differs, its network aliases). Changing them restarts nothing.",
    }),
    dependsOn: map(
      obj(
        {
          condition: str({ enum: ['service_started', 'service_healthy', 'service_completed_successfully'] }),
          restart: { ...bool(), description: 'Roll this service whenever the dependency is recreated (a change of its spec): compose depends_on restart: true.' },
          specHash: str({ pattern: '^[0-9a-f]{64}$', description: "With restart: the dependency's spec hash, written by apply (never by hand): part of this service's spec hash, so a recreated dependency rolls it." }),
        },
        ['condition'],
      ),
      {
        description: 'Services of this deployment to wait for: no replica is placed until each has all its replicas started (service_started) or ready (service_healthy), or a job succeeded at its current spec (service_completed_successfully).',
      },
    ),
    secrets: arr(fileRef('secret'), { description: 'Secrets (jaco secret create) as files on a tmpfs in each container, at /run/secrets/<target> (docs/secrets.md).' }),
    configs: arr(fileRef('config'), { description: 'Configs (jaco config create) as files on a tmpfs in each container, at <target> (default /<source>).' }),
    container: obj(
      {
        workingDir: str(),
        user: str(),
        labels: map(str(), { description: "Container labels (jaco's own labels win)." }),
        init: bool(),
        readOnly: bool(),
        capAdd: arr(str()),
        capDrop: arr(str()),
        extraHosts: arr(str({ pattern: '^[^:]+:.+$' }), { description: '"host:ip" entries for /etc/hosts.' }),
        hostname: str({ pattern: HOSTNAME_PATTERN, description: "The container's host name (cluster network: its namespace's; default the replica's id). Host network: the node's." }),
        shmSize: int({ minimum: 0, description: 'Bytes of /dev/shm.' }),
        tmpfs: arr(str({ pattern: '^/' }), { description: '"path[:options]" tmpfs mounts.' }),
        ulimits: map(obj({ soft: int(), hard: int() }, ['soft', 'hard'])),
        privileged: bool(),
        sysctls: map(str(), { description: 'Namespaced kernel parameters: net.* (on the replica\'s sandbox, cluster network), kernel.shm*, kernel.msg*, kernel.sem, fs.mqueue.*.' }),
        securityOpt: arr(str(), { description: 'Docker security options (seccomp=…, apparmor=…, label=…, no-new-privileges).' }),
        ipc: str({ enum: ['private', 'shareable', 'host'] }),
        pid: str({ enum: ['host'] }),
        runtime: str({ pattern: RUNTIME_PATTERN, description: "The Docker runtime (runc, runsc, nvidia, kata…): placed only on nodes whose engine has it (runtime_missing)." }),
        devices: arr(str({ pattern: DEVICE_PATTERN }), { description: '"/dev/host[:/dev/container][:rwm]" devices of the node given to the container: placed only on nodes that declare the host device (jaco agent --device; device_missing).' }),
      },
      [],
      { description: 'Docker create options (compose: working_dir, user, labels, init, read_only, cap_add, cap_drop, extra_hosts, shm_size, tmpfs, ulimits, privileged, sysctls, security_opt, ipc, pid, runtime, devices).' },
    ),
  },
  ['image'],
);

const deploymentSpec: Schema = obj(
  {
    services: map(serviceSchema, { minProperties: 1, description: 'Services by name.' }),
    update: obj({
      atomic: bool(),
    }, [], { description: "atomic: roll every service as one unit — a failed (or aborted) rollout of any service reverts every service of the deployment to the previous revision." }),
  },
  ['services'],
);

const capacity = obj(
  {
    cpuMillis: int({ minimum: 0 }),
    memoryBytes: int({ minimum: 0 }),
    gpus: int({ minimum: 0 }),
    gpuIds: arr(str(), { description: "Its GPUs' ids: each index and UUID nvidia-smi -L lists (declared gpus=N: 0…N-1)." }),
    runtimes: arr(str(), { description: "The runtimes of its Docker engine (docker info's Runtimes); absent: not known (an agent before them, or its engine was away at registration)." }),
    devices: arr(str(), { description: 'The host devices it offers containers (jaco agent --device).' }),
    diskBytes: int({ minimum: 0, description: "Scratch disk: the size of the filesystem of Docker's data root (or --capacity disk=…)." }),
  },
  ['cpuMillis', 'memoryBytes', 'gpus'],
);
const footprint = obj({ cpuMillis: num({ minimum: 0 }), memoryBytes: num({ minimum: 0 }) }, ['cpuMillis', 'memoryBytes']);
const observedStates = ['pulling', 'pending', 'starting', 'running', 'degraded', 'exited', 'failed', 'stopped'];

interface KindDef {
  kind: string;
  plural: string;
  description: string;
  spec?: Schema;
  status?: Schema;
  columns?: { name: string; jsonPath: string; type?: string }[];
}

// What operators decide about a node (nodespecs/<host>; before issue 29, Node.spec).
const nodeSpec = obj({
  unschedulable: bool(),
  labels: map(str(), { description: 'Labels set by the operator at runtime (jaco node label): beside the agent\'s own (metadata.labels), winning over one of the same key; placement.nodeSelector matches both.' }),
  trusted: { ...bool(), description: 'The operator overrides degraded (jaco node trust): the node takes placements although its agent reports disk pressure, failures or overlay loss.' },
});

const KINDS: KindDef[] = [
  {
    kind: 'Deployment',
    plural: 'deployments',
    description: 'A named set of services. metadata.generation is the revision.',
    spec: deploymentSpec,
  },
  {
    kind: 'DeploymentRevision',
    plural: 'deploymentrevisions',
    description: 'The spec of a deployment as applied at one revision (rollback, history).',
    spec: obj(
      {
        deployment: str(),
        revision: int({ minimum: 1 }),
        appliedAt: time('When this revision was applied.'),
        cause: str(),
        summary: str(),
        template: deploymentSpec,
        restarted: arr(str(), { description: 'Services whose every replica this revision replaces at the same spec (jaco rollout restart).' }),
      },
      ['deployment', 'revision', 'appliedAt', 'cause', 'summary', 'template'],
    ),
  },
  {
    kind: 'Node',
    plural: 'nodes',
    description: 'A host running a node-agent, as its agent reports it (status, its own labels). What operators decide is in NodeSpec.',
    spec: { ...nodeSpec, description: 'Before issue 29 the CLI wrote what operators decide here; now it writes nodespecs/<host> (NodeSpec), and this is honoured only while that key is absent.' },
    status: obj(
      {
        capacity,
        agentVersion: str(),
        hostname: str(),
        registeredAt: time('First registration.'),
        address: str({ description: 'The address replicas of this node are reached at (jaco agent --address).' }),
        portRange: obj({ min: int({ minimum: 1, maximum: 65535 }), max: int({ minimum: 1, maximum: 65535 }) }, ['min', 'max'], { description: 'Where dynamic host ports are assigned from.' }),
        secretsKey: obj({ id: str(), publicKey: str() }, ['id', 'publicKey'], { description: "The public half of the node's own X25519 key: its copies of secrets are sealed to it." }),
        overlay: obj(
          {
            publicKey: str({ description: "The public half of the node's WireGuard key (base64); the private half never leaves the node." }),
            endpoint: str({ description: 'Where its WireGuard listens: <node address>:<port>.' }),
          },
          ['publicKey', 'endpoint'],
          { description: 'Its end of the WireGuard mesh between nodes (jaco agent --overlay): every other node configures it as a peer.' },
        ),
        api: obj({ endpoint: str({ description: '<address>:<port>, HTTPS with mutual TLS (certificates from the cluster CA).' }) }, ['endpoint'], {
          description: "Its agent's logs and exec endpoint: jaco logs and jaco exec dial it directly, never through etcd.",
        }),
      },
      ['capacity', 'agentVersion', 'registeredAt'],
    ),
  },
  {
    kind: 'NodeSpec',
    plural: 'nodespecs',
    description: "What operators decided about a node (cordon, runtime labels, trust) at nodespecs/<host>: written only by the CLI, never by the node's agent, whose etcd user may only read it.",
    spec: nodeSpec,
  },
  {
    kind: 'Heartbeat',
    plural: 'heartbeats',
    description: "A node's liveness and latest pressure sample, bound to the agent's lease.",
    spec: obj(
      {
        node: str(),
        time: time('When the agent wrote it.'),
        intervalMs: int({ minimum: 1 }),
        agentVersion: str(),
        dockerUp: bool(),
        clockSkewMs: { ...num(), description: "How far the agent's clock is ahead of the controllers' (negative: behind), in ms, as last measured against the clock beacon." },
        pressure: obj(
          {
            time: time('Sample time.'),
            cpuUtil: num({ minimum: 0 }),
            memoryUtil: num({ minimum: 0 }),
            replicas: map(footprint),
            mode: str({ enum: ['node', 'containers'], description: 'What cpuUtil and memoryUtil measure: node = the whole host (root cgroup CPU, /proc/meminfo), containers = the sum of the agent’s own containers over its capacity (simulated and hollow nodes).' }),
          },
          ['time', 'cpuUtil', 'memoryUtil', 'replicas'],
        ),
        disk: obj(
          {
            path: str({ description: "Docker's data root (docker info DockerRootDir)." }),
            totalBytes: int({ minimum: 0 }),
            availableBytes: int({ minimum: 0 }),
            usedBytes: int({ minimum: 0 }),
            capped: { ...bool(), description: "Whether the storage driver caps a container's writable layer (StorageOpt size)." },
            driver: str(),
            backingFs: str(),
          },
          ['path', 'totalBytes', 'availableBytes', 'usedBytes', 'capped', 'driver'],
          { description: "The filesystem of Docker's data root as the agent last sampled it: disk pressure is judged from it." },
        ),
        overlay: obj(
          { peers: arr(obj({ node: str({ minLength: 1 }), handshakeAt: time('Its latest WireGuard handshake; absent: none.'), heardAt: time('When its received bytes last grew, as the agent saw it.'), since: time('When the agent first saw the peer configured: a new peer has the overlay max age to handshake.') }, ['node'])) },
          ['peers'],
          { description: 'Its WireGuard peers as the agent last saw them: overlay health is judged from them.' },
        ),
      },
      ['node', 'time', 'intervalMs', 'agentVersion', 'dockerUp'],
    ),
  },
  {
    kind: 'ReplicaDesired',
    plural: 'replicadesireds',
    description: 'What one node should run for one replica.',
    spec: obj(
      {
        replica: str(),
        deployment: str(),
        service: str(),
        node: str(),
        index: int({ minimum: 0 }),
        revision: int({ minimum: 1 }),
        specHash: str({ pattern: '^[0-9a-f]{64}$' }),
        template: serviceSchema,
        placedAt: time('When the replica was placed on or moved to this node.'),
        address: replicaAddress("A cluster-network replica's own addresses on this node (CIDR form: the node subnet's prefix length; its gateway is the subnet's first host)."),
        move: obj(
          {
            id: str(),
            from: str(),
            by: str({ enum: ['drain', 'rebalancer'] }),
            startedAt: time('Move start.'),
            deadline: time('Abandoned after this.'),
            cutoverAt: time("The destination was ready and the source's desired key deleted; complete once the source's container is gone."),
            forPending: HOLE_FOR,
            epoch: str({ description: 'A rebalancer move: the balancing epoch it started in (the ping-pong exclusion).' }),
          },
          ['id', 'from', 'by', 'startedAt', 'deadline'],
        ),
        movingTo: obj({ id: str(), node: str(), by: str({ enum: ['drain', 'rebalancer'] }) }, ['id', 'node', 'by'], { description: 'On the source copy while a move of it is in flight.' }),
        movedFrom: obj(
          {
            node: str(),
            by: str({ enum: ['drain', 'rebalancer'] }),
            at: time('When the move completed.'),
            forPending: HOLE_FOR,
            epoch: str({ description: 'The balancing epoch the move started in: the exclusion holds while it is current (a node or the deployment changed: a new one).' }),
            earlier: arr(str(), { description: 'Nodes the replica left earlier in the same epoch (excluded too).' }),
          },
          ['node', 'by', 'at'],
          { description: 'The node a completed move took the replica from (the ping-pong exclusion, seed 002).' },
        ),
        suspended: obj({ reason: str(), at: time('When it was suspended.') }, ['reason', 'at']),
        preempted: obj({ for: HOLE_FOR, priority: int(), forPriority: int(), at: time('When it was preempted.') }, ['for', 'priority', 'forPriority', 'at'], {
          description: 'Stopped (suspended, reason preempted) to make room for a higher-priority pending service; the scheduler re-places it once capacity exists.',
        }),
        canary: obj({ revision: int({ minimum: 1 }) }, ['revision'], { description: 'A canary (update.canary) the scheduler placed beside the service for the rollout to this revision; scaled away when that rollout ends.' }),
        relocated: obj({ from: str(), generation: int({ minimum: 1 }), at: time('When it was re-placed.') }, ['from', 'generation', 'at'], {
          description: 'Crash-loop escalation: re-placed once after exhausting its restarts on `from`; exhausting again is final until the next apply.',
        }),
        hostPorts: map(int({ minimum: 1, maximum: 65535 }), { description: 'Dynamic host ports assigned on this node, by port name.' }),
      },
      ['replica', 'deployment', 'service', 'node', 'revision', 'specHash', 'template', 'placedAt'],
    ),
  },
  {
    kind: 'ReplicaObserved',
    plural: 'replicaobserveds',
    description: 'What the node-agent sees of one replica.',
    status: obj(
      {
        replica: str(),
        node: str(),
        deployment: str(),
        service: str(),
        state: str({ enum: observedStates }),
        code: str(),
        details: str(),
        revision: int(),
        specHash: str(),
        containerId: str(),
        containerName: str(),
        image: str(),
        startedAt: time('Container start.'),
        minReadyMet: { ...bool(), description: "Running without a health check: it has run for its service's minReadyTime, judged on the agent's own clock." },
        health: str({ enum: ['none', 'starting', 'healthy', 'unhealthy'] }),
        lastHealthAt: time('Last health check result.'),
        exitCode: int(),
        finishedAt: time('When the container stopped running (an exited one).'),
        replacing: obj(
          { revision: int(), specHash: str(), containerId: str(), state: str({ enum: observedStates }) },
          ['revision', 'specHash', 'containerId', 'state'],
        ),
        ackedCommand: int({ minimum: 0 }),
        address: replicaAddress("The addresses of the replica's network namespace (cluster network), as plumbed on its node: absent until its sandbox has them."),
        observedAt: time('When the agent wrote it.'),
      },
      ['replica', 'node', 'deployment', 'service', 'state', 'observedAt'],
    ),
  },
  {
    kind: 'ReplicaCommand',
    plural: 'replicacommands',
    description: 'A command for the node-agent (restart), with the restart bookkeeping.',
    spec: obj(
      { replica: str(), op: str({ enum: ['restart'] }), seq: int({ minimum: 0 }), issuedAt: time('Issue time.'), reason: str() },
      ['replica', 'op', 'seq', 'issuedAt', 'reason'],
    ),
    status: obj(
      {
        restarts: int({ minimum: 0 }),
        lastRestartAt: time('Last restart.'),
        // A string, not an enum: a cause a newer release adds must not make the record unreadable here.
        lastRestartCause: str({ description: 'Why the last restart was ordered: degraded, exited, failed, removed or paused (the last two, acts outside jaco, do not count against the node).' }),
        exhausted: bool(),
        generation: int({ minimum: 0 }),
      },
      ['restarts', 'generation'],
    ),
  },
  {
    kind: 'ReplicaCounter',
    plural: 'replicacounters',
    description: 'The next replica index of a service; indexes are never reused.',
    spec: obj({ next: int({ minimum: 0 }) }, ['next']),
  },
  {
    kind: 'DisruptionLedger',
    plural: 'disruptionledgers',
    description: "The sequencer of a service's voluntary disruptions (moves, rollout steps): each writes it with compare-and-swap.",
    spec: obj(
      {
        deployment: str(),
        service: str(),
        sequence: int({ minimum: 0 }),
        last: obj({ replica: str(), by: str(), kind: str({ enum: ['move', 'rollout_step', 'preempt'] }), at: time('When.') }, ['replica', 'by', 'kind', 'at']),
      },
      ['deployment', 'service', 'sequence', 'last'],
    ),
  },
  {
    kind: 'VolumeHome',
    plural: 'volumehomes',
    description: 'The node a named volume lives on, fixed on first placement.',
    spec: obj({ deployment: str(), volume: str(), node: str(), since: time('First placement.') }, ['deployment', 'volume', 'node', 'since']),
  },
  {
    kind: 'Secret',
    plural: 'secrets',
    description: 'A secret value, sealed to the cluster key (never in etcd in clear). Immutable: a new value is a new name (docs/secrets.md).',
    spec: obj(
      {
        size: int({ minimum: 0, maximum: MAX_FILE_OBJECT_BYTES }),
        sealed: sealedValue('The value, sealed to the cluster key; its additional data is secret/<name>/<uid>.'),
        owner: fileOwner,
        registry: str({ pattern: REGISTRY_HOST_PATTERN, description: 'The registry whose password this is (jaco registry login).' }),
      },
      ['size', 'sealed'],
    ),
  },
  {
    kind: 'Config',
    plural: 'configs',
    description: 'A config file: not secret, stored as it is. Immutable: new content is a new name.',
    spec: obj(
      {
        size: int({ minimum: 0, maximum: MAX_FILE_OBJECT_BYTES }),
        digest: str({ pattern: '^sha256:[0-9a-f]{64}$' }),
        data: str({ description: 'The content, base64.' }),
        owner: fileOwner,
      },
      ['size', 'digest', 'data'],
    ),
  },
  {
    kind: 'NodeCopy',
    plural: 'nodecopies',
    description: "A node's copy of a secret or config its replicas use, sealed to that node's own key; only that node's agent may read it.",
    spec: obj(
      {
        node: str(),
        kind: str({ enum: ['secret', 'config'] }),
        name: str(),
        uid: str({ description: 'The uid of the secret (config) it copies.' }),
        nodeKey: str({ description: 'The id of the node key it is sealed to.' }),
        size: int({ minimum: 0 }),
        sealed: sealedValue("The value, sealed to the node's key; its additional data is copy/<node>/<kind>/<name>/<uid>."),
      },
      ['node', 'kind', 'name', 'uid', 'nodeKey', 'size', 'sealed'],
    ),
  },
  {
    kind: 'ClusterKey',
    plural: 'clusterkeys',
    description: 'The public half of the cluster key new secrets are sealed to, published by the secrets controller from its key file.',
    spec: obj({ id: str({ minLength: 1 }), publicKey: str({ minLength: 1 }), publishedAt: time('When it was published.') }, ['id', 'publicKey', 'publishedAt']),
  },
  {
    kind: 'NetworkConfig',
    plural: 'networkconfigs',
    description: "config/network: the cluster network's ranges, from which every node gets a subnet of each family (docs/networking.md). Fixed once addresses are given out.",
    spec: obj(
      {
        ipv4: str({ pattern: '^[0-9.]+/[0-9]{1,2}$', description: 'IPv4 range, e.g. 10.208.0.0/12.' }),
        ipv6: str({ pattern: '^[fF][dD][0-9a-fA-F:]*/[0-9]{1,3}$', description: 'IPv6 unique local /48, e.g. fd4a:17c2:9e01::/48.' }),
        subnetBits4: int({ minimum: 8, maximum: 30, description: "Prefix length of a node's IPv4 subnet (default 24)." }),
        services4: str({ pattern: '^[0-9.]+/[0-9]{1,2}$', description: 'IPv4 range of service addresses (default 10.207.0.0/16); IPv6 ones are the ULA range\'s :ffff::/64.' }),
      },
      ['ipv4', 'ipv6'],
    ),
  },
  {
    kind: 'NodeSubnet',
    plural: 'nodesubnets',
    description: "subnets/<node>: a node's subnets of the cluster network, given by the scheduler (its index is claimed by subnetindex/<n>).",
    spec: obj({ node: str(), index: int({ minimum: 0 }), ipv4: str(), ipv6: str(), since: time('When it was given.') }, ['node', 'index', 'ipv4', 'ipv6', 'since']),
  },
  {
    kind: 'SubnetIndexClaim',
    plural: 'subnetindexclaims',
    description: 'subnetindex/<n>: subnet index n belongs to this node (created with its subnets/<node>, so no two nodes share one).',
    spec: obj({ node: str() }, ['node']),
  },
  {
    kind: 'ServiceAddress',
    plural: 'serviceaddresses',
    description: "serviceaddresses/<deployment>/<service>: the service's address, answered on every node and balanced over its ready replicas (docs/networking.md); given by the scheduler, kept for the service's life.",
    spec: obj(
      { deployment: str(), service: str(), number: int({ minimum: 1 }), ipv4: str(), ipv6: str(), since: time('When it was given.'), aliases: arr(str(), { description: "Other names it answers to (its service's aliases), kept in step with the spec by the scheduler." }) },
      ['deployment', 'service', 'number', 'ipv4', 'ipv6', 'since'],
    ),
  },
  {
    kind: 'ServiceAddressClaim',
    plural: 'serviceaddressclaims',
    description: 'serviceaddressnumbers/<n>: service address number n belongs to this service (created with its serviceaddresses key).',
    spec: obj({ deployment: str(), service: str() }, ['deployment', 'service']),
  },
  {
    kind: 'AddressClaim',
    plural: 'addressclaims',
    description: "addresses/<node>/<n>: host number n of the node's subnets belongs to this replica copy; created in the placement's own transaction (no two copies share an address), deleted once no copy holds it and no container of it may still run.",
    spec: obj(
      { node: str(), replica: str(), deployment: str(), service: str(), ipv4: str(), ipv6: str(), since: time('Given at placement.') },
      ['node', 'replica', 'deployment', 'service', 'ipv4', 'ipv6', 'since'],
    ),
  },
  {
    kind: 'Endpoints',
    plural: 'endpoints',
    description: 'The healthy replicas of a service, with host and ports.',
    spec: obj(
      {
        deployment: str(),
        service: str(),
        addresses: arr(obj({ replica: str(), node: str(), ports: arr(int()), address: str(), hostPorts: map(int()) }, ['replica', 'node', 'ports'])),
      },
      ['deployment', 'service', 'addresses'],
    ),
  },
  {
    kind: 'IngressStatus',
    plural: 'ingressstatuses',
    description: "What one node's ingress routes (jaco ingress), bound to its lease: gone when it stops.",
    spec: obj(
      {
        node: str(),
        address: str(),
        time: time('When the ingress wrote it.'),
        haproxy: str({ enum: ['running', 'down'] }),
        routes: arr(
          obj(
            {
              published: int({ minimum: 1, maximum: 65535 }),
              deployment: str(),
              service: str(),
              servers: arr(
                obj(
                  { replica: str(), node: str(), address: str(), port: int({ minimum: 1, maximum: 65535 }), state: str({ enum: ['ready', 'drain'] }), check: str({ description: "HAProxy's own health check of the server." }) },
                  ['replica', 'node', 'address', 'port', 'state'],
                ),
              ),
            },
            ['published', 'deployment', 'service', 'servers'],
          ),
        ),
        conflicts: arr(obj({ published: int(), routedTo: str(), ignored: arr(str()) }, ['published', 'routedTo', 'ignored'])),
        unbound: arr(
          obj({ published: int({ minimum: 1, maximum: 65535 }), deployment: str(), service: str(), address: str(), reason: str() }, ['published', 'deployment', 'service', 'address', 'reason']),
          { description: 'Routes HAProxy could not bind (a port another process holds, an address the node lacks): left out, the others answer; tried again after the longest back-off (30 s) and with the next change.' },
        ),
      },
      ['node', 'time', 'haproxy', 'routes'],
    ),
  },
  {
    kind: 'PlacementDecision',
    plural: 'placementdecisions',
    description: 'Why a replica was placed where it was, as decided (jaco explain).',
    spec: obj(
      {
        replica: str(),
        deployment: str(),
        service: str(),
        at: time('Decision time.'),
        actor: str(),
        mode: str({ enum: ['spread', 'pack', 'hosts', 'global'] }),
        chosen: str(),
        why: str(),
        reason: str(),
        verdicts: arr(
          obj(
            {
              node: str(),
              rejected: obj({ filter: str(), reason: str(), detail: str() }, ['filter', 'reason', 'detail']),
              score: obj({ total: num(), parts: map(num()) }, ['total', 'parts']),
            },
            ['node'],
          ),
        ),
        omitted: map(int({ minimum: 0 }), { description: 'Nodes not listed in verdicts (large clusters), by filter; "scored" counts passing nodes.' }),
        trigger: str({ description: 'What put it there: scale_up, global_node or node_lost (the scheduler); drain or rebalance (a move).' }),
      },
      ['replica', 'deployment', 'service', 'at', 'actor', 'mode', 'why', 'verdicts'],
    ),
  },
  {
    kind: 'DeploymentStatus',
    plural: 'deploymentstatuses',
    description: 'Scheduling and rollout status of a deployment; each controller owns its field.',
    status: obj({
      scheduling: obj(
        {
          observedGeneration: int(),
          updatedAt: time('Last update.'),
          services: map(
            obj(
              {
                desired: int({ minimum: 0 }),
                placed: int({ minimum: 0 }),
                unschedulable: obj(
                  { reason: str(), count: int({ minimum: 0 }), message: str(), nodes: map(str()), missing: arr(str()) },
                  ['reason', 'count', 'message', 'nodes'],
                ),
                restartExhausted: arr(str()),
                nodeLost: arr(str()),
                unreadable: arr(str(), { description: 'Desired keys of the service whose value cannot be read: the service is held until they are fixed.' }),
                waitingForDependency: arr(str(), { description: 'Dependencies (dependsOn) not yet meeting their condition: nothing new is placed until they do.' }),
                canaries: int({ minimum: 0, description: "Canary replicas placed beside the service's replicas for its rollout (update.canary)." }),
                job: obj(
                  {
                    specHash: str(),
                    revision: int({ minimum: 0 }),
                    incarnation: int({ minimum: 0, description: 'The create revision of the deployment key it ran for (a deployment re-created is another incarnation).' }),
                    state: str({ enum: ['running', 'succeeded', 'failed'] }),
                    attempts: int({ minimum: 0 }),
                    exitCode: int(),
                    startedAt: time('First start of the run.'),
                    finishedAt: time('When the result was reached.'),
                    durationMs: int({ minimum: 0 }),
                    reason: str(),
                  },
                  ['specHash', 'revision', 'incarnation', 'state', 'attempts'],
                  { description: "A job's (mode: job) result at its current spec: kept until the spec changes, so nothing runs it twice." },
                ),
              },
              ['desired', 'placed'],
            ),
          ),
          failingActs: arr(
            obj(
              {
                act: str(),
                reason: str({ enum: ['conflict', 'unreadable_key', 'too_large', 'too_many_ops', 'duplicate_key'] }),
                detail: str(),
                since: time('First failure of this kind.'),
                attempts: int({ minimum: 1 }),
              },
              ['act', 'reason', 'detail', 'since', 'attempts'],
            ),
            { description: "The scheduler's writes for this deployment that keep failing (held back with a growing delay)." },
          ),
        },
        ['observedGeneration', 'updatedAt', 'services'],
      ),
      rollout: obj(
        {
          appliedRevision: int(),
          updatedAt: time('Last update.'),
          services: map(
            obj(
              {
                state: str({ enum: ['in_progress', 'paused', 'completed', 'aborted'] }),
                fromRevision: int(),
                toRevision: int(),
                currentStep: int({ minimum: 0 }),
                totalSteps: int({ minimum: 0 }),
                failureReason: str(),
                canary: obj({ replicas: int({ minimum: 0 }), ready: int({ minimum: 0 }), promoted: bool() }, ['replicas', 'ready', 'promoted']),
              },
              ['state', 'fromRevision', 'toRevision', 'currentStep', 'totalSteps'],
            ),
          ),
        },
        ['appliedRevision', 'updatedAt', 'services'],
      ),
    }),
  },
  {
    kind: 'RolloutPlan',
    plural: 'rolloutplans',
    description: 'A rolling update of one service, step by step (update.parallelism replicas at a time).',
    spec: obj(
      {
        deployment: str(),
        service: str(),
        fromRevision: int({ minimum: 0 }),
        toRevision: int({ minimum: 1 }),
        fromHash: str(),
        toHash: str(),
        incarnation: int({ minimum: 1, description: 'The create revision of the deployment key the plan was made for: a plan of a deleted and re-created deployment\'s previous incarnation never governs the new one.' }),
        totalSteps: int({ minimum: 0 }),
        currentStep: int({ minimum: 0 }),
        state: str({ enum: ['in_progress', 'paused', 'completed', 'aborted'] }),
        failureReason: str(),
        startedAt: time('Rollout start.'),
        finishedAt: time('Rollout end.'),
        pausedAt: time('Paused since (by the operator, or by failureAction pause).'),
        resumedAt: time('Last resume: the progress deadline counts from here.'),
        request: obj(
          { action: str({ enum: ['pause', 'resume', 'abort', 'promote'] }), requestedAt: time('Request time.') },
          ['action', 'requestedAt'],
          { description: 'Written by the CLI (jaco rollout pause|resume|abort|promote); the controller carries it out and clears it.' },
        ),
        steps: arr(
          obj(
            {
              replica: str(),
              node: str(),
              startedAt: time('Step start.'),
              readyAt: time('With update.monitor: first seen ready.'),
              finishedAt: time('Step end.'),
              result: str({ enum: ['done', 'failed', 'reverted', 'superseded'] }),
              canary: bool(),
              leavingMs: int({ minimum: 0, description: 'A stop-first step: how long the old container may take to leave (deregistration delay and stop grace); the step timeout counts after it.' }),
            },
            ['replica', 'node', 'startedAt'],
          ),
        ),
        canary: obj(
          {
            replicas: int({ minimum: 0 }),
            readySince: time('Since when every canary has been ready.'),
            promotedAt: time('When the canaries were promoted.'),
            promotedBy: str({ enum: ['operator', 'auto'] }),
          },
          ['replicas'],
          { description: 'The canary phase (update.canary): no replica is stepped until promoted.' },
        ),
      },
      ['deployment', 'service', 'fromRevision', 'toRevision', 'fromHash', 'toHash', 'totalSteps', 'currentStep', 'state', 'startedAt', 'steps'],
    ),
  },
  {
    kind: 'NodeDrain',
    plural: 'nodedrains',
    description: 'A request to drain (and maybe remove) a node, and its progress.',
    spec: obj(
      { node: str(), timeout: duration('Per-replica move timeout.'), force: bool(), remove: bool(), requestedAt: time('Request time.') },
      ['node', 'timeout', 'force', 'remove', 'requestedAt'],
    ),
    status: obj(
      {
        state: str({ enum: ['pending', 'draining', 'completed', 'aborted', 'removed'] }),
        reason: str(),
        startedAt: time('Drain start.'),
        finishedAt: time('Drain end.'),
        stopping: arr(str(), { description: "Replicas that left the node whose containers its agent still reports: the drain completes once they are gone." }),
        unconfirmed: arr(str(), { description: 'The node was NotReady when the drain finished: these containers could not be confirmed stopped.' }),
        replicas: map(
          obj(
            {
              state: str({ enum: ['pending', 'moving', 'done', 'blocked', 'dropped', 'stopped'] }),
              reason: str(),
              dst: str(),
              at: time('Last change.'),
              deadline: time('Set at the first move attempt: the replica must be moved by then or the drain aborts with drain_timeout.'),
              failedOn: arr(str(), { description: 'Nodes where a move of this replica failed in this drain (its copy failed to start or exited): not tried again.' }),
            },
            ['state'],
          ),
        ),
      },
      ['state', 'replicas'],
    ),
  },
  {
    kind: 'Registry',
    plural: 'registries',
    description: 'How to reach one image registry (jaco registry login): credentials, its CA, plain HTTP. Named by its host[:port]; the password is a Secret it names, never printed.',
    spec: obj(
      {
        host: str({ pattern: REGISTRY_HOST_PATTERN, description: 'host[:port] as image references name it (docker.io for Docker Hub), lower case.' }),
        username: str({ minLength: 1 }),
        passwordSecret: str({ pattern: FILE_OBJECT_NAME_PATTERN, description: "The Secret holding the user's password: sealed at rest, copied only to the nodes that pull from this registry." }),
        caPem: str({ pattern: '^-----BEGIN CERTIFICATE-----', description: "PEM of the CA that signs the registry's certificate." }),
        insecure: bool(),
      },
      ['host'],
    ),
  },
  {
    kind: 'ClockBeacon',
    plural: 'clockbeacons',
    description: "The controllers' time at clock, written every interval by the clock controller: each node-agent measures its clock's skew against it.",
    spec: obj({ time: time("The writing controller's clock."), intervalMs: int({ minimum: 1 }), by: str() }, ['time', 'intervalMs', 'by']),
  },
  {
    kind: 'ImageSettings',
    plural: 'imagesettings',
    description: 'The cluster-wide image setting at config/images (jaco registry default).',
    spec: obj(
      {
        defaultRegistry: str({ pattern: REGISTRY_HOST_PATTERN, description: 'Where builds are pushed and short names (busybox, team/app) are resolved.' }),
        hub: bool(),
      },
      ['hub'],
    ),
  },
  {
    kind: 'NodeSettings',
    plural: 'nodesettings',
    description: "The cluster's node-eligibility settings at config/nodes (jaco node settings): absent fields are their defaults.",
    spec: obj({
      defaultInstanceEphemeralDisk: str({ pattern: MEMORY_PATTERN, description: 'Scratch disk booked for a replica whose service sets no resources.disk (seed 004: 4Gi).' }),
      diskPressurePercent: num({ minimum: 1, maximum: 100, description: "A node whose data root's filesystem is fuller than this is degraded (default 90)." }),
      failureWindow: str({ pattern: DURATION_PATTERN, description: 'Restarts within this long count (default 10m).' }),
      failureServices: int({ minimum: 1, description: 'Replicas of this many services restarted on one node within failureWindow: degraded (default 3).' }),
      overlayHandshakeMaxAge: str({ pattern: DURATION_PATTERN, description: 'A WireGuard peer with no handshake within this long is unreachable (default 3m).' }),
      overlayUnreachablePercent: num({ minimum: 0, maximum: 100, description: 'More than this percent of its peers unreachable: degraded (default 50).' }),
    }),
  },
  {
    kind: 'AuditEvent',
    plural: 'auditevents',
    description: 'One decision or act, recorded in the same transaction as the act.',
    spec: obj(
      { type: str({ minLength: 1 }), time: time('Event time.'), actor: str(), deployment: str(), payload: freeForm('Event-specific fields.') },
      ['type', 'time', 'actor', 'payload'],
    ),
  },
];

/** The CRD of every kind, as apiextensions.k8s.io/v1 objects. */
export function crdDefinitions(): V1CustomResourceDefinition[] {
  return KINDS.map((k) => {
    const properties: Record<string, Schema> = {
      apiVersion: str(),
      kind: str(),
      metadata: { type: 'object' },
    };
    const required = ['spec'];
    if (k.spec) properties.spec = k.spec;
    if (k.status) properties.status = k.status;
    return {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: `${k.plural}.${GROUP}` },
      spec: {
        group: GROUP,
        scope: 'Cluster',
        names: { kind: k.kind, plural: k.plural, singular: k.kind.toLowerCase(), listKind: `${k.kind}List` },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: {
                type: 'object',
                description: k.description,
                properties,
                required: k.spec ? required : ['status'],
              },
            },
          },
        ],
      },
    } satisfies V1CustomResourceDefinition;
  });
}
