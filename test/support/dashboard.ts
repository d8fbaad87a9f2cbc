// What the dashboard's browser test and benchmark share: a `jaco dashboard` process on a free
// port, headless Debian Chromium driven by playwright-core (never a downloaded browser; installed
// by scripts/ensure-system.sh), and the folder their screenshots go to (not committed).
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { PACKAGE_ROOT } from '../../src/paths.js';
import type { Proc, TestCluster } from './cluster.js';
import { eventually } from './wait.js';

export const CHROMIUM = process.env.JACO_CHROMIUM ?? '/usr/bin/chromium';

/** Test artifacts (screenshots): test-results/<name>/ under the repository, or $JACO_TEST_OUTPUT/<name>. */
export function outputDir(name: string): string {
  const dir = join(process.env.JACO_TEST_OUTPUT ?? join(PACKAGE_ROOT, 'test-results'), name);
  mkdirSync(dir, { recursive: true });
  return dir;
}

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: scripts/ensure-system.sh installs Debian's chromium`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

/** Starts `jaco dashboard --addr 127.0.0.1:0` on the cluster and returns the URL it prints. */
export async function startDashboard(c: TestCluster, name: string, extra: string[] = []): Promise<{ url: string; proc: Proc }> {
  const proc = c.spawn(name, ['dashboard', '--addr', '127.0.0.1:0', ...extra]);
  let url = '';
  await eventually(
    () => {
      if (proc.exited()) throw new Error(`${name} exited:\n${c.tail(proc)}`);
      url = /jaco dashboard: (http:\/\/\S+)/.exec(readFileSync(proc.logFile, 'utf8'))?.[1] ?? '';
      return !!url;
    },
    { what: `${name} listening`, timeoutMs: 20_000 },
  );
  return { url, proc };
}
