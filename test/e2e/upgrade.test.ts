// An upgrade from the previous release to this tree, one process at a time, on a running cluster
// (docs/operate.md, "Upgrading"). The previous release is the commit deploy/PREVIOUS_RELEASE names:
// its sources come out of this repository's history (`git archive`) and are built beside the tree
// with the same node_modules. A cluster runs entirely on that build — etcd, `jaco controller all`,
// two agents, an ingress on node-1 — with a published service of two replicas; then the
// controllers, each agent in turn and the ingress are stopped and started again from this tree.
// Meanwhile: no replica's container is stopped, replaced or moved (same container ids and start
// times, no move or restart in the audit); the old agents run what the new controllers write (a
// scale made between the steps), the new ones adopt what the old ones started; no process of
// either version finds a value it cannot read; the service answers through the ingress after every
// step. A cordon made by the previous release's CLI outlives the upgrade (issue 29 moved what
// operators decide to nodespecs/). The version skew this supports is written in docs/operate.md.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import type { AuditEvent, Endpoints, NodeSpecRecord, ReplicaObserved } from '../../src/api/types.js';
import { PACKAGE_ROOT } from '../../src/paths.js';
import { JACO_BIN } from '../support/cli.js';
import { TestCluster, type Proc } from '../support/cluster.js';
import { httpdManifest, nodeAddress as address, startIngress } from '../support/ingress.js';
import { eventually } from '../support/wait.js';

/** The previous release's commit: the first line of deploy/PREVIOUS_RELEASE that is not a comment. */
const PREVIOUS = readFileSync(join(PACKAGE_ROOT, 'deploy', 'PREVIOUS_RELEASE'), 'utf8').split('\n').map((l) => l.trim()).find((l) => l && !l.startsWith('#'))!;
const PORT = 18390;
const manifest = (replicas: number) => httpdManifest({ deployment: 'up', image: 'jaco-demo/busybox:1', published: PORT, replicas });

/** The previous release, built from this repository's history into a directory of its own. */
function buildPrevious(): string {
  const dir = mkdtempSync(join(tmpdir(), 'jaco-previous-'));
  const git = (...args: string[]) => execFileSync('git', ['-C', PACKAGE_ROOT, ...args], { stdio: 'pipe' });
  const held = () => {
    try {
      git('cat-file', '-e', `${PREVIOUS}^{commit}`);
      return true;
    } catch {
      return false;
    }
  };
  // A shallow clone lacks it: fetched from the clone's origin (this machine's repository).
  if (!held()) {
    try {
      git('fetch', '--quiet', '--no-tags', 'origin', PREVIOUS);
    } catch (e) {
      throw new Error(`deploy/PREVIOUS_RELEASE names ${PREVIOUS}, which this clone's history does not hold and its origin did not give: ${(e as { stderr?: Buffer }).stderr?.toString().trim() ?? (e as Error).message}`);
    }
    if (!held()) throw new Error(`deploy/PREVIOUS_RELEASE names ${PREVIOUS}, which is not in this repository's history`);
  }
  execFileSync('sh', ['-c', `git -C "${PACKAGE_ROOT}" archive ${PREVIOUS} | tar -x -C "${dir}"`]);
  symlinkSync(join(PACKAGE_ROOT, 'node_modules'), join(dir, 'node_modules'));
  // As that release built what its bin/jaco runs: tsc's dist/src, then (later releases) the bundle.
  if (existsSync(join(dir, 'tsconfig.build.json'))) execFileSync(process.execPath, [join(PACKAGE_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'pipe' });
  if (existsSync(join(dir, 'scripts', 'build-bundle.mjs'))) execFileSync(process.execPath, [join(dir, 'scripts', 'build-bundle.mjs')], { cwd: dir, stdio: 'pipe' });
  return dir;
}

describe('an upgrade from the previous release, one process at a time', () => {
  // As the previous release ran: etcd without users (the users, and the nodespecs/ they come with,
  // are the step after the upgrade: docs/operate.md, test/integration/nodespec-seed.test.ts).
  const c = new TestCluster({ nodes: 0, controllers: false, secure: false });
  let previous = '';
  let ingress: Proc;
  const agents = new Map<string, Proc>();
  const containers = async () => new Map((await c.containers()).filter((x) => x.Labels['jaco.dev/deployment'] === 'up').map((x) => [x.Id, x]));
  const startedAt = async (ids: Iterable<string>) => new Map(await Promise.all([...ids].map(async (id) => [id, (await c.docker.getContainer(id).inspect()).State.StartedAt] as const)));
  const answers = () => eventually(async () => (await fetch(`http://${address('node-1')}:${PORT}/`, { signal: AbortSignal.timeout(2000) }).then((r) => r.status, () => 0)) === 200, { what: 'the service answering through node-1\'s ingress', timeoutMs: 30_000 });
  const running = async (n: number) =>
    eventually(async () => (await c.store.list<ReplicaObserved>(keys.observedOf())).items.filter((i) => i.value.status.deployment === 'up' && i.value.status.state === 'running').length === n, { what: `${n} replicas of up running`, timeoutMs: 60_000 });
  const startAgent = async (node: string) => agents.set(node, await c.startAgent(node, ['--address', address(node)]));

  beforeAll(async () => {
    previous = buildPrevious();
    c.bin = join(previous, 'bin', 'jaco');
    await c.start();
    for (const n of ['node-1', 'node-2']) await startAgent(n);
    await c.startControllers('all');
    ingress = startIngress(c, 'node-1');
  }, 180_000);
  afterAll(async () => {
    await c.stop();
    if (previous) rmSync(previous, { recursive: true, force: true });
  });

  it(`runs on the previous release (${PREVIOUS.slice(0, 12)}); controllers, agents and the ingress upgraded in turn stop, replace and move nothing`, () =>
    c.withLogs(async () => {
      expect(existsSync(join(previous, 'dist', 'src', 'cli', 'main.js'))).toBe(true);
      const live = () => c.procs.filter((p) => !p.exited());
      expect(live().map((p) => `${p.name} ${p.bin}`)).toEqual(live().map((p) => `${p.name} ${join(previous, 'bin', 'jaco')}`));
      await c.apply(manifest(2));
      await running(2);
      await eventually(async () => ((await c.store.get<Endpoints>(keys.endpoints('up', 'web')))?.value.spec.addresses.length ?? 0) === 2, { what: 'both replicas in endpoints', timeoutMs: 30_000 });
      await answers();
      const before = await containers();
      const started = await startedAt(before.keys());
      expect(before.size).toBe(2);

      // 1. The controllers, on this tree; the old agents run what they write (a scale to 3).
      c.bin = JACO_BIN;
      for (const p of c.procs.filter((x) => x.name.startsWith('controllers') && !x.exited())) await p.kill();
      await c.startControllers('all');
      await c.apply(manifest(3));
      await running(3);
      await answers();
      const scaled = [...(await containers()).keys()].filter((id) => !before.has(id));
      expect(scaled).toHaveLength(1);
      started.set(scaled[0]!, (await startedAt(scaled)).get(scaled[0]!)!);
      // The previous release's CLI cordons node-2 (inside nodes/node-2: it knows no nodespecs/).
      const oldCli = spawnSync(process.execPath, [join(previous, 'bin', 'jaco'), 'node', 'cordon', 'node-2'], { env: { ...process.env, ...c.env() }, encoding: 'utf8' });
      expect(oldCli.stdout, oldCli.stderr).toBe('node/node-2 cordoned\n');

      // 2. Each agent in turn: the new one adopts what the old one runs.
      for (const node of ['node-1', 'node-2']) {
        await agents.get(node)!.kill();
        await startAgent(node);
        await running(3);
        await answers();
      }
      // The cordon outlived both agents' re-registration: an upgrade uncordons nothing. This
      // CLI's uncordon writes what operators decide where this version keeps it (nodespecs/).
      const nodeStatus = async () => (await c.jaco(['get', 'nodes', 'node-2'])).stdout;
      expect(await nodeStatus()).toContain('Ready,SchedulingDisabled');
      expect((await c.jaco(['node', 'uncordon', 'node-2'])).stdout).toBe('node/node-2 uncordoned\n');
      expect((await c.store.get<NodeSpecRecord>(keys.nodeSpec('node-2')))?.value.spec).toEqual({ unschedulable: false });
      expect(await nodeStatus()).not.toContain('SchedulingDisabled');
      // 3. The ingress.
      await ingress.kill();
      ingress = startIngress(c, 'node-1');
      await answers();

      expect(live().map((p) => `${p.name} ${p.bin}`)).toEqual(live().map((p) => `${p.name} ${JACO_BIN}`));
      // Nothing stopped, replaced or moved: the same three containers, started when they were.
      const after = await containers();
      expect([...after.keys()].sort()).toEqual([...started.keys()].sort());
      expect(await startedAt(after.keys())).toEqual(started);
      for (const x of after.values()) expect(x.State).toBe('running');
      const audit = (await c.store.list<AuditEvent>(keys.audits())).items.map((i) => i.value.spec.type);
      for (const t of ['replica_moved', 'replica_restarted', 'rebalance_moved', 'replica_replaced']) expect(audit, t).not.toContain(t);
      // Both versions read what the other wrote: no value either found unreadable.
      for (const p of c.procs) expect(readFileSync(p.logFile, 'utf8'), `${p.name} (${p.logFile})`).not.toContain('unreadable value in the store');
    }));
});
