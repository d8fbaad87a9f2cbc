// Pressure sampling with real containers: two simulated nodes share one Docker engine, and each
// agent (--pressure containers) counts only its own containers, so a CPU burner on one node raises
// that node's cpu_util while the other's stays near 0. An agent with --pressure node (a real host's
// default) reports the whole host instead.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { Heartbeat } from '../../src/api/types.js';
import { nodeMemoryUtil, parseMeminfo } from '../../controllers/node-agent/node-usage.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';
import { deleteDesired, desired, IMAGE, metric, metricsUrl, putDesired, SLEEPER, waitObserved } from './agent-fixtures.js';

let c: TestCluster;
beforeAll(async () => {
  c = await startCluster({ nodes: 2, controllers: false, capacity: 'cpu=1,memory=2Gi' });
});
afterAll(async () => {
  await c?.stop();
});

const pressure = async (node: string) => (await c.store.get<Heartbeat>(keys.heartbeat(node)))?.value.spec.pressure;

describe('pressure', () => {
  it('a CPU burner raises its node’s cpu_util while the other node’s stays near 0', async () => {
    // Half a core at most: on a 1-CPU simulated node that is a cpu_util of about 0.5.
    const burner = { image: IMAGE, command: ['sh', '-c', 'while :; do :; done'], resources: { cpu: '500m' }, stopGracePeriod: '1s' };
    await putDesired(c.store, desired('node-1', 'demo-burn-1', burner, { service: 'burn' }), desired('node-2', 'demo-idle-1', SLEEPER, { service: 'idle' }));
    await waitObserved(c.store, 'node-1', 'demo-burn-1', (s) => s.state === 'running', 'running');
    await waitObserved(c.store, 'node-2', 'demo-idle-1', (s) => s.state === 'running', 'running');
    try {
      const [hot, cool] = await c.withLogs(() => eventually(
        async () => {
          const [p1, p2] = [await pressure('node-1'), await pressure('node-2')];
          const burn = p1?.replicas['demo-burn-1'];
          return p1 && p2 && burn && burn.cpuMillis > 250 && p1.cpuUtil > 0.25 && p2.replicas['demo-idle-1'] ? [p1, p2] : undefined;
        },
        { what: 'node-1 hot and node-2 reporting', timeoutMs: 30_000 },
      ));
      expect(hot.cpuUtil).toBeLessThan(0.75); // the NanoCpus limit holds
      expect(Object.keys(hot.replicas)).toEqual(['demo-burn-1']);
      expect(hot.replicas['demo-burn-1']!.memoryBytes).toBeGreaterThan(0);
      expect(cool.cpuUtil).toBeLessThan(0.1);
      expect(Object.keys(cool.replicas)).toEqual(['demo-idle-1']);
      expect(cool.replicas['demo-idle-1']!.cpuMillis).toBeLessThan(100);
      expect(cool.memoryUtil).toBeLessThan(0.05);
      expect(Date.now() - Date.parse(hot.time)).toBeLessThan(30_000);
      const url = await metricsUrl(c.agent('node-1')!);
      expect(await metric(url, 'jaco_agent_pressure', 'dimension="cpu"')).toBeGreaterThan(0.25);
      expect(await metric(url, 'jaco_agent_sample_duration_seconds_count')).toBeGreaterThan(0);
      // Read from cgroup files, not Docker's stats API.
      expect((await metric(url, 'jaco_agent_sample_fallbacks_total')) ?? 0).toBe(0);
    } finally {
      await deleteDesired(c.store, 'node-1', 'demo-burn-1');
    }
    // Once the burner is gone, node-1 cools down.
    await eventually(async () => {
      const p = await pressure('node-1');
      return p && !p.replicas['demo-burn-1'] && p.cpuUtil < 0.1;
    }, { what: 'node-1 cool again', timeoutMs: 30_000 });
  });

  it('an agent with --pressure node reports the whole host (root cgroup CPU, /proc/meminfo) and says so', async () => {
    await c.startAgent('node-3', ['--pressure', 'node']);
    const p = await eventually(async () => {
      const s = await pressure('node-3');
      return s?.mode === 'node' ? s : undefined;
    }, { what: 'node-3 reporting node-wide pressure', timeoutMs: 30_000 });
    // What the host uses, not what the agent's (no) containers use.
    const host = nodeMemoryUtil(parseMeminfo(readFileSync('/proc/meminfo', 'utf8')));
    expect(host).toBeGreaterThan(0);
    expect(Math.abs(p.memoryUtil - host)).toBeLessThan(0.05);
    expect(p.cpuUtil).toBeGreaterThanOrEqual(0);
    expect(p.cpuUtil).toBeLessThanOrEqual(1);
    expect(p.replicas).toEqual({});
    expect((await pressure('node-1'))?.mode).toBe('containers');
    // The CLI says which mode each node's figures are in.
    const wide = await c.jaco(['get', 'nodes', '-o', 'wide']);
    expect(wide.code, wide.stderr).toBe(0);
    expect(wide.stdout).toMatch(/^node-3\s.*\snode\s/m);
    expect(wide.stdout).toMatch(/^node-1\s.*\scontainers\s/m);
    expect((await c.jaco(['describe', 'node', 'node-3'])).stdout).toMatch(/^Pressure: .*\(node-wide\)$/m);
    await c.agent('node-3')!.kill('SIGTERM');
  });
});
