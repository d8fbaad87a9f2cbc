// Ports of a service: the short form (a number: a fixed host port, today's rule) and the long form
// ({ name, containerPort, hostPort?, published?, protocol }), and the assignment of dynamic host
// ports (Nomad's model): a port without a fixed host port gets a free one from its node's range,
// recorded in the replica's desired record. Pure: the scheduler calls it with what its placer
// accounts as taken on the node.
import type { PortRange, PortSpec, ReplicaDesiredSpec, ServiceSpec } from './types.js';

export const DEFAULT_PORT_RANGE: PortRange = { min: 20000, max: 32767 };
/** The deregistration delay of a service an ingress routes to (one with a TCP port) when it declares none. */
export const DEFAULT_DEREGISTRATION_DELAY = '5s';

/** A port in one shape: a short-form number is a fixed host port of the same number. */
export interface NormalizedPort {
  name: string;
  containerPort: number;
  hostPort?: number;
  published?: number;
  protocol: 'tcp' | 'udp';
  /** What the port speaks, when said (compose app_protocol): http makes the ingress proxy requests. */
  appProtocol?: string;
}

/**
 * Every port of a service in spec order; on the cluster network, then the ports its image declares
 * (imagePorts) that it does not list, named p<port>: its name answers on them too.
 */
export function normalizePorts(spec: Pick<ServiceSpec, 'ports' | 'network' | 'imagePorts'>): NormalizedPort[] {
  const listed = listedPorts(spec);
  if (spec.network !== 'cluster' || !spec.imagePorts?.length) return listed;
  const taken = new Set(listed.flatMap((p) => [p.name, p.containerPort]));
  for (const port of spec.imagePorts) if (!taken.has(port) && !taken.has(`p${port}`)) listed.push({ name: `p${port}`, containerPort: port, protocol: 'tcp' });
  return listed;
}

function listedPorts(spec: Pick<ServiceSpec, 'ports'>): NormalizedPort[] {
  return (spec.ports ?? []).map((p) =>
    typeof p === 'number'
      ? { name: `p${p}`, containerPort: p, hostPort: p, protocol: 'tcp' as const }
      : {
          name: p.name ?? `p${p.containerPort}`,
          containerPort: p.containerPort,
          ...(p.hostPort !== undefined ? { hostPort: p.hostPort } : {}),
          ...(p.published !== undefined ? { published: p.published } : {}),
          protocol: p.protocol ?? 'tcp',
          ...(p.appProtocol !== undefined ? { appProtocol: p.appProtocol } : {}),
        },
  );
}

/** One published port: answered on every node's ingress at <node address>:published. */
export interface PublishedPort {
  published: number;
  deployment: string;
  service: string;
  portName: string;
  mode: 'http' | 'tcp';
}

/**
 * Every published TCP port of every deployment, in (deployment, service, port) order: what the
 * ingresses route (controllers/ingress) and what apply checks for clashes (api/rules.ts).
 */
export function publishedPorts(deployments: Iterable<{ name: string; spec: { services: Record<string, Pick<ServiceSpec, 'ports'>> } }>): PublishedPort[] {
  const out: PublishedPort[] = [];
  for (const d of [...deployments].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)))
    for (const service of Object.keys(d.spec.services).sort())
      for (const p of normalizePorts(d.spec.services[service]!))
        if (p.published !== undefined && p.protocol === 'tcp') out.push({ published: p.published, deployment: d.name, service, portName: p.name, mode: portMode(p) });
  return out;
}

/** How a port is proxied: as HTTP when it says so (named http, or appProtocol http), else as TCP. */
export function portMode(p: Pick<NormalizedPort, 'name' | 'appProtocol'>): 'http' | 'tcp' {
  return p.name === 'http' || p.appProtocol === 'http' ? 'http' : 'tcp';
}

/**
 * Host ports fixed by the spec: a per-node resource for placement. A cluster-network replica has
 * none: its ports are its own network namespace's (the short form `8080` there is the container port).
 */
export function fixedHostPorts(spec: Pick<ServiceSpec, 'ports' | 'network'>): number[] {
  if (spec.network === 'cluster') return [];
  const out: number[] = [];
  for (const p of spec.ports ?? []) {
    if (typeof p === 'number') out.push(p);
    else if (p.hostPort !== undefined) out.push(p.hostPort);
  }
  return out;
}

/** Names of the ports the scheduler assigns a host port to, in spec order (none on the cluster network). */
export function dynamicPortNames(spec: Pick<ServiceSpec, 'ports' | 'network'>): string[] {
  if (spec.network === 'cluster') return [];
  return normalizePorts(spec)
    .filter((p) => p.hostPort === undefined)
    .map((p) => p.name);
}

/** Whether an ingress routes to the service: it has a TCP port (published, or on its service address). */
export function routedPorts(spec: Pick<ServiceSpec, 'ports' | 'network' | 'imagePorts'>): boolean {
  return normalizePorts(spec).some((p) => p.protocol === 'tcp');
}

/**
 * Port by port name at which one replica is reached (its endpoints): on the host network its host
 * port, at its node's address; on the cluster network its container port, at its own address.
 */
export function endpointPortsOf(d: Pick<ReplicaDesiredSpec, 'template' | 'hostPorts'>): Record<string, number> {
  if (d.template.network !== 'cluster') return hostPortsOf(d);
  const out: Record<string, number> = {};
  for (const p of normalizePorts(d.template)) out[p.name] = p.containerPort;
  return out;
}

/** Host port by port name of one replica: fixed from the spec, dynamic from its desired record (none on the cluster network). */
export function hostPortsOf(d: Pick<ReplicaDesiredSpec, 'template' | 'hostPorts'>): Record<string, number> {
  const out: Record<string, number> = {};
  if (d.template.network === 'cluster') return out;
  for (const p of normalizePorts(d.template)) {
    const port = p.hostPort ?? d.hostPorts?.[p.name];
    if (port !== undefined) out[p.name] = port;
  }
  return out;
}

/** Every host port a replica binds (fixed and assigned), in spec order. */
export function hostPortList(d: Pick<ReplicaDesiredSpec, 'template' | 'hostPorts'>): number[] {
  return Object.values(hostPortsOf(d));
}

/** The environment variable of a port name: JACO_PORT_<NAME>, upper case, other characters as "_". */
export function portEnvName(name: string): string {
  return `JACO_PORT_${name.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** PORT (the first port's host port), JACO_PORT_<NAME> per port. */
export function portEnv(d: Pick<ReplicaDesiredSpec, 'template' | 'hostPorts'>): Record<string, string> {
  const ports = hostPortsOf(d);
  const env: Record<string, string> = {};
  const names = Object.keys(ports);
  if (names.length) env.PORT = String(ports[names[0]!]);
  for (const n of names) env[portEnvName(n)] = String(ports[n]);
  return env;
}

/**
 * PORT and JACO_PORT_<NAME> on the cluster network: a replica has its own address and port space,
 * so each port is the container port itself (host ports are a host-network thing).
 */
export function containerPortEnv(spec: Pick<ServiceSpec, 'ports'>): Record<string, string> {
  const ports = normalizePorts(spec);
  const env: Record<string, string> = {};
  if (ports.length) env.PORT = String(ports[0]!.containerPort);
  for (const p of ports) env[portEnvName(p.name)] = String(p.containerPort);
  return env;
}

/** FNV-1a of a string: where a replica's search for a free port starts. */
function hash(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

export class PortsExhaustedError extends Error {
  override name = 'PortsExhaustedError';
}

/**
 * Assigns a free host port to each name, from the node's range, never one in `taken` (which it
 * extends). Deterministic: the search starts at a point of the range derived from the replica id
 * and walks up (wrapping), so the same replica on the same node state gets the same ports, and a
 * port freed a moment ago (its container may still be draining) is not the next one handed out.
 * Throws PortsExhaustedError when the range has too few free ports.
 */
export function assignHostPorts(replica: string, names: readonly string[], taken: Set<number>, range: PortRange = DEFAULT_PORT_RANGE): Record<string, number> {
  const size = range.max - range.min + 1;
  const out: Record<string, number> = {};
  let at = hash(replica) % size;
  for (const name of names) {
    let found: number | undefined;
    for (let k = 0; k < size; k++) {
      const port = range.min + ((at + k) % size);
      if (!taken.has(port)) {
        found = port;
        at = (at + k + 1) % size;
        break;
      }
    }
    if (found === undefined) throw new PortsExhaustedError(`no free host port in ${range.min}-${range.max}`);
    taken.add(found);
    out[name] = found;
  }
  return out;
}

/** Parses "20000-32767". */
export function parsePortRange(s: string): PortRange {
  const m = /^(\d{1,5})-(\d{1,5})$/.exec(s.trim());
  const min = m ? Number(m[1]) : NaN;
  const max = m ? Number(m[2]) : NaN;
  if (!(min >= 1 && max <= 65535 && min <= max)) throw new Error(`port range "${s}" is not MIN-MAX within 1-65535`);
  return { min, max };
}

/**
 * A port list as the canonical spec (hash) sees it: short-form numbers stay numbers (their hash is
 * unchanged); `published` is left out — it is the ingress's, and changing it must not roll the service.
 */
export function canonicalPorts(ports: ServiceSpec['ports']): (number | Omit<NormalizedPort, 'published'>)[] {
  const nums = (ports ?? []).filter((p): p is number => typeof p === 'number').sort((a, b) => a - b);
  const objs = (ports ?? [])
    .filter((p): p is PortSpec => typeof p !== 'number')
    .map((p) => {
      const { published: _p, ...rest } = normalizePorts({ ports: [p] })[0]!;
      return rest;
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return [...nums, ...objs];
}
