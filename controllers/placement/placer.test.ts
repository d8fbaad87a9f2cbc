import { describe, expect, it } from 'vitest';
import type { ServiceSpec } from '../../src/api/types.js';
import { shuffled } from '../../test/support/scheduler-world.js';
import { Placer, type NodeInfo, type PlacedReplica, type PlacementInput, type PlacementRequest } from './placer.js';
import { RECENT_FAILURE_WINDOW_MS, recentFailuresOf } from './input.js';

const Gi = 1024 ** 3;
const Mi = 1024 ** 2;
const node = (name: string, extra: Partial<NodeInfo> = {}): NodeInfo => ({ name, capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0 }, labels: {}, ...extra });
const placed = (id: string, n: string, extra: Partial<PlacedReplica> = {}): PlacedReplica => ({ id, deployment: 'd', service: 'other', node: n, cpuMillis: 0, memoryBytes: 0, gpus: 0, ports: [], ...extra });
const req = (spec: Partial<ServiceSpec> = {}, i = 0, extra: Partial<PlacementRequest> = {}): PlacementRequest => ({ replica: `d-web-${i}`, deployment: 'd', service: 'web', index: i, spec: { image: 'x', ...spec }, ...extra });
const input = (nodes: NodeInfo[], p: PlacedReplica[] = [], volumeHomes: Record<string, string> = {}): PlacementInput => ({ nodes, placed: p, volumeHomes });

/** Places `count` replicas of one service in order and returns the chosen nodes. */
function placeAll(inp: PlacementInput, spec: Partial<ServiceSpec>, count: number): (string | undefined)[] {
  const placer = new Placer(inp);
  return Array.from({ length: count }, (_, i) => placer.place(req(spec, i)).chosen);
}

describe('hard filters: each records its reason per node', () => {
  it.each<[string, PlacementInput, Partial<ServiceSpec>, string, string]>([
    ['NotReady node', input([node('a', { ineligible: 'NotReady (no heartbeat: the agent lost its lease)' })]), {}, 'eligibility', 'no_nodes_active'],
    ['memory (request + overhead over capacity)', input([node('a')], [placed('x', 'a', { memoryBytes: 1900 * Mi })]), { resources: { memory: '100Mi' } }, 'memory', 'no_capacity_memory'],
    ['gpus', input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: Gi, gpus: 1 } })], [placed('x', 'a', { gpus: 1 })]), { resources: { gpus: 1 } }, 'gpus', 'no_capacity_gpu'],
    ['host port taken', input([node('a')], [placed('x', 'a', { ports: [8080] })]), { ports: [8080] }, 'ports', 'port_conflict'],
    ['node selector', input([node('a', { labels: { zone: 'b' } })]), { placement: { nodeSelector: { zone: 'a' } } }, 'node_selector', 'node_selector_mismatch'],
    ['hosts list', input([node('a')]), { placement: { mode: 'hosts', hosts: ['b'] } }, 'hosts', 'cannot_satisfy_host_placement'],
    ['volume locality', input([node('a'), node('b', { ineligible: 'cordoned' })], [], { 'd/data': 'b' }), { volumes: [{ type: 'volume', source: 'data', target: '/d' }] }, 'volume_locality', 'volume_locality_no_node'],
    ['volume in use read-write by another replica', input([node('a')], [placed('d-old-0', 'a', { volumes: [{ source: 'data', readOnly: false }] })], { 'd/data': 'a' }), { volumes: [{ type: 'volume', source: 'data', target: '/d', readOnly: true }] }, 'volume_in_use', 'volume_in_use'],
    ['volume in use read-only, this replica would write', input([node('a')], [placed('d-old-0', 'a', { volumes: [{ source: 'data', readOnly: true }] })], { 'd/data': 'a' }), { volumes: [{ type: 'volume', source: 'data', target: '/d' }] }, 'volume_in_use', 'volume_in_use'],
    ['gpus: all on a node without GPUs', input([node('a')]), { resources: { gpus: 'all' } }, 'gpus', 'no_capacity_gpu'],
    ['gpus: all on a node with one GPU taken', input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: Gi, gpus: 2 } })], [placed('x', 'a', { gpus: 1 })]), { resources: { gpus: 'all' } }, 'gpus', 'no_capacity_gpu'],
    ['placement.maxPerNode reached', input([node('a')], [placed('d-web-7', 'a', { service: 'web' }), placed('d-web-8', 'a', { service: 'web' })]), { placement: { mode: 'pack', maxPerNode: 2 } }, 'max_per_node', 'max_per_node'],
    ['hosts: one replica per host', input([node('a')], [placed('d-web-9', 'a', { service: 'web' })]), { placement: { mode: 'hosts', hosts: ['a'] } }, 'anti_affinity', 'cannot_satisfy_host_placement'],
    ['degraded node (untrusted)', input([node('a', { degraded: 'degraded: disk_pressure — /var/lib/docker is 95% full' })]), {}, 'degraded', 'node_degraded'],
    ['scratch disk: resources.disk over what is unbooked', input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0, diskBytes: 10 * Gi } })], [placed('x', 'a', { diskBytes: 8 * Gi })]), { resources: { disk: '3Gi' } }, 'disk', 'no_capacity_disk'],
    ['scratch disk: the default 4Gi over what is unbooked', input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0, diskBytes: 6 * Gi } })], [placed('x', 'a')]), {}, 'disk', 'no_capacity_disk'],
  ])('%s', (_name, inp, spec, filter, reason) => {
    const d = new Placer(inp).decide(req(spec));
    expect(d.chosen).toBeUndefined();
    expect(d.reason).toBe(reason);
    expect(d.verdicts.find((v) => v.node === 'a')?.rejected?.filter).toBe(filter);
    expect(d.why).toContain(reason);
  });

  it.each<[string, Partial<NodeInfo['capacity']>, Partial<ServiceSpec>, string | undefined, string]>([
    ['runtime: the engine has it', { runtimes: ['runc', 'runsc'] }, { container: { runtime: 'runsc' } }, undefined, ''],
    ['runtime: the engine lacks it', { runtimes: ['runc'] }, { container: { runtime: 'nvidia' } }, 'runtime_missing', 'its engine has no runtime nvidia (it has runc)'],
    ['runtime: the node reports no runtimes (an older agent)', {}, { container: { runtime: 'runc' } }, 'runtime_missing', "its engine's runtimes are not known (its agent reported none), so not runc"],
    ['no runtime asked: any node', {}, {}, undefined, ''],
    ['devices: the node offers it (a mapping names its host side)', { devices: ['/dev/fuse', '/dev/sda'] }, { container: { devices: ['/dev/fuse', '/dev/sda:/dev/xvda:r'] } }, undefined, ''],
    ['devices: the node does not offer it', { devices: ['/dev/fuse'] }, { container: { devices: ['/dev/fuse', '/dev/kvm:/dev/kvm:rw'] } }, 'device_missing', 'it does not offer device /dev/kvm (jaco agent --device; it offers /dev/fuse)'],
    ['devices: the node declares none', {}, { container: { devices: ['/dev/fuse'] } }, 'device_missing', 'it does not offer device /dev/fuse (jaco agent --device; it offers none)'],
    ['GPU ids: the node has each', { gpus: 2, gpuIds: ['0', '1', 'GPU-a', 'GPU-b'] }, { resources: { gpuIds: ['1', 'GPU-a'] } }, undefined, ''],
    ['GPU ids: the node lacks one', { gpus: 2, gpuIds: ['0', '1'] }, { resources: { gpuIds: ['0', '3'] } }, 'device_missing', 'it has no GPU 3 (its GPUs: 0, 1)'],
    ['GPU ids count as GPUs: too few free', { gpus: 1, gpuIds: ['0'] }, { resources: { gpuIds: ['0', '0'] } }, 'no_capacity_gpu', 'needs 2 GPU(s); 1 of 1 free'],
  ])('runtimes and devices: %s', (_name, capacity, spec, reason, detail) => {
    const d = new Placer(input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0, ...capacity } })])).decide(req(spec));
    expect(d.reason).toBe(reason);
    expect(d.chosen).toBe(reason ? undefined : 'a');
    if (reason) expect(d.verdicts[0]!.rejected!.detail).toBe(detail);
  });

  it('runtimes and devices are filtered after the operator’s constraints and before capacity: the reason names the furthest obstacle', () => {
    const spec: Partial<ServiceSpec> = { container: { runtime: 'runsc', devices: ['/dev/fuse'] }, resources: { memory: '3Gi' } };
    const cap = (extra: Partial<NodeInfo['capacity']>) => ({ capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0, runtimes: ['runsc'], devices: ['/dev/fuse'], ...extra } });
    const nodes = [node('a', cap({})), node('b', cap({ runtimes: ['runc'] })), node('c', cap({ devices: [] })), node('d', cap({}))];
    const d = new Placer(input(nodes.map((n, i) => ({ ...n, labels: { zone: i ? 'a' : 'b' } })))).decide(req({ ...spec, placement: { nodeSelector: { zone: 'a' } } }));
    expect(d.verdicts.map((v) => `${v.node}: ${v.rejected?.filter}`)).toEqual(['a: node_selector', 'b: runtime', 'c: devices', 'd: memory']);
    expect(d.reason).toBe('no_capacity_memory');
    expect(new Placer(input(nodes.slice(1, 3))).decide(req(spec)).reason).toBe('device_missing');
    expect(new Placer(input(nodes.slice(1, 2))).decide(req(spec)).reason).toBe('runtime_missing');
  });

  it('volume_in_use: readers share a volume; the same replica (re-placed, same id) is not its own writer; another deployment\'s same-named volume is another volume', () => {
    const vol = (readOnly: boolean): Partial<ServiceSpec> => ({ volumes: [{ type: 'volume', source: 'data', target: '/d', readOnly }] });
    const reader = input([node('a')], [placed('d-old-0', 'a', { volumes: [{ source: 'data', readOnly: true }] })], { 'd/data': 'a' });
    expect(new Placer(reader).decide(req(vol(true))).chosen).toBe('a');
    const self = input([node('a')], [placed('d-web-0', 'a', { service: 'web', volumes: [{ source: 'data', readOnly: false }] })], { 'd/data': 'a' });
    expect(new Placer(self).decide(req(vol(false))).chosen).toBe('a');
    const elsewhere = input([node('a')], [placed('e-old-0', 'a', { deployment: 'e', volumes: [{ source: 'data', readOnly: false }] })]);
    expect(new Placer(elsewhere).decide(req(vol(false))).chosen).toBe('a');
    // The detail names the holder; forgetting it frees the volume.
    const placer = new Placer(input([node('a')], [placed('d-old-0', 'a', { volumes: [{ source: 'data', readOnly: false }] })], { 'd/data': 'a' }));
    expect(placer.check(req(vol(false)), 'a')?.detail).toBe('volume "data" is attached read-write by d-old-0 (one writer per volume)');
    placer.forget('d-old-0', 'a');
    expect(placer.check(req(vol(false)), 'a')).toBeUndefined();
  });

  it('gpus: all takes every GPU of its node: nothing else GPU-bound fits there afterwards', () => {
    const gpuNode = (name: string) => node(name, { capacity: { cpuMillis: 1000, memoryBytes: Gi, gpus: 2 } });
    const placer = new Placer(input([gpuNode('a'), gpuNode('b')]));
    const taken = placer.place(req({ resources: { gpus: 'all' } }, 0)).chosen!;
    const other = taken === 'a' ? 'b' : 'a';
    expect(placer.check(req({ resources: { gpus: 1 } }, 1, { service: 'other' }), taken)?.filter).toBe('gpus');
    expect(placer.decide(req({ resources: { gpus: 1 } }, 1, { service: 'other' })).chosen).toBe(other);
    expect(placer.headroom(taken).gpus).toBe(0);
    placer.forget('d-web-0', taken);
    expect(placer.headroom(taken).gpus).toBe(2);
  });

  it('placement.maxPerNode is hard: two nodes with a cap of 2 take four replicas, never a fifth', () => {
    expect(placeAll(input([node('a'), node('b')]), { placement: { mode: 'pack', maxPerNode: 2 } }, 5)).toEqual(['a', 'b', 'a', 'b', undefined]);
  });

  it('memory accounting includes the per-replica overhead of every replica', () => {
    // 2 GiB node, 32 MiB overhead: 63 replicas of 0 bytes fit, the 64th… also (64 × 32 MiB = 2 GiB), the 65th not.
    const placer = new Placer(input([node('a')]));
    const chosen = Array.from({ length: 65 }, (_, i) => placer.place(req({ placement: { mode: 'pack' } }, i)).chosen);
    expect(chosen.filter(Boolean)).toHaveLength(64);
    expect(chosen[64]).toBeUndefined();
  });

  it('records the most advanced filter as the service-level reason', () => {
    const d = new Placer(input([node('a', { ineligible: 'cordoned' }), node('b')], [placed('x', 'b', { memoryBytes: 2 * Gi })])).decide(req({ resources: { memory: '1Gi' } }));
    expect(d.reason).toBe('no_capacity_memory');
    expect(d.verdicts.map((v) => [v.node, v.rejected?.filter])).toEqual([
      ['a', 'eligibility'],
      ['b', 'memory'],
    ]);
    expect(d.verdicts[1]!.rejected!.detail).toBe('needs 1.0Gi (with 32Mi overhead); 0 of 2Gi free');
  });

  it('no nodes at all is no_nodes_active', () => expect(new Placer(input([])).decide(req()).reason).toBe('no_nodes_active'));

  it('excludes a move source', () => {
    const d = new Placer(input([node('a'), node('b')])).decide(req({}, 0, { exclude: ['a'] }));
    expect(d.chosen).toBe('b');
    expect(d.verdicts[0]!.rejected!.filter).toBe('excluded');
  });
});

describe('modes', () => {
  const three = [node('n1'), node('n2'), node('n3')];

  it('spread: one replica per node while nodes allow, then as even as capacity allows', () => {
    const got = placeAll(input(three), {}, 5);
    expect(new Set(got.slice(0, 3)).size).toBe(3);
    const counts = new Map<string, number>();
    for (const n of got) counts.set(n!, (counts.get(n!) ?? 0) + 1);
    expect(Math.max(...counts.values()) - Math.min(...counts.values())).toBeLessThanOrEqual(1);
  });

  it('spread: relaxing anti-affinity is said in the decision', () => {
    const placer = new Placer(input([node('n1')]));
    placer.place(req({}, 0));
    const d = placer.place(req({}, 1));
    expect(d.chosen).toBe('n1');
    expect(d.why).toContain('spread was relaxed');
  });

  it('pack: lowest replica count first, ties by node name', () => {
    const inp = input(three, [placed('x', 'n1'), placed('y', 'n1'), placed('z', 'n2')]);
    expect(placeAll(inp, { placement: { mode: 'pack' } }, 4)).toEqual(['n3', 'n2', 'n3', 'n1']);
    const d = new Placer(input(three)).decide(req({ placement: { mode: 'pack' } }));
    expect(d.chosen).toBe('n1');
    expect(d.why).toContain('tie broken by name');
  });

  it('hosts: only the listed hosts, one each', () => {
    expect(new Set(placeAll(input(three), { placement: { mode: 'hosts', hosts: ['n3', 'n1'] } }, 2))).toEqual(new Set(['n1', 'n3']));
    expect(placeAll(input(three), { placement: { mode: 'hosts', hosts: ['n3', 'n1'] } }, 3)[2]).toBeUndefined();
    expect(new Placer(input(three)).candidates(req({ placement: { mode: 'hosts', hosts: ['n3', 'n1', 'gone'] } }))).toEqual(['n1', 'n3']);
  });

  it('global: check() says whether a given host can take its replica', () => {
    const placer = new Placer(input(three, [placed('x', 'n2', { ports: [80] })]));
    const g = (host: string) => placer.check({ replica: `d-agent-${host}`, deployment: 'd', service: 'agent', spec: { image: 'x', placement: { mode: 'global' }, ports: [80] } }, host);
    expect(g('n1')).toBeUndefined();
    expect(g('n2')).toMatchObject({ filter: 'ports', reason: 'port_conflict', detail: 'host port 80 is taken' });
  });

  it('CPU is soft: an overcommitted node still fits, but scores lower', () => {
    const inp = input([node('a'), node('b')], [placed('x', 'a', { cpuMillis: 4000 })]);
    const d = new Placer(inp).decide(req({ resources: { cpu: '500m' } }));
    expect(d.chosen).toBe('b');
    expect(d.verdicts.find((v) => v.node === 'a')!.score!.parts.cpu).toBe(0);
    expect(new Placer(input([node('a')], [placed('x', 'a', { cpuMillis: 4000 })])).decide(req({ resources: { cpu: '500m' } })).chosen).toBe('a');
  });

  it('recent failures: a node where replicas keep restarting is chosen last among equals, and the decision says why', () => {
    // b has more CPU headroom (a is half booked), so b wins — until its replicas restart recently.
    const busyA = [placed('x', 'a', { cpuMillis: 2000 })];
    expect(new Placer(input([node('a'), node('b')], busyA)).decide(req()).chosen).toBe('b');
    const d = new Placer(input([node('a'), node('b', { recentFailures: 2 })], busyA)).decide(req());
    expect(d.chosen).toBe('a');
    expect(d.why).toContain('runner-up b (-13.578: 2 recent failure(s) there)');
    expect(d.verdicts.find((v) => v.node === 'b')?.score?.parts).toMatchObject({ failures: 2 });
    expect(d.verdicts.find((v) => v.node === 'a')?.score?.parts).not.toHaveProperty('failures');
    // Failures never outweigh spread: a node already holding a replica of the service loses to one with failures.
    const withPeer = new Placer(input([node('a'), node('b', { recentFailures: 9 })], [placed('d-web-9', 'a', { service: 'web' })])).decide(req());
    expect(withPeer.chosen).toBe('b');
    expect(withPeer.verdicts.find((v) => v.node === 'b')?.score?.parts.failures).toBe(4); // capped
  });

  it('priority order is the caller\'s: a high-priority service placed first takes the last slot', () => {
    const placer = new Placer(input([node('a', { capacity: { cpuMillis: 1000, memoryBytes: 600 * Mi, gpus: 0 } })]));
    expect(placer.place({ ...req({ resources: { memory: '500Mi' }, priority: 10 }), service: 'important', replica: 'd-important-0' }).chosen).toBe('a');
    expect(placer.place(req({ resources: { memory: '500Mi' } })).reason).toBe('no_capacity_memory');
  });
});

describe('determinism and stability', () => {
  const nodes = Array.from({ length: 7 }, (_, i) => node(`node-${i}`, { capacity: { cpuMillis: 2000, memoryBytes: 4 * Gi, gpus: 0 }, labels: { zone: i % 2 ? 'a' : 'b' } }));
  const existing = [placed('p1', 'node-1', { cpuMillis: 500 }), placed('p2', 'node-4', { memoryBytes: Gi, ports: [9000] })];

  it('shuffled inputs give the same plan', () => {
    const want = placeAll(input(nodes, existing), { ports: [9000], resources: { cpu: '300m', memory: '256Mi' } }, 6);
    for (let seed = 1; seed <= 20; seed++) expect(placeAll(input(shuffled(nodes, seed), shuffled(existing, seed + 1)), { ports: [9000], resources: { cpu: '300m', memory: '256Mi' } }, 6)).toEqual(want);
  });

  it('the same index keeps choosing the same node for the same eligible set', () => {
    const a = new Placer(input(nodes)).decide(req({}, 3)).chosen;
    const b = new Placer(input([...nodes].reverse())).decide(req({}, 3)).chosen;
    expect(a).toBe(b);
  });

  it('spread stability: removing a node that holds no replica moves nothing else', () => {
    const before = placeAll(input(nodes), {}, 4);
    const unused = nodes.map((n) => n.name).filter((n) => !before.includes(n));
    for (const gone of unused) expect(placeAll(input(nodes.filter((n) => n.name !== gone)), {}, 4)).toEqual(before);
  });

  it('node loss: the lost replica is re-placed beside the survivors, which stay put', () => {
    const before = placeAll(input(nodes), {}, 4);
    const gone = before[2]!;
    const survivors = before.map((n, i) => ({ n, i })).filter(({ i }) => i !== 2);
    const placer = new Placer(input(nodes.filter((n) => n.name !== gone), survivors.map(({ n, i }) => placed(`d-web-${i}`, n!, { service: 'web' }))));
    const again = placer.place(req({}, 2)).chosen!;
    expect(again).not.toBe(gone);
    expect(survivors.map(({ n }) => n)).not.toContain(again);
  });
});

describe('explanations', () => {
  it('keeps every verdict on small clusters and a summary on large ones', () => {
    const small = new Placer(input([node('a'), node('b', { ineligible: 'cordoned' })])).decide(req());
    expect(small.verdicts).toHaveLength(2);
    expect(small.why).toMatch(/^a: highest score .* among 1 candidate\(s\)$/);
    const many = Array.from({ length: 200 }, (_, i) => node(`n${String(i).padStart(3, '0')}`, i % 2 ? { ineligible: 'NotReady' } : {}));
    const big = new Placer(input(many)).decide(req());
    expect(big.verdicts.length).toBe(15); // 10 rejections, the winner and the next 4
    expect(big.omitted).toEqual({ eligibility: 90, scored: 95 });
  });
});

describe('recent failures from the restart bookkeeping', () => {
  const NOW = Date.parse('2026-11-25T10:00:00Z');
  const cmd = (restarts: number, agoMs: number, cause?: string) => ({
    key: 'x',
    modRevision: 1,
    createRevision: 1,
    version: 1,
    value: { apiVersion: 'jaco.dev/v1', kind: 'ReplicaCommand', metadata: { name: 'r' }, spec: { replica: 'r', op: 'restart', seq: restarts, issuedAt: '', reason: '' }, status: { restarts, lastRestartAt: new Date(NOW - agoMs).toISOString(), ...(cause ? { lastRestartCause: cause } : {}) } },
  }) as const;
  it('counts, per node, the consecutive restarts of replicas last restarted within the window', () => {
    const commands = new Map([
      ['commands/node-1/a', cmd(2, 60_000)],
      ['commands/node-1/b', cmd(1, 5 * 60_000)],
      ['commands/node-2/c', cmd(3, RECENT_FAILURE_WINDOW_MS + 1)], // too long ago
      ['commands/node-3/d', cmd(0, 1_000)], // recovered: its counter was cleared
      ['commands/node-1/e', cmd(1, 1_000, 'exited')],
      ['commands/node-4/f', cmd(2, 1_000, 'removed')], // docker rm, jaco down: not the node's failure
    ]) as unknown as Parameters<typeof recentFailuresOf>[0];
    expect(recentFailuresOf(commands, NOW)).toEqual(new Map([['node-1', 4]]));
  });
});

describe('scratch disk and degraded nodes (seed 004 node eligibility)', () => {
  const disk = (name: string, diskBytes: number, extra: Partial<NodeInfo> = {}) => node(name, { capacity: { cpuMillis: 1000, memoryBytes: 2 * Gi, gpus: 0, diskBytes }, ...extra });

  it('disk is booked like memory: the default per replica, resources.disk where set, freed by forget', () => {
    const placer = new Placer({ ...input([disk('a', 10 * Gi)]), defaultDiskBytes: 4 * Gi });
    expect(placer.place(req({ placement: { mode: 'pack' } }, 0)).chosen).toBe('a');
    expect(placer.place(req({ placement: { mode: 'pack' } }, 1)).chosen).toBe('a');
    // 8 of 10 GiB booked: a third default replica does not fit, a 2Gi one does.
    const third = placer.decide(req({ placement: { mode: 'pack' } }, 2));
    expect(third.reason).toBe('no_capacity_disk');
    expect(third.verdicts[0]!.rejected!.detail).toBe('needs 4Gi of scratch disk; 2Gi of 10Gi unbooked');
    expect(placer.place(req({ placement: { mode: 'pack' }, resources: { disk: '2Gi' } }, 2)).chosen).toBe('a');
    placer.forget('d-web-0', 'a');
    expect(placer.decide(req({ placement: { mode: 'pack' } }, 3)).chosen).toBe('a');
  });

  it('the cluster default is the input\'s: 1Gi lets ten replicas onto a 10Gi node', () => {
    expect(placeAll({ ...input([disk('a', 10 * Gi)]), defaultDiskBytes: Gi }, { placement: { mode: 'pack' } }, 11).filter(Boolean)).toHaveLength(10);
  });

  it('a node whose agent reports no disk (older agent) books none: disk never rejects it', () => {
    expect(placeAll(input([node('a')]), { placement: { mode: 'pack' }, resources: { disk: '1Ti' } }, 3)).toEqual(['a', 'a', 'a']);
  });

  it('a degraded node loses to any healthy one, names its causes in its verdict, and a cluster of degraded nodes is node_degraded', () => {
    const why = 'degraded: overlay_unreachable — 2 of 2 WireGuard peers unreachable';
    const d = new Placer(input([node('a', { degraded: why }), node('b')])).decide(req());
    expect(d.chosen).toBe('b');
    expect(d.verdicts.find((v) => v.node === 'a')!.rejected).toEqual({ filter: 'degraded', reason: 'node_degraded', detail: why });
    // NotReady is judged first: a NotReady node is no_nodes_active whatever its samples said.
    expect(new Placer(input([node('a', { ineligible: 'NotReady (no fresh heartbeat)', degraded: why })])).decide(req()).verdicts[0]!.rejected!.filter).toBe('eligibility');
    // A service pinned to a degraded node is told so, not that the other nodes are not its hosts.
    expect(new Placer(input([node('a', { degraded: why }), node('b')])).decide(req({ placement: { mode: 'hosts', hosts: ['a'] } })).reason).toBe('node_degraded');
    // Beyond degraded the pipeline goes on: a degraded node and a full one say the furthest reason.
    expect(new Placer(input([node('a', { degraded: why }), disk('b', Gi)])).decide(req()).reason).toBe('no_capacity_disk');
  });
});
