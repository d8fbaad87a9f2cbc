// One start of a cluster-network replica, and the teardown of a sandbox, on the in-memory runtime
// and network: the sandbox is made and plumbed before the replica's container is created in it; a
// plugin failure is undone, reported and retried; a plumbed sandbox is joined as it is; a sandbox's
// addresses go before its container does.
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { LABELS } from '../../src/api/labels.js';
import { templateOf } from '../../src/api/serving.js';
import { API_VERSION, type ReplicaAddress, type ReplicaDesired } from '../../src/api/types.js';
import { FAST } from '../../src/timings.js';
import { HollowEngine } from '../hollow/engine.js';
import type { Owner } from './engine.js';
import { decide, type AgentSnapshot, type StartOrder } from './decide.js';
import { DockerView } from './docker-view.js';
import { Executor } from './executor.js';
import { MemoryNetwork, type SandboxNetns } from './network.js';
import { sandboxSpec } from './sandbox.js';
import { monotonicNow } from './running-clock.js';
import { Slots, StartWorker, type StarterDeps, type StartFiles } from './starter.js';

const log = pino({ level: 'silent' });
const owner: Owner = { clusterUid: 'c0ffee00-0000-0000-0000-000000000000', node: 'n1' };
const timings = { ...FAST, backoffMinMs: 5, backoffMaxMs: 20 };
const ADDRESS = { ipv4: '10.208.3.5/24', ipv6: 'fd4a:17c2:9e01:3::5/64' };

function desired(replica = 'demo-web-1'): ReplicaDesired {
  const t = templateOf(1, { image: 'jaco-demo/busybox:1', network: 'cluster', command: ['sleep', '3600'] });
  return {
    apiVersion: API_VERSION,
    kind: 'ReplicaDesired',
    metadata: { name: replica },
    spec: { replica, deployment: 'demo', service: 'web', node: 'n1', revision: 1, specHash: t.specHash, template: t.template, placedAt: new Date().toISOString(), address: ADDRESS },
  };
}

/** The order decide gives for a snapshot of one desired replica and these containers. */
async function orderFor(d: ReplicaDesired, rt: HollowEngine): Promise<StartOrder> {
  const all = await Promise.all((await rt.listOwn()).map((id) => rt.inspect(id)));
  const snap: AgentSnapshot = {
    node: 'n1',
    mono: monotonicNow(),
    desired: new Map([[d.spec.replica, d]]),
    invalid: new Map(),
    commands: new Map(),
    observed: new Map(),
    containers: all.filter((c) => c && c.role !== 'sandbox') as never,
    sandboxes: all.filter((c) => c?.role === 'sandbox') as never,
    starts: new Map(),
    stopping: new Set(),
  };
  return decide(snap, Date.now(), { healthRefreshMs: 30_000, startReportDelayMs: 0 }).starts[0]!;
}

function worker(order: StartOrder, rt: HollowEngine, network: MemoryNetwork, changed: () => void = () => undefined, extra: Partial<StarterDeps> = {}) {
  return new StartWorker(order, Date.now(), {
    docker: rt,
    slots: new Slots(4),
    owner,
    timings,
    log,
    refresh: async () => undefined,
    stop: async (id) => {
      const f = await rt.inspect(id);
      if (f?.role === 'sandbox' && f.address) await network.del({ id, pid: f.pid }, f.address);
      await rt.stop(id);
      await rt.remove(id);
    },
    changed,
    network,
    sandboxImage: () => '198.18.1.1:5000/jaco/pause:1',
    ...extra,
  });
}

describe('a start on the cluster network', () => {
  it('makes the sandbox, gives it the addresses, and only then creates the container in it', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const network = new MemoryNetwork();
    const plumbedAtCreate: boolean[] = [];
    const create = rt.create.bind(rt);
    rt.create = async (opts) => {
      if (opts.Labels?.[LABELS.role] !== 'sandbox') plumbedAtCreate.push([...network.held.values()].some((a) => a.includes('10.208.3.5/24')));
      return create(opts);
    };
    const d = desired();
    const w = worker(await orderFor(d, rt), rt, network);
    expect(w.progress.sandboxHash).toBe(sandboxSpec(d.spec)!.hash);
    expect(await w.run()).toBe('started');
    const all = await Promise.all((await rt.listOwn()).map((id) => rt.inspect(id)));
    const sb = all.find((c) => c?.role === 'sandbox')!;
    const app = all.find((c) => c?.role !== 'sandbox')!;
    expect(sb).toMatchObject({ state: 'running', image: '198.18.1.1:5000/jaco/pause:1', networkMode: 'none', address: ADDRESS, replica: d.spec.replica });
    expect(app).toMatchObject({ state: 'running', networkMode: `container:${sb.id}` });
    expect(network.held.get(sb.id)).toEqual(['10.208.3.5/24', 'fd4a:17c2:9e01:3::5/64']);
    expect(plumbedAtCreate).toEqual([true]);
  });

  it('a plugin failure is undone (DEL), reported pending/network_failed with its error, and retried until it succeeds', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const network = new MemoryNetwork();
    network.fail = 'failed to add route: network is unreachable';
    const seen: string[] = [];
    const w = worker(await orderFor(desired(), rt), rt, network, () => seen.push(`${w.progress.phase}:${w.progress.code ?? ''}:${w.progress.details ?? ''}`));
    const done = w.run();
    while (!seen.some((s) => s.startsWith('network_failed'))) await new Promise((r) => setTimeout(r, 2));
    expect(seen.find((s) => s.startsWith('network_failed'))).toBe('network_failed:network_failed:ptp ADD: failed to add route: network is unreachable');
    expect(network.held.size).toBe(0);
    // Still retrying: no container of the replica exists but its sandbox.
    await new Promise((r) => setTimeout(r, 30));
    expect((await Promise.all((await rt.listOwn()).map((id) => rt.inspect(id)))).map((c) => c?.role ?? 'app')).toEqual(['sandbox']);
    delete network.fail;
    expect(await done).toBe('started');
    expect(network.adds).toBe(1);
  });

  it('joins a sandbox that holds its addresses as it is (no second ADD); plumbs one that does not', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const network = new MemoryNetwork();
    const d = desired();
    expect(await worker(await orderFor(d, rt), rt, network).run()).toBe('started');
    // The container goes (removed behind the agent's back, say); the next start reuses the sandbox.
    const app = (await Promise.all((await rt.listOwn()).map((id) => rt.inspect(id)))).find((c) => c?.role !== 'sandbox')!;
    await rt.remove(app.id);
    const again = await orderFor(d, rt);
    expect(again.sandbox?.reuse).toBeDefined();
    expect(await worker(again, rt, network).run()).toBe('started');
    expect(network.adds).toBe(1);
    // A sandbox that lost its addresses (an agent stopped between start and ADD) is plumbed.
    const app2 = (await Promise.all((await rt.listOwn()).map((id) => rt.inspect(id)))).find((c) => c?.role !== 'sandbox')!;
    await rt.remove(app2.id);
    network.held.clear();
    expect(await worker(await orderFor(d, rt), rt, network).run()).toBe('started');
    expect(network.adds).toBe(2);
  });
});

describe('tearing a sandbox down', () => {
  it('its addresses go first (CNI DEL), then the container', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const network = new MemoryNetwork();
    expect(await worker(await orderFor(desired(), rt), rt, network).run()).toBe('started');
    const view = new DockerView(rt, timings, log, () => undefined);
    const ids = await rt.listOwn();
    for (const id of ids) await view.refresh(id);
    const sb = view.cache.values().find((c) => c.role === 'sandbox')!;
    const order: string[] = [];
    const del = network.del.bind(network);
    network.del = async (s: SandboxNetns, a?: ReplicaAddress) => {
      order.push(`del:${(await rt.inspect(s.id))?.state}`);
      return del(s, a);
    };
    const stop = rt.stop.bind(rt);
    rt.stop = async (id) => {
      order.push(`stop:${id === sb.id ? 'sandbox' : 'app'}`);
      return stop(id);
    };
    const ex = new Executor(view, owner, timings, log, () => undefined, network, () => 'p');
    await ex.stop(sb.id, 'orphaned', sb.replica);
    expect(order).toEqual(['del:running', 'stop:sandbox']);
    expect(network.held.size).toBe(0);
    expect(await rt.inspect(sb.id)).toBeUndefined();
  });

  it('a DEL that fails leaves the sandbox in place, for the stop to be tried again', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const network = new MemoryNetwork();
    expect(await worker(await orderFor(desired(), rt), rt, network).run()).toBe('started');
    const view = new DockerView(rt, timings, log, () => undefined);
    for (const id of await rt.listOwn()) await view.refresh(id);
    const sb = view.cache.values().find((c) => c.role === 'sandbox')!;
    network.del = async () => {
      throw new Error('ptp DEL: boom');
    };
    const ex = new Executor(view, owner, timings, log, () => undefined, network, () => 'p');
    // Asked as of the moment the stop began: its back-off runs from its failure, later than that
    // (asking as of "now" depends on how soon after the failure the test gets to ask).
    const began = monotonicNow();
    await expect(ex.stop(sb.id, 'orphaned', sb.replica)).rejects.toThrow('ptp DEL: boom');
    expect((await rt.inspect(sb.id))?.state).toBe('running');
    expect(ex.stoppingIds(began)).toContain(sb.id);
    ex.stopAll();
  });
});

describe('a restart of a replica with secrets or configs', () => {
  it('creates the fresh container with its files in place: the executor does not release the files of a name a start under way makes', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    // The files by container name, as the agent's ReplicaFiles keeps them (a directory each).
    const prepared = new Set<string>();
    const files: StartFiles = {
      dirOf: (c) => `/files/${c}`,
      prepare: async (c) => (prepared.add(c), `/files/${c}`),
      release: async (c) => void prepared.delete(c),
    };
    const t = templateOf(1, { image: 'jaco-demo/busybox:1', command: ['sleep', '3600'], configs: [{ source: 'conf', target: '/etc/app.conf' }] });
    const d: ReplicaDesired = { ...desired('demo-db-0'), spec: { ...desired('demo-db-0').spec, replica: 'demo-db-0', template: t.template, specHash: t.specHash, address: undefined } };
    const withFilesAtCreate: boolean[] = [];
    const create = rt.create.bind(rt);
    rt.create = async (opts) => {
      withFilesAtCreate.push(prepared.has(opts.name!));
      return create(opts);
    };
    const view = new DockerView(rt, timings, log, () => undefined);
    let changed = () => undefined as void;
    const ex = new Executor(view, owner, timings, log, () => changed(), new MemoryNetwork(), () => 'p', files);
    // Launches an order through the executor, as a pass does, and waits until its worker is done.
    const run = (order: StartOrder) =>
      new Promise<void>((resolve) => {
        changed = () => void (ex.starts().size === 0 && resolve());
        ex.launch(order);
      });
    await run({ replica: 'demo-db-0', kind: 'create', desired: d, stopFirst: [] });
    const [old] = await rt.listOwn();
    expect((await rt.inspect(old!))?.state).toBe('running');
    await run({ replica: 'demo-db-0', kind: 'restart', desired: d, stopFirst: [old!], command: 1 });
    const [fresh, ...others] = await rt.listOwn();
    expect(others).toEqual([]);
    expect(fresh).not.toBe(old);
    expect((await rt.inspect(fresh!))?.state).toBe('running');
    expect(withFilesAtCreate).toEqual([true, true]);
    expect([...prepared]).toEqual([(await rt.inspect(fresh!))!.name]);
    // A stop with no start under way releases them.
    await ex.stop(fresh!, 'orphaned', 'demo-db-0');
    expect(prepared.size).toBe(0);
    ex.stopAll();
  });
});
