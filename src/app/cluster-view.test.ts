import { describe, expect, it } from 'vitest';
import { nodeInfosOf, serviceOfReplica } from '../../controllers/placement/input.js';
import { DEFAULT_NODE_SETTINGS, degradedBecause } from '../api/eligibility.js';
import { specHash, withDefaults } from '../api/spec.js';
import type { Heartbeat, HeartbeatSpec, Node, ReplicaCommand, ReplicaDesired } from '../api/types.js';
import type { Versioned } from '../store/store.js';
import { joinClusterView, nodeConditionsOf } from './cluster-view.js';

// The placer and the CLI (get nodes, describe node, the dashboard) judge a node's condition with one
// function; these rows give both the same stored state and check they say the same thing.
const NOW = Date.parse('2026-01-01T12:00:00Z');
const Gi = 1024 ** 3;
const ago = (ms: number) => new Date(NOW - ms).toISOString();
const versioned = <T>(key: string, value: T): Versioned<T> => ({ key, value, modRevision: 1, createRevision: 1, version: 1 });
const node = (name: string, trusted = false): Node => ({
  apiVersion: 'jaco.dev/v1',
  kind: 'Node',
  metadata: { name },
  spec: trusted ? { trusted } : {},
  status: { capacity: { cpuMillis: 4000, memoryBytes: 8 * Gi, gpus: 0 }, agentVersion: 't', registeredAt: ago(3_600_000) },
});
const hb = (name: string, extra: Partial<HeartbeatSpec> = {}): Heartbeat => ({ apiVersion: 'jaco.dev/v1', kind: 'Heartbeat', metadata: { name }, spec: { node: name, time: ago(0), intervalMs: 1000, agentVersion: 't', dockerUp: true, ...extra } });
const fullDisk = { disk: { path: '/var/lib/docker', totalBytes: 100 * Gi, usedBytes: 95 * Gi, availableBytes: 5 * Gi, capped: false, driver: 'overlay2' } };
const template = withDefaults({ image: 'x' });
const desired = (replica: string, host: string): ReplicaDesired => {
  const [deployment, service] = replica.split('-') as [string, string];
  return { apiVersion: 'jaco.dev/v1', kind: 'ReplicaDesired', metadata: { name: replica }, spec: { replica, deployment, service, node: host, index: 0, revision: 1, specHash: specHash(template), template, placedAt: ago(3_600_000) } };
};
/** A restart record on `host`, its last restart `at` ms ago. */
const restarted = (host: string, replica: string, at: number): Versioned<ReplicaCommand> =>
  versioned(`commands/${host}/${replica}`, { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: replica }, spec: { replica, op: 'restart', seq: 1, issuedAt: ago(at), reason: 'exited' }, status: { restarts: 1, lastRestartAt: ago(at), generation: 1 } });

interface Row {
  nodes: Node[];
  heartbeats: Heartbeat[];
  desired: ReplicaDesired[];
  commands: Versioned<ReplicaCommand>[];
  /** Each node's causes, and whether it takes no new placements for them. */
  want: Record<string, { causes: string[]; blocked: boolean }>;
}

const two = [node('n1'), node('n2')];
const both = [hb('n1'), hb('n2')];
const threeServices = ['a-web-0', 'b-web-0', 'c-web-0'];

describe('node conditions: the placer and the CLI judge the same stored state alike', () => {
  it.each<[string, Row]>([
    ['healthy nodes', { nodes: two, heartbeats: both, desired: [], commands: [], want: { n1: { causes: [], blocked: false }, n2: { causes: [], blocked: false } } }],
    ['a full data root', { nodes: two, heartbeats: [hb('n1', fullDisk), hb('n2')], desired: [], commands: [], want: { n1: { causes: ['disk_pressure'], blocked: true }, n2: { causes: [], blocked: false } } }],
    ['a full data root on a trusted node', { nodes: [node('n1', true), node('n2')], heartbeats: [hb('n1', fullDisk), hb('n2')], desired: [], commands: [], want: { n1: { causes: ['disk_pressure'], blocked: false }, n2: { causes: [], blocked: false } } }],
    [
      'replicas of 3 services restarted on n1',
      { nodes: two, heartbeats: both, desired: threeServices.map((r) => desired(r, 'n1')), commands: threeServices.map((r) => restarted('n1', r, 60_000)), want: { n1: { causes: ['repeated_failures'], blocked: true }, n2: { causes: [], blocked: false } } },
    ],
    [
      'restarts older than the window',
      { nodes: two, heartbeats: both, desired: threeServices.map((r) => desired(r, 'n1')), commands: threeServices.map((r) => restarted('n1', r, 11 * 60_000)), want: { n1: { causes: [], blocked: false }, n2: { causes: [], blocked: false } } },
    ],
    [
      // The CLI once counted only restart records beside a desired key on the same node.
      'restarted replicas since moved to n2 or removed still count on n1',
      {
        nodes: two,
        heartbeats: both,
        desired: [desired('a-web-0', 'n1'), desired('b-web-0', 'n2')],
        commands: threeServices.map((r) => restarted('n1', r, 60_000)),
        want: { n1: { causes: ['repeated_failures'], blocked: true }, n2: { causes: [], blocked: false } },
      },
    ],
    [
      // n1 hears its peers, but neither hears it: only their reports show the cut.
      'n1 unreachable in its peers’ samples only',
      {
        nodes: [...two, node('n3')],
        heartbeats: [
          hb('n1', { overlay: { peers: [{ node: 'n2', handshakeAt: ago(1000) }, { node: 'n3', handshakeAt: ago(1000) }] } }),
          hb('n2', { overlay: { peers: [{ node: 'n1', handshakeAt: ago(600_000) }, { node: 'n3', handshakeAt: ago(1000) }] } }),
          hb('n3', { overlay: { peers: [{ node: 'n1', handshakeAt: ago(600_000) }, { node: 'n2', handshakeAt: ago(1000) }] } }),
        ],
        desired: [],
        commands: [],
        want: { n1: { causes: ['overlay_unreachable'], blocked: true }, n2: { causes: [], blocked: false }, n3: { causes: [], blocked: false } },
      },
    ],
  ])('%s', (_name, r) => {
    const settings = DEFAULT_NODE_SETTINGS;
    const placer = nodeInfosOf({ nodes: r.nodes, heartbeats: new Map(r.heartbeats.map((h) => [h.spec.node, h])), drains: new Map(), commands: new Map(r.commands.map((c) => [c.key, c])), settings }, serviceOfReplica(r.desired), NOW);
    const view = joinClusterView({
      revision: 1,
      deployments: [],
      statuses: [],
      nodes: r.nodes.map((n) => versioned(`nodes/${n.metadata.name}`, n)),
      heartbeats: r.heartbeats.map((h) => versioned(`heartbeats/${h.spec.node}`, h)),
      drains: [],
      desired: r.desired.map((d) => versioned(`desired/${d.spec.node}/${d.spec.replica}`, d)),
      observed: [],
      commands: r.commands,
      rollouts: [],
    });
    const cli = nodeConditionsOf(view, NOW);
    const got = Object.fromEntries([...cli].map(([n, c]) => [n, { causes: c.causes.map((f) => f.cause), blocked: !!degradedBecause(c) }]));
    expect(got).toEqual(r.want);
    // The placer's verdict is the CLI's, word for word.
    expect(Object.fromEntries(placer.map((i) => [i.name, i.degraded]))).toEqual(Object.fromEntries([...cli].map(([n, c]) => [n, degradedBecause(c)])));
  });
});
