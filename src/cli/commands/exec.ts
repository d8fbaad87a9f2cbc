// jaco exec REPLICA [-i] [-t] -- CMD…: a command in a replica's container, through the agent of
// the node that runs it (mutual TLS, never through etcd); jaco exits with the command's exit code.
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { Node, ReplicaDesired, ReplicaObserved } from '../../api/types.js';
import { logger } from '../../observability/log.js';
import { Cache } from '../../runtime/cache.js';
import { demuxStream } from '../../dockerode.js';
import { AgentClient, agentTarget, clientTls, TLS_DIR_HELP } from '../agent-client.js';
import { action, CliError, withStore } from '../common.js';

/** Where a replica runs: its copy observed running (a move's destination once it runs), else its only copy. */
export function execNode(replica: string, desired: Iterable<ReplicaDesired>, observed: ReadonlyMap<string, ReplicaObserved>): string {
  const copies = [...desired].filter((d) => d.spec.replica === replica).map((d) => d.spec.node).sort();
  if (!copies.length) throw new CliError(`replica "${replica}" not found (jaco get replicas lists them)`);
  const running = copies.filter((n) => observed.get(`${n}/${replica}`)?.status?.state === 'running');
  if (running.length) {
    // During a move both run: the destination (the copy marked as a move's) is the one staying.
    const dst = [...desired].find((d) => d.spec.replica === replica && d.spec.move && running.includes(d.spec.node));
    return dst?.spec.node ?? running[0]!;
  }
  if (copies.length > 1) throw new CliError(`replica "${replica}" runs on none of ${copies.join(', ')} yet`);
  return copies[0]!;
}

/** The exit code of an exec that ended: asked until Docker has it (it may trail the stream's end). */
async function exitCodeOf(client: AgentClient, t: ReturnType<typeof agentTarget>, id: string): Promise<number> {
  for (let i = 0; ; i++) {
    const s = await client.json<{ running: boolean; exitCode: number | null }>(t, 'GET', `/v1/exec/${encodeURIComponent(id)}`);
    if (!s.running && s.exitCode !== null) return s.exitCode;
    if (i >= 50) throw new CliError(`node ${t.node}: the command's stream ended but it still runs`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface ExecFlags {
  interactive?: boolean;
  tty?: boolean;
  tlsDir?: string;
}

export function registerExec(program: Command): void {
  program
    .command('exec')
    .description("Run a command in a replica's container, through its node's agent; jaco exits with the command's code")
    .argument('<replica>', 'the replica (jaco get replicas)')
    .argument('<command...>', 'the command and its arguments, after --')
    .option('-i, --interactive', "send this terminal's stdin to the command (its end is the command's EOF)")
    .option('-t, --tty', 'give the command a terminal (sized as this one, resized with it)')
    .option('--tls-dir <dir>', TLS_DIR_HELP)
    .addHelpText(
      'after',
      `
Examples:
  jaco exec shop-web-1 -- ls /data
  jaco exec -it shop-db-1 -- sh
  echo 'select 1' | jaco exec -i shop-db-1 -- psql -U app

The CLI dials the agent of the replica's node at the endpoint its Node publishes, over mutual TLS
with the operator's certificate (an operator's may exec, a viewer's only read logs: docs/operate.md).
Exit codes: the command's own; 1 when jaco could not run it (the replica or its node unknown, the
node unreachable — named —, or the certificate refused).
`,
    )
    .action(
      action(async (replica: string, command: string[], f: ExecFlags, cmd: Command) => {
        const tls = clientTls(f.tlsDir);
        const target = await withStore(cmd, async (store) => {
          const cache = await Cache.read(store, ['desired', 'observed', 'nodes'], logger('exec'));
          const observed = new Map([...cache.kind<ReplicaObserved>('observed').items].map(([k, v]) => [k.slice(keys.observedOf().length), v.value]));
          const node = execNode(replica, [...cache.kind<ReplicaDesired>('desired').items.values()].map((v) => v.value), observed);
          return agentTarget(cache.kind<Node>('nodes').items.get(keys.node(node))?.value, node);
        });
        const client = new AgentClient(tls);
        const stdin = process.stdin;
        const raw = !!(f.tty && f.interactive && stdin.isTTY);
        try {
          const size = () => ({ h: process.stdout.rows ?? 0, w: process.stdout.columns ?? 0 });
          const { id } = await client.json<{ id: string }>(target, 'POST', `/v1/replicas/${encodeURIComponent(replica)}/exec`, { cmd: command, tty: !!f.tty, stdin: !!f.interactive });
          const { socket, head } = await client.upgrade(target, `/v1/exec/${encodeURIComponent(id)}/start`);
          const resize = () => {
            const { h, w } = size();
            if (h && w) void client.call(target, 'POST', `/v1/exec/${encodeURIComponent(id)}/resize?h=${h}&w=${w}`).then((r) => r.resume(), () => undefined);
          };
          if (f.tty) {
            resize();
            process.stdout.on('resize', resize);
          }
          const ended = new Promise<void>((resolve) => socket.on('close', () => resolve()));
          if (head.length) socket.unshift(head);
          if (f.tty) socket.pipe(process.stdout, { end: false });
          else demuxStream(socket, process.stdout, process.stderr);
          if (f.interactive) {
            if (raw) stdin.setRawMode(true);
            stdin.pipe(socket, { end: false });
            // EOF on stdin is the command's EOF; its output keeps coming (a half-closed session).
            stdin.on('end', () => socket.end());
          }
          await ended;
          process.stdout.off('resize', resize);
          if (f.interactive) {
            stdin.unpipe(socket);
            stdin.pause();
          }
          return await exitCodeOf(client, target, id);
        } finally {
          if (raw) stdin.setRawMode(false);
          client.close();
        }
      }),
    );
}
