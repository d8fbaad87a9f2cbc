import { describe, expect, it } from 'vitest';
import type { DeploymentSpec } from '../api/types.js';
import { applyGuards, idNeighbours, portsTaken } from './apply-guards.js';

const spec = (services: Record<string, { ports?: DeploymentSpec['services'][string]['ports'] }>): DeploymentSpec => ({
  services: Object.fromEntries(Object.entries(services).map(([n, s]) => [n, { image: 'i', ...s }])),
});

describe('idNeighbours', () => {
  it.each([
    { name: 'web', prefixes: [], under: 'web-' },
    { name: 'x-a', prefixes: ['x'], under: 'x-a-' },
    { name: 'a-b-c', prefixes: ['a', 'a-b'], under: 'a-b-c-' },
  ])('$name', ({ name, prefixes, under }) => expect(idNeighbours(name)).toEqual({ prefixes, under }));
});

describe('portsTaken', () => {
  it('published and fixed host ports; none on the cluster network', () => {
    expect([...portsTaken('d', spec({ a: { ports: [8080, { containerPort: 80, published: 443 }] } }))].sort()).toEqual([443, 8080]);
    expect(portsTaken('d', undefined).size).toBe(0);
  });
});

describe('applyGuards', () => {
  const revs: Record<string, number> = { x: 7, 'a-b': 9 };
  const guards = (items: Parameters<typeof applyGuards>[0], guardRevs: Record<number, number> = {}) =>
    applyGuards(items, 100, (n) => revs[n] ?? 0, (p) => guardRevs[p] ?? 0, 'T');
  it.each([
    { what: 'a new deployment: its id neighbours', items: [{ name: 'x-a', spec: spec({ b: {} }) }], ops: [
      { op: 'checkRange', key: 'deployments/x-a-', unchangedSince: 100 },
      { op: 'check', key: 'deployments/x', modRevision: 7 },
    ] },
    { what: 'an absent neighbour is compared as absent', items: [{ name: 'q-r', spec: spec({ b: {} }) }], ops: [
      { op: 'checkRange', key: 'deployments/q-r-', unchangedSince: 100 },
      { op: 'check', key: 'deployments/q', modRevision: 0 },
    ] },
    { what: 'a changed image only: nothing to guard', items: [{ name: 'x-a', spec: spec({ b: {} }), stored: spec({ b: {} }) }], ops: [] },
    { what: 'a removed service: nothing', items: [{ name: 'web', spec: spec({ b: {} }), stored: spec({ b: {}, c: {} }) }], ops: [] },
    { what: 'a neighbour written by the same apply is not compared twice', items: [{ name: 'x', spec: spec({ a: {} }) }, { name: 'x-a', spec: spec({ b: {} }) }], ops: [
      { op: 'checkRange', key: 'deployments/x-', unchangedSince: 100 },
      { op: 'checkRange', key: 'deployments/x-a-', unchangedSince: 100 },
    ] },
    { what: 'a port newly published: its guard created', items: [{ name: 'w', spec: spec({ a: { ports: [{ containerPort: 80, published: 443 }] } }), stored: spec({ a: {} }) }], ops: [
      { op: 'create', key: 'guards/ports/443', value: { port: 443, deployment: 'w', at: 'T' } },
    ] },
    { what: 'a port kept: nothing', items: [{ name: 'w', spec: spec({ a: { ports: [8080] } }), stored: spec({ a: { ports: [8080] } }) }], ops: [] },
  ])('$what', ({ items, ops }) => expect(guards(items)).toEqual(ops));

  it('a guard taken before is updated at the revision read', () =>
    expect(guards([{ name: 'w', spec: spec({ a: { ports: [8080] } }), stored: spec({ a: {} }) }], { 8080: 42 })).toEqual([
      { op: 'update', key: 'guards/ports/8080', value: { port: 8080, deployment: 'w', at: 'T' }, modRevision: 42 },
    ]));
});
