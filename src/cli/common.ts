// What every jaco command shares: global options, connecting to etcd, and the exit codes
// (0 success, 1 invalid input or usage or a failed operation, 2 etcd unreachable).
import type { Command } from 'commander';
import { ManifestError } from '../api/manifest-error.js';
import { EtcdUnreachableError } from '../store/errors.js';
import { Store, StoreConfigError, storeOptionsFrom, type ConnectionFlags, type StoreOptions } from '../store/store.js';
import { durationMs } from '../api/units.js';
import { timingsByName, type Timings } from '../timings.js';
import { localClusterDefaults } from '../supervise/local-credentials.js';

export { EXIT_INVALID, EXIT_OK, EXIT_UNREACHABLE } from '../app/exit-codes.js';
import { EXIT_INVALID, EXIT_UNREACHABLE } from '../app/exit-codes.js';
import { CliError } from '../app/errors.js';

export { CliError };

export interface GlobalOptions extends ConnectionFlags {
  timings?: string;
}


export function globals(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals<GlobalOptions>();
}

export function timingsOf(cmd: Command): Timings {
  return timingsByName(globals(cmd).timings);
}

/** A store from the global connection flags and the environment (no check that etcd answers). */
export function storeOf(cmd: Command, extra: Pick<StoreOptions, 'flowControlWindowBytes'> = {}): Store {
  try {
    const g = globals(cmd);
    const env = process.env;
    const opts = storeOptionsFrom(g);
    const given = { endpoints: !!(g.endpoints ?? env.JACO_ENDPOINTS), tls: !!(g.cacert ?? g.cert ?? g.key ?? env.JACO_ETCD_CACERT ?? env.JACO_ETCD_CERT ?? env.JACO_ETCD_KEY), user: !!(g.user ?? env.JACO_ETCD_USER) };
    return new Store({ ...opts, ...localClusterDefaults(process.cwd(), given, opts.endpoints), ...extra });
  } catch (e) {
    if (e instanceof StoreConfigError) throw new CliError(e.message);
    throw e;
  }
}

/** Connects and checks etcd answers (exit 2 with the endpoint and what to check if not). */
export async function connect(cmd: Command): Promise<Store> {
  const store = storeOf(cmd);
  try {
    await store.ping();
  } catch (e) {
    store.close();
    throw e;
  }
  return store;
}

/** Runs a command body with a store, closing it afterwards. */
export async function withStore<T>(cmd: Command, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await connect(cmd);
  try {
    return await fn(store);
  } catch (e) {
    throw store.unreachable(e);
  } finally {
    store.close();
  }
}

export function exitCodeOf(e: unknown): number {
  if (e instanceof EtcdUnreachableError) return EXIT_UNREACHABLE;
  if (e instanceof CliError) return e.exitCode;
  return EXIT_INVALID;
}

export function reportError(e: unknown): number {
  const err = e as Error;
  if (e instanceof ManifestError) process.stderr.write(`error: invalid manifest (nothing was written):\n${err.message}\n`);
  else process.stderr.write(`error: ${err?.message ?? String(e)}\n`);
  if (process.env.JACO_DEBUG && err?.stack) process.stderr.write(`${err.stack}\n`);
  return exitCodeOf(e);
}

/** Wraps an async action so errors become a message and an exit code. */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void | number>): (...args: A) => Promise<void> {
  return async (...args: A) => {
    try {
      const code = await fn(...args);
      if (typeof code === 'number') process.exitCode = code;
    } catch (e) {
      process.exitCode = reportError(e);
      // A long-running command that failed while starting may hold a server or a watch open: it
      // still ends (a supervisor then restarts it) rather than hang half-started.
      setTimeout(() => process.exit(), 2000).unref();
    }
  };
}

/** kubectl's ways of writing a deployment's kind before its name: deployment/hello, as jaco itself prints objects. */
const DEPLOYMENT_KIND = /^(?:deployments?|deploy)\//;

/**
 * A deployment named on the command line (or DEPLOYMENT/SERVICE, or a replica), with kubectl's
 * `deployment/` before it taken off: what `jaco apply` printed (`deployment/hello configured`) can
 * be typed back. Deployment names hold no slash, so a deployment named "deployment" is still
 * `deployment/deployment`.
 */
export function deploymentArg(v: string): string {
  return v.replace(DEPLOYMENT_KIND, '');
}

/** kubectl's TYPE/NAME in one argument (`get deployment/hello`, `describe service/hello/web`): the type and the name apart. */
export function typeSlashName(type: string, name: string | undefined): { type: string; name: string | undefined } {
  const slash = type.indexOf('/');
  if (slash < 0) return { type, name };
  if (name !== undefined) throw new CliError(`name the object once: ${type}, or ${type.slice(0, slash)} ${name}`);
  return { type: type.slice(0, slash), name: type.slice(slash + 1) || undefined };
}

export function parseOutput(o: string | undefined, allowed: string[]): string {
  const v = o ?? 'table';
  if (!allowed.includes(v)) throw new CliError(`unknown output format ${JSON.stringify(v)}; use ${allowed.filter((x) => x !== 'table').join(', ')}`);
  return v;
}

/**
 * A duration flag's value in ms (500ms, 30s, 5m, 1h30m). `zero` says what 0 means where it is
 * taken (a bare 0 too, as the help writes it: "--wait 0"); without it the value must be more than
 * 0. Every command's duration flag refuses alike: `invalid --flag "v": use a duration such as …`.
 */
export function durationFlag(flag: string, v: string, opts: { zero?: string } = {}): number {
  const wanted = `use a duration such as 500ms, 30s, 5m or 1h${opts.zero ? `, or 0 ${opts.zero}` : ''}`;
  if (opts.zero && v.trim() === '0') return 0;
  let ms: number;
  try {
    ms = durationMs(v);
  } catch {
    throw new CliError(`invalid ${flag} ${JSON.stringify(v)}: ${wanted}`);
  }
  if (ms <= 0 && !opts.zero) throw new CliError(`invalid ${flag} ${JSON.stringify(v)}: must be more than 0`);
  return ms;
}
