// jaco apply / delete / diff: declarative deployment management from manifests.
import type { Command } from 'commander';
import { yamlDiff } from '../../api/change.js';
import { keys } from '../../api/keys.js';
import { parseManifests, readSources } from '../../api/manifest.js';
import type { Deployment } from '../../api/types.js';
import { applyDeployments, deleteDeployments, type ApplyItem } from '../apply.js';
import { action, CliError, withStore } from '../common.js';

function manifestItems(files: string[]): ApplyItem[] {
  if (!files?.length) throw new CliError('no manifest given: use -f FILE, -f DIR or -f - (stdin)');
  return parseManifests(readSources(files), { kinds: ['Deployment'] }).map(({ object, file, document }) => {
    const d = object as Deployment;
    return { name: d.metadata.name, spec: d.spec, labels: d.metadata.labels, annotations: d.metadata.annotations, cause: 'apply', source: `${file} document ${document}` };
  });
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

export function registerApply(program: Command): void {
  program
    .command('apply')
    .description('Create or update deployments from manifests (all-or-nothing: on any error nothing is written)')
    .requiredOption('-f, --filename <path>', 'manifest file, directory of *.yaml files, or - for stdin (repeatable)', collect)
    .option('--dry-run', 'validate and show what would change, write nothing')
    .addHelpText('after', '\nExamples:\n  jaco apply -f examples/hello.yaml\n  cat app.yaml | jaco apply -f -\n')
    .action(
      action(async (opts: { filename: string[]; dryRun?: boolean }, cmd: Command) => {
        const items = manifestItems(opts.filename);
        const outcomes = await withStore(cmd, (store) => applyDeployments(store, items, { dryRun: opts.dryRun }));
        for (const o of outcomes) {
          const rev = o.result === 'unchanged' ? '' : ` (revision ${o.revision}${o.summary ? `: ${o.summary}` : ''})`;
          process.stdout.write(`deployment/${o.name} ${o.result}${opts.dryRun ? ' (dry run)' : ''}${rev}\n`);
        }
      }),
    );

  program
    .command('delete')
    .description('Delete deployments named in manifests, or by name; their replicas are stopped by the scheduler')
    .argument('[type]', 'deployment')
    .argument('[names...]', 'deployment names')
    .option('-f, --filename <path>', 'manifest file, directory, or - (repeatable)', collect)
    .option('--ignore-not-found', 'succeed when a deployment does not exist')
    .addHelpText('after', '\nExamples:\n  jaco delete deployment hello\n  jaco delete -f examples/hello.yaml\n')
    .action(
      action(async (type: string | undefined, names: string[], opts: { filename?: string[]; ignoreNotFound?: boolean }, cmd: Command) => {
        let targets: string[];
        if (opts.filename?.length) targets = manifestItems(opts.filename).map((i) => i.name);
        else {
          if (!type || !['deployment', 'deployments', 'deploy'].includes(type)) throw new CliError('usage: jaco delete deployment NAME… | jaco delete -f FILE');
          if (!names.length) throw new CliError('name at least one deployment to delete');
          targets = names;
        }
        const deleted = await withStore(cmd, (store) => deleteDeployments(store, targets, { ignoreMissing: opts.ignoreNotFound }));
        for (const n of deleted) process.stdout.write(`deployment/${n} deleted\n`);
      }),
    );

  program
    .command('diff')
    .description('Show what apply would change, as a unified diff of the live and manifest specs (exit 1 when they differ)')
    .requiredOption('-f, --filename <path>', 'manifest file, directory, or - (repeatable)', collect)
    .action(
      action(async (opts: { filename: string[] }, cmd: Command) => {
        const items = manifestItems(opts.filename);
        let differs = false;
        await withStore(cmd, async (store) => {
          for (const item of items) {
            const live = (await store.get<Deployment>(keys.deployment(item.name)))?.value;
            const d = yamlDiff(`deployment/${item.name}`, live?.spec, item.spec);
            if (d) {
              differs = true;
              process.stdout.write(d);
            }
          }
        });
        return differs ? 1 : 0;
      }),
    );
}
