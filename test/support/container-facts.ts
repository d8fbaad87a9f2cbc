// Test helper: one container's facts as decide() and the samplers read them — running, no health
// check, started a minute before `now` — with whatever a table row overrides.
import type { ContainerFacts } from '../../controllers/node-agent/facts.js';

export function containerFacts(now: number, o: Partial<ContainerFacts> = {}): ContainerFacts {
  return {
    id: 'c1',
    name: 'jaco-x-n1-web-1',
    replica: 'web-1',
    deployment: 'demo',
    service: 'web',
    revision: 1,
    specHash: 'h1',
    image: 'jaco-demo/busybox:1',
    state: 'running',
    health: 'none',
    exitCode: 0,
    oomKilled: false,
    createdAt: new Date(now - 61_000).toISOString(),
    startedAt: new Date(now - 60_000).toISOString(),
    ports: [],
    pid: 100,
    ...o,
  };
}
