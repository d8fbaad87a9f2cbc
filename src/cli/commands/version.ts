// jaco version
import { Option, type Command } from 'commander';
import { buildCommit, VERSION } from '../../version.js';

export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('Print the jaco version, the commit it was built from and the Node.js it runs on')
    .addOption(new Option('-o, --output <format>', 'json: one object').choices(['json']))
    .action((opts: { output?: 'json' }) => {
      const v = { version: VERSION, commit: buildCommit(), node: process.version };
      process.stdout.write(opts.output === 'json' ? `${JSON.stringify(v)}\n` : `jaco ${v.version} (commit ${v.commit}, node ${v.node})\n`);
    });
}
