// jaco version
import type { Command } from 'commander';
import { VERSION } from '../../version.js';

export function registerVersion(program: Command): void {
  program
    .command('version')
    .description('Print the jaco version and the Node.js it runs on')
    .action(() => {
      process.stdout.write(`jaco ${VERSION} (node ${process.version})\n`);
    });
}
