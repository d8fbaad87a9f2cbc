import { describe, expect, it } from 'vitest';
import { keys } from '../api/keys.js';
import type { Heartbeat, Node, PressureSample, ReplicaDesired, ServiceSpec } from '../api/types.js';
import type { Versioned } from '../store/store.js';
import { joinClusterView } from '../app/cluster-view.js';
import { nodeTableRows, nodeUsage, replicaTableRows, replicaUsage, type TopSort } from './top.js';

const NOW = Date.parse('2026-11-27T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
let rev = 1;
const v = <T>(key: string, value: T): Versioned<T> => ({ key, value, modRevision: ++rev, createRevision: rev, version: 1 });
const node = (name: string, cpuMillis = 2000, memoryBytes = 4 * 2 ** 30) =>
  v<Node>(keys.node(name), { apiVersion: 'jaco.dev/v1', kind: 'Node', metadata: { name }, spec: {}, status: { capacity: { cpuMillis, memoryBytes, gpus: 0 }, agentVersion: 't', registeredAt: iso(NOW) } });
const hb = (name: string, p?: Omit<PressureSample, 'time'>, sampledAt = NOW - 1000, disk?: { totalBytes: number; availableBytes: number }) =>
  v<Heartbeat>(keys.heartbeat(name), { apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: iso(NOW - 1000), intervalMs: 1000, agentVersion: 't', dockerUp: true, ...(p ? { pressure: { ...p, time: iso(sampledAt) } } : {}), ...(disk ? { disk: { path: '/var/lib/docker', capped: false, driver: 'overlay2', usedBytes: disk.totalBytes - disk.availableBytes, ...disk } } : {}) } });
const desired = (id: string, nodeName: string, template: ServiceSpec = { image: 'x' }, deployment = 'shop', service = 'web') =>
  v<ReplicaDesired>(keys.desired(nodeName, id), { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: id }, spec: { replica: id, deployment, service, node: nodeName, revision: 1, specHash: 'h', template, placedAt: iso(NOW) } });

function view(parts: { nodes: Versioned<Node>[]; heartbeats: Versioned<Heartbeat>[]; desired?: Versioned<ReplicaDesired>[] }) {
  return joinClusterView({ revision: 1, deployments: [], statuses: [], drains: [], observed: [], commands: [], rollouts: [], desired: [], ...parts });
}

describe('nodeUsage', () => {
  const v1 = view({
    nodes: [node('a'), node('b'), node('c'), node('d'), node('e')],
    heartbeats: [
      hb('a', { cpuUtil: 0.25, memoryUtil: 0.5, replicas: {}, mode: 'node' }, NOW - 1000, { totalBytes: 100 * 2 ** 30, availableBytes: 60 * 2 ** 30 }),
      hb('b', { cpuUtil: 0.75, memoryUtil: 0.1, replicas: {} }),
      hb('c', { cpuUtil: 0.25, memoryUtil: 0.05, replicas: {}, mode: 'containers' }),
      // A stale sample (10 intervals older than its heartbeat) and none: no figures, listed last.
      hb('d', { cpuUtil: 0.99, memoryUtil: 0.99, replicas: {} }, NOW - 10_000),
      hb('e'),
    ],
  });

  it.each<[TopSort, string[]]>([
    ['cpu', ['b', 'a', 'c', 'd', 'e']],
    ['memory', ['a', 'b', 'c', 'd', 'e']],
    ['name', ['a', 'b', 'c', 'd', 'e']],
  ])('sorts by %s, largest first, ties by name, nodes without figures last', (sort, order) => {
    expect(nodeUsage(v1, sort).map((r) => r.node)).toEqual(order);
  });

  it('figures from the sample over capacity, pressure the larger dimension, and why a node has none', () => {
    const rows = nodeUsage(v1, 'name');
    expect(rows[0]).toEqual({ node: 'a', cpuUtil: 0.25, memoryUtil: 0.5, cpuMillis: 500, memoryBytes: 2 * 2 ** 30, diskBytes: 40 * 2 ** 30, diskUtil: 0.4, pressure: { value: 0.5, dominant: 'memory' }, mode: 'node', sampledAt: iso(NOW - 1000) });
    expect(rows[1]!.pressure).toEqual({ value: 0.75, dominant: 'cpu' });
    // Samples of agents before the mode existed measure containers.
    expect(rows[1]!.mode).toBe('containers');
    expect(rows[3]).toEqual({ node: 'd', missing: 'stale sample (the agent samples no more)' });
    expect(rows[4]).toEqual({ node: 'e', missing: 'no sample (Docker down?)' });
    expect(nodeTableRows(rows, NOW)).toEqual([
      ['a', '500m', '25%', '2Gi', '50%', '40Gi', '40%', '0.50 (memory)', 'host', '1s ago'],
      ['b', '1500m', '75%', '409.6Mi', '10%', '-', '-', '0.75 (cpu)', 'containers', '1s ago'],
      ['c', '500m', '25%', '204.8Mi', '5%', '-', '-', '0.25 (cpu)', 'containers', '1s ago'],
      ['d', '-', '-', '-', '-', '-', '-', '-', '-', 'stale sample (the agent samples no more)'],
      ['e', '-', '-', '-', '-', '-', '-', '-', '-', 'no sample (Docker down?)'],
    ]);
  });
});

describe('replicaUsage', () => {
  const limited: ServiceSpec = { image: 'x', resources: { cpu: '500m', memory: '64Mi' } };
  const v2 = view({
    nodes: [node('a'), node('b')],
    heartbeats: [
      hb('a', { cpuUtil: 0.3, memoryUtil: 0.1, replicas: { 'shop-web-1': { cpuMillis: 250, memoryBytes: 16 * 2 ** 20 }, 'shop-web-2': { cpuMillis: 10, memoryBytes: 48 * 2 ** 20 } } }),
      hb('b', { cpuUtil: 0.3, memoryUtil: 0.1, replicas: { 'shop-web-3': { cpuMillis: 250, memoryBytes: 1 << 20 }, 'other-db-1': { cpuMillis: 900, memoryBytes: 1 << 20 } } }),
    ],
    desired: [desired('shop-web-1', 'a', limited), desired('shop-web-2', 'a', limited), desired('shop-web-3', 'b'), desired('shop-web-4', 'b'), desired('other-db-1', 'b', { image: 'x' }, 'other', 'db')],
  });

  it.each<[TopSort, string | undefined, string[]]>([
    ['cpu', undefined, ['other-db-1', 'shop-web-1', 'shop-web-3', 'shop-web-2', 'shop-web-4']],
    ['memory', 'shop', ['shop-web-2', 'shop-web-1', 'shop-web-3', 'shop-web-4']],
    ['name', 'shop', ['shop-web-1', 'shop-web-2', 'shop-web-3', 'shop-web-4']],
  ])('sorts by %s (deployment %s)', (sort, deployment, order) => {
    expect(replicaUsage(v2, { sort, ...(deployment ? { deployment } : {}) }).map((r) => r.replica)).toEqual(order);
  });

  it('its footprint in its node sample, against the limits its service sets', () => {
    expect(replicaTableRows(replicaUsage(v2, { deployment: 'shop' }), NOW)).toEqual([
      ['shop-web-1', 'shop/web', 'a', '250m', '50%', '16Mi', '25%', '1s ago'],
      ['shop-web-3', 'shop/web', 'b', '250m', '-', '1Mi', '-', '1s ago'],
      ['shop-web-2', 'shop/web', 'a', '10m', '2%', '48Mi', '75%', '1s ago'],
      ['shop-web-4', 'shop/web', 'b', '-', '-', '-', '-', 'not running'],
    ]);
  });
});
