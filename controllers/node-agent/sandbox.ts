// The sandbox of a cluster-network replica, as Kubernetes has its pod sandbox: a small long-lived
// container (the pause image) started with no network, whose network namespace the agent gives
// the replica's addresses (CNI ptp) before the replica's own container starts and joins it
// (NetworkMode container:<sandbox>). So the app never runs without its addresses, and a
// container restarted or replaced on the node keeps them. Pure: name, labels and create options.
import { createHash } from 'node:crypto';
import type Docker from 'dockerode';
import { LABELS } from '../../src/api/labels.js';
import { canonicalJson, onClusterNetwork } from '../../src/api/spec.js';
import type { ReplicaAddress, ReplicaDesiredSpec } from '../../src/api/types.js';
import { canonicalCidr, gatewayOf } from '../../src/api/network.js';
import { isNetSysctl, replicaLabels } from './container-spec.js';
import type { Owner } from './engine.js';

/** The value of the role label on a sandbox (the replica's own container has none). */
export const SANDBOX_ROLE = 'sandbox';
/** The pause image: a short name, so it resolves at the cluster's default registry like any other. */
export const DEFAULT_SANDBOX_IMAGE = 'jaco/pause:1';

/** What a replica's sandbox is made with: another of any of it is another sandbox. */
export interface SandboxSpec {
  /** Of the rest, canonical: the sandbox's label and the tail of its name. */
  hash: string;
  address: ReplicaAddress;
  /**
   * Hosts entries (compose extra_hosts): a container joining another's network namespace shares
   * its /etc/hosts, and Docker refuses them on the joining container, so they go on the sandbox.
   */
  extraHosts: string[];
  /** The namespace's host name (the UTS namespace goes with the network one): the service's, else the replica's id. */
  hostname: string;
  /**
   * Its resolv.conf, shared by the container that joins it: the node's resolver at the gateways of
   * its prefixes (dns.ts, started by the agent), and its deployment as the search domain, so `db`
   * finds `db.shop` (docs/networking.md, Names).
   */
  dns: { servers: string[]; search: string[] };
  /** The service's net.* sysctls (compose sysctls): its namespace's, so the sandbox's. */
  sysctls: Record<string, string>;
}

/** Each desired spec's sandbox, computed once: the cache keeps a record's object until the record changes. */
const known = new WeakMap<object, SandboxSpec | undefined>();

/**
 * The sandbox a desired replica needs: undefined on the host network, or while its record carries
 * no address. Asked for every replica at every pass of the agent, so remembered per spec object
 * (parsing its addresses was 7 % of a thousand hollow agents' CPU); the result is shared: read it only.
 */
export function sandboxSpec(d: Pick<ReplicaDesiredSpec, 'template' | 'address' | 'deployment' | 'replica'>): SandboxSpec | undefined {
  if (known.has(d)) return known.get(d);
  const spec = sandboxSpecOf(d);
  known.set(d, spec);
  return spec;
}

function sandboxSpecOf(d: Pick<ReplicaDesiredSpec, 'template' | 'address' | 'deployment' | 'replica'>): SandboxSpec | undefined {
  if (!onClusterNetwork(d.template) || !d.address) return undefined;
  const address = { ipv4: canonicalCidr(d.address.ipv4), ipv6: canonicalCidr(d.address.ipv6) };
  const extraHosts = [...(d.template.container?.extraHosts ?? [])];
  const hostname = d.template.container?.hostname ?? d.replica;
  const dns = { servers: resolverAddresses(address), search: [d.deployment] };
  const sysctls = Object.fromEntries(Object.entries(d.template.container?.sysctls ?? {}).filter(([k]) => isNetSysctl(k)));
  // Only when set, so a sandbox without them keeps the hash (and the name) earlier releases gave it.
  const hash = createHash('sha256')
    .update(canonicalJson({ address, extraHosts, hostname, dns, ...(Object.keys(sysctls).length ? { sysctls } : {}) }))
    .digest('hex')
    .slice(0, 16);
  return { hash, address, extraHosts, hostname, dns, sysctls };
}

/** Where the replicas of a prefix ask names: the node's resolver, at the gateways of their prefixes. */
export function resolverAddresses(address: ReplicaAddress): string[] {
  return [gatewayOf(address.ipv4), gatewayOf(address.ipv6)];
}

/** One per replica and spec on an engine; the hash keeps a sandbox being torn down apart from its successor. */
export function sandboxName(owner: Owner, replica: string, hash: string): string {
  return `jaco-${owner.clusterUid.slice(0, 8)}-${owner.node}-${replica}-sandbox-${hash.slice(0, 8)}`;
}

/** The `docker create` body of a replica's sandbox; `image` is the pause image, qualified. */
export function sandboxCreateOptions(d: ReplicaDesiredSpec, spec: SandboxSpec, owner: Owner, image: string): Docker.ContainerCreateOptions {
  return {
    name: sandboxName(owner, d.replica, spec.hash),
    Image: image,
    Hostname: spec.hostname,
    Labels: {
      ...replicaLabels(d, owner),
      [LABELS.role]: SANDBOX_ROLE,
      [LABELS.sandboxHash]: spec.hash,
      [LABELS.ipv4]: spec.address.ipv4,
      [LABELS.ipv6]: spec.address.ipv6,
    },
    // The pause process exits at once on SIGTERM.
    StopSignal: 'SIGTERM',
    StopTimeout: 2,
    HostConfig: {
      // A namespace of its own with a loopback only: the agent plumbs the rest (CNI ptp).
      NetworkMode: 'none',
      // The scheduler owns restarts; a sandbox is made again by the agent, never by Docker.
      RestartPolicy: { Name: 'no' },
      // A point-to-point veth has no neighbour to collide with: without duplicate address detection
      // the IPv6 address is usable at once, and the plugin's wait for it (a second) goes.
      // The service's own net.* sysctls beside them (jaco's win: the plumbing needs them).
      Sysctls: { ...spec.sysctls, 'net.ipv6.conf.all.disable_ipv6': '0', 'net.ipv6.conf.all.accept_dad': '0', 'net.ipv6.conf.default.accept_dad': '0' },
      ...(spec.extraHosts.length ? { ExtraHosts: spec.extraHosts } : {}),
      Dns: spec.dns.servers,
      DnsSearch: spec.dns.search,
    },
  };
}
