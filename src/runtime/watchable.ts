// The prefixes a process can hold in its cache, each with the kind stored under it: one catalogue,
// so no controller restates the key layout. A controller names the ones it reads (`reads`).
import { keys } from '../api/keys.js';
import type { Heartbeat } from '../api/types.js';
import { diskUsedPercent } from '../api/eligibility.js';
import type { Change, SourceSpec } from '../store/reflector.js';

export const WATCHABLE = {
  // Service specs held frozen (shared), so their spec hashes are computed once (api/serving.ts).
  deployments: { prefix: keys.deployments(), kind: 'Deployment', share: [['spec', 'services']] },
  revisions: { prefix: keys.revisions(), kind: 'DeploymentRevision', share: [['spec', 'template', 'services']] },
  statuses: { prefix: keys.deploymentStatuses(), kind: 'DeploymentStatus' },
  rollouts: { prefix: keys.rollouts(), kind: 'RolloutPlan' },
  nodes: { prefix: keys.nodes(), kind: 'Node' },
  // What operators decided about each node (the CLI's; the agent's only to read): joined with nodes/ by the NODES index (nodes.ts).
  nodespecs: { prefix: keys.nodeSpecs(), kind: 'NodeSpec' },
  heartbeats: { prefix: keys.heartbeats(), kind: 'Heartbeat' },
  drains: { prefix: keys.drains(), kind: 'NodeDrain' },
  // Every replica of a service at one revision carries the same template: held once.
  desired: { prefix: keys.desiredOf(), kind: 'ReplicaDesired', share: [['spec', 'template']] },
  observed: { prefix: keys.observedOf(), kind: 'ReplicaObserved' },
  commands: { prefix: keys.commandsOf(), kind: 'ReplicaCommand' },
  counters: { prefix: keys.counters(), kind: 'ReplicaCounter' },
  disruptions: { prefix: keys.disruptionsAll(), kind: 'DisruptionLedger' },
  volumes: { prefix: keys.volumeHomes(), kind: 'VolumeHome' },
  endpoints: { prefix: keys.endpointsAll(), kind: 'Endpoints' },
  ingresses: { prefix: keys.ingresses(), kind: 'IngressStatus' },
  // The cluster network: its ranges, each node's subnets, who holds which address (IPAM).
  network: { prefix: keys.networkConfig(), kind: 'NetworkConfig' },
  subnets: { prefix: keys.subnets(), kind: 'NodeSubnet' },
  subnetIndexes: { prefix: keys.subnetIndexes(), kind: 'SubnetIndexClaim' },
  addresses: { prefix: keys.addresses(), kind: 'AddressClaim' },
  serviceAddresses: { prefix: keys.serviceAddresses(), kind: 'ServiceAddress' },
  // Registries' access: what a node-agent pulls with (credentials, never shown).
  registries: { prefix: keys.registries(), kind: 'Registry' },
  // Secrets and configs (docs/secrets.md): values sealed or plain, each node's sealed copies, and
  // the cluster key's public half (a single key, held as a prefix of one).
  secrets: { prefix: keys.secrets(), kind: 'Secret' },
  configs: { prefix: keys.configs(), kind: 'Config' },
  copies: { prefix: keys.copiesOf(), kind: 'NodeCopy' },
  clusterkey: { prefix: keys.clusterKey(), kind: 'ClusterKey' },
  // The clock beacon (one key): agents measure their clock's skew against it.
  clock: { prefix: keys.clock(), kind: 'ClockBeacon' },
  // The one key of the cluster's image setting: where a node-agent resolves its pause image's short name.
  imageSettings: { prefix: keys.imageSettings(), kind: 'ImageSettings' },
  // The one key of the cluster's node-eligibility settings (degraded thresholds, default scratch disk).
  nodeSettings: { prefix: keys.nodeSettings(), kind: 'NodeSettings' },
  // The audit log, newest records only: what a dashboard shows on connect, then every new one
  // (src/dashboard). Its records expire with their leases (src/store/audit.ts); the bound keeps a
  // long retention from being held whole. No controller reads it.
  audit: { prefix: keys.audits(), kind: 'AuditEvent', newest: 500 },
  // Only their keys: a decision (every node's verdict) is read by `jaco explain`, not by controllers.
  decisions: { prefix: keys.decisions(), kind: 'PlacementDecision', keysOnly: true },
} as const satisfies Record<string, SourceSpec>;

export type Watchable = keyof typeof WATCHABLE;

/**
 * Changes that are routine for a source: they touch the cache (a dashboard draws them) but decide
 * nothing a controller would not see by other means, so they wake no event-driven controller. A
 * heartbeat renewed on time with Docker's state unchanged is routine: readiness turns with the key
 * (created on claim, deleted with its lease) or with dockerUp, and a renewal after a gap longer
 * than its interval (a node coming back from stale) is not routine either. At 1,000 nodes,
 * renewals were most of an idle controller's passes (docs/scale.md).
 */
export const ROUTINE: Partial<Record<Watchable, (c: Change) => boolean>> = {
  heartbeats: (c) => {
    const [next, prev] = [c.value?.value as Heartbeat | undefined, c.prev?.value as Heartbeat | undefined];
    if (c.type !== 'put' || !next || !prev || next.spec.dockerUp !== prev.spec.dockerUp) return false;
    // Degraded is judged from the disk and overlay samples (src/api/eligibility.ts): a change a
    // whole percent of disk or of which peers have a handshake may turn a node's eligibility.
    if (diskPercent(next) !== diskPercent(prev) || overlayShape(next) !== overlayShape(prev)) return false;
    return Date.parse(next.spec.time) - Date.parse(prev.spec.time) <= 1.5 * next.spec.intervalMs;
  },
};

const diskPercent = (h: Heartbeat) => (h.spec.disk ? Math.floor(diskUsedPercent(h.spec.disk) ?? -1) : -1);
// Which peers were heard within a keepalive and a half: a peer going quiet or coming back wakes the controllers.
const overlayShape = (h: Heartbeat) => (h.spec.overlay?.peers ?? []).map((p) => `${p.node}:${p.heardAt && Date.parse(h.spec.time) - Date.parse(p.heardAt) < 40_000 ? 1 : 0}`).join(',');
