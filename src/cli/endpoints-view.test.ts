import { describe, expect, it } from 'vitest';
import type { Endpoints, IngressServer, IngressStatus } from '../api/types.js';
import { endpointRows, routingText, selectEndpoints, serviceRoutingTable } from './endpoints-view.js';

const ep = (deployment: string, service: string, addresses: Endpoints['spec']['addresses']): Endpoints => ({ apiVersion: 'jaco.dev/v1', kind: 'Endpoints', metadata: { name: `${deployment}-${service}` }, spec: { deployment, service, addresses } });
const ITEMS = [
  ep('shop', 'web', [{ replica: 'shop-web-0', node: 'node-1', address: '127.0.1.1', ports: [20433], hostPorts: { http: 20433 } }]),
  ep('shop', 'api', [{ replica: 'shop-api-0', node: 'node-2', ports: [8080] }]),
  ep('blog', 'web', []),
];

describe('jaco get endpoints', () => {
  it.each([
    [undefined, ['blog/web', 'shop/api', 'shop/web']],
    ['shop', ['shop/api', 'shop/web']],
    ['shop/web', ['shop/web']],
    ['nope', []],
  ])('selects %s', (name, want) => expect(selectEndpoints(ITEMS, name).map((e) => `${e.spec.deployment}/${e.spec.service}`)).toEqual(want));

  it('one row per copy: address:port by port name; a short-form port at its node; a service with none', () => {
    expect(endpointRows(selectEndpoints(ITEMS))).toEqual([
      ['blog', 'web', '<none>', '', '', ''],
      ['shop', 'api', 'shop-api-0', 'node-2', 'node-2:8080', '-'],
      ['shop', 'web', 'shop-web-0', 'node-1', 'http=127.0.1.1:20433', '-'],
    ]);
  });

  const server = (replica: string, node: string, port: number, state: 'ready' | 'drain', check = 'UP'): IngressServer => ({ replica, node, address: `127.0.1.${node.slice(-1)}`, port, state, check });
  const ingress = (node: string, servers: IngressServer[]): IngressStatus => ({
    apiVersion: 'jaco.dev/v1',
    kind: 'IngressStatus',
    metadata: { name: node },
    spec: { node, time: '2026-11-25T00:00:00Z', haproxy: 'running', routes: [{ published: 18080, deployment: 'shop', service: 'web', servers }] },
  });

  it("routing per copy: the same everywhere in one word, else each ingress's state; a draining copy still shown", () => {
    const web = ep('shop', 'web', [
      { replica: 'shop-web-0', node: 'node-1', address: '127.0.1.1', ports: [20433], hostPorts: { http: 20433 } },
      { replica: 'shop-web-1', node: 'node-2', address: '127.0.1.2', ports: [20500], hostPorts: { http: 20500 } },
    ]);
    const ingresses = [
      ingress('node-2', [server('shop-web-0', 'node-1', 20433, 'ready'), server('shop-web-1', 'node-2', 20500, 'ready', 'DOWN'), server('shop-web-2', 'node-3', 20111, 'drain')]),
      ingress('node-1', [server('shop-web-0', 'node-1', 20433, 'ready'), server('shop-web-1', 'node-2', 20500, 'ready'), server('shop-web-2', 'node-3', 20111, 'drain')]),
    ];
    expect(endpointRows([web, ITEMS[1]!], ingresses)).toEqual([
      ['shop', 'web', 'shop-web-0', 'node-1', 'http=127.0.1.1:20433', 'ready on 2/2 ingresses'],
      ['shop', 'web', 'shop-web-1', 'node-2', 'http=127.0.1.2:20500', 'node-1=ready,node-2=ready (check DOWN)'],
      ['shop', 'web', 'shop-web-2', 'node-3', '127.0.1.3:20111', 'drain on 2/2 ingresses'],
      // Not published: no ingress answers it.
      ['shop', 'api', 'shop-api-0', 'node-2', 'node-2:8080', '-'],
    ]);
    // A copy one ingress has not added yet.
    expect(endpointRows([web], [ingress('node-1', [server('shop-web-0', 'node-1', 20433, 'ready')])])[1]![5]).toBe('absent on 1/1 ingress');
  });

  it.each<[IngressServer | undefined, string]>([
    [undefined, 'absent'],
    [server('r', 'node-1', 1, 'ready'), 'ready'],
    [server('r', 'node-1', 1, 'ready', 'UP 1/2'), 'ready'],
    [server('r', 'node-1', 1, 'ready', 'no check'), 'ready'],
    [server('r', 'node-1', 1, 'ready', 'DOWN 1/2'), 'ready (check DOWN 1/2)'],
    [server('r', 'node-1', 1, 'drain', 'DRAIN'), 'drain'],
    [server('r', 'node-1', 1, 'drain', 'DOWN'), 'drain (check DOWN)'],
  ])('routing text of %j', (s, want) => expect(routingText(s)).toBe(want));

  it("describe service: every copy with each ingress's state, a pending replica absent, a drained copy kept until it is gone", () => {
    const web = ep('shop', 'web', [{ replica: 'shop-web-0', node: 'node-1', address: '127.0.1.1', ports: [20433], hostPorts: { http: 20433 } }]);
    const ingresses = [ingress('node-2', [server('shop-web-0', 'node-1', 20433, 'ready'), server('shop-web-2', 'node-3', 20111, 'drain')]), ingress('node-1', [server('shop-web-0', 'node-1', 20433, 'ready', 'DOWN')])];
    const copies = [
      { replica: 'shop-web-1', node: 'node-2', state: 'pending' },
      { replica: 'shop-web-0', node: 'node-1', state: 'running' },
    ];
    expect(serviceRoutingTable(copies, web, ingresses)).toEqual({
      headers: ['REPLICA', 'NODE', 'STATE', 'ENDPOINT', 'IN ENDPOINTS', 'INGRESS node-1', 'INGRESS node-2'],
      rows: [
        ['shop-web-0', 'node-1', 'running', 'http=127.0.1.1:20433', 'yes', 'ready (check DOWN)', 'ready'],
        ['shop-web-1', 'node-2', 'pending', '-', 'no', 'absent', 'absent'],
        ['shop-web-2', 'node-3', 'gone', '127.0.1.3:20111', 'no', 'absent', 'drain'],
      ],
    });
  });
});
