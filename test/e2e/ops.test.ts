// Operating a cluster day to day on real Docker: two agents (each serving logs and exec over
// mutual TLS at its own loopback address, with certificates `jaco cert` issued), `jaco controller
// all`, a real etcd. `jaco logs` merges a two-replica service with replica prefixes in time order
// and, followed, picks up a replica scaled in later, the new containers of a rolling update and
// replicas a drain moves to the other node, keeping the replaced containers' output to its last
// line; --previous shows those last lines; `jaco exec` passes stdin, a TTY (sized as the client's,
// under `script`) and the command's exit code; a viewer's certificate reads logs and may not exec;
// a node whose endpoint does not answer is named; `jaco top` agrees with `docker stats`. The
// backup and restore drill: etcd lost and restored from `jaco backup` under running controllers
// and agents, its replicas adopted (same container ids and StartedAt).
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../src/api/keys.js';
import { LABELS } from '../../src/api/labels.js';
import type { Deployment, Node, ReplicaDesired } from '../../src/api/types.js';
import { commitAtomic } from '../../src/store/writer.js';
import type { ReplicaUsageRow } from '../../src/cli/top.js';
import { JACO_BIN } from '../support/cli.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { eventually } from '../support/wait.js';

const ADDRESS: Record<string, string> = { 'node-1': '127.0.1.201', 'node-2': '127.0.1.202' };

let c: TestCluster;
let operator = '';
let viewer = '';

const manifest = (talkReplicas: number) =>
  JSON.stringify({
    apiVersion: 'jaco.dev/v1',
    kind: 'Deployment',
    metadata: { name: 'ops' },
    spec: {
      services: {
        // A line on stdout and one on stderr every 0.2 s, numbered.
        talk: {
          image: 'jaco-demo/busybox:1',
          replicas: talkReplicas,
          placement: { mode: 'spread' },
          command: ['sh', '-c', `trap 'exit 0' TERM; i=0; while :; do echo "out $i $JACO_REPLICA"; echo "err $i" >&2; i=$((i+1)); sleep 0.2; done`],
          stopGracePeriod: '2s',
          // The rolling update replaces all three at once: the test is about following it, not pacing it.
          update: { parallelism: 3 },
        },
        // Half a core, held by Docker's CPU limit: a steady figure to compare with docker stats.
        burn: { image: 'jaco-demo/busybox:1', command: ['sh', '-c', 'while :; do :; done'], resources: { cpu: '500m', memory: '64Mi' }, stopGracePeriod: '1s' },
      },
    },
  });

async function running(service: string, n: number): Promise<ReplicaDesired[]> {
  return eventually(
    async () => {
      const obs = new Map((await c.observed()).map((o) => [`${o.status.node}/${o.status.replica}`, o.status]));
      const mine = (await c.desired()).filter((d) => d.spec.deployment === 'ops' && d.spec.service === service);
      return mine.length === n && mine.every((d) => obs.get(`${d.spec.node}/${d.spec.replica}`)?.state === 'running') && mine;
    },
    { what: `${n} ${service} replica(s) running`, timeoutMs: 45_000 },
  );
}

/** ops/talk's count as applied (and scaled). */
const talkCount = async () => (await c.store.get<Deployment>(keys.deployment('ops')))!.value.spec.services.talk!.replicas ?? 1;

/** ./bin/jaco, logs and exec with the operator's certificate (or the one given). */
const jaco = (args: string[], input?: string, tls = operator) => c.jaco(['logs', 'exec'].includes(args[0]!) ? [args[0]!, '--tls-dir', tls, ...args.slice(1)] : args, input);

beforeAll(async () => {
  c = await startCluster({ nodes: 0, controllers: 'all' });
  const pki = join(c.logDir, 'pki');
  operator = join(pki, 'operator');
  viewer = join(pki, 'viewer');
  const cert = async (args: string[]) => {
    const r = await c.jaco(['cert', ...args, '--ca-dir', pki]);
    if (r.code !== 0) throw new Error(`jaco cert ${args.join(' ')}: ${r.stderr}`);
  };
  mkdirSync(pki, { recursive: true });
  await cert(['ca']);
  await cert(['operator', 'tester', '--out', operator]);
  await cert(['operator', 'looker', '--viewer', '--out', viewer]);
  for (const [node, ip] of Object.entries(ADDRESS)) await cert(['node', node, '--ip', ip, '--out', join(c.stateDir(node), 'tls')]);
  // Port 0: any free port, which the agent publishes on its Node.
  await Promise.all(Object.entries(ADDRESS).map(([node, ip]) => c.startAgent(node, ['--address', ip, '--api-addr', `${ip}:0`])));
  await c.apply(manifest(2));
}, 120_000);
afterAll(async () => {
  await c?.stop();
});

describe('jaco logs, exec and top against the agents', () => {
  it('logs: replicas merged in time order with their prefix, stdout and stderr apart; -f picks up a replica scaled in and a rolling update\'s containers; --previous', () =>
    c.withLogs(async () => {
      const talk = await running('talk', 2);
      expect(new Set(talk.map((d) => d.spec.node)).size).toBe(2);
      // Enough lines from each.
      await new Promise((r) => setTimeout(r, 1000));
      const r = await jaco(['logs', 'ops/talk', '--timestamps']);
      expect(r.code, r.stderr).toBe(0);
      const out = r.stdout.trim().split('\n');
      const parse = (l: string) => /^(\S+)@(\S+)\s+\| (\S+) out (\d+) (\S+)$/.exec(l);
      expect(out.every((l) => parse(l)), out.slice(0, 5).join('\n')).toBe(true);
      for (const d of talk) {
        const mine = out.map(parse).filter((m) => m![1] === d.spec.replica);
        expect(mine.length).toBeGreaterThan(2);
        // Its own replica's output, on its own node, numbered in order.
        expect(mine.every((m) => m![2] === d.spec.node && m![5] === d.spec.replica)).toBe(true);
        expect(mine.map((m) => Number(m![4]))).toEqual(mine.map((_, i) => i));
      }
      const times = out.map((l) => Date.parse(parse(l)![3]!));
      expect(times).toEqual([...times].sort((a, b) => a - b));
      const errs = r.stderr.split('\n').filter(Boolean);
      expect(errs.length).toBeGreaterThan(4);
      expect(errs.filter((l) => !/^\S+@\S+\s+\| \S+ err \d+$/.test(l))).toEqual([]);
      // One replica named: no prefix; --tail: the last lines of its log (stdout and stderr together, as Docker counts).
      const one = await jaco(['logs', talk[0]!.spec.replica, '--tail', '4']);
      expect([...one.stdout.trim().split('\n'), ...one.stderr.trim().split('\n')]).toHaveLength(4);
      expect(one.stdout).toMatch(new RegExp(`^out \\d+ ${talk[0]!.spec.replica}\\n`));

      // Followed: the third replica's lines arrive without restarting the command.
      const f = spawn(process.execPath, [JACO_BIN, '--timings', c.timings, 'logs', 'ops/talk', '-f', '--tail', '1', '--tls-dir', operator], { env: { ...process.env, ...c.env() } });
      let followed = '';
      f.stdout.on('data', (d: Buffer) => (followed += d.toString()));
      f.stderr.on('data', (d: Buffer) => (followed += d.toString()));
      const exited = new Promise<number | null>((res) => f.on('exit', (code) => res(code)));
      await eventually(() => talk.every((d) => followed.includes(`${d.spec.replica}@`)), { what: 'both replicas followed', timeoutMs: 15_000 });
      expect((await jaco(['scale', 'ops/talk=3'])).code).toBe(0);
      const third = (await running('talk', 3)).find((d) => !talk.some((t) => t.spec.replica === d.spec.replica))!;
      await eventually(() => new RegExp(`${third.spec.replica}@${third.spec.node}\\s+\\| out 1 `).test(followed), { what: `the scaled-in ${third.spec.replica} followed`, timeoutMs: 20_000 });

      // A rolling update replaces every container: the same command goes on with the new ones,
      // each read from its first line.
      const containers = async () => new Map((await c.observed()).filter((o) => o.status.service === 'talk').map((o) => [o.status.replica, o.status.containerId]));
      const old = await containers();
      const firstLines = (r: string) => followed.match(new RegExp(`${r}@\\S+\\s+\\| out 0 ${r}\\n`, 'g'))?.length ?? 0;
      const seen = new Map([...old.keys()].map((r) => [r, firstLines(r)]));
      expect((await jaco(['rollout', 'restart', 'ops/talk'])).code).toBe(0);
      await eventually(async () => {
        const now = await containers();
        return now.size === 3 && [...now].every(([r, id]) => id && id !== old.get(r)) && (await running('talk', 3));
      }, { what: 'every talk container replaced', timeoutMs: 60_000 });
      await eventually(() => [...seen].every(([r, n]) => firstLines(r) > n), { what: "each new container's first line followed", timeoutMs: 15_000 });
      // --previous: the last lines each replaced container wrote, kept by its agent when it
      // removed it (an old container leaves routing before its stop: wait for all three).
      const prev = await eventually(async () => {
        const r = await jaco(['logs', 'ops/talk', '--previous', '--tail', '2']);
        return r.code === 0 && r;
      }, { what: 'every replaced container removed and kept', timeoutMs: 20_000 });
      for (const r of old.keys()) expect(prev.stdout + prev.stderr).toMatch(new RegExp(`^${r}@\\S+\\s+\\| (out|err) \\d+`, 'm'));
      // The follow kept each replaced container's output to its end, beside the new one's: its
      // last line on stdout, as the agent kept it, was printed.
      const lastLines = [...old.keys()].map((r) => {
        const last = [...prev.stdout.matchAll(new RegExp(`^${r}@\\S+\\s+\\| out \\d+ ${r}$`, 'gm'))].at(-1);
        expect(last, `${r}'s last line in --previous`).toBeDefined();
        return last![0].replace(/\s+\| /, ' | ');
      });
      await eventually(() => lastLines.every((l) => followed.replace(/ +\| /g, ' | ').includes(`${l}\n`)), { what: `the replaced containers' last lines followed (${lastLines.join('; ')})`, timeoutMs: 5_000 });
      f.kill('SIGINT');
      expect(await exited).toBe(0);

      // The kept lines outlive the agent (its state directory): node-1's agent restarted still serves them.
      const onNode1 = prev.stdout.split('\n').filter((l) => /^\S+@node-1\s/.test(l));
      expect(onNode1.length).toBeGreaterThan(0);
      await c.agent('node-1')!.kill();
      await c.startAgent('node-1', ['--address', ADDRESS['node-1']!, '--api-addr', `${ADDRESS['node-1']}:0`]);
      const again = await eventually(async () => {
        const r = await jaco(['logs', 'ops/talk', '--previous', '--tail', '2']);
        return r.code === 0 && r;
      }, { what: '--previous after the agent restart', timeoutMs: 15_000 });
      for (const l of onNode1) expect(again.stdout).toContain(l.replace(/\s+\| /, ' | ').split(' | ')[1]);
    }));

  it('exec: stdout and stderr, stdin, a TTY sized as the client, the exit code as jaco\'s; a viewer may read logs, not exec', () =>
    c.withLogs(async () => {
      const [d] = await running('talk', 3);
      const replica = d!.spec.replica;
      let r = await jaco(['exec', replica, '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
      expect([r.code, r.stdout, r.stderr]).toEqual([3, 'out\n', 'err\n']);
      r = await jaco(['exec', '-i', replica, '--', 'sh', '-c', 'cat; echo done'], 'hello\nworld\n');
      expect([r.code, r.stdout]).toEqual([0, 'hello\nworld\ndone\n']);
      // A terminal: `script` gives jaco one of 45 rows and 123 columns; the command sees its size.
      const env = { ...process.env, ...c.env() };
      const inner = `stty cols 123 rows 45; ${process.execPath} ${JACO_BIN} exec -it --tls-dir ${operator} ${replica} -- sh -c 'sleep 0.5; stty size; [ -t 0 ] && echo is-a-tty; exit 4'`;
      const tty = await new Promise<{ code: number | null; out: string }>((res) => {
        const p = spawn('script', ['-qec', inner, '/dev/null'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
        let out = '';
        p.stdout.on('data', (b: Buffer) => (out += b.toString()));
        p.on('close', (code) => res({ code, out }));
      });
      expect(tty.out).toContain('45 123');
      expect(tty.out).toContain('is-a-tty');
      expect(tty.code).toBe(4);

      r = await jaco(['exec', replica, '--', 'true'], undefined, viewer);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/^error: node node-\d: viewer:looker is a viewer: it may read logs, not exec\n$/);
      const v = await jaco(['logs', replica, '--tail', '2'], undefined, viewer);
      expect([v.code, v.stdout]).toEqual([0, expect.stringMatching(/^out \d+ /)]);
      r = await jaco(['exec', 'ops-nope-9', '--', 'true']);
      expect([r.code, r.stderr]).toEqual([1, 'error: replica "ops-nope-9" not found (jaco get replicas lists them)\n']);
    }));

  it('an endpoint that does not answer is an error naming the node', () =>
    c.withLogs(async () => {
      const d = (await running('talk', 3)).find((x) => x.spec.node === 'node-2')!;
      const cur = (await c.store.get<Node>(keys.node('node-2')))!;
      const real = cur.value.status!.api!.endpoint;
      const put = async (endpoint: string) => {
        const now = (await c.store.get<Node>(keys.node('node-2')))!;
        await commitAtomic(c.store, [{ label: 'endpoint', ops: [{ op: 'update', key: keys.node('node-2'), value: { ...now.value, status: { ...now.value.status!, api: { endpoint } } }, modRevision: now.modRevision }] }]);
      };
      // A closed port on the node's address.
      await put(`${ADDRESS['node-2']}:1`);
      try {
        const r = await jaco(['exec', d.spec.replica, '--', 'true']);
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(/^error: node node-2 is unreachable: its agent's logs and exec endpoint https:\/\/127\.0\.1\.202:1 did not answer \(ECONNREFUSED\)/);
        const l = await jaco(['logs', 'ops/talk', '--tail', '2']);
        expect(l.code).toBe(1);
        // The other node's replicas are still shown.
        expect(l.stdout).toMatch(/@node-1 +\| out/);
        expect(l.stderr).toMatch(/node node-2 is unreachable/);
      } finally {
        await put(real);
      }
    }));

  it('top: a replica\'s CPU and memory within 10 % of docker stats; nodes sorted by CPU with their pressure', () =>
    c.withLogs(async () => {
      const [burn] = await running('burn', 1);
      const container = (await c.docker.listContainers({ filters: { label: [`${LABELS.cluster}=${c.uid}`, `${LABELS.replica}=${burn!.spec.replica}`] } })).find((x) => x.Labels[LABELS.role] !== 'sandbox')!;
      /** docker stats' CPU (in millicores, as `docker stats` computes its percentage) and memory (less inactive file cache). */
      const dockerStats = async () => {
        const s = (await c.docker.getContainer(container.Id).stats({ stream: false })) as unknown as {
          cpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage: number; online_cpus: number };
          precpu_stats: { cpu_usage: { total_usage: number }; system_cpu_usage: number };
          memory_stats: { usage: number; stats: Record<string, number> };
        };
        const cpu = ((s.cpu_stats.cpu_usage.total_usage - s.precpu_stats.cpu_usage.total_usage) / (s.cpu_stats.system_cpu_usage - s.precpu_stats.system_cpu_usage)) * s.cpu_stats.online_cpus * 1000;
        return { cpu, memory: s.memory_stats.usage - (s.memory_stats.stats.total_inactive_file ?? s.memory_stats.stats.inactive_file ?? 0) };
      };
      const top = async () => {
        const r = await jaco(['top', 'replicas', 'ops', '-o', 'json']);
        return (JSON.parse(r.stdout) as ReplicaUsageRow[]).find((x) => x.replica === burn!.spec.replica)!;
      };
      // Past its first samples (a first reading averages over the container's life). Each side reads a
      // window of about a second, and the two do not quite coincide: on a machine whose load moves
      // (make test runs a second e2e lane beside this one) the CPU a half-core loop gets moves with
      // it, and a reading pair agrees only when the load held still across both windows — so it
      // is read again for up to a minute, and one agreeing pair within 10 % is the test.
      const row = await eventually(async () => {
        // Side by side: both measure about the same second.
        const [t, s] = await Promise.all([top(), dockerStats()]);
        if (t.cpuMillis !== undefined && Math.abs(t.cpuMillis - s.cpu) <= 0.1 * s.cpu) return { t, s };
        // Thrown, so a time-out says what the two last read.
        throw new Error(`top ${t.cpuMillis?.toFixed(0)}m (sampled ${t.sampledAt ?? '?'}), docker stats ${s.cpu.toFixed(0)}m`);
      }, { what: 'top and docker stats agreeing on CPU', timeoutMs: 60_000 });
      // Busy (its limit is 500m; on a loaded machine it gets less, and both see the same).
      expect(row.t.cpuMillis).toBeGreaterThan(100);
      expect(row.t.cpuOfLimit).toBeCloseTo(row.t.cpuMillis! / 500, 5);
      // Memory: a busybox loop holds little, so 10 % or 256 KiB, whichever is more.
      expect(Math.abs(row.t.memoryBytes! - row.s.memory)).toBeLessThanOrEqual(Math.max(0.1 * row.s.memory, 256 * 1024));
      // The table, sorted by CPU: the burner first.
      const table = (await jaco(['top', 'replicas', 'ops'])).stdout.split('\n');
      expect(table[0]).toMatch(/^NAME\s+SERVICE\s+NODE\s+CPU\(cores\)\s+CPU\/LIMIT\s+MEMORY\(bytes\)\s+MEMORY\/LIMIT\s+SAMPLED$/);
      expect(table[1]).toMatch(new RegExp(`^${burn!.spec.replica}\\s+ops/burn\\s+${burn!.spec.node}\\s+\\d+m\\s+\\d+%`));
      // Nodes sorted by CPU: the burner's first, its pressure set by CPU (half of its one core).
      const nodes = JSON.parse((await jaco(['top', 'nodes', '-o', 'json'])).stdout) as { node: string; cpuMillis: number; pressure: { value: number; dominant: string } }[];
      expect(nodes.map((n) => n.node)).toEqual([burn!.spec.node, burn!.spec.node === 'node-1' ? 'node-2' : 'node-1']);
      expect(nodes[0]!.pressure).toMatchObject({ dominant: 'cpu', value: expect.any(Number) });
      // Of its node's one core, at least what the replica's own figure needs above (100m: a loaded machine gives it less than its 500m).
      expect(nodes[0]!.pressure.value).toBeGreaterThan(0.1);
    }));
  it('backup and restore drill: etcd lost and restored from `jaco backup` (etcdctl snapshot restore, as docs/operate.md says) under running controllers and agents; what ran is adopted, what came after the backup goes', () =>
    c.withLogs(async () => {
      // As many talk replicas as the cases before left (3 after them all).
      const n = await talkCount();
      await running('talk', n);
      await running('burn', 1);
      /** Every container of the cluster (sandboxes too), by id: replica and StartedAt from docker inspect. */
      const inspectAll = async () =>
        new Map(
          await Promise.all(
            (await c.containers()).map(async (x) => {
              const i = await c.docker.getContainer(x.Id).inspect();
              return [x.Id, { replica: x.Labels[LABELS.replica]!, role: x.Labels[LABELS.role], startedAt: i.State.StartedAt, running: i.State.Running }] as const;
            }),
          ),
        );
      const before = await inspectAll();
      const file = join(c.logDir, 'drill.db');
      let r = await c.jaco(['backup', file]);
      expect(r.code, r.stderr).toBe(0);
      // After the backup: one more replica, which the restored store will not know.
      expect((await jaco(['scale', `ops/talk=${n + 1}`])).code).toBe(0);
      const extra = (await running('talk', n + 1)).find((d) => ![...before.values()].some((b) => b.replica === d.spec.replica))!;
      // The disk of etcd is lost (its data directory goes), and the operator follows docs/operate.md:
      // check the file, `etcdctl snapshot restore` into a new data directory, start etcd on it.
      // Controllers and agents keep running throughout.
      r = await c.jaco(['backup', '--check', file]);
      expect(r.stdout).toMatch(/: OK \(/);
      await c.etcd.replace!({ snapshot: file });

      // The restored store has n talk replicas: the extra one's container goes; nothing else is
      // touched — every container that ran before the backup is the same one, never restarted.
      await eventually(async () => !(await c.containers()).some((x) => x.Labels[LABELS.replica] === extra.spec.replica), { what: `${extra.spec.replica} (placed after the backup) removed`, timeoutMs: 30_000 });
      await running('talk', n);
      const after = await inspectAll();
      expect([...after].filter(([id]) => !before.has(id)), 'a container started since the backup').toEqual([]);
      for (const [id, b] of before) expect(after.get(id), `${b.replica} (${id.slice(0, 12)})`).toEqual(b);
      // The controllers resumed on the restored store: a scale is carried out, once.
      expect((await jaco(['scale', `ops/talk=${n + 1}`])).code).toBe(0);
      const talk = await running('talk', n + 1);
      expect(new Set(talk.map((d) => d.spec.replica)).size).toBe(n + 1);
      const workloads = (await c.containers()).filter((x) => x.Labels[LABELS.role] !== 'sandbox');
      expect(workloads.map((x) => x.Labels[LABELS.replica]).sort()).toEqual([...talk.map((d) => d.spec.replica), (await running('burn', 1))[0]!.spec.replica].sort());
    }));

  it('logs -f follows replicas a drain moves to another node (make-before-break: both copies print, then the new one)', () =>
    c.withLogs(async () => {
      const moving = (await running('talk', await talkCount())).filter((d) => d.spec.node === 'node-2').map((d) => d.spec.replica);
      expect(moving.length).toBeGreaterThan(0);
      const f = spawn(process.execPath, [JACO_BIN, '--timings', c.timings, 'logs', 'ops/talk', '-f', '--tail', '0', '--tls-dir', operator], { env: { ...process.env, ...c.env() } });
      let followed = '';
      f.stdout.on('data', (d: Buffer) => (followed += d.toString()));
      f.stderr.on('data', (d: Buffer) => (followed += d.toString()));
      const exited = new Promise<number | null>((res) => f.on('exit', (code) => res(code)));
      const printsOn = (r: string, node: string) => new RegExp(`${r}@${node}\\s+\\| out \\d+ ${r}\\n`).test(followed);
      await eventually(() => moving.every((r) => printsOn(r, 'node-2')), { what: 'the replicas on node-2 followed', timeoutMs: 15_000 });
      const r = await jaco(['node', 'drain', 'node-2', '--wait']);
      expect(r.code, r.stderr).toBe(0);
      await eventually(() => moving.every((x) => printsOn(x, 'node-1')), { what: 'the moved replicas followed on node-1', timeoutMs: 15_000 });
      f.kill('SIGINT');
      expect(await exited).toBe(0);
    }));
});
