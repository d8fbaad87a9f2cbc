// jaco logs DEPLOYMENT[/SERVICE] | REPLICA: every replica's output, merged across nodes with a
// replica prefix, read from the agent of each node over mutual TLS (never through etcd). With -f
// it follows: which replicas exist and where comes from the store (a watch of desired/ and
// observed/), so replicas that start later, replaced containers and moved replicas join as they
// appear; only the log bytes come from the agents.
import { Writable } from 'node:stream';
import type { Command } from 'commander';
import { keys } from '../../api/keys.js';
import type { Deployment, Node, ReplicaDesired, ReplicaObserved } from '../../api/types.js';
import { logger } from '../../observability/log.js';
import { Cache } from '../../runtime/cache.js';
import { demuxStream } from '../../dockerode.js';
import type { Store } from '../../store/store.js';
import { untilSignal } from '../../supervise/process.js';
import { AgentClient, agentTarget, clientTls, TLS_DIR_HELP } from '../agent-client.js';
import { action, CliError, connect, deploymentArg } from '../common.js';
import { PREVIOUS_LINES } from '../../app/controllers.js';
import { formatLine, LineSplitter, logSources, mergeByTime, parseLogTarget, parseSince, parseTail, sourcePrefix, splitTimestamp, timeKey, trimLines, type LogLine, type LogSource, type LogTarget } from '../logs.js';

interface LogsFlags {
  follow?: boolean;
  since?: string;
  tail?: string;
  timestamps?: boolean;
  previous?: boolean;
  prefix?: boolean;
  tlsDir?: string;
}

const HELP = `
Examples:
  jaco logs shop                     # every replica of every service, merged in time order
  jaco logs shop/web -f --since 10m  # follow: replicas that start later and moved ones join
  jaco logs shop-web-2 --tail 100 --timestamps

Each line is prefixed with its replica and node (<replica>@<node> | …) unless one replica is named
(--prefix forces it). Lines of different replicas are merged in time order (Docker's timestamp of
each line), each replica's in its own order. stdout and stderr stay apart. The bytes come from each
node's agent over mutual TLS with the operator's certificate (docs/operate.md): a node that cannot
be reached is named, and the others are still shown.
`;

/** One copy's log being read. */
interface Reading {
  source: LogSource;
  lines: LogLine[];
}

/**
 * Reads one copy's log: lines go to `onLine` as they are cut (stdout and stderr apart); resolves
 * when the agent's stream ends (the container stopped, or a one-shot read is whole).
 */
async function readLog(client: AgentClient, node: Node | undefined, s: LogSource, q: URLSearchParams, onLine: (l: LogLine) => void, opened?: (close: () => void) => void): Promise<void> {
  const t = agentTarget(node, s.node);
  const res = await client.call(t, 'GET', `/v1/replicas/${encodeURIComponent(s.replica)}/logs?${q}`);
  opened?.(() => res.destroy());
  const sink = (stream: LogLine['stream']) => {
    const split = new LineSplitter();
    return new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of split.push(chunk)) onLine(splitTimestamp(l, stream));
        cb();
      },
      final(cb) {
        for (const l of split.end()) onLine(splitTimestamp(l, stream));
        cb();
      },
    });
  };
  const out = sink('stdout');
  const err = sink('stderr');
  await new Promise<void>((resolve, reject) => {
    res.on('error', reject);
    res.on('end', resolve);
    res.on('close', resolve);
    if (res.headers['x-jaco-tty'] === '1') res.on('data', (c: Buffer) => out.write(c));
    else demuxStream(res, out, err);
  });
  await Promise.all([new Promise<void>((r) => out.end(r)), new Promise<void>((r) => err.end(r))]);
}

function query(p: { since?: number; tail?: number; follow?: boolean; container?: string }): URLSearchParams {
  const q = new URLSearchParams();
  if (p.follow) q.set('follow', '1');
  if (p.since !== undefined) q.set('since', p.since.toFixed(3));
  if (p.tail !== undefined) q.set('tail', String(p.tail));
  if (p.container) q.set('container', p.container);
  return q;
}

function write(line: LogLine, s: LogSource, opts: { prefixed: boolean; width: number; timestamps: boolean }): void {
  const text = formatLine(line, { ...(opts.prefixed ? { prefix: sourcePrefix(s), width: opts.width } : {}), timestamps: opts.timestamps });
  (line.stream === 'stderr' ? process.stderr : process.stdout).write(text);
}

function targetOf(cache: Cache, arg: string): LogTarget {
  const deployments = new Set([...cache.kind<Deployment>('deployments').items.values()].map((v) => v.value.metadata.name));
  const t = parseLogTarget(arg, deployments);
  if (t.kind === 'deployment') {
    const d = [...cache.kind<Deployment>('deployments').items.values()].find((v) => v.value.metadata.name === t.deployment)?.value;
    if (!d) throw new CliError(`deployment "${t.deployment}" not found`);
    if (t.service && !d.spec.services[t.service]) throw new CliError(`deployment "${t.deployment}" has no service "${t.service}"`);
  }
  return t;
}

function sourcesOf(cache: Cache, t: LogTarget): LogSource[] {
  const observed = new Map([...cache.kind<ReplicaObserved>('observed').items].map(([k, v]) => [k.slice(keys.observedOf().length), v.value]));
  return logSources(t, [...cache.kind<ReplicaDesired>('desired').items.values()].map((v) => v.value), observed);
}

const nodeOf = (cache: Cache, name: string) => cache.kind<Node>('nodes').items.get(keys.node(name))?.value;

const SOURCES = ['deployments', 'desired', 'observed', 'nodes'] as const;

/** One read of every copy, merged in time order; a node that fails is reported after the rest. */
async function logsOnce(store: Store, client: AgentClient, arg: string, f: LogsFlags, since: number | undefined, tail: number | undefined): Promise<number> {
  const cache = await Cache.read(store, SOURCES, logger('logs'));
  const t = targetOf(cache, arg);
  const sources = sourcesOf(cache, t);
  if (!sources.length) throw new CliError(t.kind === 'replica' ? `replica "${t.replica}" not found (nor a deployment of that name)` : `no replicas of ${arg}`);
  const prefixed = f.prefix ?? t.kind === 'deployment';
  const width = Math.max(...sources.map((s) => sourcePrefix(s).length));
  const failures: string[] = [];
  const readings = await Promise.all(
    sources.map(async (source): Promise<Reading> => {
      const lines: LogLine[] = [];
      try {
        // --previous: the lines the agent kept of the replaced container, trimmed here.
        const q = f.previous ? new URLSearchParams({ previous: '1' }) : query({ since, tail });
        await readLog(client, nodeOf(cache, source.node), source, q, (l) => lines.push(l));
      } catch (e) {
        failures.push(`${sourcePrefix(source)}: ${(e as Error).message}`);
      }
      return { source, lines: f.previous ? trimLines(lines, since, tail) : lines };
    }),
  );
  for (const { source, line } of mergeByTime(readings)) write(line, source.source, { prefixed, width, timestamps: !!f.timestamps });
  for (const m of failures) process.stderr.write(`error: ${m}\n`);
  return failures.length ? 1 : 0;
}

/**
 * Follows every copy the target names, as the store says they come and go: a stream per container
 * (a replaced container is a new stream, read from its start); a stream that fails is tried again
 * from its last line's time, skipping what was shown.
 */
async function follow(store: Store, client: AgentClient, arg: string, f: LogsFlags, since: number | undefined, tail: number | undefined): Promise<number> {
  const log = logger('logs');
  const cache = Cache.onStore(store, SOURCES, { log });
  await cache.start();
  const t = targetOf(cache, arg);
  // A deployment may have no replica yet (they join as they start); a replica must exist.
  if (t.kind === 'replica' && !sourcesOf(cache, t).length) {
    await cache.stop();
    throw new CliError(`replica "${t.replica}" not found (nor a deployment of that name)`);
  }
  const prefixed = f.prefix ?? t.kind === 'deployment';
  const streams = new Map<string, { close?: () => void; last?: string; failedAt?: number; done?: boolean }>();
  let width = 0;
  const open = (s: LogSource, first: boolean) => {
    const key = `${s.node}/${s.replica}/${s.container}`;
    const st = streams.get(key) ?? {};
    streams.set(key, st);
    // A container first seen after the start is read whole; one already running honours --since/--tail.
    const q = st.last ? query({ follow: true, since: Number(Date.parse(st.last) / 1000) - 0.001, container: s.container }) : query({ follow: true, container: s.container, ...(first ? { since, tail } : {}) });
    const skipUpTo = st.last ? timeKey(st.last) : undefined;
    readLog(
      client,
      nodeOf(cache, s.node),
      s,
      q,
      (l) => {
        if (skipUpTo && l.time && timeKey(l.time) <= skipUpTo) return;
        if (l.time) st.last = l.time;
        write(l, s, { prefixed, width, timestamps: !!f.timestamps });
      },
      (close) => (st.close = close),
    ).then(
      () => (st.done = true),
      (e: Error) => {
        st.failedAt = Date.now();
        st.close = undefined;
        process.stderr.write(`warning: ${sourcePrefix(s)}: ${e.message}; trying again\n`);
      },
    );
  };
  let first = true;
  const sync = () => {
    const sources = sourcesOf(cache, t).filter((s) => s.container);
    width = Math.max(width, ...sources.map((s) => sourcePrefix(s).length));
    for (const s of sources) {
      const st = streams.get(`${s.node}/${s.replica}/${s.container}`);
      if (!st) open(s, first);
      else if (st.failedAt && !st.done && Date.now() - st.failedAt > 2000) {
        st.failedAt = undefined;
        open(s, first);
      }
    }
    first = false;
  };
  sync();
  cache.on('changed', sync);
  const retry = setInterval(sync, 1000);
  await untilSignal();
  clearInterval(retry);
  for (const st of streams.values()) st.close?.();
  await cache.stop();
  return 0;
}

export function registerLogs(program: Command): void {
  program
    .command('logs')
    .description("Print (and follow) the output of a deployment's, a service's or one replica's containers, merged across nodes with a replica prefix")
    .argument('<target>', 'DEPLOYMENT, DEPLOYMENT/SERVICE or REPLICA', deploymentArg)
    .option('-f, --follow', 'keep printing: new lines, replicas that start later, replaced and moved containers (Ctrl-C ends)')
    .option('--since <when>', 'only lines since a duration ago (10m, 1h30m) or an RFC 3339 time')
    .option('--tail <n>', 'only the last n lines of each replica (all: every line)')
    .option('--timestamps', "show each line's time (Docker's, RFC 3339)")
    .option('--previous', `the last ${PREVIOUS_LINES} lines of each replica's previous container (the one its last restart or replacement removed), kept by its agent in its state directory`)
    .option('--prefix', 'prefix lines with <replica>@<node> also when one replica is named')
    .option('--no-prefix', 'no prefix, also for a deployment')
    .option('--tls-dir <dir>', TLS_DIR_HELP)
    .addHelpText('after', HELP)
    .action(
      action(async (arg: string, f: LogsFlags, cmd: Command) => {
        const since = f.since !== undefined ? parseSince(f.since, Date.now()) : undefined;
        const tail = parseTail(f.tail);
        if (f.previous && f.follow) throw new CliError('--previous cannot be followed: the previous container has stopped');
        const client = new AgentClient(clientTls(f.tlsDir));
        const store = await connect(cmd);
        try {
          return await (f.follow ? follow : logsOnce)(store, client, arg, f, since, tail);
        } catch (e) {
          throw store.unreachable(e);
        } finally {
          client.close();
          store.close();
        }
      }),
    );
}
