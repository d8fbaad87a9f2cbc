// Docker labels on every container jaco runs. An agent only ever touches containers labelled with
// its cluster and node, so several agents (simulated nodes, test clusters) share one engine.
export const LABELS = {
  cluster: 'jaco.dev/cluster',
  node: 'jaco.dev/node',
  deployment: 'jaco.dev/deployment',
  service: 'jaco.dev/service',
  replica: 'jaco.dev/replica',
  specHash: 'jaco.dev/spec-hash',
  revision: 'jaco.dev/revision',
  /** `sandbox` on the container holding a cluster-network replica's network namespace (absent: the replica's own container). */
  role: 'jaco.dev/role',
  /** On a sandbox: the hash of what it was made with (addresses, hosts entries); another means another sandbox. */
  sandboxHash: 'jaco.dev/sandbox-hash',
  /** On a sandbox: the addresses it holds (CIDR). */
  ipv4: 'jaco.dev/ipv4',
  ipv6: 'jaco.dev/ipv6',
} as const;
