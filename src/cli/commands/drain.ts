// jaco node drain | remove | drain-status: request a drain (cordon + drains/<host> in one
// transaction), escalate or cancel one, and follow its progress. The drain controller does the
// work; the CLI owns the node's spec and the drain's spec, never its status.
import type { Command } from 'commander';
import { drainProgress, type DrainProgress } from '../../app/controllers.js';
import { cancelDrain, requestDrain } from '../../app/drains.js';
import { keys } from '../../api/keys.js';
import type { NodeDrain } from '../../api/types.js';
import { formatDuration } from '../../api/units.js';
import { logger } from '../../observability/log.js';
import { Informer } from '../../store/informer.js';
import type { Store, Versioned } from '../../store/store.js';
import { action, CliError, connect, durationFlag, EXIT_INVALID, parseOutput, timingsOf, withStore } from '../common.js';
import { age, printObjects, printTable } from '../../app/output.js';
import { readKey, unreadableRefusal } from '../../app/read.js';

/**
 * Follows drains/<host> until it completes, is removed, aborts or disappears, printing each line
 * that changed; resolves to the exit code (0 completed/removed, 1 aborted or cancelled).
 */
export async function followDrain(store: Store, host: string, out: NodeJS.WritableStream, err: NodeJS.WritableStream, hintAfterMs = 10_000): Promise<number> {
  const inf = new Informer<NodeDrain>(store, keys.drains(), { kind: 'NodeDrain', log: logger('drain-wait') });
  await inf.start();
  try {
    return await new Promise<number>((resolve) => {
      const printed = new Map<string, string>();
      const hint = setTimeout(() => {
        if (!inf.items.get(keys.drain(host))?.value.status)
          err.write(`waiting for the drain controller to pick up drain/${host} (is \`jaco controller drain\` or \`jaco controller all\` running?)\n`);
      }, hintAfterMs);
      const check = (): void => {
        const p: DrainProgress = drainProgress(inf.items.get(keys.drain(host))?.value);
        for (const l of p.lines) {
          if (printed.get(l.key) === l.text) continue;
          printed.set(l.key, l.text);
          out.write(`${l.text}\n`);
        }
        if (p.exitCode === undefined) return;
        out.write(`${p.verdict}\n`);
        clearTimeout(hint);
        inf.removeListener('change', check);
        resolve(p.exitCode);
      };
      inf.on('change', check);
      check();
    });
  } finally {
    await inf.stop();
  }
}

function statusTable(d: Versioned<NodeDrain>, now: number): void {
  const v = d.value;
  const s = v.status;
  process.stdout.write(
    `Node:       ${v.spec.node}\nState:      ${s?.state ?? 'pending'}${s?.reason ? ` (${s.reason})` : ''}\nRequested:  ${v.spec.requestedAt} (${age(v.spec.requestedAt, now)} ago)\n` +
      `Timeout:    ${v.spec.timeout} per replica\nForce:      ${v.spec.force}\nRemove:     ${v.spec.remove}\n` +
      (s?.startedAt ? `Started:    ${s.startedAt}\n` : '') +
      (s?.finishedAt ? `Finished:   ${s.finishedAt} (took ${formatDuration(Date.parse(s.finishedAt) - Date.parse(s.startedAt ?? s.finishedAt))})\n` : '') +
      '\n',
  );
  printTable(
    ['REPLICA', 'STATE', 'REASON', 'DESTINATION', 'SINCE', 'DEADLINE'],
    Object.entries(s?.replicas ?? {})
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([id, r]) => [id, r.state, r.reason, r.dst, age(r.at, now), r.deadline]),
  );
}

interface DrainFlags {
  timeout?: string;
  wait?: boolean;
  force?: boolean;
  cancel?: boolean;
}

/** The shared body of `node drain` and `node remove`. */
async function drainCommand(host: string, opts: DrainFlags, cmd: Command, remove: boolean): Promise<number | void> {
  if (opts.cancel) {
    if (opts.force || opts.timeout || opts.wait) throw new CliError('--cancel takes no other option');
    process.stdout.write(await withStore(cmd, (s) => cancelDrain(s, host)));
    return;
  }
  const timeout = opts.timeout ?? formatDuration(timingsOf(cmd).drainTimeoutMs);
  durationFlag('--timeout', timeout);
  const store = await connect(cmd);
  try {
    const r = await requestDrain(store, { host, timeout, force: !!opts.force, remove });
    process.stdout.write(r.message);
    if (opts.wait) return await followDrain(store, host, process.stdout, process.stderr);
  } catch (e) {
    throw store.unreachable(e);
  } finally {
    store.close();
  }
}

const DRAIN_HELP = `
What happens: the node is cordoned (no new placements) and drains/<host> is created, in one
transaction. The drain controller then, for every replica on the node:
  - placement global      dropped (the service runs one replica per node)
  - with volumes          blocked (stateful_replica) and waits; with --force stopped on the node
                          (reason node_drained): the data stays there, it is not placed elsewhere,
                          and it starts again when the node is uncordoned
  - any other             moved make-before-break to a node the scheduler's placement picks: the
                          new copy starts, the old one keeps running until the new one is running
                          and healthy. At most update.maxUnavailable (default 1; a count or a
                          percentage) replicas of a service are moving or down at once (drain and
                          rebalancer together).
A replica not moved within --timeout aborts the drain (drain_timeout): the old replica keeps
running and the node stays cordoned. Progress: jaco node drain-status HOST.
`;
const EXIT_HELP = `
Exit codes: 0 requested (with --wait: drained), 1 refused, invalid or (with --wait) aborted,
2 etcd unreachable.
`;

export function registerDrain(node: Command): Command {
  node
    .command('drain')
    .description('Cordon a node and move its replicas elsewhere, make-before-break')
    .argument('<host>', 'node name')
    .option('--timeout <duration>', 'per-replica move timeout (default 5m; 30s with --timings fast)')
    .option('--wait', 'follow the progress line by line; exit 0 when drained, 1 if the drain aborts')
    .option('--force', 'stop stateful replicas (with volumes) on the node instead of waiting on them; added to a drain in progress')
    .option('--cancel', 'cancel the drain in progress: moves in flight are withdrawn, the node stays cordoned')
    .addHelpText(
      'after',
      DRAIN_HELP +
        EXIT_HELP +
        '\nExamples:\n  jaco node drain node-2 --wait\n  jaco node drain node-2 --timeout 10m --force\n  jaco node drain node-2 --cancel && jaco node uncordon node-2\n',
    )
    .action(action((host: string, opts: DrainFlags, cmd: Command) => drainCommand(host, opts, cmd, false)));

  node
    .command('remove')
    .description('Drain a node, then delete it and its heartbeat from the cluster (its agent stops its containers and exits)')
    .argument('<host>', 'node name')
    .option('--timeout <duration>', 'per-replica move timeout (default 5m; 30s with --timings fast)')
    .option('--wait', 'follow the progress; exit 0 once the node is removed, 1 if the drain aborts')
    .option('--force', 'stop stateful replicas on the node instead of waiting on them (their data stays on the host)')
    .addHelpText(
      'after',
      '\nA removal is a drain with remove: true (see jaco node drain --help); on a node already draining it\n' +
        'is added to that drain. Once every replica is moved, dropped or stopped, nodes/<host> and\n' +
        'heartbeats/<host> are deleted; the node-agent then stops and removes its remaining containers and\n' +
        'exits, and refuses to start again unless given --rejoin.\n' +
        EXIT_HELP +
        '\nExamples:\n  jaco node remove node-3 --wait\n  jaco node remove node-3 --force --timeout 2m\n',
    )
    .action(action((host: string, opts: DrainFlags, cmd: Command) => drainCommand(host, opts, cmd, true)));

  node
    .command('drain-status')
    .description('Show a drain’s progress per replica, or follow it with --wait')
    .argument('<host>', 'node name')
    .option('--wait', 'follow the progress until the drain ends (exit 0 drained, 1 aborted)')
    .option('-o, --output <format>', 'yaml or json (the NodeDrain object)')
    .addHelpText('after', '\nExamples:\n  jaco node drain-status node-2\n  jaco node drain-status node-2 --wait\n  jaco node drain-status node-2 -o yaml\n')
    .action(
      action(async (host: string, opts: { wait?: boolean; output?: string }, cmd: Command) => {
        const format = parseOutput(opts.output, ['table', 'yaml', 'json']);
        const store = await connect(cmd);
        try {
          const { value: d, unreadable } = await readKey<NodeDrain>(store, keys.drain(host), 'NodeDrain');
          if (unreadable) throw new CliError(`${unreadableRefusal(unreadable, `show the drain of node "${host}"`)} (jaco node drain ${host} --cancel deletes it)`);
          if (!d) throw new CliError(`no drain of node "${host}"`, EXIT_INVALID);
          if (opts.wait) return await followDrain(store, host, process.stdout, process.stderr);
          if (format === 'table') statusTable(d, Date.now());
          else printObjects(format, [d.value], true);
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          store.close();
        }
      }),
    );
  return node;
}
