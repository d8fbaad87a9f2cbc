// The agent's flags: capacity, labels, status interval, Docker host.
import { describe, expect, it } from 'vitest';
import { FAST, PRODUCTION } from '../../src/timings.js';
import { AgentFlagError, checkStatusInterval, dockerConnection, gpusListed, parseCapacity, parseDevices, parseLabels, resolveCapacity } from './capacity.js';

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

describe('GPUs and devices', () => {
  it('nvidia-smi -L: the count, each index and UUID', () => {
    const out = 'GPU 0: Tesla T4 (UUID: GPU-5f2c0c1e-aaaa)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-77ab)\n  MIG 1g.5gb Device 0: (UUID: MIG-1234)\n';
    expect(gpusListed(out)).toEqual({ count: 2, ids: ['0', 'GPU-5f2c0c1e-aaaa', '1', 'GPU-77ab'] });
    expect(gpusListed('')).toEqual({ count: 0, ids: [] });
  });

  it('a declared GPU count has the ids 0…N-1; declared devices are kept', async () => {
    expect(await resolveCapacity({ cpuMillis: 1, memoryBytes: 1, gpus: 2, devices: ['/dev/fuse'] })).toEqual({ cpuMillis: 1, memoryBytes: 1, gpus: 2, gpuIds: ['0', '1'], devices: ['/dev/fuse'] });
    expect(await resolveCapacity({ cpuMillis: 1, memoryBytes: 1, gpus: 0 })).toEqual({ cpuMillis: 1, memoryBytes: 1, gpus: 0 });
  });

  it('--device: absolute paths that exist here, each once', () => {
    const here = new Set(['/dev/fuse', '/dev/kvm']);
    expect(parseDevices(['/dev/kvm', '/dev/fuse', '/dev/kvm'], (p) => here.has(p))).toEqual(['/dev/fuse', '/dev/kvm']);
    expect(() => parseDevices(['fuse'], () => true)).toThrow('--device: "fuse" is not an absolute device path (e.g. /dev/fuse)');
    expect(() => parseDevices(['/dev/sda:/dev/xvda'], () => true)).toThrow(AgentFlagError);
    expect(() => parseDevices(['/dev/nvidia9'], (p) => here.has(p))).toThrow('--device: /dev/nvidia9 does not exist on this host');
  });
});

describe('parseLabels', () => {
  it('reads k=v pairs with Kubernetes label syntax', () => {
    expect(parseLabels('zone=a, disk=ssd,jaco.dev/gpu=true,empty=')).toEqual({ zone: 'a', disk: 'ssd', 'jaco.dev/gpu': 'true', empty: '' });
    expect(parseLabels(undefined)).toEqual({});
  });
  it.each(['zone', '=a', 'bad key=a', 'zone=has space', `k=${'x'.repeat(64)}`])('%j is refused', (s) => expect(() => parseLabels(s)).toThrow(AgentFlagError));
});

describe('checkStatusInterval', () => {
  it('defaults to the timings', () => {
    expect(checkStatusInterval(undefined, PRODUCTION)).toBe(30_000);
    expect(checkStatusInterval(undefined, FAST)).toBe(1000);
  });
  it('allows 5s…5m (seed 001); fast timings may go lower', () => {
    expect(checkStatusInterval(5000, PRODUCTION)).toBe(5000);
    expect(checkStatusInterval(300_000, PRODUCTION)).toBe(300_000);
    expect(() => checkStatusInterval(4000, PRODUCTION)).toThrow(/between 5s and 5m \(got 4s\)/);
    expect(() => checkStatusInterval(360_000, PRODUCTION)).toThrow(AgentFlagError);
    expect(checkStatusInterval(500, FAST)).toBe(500);
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
