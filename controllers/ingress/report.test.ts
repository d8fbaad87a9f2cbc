import { describe, expect, it } from 'vitest';
import type { HaproxyView } from './decide.js';
import { ingressStatusOf } from './report.js';

const T = Date.parse('2026-11-25T10:00:00Z');
const route = { published: 18080, deployment: 'shop', service: 'web', portName: 'http', backend: 'be_shop_web_http', mode: 'http' as const };
const view: HaproxyView = {
  configKey: 'k',
  address: '127.0.1.1',
  routes: [route],
  servers: new Map([
    [
      'be_shop_web_http',
      new Map([
        ['shop-web-1__node-2_20002', { addr: '127.0.1.2', port: 20002, replica: 'shop-web-1', node: 'node-2', state: 'drain' as const, since: T }],
        ['shop-web-0__node-1_20001', { addr: '127.0.1.1', port: 20001, replica: 'shop-web-0', node: 'node-1', state: 'ready' as const, since: T }],
      ]),
    ],
  ]),
};

describe('ingress status (ingresses/<node>)', () => {
  it("each route's servers in name order, with jaco's state and HAProxy's check where read", () => {
    const s = ingressStatusOf('node-1', view, new Map([['be_shop_web_http/shop-web-0__node-1_20001', 'UP']]), true, [{ published: 18081, winner: 'a/x', losers: ['b/y'] }], T);
    expect(s.spec).toEqual({
      node: 'node-1',
      address: '127.0.1.1',
      time: '2026-11-25T10:00:00.000Z',
      haproxy: 'running',
      routes: [
        {
          published: 18080,
          deployment: 'shop',
          service: 'web',
          servers: [
            { replica: 'shop-web-0', node: 'node-1', address: '127.0.1.1', port: 20001, state: 'ready', check: 'UP' },
            { replica: 'shop-web-1', node: 'node-2', address: '127.0.1.2', port: 20002, state: 'drain' },
          ],
        },
      ],
      conflicts: [{ published: 18081, routedTo: 'a/x', ignored: ['b/y'] }],
    });
  });

  it('down, with no routes, while HAProxy is not configured (or not running)', () => {
    expect(ingressStatusOf('node-1', { servers: new Map() }, new Map(), true, [], T).spec).toMatchObject({ haproxy: 'down', routes: [] });
    expect(ingressStatusOf('node-1', view, new Map(), false, [], T).spec.haproxy).toBe('down');
  });

  it('names the routes HAProxy could not bind, with the address and the reason', () => {
    const s = ingressStatusOf('node-1', view, new Map(), true, [], T, [{ frontend: 'fe_18080', address: '127.0.1.1:18080', reason: 'Address already in use' }, { frontend: 'fe_gone', address: 'x', reason: 'y' }]);
    expect(s.spec.unbound).toEqual([{ published: 18080, deployment: 'shop', service: 'web', address: '127.0.1.1:18080', reason: 'Address already in use' }]);
    expect(ingressStatusOf('node-1', view, new Map(), true, [], T).spec).not.toHaveProperty('unbound');
  });
});
