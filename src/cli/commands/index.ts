// Every `jaco` subcommand, in the order `jaco --help` lists them. Each module is imported only
// when its command runs (or for help): a CLI process that loads one command's dependencies
// instead of all of them starts in half the time (the etcd client, Docker's, the compose loader
// and the controllers are each a few dozen milliseconds to load).
import type { Command } from 'commander';

type Register = (program: Command) => unknown;

/** The top-level commands each module registers, and how to load its register function. */
export const COMMAND_MODULES: readonly { names: readonly string[]; load: () => Promise<Register> }[] = [
  { names: ['apply', 'delete', 'diff', 'convert'], load: async () => (await import('./apply.js')).registerApply },
  { names: ['rollout', 'rollback'], load: async () => (await import('./rollout.js')).registerRollout },
  { names: ['scale'], load: async () => (await import('./scale.js')).registerScale },
  { names: ['status'], load: async () => (await import('./status.js')).registerStatus },
  { names: ['get', 'describe'], load: async () => (await import('./get.js')).registerGet },
  { names: ['top'], load: async () => (await import('./top.js')).registerTop },
  { names: ['logs'], load: async () => (await import('./logs.js')).registerLogs },
  { names: ['exec'], load: async () => (await import('./exec.js')).registerExec },
  { names: ['explain'], load: async () => (await import('./explain.js')).registerExplain },
  { names: ['secret', 'config'], load: async () => (await import('./secret.js')).registerSecrets },
  {
    names: ['node'],
    load: async () => {
      const [{ registerNode }, { registerDrain }] = await Promise.all([import('./node.js'), import('./drain.js')]);
      return (program) => registerDrain(registerNode(program));
    },
  },
  { names: ['rebalance'], load: async () => (await import('./rebalance.js')).registerRebalance },
  { names: ['audit'], load: async () => (await import('./audit.js')).registerAudit },
  { names: ['backup'], load: async () => (await import('./backup.js')).registerBackup },
  { names: ['registry'], load: async () => (await import('./registry.js')).registerRegistry },
  { names: ['etcd'], load: async () => (await import('./etcd.js')).registerEtcd },
  { names: ['cert'], load: async () => (await import('./cert.js')).registerCert },
  { names: ['dashboard'], load: async () => (await import('./dashboard.js')).registerDashboard },
  { names: ['up', 'down'], load: async () => (await import('./up.js')).registerUp },
  { names: ['controller'], load: async () => (await import('./controller.js')).registerController },
  { names: ['agent'], load: async () => (await import('./agent.js')).registerAgent },
  { names: ['hollow-nodes'], load: async () => (await import('./hollow-nodes.js')).registerHollowNodes },
  { names: ['ingress'], load: async () => (await import('./ingress.js')).registerIngress },
  { names: ['version'], load: async () => (await import('./version.js')).registerVersion },
];

/** The global options that take a value (`--prefix P get …`): what to step over to find the command. */
const VALUED_GLOBALS = new Set(['--endpoints', '--prefix', '--user', '--cacert', '--cert', '--key', '--timings']);

/**
 * The command an argument list (after `node jaco`) names, or undefined when it names none
 * jaco knows (`--help`, `help`, a typo): then every command is registered, for the help text or
 * commander's "did you mean".
 */
export function commandNamed(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (VALUED_GLOBALS.has(a)) i++;
    else if (a.startsWith('--') && a.includes('=') && VALUED_GLOBALS.has(a.slice(0, a.indexOf('=')))) continue;
    else if (a.startsWith('-')) return undefined;
    else return COMMAND_MODULES.some((m) => m.names.includes(a)) ? a : undefined;
  }
  return undefined;
}

/** Registers the command `args` names, or every command when it names none. */
export async function registerCommands(program: Command, args: readonly string[]): Promise<void> {
  const name = commandNamed(args);
  const modules = name === undefined ? COMMAND_MODULES : COMMAND_MODULES.filter((m) => m.names.includes(name));
  for (const register of await Promise.all(modules.map((m) => m.load()))) register(program);
}
