// Tables for the ingress's pure core: published ports → routes, endpoints → servers, and the diff
// against what HAProxy routes: reload only for a new frontend set; servers added, drained,
// deleted after the drain period, and readied again when they come back.
import { describe, expect, it } from 'vitest';
import { API_VERSION, type Deployment, type Endpoints, type ServiceSpec } from '../../src/api/types.js';
import { commandsOf, configKey, decide, routesOf, serviceRoutesOf, wantedServers, type HaproxyView, type IngressSnapshot, type RoutedServer } from './decide.js';
import { renderConfig } from './haproxy.js';

const T = 1_000_000;
const dep = (name: string, services: Record<string, ServiceSpec>): Deployment => ({ apiVersion: API_VERSION, kind: 'Deployment', metadata: { name }, spec: { services } });
const WEB: ServiceSpec = { image: 'x', ports: [{ name: 'http', containerPort: 80, published: 18080 }] };
const eps = (addresses: Endpoints['spec']['addresses']): Endpoints => ({ apiVersion: API_VERSION, kind: 'Endpoints', metadata: { name: 'app-web' }, spec: { deployment: 'app', service: 'web', addresses } });
const ep = (replica: string, node: string, address: string, port: number) => ({ replica, node, address, ports: [port], hostPorts: { http: port } });

function snapshot(addresses: Endpoints['spec']['addresses'], haproxy: HaproxyView, deployments = [dep('app', { web: WEB })]): IngressSnapshot {
  const { routes, conflicts } = routesOf(deployments);
  return { node: 'node-1', address: '127.0.1.1', routes, conflicts, want: wantedServers(routes, () => eps(addresses)), haproxy };
}
const running = (servers: Record<string, RoutedServer> = {}, deployments = [dep('app', { web: WEB })]): HaproxyView => ({
  configKey: configKey('127.0.1.1', routesOf(deployments).routes),
  servers: new Map([['be_app_web_http', new Map(Object.entries(servers))]]),
});
const S1 = 'app-web-0__node-1_20001';
const S2 = 'app-web-1__node-2_20002';

describe('routes', () => {
  it('one route per published port; a port claimed twice goes to the first deployment and is reported', () => {
    const r = routesOf([dep('b', { web: WEB }), dep('a', { api: { image: 'x', ports: [8080, { containerPort: 90, published: 18080 }, { containerPort: 91, published: 18081 }] } })]);
    expect(r.routes.map((x) => [x.published, `${x.deployment}/${x.service}`, x.backend])).toEqual([
      [18080, 'a/api', 'be_a_api_p90'],
      [18081, 'a/api', 'be_a_api_p91'],
    ]);
    expect(r.conflicts).toEqual([{ published: 18080, winner: 'a/api', losers: ['b/web'] }]);
  });

  it('endpoints become servers at address:host port; an address without one is skipped', () => {
    const { routes } = routesOf([dep('app', { web: WEB })]);
    const w = wantedServers(routes, () => eps([ep('app-web-0', 'node-1', '127.0.1.1', 20001), { replica: 'app-web-9', node: 'node-9', ports: [1] }]));
    expect([...w.get('be_app_web_http')!]).toEqual([[S1, { addr: '127.0.1.1', port: 20001, replica: 'app-web-0', node: 'node-1' }]]);
  });
});

describe('service routes and modes', () => {
  const API: ServiceSpec = { image: 'x', network: 'cluster', ports: [{ name: 'http', containerPort: 8080, published: 18090 }, 5432, { containerPort: 53, protocol: 'udp' }] };
  const addr = { ipv4: '10.207.0.9', ipv6: 'fd4a:17c2:9e01:ffff::9' };

  it("a service's own ports on its addresses, sharing the backend of its published port; UDP is not routed", () => {
    const deps = [dep('shop', { api: API })];
    const routes = [...routesOf(deps).routes, ...serviceRoutesOf(deps, (d, s) => (d === 'shop' && s === 'api' ? addr : undefined))];
    expect(routes.map((r) => [r.published, r.backend, r.mode, r.addresses ?? 'node'])).toEqual([
      [18090, 'be_shop_api_http', 'http', 'node'],
      [8080, 'be_shop_api_http', 'http', [addr.ipv4, addr.ipv6]],
      [5432, 'be_shop_api_p5432', 'tcp', [addr.ipv4, addr.ipv6]],
    ]);
    const p = decide({ node: 'node-1', address: '198.18.1.11', routes, conflicts: [], want: wantedServers(routes, () => undefined), haproxy: { servers: new Map() } }, T);
    // One backend per service port, however many frontends answer for it.
    expect([...p.reload!.servers.keys()]).toEqual(['be_shop_api_http', 'be_shop_api_p5432']);
    const cfg = renderConfig({ socket: '/s', address: '198.18.1.11', routes, servers: p.reload!.servers });
    expect(cfg).toContain('frontend fe_18090\n  mode http\n  bind 198.18.1.11:18090\n  option idle-close-on-response\n');
    expect(cfg).toContain('frontend fe_svc_shop_api_p5432\n  mode tcp\n  bind 10.207.0.9:5432 transparent\n  bind ipv6@fd4a:17c2:9e01:ffff::9:5432 transparent\n  default_backend be_shop_api_p5432\n');
    expect(cfg.match(/^backend be_shop_api_http$/gm)).toHaveLength(1);
    expect(cfg).toContain('backend be_shop_api_p5432\n  mode tcp\n  balance roundrobin\n');
    expect(cfg).toContain('backend be_shop_api_http\n  mode http\n  balance roundrobin\n');
  });

  it('a published port speaks TCP unless it is named http or says appProtocol http', () => {
    const r = routesOf([dep('db', { pg: { image: 'x', ports: [{ containerPort: 5432, published: 15432 }, { name: 'web', containerPort: 80, published: 18081, appProtocol: 'http' }] } })]).routes;
    expect(r.map((x) => [x.published, x.mode])).toEqual([
      [15432, 'tcp'],
      [18081, 'http'],
    ]);
  });

  it('a new service address changes the frontend set (a reload)', () => {
    const deps = [dep('shop', { api: API })];
    const before = routesOf(deps).routes;
    const after = [...before, ...serviceRoutesOf(deps, () => addr)];
    expect(configKey('a', before)).not.toBe(configKey('a', after));
  });
});

describe('decide', () => {
  it('nothing until the node has an address', () => {
    const p = decide({ ...snapshot([], { servers: new Map() }), address: undefined }, T);
    expect(p.reload).toBeUndefined();
    expect(p.notes).toContainEqual({ waiting: 'nodes/node-1 has no address yet (is its agent running?)' });
  });

  it('a new frontend set: one reload carrying the servers of the moment (a backend is never empty after a reload)', () => {
    const p = decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001)], { servers: new Map() }), T);
    expect(p.ops).toEqual([]);
    expect(p.reload!.routes.map((r) => r.published)).toEqual([18080]);
    expect(p.reload!.address).toBe('127.0.1.1');
    expect([...p.reload!.servers.get('be_app_web_http')!.keys()]).toEqual([S1]);
    const cfg = renderConfig({ socket: '/s', address: '127.0.1.1', routes: p.reload!.routes, servers: p.reload!.servers });
    expect(cfg).toContain('bind 127.0.1.1:18080');
    expect(cfg).toContain(`server ${S1} 127.0.1.1:20001 check`);
    // Carried out: the next pass with the same picture does nothing.
    const again = decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001)], p.next), T + 1);
    expect(again.ops).toEqual([]);
    expect(again.reload).toBeUndefined();
  });

  it('endpoint changes go through the runtime API: add, drain, then delete after the drain period', () => {
    const r = (state: 'ready' | 'drain', since = T) => ({ addr: '127.0.1.1', port: 20001, replica: 'app-web-0', node: 'node-1', state, since });
    const add = decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001), ep('app-web-1', 'node-2', '127.0.1.2', 20002)], running({ [S1]: r('ready') })), T);
    expect(add.reload).toBeUndefined();
    expect(add.ops).toEqual([{ op: 'add', backend: 'be_app_web_http', server: S2, addr: '127.0.1.2', port: 20002 }]);

    const drain = decide(snapshot([], running({ [S1]: r('ready') })), T);
    expect(drain.ops).toEqual([{ op: 'drain', backend: 'be_app_web_http', server: S1 }]);
    expect(drain.wakeAt).toBe(T + 2000);
    expect(decide(snapshot([], drain.next), T + 1999)).toMatchObject({ ops: [], wakeAt: T + 2000 });
    expect(decide(snapshot([], drain.next), T + 2000).ops).toEqual([{ op: 'remove', backend: 'be_app_web_http', server: S1 }]);

    // Back before it was deleted: ready again, not re-added.
    expect(decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001)], drain.next), T + 500).ops).toEqual([{ op: 'ready', backend: 'be_app_web_http', server: S1 }]);
  });

  it('a drained server with connections still on it is deleted when they end: asked again every 500 ms, cut only past the drain limit', () => {
    const held = (heldAt: number) => running({ [S1]: { addr: '127.0.1.1', port: 20001, replica: 'app-web-0', node: 'node-1', state: 'drain' as const, since: T, heldAt } });
    // HAProxy refused the deletion at T + 2000 (a slow request under way): the next try is 500 ms on.
    expect(decide(snapshot([], held(T + 2000)), T + 2100)).toMatchObject({ ops: [], wakeAt: T + 2500 });
    expect(decide(snapshot([], held(T + 2000)), T + 2500).ops).toEqual([{ op: 'remove', backend: 'be_app_web_http', server: S1 }]);
    // Past the drain limit (60 s by default) the connections are cut with it.
    expect(decide(snapshot([], held(T + 59_900)), T + 60_000).ops).toEqual([{ op: 'remove', backend: 'be_app_web_http', server: S1, cut: true }]);
    expect(decide(snapshot([], held(T + 59_900)), T + 59_999)).toMatchObject({ ops: [], wakeAt: T + 60_000 });
    // Back in endpoints while held (in maintenance): ready again.
    const back = decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001)], held(T + 2000)), T + 2100);
    expect(back.ops).toEqual([{ op: 'ready', backend: 'be_app_web_http', server: S1 }]);
    expect(back.next.servers.get('be_app_web_http')!.get(S1)).toEqual({ addr: '127.0.1.1', port: 20001, replica: 'app-web-0', node: 'node-1', state: 'ready', since: T + 2100 });
  });

  it('a replica moved to another port or node is a new server: the new one is added before the old one drains, whichever name sorts first', () => {
    const at = (node: string, port: number) => ({ addr: `127.0.1.${node.slice(-1)}`, port, replica: 'app-web-0', node, state: 'ready' as const, since: T });
    // The old copy's name sorts first (node-1 < node-2): still added, then drained — never a moment without a server.
    const p = decide(snapshot([ep('app-web-0', 'node-2', '127.0.1.2', 20009)], running({ [S1]: at('node-1', 20001) })), T);
    expect(p.ops.map((o) => `${o.op} ${o.server}`)).toEqual(['add app-web-0__node-2_20009', `drain ${S1}`]);
    const q = decide(snapshot([ep('app-web-0', 'node-1', '127.0.1.1', 20001)], running({ 'app-web-0__node-3_20003': at('node-3', 20003) })), T);
    expect(q.ops.map((o) => `${o.op} ${o.server}`)).toEqual([`add ${S1}`, 'drain app-web-0__node-3_20003']);
    // A drained server past its period goes after everything else.
    const r = decide(snapshot([ep('app-web-0', 'node-2', '127.0.1.2', 20009)], running({ [S1]: { ...at('node-1', 20001), state: 'drain', since: T - 5000 } })), T);
    expect(r.ops.map((o) => `${o.op} ${o.server}`)).toEqual(['add app-web-0__node-2_20009', `remove ${S1}`]);
  });

  it('a service newly published reloads; an unknown HAProxy state (after a failure) reloads', () => {
    const two = [dep('app', { web: WEB, api: { image: 'x', ports: [{ containerPort: 9, published: 18090 }] } })];
    expect(decide(snapshot([], running(), two), T).reload).toBeDefined();
    expect(decide(snapshot([], { servers: new Map() }), T).reload).toBeDefined();
  });

  it('runtime API commands: a dynamic server starts in maintenance with checks off; removal goes through maintenance', () => {
    expect(commandsOf({ op: 'add', backend: 'b', server: 's', addr: '127.0.1.2', port: 2 }, 'check')).toEqual(['add server b/s 127.0.1.2:2 check', 'enable health b/s', 'set server b/s health up', 'set server b/s state ready']);
    // Connections still on it keep it (HAProxy refuses the deletion); only past the drain limit are they cut.
    expect(commandsOf({ op: 'remove', backend: 'b', server: 's' }, 'check')).toEqual(['set server b/s state maint', 'del server b/s']);
    expect(commandsOf({ op: 'remove', backend: 'b', server: 's', cut: true }, 'check')).toEqual(['set server b/s state maint', 'shutdown sessions server b/s', 'del server b/s']);
  });
});
