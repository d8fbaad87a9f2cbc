// endpoints/<dep>/<svc>: the copies that are ready (replicaReady) on Ready nodes, with the address
// and ports each is reached at (a host-network copy: its node's address and host ports; a
// cluster-network one: its own address and container ports) — what an ingress routes to.
// Compared in place with the stored list, so an idle pass allocates nothing here.
//
// A copy on a NotReady node serves as the last resort: it stays while the service has no ready
// copy on a Ready node. A lapsed heartbeat says the agent was not heard from, not that the
// container stopped (a stalled host, a busy store, a cut control link): taking the only copy of a
// database out of routing then turns "maybe reachable" into "certainly not". Where a copy on a
// Ready node is ready, traffic goes there only; the ingress's health checks judge the last resort.
import { keys } from '../../src/api/keys.js';
import { endpointPortsOf } from '../../src/api/ports.js';
import { bareAddress } from '../../src/api/network.js';
import { replicaReady } from '../../src/api/readiness.js';
import { API_VERSION, type EndpointAddress, type Endpoints, type ReplicaDesired, type ReplicaObserved } from '../../src/api/types.js';
import type { ReplicaEntry } from '../../src/runtime/replicas.js';
import type { SchedulerPass } from './pass.js';

export function endpoints(pass: SchedulerPass, dep: string, svc: string, kept: ReplicaEntry[]): void {
  const cur = pass.snap.endpoints.get(`${dep}/${svc}`);
  const stored = cur?.value.spec.addresses;
  let addresses: EndpointAddress[] | undefined = stored ? undefined : [];
  let n = 0;
  const serving = (c: ReplicaEntry['copies'][number]) => c.modRevision !== 0 && c.observed?.status.state === 'running' && readyMemo(c.desired, c.observed, pass.now);
  const onReadyNode = kept.some((e) => e.copies.some((c) => pass.ready(c.desired.spec.node) && serving(c)));
  for (const e of kept)
    for (const c of e.copies) {
      if ((onReadyNode && !pass.ready(c.desired.spec.node)) || !serving(c)) continue;
      const node = c.desired.spec.node;
      const { byName, ports } = hostPortsMemo(c.desired);
      // A cluster-network copy is reached at its own address, a host-network one at its node's.
      const address = c.desired.spec.address ? bareAddress(c.desired.spec.address.ipv4) : pass.snap.nodes.get(node)?.status?.address;
      if (!addresses) {
        const s = stored![n];
        if (s && s.replica === e.id && s.node === node && s.address === address && samePorts(s.ports, ports) && sameNames(s.hostPorts, byName, ports.length)) {
          n++;
          continue;
        }
        addresses = stored!.slice(0, n);
      }
      addresses.push({ replica: e.id, node, ports, ...(address ? { address } : {}), ...(ports.length ? { hostPorts: byName } : {}) });
    }
  if (!addresses && n === stored!.length) return;
  addresses ??= stored!.slice(0, n);
  pass.plan.endpoints.push({ deployment: dep, service: svc, addresses });
  const key = keys.endpoints(dep, svc);
  const value: Endpoints = { apiVersion: API_VERSION, kind: 'Endpoints', metadata: { name: `${dep}-${svc}` }, spec: { deployment: dep, service: svc, addresses } };
  pass.plan.acts.push({ label: `endpoints ${dep}/${svc}`, subject: `deployment/${dep}`, ops: [cur ? { op: 'update', key, value, modRevision: cur.modRevision } : { op: 'create', key, value }], audit: [] });
}

/**
 * replicaReady, remembered per (desired, observed) pair. Readiness of a fixed pair only ever turns
 * true as time passes (the minimum ready time running out), so once ready at `t` it is ready at
 * every later time: the memo answers exactly what replicaReady would, without re-parsing a start
 * time for every running replica on every pass (the idle pass's biggest cost). Stored objects
 * are never mutated (the cache replaces them), so identity is a safe key.
 */
const readySince = new WeakMap<ReplicaObserved, WeakMap<ReplicaDesired, number>>();
function readyMemo(d: ReplicaDesired, o: ReplicaObserved, now: number): boolean {
  const at = readySince.get(o)?.get(d);
  if (at !== undefined && now >= at) return true;
  if (!replicaReady(d, o, now)) return false;
  let m = readySince.get(o);
  if (!m) readySince.set(o, (m = new WeakMap()));
  m.set(d, Math.min(at ?? now, now));
  return true;
}

/**
 * Host ports of a stored desired key, by name and as a list, built once (stored objects are never
 * mutated: identity is a safe key), so comparing with the stored list allocates nothing.
 */
const hostPortsCache = new WeakMap<ReplicaDesired, { byName: Record<string, number>; ports: number[] }>();
function hostPortsMemo(d: ReplicaDesired): { byName: Record<string, number>; ports: number[] } {
  let p = hostPortsCache.get(d);
  if (!p) {
    const byName = endpointPortsOf(d.spec);
    hostPortsCache.set(d, (p = { byName, ports: Object.values(byName) }));
  }
  return p;
}

/** Same ports by name; `size` is how many names `b` has. */
function sameNames(a: Record<string, number> | undefined, b: Record<string, number>, size: number): boolean {
  let n = 0;
  for (const k in a) {
    if (a[k] !== b[k]) return false;
    n++;
  }
  return n === size;
}

function samePorts(a: number[], b: number[]): boolean {
  return a.length === b.length && a.every((p, i) => p === b[i]);
}
