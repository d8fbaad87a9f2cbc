// The key layout under the store prefix (docs/store.md, "Keys"). Every key jaco reads or
// writes is built here, so the layout is stated once; keys are relative to the prefix.

export const keys = {
  cluster: () => 'cluster',
  deployment: (name: string) => `deployments/${name}`,
  deployments: () => 'deployments/',
  revision: (name: string, n: number) => `revisions/${name}/${String(n).padStart(10, '0')}`,
  revisions: (name?: string) => (name ? `revisions/${name}/` : 'revisions/'),
  deploymentStatus: (name: string) => `deploymentstatus/${name}`,
  deploymentStatuses: () => 'deploymentstatus/',
  node: (host: string) => `nodes/${host}`,
  nodes: () => 'nodes/',
  /** What operators decided about a node (cordon, runtime labels, trust): the CLI writes it, the node's agent only reads it. */
  nodeSpec: (host: string) => `nodespecs/${host}`,
  nodeSpecs: () => 'nodespecs/',
  heartbeat: (host: string) => `heartbeats/${host}`,
  heartbeats: () => 'heartbeats/',
  desired: (host: string, replica: string) => `desired/${host}/${replica}`,
  desiredOf: (host?: string) => (host ? `desired/${host}/` : 'desired/'),
  observed: (host: string, replica: string) => `observed/${host}/${replica}`,
  observedOf: (host?: string) => (host ? `observed/${host}/` : 'observed/'),
  command: (host: string, replica: string) => `commands/${host}/${replica}`,
  commandsOf: (host?: string) => (host ? `commands/${host}/` : 'commands/'),
  rollout: (deployment: string, service: string) => `rollouts/${deployment}/${service}`,
  rollouts: (deployment?: string) => (deployment ? `rollouts/${deployment}/` : 'rollouts/'),
  drain: (host: string) => `drains/${host}`,
  drains: () => 'drains/',
  counter: (deployment: string, service: string) => `counters/${deployment}/${service}`,
  counters: () => 'counters/',
  disruptions: (deployment: string, service: string) => `disruptions/${deployment}/${service}`,
  disruptionsAll: () => 'disruptions/',
  volumeHome: (deployment: string, volume: string) => `volumes/${deployment}/${volume}`,
  volumeHomes: () => 'volumes/',
  endpoints: (deployment: string, service: string) => `endpoints/${deployment}/${service}`,
  endpointsAll: () => 'endpoints/',
  // Secrets and configs (docs/secrets.md): the objects, each node's copies, the cluster key's public half.
  secret: (name: string) => `secrets/${name}`,
  secrets: () => 'secrets/',
  config: (name: string) => `configs/${name}`,
  configs: () => 'configs/',
  copy: (node: string, kind: 'secret' | 'config', name: string) => `copies/${node}/${kind}/${name}`,
  copiesOf: (node?: string) => (node ? `copies/${node}/` : 'copies/'),
  clusterKey: () => 'clusterkey',
  /** The controllers' time, written every interval (clock controller): agents measure their skew against it. */
  clock: () => 'clock',
  ingress: (node: string) => `ingresses/${node}`,
  ingresses: () => 'ingresses/',
  decision: (deployment: string, replica: string) => `decisions/${deployment}/${replica}`,
  decisions: (deployment?: string) => (deployment ? `decisions/${deployment}/` : 'decisions/'),
  /** A registry's access (credentials, CA, insecure), by host[:port]: CLI writes, agents read. */
  registry: (host: string) => `registries/${host}`,
  registries: () => 'registries/',
  /** The cluster's image setting: default registry, whether short names may go to Docker Hub. */
  imageSettings: () => 'config/images',
  /** The cluster's node-eligibility settings (src/api/eligibility.ts). */
  nodeSettings: () => 'config/nodes',
  /** The cluster network's ranges (src/api/network.ts). */
  networkConfig: () => 'config/network',
  subnet: (node: string) => `subnets/${node}`,
  subnets: () => 'subnets/',
  subnetIndex: (n: number) => `subnetindex/${n}`,
  subnetIndexes: () => 'subnetindex/',
  /** A replica copy's claim of host number n of its node's subnets (IPv4 and IPv6 alike). */
  address: (node: string, n: number) => `addresses/${node}/${n}`,
  addresses: (node?: string) => (node ? `addresses/${node}/` : 'addresses/'),
  /** A service's address, answered on every node (and the claim of its number, so no two services share one). */
  serviceAddress: (deployment: string, service: string) => `serviceaddresses/${deployment}/${service}`,
  serviceAddresses: () => 'serviceaddresses/',
  serviceAddressNumber: (n: number) => `serviceaddressnumbers/${n}`,
  serviceAddressNumbers: () => 'serviceaddressnumbers/',
  /**
   * Written by every apply that starts to publish or bind a port (src/app/apply-guards.ts), so two
   * concurrent applies taking one port cannot both land; the value only says who took it last.
   */
  portGuard: (port: number) => `guards/ports/${port}`,
  portGuards: () => 'guards/ports/',
  audit: (id: string) => `audit/${id}`,
  audits: () => 'audit/',
  leaders: (controller: string) => `leaders/${controller}/`,
} as const;


/** Replica ids: <deployment>-<service>-<index>, or <deployment>-<service>-<host> for global. */
export function replicaId(deployment: string, service: string, indexOrHost: number | string): string {
  return `${deployment}-${service}-${indexOrHost}`;
}
