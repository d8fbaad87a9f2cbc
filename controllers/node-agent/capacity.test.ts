// The agent's flags: capacity, labels, status interval, Docker host.
import { describe, expect, it } from 'vitest';
import { FAST, PRODUCTION } from '../../src/timings.js';
import { AgentFlagError, dockerConnection, parseCapacity, parseLabels, parseStatusInterval, resolveCapacity } from './capacity.js';

describe('parseCapacity', () => {
  it.each([
    ['cpu=2,memory=4Gi,gpus=0', { cpuMillis: 2000, memoryBytes: 4 * 1024 ** 3, gpus: 0 }],
    ['cpu=500m', { cpuMillis: 500 }],
    [' cpu = 1.5 , memory=512M ', { cpuMillis: 1500, memoryBytes: 512e6 }],
    ['gpus=2', { gpus: 2 }],
    ['disk=100Gi', { diskBytes: 100 * 1024 ** 3 }],
    ['', {}],
  ])('%j', (spec, want) => expect(parseCapacity(spec)).toEqual(want));

  it.each([
    ['cpu', /not key=value/],
    ['cpus=2', /unknown key "cpus"/],
    ['cpu=lots', /cpu=lots/],
    ['memory=-1Gi', /memory=-1Gi/],
    ['gpus=1.5', /gpus=1.5/],
    ['gpus=', /not key=value/],
    ['disk=lots', /disk=lots/],
  ])('%j is refused', (spec, msg) => {
    expect(() => parseCapacity(spec)).toThrow(AgentFlagError);
    expect(() => parseCapacity(spec)).toThrow(msg);
  });

  it('detects what is not declared', async () => {
    const c = await resolveCapacity({ cpuMillis: 1000 });
    expect(c.cpuMillis).toBe(1000);
    expect(c.memoryBytes).toBeGreaterThan(0);
    expect(c.gpus).toBeGreaterThanOrEqual(0);
  });
});

describe('parseLabels', () => {
  it('reads k=v pairs with Kubernetes label syntax', () => {
    expect(parseLabels('zone=a, disk=ssd,jaco.dev/gpu=true,empty=')).toEqual({ zone: 'a', disk: 'ssd', 'jaco.dev/gpu': 'true', empty: '' });
    expect(parseLabels(undefined)).toEqual({});
  });
  it.each(['zone', '=a', 'bad key=a', 'zone=has space', `k=${'x'.repeat(64)}`])('%j is refused', (s) => expect(() => parseLabels(s)).toThrow(AgentFlagError));
});

describe('parseStatusInterval', () => {
  it('defaults to the timings', () => {
    expect(parseStatusInterval(undefined, PRODUCTION)).toBe(30_000);
    expect(parseStatusInterval(undefined, FAST)).toBe(1000);
  });
  it('allows 5s…5m (seed 001); fast timings may go lower', () => {
    expect(parseStatusInterval('5s', PRODUCTION)).toBe(5000);
    expect(parseStatusInterval('5m', PRODUCTION)).toBe(300_000);
    expect(() => parseStatusInterval('4s', PRODUCTION)).toThrow(/between 5s and 5m/);
    expect(() => parseStatusInterval('6m', PRODUCTION)).toThrow(AgentFlagError);
    expect(() => parseStatusInterval('soon', PRODUCTION)).toThrow(/not a duration/);
    expect(parseStatusInterval('500ms', FAST)).toBe(500);
  });
});

describe('dockerConnection', () => {
  it.each([
    ['unix:///var/run/docker.sock', { socketPath: '/var/run/docker.sock' }],
    ['tcp://127.0.0.1:2375', { host: '127.0.0.1', port: 2375, protocol: 'http' }],
    ['http://[::1]:2375/', { host: '::1', port: 2375, protocol: 'http' }],
  ])('%s', (h, want) => expect(dockerConnection(h)).toEqual(want));
  it.each(['/var/run/docker.sock', 'tcp://host', 'npipe:////./pipe/docker'])('%s is refused', (h) => expect(() => dockerConnection(h)).toThrow(AgentFlagError));
});
