import { describe, expect, it } from 'vitest';
import type { Endpoints } from '../api/types.js';
import { endpointRows, selectEndpoints } from './endpoints-view.js';

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
      ['blog', 'web', '<none>', '', ''],
      ['shop', 'api', 'shop-api-0', 'node-2', 'node-2:8080'],
      ['shop', 'web', 'shop-web-0', 'node-1', 'http=127.0.1.1:20433'],
    ]);
  });
});
