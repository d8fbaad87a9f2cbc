// Six tiers: unit (pure code, tables; beside the code), integration (real etcd, one member per
// file on free loopback ports), sim (the deterministic simulation, seeded), e2e and e2e-hosts (real
// etcd + real Docker: the files on this machine's engine, and the files that make separate hosts of
// their own — network namespaces, an engine per node; each one file at a time) and chaos (seeded
// faults on the real thing). `npx vitest run --project 'e2e*'` runs every end-to-end file.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

/**
 * The end-to-end files that run on separate hosts of their own (`jaco up`'s, or a network claimed
 * as it claims one): nothing they make is shared with a file on this machine's engine (their
 * network is claimed atomically, their engines and addresses are their own), so scripts/test.sh
 * runs them as a second lane beside the others. Known by what they use, so a new file finds its
 * lane by itself.
 */
const e2eDir = fileURLToPath(new URL('test/e2e/', import.meta.url));
const separateHosts = readdirSync(e2eDir)
  .filter((f) => f.endsWith('.test.ts') && /\b(UpCluster|claimNetwork)\b/.test(readFileSync(e2eDir + f, 'utf8')))
  .map((f) => `test/e2e/${f}`);

/**
 * expect.poll's own default (1 s) is a bound on speed, not on a hang: an action from the dashboard
 * that runs the CLI's code took longer than that on a loaded machine (a clean run, with the other
 * e2e lane beside it). The real-thing tiers wait as long as their other waits do.
 */
const realThingPoll = { timeout: 30_000, interval: 100 };

/** What every tier on the real thing (real etcd, real Docker) shares: its sweep, its waits, one file at a time. */
const realThing = {
  expect: { poll: realThingPoll },
  globalSetup: ['test/support/e2e-global.ts'],
  hookTimeout: 120_000,
  fileParallelism: false,
};

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
          ...realThing,
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          exclude: separateHosts,
          testTimeout: 240_000,
        },
      },
      {
        test: {
          ...realThing,
          name: 'e2e-hosts',
          include: separateHosts,
          testTimeout: 240_000,
        },
      },
      {
        // Chaos on the real thing (3-member etcd, two controller copies, agents, Docker): as
        // Docker-heavy as e2e, one file at a time; make test runs it after e2e-hosts, in that lane.
        test: {
          ...realThing,
          name: 'chaos',
          include: ['test/chaos/**/*.test.ts'],
          testTimeout: 300_000,
        },
      },
    ],
  },
});
