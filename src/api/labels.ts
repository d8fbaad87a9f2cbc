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
} as const;
