// `jaco get endpoints` and the routing part of `jaco describe service`: the routable replicas of
// each service, address:port per replica copy, as the scheduler wrote them to endpoints/, and how
// each node's ingress routes them (ingresses/<node>, written by `jaco ingress`). Pure: rows from
// objects.
import type { EndpointAddress, Endpoints, IngressServer, IngressStatus } from '../api/types.js';

/** Endpoints of one deployment ("shop"), one service ("shop/web"), or all. */
export function selectEndpoints(items: readonly Endpoints[], name?: string): Endpoints[] {
  const [dep, svc] = (name ?? '').split('/');
  return items
    .filter((e) => !name || (e.spec.deployment === dep && (!svc || e.spec.service === svc)))
    .sort((a, b) => (`${a.spec.deployment}/${a.spec.service}` < `${b.spec.deployment}/${b.spec.service}` ? -1 : 1));
}

/** One copy of a replica: a moved replica has two while it moves. */
const copyKey = (replica: string, node: string) => `${replica}@${node}`;

/** A server as one ingress routes it: its state, and HAProxy's check when it says more (not UP, not the state itself). */
export function routingText(s: IngressServer | undefined): string {
  if (!s) return 'absent';
  const check = s.check && !/^(UP|no check)/.test(s.check) && !s.check.startsWith(s.state.toUpperCase()) ? ` (check ${s.check})` : '';
  return `${s.state}${check}`;
}

/** How every ingress routes the copies of one service: by copy, by ingress node. */
export function routingOf(ingresses: readonly IngressStatus[], deployment: string, service: string): Map<string, Map<string, IngressServer>> {
  const out = new Map<string, Map<string, IngressServer>>();
  for (const ing of ingresses)
    for (const r of ing.spec.routes) {
      if (r.deployment !== deployment || r.service !== service) continue;
      for (const s of r.servers) {
        const k = copyKey(s.replica, s.node);
        out.set(k, (out.get(k) ?? new Map()).set(ing.spec.node, s));
      }
    }
  return out;
}

/** Whether any ingress answers a published port of the service. */
const routedBySome = (ingresses: readonly IngressStatus[], e: Endpoints) => ingresses.some((i) => i.spec.routes.some((r) => r.deployment === e.spec.deployment && r.service === e.spec.service));

/** The ROUTING cell: "ready on 2/2 ingresses", or each ingress's state where they differ. */
function routingCell(ingresses: readonly IngressStatus[], by: ReadonlyMap<string, IngressServer> | undefined): string {
  const texts = ingresses.map((i) => [i.spec.node, routingText(by?.get(i.spec.node))] as const);
  const distinct = new Set(texts.map(([, t]) => t));
  if (distinct.size === 1) return `${texts[0]![1]} on ${texts.length}/${texts.length} ingress${texts.length > 1 ? 'es' : ''}`;
  return texts.map(([n, t]) => `${n}=${t}`).join(',');
}

function endpointText(a: Pick<EndpointAddress, 'address' | 'node' | 'hostPorts' | 'ports'>): string {
  const ports = a.hostPorts ? Object.entries(a.hostPorts).map(([n, p]) => `${n}=${a.address ?? a.node}:${p}`) : a.ports.map((p) => `${a.address ?? a.node}:${p}`);
  return ports.join(',') || (a.address ?? '-');
}

/**
 * One row per routable copy: DEPLOYMENT SERVICE REPLICA NODE ENDPOINT ROUTING (address:port per
 * named port; how the reporting ingresses route it, "-" for a service no ingress answers). Copies
 * that left endpoints but are still draining on some ingress follow their service's rows.
 */
export function endpointRows(items: readonly Endpoints[], ingresses: readonly IngressStatus[] = []): string[][] {
  const rows: string[][] = [];
  const sorted = [...ingresses].sort((a, b) => (a.spec.node < b.spec.node ? -1 : 1));
  for (const e of items) {
    const routed = routedBySome(sorted, e);
    const routing = routingOf(sorted, e.spec.deployment, e.spec.service);
    if (!e.spec.addresses.length && !routing.size) rows.push([e.spec.deployment, e.spec.service, '<none>', '', '', '']);
    const listed = new Set<string>();
    for (const a of e.spec.addresses) {
      const k = copyKey(a.replica, a.node);
      listed.add(k);
      rows.push([e.spec.deployment, e.spec.service, a.replica, a.node, endpointText(a), routed ? routingCell(sorted, routing.get(k)) : '-']);
    }
    for (const [k, by] of [...routing].sort(([a], [b]) => (a < b ? -1 : 1))) {
      if (listed.has(k)) continue;
      const s = [...by.values()][0]!;
      rows.push([e.spec.deployment, e.spec.service, s.replica, s.node, `${s.address}:${s.port}`, routingCell(sorted, by)]);
    }
  }
  return rows;
}

export const ENDPOINT_HEADERS = ['DEPLOYMENT', 'SERVICE', 'REPLICA', 'NODE', 'ENDPOINTS', 'ROUTING'];

/**
 * `jaco describe service`'s routing table: every copy of the service (its replicas, and copies an
 * ingress still drains), whether it is in endpoints, and each reporting ingress's state of it.
 */
export function serviceRoutingTable(
  copies: readonly { replica: string; node: string; state: string }[],
  endpoints: Endpoints | undefined,
  ingresses: readonly IngressStatus[],
): { headers: string[]; rows: string[][] } {
  const sorted = [...ingresses].sort((a, b) => (a.spec.node < b.spec.node ? -1 : 1));
  const deployment = endpoints?.spec.deployment ?? '';
  const routing = endpoints ? routingOf(sorted, deployment, endpoints.spec.service) : new Map<string, Map<string, IngressServer>>();
  const inEndpoints = new Map((endpoints?.spec.addresses ?? []).map((a) => [copyKey(a.replica, a.node), a]));
  const all = new Map(copies.map((c) => [copyKey(c.replica, c.node), c]));
  for (const [k, by] of routing) if (!all.has(k)) all.set(k, { replica: [...by.values()][0]!.replica, node: [...by.values()][0]!.node, state: 'gone' });
  const rows = [...all]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([k, c]) => {
      const a = inEndpoints.get(k);
      const s = [...(routing.get(k)?.values() ?? [])][0];
      const endpoint = a ? endpointText(a) : s ? `${s.address}:${s.port}` : '-';
      return [c.replica, c.node, c.state, endpoint, a ? 'yes' : 'no', ...sorted.map((i) => routingText(routing.get(k)?.get(i.spec.node)))];
    });
  return { headers: ['REPLICA', 'NODE', 'STATE', 'ENDPOINT', 'IN ENDPOINTS', ...sorted.map((i) => `INGRESS ${i.spec.node}`)], rows };
}
