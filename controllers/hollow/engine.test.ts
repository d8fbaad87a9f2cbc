import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ReplicaDesiredSpec } from '../../src/api/types.js';
import { createOptions } from '../node-agent/container-spec.js';
import type { Owner } from '../node-agent/engine.js';
import { draw, HollowEngine } from './engine.js';
import { hollowAddress, hollowNodeName } from './fleet.js';

const owner: Owner = { clusterUid: 'c0ffee00-0000-0000-0000-000000000000', node: 'hollow-0001' };

function spec(replica: string, healthcheck = false): ReplicaDesiredSpec {
  return {
    replica,
    deployment: 'd',
    service: 'app',
    node: owner.node,
    index: 0,
    revision: 1,
    specHash: 'abcdef0123456789',
    template: { image: 'hollow/app:1', resources: { cpu: '500m', memory: '128Mi' }, ...(healthcheck ? { healthcheck: { test: ['CMD', 'true'], interval: '1s' } } : {}) },
  } as unknown as ReplicaDesiredSpec;
}

afterEach(() => vi.useRealTimers());

describe('HollowEngine', () => {
  it('runs a container after the start latency and reports synthetic usage within its limits', async () => {
    vi.useFakeTimers();
    const rt = new HollowEngine(owner, { startLatencyMs: 200, failRate: 0, seed: 1 });
    const events: string[] = [];
    await rt.watchEvents((_id, a) => events.push(a), new AbortController().signal);
    const id = await rt.create(createOptions(spec('d-app-0'), owner));
    expect((await rt.inspect(id))?.state).toBe('created');
    const started = rt.start(id);
    await vi.advanceTimersByTimeAsync(199);
    expect((await rt.inspect(id))?.state).toBe('created');
    await vi.advanceTimersByTimeAsync(1);
    await started;
    const f = (await rt.inspect(id))!;
    expect(f).toMatchObject({ state: 'running', replica: 'd-app-0', deployment: 'd', service: 'app', revision: 1, specHash: 'abcdef0123456789', health: 'none' });
    await vi.advanceTimersByTimeAsync(1000);
    const u = rt.read(id)!;
    // 500m for 1 s at 20 … 80 % of the limit; memory 20 … 80 % of 128 MiB.
    expect(u.cpuUsageNs).toBeGreaterThanOrEqual(0.2 * 500 * 1e6);
    expect(u.cpuUsageNs).toBeLessThanOrEqual(0.8 * 500 * 1e6);
    expect(u.memoryBytes).toBeLessThanOrEqual(0.8 * 128 * 2 ** 20);
    await rt.stop(id);
    await rt.remove(id);
    expect(await rt.inspect(id)).toBeUndefined();
    expect(events).toEqual(['create', 'start', 'die', 'destroy']);
  });

  it('refuses a second container of one name (409), and 404s an unknown one', async () => {
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const opts = createOptions(spec('d-app-0'), owner);
    const id = await rt.create(opts);
    await expect(rt.create(opts)).rejects.toMatchObject({ name: 'DockerApiError', statusCode: 409 });
    expect((await rt.inspect(opts.name!))?.id).toBe(id);
    await expect(rt.start('nope')).rejects.toMatchObject({ statusCode: 404 });
  });

  it('fails containers by the seeded draw: unhealthy with a health check, exit 1 without', async () => {
    vi.useFakeTimers();
    const rt = new HollowEngine(owner, { startLatencyMs: 0, failRate: 1, seed: 1 });
    const a = await rt.create(createOptions(spec('d-app-0', true), owner));
    const b = await rt.create(createOptions({ ...spec('d-app-1'), replica: 'd-app-1' }, owner));
    void rt.start(a);
    void rt.start(b);
    await vi.advanceTimersByTimeAsync(1001);
    expect(await rt.inspect(a)).toMatchObject({ state: 'running', health: 'unhealthy' });
    expect(await rt.inspect(b)).toMatchObject({ state: 'exited', exitCode: 1 });
    const ok = new HollowEngine(owner, { startLatencyMs: 0, failRate: 0, seed: 1 });
    const c = await ok.create(createOptions(spec('d-app-0', true), owner));
    void ok.start(c);
    await vi.advanceTimersByTimeAsync(1001);
    expect(await ok.inspect(c)).toMatchObject({ state: 'running', health: 'healthy' });
  });

  it('draws the same number for the same seed and names, and spreads them', () => {
    expect(draw(7, 'n', 'r', 1)).toBe(draw(7, 'n', 'r', 1));
    expect(draw(7, 'n', 'r', 1)).not.toBe(draw(8, 'n', 'r', 1));
    const xs = Array.from({ length: 2000 }, (_, i) => draw(1, 'n', `r${i}`));
    const failed = xs.filter((x) => x < 0.1).length;
    expect(failed).toBeGreaterThan(150);
    expect(failed).toBeLessThan(250);
  });
});

describe('hollow node names and addresses', () => {
  it('pads names so they sort as numbers, and gives each node its own loopback address', () => {
    expect(hollowNodeName('hollow-', 7, 1000)).toBe('hollow-0007');
    expect(hollowNodeName('hollow-', 7, 20000)).toBe('hollow-00007');
    expect(hollowAddress(1)).toBe('127.2.0.1');
    expect(hollowAddress(1000)).toBe('127.2.3.232');
  });
});
