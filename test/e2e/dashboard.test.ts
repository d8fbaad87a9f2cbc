// The dashboard in a real browser: headless Debian Chromium (playwright-core) on a page served by
// `jaco dashboard` over a real cluster (etcd, `jaco controller all`, two `jaco agent`s on Docker).
// Without reloading, the page shows an applied deployment's replicas running and a rolling update's
// step advancing; a replica's explanation opens; a job's result (exit code, attempts, duration) shows
// beside its service; actions are absent without --allow-actions (and
// refused by the server), present with it, each showing its CLI command: cordon and uncordon, a
// canary rollout paused, resumed and promoted, a rollback aborted, a drain. Screenshots of each view
// go to test-results/dashboard/ (not committed).
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { launchChromium, outputDir, startDashboard } from '../support/dashboard.js';
import { busyboxService, webManifest } from '../support/rollout-workload.js';

const out = outputDir('dashboard');
// A one-second pause between steps: the page has time to show every step of three.
const web = (image: string) => busyboxService(image, { replicas: 3, update: { delay: '1s' } });

let c: TestCluster;
let browser: Browser;
let page: Page;
let url = '';
/** The dashboard started with --allow-actions. */
let actUrl = '';

beforeAll(async () => {
  [c, browser] = await Promise.all([startCluster({ nodes: 2, controllers: 'all' }), launchChromium()]);
  url = (await startDashboard(c, 'dashboard')).url;
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
});
afterAll(async () => {
  await browser?.close();
  await c?.stop();
});

const shot = (name: string) => page.screenshot({ path: join(out, `${name}.png`), fullPage: true });
const runningReplicas = () => page.locator('[data-replica][data-state="running"]').count();

/**
 * Waits for what an action from the page leads to (a node's row, a rollout's state), as long as the
 * file's other waits; a time-out says what the action answered in the page's result box.
 */
async function after(p: Page, selector: string): Promise<void> {
  try {
    await p.locator(selector).waitFor({ timeout: 30_000 });
  } catch (e) {
    throw new Error(`${(e as Error).message}\nthe last action's answer in the page: ${await p.locator('#action-result').innerText().catch((err: Error) => `(unreadable: ${err.message})`)}`);
  }
}

describe('jaco dashboard in headless Chromium', () => {
  it('shows nodes, then an applied deployment and a rolling update live, and explains a replica', () =>
    c.withLogs(async () => {
      await page.goto(url);
      await page.locator('#nodes tr[data-node="node-1"]').waitFor();
      await expect.poll(() => page.locator('#nodes tr[data-node]').count()).toBe(2);
      expect(await page.locator('#nodes tr[data-node="node-1"]').getAttribute('data-status')).toBe('Ready');
      await shot('cluster');
      // Marks this document: a reload would lose it.
      await page.evaluate('window.__sameDocument = true');

      await page.click('a[data-view="deployments"]');
      await c.apply(webManifest(web('jaco-demo/busybox:1')));
      await expect.poll(runningReplicas, { timeout: 60_000 }).toBe(3);
      await shot('deployments');

      // Record every step the page shows while the update rolls (a step lasts about a second).
      // (Browser code as text: the tests' TypeScript has no DOM types.)
      await page.evaluate(`{
        const seen = (window.__steps = []);
        setInterval(() => {
          const el = document.querySelector('[data-rollout="app/web"]');
          const v = el && el.dataset.state + ':' + el.dataset.step;
          if (v && seen.at(-1) !== v) seen.push(v);
        }, 25);
      }`);
      await c.apply(webManifest(web('jaco-demo/busybox:2')));
      await page.locator('[data-rollout="app/web"][data-state="in_progress"]').waitFor({ timeout: 30_000 });
      await shot('rollout');
      await page.locator('[data-rollout="app/web"][data-state="completed"]').waitFor({ timeout: 60_000 });
      const steps = (await page.evaluate('window.__steps')) as string[];
      const progressing = steps.filter((s) => s.startsWith('in_progress:')).map((s) => Number(s.split(':')[1]));
      // The step advanced in front of us: at least two different steps shown while in progress.
      expect(new Set(progressing).size, steps.join(' ')).toBeGreaterThanOrEqual(2);
      expect(progressing).toEqual([...progressing].sort((a, b) => a - b));
      expect(steps.at(-1)).toBe('completed:3');
      await expect.poll(runningReplicas, { timeout: 60_000 }).toBe(3);

      const replica = (await page.locator('[data-replica]').first().getAttribute('data-replica'))!;
      await page.click(`[data-explain="${replica}"]`);
      await page.locator(`[data-explained="${replica}"] tr.chosen`).waitFor();
      expect(await page.locator(`[data-explained="${replica}"] [data-verdict]`).count()).toBe(2);
      expect(await page.locator(`[data-explained="${replica}"]`).innerText()).toContain(`jaco explain ${replica}`);
      await page.locator('[data-stopped-by]').waitFor();
      await expect.poll(() => page.locator('[data-audit="rollout_completed"]').count()).toBeGreaterThan(0);
      await shot('why');

      await page.click('a[data-view="pressure"]');
      await page.locator('[data-chart="node-1"] canvas').waitFor({ timeout: 20_000 });
      await shot('pressure');

      await page.click('a[data-view="deployments"]');
      await page.click('[data-history="app"]');
      await page.click('#diff-form button');
      await expect.poll(() => page.locator('#diff-out').innerText()).toContain('jaco-demo/busybox:2');
      await shot('history');
      expect(await page.evaluate('window.__sameDocument')).toBe(true);

      // Read-only: no action anywhere on the page, and the server refuses one asked for directly.
      for (const v of ['cluster', 'deployments', 'why']) {
        await page.click(`a[data-view="${v}"]`);
        expect(await page.locator('[data-action]').count()).toBe(0);
      }
      const refused = await page.evaluate(`fetch('/api/actions/cordon', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"target":"node-1"}' }).then((r) => r.status)`);
      expect(refused).toBe(403);
    }));

  it('shows a job\'s result where it shows its service: state, exit code, attempts and how long it ran', () =>
    c.withLogs(async () => {
      await page.goto(url);
      await page.click('a[data-view="deployments"]');
      await c.apply(`
apiVersion: jaco.dev/v1
kind: Deployment
metadata: { name: jobs }
spec:
  services:
    ok: { image: jaco-demo/busybox:1, mode: job, command: [sh, -c, 'sleep 1'] }
    bad: { image: jaco-demo/busybox:1, mode: job, job: { attempts: 2, backoff: 1s }, command: [sh, -c, 'exit 3'] }
`);
      const ok = page.locator('[data-service="jobs/ok"][data-job="succeeded"]');
      const bad = page.locator('[data-service="jobs/bad"][data-job="failed"]');
      await ok.waitFor({ timeout: 30_000 });
      await bad.waitFor({ timeout: 30_000 });
      await shot('jobs');
      // The figures are the scheduler's (deploymentstatus), as jaco status prints them.
      // The row is drawn from each status as it lands: the figures may follow the state by a pass.
      // The duration is Docker's (FinishedAt − StartedAt), and Docker stamps the start a few ms
      // after the process began: a 1 s sleep can show 991ms (seen in CI), as in health-labels' ≥ 900.
      await expect.poll(() => ok.innerText(), { timeout: 15_000 }).toMatch(/succeeded exit 0 · 1 attempt · (9\d\dms|[1-9]\.\ds)/);
      await expect.poll(() => bad.innerText(), { timeout: 15_000 }).toMatch(/failed exit 3 · 2 attempts · \d/);
      expect(await bad.locator('.chip').getAttribute('title')).toBe('exit 3 after 2 attempts (revision 1)');
      expect((await c.jaco(['delete', 'deployment', 'jobs'])).code).toBe(0);
    }));

  it('with --allow-actions: cordon from the page, through the CLI code, showing the CLI command', () =>
    c.withLogs(async () => {
      actUrl = (await startDashboard(c, 'dashboard-actions', ['--allow-actions'])).url;
      const p = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      await p.goto(actUrl);
      await p.click('[data-action="cordon"][data-target="node-2"]');
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco node cordon node-2');
      await after(p, '#nodes tr[data-node="node-2"][data-status="Ready,SchedulingDisabled"]');
      await p.locator('[data-action="uncordon"][data-target="node-2"]').waitFor();
      await p.screenshot({ path: join(out, 'actions.png'), fullPage: true });
      const audit = await c.jaco(['audit', '--type', 'node_cordoned', '-o', 'json']);
      expect(JSON.parse(audit.stdout.trim().split('\n').pop()!).payload).toMatchObject({ node: 'node-2', unschedulable: true });
      await p.close();
    }));

  it('with --allow-actions: uncordon, then a canary rollout paused, resumed and promoted, a rollback aborted and a drain, each from the page', () =>
    c.withLogs(async () => {
      const p = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      // drain, rollback and abort ask for confirmation first.
      p.on('dialog', (d) => void d.accept());
      await p.goto(actUrl);
      await p.click('[data-action="uncordon"][data-target="node-2"]');
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco node uncordon node-2');
      await after(p, '#nodes tr[data-node="node-2"][data-status="Ready"]');

      const cn = (image: string) => busyboxService(image, { replicas: 2, update: { canary: 1 } });
      await c.apply(webManifest(cn('jaco-demo/busybox:1'), 'cn'));
      expect((await c.jaco(['rollout', 'status', 'cn', '--timeout', '120s'])).code).toBe(0);
      await p.click('a[data-view="deployments"]');
      await c.apply(webManifest(cn('jaco-demo/busybox:2'), 'cn'));
      const block = '[data-rollout="cn/web"]';
      await p.locator(`${block} [data-canary="waiting"]`).waitFor({ timeout: 60_000 });
      await p.screenshot({ path: join(out, 'canary.png'), fullPage: true });
      await p.click(`[data-action="pause"][data-target="cn/web"]`);
      await after(p, `${block}[data-state="paused"]`);
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco rollout pause cn/web --wait 0');
      await p.click(`[data-action="resume"][data-target="cn/web"]`);
      await after(p, `${block}[data-state="in_progress"]`);
      await p.click(`[data-action="promote"][data-target="cn/web"]`);
      // The result box shows the last action's answer once it comes (the resume's until then).
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco rollout promote cn/web --wait 0');
      await p.locator(`${block}[data-state="completed"]`).waitFor({ timeout: 60_000 });

      // Rollback (revision 3 = revision 1's spec, with its canary), aborted in its canary phase.
      await p.click('[data-action="rollback"][data-target="cn"]');
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco rollback cn');
      await after(p, `${block}[data-state="in_progress"]`);
      await p.click(`[data-action="abort"][data-target="cn/web"]`);
      await after(p, `${block}[data-state="aborted"]`);

      await p.click('a[data-view="cluster"]');
      await p.click('[data-action="drain"][data-target="node-2"]');
      await expect.poll(() => p.locator('#action-result').innerText()).toContain('$ jaco node drain node-2');
      await after(p, '#nodes tr[data-node="node-2"][data-status="Ready,SchedulingDisabled"]');

      const audit = await c.jaco(['audit', '-d', 'cn', '-o', 'json']);
      const records = audit.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; payload: Record<string, unknown> });
      const types = records.map((r) => r.type);
      for (const t of ['rollout_paused', 'rollout_resumed', 'rollout_promoted', 'rollout_aborted']) expect(types, t).toContain(t);
      expect(records.find((r) => r.type === 'rollout_aborted')!.payload).toMatchObject({ reason: 'operator_abort', to_revision: 3 });
      expect(records.find((r) => r.type === 'deployment_applied' && String(r.payload.cause ?? '').includes('rollback'))).toBeDefined();
      await p.close();
    }));
});
