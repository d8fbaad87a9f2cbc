// A kept placer is the same placer a fresh build gives: after any sequence of cache changes —
// replicas placed, moved, suspended, removed; nodes joining, leaving, cordoned, resized; address
// claims, volume homes, subnets — and passes that borrowed it for what-ifs and assumed moves, the
// patched placer's state equals placerFor's on the same cache.
import { describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { AddressClaim, NodeSubnet, ReplicaDesired, ServiceSpec, VolumeHome } from '../../src/api/types.js';
import { Cache } from '../../src/runtime/cache.js';
import { MemoryStore } from '../../test/support/memory-store.js';
import { prng } from '../../test/support/random.js';
import { heartbeat, nodeObj, replica, T0 } from '../../test/support/rebalancer-world.js';
import { moverView, MOVER_READS } from '../moves/move.js';
import { placerFor, type PlacementView } from './input.js';
import { KEPT_PLACER } from './kept.js';

const NODES = ['n0', 'n1', 'n2', 'n3', 'n4', 'n5'];
const meta = <K extends string>(kind: K, name: string) => ({ apiVersion: 'jaco.dev/v1' as const, kind, metadata: { name } });

function world(seed: number) {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
  const store = new MemoryStore();
  const cache = new Cache(store);
  const view = (): PlacementView => ({ ...moverView(cache), nodes: [...cache.kind<ReturnType<typeof nodeObj>>('nodes').items.values()].map((v) => v.value), drains: new Map() });
  const spec = (): ServiceSpec => ({
    image: 'x',
    resources: { cpu: `${pick([0, 100, 250])}m`, memory: `${pick([16, 64, 128])}Mi`, ...(rnd() < 0.2 ? { gpus: pick([1, 'all'] as const) } : {}) },
    ...(rnd() < 0.3 ? { ports: [{ containerPort: 80, hostPort: pick([8080, 8081]) }] } : {}),
    ...(rnd() < 0.2 ? { volumes: [{ type: 'volume' as const, source: pick(['data', 'logs']), target: '/d', readOnly: rnd() < 0.5 }] } : {}),
  });
  const put = (key: string, value: unknown) => store.put(key, value);
  const desiredKeys = () => store.keys('desired/');
  // One random change to the cluster, as a controller or an operator would make it.
  const change = (now: number): void => {
    const r = rnd();
    const node = pick(NODES);
    if (r < 0.35) {
      const id = `d${Math.floor(rnd() * 4)}-s${Math.floor(rnd() * 3)}-${Math.floor(rnd() * 6)}`;
      put(keys.desired(node, id), replica(id, node, { spec: spec() }).desired);
    } else if (r < 0.5 && desiredKeys().length) {
      store.remove(pick(desiredKeys()));
    } else if (r < 0.6 && desiredKeys().length) {
      // The same key edited: suspended (preempted frees its room), resumed, or a new template.
      const key = pick(desiredKeys());
      const d = store.get<ReplicaDesired>(key)!;
      put(key, { ...d, spec: rnd() < 0.5 ? { ...d.spec, suspended: d.spec.suspended ? undefined : { reason: pick(['preempted', 'node_drained'] as const), at: new Date(now).toISOString() } } : { ...d.spec, template: spec() } });
    } else if (r < 0.68) {
      put(keys.node(node), nodeObj(node, { cordoned: rnd() < 0.3, memoryBytes: pick([2, 4]) * 1024 ** 3, labels: { zone: pick(['a', 'b']) } }));
    } else if (r < 0.72) {
      store.remove(keys.node(node));
    } else if (r < 0.8) {
      put(keys.heartbeat(node), heartbeat(node, now - pick([0, 10 * 60_000])));
    } else if (r < 0.88) {
      const n = Math.floor(rnd() * 4) + 2;
      const key = keys.address(node, n);
      if (store.has(key) && rnd() < 0.5) store.remove(key);
      else put(key, { ...meta('AddressClaim', `${node}-${n}`), spec: { node, replica: 'r', deployment: 'd', service: 's', ipv4: `10.0.${NODES.indexOf(node)}.${n}`, ipv6: `fd00::${n}`, since: new Date(now).toISOString() } } satisfies AddressClaim);
    } else if (r < 0.93) {
      const i = NODES.indexOf(node);
      put(keys.subnet(node), { ...meta('NodeSubnet', node), spec: { node, index: i, ipv4: `10.0.${i}.0/${pick([24, 28])}`, ipv6: `fd00:${i}::/64`, since: new Date(now).toISOString() } } satisfies NodeSubnet);
    } else {
      const volume = pick(['data', 'logs']);
      put(keys.volumeHome('d0', volume), { ...meta('VolumeHome', `d0-${volume}`), spec: { deployment: 'd0', volume, node, since: new Date(now).toISOString() } } satisfies VolumeHome);
    }
  };
  return { rnd, pick, store, cache, view, change, spec };
}

describe('the kept placer (issue 30: kept between passes, patched from the cache)', () => {
  it.each(Array.from({ length: 24 }, (_, k) => k + 1))('seed %i: after every change and every borrowing pass, it equals a fresh build', async (seed) => {
    const w = world(seed);
    for (const n of NODES) w.store.put(keys.node(n), nodeObj(n));
    for (const n of NODES) w.store.put(keys.heartbeat(n), heartbeat(n, T0));
    await w.cache.start();
    expect(MOVER_READS.every((s) => w.cache.holds(s))).toBe(true);
    const kept = w.cache.index(KEPT_PLACER);
    let now = T0;
    for (let step = 0; step < 60; step++) {
      now += 1000;
      for (let k = Math.floor(w.rnd() * 3); k >= 0; k--) w.change(now);
      const v = w.view();
      const placer = kept.at(v, now);
      expect(placer.state()).toEqual(placerFor(v, now).state());
      // A pass borrows it: what-ifs, assumed moves, ports and addresses given, volume homes recorded.
      for (let k = Math.floor(w.rnd() * 4); k >= 0; k--) {
        const node = w.pick(placer.names.length ? placer.names : NODES);
        const spec = w.spec();
        const id = `tmp-${step}-${k}`;
        placer.assume({ id, deployment: 'd9', service: 'x', node, cpuMillis: 10, memoryBytes: 1024, gpus: 0, ports: [9000 + k] });
        placer.assignPorts(id, node, { ...spec, ports: [{ containerPort: 81 }] });
        placer.assignAddress(id, node, { ...spec, network: 'cluster' });
        placer.recordVolumeHome('d9', 'v', node);
        const victim = w.store.keys(`desired/${node}/`)[0];
        if (victim) placer.forget(victim.split('/')[2]!, node);
        placer.decide({ replica: id, deployment: 'd9', service: 'x', spec });
      }
    }
    // The last pass's edits are undone by the next borrowing, without any change in between.
    const v = w.view();
    expect(kept.at(v, now).state()).toEqual(placerFor(v, now).state());
    await w.cache.stop();
  });
});
