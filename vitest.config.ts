// Five tiers: unit (pure code, tables; beside the code), integration (real etcd, one member per
// file on free loopback ports), sim (the deterministic simulation, seeded), e2e (real etcd + real
// Docker, one file at a time) and chaos (seeded faults on the real thing, after e2e).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts', 'controllers/**/*.test.ts'],
          testTimeout: 20_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          // A bound on a hang, not on speed: a case of thirty CLI processes in a row took 60 s on
          // a loaded machine (cli-faults, 2026-11-28) and is no slower for being allowed 180.
          testTimeout: 180_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'sim',
          include: ['test/sim/**/*.test.ts'],
          testTimeout: 600_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/e2e-global.ts'],
          testTimeout: 240_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        // Chaos on the real thing (3-member etcd, two controller copies, agents, Docker): as
        // Docker-heavy as e2e, run after it, one file at a time.
        test: {
          name: 'chaos',
          include: ['test/chaos/**/*.test.ts'],
          globalSetup: ['test/support/e2e-global.ts'],
          testTimeout: 300_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
