// The ingress's pure core: published ports of every deployment and the endpoints of their
// services → what HAProxy on this node should route, as a diff against what it routes now. The
// frontend set (a port, a service) changes by a reload with the skeleton config; servers change
// through the runtime API only: added when a replica is in endpoints, drained when it leaves,
// then (after the drain period) put in maintenance and deleted once its connections have ended —
// cut only past the drain limit. No I/O, clock as `now`.
import { normalizePorts, portMode, publishedPorts } from '../../src/api/ports.js';
import type { Deployment, Endpoints } from '../../src/api/types.js';
import { backendName, serverName, type Route, type ServerAddr } from './haproxy.js';

export interface WantedServer extends ServerAddr {
  replica: string;
  node: string;
}

export type ServerState = 'ready' | 'drain';

export interface RoutedServer extends ServerAddr {
  replica: string;
  node: string;
  state: ServerState;
  /** When it entered its state. */
  since: number;
  /** A drained server HAProxy would not delete yet (connections still on it): when it said so. */
  heldAt?: number;
}

/** What HAProxy routes, as the ingress made it (the shell's record of what landed). */
export interface HaproxyView {
  /** The address and routes of the running config; undefined: not running, or unknown after a failure (reload). */
  configKey?: string;
  /** The address and frontends of that config (with configKey). */
  address?: string;
  routes?: readonly Route[];
  servers: ReadonlyMap<string, ReadonlyMap<string, RoutedServer>>;
}

export interface IngressSnapshot {
  node: string;
  /** This node's address (Node.status.address); nothing is routed until the agent registered it. */
  address?: string;
  routes: Route[];
  /** Published ports claimed by more than one service: the first (by deployment, service) wins. */
  conflicts: { published: number; winner: string; losers: string[] }[];
  /** By backend: the servers endpoints say should take traffic. */
  want: ReadonlyMap<string, ReadonlyMap<string, WantedServer>>;
  haproxy: HaproxyView;
}

export type RuntimeOp =
  | { op: 'add'; backend: string; server: string; addr: string; port: number }
  | { op: 'ready'; backend: string; server: string }
  | { op: 'drain'; backend: string; server: string }
  /** `cut`: past the drain limit, the connections still on it are shut down first. */
  | { op: 'remove'; backend: string; server: string; cut?: boolean };

export interface IngressPlan {
  /** A new skeleton config: the frontend set or the address changed, or HAProxy's state is unknown. */
  reload?: { key: string; address: string; routes: Route[]; servers: Map<string, Map<string, ServerAddr>> };
  ops: RuntimeOp[];
  /** HAProxy once the plan has been carried out. */
  next: HaproxyView;
  wakeAt?: number;
  notes: object[];
}

export interface IngressConfig {
  /** How long a server leaving routing drains (no new requests) before it is deleted. */
  drainMs: number;
  /**
   * How long a drained server's connections may outlive the drain period: its deletion waits for
   * them to end (a slow request finishes), and past this they are shut down.
   */
  drainLimitMs: number;
}

export const DEFAULT_INGRESS_CONFIG: IngressConfig = { drainMs: 2000, drainLimitMs: 60_000 };

/** How soon a deletion HAProxy refused (connections still on the server) is tried again. */
export const HELD_RETRY_MS = 500;

/**
 * Every published port of every deployment, in (deployment, service, port) order; a port claimed
 * twice goes to the first. apply refuses such a clash (api/rules.ts), so a conflict here is left
 * from before that check or written around it: routed one way on every node, and reported.
 */
export function routesOf(deployments: Iterable<Deployment>): Pick<IngressSnapshot, 'routes' | 'conflicts'> {
  const byPort = new Map<number, Route>();
  const conflicts = new Map<number, { published: number; winner: string; losers: string[] }>();
  for (const p of publishedPorts([...deployments].map((d) => ({ name: d.metadata.name, spec: d.spec })))) {
    const have = byPort.get(p.published);
    if (have) {
      const c = conflicts.get(p.published) ?? { published: p.published, winner: `${have.deployment}/${have.service}`, losers: [] };
      c.losers.push(`${p.deployment}/${p.service}`);
      conflicts.set(p.published, c);
      continue;
    }
    byPort.set(p.published, { ...p, backend: backendName(p.deployment, p.service, p.portName), mode: p.mode });
  }
  return { routes: [...byPort.values()].sort((a, b) => a.published - b.published), conflicts: [...conflicts.values()] };
}

/**
 * Every service's own ports, answered on its service addresses (serviceaddresses/) on every node:
 * what a container reaches by the service's name (docs/networking.md). A service without an
 * address (no cluster network) or without TCP ports has none.
 */
export function serviceRoutesOf(deployments: Iterable<Deployment>, addressOf: (deployment: string, service: string) => { ipv4: string; ipv6: string } | undefined): Route[] {
  const out: Route[] = [];
  for (const d of [...deployments].sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : 1)))
    for (const service of Object.keys(d.spec.services).sort()) {
      const a = addressOf(d.metadata.name, service);
      if (!a) continue;
      for (const p of normalizePorts(d.spec.services[service]!)) {
        if (p.protocol !== 'tcp') continue;
        out.push({ published: p.containerPort, deployment: d.metadata.name, service, portName: p.name, backend: backendName(d.metadata.name, service, p.name), addresses: [a.ipv4, a.ipv6], mode: portMode(p) });
      }
    }
  return out;
}

/** Each backend once (a published port and the service's own port share theirs), in route order. */
export function backendsOf(routes: readonly Route[]): string[] {
  return [...new Set(routes.map((r) => r.backend))];
}

/** The servers of each route's backend: every endpoint address with an address and a host port of the route's port. */
export function wantedServers(routes: readonly Route[], endpoints: (deployment: string, service: string) => Endpoints | undefined): Map<string, Map<string, WantedServer>> {
  const out = new Map<string, Map<string, WantedServer>>();
  for (const r of routes) {
    if (out.has(r.backend)) continue;
    const m = new Map<string, WantedServer>();
    for (const a of endpoints(r.deployment, r.service)?.spec.addresses ?? []) {
      const port = a.hostPorts?.[r.portName];
      if (!a.address || port === undefined) continue;
      m.set(serverName(a.replica, a.node, port), { addr: a.address, port, replica: a.replica, node: a.node });
    }
    out.set(r.backend, m);
  }
  return out;
}

export function configKey(address: string, routes: readonly Route[]): string {
  return JSON.stringify([address, routes.map((r) => [r.published, r.backend, r.mode, ...(r.addresses ?? [])])]);
}

export function decide(s: IngressSnapshot, now: number, cfg: IngressConfig = DEFAULT_INGRESS_CONFIG): IngressPlan {
  const notes: object[] = s.conflicts.map((c) => ({ conflict: c.published, routedTo: c.winner, ignored: c.losers }));
  if (!s.address) return { ops: [], next: s.haproxy, notes: [...notes, { waiting: `nodes/${s.node} has no address yet (is its agent running?)` }] };
  const key = configKey(s.address, s.routes);

  // 1. A new frontend set (or HAProxy to start): one reload with the servers of this moment.
  if (s.haproxy.configKey !== key) {
    const servers = new Map<string, Map<string, ServerAddr>>();
    const next = new Map<string, Map<string, RoutedServer>>();
    for (const b of backendsOf(s.routes)) {
      const w = s.want.get(b) ?? new Map<string, WantedServer>();
      servers.set(b, new Map([...w].map(([n, x]) => [n, { addr: x.addr, port: x.port }])));
      next.set(b, new Map([...w].map(([n, x]) => [n, { ...x, state: 'ready' as const, since: now }])));
    }
    return { reload: { key, address: s.address, routes: s.routes, servers }, ops: [], next: { configKey: key, address: s.address, routes: s.routes, servers: next }, notes };
  }

  // 2. The same frontends: servers in, drained, out — by the runtime API: every server in before any
  // goes (below), each kind in backend and name order.
  const ops: RuntimeOp[] = [];
  const next = new Map<string, Map<string, RoutedServer>>();
  let wakeAt: number | undefined;
  for (const b of backendsOf(s.routes)) {
    const cur = s.haproxy.servers.get(b) ?? new Map<string, RoutedServer>();
    const want = s.want.get(b) ?? new Map<string, WantedServer>();
    const out = new Map<string, RoutedServer>();
    for (const name of [...new Set([...cur.keys(), ...want.keys()])].sort()) {
      const c = cur.get(name);
      const w = want.get(name);
      if (w && !c) {
        ops.push({ op: 'add', backend: b, server: name, addr: w.addr, port: w.port });
        out.set(name, { ...w, state: 'ready', since: now });
      } else if (w && c!.state === 'drain') {
        // Back in endpoints before it was deleted (a health blip that healed): route to it again.
        ops.push({ op: 'ready', backend: b, server: name });
        const { heldAt: _held, ...routed } = c!;
        out.set(name, { ...routed, state: 'ready', since: now });
      } else if (w) {
        out.set(name, c!);
      } else if (c!.state === 'ready') {
        // Left endpoints: no new requests from now on, the ones under way finish.
        ops.push({ op: 'drain', backend: b, server: name });
        out.set(name, { ...c!, state: 'drain', since: now });
        wakeAt = Math.min(wakeAt ?? Infinity, now + cfg.drainMs);
      } else {
        // Drained: deleted after the drain period once no connection is left on it (HAProxy refuses
        // the deletion before: the shell keeps it, marked held), with its connections cut past the limit.
        const cut = now >= c!.since + cfg.drainLimitMs;
        const due = cut ? now : Math.max(c!.since + cfg.drainMs, (c!.heldAt ?? -Infinity) + HELD_RETRY_MS);
        if (now >= due) ops.push({ op: 'remove', backend: b, server: name, ...(cut ? { cut } : {}) });
        else {
          out.set(name, c!);
          wakeAt = Math.min(wakeAt ?? Infinity, due, c!.since + cfg.drainLimitMs);
        }
      }
    }
    next.set(b, out);
  }
  // Make before break here too: a moved replica's new copy and its old one are two servers of one
  // backend, often changed in one pass (the cutover writes both at once). Carried out in name order,
  // an old copy whose name sorts first (`web-0__node-1_…` before `web-0__node-3_…`) was drained
  // before its successor was added — a moment with no server, 503s for a single-replica service.
  const phase = (o: RuntimeOp) => (o.op === 'add' || o.op === 'ready' ? 0 : o.op === 'drain' ? 1 : 2);
  ops.sort((a, b) => phase(a) - phase(b));
  return { ops, next: { configKey: key, address: s.address, routes: s.routes, servers: next }, ...(wakeAt !== undefined ? { wakeAt } : {}), notes };
}

/** The runtime API commands of one op, in order. */
export function commandsOf(o: RuntimeOp, check: string): string[] {
  const id = `${o.backend}/${o.server}`;
  switch (o.op) {
    case 'add':
      // A dynamic server starts in maintenance with its checks off, and once they are on its check
      // state is DOWN until the first check passes (up to one `inter`): a replica is routed only
      // once its agent saw it ready, so its health starts up and HAProxy's checks (fall 2) may still
      // take it down. Otherwise a single-replica move's old copy could drain before the new one's
      // first check, leaving the backend without a server for a moment (503s; found by the
      // ingress e2e once the agent's early health check made replicas ready sooner).
      return [`add server ${id} ${o.addr}:${o.port} ${check}`, `enable health ${id}`, `set server ${id} health up`, `set server ${id} state ready`];
    case 'ready':
      return [`set server ${id} state ready`];
    case 'drain':
      return [`set server ${id} state drain`];
    case 'remove':
      return [`set server ${id} state maint`, ...(o.cut ? [`shutdown sessions server ${id}`] : []), `del server ${id}`];
  }
}
