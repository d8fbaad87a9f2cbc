// The `jaco` command: global options, then one subcommand per verb (src/cli/commands/).
import { Command, CommanderError } from 'commander';
import { DEFAULT_ENDPOINTS, DEFAULT_PREFIX } from '../store/defaults.js';
import { VERSION } from '../version.js';
import { registerCommands } from './commands/index.js';
import { EXIT_INVALID } from '../app/exit-codes.js';

/** The jaco program with the commands `args` (argv after `node jaco`) needs: see registerCommands. */
export async function buildProgram(args: readonly string[] = []): Promise<Command> {
  const program = new Command('jaco')
    .description('jaco: a container orchestrator for clusters of a handful to a few dozen hosts')
    .version(VERSION, '--version')
    .option('--endpoints <urls>', `etcd endpoints, comma-separated (env JACO_ENDPOINTS, default ${DEFAULT_ENDPOINTS})`)
    .option('--prefix <prefix>', `key prefix in etcd (env JACO_PREFIX, default ${DEFAULT_PREFIX})`)
    .option('--user <name[:password]>', 'etcd user, as etcdctl --user (env JACO_ETCD_USER; password also from JACO_ETCD_PASSWORD)')
    .option('--cacert <file>', 'CA bundle of the etcd servers, for https:// endpoints (env JACO_ETCD_CACERT)')
    .option('--cert <file>', 'client certificate for etcd (env JACO_ETCD_CERT)')
    .option('--key <file>', 'client key for etcd (env JACO_ETCD_KEY)')
    .option('--timings <name>', 'production (default) or fast: intervals scaled down for tests and demos, NOT for production (env JACO_TIMINGS)')
    .addHelpText('after', '\nEnvironment:\n  JACO_READ_CACHE   where reads are kept between commands (default ~/.cache/jaco/reads; off: none kept)\n')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  await registerCommands(program, args);
  for (const c of program.commands) c.exitOverride();
  return program;
}

/**
 * A reader that goes away (`| head`, `| grep -q`, a closed pager) ends the command quietly, as
 * kubectl does, on every output path: no EPIPE stack trace.
 */
function quietOnClosedPipe(): void {
  for (const stream of [process.stdout, process.stderr])
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
      throw e;
    });
}

export async function main(argv: string[]): Promise<void> {
  quietOnClosedPipe();
  const program = await buildProgram(argv.slice(2));
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // --help and --version exit 0; usage errors exit 1 (invalid input or usage).
      process.exitCode = e.exitCode === 0 ? 0 : EXIT_INVALID;
      return;
    }
    throw e;
  }
}
