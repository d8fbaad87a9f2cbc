// The scheduler's part of IPAM (controllers/placement/ipam.ts): it gives every node its subnets of
// the cluster network once a cluster-network service exists, and releases what no copy holds any
// more — an address once no desired copy carries it and no container of it may still run, a
// node's subnets once the node is gone and holds none. Addresses themselves are given with each
// placement (SchedulerPass.addressOps), in the placement's own act.
import { nodeRemoved } from '../../src/api/nodes.js';
import { keys } from '../../src/api/keys.js';
import type { Op } from '../../src/store/writer.js';
import { releasableClaims, releasableSubnets, serviceAddressFor, subnetsToGive } from '../placement/ipam.js';
import type { SchedulerPass } from './pass.js';

/** Whether any service of any deployment runs on the cluster network. */
function clusterNetworkInUse(pass: SchedulerPass): boolean {
  for (const d of pass.snap.deployments.values()) for (const s of Object.values(d.value.spec.services)) if (s.network === 'cluster') return true;
  return pass.snap.network.claims.size > 0;
}

/** Subnets for the registered nodes that have none (first pass with a cluster-network service, then each new node). */
export function grantSubnets(pass: SchedulerPass): void {
  const { snap } = pass;
  if (!snap.network.config || !clusterNetworkInUse(pass)) return;
  for (const g of subnetsToGive(snap.nodes.keys(), snap.network, pass.now)) {
    pass.grant(g.node, g.subnet);
    pass.plan.acts.push({ label: `subnet ${g.node}`, subject: `node/${g.node}`, ops: g.ops, audit: [] });
  }
}

/**
 * Every service's address, answered on every node (docs/networking.md): given once the cluster
 * network exists, to host-network services too (their name reaches their node ports), and kept
 * for the service's life. Its other names (the spec's aliases) follow the spec; the address stays.
 * Called per service in the pass; numbers given this pass are remembered.
 */
export function giveServiceAddress(pass: SchedulerPass, dep: string, svc: string): void {
  const { network } = pass.snap;
  if (!network.config || !network.services) return;
  const aliases = pass.snap.deployments.get(dep)?.value.spec.services[svc]?.aliases ?? [];
  const have = network.services.get(`${dep}/${svc}`);
  if (have) {
    if (sameNames(have.value.spec.aliases ?? [], aliases)) return;
    const { aliases: _old, ...spec } = have.value.spec;
    const value = { ...have.value, spec: { ...spec, ...(aliases.length ? { aliases: [...aliases] } : {}) } };
    pass.plan.acts.push({ label: `service aliases ${dep}/${svc}`, subject: `deployment/${dep}`, ops: [pass.deploymentGuard(dep), { op: 'update', key: have.key, modRevision: have.modRevision, value }], audit: [] });
    return;
  }
  pass.serviceNumbers ??= new Set([...network.services.values()].map((s) => s.value.spec.number));
  const given = serviceAddressFor(network.config, dep, svc, pass.serviceNumbers, pass.now, aliases);
  if (!given) return;
  pass.plan.acts.push({ label: `service address ${dep}/${svc}`, subject: `deployment/${dep}`, ops: [pass.deploymentGuard(dep), ...given.ops], audit: [] });
}

const sameNames = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Claims and subnets nothing holds any more: deleted (compare-and-swap on what was read). */
export function releaseAddresses(pass: SchedulerPass): void {
  const { snap } = pass;
  // A service's address goes with its service (its deployment guard refuses a re-create meanwhile).
  for (const s of snap.network.services?.values() ?? []) {
    const { deployment: dep, service: svc, number } = s.value.spec;
    if (snap.frozenDeployments.has(dep) || snap.deployments.get(dep)?.value.spec.services[svc]) continue;
    pass.plan.cleanup.push({ key: s.key, why: `service ${dep}/${svc} no longer exists` });
    pass.plan.acts.push({ label: `release ${s.key}`, ops: [pass.deploymentGuard(dep), pass.deleteOp(s), { op: 'delete', key: keys.serviceAddressNumber(number) }], audit: [] });
  }
  if (!snap.network.claims.size && !snap.network.subnets.size) return;
  // Only a recorded removal frees a node's subnet and addresses: a key the store lost is a node
  // whose containers still hold them (api/nodes.ts nodeRemoved).
  const nodeExists = (n: string) => !nodeRemoved(snap.nodes.has(n) || snap.frozenNodes.has(n), snap.drains.get(n));
  const claims = releasableClaims(snap.network, {
    nodeExists,
    carried: (node, ipv4) => snap.replicas.carriesAddress(node, ipv4),
    observed: (node, replica) => snap.replicas.observed(node, replica),
  });
  for (const c of claims) {
    if (pass.deleted.has(c.key)) continue;
    pass.plan.cleanup.push({ key: c.key, why: `no copy of ${c.value.spec.replica} holds ${c.value.spec.ipv4} on ${c.value.spec.node} any more` });
    pass.plan.acts.push({ label: `release ${c.key}`, ops: [pass.deleteOp(c)], audit: [] });
  }
  const releasing = new Set(claims.map((c) => c.key));
  for (const s of releasableSubnets(snap.network, nodeExists, releasing)) {
    const ops: Op[] = [{ op: 'check', key: keys.node(s.value.spec.node), modRevision: 0 }, pass.deleteOp(s), { op: 'delete', key: keys.subnetIndex(s.value.spec.index) }];
    pass.plan.cleanup.push({ key: s.key, why: `node ${s.value.spec.node} is gone` });
    pass.plan.acts.push({ label: `release ${s.key}`, ops, audit: [] });
  }
}
