// `jaco get endpoints`: the routable replicas of each service, address:port per replica copy, as
// the scheduler wrote them to endpoints/ (what every ingress routes to). Pure: rows from objects.
import type { Endpoints } from '../api/types.js';

/** Endpoints of one deployment ("shop"), one service ("shop/web"), or all. */
export function selectEndpoints(items: readonly Endpoints[], name?: string): Endpoints[] {
  const [dep, svc] = (name ?? '').split('/');
  return items
    .filter((e) => !name || (e.spec.deployment === dep && (!svc || e.spec.service === svc)))
    .sort((a, b) => (`${a.spec.deployment}/${a.spec.service}` < `${b.spec.deployment}/${b.spec.service}` ? -1 : 1));
}

/** One row per routable copy: DEPLOYMENT SERVICE REPLICA NODE ENDPOINT (address:port per named port). */
export function endpointRows(items: readonly Endpoints[]): string[][] {
  const rows: string[][] = [];
  for (const e of items) {
    if (!e.spec.addresses.length) rows.push([e.spec.deployment, e.spec.service, '<none>', '', '']);
    for (const a of e.spec.addresses) {
      const ports = a.hostPorts ? Object.entries(a.hostPorts).map(([n, p]) => `${n}=${a.address ?? a.node}:${p}`) : a.ports.map((p) => `${a.address ?? a.node}:${p}`);
      rows.push([e.spec.deployment, e.spec.service, a.replica, a.node, ports.join(',') || (a.address ?? '-')]);
    }
  }
  return rows;
}

export const ENDPOINT_HEADERS = ['DEPLOYMENT', 'SERVICE', 'REPLICA', 'NODE', 'ENDPOINTS'];
