// How a ReplicaDesired becomes a Docker container: its name, labels and create options (host
// networking, or its sandbox's namespace on the cluster network; env, command, limits, health
// check, stop signal and grace, volumes, GPUs). Pure, so every field is table-tested; the shell
// only hands the result to Docker.
import type Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import { containerPortEnv, hostPortList, portEnv } from '../../src/api/ports.js';
import { DEREGISTRATION_LABEL, PROBE_LABEL } from './facts.js';
import type { ReplicaDesiredSpec, ServiceSpec } from '../../src/api/types.js';
import { cpuMillis, durationMs, memoryBytes } from '../../src/api/units.js';
import { deregistrationMs, onClusterNetwork, runImage, stopTimeoutSec } from '../../src/api/spec.js';
import { nodeFileName, serviceFiles } from '../../src/api/files.js';
import { join } from 'node:path';
import { bareAddress } from '../../src/api/network.js';
import { probeSpec } from './probes.js';
import type { Owner } from './engine.js';

/** The labels that say whose a replica's containers are (its own and its sandbox). */
export function replicaLabels(d: Pick<ReplicaDesiredSpec, 'deployment' | 'service' | 'replica'>, owner: Owner): Record<string, string> {
  return { [LABELS.cluster]: owner.clusterUid, [LABELS.node]: owner.node, [LABELS.deployment]: d.deployment, [LABELS.service]: d.service, [LABELS.replica]: d.replica };
}

const short = (s: string) => s.slice(0, 8);

/**
 * Unique per engine (cluster, node and replica: a replica being moved between two simulated nodes
 * of one engine has a copy on each) and carrying the revision and spec hash, so the old and the
 * new container of a start-first replacement coexist.
 */
export function containerName(owner: Owner, replica: string, revision: number, specHash: string): string {
  return `jaco-${short(owner.clusterUid)}-${owner.node}-${replica}-r${revision}-${short(specHash)}`;
}

/** A named volume of a deployment on this node (Docker volume names are per engine). */
export function volumeName(owner: Owner, deployment: string, source: string): string {
  return `jaco-${short(owner.clusterUid)}-${owner.node}-${deployment}-${source}`;
}

/** The label filter that selects exactly one agent's containers. */
export function ownerLabels(owner: Owner): string[] {
  return [`${LABELS.cluster}=${owner.clusterUid}`, `${LABELS.node}=${owner.node}`];
}

const NS_PER_MS = 1_000_000;

function healthcheck(t: ServiceSpec): Docker.HealthConfig | undefined {
  const h = t.healthcheck;
  if (!h) return undefined;
  // An agent-run check (probes.ts): Docker runs none, not even one the image declares.
  if (!h.test) return { Test: ['NONE'] };
  return {
    Test: h.test,
    Interval: durationMs(h.interval) * NS_PER_MS,
    Timeout: durationMs(h.timeout) * NS_PER_MS,
    Retries: h.retries,
    StartPeriod: durationMs(h.startPeriod) * NS_PER_MS,
  };
}


/**
 * The replica's secrets and configs: each file of its tmpfs (files.ts wrote them under `filesDir`)
 * bind-mounted read-only at its target, one mount per file, as Swarm mounts them.
 */
export function fileMounts(t: ServiceSpec, filesDir: string | undefined): Docker.MountSettings[] {
  const files = serviceFiles(t);
  if (!files.length) return [];
  if (!filesDir) throw new Error('a replica with secrets or configs needs the directory of its files');
  return files.map((f) => ({ Type: 'bind', Source: join(filesDir, nodeFileName(f)), Target: f.target, ReadOnly: true }));
}

/** Where a replica's container goes besides its spec. */
export interface CreateContext {
  /** Where its secrets and configs were written, when it has any. */
  filesDir?: string;
  /** The sandbox whose network namespace a cluster-network replica joins (its id). */
  sandbox?: string;
  /** The storage driver caps writable layers (disk.ts): resources.disk is passed as StorageOpt size. */
  capDisk?: boolean;
}

/**
 * Everything `docker create` needs for a desired replica. Throws UnitError on a bad quantity. A
 * cluster-network replica joins its sandbox's network namespace, where its ports are its own: no
 * host ports, its addresses in the environment.
 */
export function createOptions(d: ReplicaDesiredSpec, owner: Owner, { filesDir, sandbox, capDisk }: CreateContext = {}): Docker.ContainerCreateOptions {
  const t = d.template;
  const cluster = onClusterNetwork(t);
  if (cluster && !sandbox) throw new Error(`replica ${d.replica} is on the cluster network: its container needs its sandbox`);
  const env: Record<string, string> = {
    ...t.env,
    ...(cluster ? containerPortEnv(t) : portEnv(d)),
    ...(cluster && d.address ? { JACO_REPLICA_ADDRESS: bareAddress(d.address.ipv4), JACO_REPLICA_ADDRESS6: bareAddress(d.address.ipv6) } : {}),
    ...(owner.address ? { JACO_NODE_ADDRESS: owner.address } : {}),
    JACO_NODE: owner.node,
    JACO_DEPLOYMENT: d.deployment,
    JACO_SERVICE: d.service,
    JACO_REPLICA: d.replica,
    JACO_REVISION: String(d.revision),
  };
  const nanoCpus = cpuMillis(t.resources?.cpu) * NS_PER_MS;
  const memory = memoryBytes(t.resources?.memory);
  const gpus = t.resources?.gpus ?? 0;
  // Only where the driver honours it (dockerd refuses the create elsewhere); the placer books it everywhere.
  const disk = capDisk && t.resources?.disk !== undefined ? memoryBytes(t.resources.disk) : 0;
  // Docker types want NoCopy and DriverConfig too; the API takes Labels alone.
  const volumeOptions = { Labels: { [LABELS.cluster]: owner.clusterUid, [LABELS.node]: owner.node, [LABELS.deployment]: d.deployment } };
  const volumeMounts: Docker.MountSettings[] = (t.volumes ?? []).map((v) =>
    v.type === 'volume'
      ? ({ Type: 'volume', Source: volumeName(owner, d.deployment, v.source), Target: v.target, ReadOnly: !!v.readOnly, VolumeOptions: volumeOptions } as unknown as Docker.MountSettings)
      : v.type === 'anonymous'
        ? // No source: Docker makes a volume of the container's own, removed with it (remove v: true, docker.ts).
          ({ Type: 'volume', Target: v.target, ReadOnly: !!v.readOnly, VolumeOptions: volumeOptions } as unknown as Docker.MountSettings)
        : { Type: 'bind', Source: v.source, Target: v.target, ReadOnly: !!v.readOnly },
  );
  const mounts = [...volumeMounts, ...fileMounts(t, filesDir)];
  const hostConfig: Docker.HostConfig = {
    NetworkMode: cluster ? `container:${sandbox}` : 'host',
    // The scheduler owns restarts (seed 001): Docker must never restart a container by itself.
    RestartPolicy: { Name: 'no' },
    ...(nanoCpus ? { NanoCpus: nanoCpus } : {}),
    // A hard cap: no swap beyond the limit.
    ...(memory ? { Memory: memory, MemorySwap: memory } : {}),
    ...(disk ? { StorageOpt: { size: String(disk) } } : {}),
    ...(mounts.length ? { Mounts: mounts } : {}),
    // Count -1 is Docker's "all" (docker run --gpus all); GPUs by id are a request of those ids.
    ...(gpus ? { DeviceRequests: [{ Driver: '', Count: gpus === 'all' ? -1 : gpus, Capabilities: [['gpu']] }] } : {}),
    ...(t.resources?.gpuIds?.length ? { DeviceRequests: [{ Driver: '', DeviceIDs: t.resources.gpuIds, Capabilities: [['gpu']] }] } : {}),
    // Hosts entries live in the namespace's owner, the sandbox (Docker refuses them here).
    ...hostOptions(cluster ? { ...t.container, extraHosts: undefined } : t.container),
    ...containerSysctls(t.container, cluster),
  };
  const hc = healthcheck(t);
  const probe = probeSpec(d, owner);
  return {
    name: containerName(owner, d.replica, d.revision, d.specHash),
    Image: runImage(t),
    ...(t.command ? { Entrypoint: t.command } : {}),
    ...(t.args ? { Cmd: t.args } : {}),
    Env: Object.entries(env)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([k, v]) => `${k}=${v}`),
    ...(t.container?.workingDir ? { WorkingDir: t.container.workingDir } : {}),
    ...(t.container?.user ? { User: t.container.user } : {}),
    Labels: {
      ...t.container?.labels,
      ...replicaLabels(d, owner),
      [LABELS.specHash]: d.specHash,
      [LABELS.revision]: String(d.revision),
      ...(deregistrationMs(t) ? { [DEREGISTRATION_LABEL]: String(deregistrationMs(t)) } : {}),
      ...(probe ? { [PROBE_LABEL]: JSON.stringify(probe) } : {}),
    },
    // Declared so that `docker ps` shows them and a later replacement can see a shared host port.
    // Not on the cluster network: Docker refuses exposed ports on a container joining another's namespace.
    ...(!cluster && hostPortList(d).length ? { ExposedPorts: Object.fromEntries(hostPortList(d).map((p) => [`${p}/tcp`, {}])) } : {}),
    ...(hc ? { Healthcheck: hc } : {}),
    StopSignal: t.stopSignal ?? 'SIGTERM',
    StopTimeout: stopTimeoutSec(t),
    HostConfig: hostConfig,
  };
}

/** HostConfig fields of a service's container options (compose's init, read_only, cap_add, …). */
function hostOptions(c: ServiceSpec['container']): Partial<Docker.HostConfig> {
  if (!c) return {};
  return {
    ...(c.init ? { Init: true } : {}),
    ...(c.readOnly ? { ReadonlyRootfs: true } : {}),
    ...(c.capAdd?.length ? { CapAdd: c.capAdd } : {}),
    ...(c.capDrop?.length ? { CapDrop: c.capDrop } : {}),
    ...(c.extraHosts?.length ? { ExtraHosts: c.extraHosts } : {}),
    ...(c.shmSize ? { ShmSize: c.shmSize } : {}),
    ...(c.tmpfs?.length ? { Tmpfs: Object.fromEntries(c.tmpfs.map((t) => [t.split(':')[0]!, t.split(':').slice(1).join(':')])) } : {}),
    ...(c.ulimits ? { Ulimits: Object.entries(c.ulimits).map(([Name, u]) => ({ Name, Soft: u.soft, Hard: u.hard })) } : {}),
    ...(c.privileged ? { Privileged: true } : {}),
    ...(c.securityOpt?.length ? { SecurityOpt: c.securityOpt } : {}),
    ...(c.ipc ? { IpcMode: c.ipc } : {}),
    ...(c.pid ? { PidMode: c.pid } : {}),
    ...(c.runtime ? { Runtime: c.runtime } : {}),
    ...(c.devices?.length ? { Devices: c.devices.map(deviceMapping) } : {}),
  };
}

/** "/dev/host[:/dev/container][:rwm]" as docker run --device reads it: the container path defaults to the host's, permissions to rwm. */
export function deviceMapping(spec: string): Docker.DeviceMapping {
  const [host, ...rest] = spec.split(':');
  const perms = rest.length && /^[rwm]+$/.test(rest.at(-1)!) ? rest.pop()! : 'rwm';
  return { PathOnHost: host!, PathInContainer: rest[0] ?? host!, CgroupPermissions: perms };
}

/** A sysctl of the network namespace: on the cluster network it is the sandbox's to set (Docker refuses it on a container that joins another's namespace). */
export const isNetSysctl = (name: string) => name.startsWith('net.');

/** The sysctls a container sets itself: all of them on the host network, all but net.* on the cluster network (those are its sandbox's). */
function containerSysctls(c: ServiceSpec['container'], cluster: boolean): Partial<Docker.HostConfig> {
  const own = Object.entries(c?.sysctls ?? {}).filter(([k]) => !cluster || !isNetSysctl(k));
  return own.length ? { Sysctls: Object.fromEntries(own) } : {};
}

/** Docker pulls every tag of a repository given without one: always name the tag. */
export function imageWithTag(image: string): string {
  if (image.includes('@')) return image;
  const lastSlash = image.lastIndexOf('/');
  return image.slice(lastSlash + 1).includes(':') ? image : `${image}:latest`;
}
